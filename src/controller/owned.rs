//! The owned-resource controllers' wiring (`crate::owned`), one per kind set.

use std::sync::Arc;

use futures::{StreamExt, stream};
use kube::ResourceExt;
use kube::api::PartialObjectMeta;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::{DeploymentChanges, error_policy, leadership_won, queued};
use crate::api::{
    KindSet, LABEL_DEPLOYMENT_NAME, TemporalWorkerDeployment, TemporalWorkerOwnedResource,
};
use crate::caches::reflect::{Watched, api_in_set};
use crate::metrics::ControllerKind;

/// The owned-resource controller (`crate::owned`) of one kind set: a change of a template, of
/// the worker deployment it names or of that worker's versioned Deployments looks at the
/// template again.
pub(super) fn build_owned_controller(
    client: kube::Client,
    scopes: Vec<Option<String>>,
    set: KindSet,
    (store, _, twors): Watched<TemporalWorkerOwnedResource>,
    deployments: DeploymentChanges,
    ctx: Arc<crate::owned::OwnedContext>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> {
    let twds = stream::select_all(scopes.iter().map(|scope| {
        watcher(
            api_in_set::<PartialObjectMeta<TemporalWorkerDeployment>>(&client, scope, set),
            watcher::Config::default(),
        )
        .touched_objects()
        .boxed()
    }));
    let by_deployment = store.clone();
    let by_twd = store.clone();
    let templates = deployments.flat_map(move |d| {
        let worker = d.labels().get(LABEL_DEPLOYMENT_NAME).cloned();
        stream::iter(referring(&by_deployment, set, d.namespace(), |twd| {
            worker.as_deref() == Some(crate::render::label_value(twd).as_str())
        }))
    });
    let queue = ctx
        .services
        .metrics
        .queues
        .of(ControllerKind::OwnedResource);
    let won = queued::all_of(
        queue.clone(),
        store.clone(),
        set,
        leadership_won(ctx.services.leader.clone()),
    );
    let of_twd = move |t: PartialObjectMeta<TemporalWorkerDeployment>| {
        let name = t.name_any();
        referring(&by_twd, set, t.namespace(), |twd| twd == name)
    };
    let reconcile = queued::tracked(queue.clone(), set, crate::owned::reconcile);
    Controller::for_stream_with(queued::objects(queue.clone(), set, twors), store, set)
        .reconcile_on(queued::refs(queue.clone(), templates))
        .watches_stream_with(twds, queued::mapper(queue.clone(), of_twd), set)
        .reconcile_all_on(won)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(move |res| {
            queued::settle(&queue, &res);
            async {}
        })
}

/// Templates in `ns` whose worker name satisfies `names`.
fn referring(
    store: &Store<TemporalWorkerOwnedResource>,
    set: KindSet,
    ns: Option<String>,
    names: impl Fn(&str) -> bool,
) -> Vec<ObjectRef<TemporalWorkerOwnedResource>> {
    store
        .state()
        .into_iter()
        .filter(|t| t.namespace() == ns && names(t.spec.worker_name()))
        .map(|t| ObjectRef::from_obj_with(&*t, set))
        .collect()
}
