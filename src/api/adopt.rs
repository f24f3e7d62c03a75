//! `spec.adopt`: the plain Deployment that runs this worker's unversioned workers today
//! (docs/adopting.md). Its workers keep serving while the first versioned build ramps from
//! them; once Temporal can no longer send them work they are scaled to zero or deleted
//! (`crate::planner::adoption`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec.adopt`, the pattern of Argo Rollouts' `workloadRef`: a Deployment in the same
/// namespace, not owned by the controller, whose workers poll without worker versioning.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdoptSpec {
    /// Name of the Deployment (same namespace) running the unversioned workers. The controller
    /// only scales it to zero or deletes it, and only once no running workflow on the Current
    /// version's task queues is still unversioned.
    #[schemars(length(min = 1, max = 253))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')", "message": "spec.adopt.deploymentName must be the name of a Deployment in this namespace: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"}]))]
    pub deployment_name: String,
    /// What happens to the Deployment once Temporal can no longer send it work: `ScaleToZero`
    /// (default: kept at 0 replicas, so you can delete it from Git yourself) or `Delete`.
    #[serde(default)]
    pub after_adoption: AfterAdoption,
}

/// The end state of an adopted Deployment.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AfterAdoption {
    #[default]
    ScaleToZero,
    Delete,
}

/// `status.adoption`: where taking over `spec.adopt.deploymentName` stands.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdoptionStatus {
    pub deployment_name: String,
    pub phase: AdoptionPhase,
    /// Running workflows on the Current version's workflow task queues that are still
    /// unversioned (visibility records no worker deployment version for them), as the last
    /// count said; unset before the first count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_unversioned_workflows: Option<i64>,
    pub message: String,
}

/// The phases of an adoption, in order; `NotFound` and `Refused` leave the Deployment alone.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AdoptionPhase {
    /// No versioned build is Current yet: the Deployment's workers keep their work.
    Waiting,
    /// A versioned build is Current; workflows started on the unversioned workers are still
    /// running there (or not counted yet).
    Draining,
    /// Temporal can no longer send the Deployment work; it is at 0 replicas.
    ScaledToZero,
    /// As `ScaledToZero`, and the Deployment was deleted (`afterAdoption: Delete`).
    Deleted,
    /// No Deployment of that name in this namespace.
    NotFound,
    /// The Deployment is one of this controller's versioned Deployments: not adopted.
    Refused,
}
