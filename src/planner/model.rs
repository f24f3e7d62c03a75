//! Inputs and outputs of the pure planner. Nothing here performs I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use crate::api::twd::RolloutControl;
use crate::temporal::state::{GateObservation, WorkerDeploymentState};

pub use super::analysis_input::{Analysis, AnalysisObservation, Sample};
pub use super::pod_trouble::{PodCause, PodTrouble};

/// Everything the planner needs, gathered by the reconciler.
#[derive(Clone, Debug)]
pub struct PlanInput {
    pub desired: Desired,
    /// Versioned Deployments owned by this TWD (any build ID).
    pub deployments: Vec<ObservedDeployment>,
    pub temporal: WorkerDeploymentState,
    /// Gate workflows found for the target build (empty when none started or no gate).
    pub gates: Vec<GateObservation>,
    /// Workflow task queues of the target version (empty until Temporal lists them).
    pub target_task_queues: Vec<String>,
    /// True when every task queue of the target has an unversioned poller (migration).
    pub unversioned_pollers_on_all_queues: bool,
    /// Hash of the observed Connection's settings injected into pods (connection drift).
    pub connection_hash: String,
    /// The Go controller's hash of the same Connection: Pods carrying it are adopted, not
    /// rolled ([`crate::planner::takeover::connection_adoption`]).
    pub predecessor_connection_hash: String,
    /// The spec's `connectionRef` as a Deployment records it (`<Kind>/<name>`,
    /// [`crate::api::ANNOTATION_CONNECTION_REF`]).
    pub connection_ref: String,
    /// The other Connections old versions' Deployments record, with the hash of their current
    /// settings; one that could not be read (deleted, unreadable) is absent.
    pub recorded_connections: BTreeMap<String, String>,
    /// Identities whose routing this controller takes over ([`crate::planner::takeover`]).
    pub succession: Succession,
    /// Gate workflows found for the step gate of the step in effect
    /// ([`crate::planner::step_gates::in_effect`]).
    pub step_gates: Vec<GateObservation>,
    /// Visibility counts for the canary analysis, when one was due
    /// ([`crate::planner::analysis::due`]).
    pub analysis: Option<AnalysisObservation>,
    /// The controller's identity in Temporal.
    pub controller_identity: String,
    /// Which install of the controller this is (empty: unknown, duplicates are not detected).
    pub install_id: String,
    /// How soon to look again while waiting on Temporal-side facts (pollers registering,
    /// gates finishing, routing propagating): the `--fast-poll` flag.
    pub fast_poll: Duration,
    pub now: Timestamp,
    /// This reconcile's Temporal calls waited this long for the client-side budget, when at
    /// least the reporting threshold (`DelayedByTemporalBudget`); set after observation.
    pub delayed_by_budget: Option<Duration>,
    /// Poller health of the live versions ([`crate::planner::poller_health`]).
    pub pollers: PollerView,
    /// Workflow task queues of the Current version, read only while a registered target waits
    /// to be routed (empty: not read). A target missing one of them is not routable.
    pub current_task_queues: Vec<String>,
    /// Why the target's Pods are not Ready, as Kubernetes reports it; read only while the
    /// target waits ([`crate::planner::deadline`]).
    pub target_pods: Option<PodTrouble>,
    /// The last reconcile's ledger of old versions this controller ran
    /// (`status.retiredVersions`): the only version records it deletes
    /// ([`crate::planner::records`]).
    pub retired: Vec<String>,
    /// The Deployment `spec.adopt` names, when set ([`crate::planner::adoption`]).
    pub adopted: Option<crate::planner::adoption::Observed>,
}

/// The user's intent, validated and normalised from the TWD spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// Build ID computed from the spec (or the custom build ID).
    pub build_id: String,
    /// `None`: an autoscaler owns replicas of active versions.
    pub replicas: Option<i32>,
    pub strategy: Strategy,
    pub gate: Option<Gate>,
    pub scaledown_delay: Duration,
    pub delete_delay: Duration,
    /// Hash of the user's pod template (drift detection under a custom build ID).
    pub pod_template_hash: String,
    /// True when `customBuildID` is set: drift is repaired by updating in place.
    pub custom_build_id: bool,
    /// `spec.deployment` as recorded on the versioned Deployments
    /// (`crate::render::settings::record`); `None` when nothing is set.
    pub deployment_settings: Option<String>,
    /// Containers whose image reference is mutable (`:latest`, no tag, no digest): warned
    /// about, since a re-pushed image changes the code under the same build ID.
    pub mutable_images: Vec<MutableImage>,
    /// Create no new Deployment while this many versions are not yet eligible for deletion.
    pub max_versions_ineligible_for_deletion: usize,
    /// A target that was Current within this window is promoted at once (rollback).
    pub rollback_window: Duration,
    /// Cancel the workflows still pinned to a version this long after it started draining.
    pub cancel_pinned_after: Option<Duration>,
    /// Terminate them this long after it started draining.
    pub terminate_pinned_after: Option<Duration>,
    /// Signal them once, as soon as the version drains, with this name.
    pub upgrade_signal: Option<String>,
    /// Pause, abort and the one-shot annotations, with what was already done about them.
    pub control: Control,
    /// `spec.rollout.analysis`, parsed.
    pub analysis: Option<Analysis>,
    /// The gate of each Progressive step, by step index (empty: no step has one).
    pub step_gates: Vec<Option<Gate>>,
    /// `spec.progressDeadlineSeconds`, or the controller's default.
    pub progress_deadline: Duration,
    /// `spec.rollout.onFailure: Abort`: a build that missed its deadline is aborted and scaled
    /// to zero.
    pub abort_on_failure: bool,
    /// The object's `metadata.generation`: a deadline failure holds for this one only.
    pub generation: i64,
    /// `spec.adopt` ([`crate::planner::adoption`]).
    pub adopt: Option<crate::planner::adoption::Adopt>,
}

/// Rollout control: the user's `spec.rollout.paused`/`abort` and one-shot annotations, and
/// the controller's record of what it did about them (`status.rolloutControl`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Control {
    pub paused: bool,
    pub abort: bool,
    /// `temporal.io/promote`: the build ID to promote now.
    pub promote: Option<String>,
    /// `temporal.io/skip-step`, parsed.
    pub skip_step: Option<SkipStep>,
    /// `temporal.io/retry`: the value as written (`<buildID>` or `<buildID>/<anything>`).
    pub retry: Option<String>,
    /// `temporal.io/restart` (trimmed, non-empty): `<buildID>` or `<buildID>/<anything>`.
    pub restart: Option<String>,
    /// What the controller already did (from the last written status).
    pub record: crate::api::twd::RolloutControl,
}

/// A container of the pod template with a mutable image reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutableImage {
    pub container: String,
    pub image: String,
    /// Why the reference is mutable, in words ("the tag latest").
    pub why: &'static str,
}

/// `temporal.io/skip-step: <buildID>/<step>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkipStep {
    pub build_id: String,
    /// Index in the steps; the annotation names the step by its number (from 1).
    pub step: usize,
    /// The annotation value as written (recorded once acted on).
    pub value: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Strategy {
    Manual,
    AllAtOnce,
    Progressive(Vec<Step>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// 1–99.
    pub ramp_percentage: f32,
    pub pause: Duration,
}

/// A configured gate workflow; the input is resolved by the reconciler.
#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    pub workflow_type: String,
}

/// A versioned Deployment as observed in Kubernetes.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedDeployment {
    pub name: String,
    pub build_id: String,
    /// `spec.replicas` (None = unset).
    pub replicas: Option<i32>,
    /// `status.replicas` (pods that exist, ready or not).
    pub status_replicas: i32,
    pub ready_replicas: i32,
    /// When `Available=True` last transitioned; `None` when not Available.
    pub healthy_since: Option<Timestamp>,
    /// The pod template's `temporal.io/pod-template-spec-hash`. Compare through
    /// `template_reads_as()`, which also reads a take-over record.
    pub pod_template_hash: Option<String>,
    /// The pod template's `temporal.io/connection-spec-hash` (`connection_reads_as()`).
    pub connection_hash: Option<String>,
    /// The Connection its settings come from (`temporal.io/connection-ref`, `<Kind>/<name>`);
    /// `None` on Deployments made before the record existed (or by a predecessor).
    pub connection_ref: Option<String>,
    /// Our (cut) pod-template hash from a take-over record standing for `pod_template_hash`
    /// ([`crate::planner::takeover::record_for`]): this version was adopted from a predecessor
    /// controller for the pod template with that hash.
    pub template_record: Option<String>,
    /// The same for the Connection.
    pub connection_record: Option<String>,
    /// The pod template changed since the Deployment was created (its revision is above 1):
    /// it was rolled in place, for a Connection change (or pod-template drift under a custom
    /// build ID).
    pub rolled_in_place: bool,
    /// Kubernetes gave up waiting for the Deployment's newest Pods: `Progressing=False` with
    /// reason `ProgressDeadlineExceeded`, for the Deployment's current generation.
    pub progress_deadline_exceeded: bool,
    /// The Deployment is already being deleted.
    pub deleting: bool,
    /// An HPA or KEDA ScaledObject targets it (its own, or a TemporalWorkerOwnedResource's):
    /// the autoscaler owns `spec.replicas`.
    pub autoscaled: bool,
    /// An autoscaler object targets it right now (an HPA, or a TWOR copy Kubernetes accepted).
    /// Sunset scales a version to 0 only once this is false, so the two never fight.
    pub autoscaler_present: bool,
    pub created_at: Option<Timestamp>,
    /// When sunset scaled it to zero, as recorded on the Deployment
    /// ([`crate::planner::sunset::ANNOTATION_SCALED_DOWN_AT`]).
    pub scaled_down_at: Option<Timestamp>,
    /// The `spec.deployment` settings last applied to it (annotation
    /// `temporal.io/deployment-settings`); `None` when none were.
    pub settings: Option<String>,
    /// The `temporal.io/restart` value whose restart its Pods are (the same annotation on its
    /// pod template).
    pub restarted: Option<String>,
}

/// What to do this reconcile. The executor applies it in field order and stops at the first
/// failure: adopt → create → update → scale → gates → manager claim → routing → delete.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Create the target's Deployment with these replicas.
    pub create: Option<CreateDeployment>,
    /// Record on these Deployments (metadata only) the hashes taken over from a predecessor
    /// controller; written first, so that no later step of the plan depends on a record that
    /// is not there.
    pub adopt: Vec<Adoption>,
    /// Re-render these Deployments in place (pod-template or connection drift).
    pub update: Vec<UpdateDeployment>,
    /// Set `spec.replicas` of these Deployments.
    pub scale: Vec<ScaleDeployment>,
    /// Start a gate workflow on each of these task queues.
    pub start_gates: Vec<String>,
    /// Claim the routing manager identity before changing routing.
    pub claim_manager: bool,
    /// At most one routing change per reconcile.
    pub routing: Option<RoutingChange>,
    /// Delete these Deployments.
    pub delete: Vec<DeleteDeployment>,
    /// Cancel or terminate the workflows still pinned to these Draining versions.
    pub pinned_batches: Vec<PinnedBatch>,
    /// What the rollout is doing, for status and conditions.
    pub progress: Progress,
    /// When to look again at the latest (deadline-driven; `None` = idle interval).
    pub requeue_after: Option<Duration>,
    /// The rollout-control record to keep in status (`status.rolloutControl`).
    pub control: crate::api::twd::RolloutControl,
    /// Start the step gate of this step on these task queues.
    pub start_step_gates: Option<StepGateStart>,
    /// Draining versions with open pinned workflows that an autoscaler holds at 0 replicas:
    /// reported, never scaled by the controller.
    pub held_at_zero: Vec<HeldAtZero>,
    /// Delete the Temporal records of these old versions (build IDs): their Deployments are
    /// gone ([`crate::planner::records::forget`]).
    pub forget_versions: Vec<String>,
    /// The build IDs of old versions this controller ran, whose records it may delete
    /// (`status.retiredVersions`, [`crate::planner::records::ledger`]).
    pub retired: Vec<String>,
    /// A routed version's pollers have been gone longer than the progress deadline
    /// ([`crate::planner::deadline::pollers_lost`]): `Stalled=True/ProgressDeadlineExceeded`.
    pub pollers_lost_too_long: bool,
    /// The `temporal.io/restart` request to act on ([`crate::planner::restart`]).
    pub restart: Option<Restart>,
    /// `spec.adopt`: the adopted Deployment's state and write ([`crate::planner::adoption`]).
    pub adoption: Option<crate::planner::adoption::Decision>,
}

/// What a pending `temporal.io/restart` request asks for this reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Roll the Pods of this versioned Deployment in place.
    Roll(RestartDeployment),
    /// The named build has no live Deployment: nothing to restart (a Warning event; the
    /// value is recorded as acted on, so a later build of that ID is not restarted by it).
    NoDeployment { build_id: String, value: String },
}

/// Restart the Pods of one versioned Deployment (`kubectl rollout restart`'s way: a new
/// pod-template annotation, rolled by the Deployment's own strategy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartDeployment {
    pub name: String,
    pub build_id: String,
    /// The annotation value acted on, written on the pod template (what rolls the Pods).
    pub value: String,
    /// Recorded on the Deployment as `temporal.io/restartedAt`.
    pub at: Timestamp,
}

/// A Draining version at 0 replicas, with open pinned workflows, owned by an autoscaler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldAtZero {
    pub build_id: String,
    /// Open pinned workflows (the last visibility count).
    pub open: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StepGateStart {
    /// Zero-based step index.
    pub step: usize,
    pub task_queues: Vec<String>,
}

pub use crate::temporal::state::PinnedAction;

/// Ask Temporal to end the open workflows pinned to one Draining version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedBatch {
    pub build_id: String,
    pub action: PinnedAction,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CreateDeployment {
    pub build_id: String,
    pub replicas: Option<i32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct UpdateDeployment {
    pub name: String,
    pub build_id: String,
    pub reason: UpdateReason,
    /// The Connection to render it with: `None` the spec's, `Some(record)` the other one its
    /// Deployment records (an old version keeps the Connection it was created with).
    pub connection: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateReason {
    PodTemplateDrift,
    ConnectionDrift,
    /// Only `spec.deployment` changed: labels, annotations and strategy are updated, the pod
    /// template is left alone (no Pod restarts).
    SettingsDrift,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ScaleDeployment {
    pub name: String,
    pub build_id: String,
    pub replicas: i32,
    pub reason: ScaleReason,
    /// Record this instant on the Deployment as its scale-down time
    /// ([`crate::planner::sunset::ANNOTATION_SCALED_DOWN_AT`]), in the same write.
    pub record_scaled_down_at: Option<Timestamp>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleReason {
    /// Active version brought to `spec.replicas`.
    Desired,
    /// Drained for longer than `scaledownDelay`, or inactive and not the target.
    Sunset,
    /// The target missed its progress deadline and `spec.rollout.onFailure` is `Abort`.
    Failed,
    /// Draining with open pinned workflows at 0 replicas and no autoscaler: brought back so
    /// that they can finish.
    DrainingAtZero,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DeleteDeployment {
    pub name: String,
    pub build_id: String,
    pub reason: DeleteReason,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteReason {
    /// Drained for longer than `scaledownDelay + deleteDelay`.
    Sunset,
    /// Temporal does not know this build and it is not the target.
    NotRegistered,
    /// Inactive (never received work) and superseded by another target; already at 0 pods.
    Superseded,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RoutingChange {
    /// Make `build_id` Current (clears any ramp).
    SetCurrent { build_id: String },
    /// Ramp `build_id` to `percentage`.
    SetRamping { build_id: String, percentage: f32 },
    /// Clear a stale ramp (target is already Current).
    ClearRamp,
}

/// Where the rollout stands after this plan, for conditions and status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    pub phase: Phase,
    /// Human-readable detail for the condition message.
    pub message: String,
    /// Progressive only.
    pub step: Option<StepProgress>,
    /// Routing changed because this target was Current recently.
    pub rollback: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// Target Deployment missing or not yet polling Temporal.
    #[default]
    WaitingForPollers,
    /// Registered; waiting for a human (Manual) or for health/pollers before promotion.
    WaitingForPromotion,
    /// Waiting for gate workflows to complete.
    WaitingForGate,
    /// Target is ramping.
    Ramping,
    /// Target is Current.
    Complete,
    /// A gate workflow failed: needs a new build or a human.
    GateFailed,
    /// Too many versions not yet eligible for deletion; target not created.
    TooManyVersions,
    /// Another identity owns routing in Temporal.
    ManagedElsewhere,
    /// Versioned Deployments rolled for a Connection change did not get their new Pods Ready
    /// by their progress deadline: needs the Connection (or the cluster) fixed.
    ConnectionRolloutStalled,
    /// Another install of the controller changes routing with this controller's identity:
    /// needs a human to give each install its own identity.
    DuplicateInstall,
    /// `spec.rollout.paused`: held where it is until resumed.
    Paused,
    /// `spec.rollout.abort`: the target's ramp is back to 0 % until the abort is cleared.
    Aborted,
    /// The target did not become routable within the progress deadline: needs a spec change
    /// or `temporal.io/retry`.
    DeadlineExceeded,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepProgress {
    /// Zero-based index of the step in effect.
    pub index: usize,
    pub ramp_percentage: f32,
    pub started_at: Option<Timestamp>,
    /// When the next step (or promotion) is due.
    pub next_at: Option<Timestamp>,
}

/// What routing decides in one reconcile, before [`Plan`] takes it apart; the rules after
/// routing ([`crate::planner::control`], [`crate::planner::step_gates`],
/// [`crate::planner::analysis`]) adjust it, so it lives here rather than in any one of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    pub change: Option<RoutingChange>,
    pub claim_manager: bool,
    pub start_gates: Vec<String>,
    pub progress: Progress,
    /// The rollout-control record to keep ([`crate::planner::control`]).
    pub control: RolloutControl,
    /// The step gate to start ([`crate::planner::step_gates`]).
    pub start_step_gates: Option<StepGateStart>,
}

// --- Take-over (rules in `crate::planner::takeover`) ---

/// Our hash and the pod-template annotation it stands for (a take-over record; written as a
/// Deployment label by `crate::planner::takeover::HashRecord::label_value`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashRecord {
    pub ours: String,
    pub replaces: String,
}

/// One Deployment's take-over record to write (Deployment metadata only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adoption {
    pub name: String,
    pub build_id: String,
    pub template: Option<HashRecord>,
    pub connection: Option<HashRecord>,
}

/// Who this controller takes over from, besides nobody.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Succession {
    /// Identities this controller used before (its default before it gained a cluster-unique
    /// part): routing they manage is ours.
    pub earlier_own: Vec<String>,
    /// Patterns of predecessor controllers' identities: `*` matches any run of characters,
    /// `<uuid>` a Kubernetes UID; anything else matches itself.
    pub predecessors: Vec<String>,
}

/// A live version's task queue without a live poller of that version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Missing {
    pub build_id: String,
    pub task_queue: String,
}

/// What a check found.
#[derive(Clone, Debug, PartialEq)]
pub enum Health {
    Healthy,
    NoActivePollers {
        missing: Vec<Missing>,
        live_within: Duration,
    },
    Unknown {
        why: String,
    },
}

/// What the planner is told about poller health ([`crate::planner::poller_health`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PollerView {
    /// The last check's verdict, when it looked at the versions live now.
    pub health: Option<Health>,
    /// When the next check is due (the reconcile comes back then).
    pub next_check: Option<Timestamp>,
}
