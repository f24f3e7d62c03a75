//! Which passes keep a promise on the clock: the next look a plan asks for is a deadline the
//! controller has said it keeps (a step's end or a promotion while the target ramps, a
//! progress deadline, a version's scale-down or deletion at sunset), not a poll or the idle
//! look. The controller runs those in a lane of their own (`crate::lane`), so that they
//! never wait behind the fleet's bulk work.

use jiff::{SignedDuration, Timestamp};

use crate::planner::clock;
use crate::planner::model::{Phase, Plan, PlanInput};
use crate::planner::sunset;

/// How close the plan's next look must be to a deadline to be that deadline's (the planner
/// computes it from the deadline exactly; this only absorbs rounding).
const SAME_MOMENT: SignedDuration = SignedDuration::from_millis(1);

/// Whether the next look `plan` asks for keeps a promise on the clock (see the module docs).
/// A ramping target's every wake-up is one: its deadlines are its steps and its promotion.
pub fn time_bound(input: &PlanInput, plan: &Plan) -> bool {
    let Some(after) = plan.requeue_after.filter(|d| !d.is_zero()) else {
        return false;
    };
    if plan.progress.phase == Phase::Ramping {
        return true;
    }
    let Some(at) = clock::add(input.now, after) else {
        return false;
    };
    deadlines(input, plan).any(|d| d.duration_since(at).abs() <= SAME_MOMENT)
}

/// The deadlines a plan keeps other than a ramp's: the target's progress deadline and every
/// Drained version's sunset.
fn deadlines<'a>(input: &'a PlanInput, plan: &'a Plan) -> impl Iterator<Item = Timestamp> + 'a {
    let progress = plan.control.waiting.as_ref().map(|w| w.deadline.0);
    let sunsets = input
        .deployments
        .iter()
        .filter_map(|d| sunset::drained_deadlines(input, d))
        .flat_map(|(scale_down, delete)| [scale_down, delete])
        .flatten();
    progress.into_iter().chain(sunsets)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fixtures::{ago, hours};
    use crate::planner::plan;
    use crate::planner::test_fixtures::*;
    use crate::temporal::state::VersionState;

    #[test]
    fn a_ramping_target_keeps_its_steps() {
        let input = rollout(steps(&[(25.0, 600), (50.0, 900)]));
        let p = plan(&input);
        assert_eq!(p.progress.phase, Phase::Ramping);
        assert!(time_bound(&input, &p));
    }

    #[test]
    fn a_sunset_deadline_is_kept_and_a_drain_poll_is_not() {
        // Drained an hour ago, at zero: the next look is the deletion deadline.
        let mut input = with_old(VersionState::drained("v1", ago(3600)), 0);
        input.desired.delete_delay = hours(4);
        let p = plan(&input);
        assert_eq!(p.requeue_after, Some(hours(4)));
        assert!(time_bound(&input, &p));
        let mut poll = p.clone();
        poll.requeue_after = Some(crate::planner::clock::DRAIN_POLL);
        assert!(!time_bound(&input, &poll), "a poll is bulk work");
    }

    #[test]
    fn a_progress_deadline_is_kept() {
        let mut input = crate::planner::model::PlanInput::test();
        let d = &mut input.deployments[1];
        d.ready_replicas = 0;
        d.healthy_since = None;
        input.temporal.versions.retain(|v| v.build_id != "v2");
        input.target_task_queues.clear();
        let p = plan(&input);
        let w = p.control.waiting.as_ref().expect("the clock runs");
        assert_eq!(
            clock::add(input.now, p.requeue_after.expect("wakes")),
            Some(w.deadline.0)
        );
        assert!(time_bound(&input, &p));
    }

    #[test]
    fn a_look_at_once_or_none_keeps_no_promise() {
        let input = rollout(steps(&[(25.0, 600)]));
        let mut p = plan(&input);
        p.requeue_after = Some(Duration::ZERO);
        assert!(!time_bound(&input, &p), "at once: the queue's next pass");
        p.requeue_after = None;
        assert!(!time_bound(&input, &p));
    }
}
