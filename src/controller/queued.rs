//! Reports each controller's triggers, reconcile starts and requeues to its mirrored work queue
//! ([`crate::metrics::QueueTracker`], which says what the queue counts): wrappers around what
//! is handed to kube-runtime, so the queue sees exactly what the controller is told.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt as _, Stream, StreamExt as _};
use kube::Resource;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{ObjectRef, Store};

use crate::error::Error;
use crate::metrics::QueueTracker;

/// The reconcile function `reconcile`, reporting its start and the requeue it asks for.
pub(super) fn tracked<K, C, Fut>(
    queue: QueueTracker,
    dyntype: K::DynamicType,
    mut reconcile: impl FnMut(Arc<K>, Arc<C>) -> Fut,
) -> impl FnMut(Arc<K>, Arc<C>) -> BoxFuture<'static, Result<Action, Error>>
where
    K: Resource + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    move |obj, ctx| {
        let r = ObjectRef::from_obj_with(&*obj, dyntype.clone());
        queue.started(&r);
        let running = reconcile(obj, ctx);
        let queue = queue.clone();
        async move {
            let out = running.await;
            if let Ok(action) = &out {
                queue.ended(&r, action);
            }
            out
        }
        .boxed()
    }
}

/// The controller's own watch, each object a trigger.
pub(super) fn objects<K, E>(
    queue: QueueTracker,
    dyntype: K::DynamicType,
    stream: impl Stream<Item = Result<K, E>>,
) -> impl Stream<Item = Result<K, E>>
where
    K: Resource,
    K::DynamicType: Clone,
{
    stream.inspect(move |o| {
        if let Ok(o) = o {
            queue.triggered(&ObjectRef::from_obj_with(o, dyntype.clone()));
        }
    })
}

/// A stream of references to reconcile, each a trigger.
pub(super) fn refs<K>(
    queue: QueueTracker,
    stream: impl Stream<Item = ObjectRef<K>>,
) -> impl Stream<Item = ObjectRef<K>>
where
    K: Resource,
    K::DynamicType: Clone,
{
    stream.inspect(move |r| queue.triggered(r))
}

/// A watch mapper whose every reference is a trigger.
pub(super) fn mapper<K, O, I>(
    queue: QueueTracker,
    map: impl Fn(O) -> I + Send + Sync + 'static,
) -> impl Fn(O) -> Vec<ObjectRef<K>> + Send + Sync + 'static
where
    K: Resource,
    K::DynamicType: Clone,
    I: IntoIterator<Item = ObjectRef<K>>,
{
    move |o| {
        let refs: Vec<ObjectRef<K>> = map(o).into_iter().collect();
        refs.iter().for_each(|r| queue.triggered(r));
        refs
    }
}

/// `reconcile_all_on`'s signal: each item triggers every object of `store`.
pub(super) fn all_of<K, T>(
    queue: QueueTracker,
    store: Store<K>,
    dyntype: K::DynamicType,
    signal: impl Stream<Item = T>,
) -> impl Stream<Item = T>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    signal.inspect(move |_| {
        for o in store.state() {
            queue.triggered(&ObjectRef::from_obj_with(&*o, dyntype.clone()));
        }
    })
}

/// One result of the controller's run: a request for an object that is gone leaves the queue.
pub(super) fn settle<K, E, Q>(
    queue: &QueueTracker,
    res: &Result<(ObjectRef<K>, Action), controller::Error<E, Q>>,
) where
    K: Resource,
{
    if let Err(controller::Error::ObjectNotFound(r)) = res {
        queue.not_found(r);
    }
}
