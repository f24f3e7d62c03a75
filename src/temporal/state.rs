//! What the controller observed in Temporal about one worker deployment. Plain data, free
//! of protobuf types, so the planner and status code can be tested without a server.

use jiff::Timestamp;

/// Observed state of a worker deployment (`DescribeWorkerDeployment`). A deployment that
/// Temporal does not know yet (`NotFound`) is `WorkerDeploymentState::default()`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerDeploymentState {
    /// False when Temporal returned NotFound (no version has polled yet).
    pub exists: bool,
    /// Token for optimistic concurrency on Set* calls.
    pub conflict_token: Vec<u8>,
    /// Identity that owns routing changes; empty when nobody claimed it.
    pub manager_identity: String,
    pub last_modifier_identity: String,
    /// Which install made the last routing change, when it was made with this controller's
    /// identity: read from the metadata of the version that change routed to. `None` when not
    /// read (another identity made it, or this install's ID is unknown) or not recorded.
    pub last_routing_install: Option<RoutingInstall>,
    pub routing: RoutingState,
    /// Every version Temporal knows, in the order Temporal lists them.
    pub versions: Vec<VersionState>,
}

/// Version metadata: the install of the controller that last routed to the version. Two
/// installs sharing one identity tell each other apart by it.
pub const METADATA_INSTALL_ID: &str = "temporal.io/controller-install-id";

/// The install recorded on the version the last routing change routed to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutingInstall {
    pub build_id: String,
    pub install_id: String,
}

/// `routing_config` of the worker deployment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoutingState {
    /// Build ID of the current version; `None` means unversioned workers get new workflows.
    pub current_build_id: Option<String>,
    pub current_changed_at: Option<Timestamp>,
    /// Build ID of the ramping version, if any.
    pub ramping_build_id: Option<String>,
    /// 0–100.
    pub ramp_percentage: f32,
    pub ramping_changed_at: Option<Timestamp>,
    /// When the percentage last changed: the start of the current progressive step.
    pub ramp_percentage_changed_at: Option<Timestamp>,
    /// True while Temporal is still propagating the last routing change.
    pub update_in_progress: bool,
}

/// Temporal's view of one version (from the version summaries).
#[derive(Clone, Debug, PartialEq)]
pub struct VersionState {
    pub build_id: String,
    pub status: TemporalVersionStatus,
    /// When drainage status last changed; for `Drained` this is "drained since".
    pub drainage_changed_at: Option<Timestamp>,
    /// When this version was last Current (drives the rollback window).
    pub last_current_at: Option<Timestamp>,
    pub first_activation_at: Option<Timestamp>,
    /// Open (running) workflows pinned to this version, from visibility. Counted only for a
    /// version the sunset rules would otherwise scale down or delete; `None` = not counted
    /// (nothing is retired on an unknown count).
    pub open_pinned_workflows: Option<u64>,
    /// What status shows about the open workflows pinned to a Draining (or still kept Drained)
    /// version; refreshed at the drain poll pace (see the planner's `drain` module).
    pub pinned: Option<PinnedView>,
    /// What the controller already asked Temporal to do to the workflows pinned to this
    /// version (from the last status).
    pub pinned_asked: PinnedAsked,
}

/// What the controller asks of the open workflows pinned to an old version (`spec.sunset`),
/// one Temporal batch operation each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinnedAction {
    /// Signal `name` with `{"newBuildID": new_build_id}` so that workflow code can
    /// continue-as-new onto the Current version (`upgradeSignal`).
    Signal { name: String, new_build_id: String },
    /// Request cancellation: workflow code may clean up and end Canceled.
    Cancel,
    /// Terminate: ends at once, no workflow code runs.
    Terminate,
}

impl PinnedAction {
    pub fn as_str(&self) -> &'static str {
        match self {
            PinnedAction::Signal { .. } => "signal",
            PinnedAction::Cancel => "cancel",
            PinnedAction::Terminate => "terminate",
        }
    }
}

/// When the controller asked Temporal to signal / cancel / terminate a version's pinned
/// workflows (each is asked once).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PinnedAsked {
    pub signal: Option<Timestamp>,
    pub cancel: Option<Timestamp>,
    pub terminate: Option<Timestamp>,
}

/// Open workflows pinned to one old version, as visibility last reported them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedView {
    pub count: u64,
    pub counted_at: Timestamp,
    /// A few of the oldest, oldest first.
    pub oldest: Vec<PinnedWorkflowRef>,
}

/// One open pinned workflow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedWorkflowRef {
    pub workflow_type: String,
    pub workflow_id: String,
    pub start_time: Option<Timestamp>,
}

/// Version status as Temporal reports it. `NotRegistered` never appears here: it is the
/// absence of a version from [`WorkerDeploymentState::versions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TemporalVersionStatus {
    Inactive,
    Current,
    Ramping,
    Draining,
    Drained,
}

impl TemporalVersionStatus {
    /// The word Temporal's docs and our messages use for it.
    pub fn as_str(self) -> &'static str {
        match self {
            TemporalVersionStatus::Inactive => "Inactive",
            TemporalVersionStatus::Current => "Current",
            TemporalVersionStatus::Ramping => "Ramping",
            TemporalVersionStatus::Draining => "Draining",
            TemporalVersionStatus::Drained => "Drained",
        }
    }
}

/// Details of one version from `DescribeWorkerDeploymentVersion`, fetched only when needed
/// (gates, unversioned migration).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VersionDetail {
    /// Workflow-type task queues the version polls.
    pub workflow_task_queues: Vec<String>,
    /// Activity-type task queues the version polls.
    pub activity_task_queues: Vec<String>,
    /// The controller install recorded in the version's metadata by the last routing write to
    /// it (`temporal.io/controller-install-id`).
    pub install_id: Option<String>,
}

/// One poller of a task queue as `DescribeTaskQueue` lists it: Temporal keeps listing a
/// stopped poller for a while (`matching.PollerHistoryTTL`, 5 minutes by default), so only
/// `last_access` tells a live one from a gone one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenPoller {
    pub identity: String,
    /// The worker deployment and build ID it polls for; `None` for an unversioned poller.
    pub deployment_name: Option<String>,
    pub build_id: Option<String>,
    /// When Temporal last saw it: the start or end of its latest long poll.
    pub last_access: Option<Timestamp>,
}

/// Outcome of a gate workflow as read with `DescribeWorkflowExecution`.
#[derive(Clone, Debug, PartialEq)]
pub struct GateObservation {
    pub workflow_id: String,
    pub run_id: String,
    pub task_queue: String,
    pub status: crate::api::twd::GateWorkflowStatus,
    /// When the workflow started: a pending gate is polled with a backoff from it.
    pub started_at: Option<Timestamp>,
}

impl WorkerDeploymentState {
    pub fn version(&self, build_id: &str) -> Option<&VersionState> {
        self.versions.iter().find(|v| v.build_id == build_id)
    }

    /// The build the last routing change routed to: the ramping build if the ramp changed
    /// last, else the current one. Each of our routing writes records the install on it.
    pub fn last_routed_build(&self) -> Option<&str> {
        let r = &self.routing;
        let ramping = r.ramping_build_id.as_deref().filter(|b| !b.is_empty());
        let current = r.current_build_id.as_deref().filter(|b| !b.is_empty());
        match (ramping, r.ramp_percentage_changed_at, r.current_changed_at) {
            (Some(b), Some(ramp_at), Some(current_at)) if ramp_at >= current_at => Some(b),
            (Some(b), Some(_), None) => Some(b),
            _ => current,
        }
    }
}
