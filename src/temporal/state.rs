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
    pub routing: RoutingState,
    /// Every version Temporal knows, in the order Temporal lists them.
    pub versions: Vec<VersionState>,
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

/// Details of one version from `DescribeWorkerDeploymentVersion`, fetched only when needed
/// (gates, unversioned migration).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VersionDetail {
    /// Workflow-type task queues the version polls.
    pub workflow_task_queues: Vec<String>,
    /// Activity-type task queues the version polls.
    pub activity_task_queues: Vec<String>,
}

/// Outcome of a gate workflow as read with `DescribeWorkflowExecution`.
#[derive(Clone, Debug, PartialEq)]
pub struct GateObservation {
    pub workflow_id: String,
    pub run_id: String,
    pub task_queue: String,
    pub status: crate::api::twd::GateWorkflowStatus,
}

impl WorkerDeploymentState {
    pub fn version(&self, build_id: &str) -> Option<&VersionState> {
        self.versions.iter().find(|v| v.build_id == build_id)
    }
}
