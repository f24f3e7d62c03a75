//! The task queue of one version, for `{{ .TaskQueue }}` and a KEDA trigger's `taskQueue: ""`:
//! asked of Temporal (`DescribeWorkerDeploymentVersion`) through the TWD's Connection, only
//! for TWORs that need it, and remembered once found (a version's task queues do not change).

use kube::ResourceExt;

use crate::api::TemporalWorkerDeployment;
use crate::owned::context::OwnedContext;
use crate::reconciler::connect::ConnectError;

/// The one workflow task queue `build` polls; `None` while Temporal does not know the version
/// (or it polls nothing yet). Several queues are an error: the object must say which. Errors
/// are messages for the version's status entry.
pub async fn lookup(
    ctx: &OwnedContext,
    twd: &TemporalWorkerDeployment,
    build: &str,
) -> Result<Option<String>, String> {
    let key = (twd.uid().unwrap_or_default(), build.to_string());
    if let Some(q) = ctx.task_queues.get(&key) {
        return Ok(Some(q));
    }
    // The one connect sequence of every reconciler: a namespaced install refuses a
    // ClusterConnection here too, and the install ID it carries marks routing writes only
    // (this lookup only reads).
    let client = ctx
        .services
        .connector()
        .connect(twd)
        .await
        .map_err(|e| match e {
            ConnectError::ClientCreationFailed { source, .. } => {
                format!("connecting to Temporal for the task queue: {source}")
            }
            other => other.to_string(),
        })?
        .client;
    let detail = client
        .describe_version(&twd.temporal_deployment_name(), build)
        .await
        .map_err(|e| format!("reading the task queue of {build}: {e}"))?;
    let queues = detail.map(|d| d.workflow_task_queues).unwrap_or_default();
    match queues.as_slice() {
        [] => Ok(None),
        [one] => {
            ctx.task_queues.insert(key, one.clone());
            Ok(Some(one.clone()))
        }
        many => Err(format!(
            "version {build} polls {} workflow task queues ({}): name the one to use instead of asking for it",
            many.len(),
            many.join(", ")
        )),
    }
}
