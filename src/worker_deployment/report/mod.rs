//! The report stage: the only place that writes status and events ([`events`]) and counts
//! failures, all from one [`Attempt`] and its [`Verdict`].

mod events;
pub mod go_status;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::PostParams;

use crate::api::TemporalWorkerDeployment;
use crate::api::twd::TemporalWorkerDeploymentStatus;
use crate::planner::model::{PinnedAction, PlanInput, RoutingChange};
use crate::planner::{gates, punctual, rest};
use crate::reconciler::{ControllerKind, backoff, count_failure, jitter, jittered};
use crate::worker_deployment::act::Done;
use crate::worker_deployment::attempt::{Attempt, Planned};
use crate::worker_deployment::context::Context;
use crate::worker_deployment::outcome::{Conditions, Failure, Outcome, Requeue, Verdict, verdict};
use crate::worker_deployment::status::{self, Blocked, Report};

/// Retry delay after a status write lost a race with the watch cache.
const STALE_RETRY: Duration = Duration::from_millis(200);
/// Retry delay after a status write failed for another reason.
const SOON: Duration = Duration::from_secs(1);
/// How often deletion cleanup retries while Temporal still remembers pollers.
const CLEANUP_RETRY: Duration = Duration::from_secs(5);
/// Least interval between looks while another identity manages routing.
const MANAGER_POLL_MIN: Duration = Duration::from_secs(2);

/// Reports the attempt; returns when to look again (`None`: at the next change).
pub async fn report(ctx: &Context, mut attempt: Attempt) -> Option<Duration> {
    let (decided, streak) = decide(ctx, &attempt);
    if attempt.twd.metadata.deletion_timestamp.is_some() {
        ctx.forget_write(&attempt.twd);
    }
    if let Some(planned) = &mut attempt.planned {
        note_requested(&mut planned.input, &planned.done);
        events::milestones(ctx, &attempt.twd, planned).await;
        if matches!(attempt.outcome, Outcome::Done) {
            events::analysis(ctx, &attempt.twd, &planned.input, &planned.plan).await;
        }
    }
    events::finalized(ctx, &attempt.twd, &attempt.finalized).await;
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
        Ok(()) => {
            let planned = attempt.planned.as_ref();
            requeue(ctx, decided.requeue, planned.map(|p| (p, &attempt.twd)))
        }
        Err(Outcome::Stale) => requeue(ctx, Requeue::Stale, None),
        Err(outcome) => {
            // The status could not be written: say so in the status if at all possible.
            let retry = Attempt {
                outcome,
                planned: None,
                finalized: Vec::new(),
                twd: attempt.twd,
            };
            let (decided, streak) = decide(ctx, &retry);
            if let Some(status) = new_status(&retry, &decided, streak, &GoInputs::default()) {
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
    let go = GoInputs {
        uids: deployment_uids(ctx, &attempt.twd),
        target_queues: attempt.planned.as_ref().map_or_else(Vec::new, |p| {
            ctx.pollers
                .workflow_queues(&attempt.twd.key(), &p.input.desired.build_id)
        }),
    };
    match new_status(attempt, decided, streak, &go) {
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
    let streak = ctx.streak(&attempt.twd.key(), &attempt.outcome);
    let decided = verdict(&attempt.outcome, streak);
    if let Outcome::Failed(f) = &attempt.outcome {
        // Counted once per failed reconcile, quiet retries included, by condition reason.
        count_failure(
            &ctx.services.metrics,
            ControllerKind::WorkerDeployment,
            f,
            streak,
        );
    }
    (decided, streak)
}

fn requeue(
    ctx: &Context,
    r: Requeue,
    planned: Option<(&Planned, &Arc<TemporalWorkerDeployment>)>,
) -> Option<Duration> {
    let s = &ctx.settings;
    let after = match r {
        Requeue::Planned => match planned {
            // The planner's cadence: its deadlines, the rest look at rest, else the idle
            // interval. Counted from when the reconcile observed (`input.now`); the timer
            // starts now, so take off the time the reconcile took since then (at most half
            // the wait, so a slow reconcile never turns a poll into a busy loop).
            Some((p, twd)) => {
                let read_at = ctx.remembered.read_at(&twd.key());
                let object = twd.uid().unwrap_or_else(|| twd.name_any());
                let wait = rest::requeue(&p.input, &p.plan, s.cadence(), read_at, &object);
                return Some(punctual::wake(&p.plan, timer(wait, since(p.input.now))));
            }
            // Deletion finished, or nothing to do without a plan.
            None => return None,
        },
        Requeue::FastPoll => s.fast_poll,
        Requeue::ManagerPoll => s.fast_poll.max(MANAGER_POLL_MIN),
        Requeue::Backoff(n) => backoff(n),
        Requeue::Throttled(n) => jittered(n, jitter()),
        Requeue::Idle => s.idle_interval,
        Requeue::AwaitChange => return None,
        Requeue::Stale => STALE_RETRY,
        Requeue::Soon => SOON,
        Requeue::Cleanup => CLEANUP_RETRY,
    };
    Some(after.min(s.idle_interval))
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

/// What the Go-shaped status fields need beyond the plan's input ([`go_status`]).
#[derive(Default)]
struct GoInputs {
    /// Versioned Deployment name → UID.
    uids: std::collections::BTreeMap<String, String>,
    /// The target's workflow task queues as the poller check read them (the plan's input has
    /// them only while a gate or a migration needs them).
    target_queues: Vec<String>,
}

/// Versioned Deployment name → UID, from the cache (for the Go-shaped `deployment`
/// references, [`go_status`]).
fn deployment_uids(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
) -> std::collections::BTreeMap<String, String> {
    let (Some(caches), Some(ns), Some(name)) = (
        ctx.services.caches(),
        twd.metadata.namespace.as_deref(),
        twd.metadata.name.as_deref(),
    ) else {
        return Default::default();
    };
    caches.deployment_uids_of(ns, name)
}

/// The status the verdict asks for; `None` leaves the status untouched.
fn new_status(
    attempt: &Attempt,
    verdict: &Verdict,
    streak: u32,
    go: &GoInputs,
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
        (None, Err(b))
            if !b.stalled
                && crate::worker_deployment::takeover::keeps_predecessor_status(&attempt.twd) =>
        {
            tracing::warn!(reason = b.reason, message = %b.message, "not planned yet; the predecessor controller's status is kept until the take-over is recorded");
            return None;
        }
        (None, Err(b)) => Report::Blocked(b),
        (None, Ok(())) => return None,
    };
    let twd = &attempt.twd;
    let mut status = status::compute(
        twd.status.as_ref(),
        twd.metadata.generation.unwrap_or_default(),
        &report,
        Timestamp::now(),
    );
    if let Report::Planned { input, .. } = &report {
        fill_go_fields(&mut status, twd, input, go);
    }
    Some(status)
}

/// The Go controller's status fields, from this pass's facts.
fn fill_go_fields(
    status: &mut TemporalWorkerDeploymentStatus,
    twd: &TemporalWorkerDeployment,
    input: &PlanInput,
    go: &GoInputs,
) {
    let previous = previous_target_queues(twd, status);
    go_status::fill(
        status,
        &go_status::GoFacts {
            namespace: twd.metadata.namespace.as_deref().unwrap_or_default(),
            uids: &go.uids,
            conflict_token: &input.temporal.conflict_token,
            target_task_queues: [&input.target_task_queues, &go.target_queues, &previous]
                .into_iter()
                .find(|q| !q.is_empty())
                .map_or(&[][..], |q| &q[..]),
            connection_ref: &twd.spec.worker_options.connection_ref,
        },
    );
}

/// Without a fresh reading (the poller check reads queues only while it needs them), the
/// target's queues as the last status listed them for the same build: a Go user's
/// `taskQueues` does not go blank between readings, nor at a take-over.
fn previous_target_queues(
    twd: &TemporalWorkerDeployment,
    status: &TemporalWorkerDeploymentStatus,
) -> Vec<String> {
    twd.status
        .as_ref()
        .and_then(|s| s.target_version.as_ref())
        .filter(|t| {
            Some(&t.version.build_id) == status.target_version.as_ref().map(|n| &n.version.build_id)
        })
        .map(|t| {
            t.version
                .task_queues
                .iter()
                .map(|q| q.name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// After the act stage: what this reconcile asked Temporal to do is now a fact for the status.
pub fn note_requested(input: &mut PlanInput, done: &[Done]) {
    for d in done {
        if let Done::ConflictToken(token) = d {
            // What a describe would now return (the Go-shaped `versionConflictToken`).
            input.temporal.conflict_token = token.clone();
            continue;
        }
        let Done::PinnedBatch(end) = d else { continue };
        let now = input.now;
        if let Some(v) = input
            .temporal
            .versions
            .iter_mut()
            .find(|v| v.build_id == end.build_id)
        {
            match end.action {
                PinnedAction::Signal { .. } => v.pinned_asked.signal = Some(now),
                PinnedAction::Cancel => v.pinned_asked.cancel = Some(now),
                PinnedAction::Terminate => v.pinned_asked.terminate = Some(now),
            }
        }
    }
}

/// Quietly retried failures say how often they happened once they are reported.
fn message(f: &Failure, streak: u32) -> String {
    match f {
        Failure::StateFetchThrottled { .. }
        | Failure::WriteRaced { .. }
        | Failure::WriteThrottled { .. }
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
    events::warn_on_transition(ctx, twd, &status).await;
    events::pollers_recovered(ctx, twd, &status).await;
    let stalled = events::stall_outcome(twd, &status);
    if twd
        .status
        .as_ref()
        .is_some_and(|old| same_on_the_server(old, &status))
    {
        return Ok(());
    }
    let mut obj = (**twd).clone();
    obj.status = Some(status);
    let api = twd.own_api(ctx.services.client.clone());
    let res = api
        .replace_status(&twd.name_any(), &PostParams::default(), &obj)
        .await;
    let resource = twd.kind_set().worker_status_resource();
    match &res {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            ctx.services.metrics.kube_write_conflict("update", resource)
        }
        _ => ctx
            .services
            .metrics
            .kube_write("update", resource, res.is_ok()),
    }
    match res {
        Ok(updated) => {
            let updated = updated.stamped(twd.kind_set());
            ctx.remember_write(&updated, twd.metadata.resource_version.clone());
            let _ = ctx.feed.send(Arc::new(updated));
            if let Some(outcome) = stalled {
                ctx.services.metrics.rollout_outcome(outcome);
            }
            if let Some(p) = &attempt.planned {
                // Counted only once written, so a retried reconcile does not count a gate twice.
                for outcome in gates::newly_finished(recorded_gates(twd), &p.input.gates) {
                    ctx.services.metrics.gate_outcome(outcome);
                }
            }
            Ok(())
        }
        // Reconciled from a cached object older than our last write: the plan was
        // idempotent, so just look again with the fresh object.
        Err(kube::Error::Api(s)) if s.code == 409 => Err(Outcome::Stale),
        Err(e) => Err(Outcome::Failed(Failure::StatusWriteFailed(e))),
    }
}

fn recorded_gates(twd: &TemporalWorkerDeployment) -> &[crate::api::twd::GateWorkflow] {
    twd.status
        .as_ref()
        .and_then(|s| s.target_version.as_ref())
        .map(|t| t.gate_workflows.as_slice())
        .unwrap_or_default()
}

/// Whether writing `new` over `old` would change nothing the server keeps. Times are kept to
/// the second (`metav1.Time`) while ours carry nanoseconds: compared as written, a status that
/// differs only below the second is not written again.
fn same_on_the_server(
    old: &TemporalWorkerDeploymentStatus,
    new: &TemporalWorkerDeploymentStatus,
) -> bool {
    match (serde_json::to_value(old), serde_json::to_value(new)) {
        (Ok(old), Ok(new)) => old == new,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_status_that_differs_only_below_the_second_is_not_written_again() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let at = |nanos: i32| {
            let mut s = crate::api::twd::TemporalWorkerDeploymentStatus::default();
            let t = jiff::Timestamp::new(1_800_000_000, nanos).unwrap();
            s.conditions = vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "RolloutComplete".into(),
                message: "done".into(),
                last_transition_time: Time(t),
                observed_generation: Some(1),
            }];
            s
        };
        assert!(super::same_on_the_server(&at(0), &at(123_456_789)));
        let mut later = at(0);
        later.conditions[0].last_transition_time =
            Time(jiff::Timestamp::new(1_800_000_001, 0).unwrap());
        assert!(!super::same_on_the_server(&at(0), &later));
    }

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
    use crate::worker_deployment::act::Done;
    use crate::worker_deployment::attempt::{Attempt, Planned};
    use crate::worker_deployment::outcome::Outcome;

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
            finalized: Vec::new(),
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
        ctx.remember_write(&written(3), Some("10".into()));
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
        ctx.remember_write(&written(3), Some("10".into()));
        assert!(after_own_write(&ctx, &attempt(cached(), Vec::new())).is_none());
        // Our write is what the reconcile started from: the 409 came from someone else.
        assert!(after_own_write(&ctx, &attempt(written(3), ramped())).is_none());
        // The spec changed since the plan (our last write saw another generation).
        ctx.remember_write(&written(4), Some("10".into()));
        assert!(after_own_write(&ctx, &attempt(cached(), ramped())).is_none());
        // Deleted objects are forgotten.
        ctx.remember_write(&written(3), Some("10".into()));
        ctx.forget_write(&cached());
        assert!(after_own_write(&ctx, &attempt(cached(), ramped())).is_none());
    }

    #[tokio::test]
    async fn a_reconcile_starts_from_our_own_write_while_the_cache_lags_behind_it() {
        let (ctx, _leader) = offline_context(true);
        let start = |twd: TemporalWorkerDeployment| ctx.freshest(Arc::new(twd));
        // Nothing written: the cached object as it is.
        assert_eq!(
            start(cached()).metadata.resource_version.as_deref(),
            Some("10")
        );
        // We wrote resourceVersion 11 on top of 10; the cache still shows 10.
        ctx.remember_write(&written(3), Some("10".into()));
        let fresh = start(cached());
        assert_eq!(fresh.metadata.resource_version.as_deref(), Some("11"));
        assert_eq!(
            fresh.status.as_ref().and_then(|s| s.observed_generation),
            Some(3)
        );
        // The cache caught up (or moved past): it is used, and the record is dropped.
        let mut caught_up = cached();
        caught_up.metadata.resource_version = Some("12".into());
        assert_eq!(
            start(caught_up).metadata.resource_version.as_deref(),
            Some("12")
        );
        assert!(ctx.last_write(&cached()).is_none(), "record dropped");
        // A new spec is never hidden behind our older write.
        ctx.remember_write(&written(3), Some("10".into()));
        let respecified = cached().generation(4);
        assert_eq!(
            start(respecified).metadata.generation,
            Some(4),
            "the new generation is planned"
        );
    }

    /// The Go controller's status for generation 3: target `v2-b4c5` ramping.
    fn taken_over() -> TemporalWorkerDeployment {
        let mut twd = cached();
        twd.status = Some(
            serde_json::from_value(serde_json::json!({
                "targetVersion": {"buildID": "v2-b4c5", "status": "Ramping"},
                "conditions": [{"type": "Ready", "status": "False", "reason": "Ramping",
                    "message": "", "observedGeneration": 3,
                    "lastTransitionTime": "2026-03-01T12:00:00Z"}],
            }))
            .expect("Go status"),
        );
        twd
    }

    fn unplanned(
        twd: TemporalWorkerDeployment,
        failure: crate::worker_deployment::outcome::Failure,
    ) -> Attempt {
        Attempt {
            twd: Arc::new(twd),
            planned: None,
            finalized: Vec::new(),
            outcome: Outcome::Failed(failure),
        }
    }

    #[test]
    fn the_predecessors_status_is_kept_until_a_pass_could_plan() {
        use crate::worker_deployment::outcome::{Failure, verdict};
        let unreachable = || Failure::GateInputUnavailable("ConfigMap gate not found".into());
        let attempt = unplanned(taken_over(), unreachable());
        let decided = verdict(&attempt.outcome, 1);
        assert_eq!(
            super::new_status(&attempt, &decided, 1, &Default::default()),
            None
        );
        // A terminal reason is reported: keeping the old status would hide it.
        let invalid = unplanned(
            taken_over(),
            Failure::InvalidSpec(
                crate::worker_deployment::validate::InvalidSpec {
                    message: "bad".into(),
                }
                .into(),
            ),
        );
        let decided = verdict(&invalid.outcome, 1);
        assert!(super::new_status(&invalid, &decided, 1, &Default::default()).is_some());
        // Once the status is ours (or the predecessor's is stale, or the object is being
        // deleted), failures are reported as always.
        let ours = unplanned(written(3), unreachable());
        assert!(
            super::new_status(&ours, &verdict(&ours.outcome, 1), 1, &Default::default()).is_some()
        );
        let stale = unplanned(taken_over().generation(4), unreachable());
        assert!(
            super::new_status(&stale, &verdict(&stale.outcome, 1), 1, &Default::default())
                .is_some()
        );
        let mut deleting = taken_over();
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        let deleting = unplanned(deleting, unreachable());
        assert!(
            super::new_status(
                &deleting,
                &verdict(&deleting.outcome, 1),
                1,
                &Default::default()
            )
            .is_some()
        );
    }

    #[test]
    fn what_this_reconcile_asked_of_pinned_workflows_is_noted_for_the_status() {
        use super::note_requested;
        use crate::fixtures::{NOW, ts};
        use crate::planner::model::{PinnedAction, PinnedBatch};
        use crate::temporal::state::{TemporalVersionStatus, VersionState};

        let mut input = PlanInput::test();
        input
            .temporal
            .versions
            .push(VersionState::test("v0", TemporalVersionStatus::Draining));
        let ended = Done::PinnedBatch(PinnedBatch {
            build_id: "v0".into(),
            action: PinnedAction::Terminate,
        });
        note_requested(&mut input, &[ended]);
        let v0 = input.temporal.version("v0").expect("v0");
        assert_eq!(v0.pinned_asked.terminate, Some(ts(NOW)));
        assert_eq!(v0.pinned_asked.cancel, None);
    }
}
