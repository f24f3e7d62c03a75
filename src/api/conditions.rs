//! Condition types and reason strings: part of the status contract (kstatus, ArgoCD, Flux,
//! `kubectl wait`). Never rename a constant's value.

pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const RECONCILING: &str = "Reconciling";
pub const STALLED: &str = "Stalled";

// Success-path reasons, derived from the target version's Temporal status.
pub const ROLLOUT_COMPLETE: &str = "RolloutComplete";
pub const WAITING_FOR_POLLERS: &str = "WaitingForPollers";
pub const WAITING_FOR_PROMOTION: &str = "WaitingForPromotion";
pub const RAMPING: &str = "Ramping";
/// Waiting for a gate workflow to complete.
pub const WAITING_FOR_GATE: &str = "WaitingForGate";
/// The max-versions guard prevents creating the target Deployment.
pub const TOO_MANY_VERSIONS: &str = "TooManyVersions";
/// Someone else holds the routing manager identity in Temporal.
pub const MANAGED_ELSEWHERE: &str = "RoutingManagedElsewhere";
/// The TWD is being deleted and Temporal state is being cleaned up.
pub const DELETING: &str = "Deleting";

// Blocking reasons (Progressing=False, Ready=False).
pub const CONNECTION_NOT_FOUND: &str = "ConnectionNotFound";
pub const AUTH_SECRET_INVALID: &str = "AuthSecretInvalid";
pub const CLIENT_CREATION_FAILED: &str = "TemporalClientCreationFailed";
pub const STATE_FETCH_FAILED: &str = "TemporalStateFetchFailed";
pub const PLAN_GENERATION_FAILED: &str = "PlanGenerationFailed";
pub const PLAN_EXECUTION_FAILED: &str = "PlanExecutionFailed";
pub const INVALID_SPEC: &str = "InvalidSpec";
pub const GATE_WORKFLOW_FAILED: &str = "GateWorkflowFailed";
/// `connectionRef.kind: ClusterConnection` under a namespaced install, which neither watches
/// nor may read cluster-scoped objects (the Go controller v1.10's reason).
pub const CLUSTER_CONNECTION_UNSUPPORTED: &str = "ClusterConnectionUnsupported";
/// Versioned Deployments rolled for a TemporalConnection change did not get their new Pods
/// Ready by their progress deadline (`ProgressDeadlineExceeded`).
pub const CONNECTION_ROLLOUT_STALLED: &str = "ConnectionRolloutStalled";
/// A sharded install: another shard serves this worker deployment's Temporal namespace and
/// holds its request budget; retried until that shard releases it (`docs/sharding.md`).
pub const TEMPORAL_NAMESPACE_IN_OTHER_SHARD: &str = "TemporalNamespaceInOtherShard";
/// Another install of the controller changes routing under this controller's identity.
pub const DUPLICATE_INSTALL: &str = "DuplicateInstall";
/// `spec.rollout.paused`: the rollout holds its step until resumed.
pub const ROLLOUT_PAUSED: &str = "RolloutPaused";
/// `spec.rollout.abort`: the target's ramp is back to 0 % until the abort is cleared.
pub const ROLLOUT_ABORTED: &str = "RolloutAborted";
/// A target did not become routable (Ready Pods whose workers poll every task queue) within
/// the progress deadline, or a routed version's pollers stayed away longer than it; the
/// message names the cause (image pull, crash loop, unschedulable Pod, task queue).
pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
/// Still moving forward, but this reconcile's Temporal calls waited long for the controller's
/// client-side request budget of the Temporal namespace (`--temporal-qps`).
pub const DELAYED_BY_TEMPORAL_BUDGET: &str = "DelayedByTemporalBudget";
/// A task queue of a live (Current or Ramping) version has no poller of that version that
/// Temporal saw within `--poller-live-threshold`, while its Pods may be Ready. In progress
/// (it may heal) until the loss outlasts the progress deadline (`ProgressDeadlineExceeded`).
pub const NO_ACTIVE_POLLERS: &str = "NoActivePollers";
/// The live versions' pollers are back after `NoActivePollers` (or an unknown status).
pub const POLLERS_HEALTHY: &str = "PollersHealthy";
/// Temporal could not be asked about the live versions' pollers: `Ready=Unknown`, not a
/// finding that they are gone.
pub const POLLER_STATUS_UNKNOWN: &str = "PollerStatusUnknown";

/// What a reason says about the rollout (the `Kind` column of the reason table in
/// `docs/cd-rollouts.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasonKind {
    /// `Ready=True`.
    Done,
    /// Moving forward: `Progressing=True`, `Reconciling=True`.
    Progressing,
    /// Cannot move forward now, retried: `Progressing=False`, `Reconciling=True`.
    Blocked,
    /// Needs a spec change or a human: `Stalled=True`.
    Terminal,
    /// Could not be judged: `Ready=Unknown`, `Reconciling=True` (tools wait; never failed).
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reason {
    pub reason: &'static str,
    pub kind: ReasonKind,
}

/// Every reason the controller writes. The one list of the condition vocabulary: a new reason
/// goes here and, in the same change, into the reason table of `docs/cd-rollouts.md` (a test
/// compares them), the Argo CD Lua tests and the Flux fixtures.
pub const ALL: &[Reason] = {
    use ReasonKind::*;
    const fn r(reason: &'static str, kind: ReasonKind) -> Reason {
        Reason { reason, kind }
    }
    &[
        r(ROLLOUT_COMPLETE, Done),
        r(POLLERS_HEALTHY, Done),
        r(WAITING_FOR_POLLERS, Progressing),
        r(WAITING_FOR_PROMOTION, Progressing),
        r(RAMPING, Progressing),
        r(WAITING_FOR_GATE, Progressing),
        r(DELAYED_BY_TEMPORAL_BUDGET, Progressing),
        r(NO_ACTIVE_POLLERS, Progressing),
        r(TOO_MANY_VERSIONS, Blocked),
        r(MANAGED_ELSEWHERE, Blocked),
        r(TEMPORAL_NAMESPACE_IN_OTHER_SHARD, Blocked),
        r(ROLLOUT_PAUSED, Blocked),
        r(DELETING, Blocked),
        r(CONNECTION_NOT_FOUND, Blocked),
        r(AUTH_SECRET_INVALID, Blocked),
        r(CLIENT_CREATION_FAILED, Blocked),
        r(STATE_FETCH_FAILED, Blocked),
        r(PLAN_GENERATION_FAILED, Blocked),
        r(PLAN_EXECUTION_FAILED, Blocked),
        r(POLLER_STATUS_UNKNOWN, Unknown),
        r(INVALID_SPEC, Terminal),
        r(GATE_WORKFLOW_FAILED, Terminal),
        r(CLUSTER_CONNECTION_UNSUPPORTED, Terminal),
        r(CONNECTION_ROLLOUT_STALLED, Terminal),
        r(DUPLICATE_INSTALL, Terminal),
        r(ROLLOUT_ABORTED, Terminal),
        r(PROGRESS_DEADLINE_EXCEEDED, Terminal),
    ]
};

// TemporalWorkerOwnedResource reasons (its own `Ready`; see docs/owned-resources.md).
/// Every live version has its copy, as last rendered, accepted by the API server.
pub const ALL_VERSIONS_APPLIED: &str = "AllVersionsApplied";
/// At least one version's copy was refused (validation, rendering or the API server); the
/// message names the versions.
pub const APPLY_FAILED: &str = "ApplyFailed";
/// `spec.workerRef` names no TemporalWorkerDeployment in the namespace (yet).
pub const WORKER_DEPLOYMENT_NOT_FOUND: &str = "WorkerDeploymentNotFound";

/// Every reason written on a TemporalWorkerOwnedResource (the reason table of
/// `docs/owned-resources.md`; a test compares them).
pub const OWNED_ALL: &[Reason] = &[
    Reason {
        reason: ALL_VERSIONS_APPLIED,
        kind: ReasonKind::Done,
    },
    Reason {
        reason: WORKER_DEPLOYMENT_NOT_FOUND,
        kind: ReasonKind::Blocked,
    },
    Reason {
        reason: APPLY_FAILED,
        kind: ReasonKind::Terminal,
    },
];

// Connection reasons (its own `Ready`; see docs/connection-status.md). The failures reuse the
// worker deployment's names: the same cause reads the same on both objects.
/// The auth Secret is valid and the Temporal frontend answered.
pub const REACHABLE: &str = "Reachable";

/// Every reason written on a Connection (the reason table of `docs/connection-status.md`; a
/// test compares them).
pub const CONNECTION_ALL: &[Reason] = &[
    Reason {
        reason: REACHABLE,
        kind: ReasonKind::Done,
    },
    Reason {
        reason: AUTH_SECRET_INVALID,
        kind: ReasonKind::Blocked,
    },
    Reason {
        reason: CLIENT_CREATION_FAILED,
        kind: ReasonKind::Blocked,
    },
];

/// The conditions `statuses` (type, `True`/`False`/`Unknown`), all with one reason and message
/// for `generation`; each keeps its `lastTransitionTime` from `old` while its status is
/// unchanged, and takes `now` when it flips. Every status of the project is built this way.
pub fn with_transitions(
    old: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    statuses: &[(&str, &str)],
    (reason, message): (&str, &str),
    generation: i64,
    now: jiff::Timestamp,
) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    statuses
        .iter()
        .map(|(type_, status)| {
            let last_transition_time = old
                .iter()
                .find(|c| c.type_ == *type_ && c.status == *status)
                .map_or(Time(now), |c| c.last_transition_time.clone());
            Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
                observed_generation: Some(generation),
                last_transition_time,
            }
        })
        .collect()
}

/// `True` or `False`.
pub fn status_of(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}
