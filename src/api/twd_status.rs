//! The status of a worker deployment: conditions, the version rows, rollout control's
//! memory. Rebuilt from Kubernetes and Temporal on every reconcile.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::connection::ConnectionRef;

/// Reason of the `Ready=Unknown` condition that a TWD's status reads as until the controller
/// first writes it (the CRD's schema default for `status`, see [`TemporalWorkerDeploymentStatus`]).
pub const WAITING_FOR_CONTROLLER: &str = "WaitingForController";

/// Status: rebuilt from Kubernetes and Temporal state on every reconcile. Until the controller
/// first writes it, it reads as Ready=Unknown with reason WaitingForController.
//
// That placeholder is the schema default below, which the API server applies on every read from
// etcd. kstatus reads an object without status as `Current`, which would let `helm install
// --wait` and Flux pass before anything rolled out; `Ready=Unknown` is `InProgress` to kstatus,
// not ready to `kubectl wait --for=condition=Ready` and to the Flux `healthCheckExprs`, and
// `Progressing` to the Argo CD health check (no `observedGeneration`). The controller never
// writes `Ready=Unknown`, so the placeholder's `lastTransitionTime` is never carried over into a
// real condition: the first status write replaces it. Checked on the real API server by
// `tests/gitops_live.rs`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {
    "conditions": [{
        "type": "Ready",
        "status": "Unknown",
        "reason": WAITING_FOR_CONTROLLER,
        "message": "Waiting for the controller to observe this TemporalWorkerDeployment",
        "lastTransitionTime": "1970-01-01T00:00:00Z"
    }]
}))]
pub struct TemporalWorkerDeploymentStatus {
    /// The generation the controller last acted on; written with the conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_version: Option<TargetVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<VersionInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deprecated_versions: Vec<DeprecatedVersion>,
    /// Identity that owns routing changes in Temporal, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager_identity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modifier_identity: Option<String>,
    /// Number of versions Temporal knows for this worker deployment.
    #[serde(default)]
    pub version_count: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// What the controller did about `spec.rollout.paused` and the one-shot control
    /// annotations, so that a restarted controller resumes a pause with its remaining time and
    /// never acts on an annotation twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_control: Option<RolloutControl>,
    /// Temporal's conflict token of this worker deployment as last read or returned by a
    /// routing change, base64 (the Go controller's `versionConflictToken`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_conflict_token: Option<String>,
    /// The `connectionRef` the status was computed with (the Go controller v1.10's field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_connection_ref: Option<ConnectionRef>,
    /// Build IDs of old versions that ran in a versioned Deployment of this worker deployment
    /// and that Temporal still lists: the only version records the controller deletes in
    /// Temporal once their Deployment is gone (versions registered by workers outside
    /// Kubernetes are never listed here). Kept until Temporal no longer lists the version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired_versions: Vec<String>,
    /// Where taking over `spec.adopt.deploymentName` stands (docs/adopting.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adoption: Option<crate::api::adopt::AdoptionStatus>,
}

impl TemporalWorkerDeploymentStatus {
    /// Whether a controller ever wrote this status: the schema's placeholder (and an empty
    /// status) has neither an observed generation nor a target version; every status a
    /// controller writes, ours or the Go controller's, has at least one of them.
    pub fn reported(&self) -> bool {
        self.observed_generation.is_some() || self.target_version.is_some()
    }
}

/// The controller's memory of rollout control (see `docs/rollout-control.md`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutControl {
    /// The pause in effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<PausedStep>,
    /// A step resumed after a pause: it ends at `nextStepAt` rather than its full pause after
    /// Temporal's ramp change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<ResumedStep>,
    /// The `temporal.io/promote` value last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted: Option<String>,
    /// The `temporal.io/skip-step` value last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_step: Option<String>,
    /// Canary analysis of the target: the latest verdict of each step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisRecord>,
    /// An abort the controller decided itself (a failed analysis): it holds for this build ID;
    /// a new build starts over, and `temporal.io/promote` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<AbortRecord>,
    /// The progress deadline's clock of the target: since when it waits to become routable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<WaitingSince>,
    /// Since when a routed (Current or Ramping) version has had no live pollers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pollers_lost: Option<WaitingSince>,
    /// The `temporal.io/retry` value last acted on (a failed build's record was cleared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried: Option<String>,
    /// The `temporal.io/restart` value last acted on (that version's Pods were rolled in
    /// place, or it had no Deployment to restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted: Option<String>,
}

/// One progress-deadline clock: what is waited for, since when, and when it runs out.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingSince {
    #[serde(rename = "buildID")]
    pub build_id: String,
    pub since: Time,
    pub deadline: Time,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRecord {
    #[serde(rename = "buildID")]
    pub build_id: String,
    /// When the visibility counts were last taken.
    pub last_at: Time,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepVerdict>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepVerdict {
    /// The step's number, from 1 (`steps[0]` is step 1).
    pub step: i32,
    pub verdict: AnalysisVerdict,
    /// Closed workflows of the target in the step, and how many of them failed or timed out.
    pub target_closed: i64,
    pub target_failed: i64,
    /// The same for the current version over the same window.
    pub current_closed: i64,
    pub current_failed: i64,
    pub message: String,
    pub at: Time,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AnalysisVerdict {
    Pass,
    Fail,
    Inconclusive,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AbortRecord {
    #[serde(rename = "buildID")]
    pub build_id: String,
    /// Why: `AnalysisFailed`, `StepGateFailed` or `ProgressDeadlineExceeded`.
    pub reason: String,
    pub message: String,
    pub at: Time,
    /// The object's `metadata.generation` when a progress deadline was missed: the record
    /// holds for that generation only, so any spec change starts a new wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

impl RolloutControl {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PausedStep {
    #[serde(rename = "buildID")]
    pub build_id: String,
    /// Number (from 1) of the step held (unset: paused before the first step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<i32>,
    /// Seconds of the step's pause left when the rollout was paused (unset: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_seconds: Option<i64>,
    pub paused_at: Time,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumedStep {
    #[serde(rename = "buildID")]
    pub build_id: String,
    /// Number (from 1) of the resumed step.
    pub step: i32,
    pub next_step_at: Time,
}

/// Temporal-side status of one version.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum VersionStatus {
    NotRegistered,
    Inactive,
    Ramping,
    Current,
    Draining,
    Drained,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    #[serde(rename = "buildID")]
    pub build_id: String,
    pub status: VersionStatus,
    /// Name of the versioned Deployment, when one exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    /// The Go controller's `deployment`: a reference to the versioned Deployment. Earlier
    /// releases of ours wrote the name here as a string, which still reads (as the name).
    #[serde(
        default,
        deserialize_with = "deployment_reference",
        skip_serializing_if = "Option::is_none"
    )]
    pub deployment: Option<DeploymentReference>,
    /// The Go controller's `taskQueues`: the target's workflow task queues while it is not
    /// Current (empty on other versions, as there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_queues: Vec<TaskQueueName>,
    /// In the Go controller's schema, never written by either controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    /// When the Deployment last became Available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_since: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetVersion {
    #[serde(flatten)]
    pub version: VersionInfo,
    /// Percentage of new workflows routed to the target while it ramps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_percentage: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramping_since: Option<Time>,
    /// Temporal's ramp-percentage-changed time: the start of the current step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_last_modified_at: Option<Time>,
    /// Progressive only: the number of the step in effect, from 1 (`spec.rollout.steps[0]` is
    /// step 1), as in the condition messages ("step 1 of 3").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_started_at: Option<Time>,
    /// When the controller will move to the next step (or promote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gate_workflows: Vec<GateWorkflow>,
    /// The Go controller's `testWorkflows`: the same gate workflows of `spec.rollout.gate`
    /// (one per task queue) as `gateWorkflows`, under its name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_workflows: Vec<GateWorkflow>,
}

/// A reference to a versioned Deployment, in the shape of the core `ObjectReference` the Go
/// controller writes (`apiVersion`, `kind`, `namespace`, `name`, `uid`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
}

/// One entry of the Go controller's `taskQueues`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct TaskQueueName {
    pub name: String,
}

impl VersionInfo {
    /// The versioned Deployment's name, from ours or from the Go controller's reference.
    pub fn deployment_name(&self) -> Option<&str> {
        self.deployment_name
            .as_deref()
            .or_else(|| self.deployment.as_ref().and_then(|d| d.name.as_deref()))
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateWorkflow {
    #[serde(rename = "workflowID")]
    pub workflow_id: String,
    #[serde(default, rename = "runID", skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    pub task_queue: String,
    pub status: GateWorkflowStatus,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum GateWorkflowStatus {
    Running,
    Completed,
    Failed,
    Canceled,
    Terminated,
    TimedOut,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeprecatedVersion {
    #[serde(flatten)]
    pub version: VersionInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained_since: Option<Time>,
    /// When the controller scales this version to zero (drained versions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaledown_at: Option<Time>,
    /// When the controller deletes this version's Deployment (drained versions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_at: Option<Time>,
    #[serde(default)]
    pub eligible_for_deletion: bool,
    /// Draining versions: when Temporal started draining it (its drainage status changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draining_since: Option<Time>,
    /// Open workflows pinned to this version, from Temporal visibility (counted again at the
    /// drain poll pace, not on every reconcile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_pinned_workflows: Option<i64>,
    /// A few of the oldest open pinned workflows (what keeps the version alive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oldest_pinned_workflows: Vec<PinnedWorkflow>,
    /// When the controller signalled the workflows pinned to this version
    /// (`spec.sunset.upgradeSignal`); recorded so that none is signalled twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_signalled_at: Option<Time>,
    /// When the controller asked Temporal to cancel the workflows pinned to this version
    /// (`spec.sunset.cancelPinnedAfter`); recorded so that it is asked once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_cancel_requested_at: Option<Time>,
    /// When the controller asked Temporal to terminate them (`terminatePinnedAfter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_terminate_requested_at: Option<Time>,
    /// Draining versions with `spec.sunset.terminatePinnedAfter` (or only `cancelPinnedAfter`):
    /// when the workflows still pinned to it are terminated (or asked to cancel, which workflow
    /// code may take longer to honour), from `drainingSince`. Temporal then reports it Drained
    /// after its drainage check, and `scaledownDelay` later it is scaled down. Unset without
    /// either deadline: they run as long as they run, `openPinnedWorkflows` counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_workflows_end_at: Option<Time>,
    /// What the version's retirement waits for, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

/// One open workflow pinned to an old version.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinnedWorkflow {
    pub workflow_type: String,
    #[serde(rename = "workflowID")]
    pub workflow_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

/// `deployment` as we write it (the name), or as the Go controller v1.8.1 wrote it (an
/// ObjectReference): a WorkerDeployment it managed must stay readable until our first status
/// write replaces its status (take-over, see `docs/architecture.md`).
/// `deployment` as the Go controller writes it (a reference) or as our earlier releases did
/// (the name as a string).
fn deployment_reference<'de, D>(d: D) -> Result<Option<DeploymentReference>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NameOrReference {
        Name(String),
        Reference(DeploymentReference),
    }
    Ok(match Option::<NameOrReference>::deserialize(d)? {
        None => None,
        Some(NameOrReference::Name(n)) if n.is_empty() => None,
        Some(NameOrReference::Name(n)) => Some(DeploymentReference {
            name: Some(n),
            ..Default::default()
        }),
        Some(NameOrReference::Reference(r)) => Some(r),
    })
}

#[cfg(test)]
mod go_status_tests {
    use super::*;

    /// A WorkerDeployment's status as the Go controller v1.8.1 wrote it (taken from the
    /// take-over test's run): it must parse, so that the take-over can read it.
    #[test]
    fn the_go_controllers_status_parses() {
        let go = serde_json::json!({
            "conditions": [{"lastTransitionTime": "2026-11-25T18:36:05Z",
                "message": "Target version v2-6dd7 is ramping", "observedGeneration": 2,
                "reason": "Ramping", "status": "False", "type": "Ready"}],
            "currentVersion": {"buildID": "v1-9488", "deployment": {"apiVersion": "apps/v1",
                "kind": "Deployment", "name": "orders-v1-9488", "namespace": "takeover-26575-0",
                "uid": "f2f654e2-43b8-45b3-bad2-16823b789f87"},
                "healthySince": "2026-11-25T18:35:59Z", "status": "Current"},
            "lastModifierIdentity": "twc-test/go-controller-system/668a4568-afaf-41d7-b167-b7d77db5f54b",
            "managerIdentity": "twc-test/go-controller-system/668a4568-afaf-41d7-b167-b7d77db5f54b",
            "targetVersion": {"buildID": "v2-6dd7", "deployment": {"apiVersion": "apps/v1",
                "kind": "Deployment", "name": "orders-v2-6dd7", "namespace": "takeover-26575-0",
                "uid": "e7c1f49f-8836-4470-8285-8f15e2951ff1"},
                "healthySince": "2026-11-25T18:36:05Z", "rampLastModifiedAt": "2026-11-25T18:36:06Z",
                "rampPercentage": 25, "rampingSince": "2026-11-25T18:36:06Z", "status": "Ramping",
                "taskQueues": [{"name": "takeover-tq"}]},
            "deprecatedVersions": [{"buildID": "v0-4b5c", "status": "Drained",
                "deployment": null, "eligibleForDeletion": true}],
            "versionConflictToken": "AQAAAA7imSGWIs/6FP//",
            "versionCount": 2
        });
        let s: TemporalWorkerDeploymentStatus = serde_json::from_value(go).expect("Go status");
        let target = s.target_version.expect("target");
        assert_eq!(target.version.build_id, "v2-6dd7");
        assert_eq!(target.version.deployment_name(), Some("orders-v2-6dd7"));
        assert_eq!(target.version.task_queues[0].name, "takeover-tq");
        assert_eq!(
            s.version_conflict_token.as_deref(),
            Some("AQAAAA7imSGWIs/6FP//")
        );
        assert_eq!(
            s.current_version.as_ref().and_then(|c| c.deployment_name()),
            Some("orders-v1-9488")
        );
        assert_eq!(s.deprecated_versions[0].version.deployment, None);
        assert_eq!(s.observed_generation, None);
        // Ours reads back as written.
        let ours: VersionInfo = serde_json::from_value(serde_json::json!(
            {"buildID": "v1", "status": "Current", "deployment": "orders-v1"}
        ))
        .expect("ours");
        assert_eq!(ours.deployment_name(), Some("orders-v1"));
    }
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;
    use crate::api::twd::TemporalWorkerDeploymentCrd;

    #[test]
    fn the_schema_placeholder_is_not_a_report_and_a_written_status_is() {
        let crd = serde_json::to_value(TemporalWorkerDeploymentCrd::crd()).expect("serialises");
        let placeholder = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["default"];
        let placeholder: TemporalWorkerDeploymentStatus =
            serde_json::from_value(placeholder.clone()).expect("the default is a status");
        assert!(!placeholder.conditions.is_empty(), "read the real default");
        assert!(!placeholder.reported());
        assert!(!TemporalWorkerDeploymentStatus::default().reported());
        let observed = TemporalWorkerDeploymentStatus {
            observed_generation: Some(1),
            ..Default::default()
        };
        assert!(observed.reported());
        // The Go controller's status has no observedGeneration.
        let targeted: TemporalWorkerDeploymentStatus = serde_json::from_value(
            serde_json::json!({"targetVersion": {"buildID": "v1", "status": "Inactive"}}),
        )
        .expect("a status with a target");
        assert!(targeted.reported());
    }
}
