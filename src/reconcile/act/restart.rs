//! The restart write (`crate::planner::restart`): one merge patch of a versioned Deployment.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::api::{ANNOTATION_RESTART, ANNOTATION_RESTARTED_AT};
use crate::planner::model::RestartDeployment;

/// Restarts a version's Pods as `kubectl rollout restart` does: a pod-template annotation
/// (here the request's value, so a repeated write is a no-op), rolled by the Deployment's own
/// strategy. A merge patch: it touches nothing else and needs no resourceVersion.
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
