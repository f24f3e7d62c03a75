//! kube-runtime wiring: what the controller watches, how it maps events to TWDs, the error
//! policy, and the connection janitor. One reconcile lives in [`crate::reconcile`].

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use tracing::warn;

use crate::api::{FINALIZER, LABEL_DEPLOYMENT_NAME, TemporalConnection, TemporalWorkerDeployment};
use crate::error::Error;
use crate::reconcile::act::finalizers;
use crate::reconcile::{self, Context};

/// Builds the controller. Returns its reflector store (for the status API) and a future
/// that runs it until `shutdown` resolves.
pub fn build(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> (
    Store<TemporalWorkerDeployment>,
    impl std::future::Future<Output = ()>,
) {
    let client = ctx.client.clone();
    let single_ns = match ctx.settings.watch_namespaces.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    let (twds, deployments, connections): (
        Api<TemporalWorkerDeployment>,
        Api<Deployment>,
        Api<TemporalConnection>,
    ) = match &single_ns {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client, ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client),
        ),
    };
    let controller = Controller::new(twds, watcher::Config::default());
    let store = controller.store();
    let mapper_store = store.clone();
    let fut = controller
        .owns(
            deployments,
            watcher::Config::default().labels(LABEL_DEPLOYMENT_NAME),
        )
        // A Connection change requeues every TWD that references it.
        .watches(
            connections,
            watcher::Config::default(),
            move |conn: TemporalConnection| {
                let ns = conn.namespace();
                let name = conn.name_any();
                mapper_store
                    .state()
                    .into_iter()
                    .filter(|t| {
                        t.namespace() == ns && t.spec.worker_options.connection_ref.name == name
                    })
                    .map(|t| ObjectRef::from_obj(&*t))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "reconcile stream error");
            }
        });
    (store, fut)
}

/// Only errors that prevent any reconcile (an object without a namespace) end up here; every
/// other failure is reported and counted by the report stage.
fn error_policy(twd: Arc<TemporalWorkerDeployment>, err: &Error, _ctx: Arc<Context>) -> Action {
    warn!(error = %err, name = %twd.name_any(), "reconcile failed");
    Action::await_change()
}

/// Connections whose last user is gone lose our finalizer (e.g. after a TWD switched to
/// another Connection). Runs as a tiny second controller.
pub fn build_connection_janitor(
    client: kube::Client,
    twd_store: Store<TemporalWorkerDeployment>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> {
    let api: Api<TemporalConnection> = Api::all(client.clone());
    Controller::new(api, watcher::Config::default())
        .graceful_shutdown_on(shutdown)
        .run(
            move |conn: Arc<TemporalConnection>,
                  ctx: Arc<(kube::Client, Store<TemporalWorkerDeployment>)>| async move {
                let (client, store) = &*ctx;
                let ns = conn.namespace().unwrap_or_default();
                let used = store.state().iter().any(|t| {
                    t.namespace().as_deref() == Some(ns.as_str())
                        && t.spec.worker_options.connection_ref.name == conn.name_any()
                });
                if used
                    || conn.meta().deletion_timestamp.is_none()
                    || !conn.finalizers().iter().any(|f| f == FINALIZER)
                {
                    return Ok::<_, kube::Error>(Action::requeue(Duration::from_secs(30)));
                }
                finalizers::release_unused_connection(client, &conn).await?;
                Ok(Action::await_change())
            },
            |_conn, _err, _ctx| Action::requeue(Duration::from_secs(5)),
            Arc::new((client, twd_store)),
        )
        .for_each(|_| async {})
}
