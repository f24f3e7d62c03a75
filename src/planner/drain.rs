//! Drain visibility: which old versions' pinned workflows the status shows, when visibility is
//! asked again, and what a version's retirement waits for, in words. Pure.
//!
//! Counting every old version on every reconcile would spend the Temporal budget on facts that
//! change slowly, so a count is reused from the last status until it is [`DRAIN_POLL`] old.

use jiff::Timestamp;

use super::clock::{self, DRAIN_POLL, Wake};
use super::model::{PinnedAction, PinnedBatch, PlanInput, RoutingChange};
use crate::temporal::state::{PinnedView, TemporalVersionStatus};

/// How many of the oldest pinned workflows the status names.
pub const SAMPLE: usize = 3;

/// Versions whose pinned workflows the status shows: every Draining version, and every Drained
/// one whose Deployment is still there (kept by pinned workflows or by the sunset delays).
pub fn shown(input: &PlanInput) -> Vec<String> {
    input
        .temporal
        .versions
        .iter()
        .filter(|v| match v.status {
            TemporalVersionStatus::Draining => true,
            TemporalVersionStatus::Drained => {
                input.deployments.iter().any(|d| d.build_id == v.build_id)
            }
            _ => false,
        })
        .map(|v| v.build_id.clone())
        .collect()
}

/// True when the last count (from the previous status) is missing or at least a drain poll
/// old, or from the future (a clock step): ask visibility again.
pub fn due(prior: Option<&PinnedView>, now: Timestamp) -> bool {
    prior.is_none_or(|p| {
        let next = clock::add(p.counted_at, DRAIN_POLL);
        next.is_none_or(|next| now >= next) || p.counted_at > now
    })
}

/// `spec.sunset.upgradeSignal` / `cancelPinnedAfter` / `terminatePinnedAfter`: which Draining
/// versions' pinned workflows to signal, cancel or terminate now, each asked once (the status
/// records it). The signal goes out as soon as the version drains; Measured
/// from when Temporal started draining the version. Never a version that is the target or
/// that this plan routes to (a rollback), never one Temporal does not report Draining
/// (Current and Ramping versions' workflows are never touched), and never one visibility
/// counted no pinned workflow for.
pub fn pinned_batches(
    input: &PlanInput,
    routing: Option<&RoutingChange>,
    wake: &mut Wake,
) -> Vec<PinnedBatch> {
    let desired = &input.desired;
    let routed_to = match routing {
        Some(
            RoutingChange::SetCurrent { build_id } | RoutingChange::SetRamping { build_id, .. },
        ) => Some(build_id.as_str()),
        _ => None,
    };
    let mut out = Vec::new();
    for v in &input.temporal.versions {
        let spared = v.build_id == desired.build_id || Some(v.build_id.as_str()) == routed_to;
        let none_pinned = v.pinned.as_ref().is_some_and(|p| p.count == 0);
        let (TemporalVersionStatus::Draining, Some(since), false, false) =
            (v.status, v.drainage_changed_at, spared, none_pinned)
        else {
            continue;
        };
        let deadline =
            |after: Option<std::time::Duration>| after.and_then(|a| clock::add(since, a));
        let mut due = |at: Option<Timestamp>, done: Option<Timestamp>| match (at, done) {
            (Some(at), None) if at <= input.now => true,
            (Some(at), None) => {
                wake.at(input.now, at);
                false
            }
            _ => false,
        };
        let terminate = due(
            deadline(desired.terminate_pinned_after),
            v.pinned_asked.terminate,
        );
        let cancel = due(deadline(desired.cancel_pinned_after), v.pinned_asked.cancel);
        // The upgrade nudge goes out as soon as the version drains, to the Current version.
        let signal = desired
            .upgrade_signal
            .as_ref()
            .zip(input.temporal.routing.current_build_id.as_ref())
            .filter(|(_, current)| **current != v.build_id && v.pinned_asked.signal.is_none());
        // Termination supersedes a cancellation that would come at the same time, and both
        // supersede a nudge that is no longer worth sending.
        let action = match (terminate, cancel, signal) {
            (true, _, _) => PinnedAction::Terminate,
            (false, true, _) => PinnedAction::Cancel,
            (false, false, Some((name, current))) => PinnedAction::Signal {
                name: name.clone(),
                new_build_id: current.clone(),
            },
            (false, false, None) => continue,
        };
        out.push(PinnedBatch {
            build_id: v.build_id.clone(),
            action,
        });
    }
    out
}

/// How the workflows still pinned to a Draining version end at a deadline of the user's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinnedEndBy {
    /// `spec.sunset.terminatePinnedAfter`: they end then, no workflow code runs.
    Terminate,
    /// `spec.sunset.cancelPinnedAfter` (without a termination): their cancellation is requested
    /// then; workflow code may clean up first, or ignore it.
    Cancel,
}

/// When the workflows pinned to a Draining version end by the user's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinnedEnd {
    pub at: Timestamp,
    pub by: PinnedEndBy,
}

/// The ETA of a Draining version's pinned workflows, where a deadline makes one knowable:
/// `drainingSince + terminatePinnedAfter` (they end then), else `drainingSince +
/// cancelPinnedAfter` (cancellation requested then). `None` without either deadline (they run
/// as long as they run: the open count is all there is to show), for a version that is not
/// Draining or has no known drainage time, and when visibility counted none open.
pub fn pinned_end(
    desired: &super::model::Desired,
    status: TemporalVersionStatus,
    draining_since: Option<Timestamp>,
    pinned: Option<&PinnedView>,
) -> Option<PinnedEnd> {
    let since = draining_since.filter(|_| status == TemporalVersionStatus::Draining)?;
    if pinned.is_some_and(|p| p.count == 0) {
        return None;
    }
    let (after, by) = match (desired.terminate_pinned_after, desired.cancel_pinned_after) {
        (Some(t), _) => (t, PinnedEndBy::Terminate),
        (None, Some(c)) => (c, PinnedEndBy::Cancel),
        (None, None) => return None,
    };
    Some(PinnedEnd {
        at: clock::add(since, after)?,
        by,
    })
}

/// What an old version's retirement waits for; `None` when nothing (or it is not old).
pub fn waiting_for(
    status: TemporalVersionStatus,
    pinned: Option<&PinnedView>,
    end: Option<PinnedEnd>,
    scaledown_at: Option<Timestamp>,
    delete_at: Option<Timestamp>,
    now: Timestamp,
) -> Option<String> {
    let open = pinned.map_or(0, |p| p.count);
    let workflows = |n: u64| match n {
        1 => "1 open workflow".to_string(),
        n => format!("{n} open workflows"),
    };
    let until = match end.filter(|e| e.at > now) {
        Some(PinnedEnd {
            at,
            by: PinnedEndBy::Terminate,
        }) => format!(" or to be terminated at {at} (terminatePinnedAfter)"),
        Some(PinnedEnd {
            at,
            by: PinnedEndBy::Cancel,
        }) => format!(" (their cancellation is requested at {at}, cancelPinnedAfter)"),
        None => String::new(),
    };
    match status {
        TemporalVersionStatus::Draining if open > 0 => Some(format!(
            "{} pinned to it to finish{until}, then Temporal to report it drained",
            workflows(open)
        )),
        TemporalVersionStatus::Draining => {
            Some("Temporal to report it drained (it re-checks drainage on its own interval)".into())
        }
        TemporalVersionStatus::Drained if open > 0 => {
            Some(format!("{} pinned to it to finish", workflows(open)))
        }
        TemporalVersionStatus::Drained => match (scaledown_at, delete_at) {
            (Some(at), _) if at > now => Some(format!("scale-down at {at} (scaledownDelay)")),
            (_, Some(at)) if at > now => Some(format!("deletion at {at} (deleteDelay)")),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{NOW, ago, ts};
    use crate::planner::model::ObservedDeployment;
    use crate::temporal::state::VersionState;

    fn view(count: u64, counted_secs_ago: i64) -> PinnedView {
        PinnedView {
            count,
            counted_at: ago(counted_secs_ago),
            oldest: Vec::new(),
        }
    }

    #[test]
    fn draining_versions_and_drained_ones_with_a_deployment_are_shown() {
        let mut input = PlanInput::test();
        input.temporal.versions.extend([
            VersionState::test("v0", TemporalVersionStatus::Draining),
            VersionState::drained("vx", ago(60)),
            VersionState::drained("vy", ago(60)),
        ]);
        // vx still has its Deployment; vy's is gone; v1 is Current and v2 Inactive.
        input.deployments.push(ObservedDeployment::test("vx", 0));
        assert_eq!(shown(&input), ["v0", "vx"]);
        assert!(shown(&PlanInput::test()).is_empty());
    }

    #[test]
    fn a_count_is_reused_until_it_is_a_drain_poll_old() {
        let now = ts(NOW);
        let poll = DRAIN_POLL.as_secs() as i64;
        assert!(due(None, now), "never counted");
        assert!(!due(Some(&view(2, 1)), now));
        assert!(!due(Some(&view(2, poll - 1)), now));
        assert!(due(Some(&view(2, poll)), now));
        assert!(
            due(Some(&view(2, -5)), now),
            "counted in the future: clock stepped"
        );
    }

    fn draining(build: &str, since_secs_ago: i64, pinned: Option<u64>) -> VersionState {
        let mut v = VersionState::test(build, TemporalVersionStatus::Draining);
        v.drainage_changed_at = Some(ago(since_secs_ago));
        v.pinned = pinned.map(|n| view(n, 0));
        v
    }

    fn ends(input: &PlanInput) -> (Vec<(String, PinnedAction)>, Option<std::time::Duration>) {
        let mut wake = Wake::default();
        let out = pinned_batches(input, None, &mut wake)
            .into_iter()
            .map(|e| (e.build_id, e.action))
            .collect();
        (out, wake.get())
    }

    fn with_timeouts(cancel: Option<u64>, terminate: Option<u64>) -> PlanInput {
        let mut input = PlanInput::test();
        input.desired.cancel_pinned_after = cancel.map(std::time::Duration::from_secs);
        input.desired.terminate_pinned_after = terminate.map(std::time::Duration::from_secs);
        input
    }

    #[test]
    fn pinned_workflows_are_left_alone_without_a_timeout() {
        let mut input = with_timeouts(None, None);
        input
            .temporal
            .versions
            .push(draining("v0", 86_400 * 30, Some(5)));
        assert_eq!(ends(&input), (Vec::new(), None));
    }

    #[test]
    fn pinned_workflows_are_cancelled_then_terminated_once_each() {
        use PinnedAction::*;
        let mut input = with_timeouts(Some(60), Some(600));
        input.temporal.versions.push(draining("v0", 30, Some(2)));
        // Not yet: come back when the cancellation is due.
        assert_eq!(
            ends(&input),
            (Vec::new(), Some(std::time::Duration::from_secs(30)))
        );
        input.temporal.versions[2].drainage_changed_at = Some(ago(60));
        assert_eq!(ends(&input).0, [("v0".to_string(), Cancel)]);
        // Asked once: next the termination.
        input.temporal.versions[2].pinned_asked.cancel = Some(ago(0));
        assert_eq!(
            ends(&input),
            (Vec::new(), Some(std::time::Duration::from_secs(540)))
        );
        input.temporal.versions[2].drainage_changed_at = Some(ago(700));
        assert_eq!(ends(&input).0, [("v0".to_string(), Terminate)]);
        input.temporal.versions[2].pinned_asked.terminate = Some(ago(0));
        assert_eq!(ends(&input), (Vec::new(), None));
    }

    #[test]
    fn a_draining_version_is_nudged_once_towards_the_current_one() {
        let mut input = with_timeouts(None, None);
        input.desired.upgrade_signal = Some("upgrade".into());
        input.temporal.routing.current_build_id = Some("v1".into());
        input.temporal.versions.push(draining("v0", 1, None));
        let mut wake = Wake::default();
        let batches = pinned_batches(&input, None, &mut wake);
        assert_eq!(
            batches,
            [PinnedBatch {
                build_id: "v0".into(),
                action: PinnedAction::Signal {
                    name: "upgrade".into(),
                    new_build_id: "v1".into()
                }
            }]
        );
        // Once asked, never again; without a Current version there is nowhere to go.
        input.temporal.versions[2].pinned_asked.signal = Some(ago(0));
        assert_eq!(ends(&input), (Vec::new(), None));
        input.temporal.versions[2].pinned_asked.signal = None;
        input.temporal.routing.current_build_id = None;
        assert_eq!(ends(&input), (Vec::new(), None));
        // A cancellation due at the same time wins.
        input.temporal.routing.current_build_id = Some("v1".into());
        input.desired.cancel_pinned_after = Some(std::time::Duration::ZERO);
        assert_eq!(ends(&input).0, [("v0".to_string(), PinnedAction::Cancel)]);
    }

    #[test]
    fn termination_due_at_once_supersedes_the_cancellation() {
        let mut input = with_timeouts(Some(60), Some(600));
        input.temporal.versions.push(draining("v0", 3600, None));
        assert_eq!(
            ends(&input).0,
            [("v0".to_string(), PinnedAction::Terminate)]
        );
    }

    #[test]
    fn only_draining_versions_with_pinned_workflows_are_touched() {
        let mut input = with_timeouts(Some(1), None);
        input.temporal.versions = vec![
            VersionState::test("v1", TemporalVersionStatus::Current),
            VersionState::test("v2", TemporalVersionStatus::Ramping),
            VersionState::test("vi", TemporalVersionStatus::Inactive),
            VersionState::drained("vd", ago(3600)),
            draining("none", 3600, Some(0)),
            draining("unknown", 3600, None),
            draining("no-time", 3600, Some(1)),
        ];
        input.temporal.versions[6].drainage_changed_at = None;
        assert_eq!(
            ends(&input).0,
            [("unknown".to_string(), PinnedAction::Cancel)]
        );
    }

    #[test]
    fn the_target_and_a_rollback_in_the_same_plan_are_spared() {
        let mut input = with_timeouts(Some(1), None);
        input.temporal.versions = vec![
            draining("v2", 3600, Some(1)), // the target (PlanInput::test's desired build)
            draining("v0", 3600, Some(1)),
        ];
        let mut wake = Wake::default();
        let rollback = RoutingChange::SetCurrent {
            build_id: "v0".into(),
        };
        assert!(pinned_batches(&input, Some(&rollback), &mut wake).is_empty());
    }

    #[test]
    fn a_deadline_makes_the_end_of_pinned_workflows_knowable() {
        use TemporalVersionStatus::*;
        let since = ago(3600);
        let mut input = with_timeouts(None, None);
        let end = |input: &PlanInput, status, pinned: Option<&PinnedView>| {
            pinned_end(&input.desired, status, Some(since), pinned)
        };
        // No deadline: nothing to say but the count.
        assert_eq!(end(&input, Draining, Some(&view(3, 0))), None);
        // Cancellation only: the time it is requested.
        input.desired.cancel_pinned_after = Some(std::time::Duration::from_secs(7200));
        let cancel = PinnedEnd {
            at: ago(-3600),
            by: PinnedEndBy::Cancel,
        };
        assert_eq!(end(&input, Draining, Some(&view(3, 0))), Some(cancel));
        // Termination is the end, whenever the cancellation comes; an uncounted version too.
        input.desired.terminate_pinned_after = Some(std::time::Duration::from_secs(10_800));
        let terminate = PinnedEnd {
            at: ago(-7200),
            by: PinnedEndBy::Terminate,
        };
        assert_eq!(end(&input, Draining, None), Some(terminate));
        // None counted, not Draining, or no drainage time: no ETA.
        assert_eq!(end(&input, Draining, Some(&view(0, 0))), None);
        assert_eq!(end(&input, Drained, Some(&view(3, 0))), None);
        assert_eq!(end(&input, Current, Some(&view(3, 0))), None);
        assert_eq!(
            pinned_end(&input.desired, Draining, None, Some(&view(3, 0))),
            None
        );
        // The words say it while it is ahead.
        let now = ts(NOW);
        let w = |e| waiting_for(Draining, Some(&view(3, 0)), Some(e), None, None, now);
        assert_eq!(
            w(terminate).as_deref(),
            Some(
                "3 open workflows pinned to it to finish or to be terminated at \
                 2026-03-02T14:00:00Z (terminatePinnedAfter), then Temporal to report it drained"
            )
        );
        assert!(w(cancel).is_some_and(|s| s.contains(
            "(their cancellation is requested at 2026-03-02T13:00:00Z, cancelPinnedAfter)"
        )));
        let passed = PinnedEnd {
            at: ago(1),
            by: PinnedEndBy::Terminate,
        };
        assert_eq!(
            w(passed).as_deref(),
            Some("3 open workflows pinned to it to finish, then Temporal to report it drained")
        );
    }

    #[test]
    fn what_retirement_waits_for() {
        use TemporalVersionStatus::*;
        let now = ts(NOW);
        let later = |s: i64| Some(ago(-s));
        let w = |status, pinned: Option<&PinnedView>, down, del| {
            waiting_for(status, pinned, None, down, del, now)
        };
        assert_eq!(
            w(Draining, Some(&view(1, 0)), None, None).as_deref(),
            Some("1 open workflow pinned to it to finish, then Temporal to report it drained")
        );
        assert!(w(Draining, None, None, None).is_some_and(|s| s.starts_with("Temporal to report")));
        assert!(
            w(Draining, Some(&view(0, 0)), None, None)
                .is_some_and(|s| s.starts_with("Temporal to report"))
        );
        assert_eq!(
            w(Drained, Some(&view(4, 0)), later(10), later(20)).as_deref(),
            Some("4 open workflows pinned to it to finish")
        );
        assert!(
            w(Drained, Some(&view(0, 0)), later(10), later(20))
                .is_some_and(|s| s.starts_with("scale-down at") && s.ends_with("(scaledownDelay)"))
        );
        assert!(
            w(Drained, None, Some(ago(1)), later(20))
                .is_some_and(|s| s.starts_with("deletion at") && s.ends_with("(deleteDelay)"))
        );
        assert_eq!(w(Drained, None, Some(ago(2)), Some(ago(1))), None);
        assert_eq!(w(Current, Some(&view(3, 0)), None, None), None);
        assert_eq!(w(Ramping, None, None, None), None);
        assert_eq!(w(Inactive, None, None, None), None);
    }
}
