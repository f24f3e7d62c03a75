//! The restart write (`crate::planner::restart`): one merge patch of a versioned Deployment.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::api::{ANNOTATION_RESTART, ANNOTATION_RESTARTED_AT};
use crate::planner::model::RestartDeployment;

/// Restarts a version's Pods as `kubectl rollout restart` does: a merge patch of a
/// pod-template annotation (here the request's value, so a repeated write changes nothing),
/// rolled by the Deployment's own strategy. It names only the two annotations, so it needs no
/// resourceVersion and overwrites nobody's concurrent change.
pub(super) async fn restart_deployment(
    deployments: &Api<Deployment>,
    restart: &RestartDeployment,
    field_manager: &str,
) -> Result<Deployment, kube::Error> {
    let patch = json!({
        "metadata": { "annotations": { ANNOTATION_RESTARTED_AT: restart.at.to_string() } },
        "spec": { "template": { "metadata": { "annotations": {
            ANNOTATION_RESTART: restart.value,
        } } } },
    });
    let params = PatchParams {
        field_manager: Some(field_manager.into()),
        ..Default::default()
    };
    deployments
        .patch(&restart.name, &params, &Patch::Merge(&patch))
        .await
}
