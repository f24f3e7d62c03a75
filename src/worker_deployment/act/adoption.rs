//! The adoption's writes (`crate::planner::adoption`): the adopted Deployment scaled to zero
//! through its scale subresource, or deleted.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::failures::fail;
use crate::metrics::Metrics;
use crate::planner::adoption::{Action, Decision};
use crate::worker_deployment::outcome::Failure;
use crate::worker_deployment::step::WriteStep;

/// Acts on the adoption's write, if any, and returns it once done. Scaling goes through the
/// scale subresource (the `kubectl scale` path), so nothing else of a user's Deployment is
/// written; an already deleted Deployment is done.
pub(super) async fn act(
    metrics: &Metrics,
    deployments: &Api<Deployment>,
    decision: &Decision,
) -> Result<Option<Action>, Failure> {
    let Some(action) = decision.action else {
        return Ok(None);
    };
    let name = &decision.deployment_name;
    match action {
        Action::ScaleToZero => {
            let patch = json!({ "spec": { "replicas": 0 } });
            let res = deployments
                .patch_scale(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            metrics.kube_write("patch", "deployments/scale", res.is_ok());
            res.map_err(|e| fail(WriteStep::ScaleAdoptedDeployment, e))?;
        }
        Action::Delete => {
            let res = match deployments.delete(name, &DeleteParams::background()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                r => r.map(|_| ()),
            };
            metrics.kube_write("delete", "deployments", res.is_ok());
            res.map_err(|e| fail(WriteStep::DeleteAdoptedDeployment, e))?;
        }
    }
    Ok(Some(action))
}
