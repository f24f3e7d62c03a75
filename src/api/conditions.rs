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
pub const CONNECTION_NOT_FOUND: &str = "TemporalConnectionNotFound";
pub const AUTH_SECRET_INVALID: &str = "AuthSecretInvalid";
pub const CLIENT_CREATION_FAILED: &str = "TemporalClientCreationFailed";
pub const STATE_FETCH_FAILED: &str = "TemporalStateFetchFailed";
pub const PLAN_GENERATION_FAILED: &str = "PlanGenerationFailed";
pub const PLAN_EXECUTION_FAILED: &str = "PlanExecutionFailed";
pub const INVALID_SPEC: &str = "InvalidSpec";
pub const GATE_WORKFLOW_FAILED: &str = "GateWorkflowFailed";
