//! The report stage: the only place that writes status and events and counts failures, all
//! from one [`Attempt`] and its [`Verdict`].

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use crate::api::TemporalWorkerDeployment;
use crate::api::conditions as reason;
use crate::api::twd::{TemporalWorkerDeploymentStatus, VersionStatus};
use crate::events;
use crate::metrics::ControllerKind;
use crate::planner::gates;
use crate::planner::model::{PinnedAction, PinnedBatch, RoutingChange};
use crate::reconcile::act::Done;
use crate::reconcile::outcome::{self, Conditions, Requeue};
use crate::reconcile::{Attempt, Context, Failure, Outcome, Planned, Verdict, verdict};
use crate::status::{self, Blocked, Report};

/// Retry delay after a status write lost a race with the watch cache.
const STALE_RETRY: Duration = Duration::from_millis(200);
/// Retry delay after a status write failed for another reason.
const SOON: Duration = Duration::from_secs(1);
/// How often deletion cleanup retries while Temporal still remembers pollers.
const CLEANUP_RETRY: Duration = Duration::from_secs(5);
/// Least interval between looks while another identity manages routing.
const MANAGER_POLL_MIN: Duration = Duration::from_secs(2);

pub async fn report(ctx: &Context, mut attempt: Attempt) -> Action {
    let (decided, streak) = decide(ctx, &attempt);
    if attempt.twd.metadata.deletion_timestamp.is_some() {
        ctx.forget_write(&attempt.twd);
    }
    if let Some(planned) = &attempt.planned {
        milestones(ctx, &attempt.twd, planned).await;
    }
    let mut written = write_new(ctx, &attempt, &decided, streak).await;
    if matches!(written, Err(Outcome::Stale))
        && let Some(newer) = after_own_write(ctx, &attempt)
    {
        // The routing change is already made in Temporal: record it now rather than on the
        // next reconcile, which may come after the step has ended, so that no observer of
        // the status misses a step.
        attempt.twd = newer;
        written = write_new(ctx, &attempt, &decided, streak).await;
    }
    match written {
        Ok(()) => requeue(ctx, decided.requeue, attempt.planned.as_ref()),
        Err(Outcome::Stale) => requeue(ctx, Requeue::Stale, None),
        Err(outcome) => {
            // The status could not be written: say so in the status if at all possible.
            let retry = Attempt {
                outcome,
                planned: None,
                twd: attempt.twd,
            };
            let (decided, streak) = decide(ctx, &retry);
            if let Some(status) = new_status(&retry, &decided, streak) {
                let _ = write(ctx, &retry, status).await;
            }
            requeue(ctx, decided.requeue, None)
        }
    }
}

async fn write_new(
    ctx: &Context,
    attempt: &Attempt,
    decided: &Verdict,
    streak: u32,
) -> Result<(), Outcome> {
    match new_status(attempt, decided, streak) {
        None => Ok(()),
        Some(status) => write(ctx, attempt, status).await,
    }
}

/// After a 409 on a reconcile that changed routing: the object as our own last status write
/// left it, when that write is newer than the cached object the reconcile started from and
/// the spec is the one planned for (a spec change is planned afresh by the next reconcile).
/// No extra read: the cache lagging behind our own write is the usual cause of the 409.
fn after_own_write(ctx: &Context, attempt: &Attempt) -> Option<Arc<TemporalWorkerDeployment>> {
    routed(&attempt.planned.as_ref()?.done)?;
    let twd = &attempt.twd;
    let last = ctx.last_write(twd)?;
    let newer = last.uid == twd.metadata.uid
        && last.generation == twd.metadata.generation
        && last.resource_version != twd.metadata.resource_version;
    newer.then(|| {
        let mut obj = (**twd).clone();
        obj.metadata.resource_version = last.resource_version;
        obj.status = last.status;
        Arc::new(obj)
    })
}

/// Updates the failure streak, counts a failure once, and asks for the verdict.
fn decide(ctx: &Context, attempt: &Attempt) -> (Verdict, u32) {
    let streak = ctx.streak(&ObjectRef::from_obj(&*attempt.twd), &attempt.outcome);
    let decided = verdict(&attempt.outcome, streak);
    if let Outcome::Failed(f) = &attempt.outcome {
        // Counted once per failed reconcile, quiet retries included, by condition reason.
        ctx.metrics
            .reconcile_error(ControllerKind::WorkerDeployment, f.reason());
        tracing::info!(reason = f.reason(), message = %f, streak, ?decided, "reconcile failed");
    }
    (decided, streak)
}

fn requeue(ctx: &Context, r: Requeue, planned: Option<&Planned>) -> Action {
    let s = &ctx.settings;
    let after = match r {
        Requeue::Planned => match planned {
            // The plan's deadlines count from when the reconcile observed (`input.now`); the
            // timer starts now, so take off the time the reconcile took since then (at most
            // half the wait, so a slow reconcile never turns a poll into a busy loop).
            Some(p) => p
                .plan
                .requeue_after
                .map(|d| timer(d, since(p.input.now)))
                .unwrap_or(s.idle_interval),
            // Deletion finished, or nothing to do without a plan.
            None => return Action::await_change(),
        },
        Requeue::FastPoll => s.fast_poll,
        Requeue::ManagerPoll => s.fast_poll.max(MANAGER_POLL_MIN),
        Requeue::Backoff(n) => outcome::backoff(n),
        Requeue::Throttled(n) => outcome::jittered(n, jitter()),
        Requeue::Idle => s.idle_interval,
        Requeue::AwaitChange => return Action::await_change(),
        Requeue::Stale => STALE_RETRY,
        Requeue::Soon => SOON,
        Requeue::Cleanup => CLEANUP_RETRY,
    };
    Action::requeue(after.min(s.idle_interval))
}

/// The timer for a wait of `planned` decided `elapsed` ago: what is left of it, and at least
/// half of it.
fn timer(planned: Duration, elapsed: Duration) -> Duration {
    planned.saturating_sub(elapsed).max(planned / 2)
}

/// Wall time since `t` (zero if `t` is ahead).
fn since(t: Timestamp) -> Duration {
    Duration::try_from(Timestamp::now().duration_since(t)).unwrap_or_default()
}

/// 0.0..1.0 from the clock: enough to spread retries, no RNG dependency.
fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1000) / 1000.0
}

/// The status the verdict asks for; `None` leaves the status untouched.
fn new_status(
    attempt: &Attempt,
    verdict: &Verdict,
    streak: u32,
) -> Option<TemporalWorkerDeploymentStatus> {
    let blocked = |stalled| match &attempt.outcome {
        Outcome::Failed(f) => Some(Blocked {
            reason: f.reason(),
            message: message(f, streak),
            stalled,
        }),
        Outcome::Done | Outcome::Stale => None,
    };
    let result = match verdict.conditions {
        Conditions::Unchanged => return None,
        Conditions::FromPlan => Ok(()),
        Conditions::Blocked => Err(blocked(false)?),
        Conditions::Stalled => Err(blocked(true)?),
    };
    let report = match (&attempt.planned, result) {
        (Some(p), outcome) => Report::Planned {
            input: &p.input,
            plan: &p.plan,
            routed: routed(&p.done),
            outcome,
        },
        (None, Err(b)) => Report::Blocked(b),
        (None, Ok(())) => return None,
    };
    let twd = &attempt.twd;
    Some(status::compute(
        twd.status.as_ref(),
        twd.metadata.generation.unwrap_or_default(),
        &report,
        Timestamp::now(),
    ))
}

/// Quietly retried failures say how often they happened once they are reported.
fn message(f: &Failure, streak: u32) -> String {
    match f {
        Failure::StateFetchThrottled(_) | Failure::WriteRaced(_) | Failure::WriteThrottled(_)
            if streak > 1 =>
        {
            format!("{f} ({streak} attempts in a row)")
        }
        _ => f.to_string(),
    }
}

fn routed(done: &[Done]) -> Option<&RoutingChange> {
    done.iter().find_map(|d| match d {
        Done::Routed(r) => Some(r),
        _ => None,
    })
}

/// Writes the status (skipped when nothing changed: our own writes would otherwise
/// re-trigger reconciles forever), with one Warning event per transition into a blocking
/// reason, and counts newly finished gates once written.
async fn write(
    ctx: &Context,
    attempt: &Attempt,
    status: TemporalWorkerDeploymentStatus,
) -> Result<(), Outcome> {
    let twd = &attempt.twd;
    warn_on_transition(ctx, twd, &status).await;
    if twd.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut obj = (**twd).clone();
    obj.status = Some(status);
    let api: Api<TemporalWorkerDeployment> =
        Api::namespaced(ctx.client.clone(), &twd.namespace().unwrap_or_default());
    let res = api
        .replace_status(&twd.name_any(), &PostParams::default(), &obj)
        .await;
    ctx.metrics
        .kube_write("update", "temporalworkerdeployments/status", res.is_ok());
    match res {
        Ok(updated) => {
            ctx.remember_write(&updated);
            let _ = ctx.feed.send(Arc::new(updated));
            if let Some(p) = &attempt.planned {
                // Counted only once written, so a retried reconcile does not count a gate twice.
                for outcome in gates::newly_finished(recorded_gates(twd), &p.input.gates) {
                    ctx.metrics.gate_outcome(outcome);
                }
            }
            Ok(())
        }
        // Reconciled from a cached object older than our last write: the plan was
        // idempotent, so just look again with the fresh object.
        Err(kube::Error::Api(s)) if s.code == 409 => Err(Outcome::Stale),
        Err(e) => Err(Outcome::Failed(Failure::StatusWriteFailed(e.to_string()))),
    }
}

fn recorded_gates(twd: &TemporalWorkerDeployment) -> &[crate::api::twd::GateWorkflow] {
    twd.status
        .as_ref()
        .and_then(|s| s.target_version.as_ref())
        .map(|t| t.gate_workflows.as_slice())
        .unwrap_or_default()
}

/// One Warning event per transition into any blocking reason: failures and planned blocks
/// alike (failed gate, too many versions, routing managed elsewhere). No storms on retries.
async fn warn_on_transition(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    status: &TemporalWorkerDeploymentStatus,
) {
    let progressing = |s: &TemporalWorkerDeploymentStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == reason::PROGRESSING)
            .cloned()
    };
    let Some(p) = progressing(status) else {
        return;
    };
    // A pause is a human's choice, not a failure: no Warning for it.
    if p.status != "False"
        || p.reason == reason::ROLLOUT_COMPLETE
        || p.reason == reason::ROLLOUT_PAUSED
    {
        return;
    }
    let previous = twd.status.as_ref().and_then(progressing).map(|c| c.reason);
    if previous.as_deref() != Some(p.reason.as_str()) {
        ctx.events.warning(twd, &p.reason, p.message).await;
    }
}

/// Normal events for what this reconcile achieved.
async fn milestones(ctx: &Context, twd: &TemporalWorkerDeployment, planned: &Planned) {
    let build = &planned.input.desired.build_id;
    let was_registered = twd
        .status
        .as_ref()
        .and_then(|s| s.target_version.as_ref())
        .is_some_and(|t| {
            &t.version.build_id == build && t.version.status != VersionStatus::NotRegistered
        });
    if !was_registered && planned.input.temporal.version(build).is_some() {
        let note = format!("Build ID {build} is polling Temporal");
        ctx.events
            .normal(twd, events::VERSION_REGISTERED, note)
            .await;
    }
    for done in &planned.done {
        if let Some((reason, note)) = milestone(done, planned.plan.progress.rollback) {
            ctx.events.normal(twd, reason, note).await;
        }
    }
}

/// The Normal event for one successful write, if it is a milestone.
fn milestone(done: &Done, rollback: bool) -> Option<(&'static str, String)> {
    Some(match done {
        Done::Created { name, build_id } => (
            events::VERSION_CREATED,
            format!("Created Deployment {name} for build ID {build_id}"),
        ),
        Done::Updated { name, build_id } => (
            events::VERSION_UPDATED,
            format!("Updated Deployment {name} of build ID {build_id} in place"),
        ),
        Done::Scaled {
            name,
            build_id,
            replicas: 0,
        } => (
            events::SCALED_DOWN,
            format!("Scaled Deployment {name} of build ID {build_id} to 0"),
        ),
        Done::Scaled { .. } | Done::ManagerClaimed => return None,
        Done::GateStarted {
            task_queue,
            workflow_id,
        } => (
            events::GATE_STARTED,
            format!("Started gate workflow {workflow_id} on task queue {task_queue}"),
        ),
        Done::Routed(RoutingChange::SetCurrent { build_id }) if rollback => (
            events::ROLLED_BACK,
            format!("Rolled back: build ID {build_id} is Current again"),
        ),
        Done::Routed(RoutingChange::SetCurrent { build_id }) => (
            events::PROMOTED,
            format!("Build ID {build_id} is now Current"),
        ),
        Done::Routed(RoutingChange::SetRamping {
            build_id,
            percentage,
        }) => (
            events::RAMP_STEP_STARTED,
            format!("Ramping build ID {build_id} to {percentage}%"),
        ),
        Done::Routed(RoutingChange::ClearRamp) => {
            (events::RAMP_CLEARED, "Cleared a stale ramp".to_string())
        }
        Done::Deleted { name, build_id } => (
            events::VERSION_DELETED,
            format!("Deleted Deployment {name} of build ID {build_id}"),
        ),
        Done::PinnedBatch(PinnedBatch { build_id, action }) => match action {
            PinnedAction::Signal { name, new_build_id } => (
                events::PINNED_SIGNALLED,
                format!(
                    "Signalled {name} to the workflows pinned to build ID {build_id}, naming {new_build_id} (spec.sunset.upgradeSignal)"
                ),
            ),
            PinnedAction::Cancel => (
                events::PINNED_CANCELLED,
                format!(
                    "Requested cancellation of the workflows still pinned to build ID {build_id} (spec.sunset.cancelPinnedAfter)"
                ),
            ),
            PinnedAction::Terminate => (
                events::PINNED_TERMINATED,
                format!(
                    "Terminated the workflows still pinned to build ID {build_id} (spec.sunset.terminatePinnedAfter)"
                ),
            ),
        },
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_deadline_timer_takes_off_the_time_the_reconcile_took() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        // An 8 s step deadline decided 300 ms ago fires 7.7 s from now, on time.
        assert_eq!(super::timer(ms(8000), ms(300)), ms(7700));
        // A 500 ms poll after a 600 ms reconcile still waits 250 ms: no busy loop.
        assert_eq!(super::timer(ms(500), ms(600)), ms(250));
        assert_eq!(super::timer(ms(500), Duration::ZERO), ms(500));
    }

    use std::sync::Arc;

    use super::after_own_write;
    use crate::api::TemporalWorkerDeployment;
    use crate::api::twd::TemporalWorkerDeploymentStatus;
    use crate::fixtures::offline_context;
    use crate::planner::model::{Plan, PlanInput, RoutingChange};
    use crate::reconcile::act::Done;
    use crate::reconcile::{Attempt, Outcome, Planned};

    /// The cached object a reconcile started from: resourceVersion 10, generation 3.
    fn cached() -> TemporalWorkerDeployment {
        let mut twd = TemporalWorkerDeployment::test().generation(3);
        twd.metadata.uid = Some("uid-1".into());
        twd.metadata.resource_version = Some("10".into());
        twd
    }

    fn attempt(twd: TemporalWorkerDeployment, done: Vec<Done>) -> Attempt {
        Attempt {
            twd: Arc::new(twd),
            planned: Some(Planned {
                input: PlanInput::test(),
                plan: Plan::default(),
                done,
            }),
            outcome: Outcome::Done,
        }
    }

    fn ramped() -> Vec<Done> {
        vec![Done::Routed(RoutingChange::SetRamping {
            build_id: "v2".into(),
            percentage: 20.0,
        })]
    }

    /// Our own last status write: resourceVersion 11, with a marker in the status.
    fn written(generation: i64) -> TemporalWorkerDeployment {
        let mut twd = cached();
        twd.metadata.generation = Some(generation);
        twd.metadata.resource_version = Some("11".into());
        twd.status = Some(TemporalWorkerDeploymentStatus {
            observed_generation: Some(generation),
            ..Default::default()
        });
        twd
    }

    #[tokio::test]
    async fn a_routing_change_is_recorded_on_top_of_our_own_newer_write() {
        let (ctx, _leader) = offline_context(true);
        ctx.remember_write(&written(3));
        let newer = after_own_write(&ctx, &attempt(cached(), ramped())).expect("retry");
        assert_eq!(newer.metadata.resource_version.as_deref(), Some("11"));
        assert_eq!(
            newer.status.as_ref().and_then(|s| s.observed_generation),
            Some(3)
        );
    }

    #[tokio::test]
    async fn no_retry_without_a_routing_change_a_newer_write_or_the_same_spec() {
        let (ctx, _leader) = offline_context(true);
        // Nothing written yet.
        assert!(after_own_write(&ctx, &attempt(cached(), ramped())).is_none());
        // Written, but this reconcile changed no routing: the next one catches up.
        ctx.remember_write(&written(3));
        assert!(after_own_write(&ctx, &attempt(cached(), Vec::new())).is_none());
        // Our write is what the reconcile started from: the 409 came from someone else.
        assert!(after_own_write(&ctx, &attempt(written(3), ramped())).is_none());
        // The spec changed since the plan (our last write saw another generation).
        ctx.remember_write(&written(4));
        assert!(after_own_write(&ctx, &attempt(cached(), ramped())).is_none());
        // Deleted objects are forgotten.
        ctx.remember_write(&written(3));
        ctx.forget_write(&cached());
        assert!(after_own_write(&ctx, &attempt(cached(), ramped())).is_none());
    }
}
