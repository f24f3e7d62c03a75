//! Observe stage of the owned-resource reconciler: the worker's live versioned Deployments,
//! the worker itself, and, for objects that ask for it, each live version's task queue.
//! Read-only.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Resource;
use kube::api::{Api, ListParams};

use crate::api::{LABEL_DEPLOYMENT_NAME, TemporalWorkerDeployment, TemporalWorkerOwnedResource};
use crate::caches::Caches;
use crate::owned::context::OwnedContext;
use crate::owned::outcome::OwnedFailure;
use crate::owned::versions::{build_of, retiring};
use crate::owned::{render, task_queue};
use crate::workers::Workers;

/// What one pass over a TWOR reads.
pub struct Observed {
    pub namespace: String,
    /// The worker's versioned Deployments that are not being deleted, by build ID.
    pub deployments: Vec<Deployment>,
    /// `spec.workerRef`'s TemporalWorkerDeployment, if it exists (not read for a deletion).
    pub worker: Option<TemporalWorkerDeployment>,
    /// Per build ID, the task queue of each version that gets a copy, when `spec.object` asks
    /// for it: `Ok(None)` while Temporal does not know it yet, `Err` with the message for the
    /// version's status.
    pub task_queues: BTreeMap<String, Result<Option<String>, String>>,
    pub now: Timestamp,
}

/// `valid`: `spec.object` passed the rules; only then are task queues looked up (a refused
/// object renders nothing).
pub async fn observe(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    namespace: String,
    valid: bool,
) -> Result<Observed, OwnedFailure> {
    let worker_name = twor.spec.worker_name();
    let cached = cached(ctx).await;
    let deployments = live_deployments(
        &ctx.services.client,
        cached.map(|c| c.0),
        &namespace,
        worker_name,
    )
    .await
    .map_err(OwnedFailure::DeploymentsUnreadable)?;
    let mut observed = Observed {
        namespace,
        deployments,
        worker: None,
        task_queues: BTreeMap::new(),
        now: Timestamp::now(),
    };
    if twor.meta().deletion_timestamp.is_some() {
        return Ok(observed);
    }
    // A WorkerResourceTemplate names a WorkerDeployment, a TemporalWorkerOwnedResource a
    // TemporalWorkerDeployment.
    let known = cached
        .and_then(|(_, workers)| workers.get(twor.kind_set(), &observed.namespace, worker_name));
    observed.worker = match known {
        Some(twd) => Some((*twd).clone()),
        // Not cached (yet, or at all): the API server decides whether it exists.
        None => {
            let twds = TemporalWorkerDeployment::api(
                ctx.services.client.clone(),
                &observed.namespace,
                twor.kind_set(),
            );
            twds.get_opt(worker_name)
                .await
                .map_err(|source| OwnedFailure::WorkerUnreadable {
                    name: worker_name.to_string(),
                    source,
                })?
                .map(|t| t.stamped(twor.kind_set()))
        }
    };
    if let Some(twd) = &observed.worker
        && valid
        && render::needs_task_queue(twor.spec.object())
    {
        for d in &observed.deployments {
            let Some(build) = build_of(d) else {
                continue;
            };
            if retiring(d, Some(twd), observed.now) {
                continue;
            }
            let queue = task_queue::lookup(ctx, twd, build).await;
            observed.task_queues.insert(build.to_string(), queue);
        }
    }
    Ok(observed)
}

/// The caches once they have listed; `None` without caches (tests) or after they stopped.
async fn cached(ctx: &OwnedContext) -> Option<(&Caches, &Workers)> {
    let (caches, workers) = (ctx.services.caches()?, ctx.services.workers()?);
    caches.ready().await.ok()?;
    workers.wait_until_ready().await.ok()?;
    Some((caches, workers))
}

/// The worker's versioned Deployments that are not being deleted, by build ID.
async fn live_deployments(
    client: &kube::Client,
    caches: Option<&Caches>,
    ns: &str,
    worker: &str,
) -> Result<Vec<Deployment>, kube::Error> {
    let label = crate::render::label_value(worker);
    let items = match caches {
        Some(caches) => caches.deployments_of(ns, &label),
        None => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
            let selector = format!("{LABEL_DEPLOYMENT_NAME}={label}");
            api.list(&ListParams::default().labels(&selector))
                .await?
                .items
        }
    };
    let mut live: Vec<Deployment> = items
        .into_iter()
        .filter(|d| d.meta().deletion_timestamp.is_none() && build_of(d).is_some())
        .collect();
    live.sort_by(|a, b| build_of(a).cmp(&build_of(b)));
    Ok(live)
}
