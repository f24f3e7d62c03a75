//! One failure vocabulary and the pure verdict.
//!
//! Every stage fails with a [`Failure`]; [`Failure::reason`] is the documented condition reason
//! and also the `reason` label of `reconcile_errors_total`. [`verdict`] turns how a reconcile
//! ended into what the conditions say and when to look again. It is an exhaustive match over
//! [`Failure`], so a new failure kind cannot be added without deciding its row (and the
//! table-driven tests below name every kind).

use std::time::Duration;

use crate::api::conditions as reason;

/// Rate-limited or raced Temporal calls retry quietly this many times in a row before the
/// status says so: a finished rollout must not flap `Ready` for GitOps tools.
pub const QUIET_RETRIES: u32 = 5;

/// Why a reconcile could not finish. Messages are user-facing (they land in conditions).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The spec is invalid (controller checks). Needs a spec change.
    #[error("{0}")]
    InvalidSpec(String),
    /// The API server refused a rendered Deployment with 422. Needs a spec change.
    #[error("{0}")]
    RenderedInvalid(String),
    #[error("{0}")]
    ConnectionNotFound(String),
    #[error("{0}")]
    AuthSecretInvalid(String),
    #[error("{0}")]
    ClientCreationFailed(String),
    /// The gate input (ConfigMap/Secret key) could not be resolved.
    #[error("{0}")]
    GateInputUnavailable(String),
    /// Listing the versioned Deployments failed.
    #[error("{0}")]
    DeploymentsUnreadable(String),
    #[error("{0}")]
    StateFetchFailed(String),
    /// Temporal rate-limited DescribeWorkerDeployment; nothing was planned.
    #[error("{0}")]
    StateFetchThrottled(String),
    /// Adding our finalizer to the TWD failed.
    #[error("{0}")]
    FinalizerFailed(String),
    /// A Kubernetes or Temporal write of the plan failed.
    #[error("{0}")]
    ExecutionFailed(String),
    /// A Temporal write was refused with a stale conflict token: someone else moved first.
    #[error("{0}")]
    WriteRaced(String),
    /// Temporal rate-limited a write of the plan.
    #[error("{0}")]
    WriteThrottled(String),
    /// Another identity holds the routing manager role in Temporal.
    #[error(
        "routing is managed by {owner:?} in Temporal; the controller will resume when that identity releases it"
    )]
    ManagedElsewhere { owner: String },
    /// The status write failed (not a stale object: that is [`Outcome::Stale`]).
    #[error("writing status: {0}")]
    StatusWriteFailed(String),
    /// Deletion: Temporal still remembers the version's pollers; the finalizer stays.
    #[error("{0}")]
    CleanupPending(String),
}

impl Failure {
    /// The condition reason (from [`crate::api::conditions`]) and metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Failure::InvalidSpec(_) | Failure::RenderedInvalid(_) => reason::INVALID_SPEC,
            Failure::ConnectionNotFound(_) => reason::CONNECTION_NOT_FOUND,
            Failure::AuthSecretInvalid(_) => reason::AUTH_SECRET_INVALID,
            Failure::ClientCreationFailed(_) => reason::CLIENT_CREATION_FAILED,
            Failure::GateInputUnavailable(_) => reason::PLAN_GENERATION_FAILED,
            Failure::StateFetchFailed(_) | Failure::StateFetchThrottled(_) => {
                reason::STATE_FETCH_FAILED
            }
            Failure::DeploymentsUnreadable(_)
            | Failure::FinalizerFailed(_)
            | Failure::ExecutionFailed(_)
            | Failure::WriteRaced(_)
            | Failure::WriteThrottled(_)
            | Failure::StatusWriteFailed(_) => reason::PLAN_EXECUTION_FAILED,
            Failure::ManagedElsewhere { .. } => reason::MANAGED_ELSEWHERE,
            Failure::CleanupPending(_) => reason::DELETING,
        }
    }
}

/// How one reconcile ended.
#[derive(Clone, Debug, PartialEq, Eq)]
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
        Failure::InvalidSpec(_) => v(Conditions::Stalled, Requeue::AwaitChange),
        Failure::RenderedInvalid(_) => v(Conditions::Stalled, Requeue::Idle),
        Failure::ConnectionNotFound(_)
        | Failure::AuthSecretInvalid(_)
        | Failure::ClientCreationFailed(_)
        | Failure::GateInputUnavailable(_)
        | Failure::DeploymentsUnreadable(_)
        | Failure::StateFetchFailed(_)
        | Failure::FinalizerFailed(_)
        | Failure::ExecutionFailed(_) => v(Conditions::Blocked, Requeue::Backoff(streak)),
        Failure::StateFetchThrottled(_) if quiet => {
            v(Conditions::Unchanged, Requeue::Throttled(streak))
        }
        Failure::StateFetchThrottled(_) => v(Conditions::Blocked, Requeue::Throttled(streak)),
        Failure::WriteRaced(_) if quiet => v(Conditions::FromPlan, Requeue::FastPoll),
        Failure::WriteRaced(_) => v(Conditions::Blocked, Requeue::FastPoll),
        Failure::WriteThrottled(_) if quiet => v(Conditions::FromPlan, Requeue::Throttled(streak)),
        Failure::WriteThrottled(_) => v(Conditions::Blocked, Requeue::Throttled(streak)),
        Failure::ManagedElsewhere { .. } => v(Conditions::Blocked, Requeue::ManagerPoll),
        Failure::StatusWriteFailed(_) => v(Conditions::Blocked, Requeue::Soon),
        Failure::CleanupPending(_) => v(Conditions::Blocked, Requeue::Cleanup),
    }
}

/// 0.5 s, 1 s, 2 s … capped at 30 s: quick recovery once the fault is fixed.
pub fn backoff(streak: u32) -> Duration {
    let exp = i32::try_from(streak.saturating_sub(1).min(6)).unwrap_or(6);
    Duration::from_secs_f64((0.5 * 2f64.powi(exp)).min(30.0))
}

/// [`backoff`] plus up to 50 % jitter, `jitter` in `0.0..1.0`.
pub fn jittered(streak: u32, jitter: f64) -> Duration {
    backoff(streak).mul_f64(1.0 + jitter.clamp(0.0, 1.0) * 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_failures() -> Vec<Failure> {
        let m = || "m".to_string();
        vec![
            Failure::InvalidSpec(m()),
            Failure::RenderedInvalid(m()),
            Failure::ConnectionNotFound(m()),
            Failure::AuthSecretInvalid(m()),
            Failure::ClientCreationFailed(m()),
            Failure::GateInputUnavailable(m()),
            Failure::DeploymentsUnreadable(m()),
            Failure::StateFetchFailed(m()),
            Failure::StateFetchThrottled(m()),
            Failure::FinalizerFailed(m()),
            Failure::ExecutionFailed(m()),
            Failure::WriteRaced(m()),
            Failure::WriteThrottled(m()),
            Failure::ManagedElsewhere { owner: m() },
            Failure::StatusWriteFailed(m()),
            Failure::CleanupPending(m()),
        ]
    }

    /// Adding a variant breaks this match until it is listed in `all_failures` (and so gets
    /// a row below).
    fn listed(f: &Failure) -> bool {
        match f {
            Failure::InvalidSpec(_)
            | Failure::RenderedInvalid(_)
            | Failure::ConnectionNotFound(_)
            | Failure::AuthSecretInvalid(_)
            | Failure::ClientCreationFailed(_)
            | Failure::GateInputUnavailable(_)
            | Failure::DeploymentsUnreadable(_)
            | Failure::StateFetchFailed(_)
            | Failure::StateFetchThrottled(_)
            | Failure::FinalizerFailed(_)
            | Failure::ExecutionFailed(_)
            | Failure::WriteRaced(_)
            | Failure::WriteThrottled(_)
            | Failure::ManagedElsewhere { .. }
            | Failure::StatusWriteFailed(_)
            | Failure::CleanupPending(_) => true,
        }
    }

    fn failed(f: Failure) -> Outcome {
        Outcome::Failed(f)
    }

    #[test]
    fn verdict_table() {
        use Conditions::*;
        let m = || "m".to_string();
        let rows: Vec<(&str, Outcome, u32, Conditions, Requeue)> = vec![
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
                failed(Failure::InvalidSpec(m())),
                1,
                Stalled,
                Requeue::AwaitChange,
            ),
            (
                "422 on a rendered Deployment: stalled, idle look",
                failed(Failure::RenderedInvalid(m())),
                1,
                Stalled,
                Requeue::Idle,
            ),
            (
                "connection missing: blocked, backoff",
                failed(Failure::ConnectionNotFound(m())),
                3,
                Blocked,
                Requeue::Backoff(3),
            ),
            (
                "auth secret: blocked, backoff",
                failed(Failure::AuthSecretInvalid(m())),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "client: blocked, backoff",
                failed(Failure::ClientCreationFailed(m())),
                2,
                Blocked,
                Requeue::Backoff(2),
            ),
            (
                "gate input: blocked, backoff",
                failed(Failure::GateInputUnavailable(m())),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "deployments unreadable: blocked, backoff",
                failed(Failure::DeploymentsUnreadable(m())),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "describe failed: blocked, backoff",
                failed(Failure::StateFetchFailed(m())),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "describe throttled: quiet retry",
                failed(Failure::StateFetchThrottled(m())),
                1,
                Unchanged,
                Requeue::Throttled(1),
            ),
            (
                "describe throttled 4x: still quiet",
                failed(Failure::StateFetchThrottled(m())),
                4,
                Unchanged,
                Requeue::Throttled(4),
            ),
            (
                "describe throttled 5x: reported",
                failed(Failure::StateFetchThrottled(m())),
                5,
                Blocked,
                Requeue::Throttled(5),
            ),
            (
                "finalizer: blocked, backoff",
                failed(Failure::FinalizerFailed(m())),
                1,
                Blocked,
                Requeue::Backoff(1),
            ),
            (
                "execution: blocked, backoff",
                failed(Failure::ExecutionFailed(m())),
                2,
                Blocked,
                Requeue::Backoff(2),
            ),
            (
                "stale conflict token: plan status, fast poll",
                failed(Failure::WriteRaced(m())),
                1,
                FromPlan,
                Requeue::FastPoll,
            ),
            (
                "stale conflict token 5x: reported",
                failed(Failure::WriteRaced(m())),
                5,
                Blocked,
                Requeue::FastPoll,
            ),
            (
                "write throttled: plan status, jittered",
                failed(Failure::WriteThrottled(m())),
                2,
                FromPlan,
                Requeue::Throttled(2),
            ),
            (
                "write throttled 6x: reported",
                failed(Failure::WriteThrottled(m())),
                6,
                Blocked,
                Requeue::Throttled(6),
            ),
            (
                "managed elsewhere: reported at once",
                failed(Failure::ManagedElsewhere { owner: m() }),
                1,
                Blocked,
                Requeue::ManagerPoll,
            ),
            (
                "status write failed: reported, soon",
                failed(Failure::StatusWriteFailed(m())),
                1,
                Blocked,
                Requeue::Soon,
            ),
            (
                "deletion cleanup pending: reported",
                failed(Failure::CleanupPending(m())),
                1,
                Blocked,
                Requeue::Cleanup,
            ),
        ];
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
            let stalled = verdict(&failed(f.clone()), 1).conditions == Conditions::Stalled;
            assert_eq!(stalled, f.reason() == reason::INVALID_SPEC, "{f:?}");
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
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(3), Duration::from_secs(2));
        assert_eq!(backoff(100), Duration::from_secs(30));
        assert_eq!(backoff(0), Duration::from_millis(500));
        assert_eq!(jittered(1, 1.0), Duration::from_millis(750));
        assert_eq!(jittered(1, 0.0), Duration::from_millis(500));
    }
}
