//! Observe stage of the owned-resource reconciler: the worker's live versioned Deployments,
//! the worker itself, and, for objects that ask for it, each live version's task queue.
//! Read-only.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Resource;
use kube::api::{Api, ListParams};

use crate::api::{LABEL_DEPLOYMENT_NAME, TemporalWorkerDeployment, TemporalWorkerOwnedResource};
use crate::owned::outcome::OwnedFailure;
use crate::owned::versions::{build_of, retiring};
use crate::owned::{OwnedContext, render, task_queue};

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
    let deployments = live_deployments(&ctx.client, &namespace, worker_name)
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
    let twds =
        TemporalWorkerDeployment::api(ctx.client.clone(), &observed.namespace, twor.kind_set());
    observed.worker =
        twds.get_opt(worker_name)
            .await
            .map_err(|source| OwnedFailure::WorkerUnreadable {
                name: worker_name.to_string(),
                source,
            })?;
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

/// The worker's versioned Deployments that are not being deleted, by build ID.
async fn live_deployments(
    client: &kube::Client,
    ns: &str,
    worker: &str,
) -> Result<Vec<Deployment>, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let selector = format!(
        "{LABEL_DEPLOYMENT_NAME}={}",
        crate::render::label_value(worker)
    );
    let mut live: Vec<Deployment> = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|d| d.meta().deletion_timestamp.is_none() && build_of(d).is_some())
        .collect();
    live.sort_by(|a, b| build_of(a).cmp(&build_of(b)));
    Ok(live)
}
