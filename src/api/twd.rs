//! `TemporalWorkerDeployment` (`twd`): one Temporal worker deployment run as a set of
//! versioned Kubernetes Deployments.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Longest TWD name we accept: keeps `temporal.io/deployment-name` a valid label value and
/// leaves room for the build ID in derived Deployment names.
pub use super::connection::{ConnectionRef, ConnectionRefKind};
pub use super::twd_status::{
    AbortRecord, AnalysisRecord, AnalysisVerdict, DeploymentReference, DeprecatedVersion,
    GateWorkflow, GateWorkflowStatus, PausedStep, PinnedWorkflow, ResumedStep, RolloutControl,
    StepVerdict, TargetVersion, TaskQueueName, TemporalWorkerDeploymentStatus, VersionInfo,
    VersionStatus, WAITING_FOR_CONTROLLER, WaitingSince,
};

pub const MAX_NAME_LEN: usize = 63;

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "temporal.io",
    version = "v1alpha1",
    kind = "TemporalWorkerDeployment",
    root = "TemporalWorkerDeploymentCrd",
    plural = "temporalworkerdeployments",
    shortname = "twd",
    category = "temporal",
    namespaced,
    status = "TemporalWorkerDeploymentStatus",
    derive = "PartialEq",
    // The Go controller's columns first, in its order (scripts read columns by position).
    printcolumn = r#"{"name":"Current","type":"string","jsonPath":".status.currentVersion.buildID"}"#,
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".status.targetVersion.buildID"}"#,
    printcolumn = r#"{"name":"Ramp %","type":"number","jsonPath":".status.targetVersion.rampPercentage"}"#,
    printcolumn = r#"{"name":"Step","type":"integer","description":"The step in effect, numbered from 1 as in the condition messages (step 1 of 3)","jsonPath":".status.targetVersion.currentStep"}"#,
    // A string, not a date: kubectl shows a future date as `<invalid>` (it prints ages only).
    printcolumn = r#"{"name":"ETA","type":"string","description":"When the step in effect ends: the next step, or the promotion after the last (RFC 3339)","jsonPath":".status.targetVersion.nextStepAt"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    validation = Rule::new("!self.metadata.name.contains('.')").message("name must not contain '.': Temporal rejects '.' in worker deployment names (<namespace>/<name>)"),
    validation = Rule::new("self.metadata.name.size() <= 63").message("name cannot be more than 63 characters")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.workerOptions.customBuildID) || !has(self.workerOptions.unsafeCustomBuildID)", "message": "set workerOptions.customBuildID or its alias unsafeCustomBuildID, not both"},
    {"rule": "!has(self.deployment) || !has(self.deployment.progressDeadlineSeconds) || !has(self.progressDeadlineSeconds) || self.deployment.progressDeadlineSeconds == self.progressDeadlineSeconds", "message": "spec.deployment.progressDeadlineSeconds and spec.progressDeadlineSeconds are the same deadline: when both are set they must be equal"},
    {"rule": "!has(self.deployment) || !has(self.deployment.minReadySeconds) || !has(self.minReadySeconds) || self.deployment.minReadySeconds == self.minReadySeconds", "message": "spec.deployment.minReadySeconds and spec.minReadySeconds are the same setting: when both are set they must be equal"},
    {"rule": "!has(self.deploymentMetadata) || !has(self.deployment) || !(has(self.deployment.labels) || has(self.deployment.annotations))", "message": "spec.deployment.labels and spec.deployment.annotations are deprecated aliases of spec.deploymentMetadata: set one shape, not both"}
]))]
pub struct TemporalWorkerDeploymentSpec {
    /// Desired pods per active version (at least 1). Leave unset to let an autoscaler own
    /// replicas. 0 is refused: Temporal keeps routing new workflows to the Current version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self >= 1", "message": "spec.replicas must be at least 1: with 0 the Current version has no workers while Temporal keeps routing new workflows to it, so they would wait forever. To stop these workers, delete the TemporalWorkerDeployment (routing goes back to unversioned workers first); to let an autoscaler own replicas, leave spec.replicas unset"}]))]
    pub replicas: Option<i32>,
    /// Pod template for the workers. Any change (without a custom build ID) is a new version.
    pub template: PodTemplateSpec,
    /// Copied to every versioned Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    /// How long a new target may take to become routable (Ready Pods whose workers poll every
    /// task queue), counted from its creation (or a retry), and how long a routed version may
    /// go without pollers; past it the rollout is `Stalled=True/ProgressDeadlineExceeded`.
    /// Unset: the controller's `--default-progress-deadline` (600 s unless changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub progress_deadline_seconds: Option<i32>,
    /// How a new version becomes current.
    pub rollout: RolloutSpec,
    /// When drained versions are scaled down and deleted.
    #[serde(default)]
    pub sunset: SunsetSpec,
    /// Temporal connection, namespace and build ID options.
    pub worker_options: WorkerOptions,
    /// Settings of every versioned Deployment, each where a Kubernetes `DeploymentSpec` puts it
    /// (`strategy.rollingUpdate`, `revisionHistoryLimit`, `progressDeadlineSeconds`,
    /// `minReadySeconds`), so that this field and a future Go `spec.deployment` (its PR #564, a
    /// full `DeploymentSpec`) read the same YAML the same way. Not part of the build ID: a
    /// change updates the existing Deployments in place, with no new version and no Pod
    /// restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentSettings>,
    /// Labels and annotations on every versioned Deployment object (not its Pods': those are
    /// `template.metadata`). A `DeploymentSpec` has no place for them, hence a field of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_metadata: Option<DeploymentMetadata>,
    /// The plain Deployment running this worker's unversioned workers today: the first
    /// versioned build ramps from them, and it is scaled to zero (or deleted) once Temporal can
    /// no longer send it work (docs/adopting.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<crate::api::adopt::AdoptSpec>,
}

impl TemporalWorkerDeploymentSpec {
    /// `minReadySeconds`, from the top level or `spec.deployment` (they must agree).
    pub fn min_ready(&self) -> Option<i32> {
        self.min_ready_seconds
            .or_else(|| self.deployment.as_ref()?.min_ready_seconds)
    }

    /// `progressDeadlineSeconds`, from the top level or `spec.deployment` (they must agree).
    pub fn progress_deadline(&self) -> Option<i32> {
        self.progress_deadline_seconds
            .or_else(|| self.deployment.as_ref()?.progress_deadline_seconds)
    }
}

/// The CEL rule refusing keys that belong to the controllers in the Deployments' labels and
/// annotations (both shapes).
fn reserved_keys_rule() -> serde_json::Value {
    serde_json::json!({
        "rule": "self.all(k, !k.startsWith('temporal.io/') && !k.startsWith('deployment.kubernetes.io/'))",
        "message": "keys under temporal.io/ and deployment.kubernetes.io/ are reserved: they belong to the controllers (they select and record versions)"
    })
}

/// `spec.deployment`: a subset of a Kubernetes `DeploymentSpec`, passed through to each
/// versioned Deployment within the controller's rules (docs/cd-rollouts.md, "Deployment
/// settings"). `labels`, `annotations` and `rollingUpdate` directly under it are the shape
/// before `DeploymentSpec` positions, still read as deprecated aliases (a Warning event says so).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.rollingUpdate) || !has(self.strategy)", "message": "set spec.deployment.strategy.rollingUpdate, or its deprecated alias spec.deployment.rollingUpdate, not both"}
]))]
pub struct DeploymentSettings {
    /// How a roll in place replaces a version's Pods, as `DeploymentSpec.strategy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<StrategySettings>,
    /// Old ReplicaSets kept per versioned Deployment, as `DeploymentSpec.revisionHistoryLimit`
    /// (Kubernetes' default, 10, when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub revision_history_limit: Option<i32>,
    /// The same as `spec.progressDeadlineSeconds` (the Go controller's top-level field, which
    /// its PR #564 moves here); when both are set they must be equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub progress_deadline_seconds: Option<i32>,
    /// The same as `spec.minReadySeconds`; when both are set they must be equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    /// Deprecated alias of `spec.deploymentMetadata.labels`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64, "x-kubernetes-validations" = [reserved_keys_rule()]))]
    pub labels: BTreeMap<String, String>,
    /// Deprecated alias of `spec.deploymentMetadata.annotations`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64, "x-kubernetes-validations" = [reserved_keys_rule()]))]
    pub annotations: BTreeMap<String, String>,
    /// Deprecated alias of `spec.deployment.strategy.rollingUpdate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateSettings>,
}

/// `spec.deployment.strategy`: only `RollingUpdate`. `Recreate` takes every Pod of a version
/// down at once, and a version without ready pollers stops its pinned workflows.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategySettings {
    /// `RollingUpdate` (the default; the only one taken).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == 'RollingUpdate'", "message": "only RollingUpdate: Recreate takes every Pod of a version down at once, and a version without ready pollers stops its pinned workflows"}]))]
    pub type_: Option<String>,
    /// How a roll in place (a Connection change, or a pod-template change under a custom build
    /// ID) replaces a version's Pods. Defaults: `maxSurge: 1`, `maxUnavailable: 0`. Values that
    /// could leave a version with no available Pod are refused: its pinned workflows would stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateSettings>,
}

/// `spec.deploymentMetadata`: put on each versioned Deployment object.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentMetadata {
    /// Added to each versioned Deployment's labels (not its Pods': those are
    /// `template.metadata.labels`). Keys under `temporal.io/` and `deployment.kubernetes.io/`
    /// belong to the controllers and are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64, "x-kubernetes-validations" = [reserved_keys_rule()]))]
    pub labels: BTreeMap<String, String>,
    /// Added to each versioned Deployment's annotations, with the same reserved keys.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64, "x-kubernetes-validations" = [reserved_keys_rule()]))]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateSettings {
    /// Extra Pods during a roll: a number or a percentage of replicas (rounded up). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Pods that may be unavailable during a roll: a number or a percentage (rounded down).
    /// Default 0. Must leave at least one Pod available: below `spec.replicas`, and a
    /// percentage below 100% when an autoscaler owns replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RolloutStrategy {
    /// The controller never changes routing; a human promotes versions.
    Manual,
    /// Promote the target as soon as it is healthy and polling.
    AllAtOnce,
    /// Ramp through `steps`, then promote.
    Progressive,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.strategy != 'Progressive' || (has(self.steps) && size(self.steps) > 0)", "message": "steps are required for Progressive rollout"},
    {"rule": "!has(self.steps) || size(self.steps) < 2 || self.steps.map(s, s.rampPercentage).isSorted() && self.steps.all(s, self.steps.filter(t, t.rampPercentage == s.rampPercentage).size() == 1)", "message": "rampPercentage must increase between each step"},
    {"rule": "self.strategy != 'Manual' || !((has(self.paused) && self.paused) || (has(self.abort) && self.abort))", "message": "paused and abort steer the controller's own routing changes, and with the Manual strategy it makes none: promote or ramp in Temporal instead"}
]))]
pub struct RolloutSpec {
    pub strategy: RolloutStrategy,
    /// Progressive ramp steps; percentages must strictly increase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub steps: Vec<RolloutStep>,
    /// Optional gate workflow that must complete before the target is promoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateSpec>,
    /// Hold the rollout where it is: no further step, no promotion. The remaining time of the
    /// step in effect is kept in `status.rolloutControl` and continues on resume.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Take the target's ramp back to 0 % and keep the current version current
    /// (`Stalled=True/RolloutAborted`); once cleared, the rollout starts again at its first step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
    /// Canary analysis while the target ramps (Progressive): compares the failure rate of the
    /// target's closed workflows with the current version's and aborts a worse target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisSpec>,
    /// What a target that misses its progress deadline gets: `Hold` (default) keeps its Pods
    /// for inspection; `Abort` aborts as `abort` does and scales the failed build to zero.
    #[serde(default, skip_serializing_if = "OnFailure::is_hold")]
    pub on_failure: OnFailure,
}

/// `spec.rollout.onFailure`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OnFailure {
    /// Stall and keep the failed build's Pods (nothing is routed to it).
    #[default]
    Hold,
    /// Stall, take the target's ramp to 0 % as `abort` does, and scale the failed build to zero.
    Abort,
}

impl OnFailure {
    pub fn is_hold(&self) -> bool {
        *self == OnFailure::Hold
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.maxFailureRate) || has(self.maxFailureRateIncrease)", "message": "set maxFailureRate, maxFailureRateIncrease or both: without a threshold no analysis can fail"}
]))]
pub struct AnalysisSpec {
    /// How often to count the target's closed workflows while it ramps (Go duration, at least 1s).
    #[serde(default = "default_analysis_interval")]
    #[schemars(regex(pattern = crate::api::duration::PATTERN))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "duration(self) >= duration('1s')", "message": "interval must be at least 1s"}]))]
    pub interval: String,
    /// Fail when more than this percentage of the target's closed workflows in the step failed
    /// or timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 100.0))]
    pub max_failure_rate: Option<f64>,
    /// Fail when the target's failure rate exceeds the current version's, over the same window,
    /// by more than this many percentage points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 100.0))]
    pub max_failure_rate_increase: Option<f64>,
    /// Fewest closed workflows (of the target, and of the current version for the relative
    /// threshold) in the step before a verdict; fewer is inconclusive.
    #[serde(default = "default_min_sample_size")]
    #[schemars(range(min = 1))]
    pub min_sample_size: i32,
    /// Count only these workflow types (default: every type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20), inner(regex(pattern = r#"^[^'"\\]+$"#)))]
    pub workflow_types: Vec<String>,
    /// How long past its pause an inconclusive step is held (Go duration) before
    /// `inconclusiveVerdict` applies.
    #[serde(default = "default_max_inconclusive")]
    #[schemars(regex(pattern = crate::api::duration::PATTERN))]
    pub max_inconclusive: String,
    /// The verdict once an inconclusive step has been held for `maxInconclusive`.
    #[serde(default)]
    pub inconclusive_verdict: DefaultVerdict,
    /// Record verdicts (status, metrics) without acting on them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DefaultVerdict {
    #[default]
    Pass,
    Fail,
}

fn default_analysis_interval() -> String {
    "30s".into()
}
fn default_min_sample_size() -> i32 {
    10
}
fn default_max_inconclusive() -> String {
    "5m".into()
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStep {
    /// Percentage of new workflows routed to the target during this step.
    #[schemars(range(min = 1, max = 99))]
    pub ramp_percentage: i32,
    /// How long to stay at this step (Go duration, at least 1s), e.g. `30s`, `5m`.
    #[schemars(regex(pattern = crate::api::duration::PATTERN))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "duration(self) >= duration('1s')", "message": "pause duration must be at least 1s"}]))]
    pub pause_duration: String,
    /// Optional gate workflow for this step: started on every workflow task queue of the target
    /// when the step begins; the step ends only once it completed, and a failed one ramps the
    /// target back to 0 % (`Stalled=True/RolloutAborted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateSpec>,
}

/// `input` and `inputFrom` are mutually exclusive, but CEL cannot say so here: `input` is
/// schema-less JSON, which kube-apiserver hides from CEL (a rule naming it fails to compile and the
/// whole CRD is refused). `api::validate` reports both set as `InvalidSpec`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateSpec {
    /// Workflow type started on every workflow task queue of the target version.
    #[schemars(length(min = 1))]
    pub workflow_type: String,
    /// Inline JSON input passed as the workflow's single argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub input: Option<serde_json::Value>,
    /// Input read from a ConfigMap or Secret key (Secret contents are never logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_from: Option<GateInputSource>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.configMapKeyRef) != has(self.secretKeyRef)", "message": "exactly one of configMapKeyRef or secretKeyRef must be set"}
]))]
pub struct GateInputSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<KeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<KeyRef>,
}

/// A key in a Secret or ConfigMap of the TWD's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct KeyRef {
    #[schemars(length(min = 1))]
    pub name: String,
    #[schemars(length(min = 1))]
    pub key: String,
}

fn any_json(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.cancelPinnedAfter) || !has(self.terminatePinnedAfter) || duration(self.terminatePinnedAfter) > duration(self.cancelPinnedAfter)", "message": "terminatePinnedAfter must be longer than cancelPinnedAfter, so that cancelled workflows get time to clean up"}
]))]
pub struct SunsetSpec {
    /// How long after a version is drained before it is scaled to zero.
    #[serde(default = "default_scaledown")]
    #[schemars(regex(pattern = crate::api::duration::PATTERN))]
    pub scaledown_delay: String,
    /// How long after scale-down before the drained version's Deployment is deleted.
    #[serde(default = "default_delete")]
    #[schemars(regex(pattern = crate::api::duration::PATTERN))]
    pub delete_delay: String,
    /// Optional: this long after a version starts draining, request cancellation of the
    /// workflows still pinned to it (they may clean up, then end Canceled). Unset: they run to
    /// completion, however long that takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::api::duration::PATTERN))]
    pub cancel_pinned_after: Option<String>,
    /// Optional, longer than `cancelPinnedAfter` when both are set: this long after a version
    /// starts draining, terminate the workflows still pinned to it (no cleanup runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::api::duration::PATTERN))]
    pub terminate_pinned_after: Option<String>,
    /// Optional signal name: when a version starts draining, its open pinned workflows get this
    /// signal once, with `{"newBuildID": "<Current build ID>"}` as input, so that workflow code
    /// can continue-as-new onto the Current version (see docs/old-versions.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200))]
    pub upgrade_signal: Option<String>,
}

fn default_scaledown() -> String {
    "1h".into()
}
fn default_delete() -> String {
    "24h".into()
}

impl Default for SunsetSpec {
    fn default() -> Self {
        Self {
            scaledown_delay: default_scaledown(),
            delete_delay: default_delete(),
            cancel_pinned_after: None,
            terminate_pinned_after: None,
            upgrade_signal: None,
        }
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerOptions {
    /// The connection to use: a `TemporalConnection` in this namespace (`kind` unset or
    /// `TemporalConnection`), or a cluster-scoped `ClusterConnection` (`kind: ClusterConnection`),
    /// whose Secrets are read in this namespace.
    pub connection_ref: ConnectionRef,
    /// Temporal namespace the workers poll.
    #[schemars(length(min = 1))]
    pub temporal_namespace: String,
    /// Pins the build ID. A pod-template change under the same ID is a rolling update of
    /// the same version: change it whenever workflow code changes, or replays may break.
    #[serde(
        default,
        rename = "customBuildID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$")
    )]
    pub custom_build_id: Option<String>,
    /// The Go controller's name for `customBuildID`, with the same meaning.
    #[serde(
        default,
        rename = "unsafeCustomBuildID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$")
    )]
    pub unsafe_custom_build_id: Option<String>,
}

impl WorkerOptions {
    /// The pinned build ID, under either of its names.
    pub fn build_id_pin(&self) -> Option<&str> {
        self.custom_build_id
            .as_deref()
            .or(self.unsafe_custom_build_id.as_deref())
    }
}

/// The number of the step at `index` of `spec.rollout.steps`. Steps are numbered from 1
/// wherever a user reads or writes one (status, printer columns, metrics, the status API, the
/// CLI, messages, `temporal.io/skip-step`, step-gate workflow IDs): `steps[0]` is step 1, as in
/// "step 1 of 3". Only `steps[i]` field paths keep Kubernetes' zero-based indices.
pub fn step_number(index: usize) -> i32 {
    i32::try_from(index).map_or(i32::MAX, |i| i.saturating_add(1))
}

/// The index in `spec.rollout.steps` of step `number` (numbered from 1); `None` below 1.
pub fn step_index(number: i32) -> Option<usize> {
    usize::try_from(number).ok()?.checked_sub(1)
}

/// A worker deployment, served as `WorkerDeployment` and as `TemporalWorkerDeployment` (see
/// [`crate::api::kinds`]); `TemporalWorkerDeploymentCrd` exists only to generate the schema.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TemporalWorkerDeployment {
    // Read without them (a manifest built in code), an object is of the seed kind.
    #[serde(default = "crate::api::kinds::default_api_version")]
    pub api_version: String,
    #[serde(default = "crate::api::kinds::default_worker_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: TemporalWorkerDeploymentSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TemporalWorkerDeploymentStatus>,
}

crate::api::kinds::served_model!(
    TemporalWorkerDeployment,
    TemporalWorkerDeploymentSpec,
    TemporalWorkerDeploymentStatus,
    crate::api::kinds::Model::Worker
);

impl TemporalWorkerDeployment {
    /// The Temporal worker deployment name: `<k8s-namespace>/<twd-name>`.
    pub fn temporal_deployment_name(&self) -> String {
        use kube::ResourceExt;
        format!(
            "{}/{}",
            self.namespace().unwrap_or_default(),
            self.name_any()
        )
    }
}
