//! One failure vocabulary and the pure verdict.
//!
//! Every stage fails with a [`Failure`]; [`Failure::reason`] is the documented condition reason
//! and also the `reason` label of `reconcile_errors_total`. [`verdict`] turns how a reconcile
//! ended into what the conditions say and when to look again. It is an exhaustive match over
//! [`Failure`], so a new failure kind cannot be added without deciding its row (and the
//! table-driven tests below name every kind).

use crate::api::conditions as reason;
use crate::reconcile::step::{CleanupStep, WriteStep};
use crate::reconcile::superseded::Superseded;
use crate::reconcile::validate::InvalidSpec;
use crate::reconciler::ReconcileFailure;
use crate::reconciler::connect::ConnectError;
use crate::render::RenderError;
use crate::temporal::TemporalError;

/// Rate-limited or raced Temporal calls retry quietly this many times in a row before the
/// status says so: a finished rollout must not flap `Ready` for GitOps tools.
pub const QUIET_RETRIES: u32 = 5;

/// Why a reconcile could not finish: one variant per stage or cause, each keeping its typed
/// source. Messages are user-facing (they land in conditions).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Validate: the spec is invalid (controller checks). Needs a spec change.
    #[error(transparent)]
    InvalidSpec(#[from] SpecRefusal),
    /// Act: the API server refused a rendered Deployment with 422. Needs a spec change.
    #[error(
        "{step}: the API server refused the rendered Deployment; fix the TWD's pod template: {}",
        api_message(source)
    )]
    RenderedInvalid {
        step: WriteStep,
        #[source]
        source: kube::Error,
    },
    /// Observe: no Temporal client (Connection, its Secret, credentials or dialling).
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Observe: the gate input (ConfigMap/Secret key) could not be resolved.
    #[error("{0}")]
    GateInputUnavailable(String),
    /// Observe: listing the versioned Deployments failed.
    #[error("listing versioned Deployments: {0}")]
    DeploymentsUnreadable(#[source] kube::Error),
    /// Observe: a read of Temporal's state failed.
    #[error("{what}: {source}")]
    StateFetchFailed {
        what: String,
        #[source]
        source: TemporalError,
    },
    /// Observe: Temporal rate-limited DescribeWorkerDeployment; nothing was planned.
    #[error("rate limited by Temporal describing worker deployment {name:?}: {source}")]
    StateFetchThrottled {
        name: String,
        #[source]
        source: TemporalError,
    },
    /// Act: adding our finalizer to the TWD failed.
    #[error("adding finalizer {finalizer}: {0}", finalizer = crate::api::FINALIZER)]
    FinalizerFailed(#[source] kube::Error),
    /// Act: a Kubernetes or Temporal write of the plan failed.
    #[error("{step}: {source}")]
    ExecutionFailed {
        step: WriteStep,
        #[source]
        source: WriteError,
    },
    /// Act: a Temporal write was refused with a stale conflict token: someone else moved first.
    #[error("{step}: {source}")]
    WriteRaced {
        step: WriteStep,
        #[source]
        source: TemporalError,
    },
    /// Act: Temporal rate-limited a write of the plan.
    #[error("{step}: {source}")]
    WriteThrottled {
        step: WriteStep,
        #[source]
        source: TemporalError,
    },
    /// Act: another identity holds the routing manager role in Temporal.
    #[error(
        "routing is managed by {owner:?} in Temporal; the controller will resume when that identity releases it"
    )]
    ManagedElsewhere { owner: String },
    /// Report: the status write failed (not a stale object: that is [`Outcome::Stale`]).
    #[error("writing status: {0}")]
    StatusWriteFailed(#[source] kube::Error),
    /// Deletion: a Kubernetes step of the cleanup failed; the finalizer stays.
    #[error("{step}: {source}")]
    CleanupStepFailed {
        step: CleanupStep,
        #[source]
        source: kube::Error,
    },
    /// Deletion: Temporal still remembers the version's pollers (or cannot be reached); the
    /// finalizer stays.
    #[error(
        "cleaning up Temporal state (workers stopped; Temporal forgets their pollers after matching.PollerHistoryTTL, 5m by default): {0}"
    )]
    CleanupPending(#[source] CleanupError),
    /// Deletion: the Connection is gone, so Temporal cannot be reached; the finalizer stays
    /// until the Connection is back or a person removes the finalizer on purpose.
    #[error(
        "Temporal cleanup waits for TemporalConnection {name:?}, which is gone: recreate it, or remove finalizer {finalizer} from this object to leave its worker deployment in Temporal",
        finalizer = crate::api::FINALIZER
    )]
    CleanupNeedsConnection { name: String },
    /// Act: the API server refuses new objects in a namespace being deleted; the TWD's own
    /// deletion follows, so this is neither a plan failure nor worth a retry.
    #[error("{step}: the namespace is being deleted: {}", api_message(source))]
    NamespaceTerminating {
        step: WriteStep,
        #[source]
        source: kube::Error,
    },
}

/// Why the spec is not acted on.
#[derive(Debug, thiserror::Error)]
pub enum SpecRefusal {
    /// It breaks a rule of the validate stage.
    #[error(transparent)]
    Invalid(#[from] InvalidSpec),
    /// A seed-kind object stands down for the canonical kind.
    #[error(transparent)]
    Superseded(#[from] Superseded),
}

/// A failed write of the act stage.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Temporal(#[from] TemporalError),
    /// The versioned Deployment could not be rendered (a bug or an impossible spec).
    #[error(transparent)]
    Render(#[from] RenderError),
}

/// Why Temporal cleanup of a deleted TWD failed.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Temporal(#[from] TemporalError),
}

/// The API server's own message of a refused request.
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

impl Failure {
    /// The condition reason (from [`crate::api::conditions`]) and metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Failure::InvalidSpec(_) | Failure::RenderedInvalid { .. } => reason::INVALID_SPEC,
            Failure::Connect(
                ConnectError::ConnectionNotFound { .. }
                | ConnectError::ClusterConnectionNotFound { .. }
                | ConnectError::ConnectionUnreadable { .. },
            ) => reason::CONNECTION_NOT_FOUND,
            Failure::Connect(ConnectError::ClusterConnectionUnsupported { .. }) => {
                reason::CLUSTER_CONNECTION_UNSUPPORTED
            }
            Failure::Connect(e) if e.is_auth() => reason::AUTH_SECRET_INVALID,
            Failure::Connect(ConnectError::Claim(crate::shard::ClaimError::OtherShard {
                ..
            })) => reason::TEMPORAL_NAMESPACE_IN_OTHER_SHARD,
            Failure::Connect(_) => reason::CLIENT_CREATION_FAILED,
            Failure::GateInputUnavailable(_) => reason::PLAN_GENERATION_FAILED,
            Failure::StateFetchFailed { .. } | Failure::StateFetchThrottled { .. } => {
                reason::STATE_FETCH_FAILED
            }
            Failure::DeploymentsUnreadable(_)
            | Failure::FinalizerFailed(_)
            | Failure::ExecutionFailed { .. }
            | Failure::WriteRaced { .. }
            | Failure::WriteThrottled { .. }
            | Failure::StatusWriteFailed(_) => reason::PLAN_EXECUTION_FAILED,
            Failure::ManagedElsewhere { .. } => reason::MANAGED_ELSEWHERE,
            Failure::CleanupStepFailed { .. }
            | Failure::CleanupPending(_)
            | Failure::NamespaceTerminating { .. } => reason::DELETING,
            Failure::CleanupNeedsConnection { .. } => reason::CONNECTION_NOT_FOUND,
        }
    }
}

impl ReconcileFailure for Failure {
    fn reason(&self) -> &'static str {
        Failure::reason(self)
    }
}

/// How one reconcile ended.
#[derive(Debug)]
pub enum Outcome {
    /// Everything planned was done.
    Done,
    /// The object changed since it was read (409): look again with the fresh object.
    Stale,
    Failed(Failure),
}

/// What the conditions should say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conditions {
    /// Derived from the plan's progress; a failure, if any, is being retried quietly.
    FromPlan,
    /// The failure's reason, retried (`Reconciling=True`).
    Blocked,
    /// The failure's reason, terminal (`Stalled=True`).
    Stalled,
    /// Leave the status as it is (nothing was planned, and the failure is retried quietly).
    Unchanged,
}

/// When to look again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// At the plan's next deadline, at the latest after the idle interval.
    Planned,
    /// `--fast-poll`: a race that the next look resolves.
    FastPoll,
    /// While another identity manages routing: `--fast-poll`, at least 2 s.
    ManagerPoll,
    /// Exponential backoff for this many failures in a row.
    Backoff(u32),
    /// Backoff with jitter, so that many rate-limited rollouts do not retry in lockstep.
    Throttled(u32),
    /// The idle interval: only a spec change helps, but a relaxed policy is noticed.
    Idle,
    /// Only a spec change helps.
    AwaitChange,
    /// Almost at once: our cached object was older than our last write.
    Stale,
    /// Soon, fixed (a status write failed).
    Soon,
    /// Deletion cleanup: Temporal forgets pollers on its own schedule.
    Cleanup,
}

/// The decision of one reconcile: what the status says and when to look again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub conditions: Conditions,
    pub requeue: Requeue,
}

/// Pure: how a reconcile ended (`outcome`) and how many reconciles in a row have failed,
/// this one included (`streak`), to conditions and requeue.
pub fn verdict(outcome: &Outcome, streak: u32) -> Verdict {
    let v = |conditions, requeue| Verdict {
        conditions,
        requeue,
    };
    let quiet = streak < QUIET_RETRIES;
    let failure = match outcome {
        Outcome::Done => return v(Conditions::FromPlan, Requeue::Planned),
        Outcome::Stale => return v(Conditions::Unchanged, Requeue::Stale),
        Outcome::Failed(f) => f,
    };
    match failure {
        Failure::InvalidSpec(_)
        | Failure::Connect(ConnectError::ClusterConnectionUnsupported { .. }) => {
            v(Conditions::Stalled, Requeue::AwaitChange)
        }
        Failure::RenderedInvalid { .. } => v(Conditions::Stalled, Requeue::Idle),
        Failure::Connect(_)
        | Failure::GateInputUnavailable(_)
        | Failure::DeploymentsUnreadable(_)
        | Failure::StateFetchFailed { .. }
        | Failure::FinalizerFailed(_)
        | Failure::ExecutionFailed { .. } => v(Conditions::Blocked, Requeue::Backoff(streak)),
        Failure::StateFetchThrottled { .. } if quiet => {
            v(Conditions::Unchanged, Requeue::Throttled(streak))
        }
        Failure::StateFetchThrottled { .. } => v(Conditions::Blocked, Requeue::Throttled(streak)),
        Failure::WriteRaced { .. } if quiet => v(Conditions::FromPlan, Requeue::FastPoll),
        Failure::WriteRaced { .. } => v(Conditions::Blocked, Requeue::FastPoll),
        Failure::WriteThrottled { .. } if quiet => {
            v(Conditions::FromPlan, Requeue::Throttled(streak))
        }
        Failure::WriteThrottled { .. } => v(Conditions::Blocked, Requeue::Throttled(streak)),
        Failure::ManagedElsewhere { .. } => v(Conditions::Blocked, Requeue::ManagerPoll),
        Failure::StatusWriteFailed(_) => v(Conditions::Blocked, Requeue::Soon),
        Failure::CleanupStepFailed { .. } | Failure::CleanupPending(_) => {
            v(Conditions::Blocked, Requeue::Cleanup)
        }
        // A recreated Connection requeues the TWD through the Connection watch.
        Failure::CleanupNeedsConnection { .. } => v(Conditions::Blocked, Requeue::Backoff(streak)),
        Failure::NamespaceTerminating { .. } => v(Conditions::Unchanged, Requeue::AwaitChange),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kube() -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("m", "Reason")
                .with_code(500)
                .boxed(),
        )
    }

    fn temporal() -> TemporalError {
        TemporalError::Rpc {
            method: "DescribeWorkerDeployment",
            code: temporalio_client::tonic::Code::Unavailable,
            message: "m".into(),
        }
    }

    fn connect(which: &str) -> Failure {
        let name = || "m".to_string();
        Failure::Connect(match which {
            "connection" => ConnectError::ConnectionNotFound {
                kind: "Connection",
                name: name(),
                namespace: name(),
            },
            "auth" => ConnectError::SecretNotFound {
                name: name(),
                namespace: name(),
            },
            _ => ConnectError::ClientCreationFailed {
                address: name(),
                source: temporal(),
            },
        })
    }

    #[test]
    fn a_cluster_connection_under_a_namespaced_install_stalls_until_the_spec_changes() {
        let f = Failure::Connect(ConnectError::ClusterConnectionUnsupported {
            name: "shared".into(),
        });
        assert_eq!(f.reason(), reason::CLUSTER_CONNECTION_UNSUPPORTED);
        let v = verdict(&Outcome::Failed(f), 1);
        assert_eq!(v.conditions, Conditions::Stalled);
        assert_eq!(v.requeue, Requeue::AwaitChange);
        let missing = Failure::Connect(ConnectError::ClusterConnectionNotFound {
            name: "shared".into(),
        });
        assert_eq!(missing.reason(), reason::CONNECTION_NOT_FOUND);
        assert_eq!(
            missing.to_string(),
            r#"ClusterConnection "shared" not found"#
        );
    }

    /// One of each kind, by variant name.
    fn sample(kind: &str) -> Failure {
        let m = || "m".to_string();
        match kind {
            "InvalidSpec" => {
                Failure::InvalidSpec(SpecRefusal::Invalid(InvalidSpec { message: m() }))
            }
            "RenderedInvalid" => Failure::RenderedInvalid {
                step: WriteStep::CreateDeployment,
                source: kube(),
            },
            "ConnectionNotFound" => connect("connection"),
            "AuthSecretInvalid" => connect("auth"),
            "ClientCreationFailed" => connect("client"),
            "GateInputUnavailable" => Failure::GateInputUnavailable(m()),
            "DeploymentsUnreadable" => Failure::DeploymentsUnreadable(kube()),
            "StateFetchFailed" => Failure::StateFetchFailed {
                what: m(),
                source: temporal(),
            },
            "StateFetchThrottled" => Failure::StateFetchThrottled {
                name: m(),
                source: temporal(),
            },
            "FinalizerFailed" => Failure::FinalizerFailed(kube()),
            "ExecutionFailed" => Failure::ExecutionFailed {
                step: WriteStep::ScaleDeployment,
                source: WriteError::Kube(kube()),
            },
            "WriteRaced" => Failure::WriteRaced {
                step: WriteStep::ChangeRouting,
                source: temporal(),
            },
            "WriteThrottled" => Failure::WriteThrottled {
                step: WriteStep::ChangeRouting,
                source: temporal(),
            },
            "ManagedElsewhere" => Failure::ManagedElsewhere { owner: m() },
            "StatusWriteFailed" => Failure::StatusWriteFailed(kube()),
            "CleanupStepFailed" => Failure::CleanupStepFailed {
                step: CleanupStep::RemoveFinalizer,
                source: kube(),
            },
            "CleanupPending" => Failure::CleanupPending(CleanupError::Temporal(temporal())),
            "CleanupNeedsConnection" => Failure::CleanupNeedsConnection { name: m() },
            "NamespaceTerminating" => Failure::NamespaceTerminating {
                step: WriteStep::CreateDeployment,
                source: kube(),
            },
            other => panic!("no sample failure {other}"),
        }
    }

    fn all_failures() -> Vec<Failure> {
        [
            "InvalidSpec",
            "RenderedInvalid",
            "ConnectionNotFound",
            "AuthSecretInvalid",
            "ClientCreationFailed",
            "GateInputUnavailable",
            "DeploymentsUnreadable",
            "StateFetchFailed",
            "StateFetchThrottled",
            "FinalizerFailed",
            "ExecutionFailed",
            "WriteRaced",
            "WriteThrottled",
            "ManagedElsewhere",
            "StatusWriteFailed",
            "CleanupStepFailed",
            "CleanupPending",
            "CleanupNeedsConnection",
            "NamespaceTerminating",
        ]
        .into_iter()
        .map(sample)
        .collect()
    }

    /// Adding a variant breaks this match until it is listed in `all_failures` (and so gets
    /// a row below).
    fn listed(f: &Failure) -> bool {
        match f {
            Failure::InvalidSpec(_)
            | Failure::RenderedInvalid { .. }
            | Failure::Connect(_)
            | Failure::GateInputUnavailable(_)
            | Failure::DeploymentsUnreadable(_)
            | Failure::StateFetchFailed { .. }
            | Failure::StateFetchThrottled { .. }
            | Failure::FinalizerFailed(_)
            | Failure::ExecutionFailed { .. }
            | Failure::WriteRaced { .. }
            | Failure::WriteThrottled { .. }
            | Failure::ManagedElsewhere { .. }
            | Failure::StatusWriteFailed(_)
            | Failure::CleanupStepFailed { .. }
            | Failure::CleanupPending(_)
            | Failure::CleanupNeedsConnection { .. }
            | Failure::NamespaceTerminating { .. } => true,
        }
    }

    fn failed(f: Failure) -> Outcome {
        Outcome::Failed(f)
    }

    type Row = (&'static str, Outcome, u32, Conditions, Requeue);

    /// One row per way a reconcile ends: name, outcome, streak, conditions, requeue.
    fn verdict_rows() -> Vec<Row> {
        let mut rows = settled_rows();
        rows.extend(retried_rows());
        rows.extend(deletion_rows());
        rows
    }

    /// Rows that end, stall or block at once.
    fn settled_rows() -> Vec<Row> {
        use Conditions::*;
        vec![
            (
                "done: conditions from the plan, next deadline",
                Outcome::Done,
                0,
                FromPlan,
                Requeue::Planned,
            ),
            (
                "409 on status: quick quiet retry",
                Outcome::Stale,
                0,
                Unchanged,
                Requeue::Stale,
            ),
            (
                "invalid spec: stalled until the spec changes",
                failed(sample("InvalidSpec")),
                1,
                Stalled,
                Requeue::AwaitChange,
            ),
            (
                "422 on a rendered Deployment: stalled, idle look",
                failed(sample("RenderedInvalid")),
                1,
                Stalled,
                Requeue::Idle,
            ),
            (
                "connection missing: blocked, backoff",
                failed(sample("ConnectionNotFound")),
                3,
                Blocked,
                Requeue::Backoff(3),
            ),
            (
                "auth secret: blocked, backoff",
                failed(sample("AuthSecretInvalid")),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "client: blocked, backoff",
                failed(sample("ClientCreationFailed")),
                2,
                Blocked,
                Requeue::Backoff(2),
            ),
            (
                "gate input: blocked, backoff",
                failed(sample("GateInputUnavailable")),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "deployments unreadable: blocked, backoff",
                failed(sample("DeploymentsUnreadable")),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "describe failed: blocked, backoff",
                failed(sample("StateFetchFailed")),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "describe throttled: quiet retry",
                failed(sample("StateFetchThrottled")),
                1,
                Unchanged,
                Requeue::Throttled(1),
            ),
        ]
    }

    /// The rest: retried quietly first, or with their own requeue.
    fn retried_rows() -> Vec<Row> {
        use Conditions::*;
        vec![
            (
                "describe throttled 4x: still quiet",
                failed(sample("StateFetchThrottled")),
                4,
                Unchanged,
                Requeue::Throttled(4),
            ),
            (
                "describe throttled 5x: reported",
                failed(sample("StateFetchThrottled")),
                5,
                Blocked,
                Requeue::Throttled(5),
            ),
            (
                "finalizer: blocked, backoff",
                failed(sample("FinalizerFailed")),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "execution: blocked, backoff",
                failed(sample("ExecutionFailed")),
                2,
                Blocked,
                Requeue::Backoff(2),
            ),
            (
                "stale conflict token: plan status, fast poll",
                failed(sample("WriteRaced")),
                1,
                FromPlan,
                Requeue::FastPoll,
            ),
            (
                "stale conflict token 5x: reported",
                failed(sample("WriteRaced")),
                5,
                Blocked,
                Requeue::FastPoll,
            ),
            (
                "write throttled: plan status, jittered",
                failed(sample("WriteThrottled")),
                2,
                FromPlan,
                Requeue::Throttled(2),
            ),
            (
                "write throttled 6x: reported",
                failed(sample("WriteThrottled")),
                6,
                Blocked,
                Requeue::Throttled(6),
            ),
            (
                "managed elsewhere: reported at once",
                failed(sample("ManagedElsewhere")),
                1,
                Blocked,
                Requeue::ManagerPoll,
            ),
            (
                "status write failed: reported, soon",
                failed(sample("StatusWriteFailed")),
                1,
                Blocked,
                Requeue::Soon,
            ),
            (
                "deletion step failed: reported",
                failed(sample("CleanupStepFailed")),
                1,
                Blocked,
                Requeue::Cleanup,
            ),
            (
                "deletion cleanup pending: reported",
                failed(sample("CleanupPending")),
                1,
                Blocked,
                Requeue::Cleanup,
            ),
        ]
    }

    /// Deletion and a namespace being deleted.
    fn deletion_rows() -> Vec<Row> {
        use Conditions::*;
        vec![
            (
                "deletion without its Connection: reported, finalizer kept",
                failed(sample("CleanupNeedsConnection")),
                2,
                Blocked,
                Requeue::Backoff(2),
            ),
            (
                "namespace being deleted: quiet, the TWD's deletion follows",
                failed(sample("NamespaceTerminating")),
                1,
                Unchanged,
                Requeue::AwaitChange,
            ),
        ]
    }

    #[test]
    fn verdict_table() {
        let rows = verdict_rows();
        for (name, outcome, streak, conditions, requeue) in &rows {
            assert_eq!(
                verdict(outcome, *streak),
                Verdict {
                    conditions: *conditions,
                    requeue: *requeue
                },
                "{name}"
            );
        }
        // Every failure kind has at least one row.
        for f in all_failures() {
            assert!(listed(&f));
            assert!(
                rows.iter().any(|(_, o, ..)| matches!(o, Outcome::Failed(x) if std::mem::discriminant(x) == std::mem::discriminant(&f))),
                "no verdict row for {f:?}"
            );
        }
    }

    #[test]
    fn only_spec_problems_stall() {
        for f in all_failures() {
            let spec_problem = f.reason() == reason::INVALID_SPEC;
            let name = format!("{f:?}");
            let stalled = verdict(&failed(f), 1).conditions == Conditions::Stalled;
            assert_eq!(stalled, spec_problem, "{name}");
        }
    }

    #[test]
    fn every_reason_is_a_documented_condition_reason() {
        for f in all_failures() {
            assert!(
                reason::ALL.iter().any(|r| r.reason == f.reason()),
                "{f:?} has an undeclared reason {}",
                f.reason()
            );
        }
    }

    #[test]
    fn failures_from_kubernetes_or_temporal_keep_their_typed_source() {
        // Only the controller's own findings (an object that is not there) carry no source.
        let own = [
            "InvalidSpec",
            "GateInputUnavailable",
            "ManagedElsewhere",
            "Connect(ConnectionNotFound",
            "Connect(SecretNotFound",
            "CleanupNeedsConnection",
        ];
        for f in all_failures() {
            let name = format!("{f:?}");
            let mine = own.iter().any(|o| name.starts_with(o));
            let source = std::error::Error::source(&f).is_some()
                || matches!(&f, Failure::Connect(c) if std::error::Error::source(c).is_some());
            assert_eq!(source, !mine, "{name}");
        }
    }
}
