//! Punctual routing: a step that ends, or a promotion that is due, at a deadline is written at
//! that deadline, not a describe and a plan after it.
//!
//! A reconcile woken at the deadline still has to wait for a reconcile slot, read Temporal and
//! plan before it writes; on a busy controller that is where a step's lateness goes. So a
//! ramping rollout is woken [`LEAD`] early ([`wake`]); that pass observes as usual and, when the
//! only thing the deadline changes is routing, plans as of the deadline ([`plan`]). The act
//! stage never writes before the time a plan was made for (`input.now`), so the routing write
//! leaves at the deadline with an observation at most [`LEAD`] old, as old as the one a slow
//! pass acts on anyway. Anything else the deadline brings (scaling, deletion, gates) is left to
//! the pass at the deadline.

use std::time::Duration;

use crate::planner::clock;
use crate::planner::model::{Phase, Plan, PlanInput};

/// How early a ramping rollout is woken before its deadline, and how far ahead a pass may plan.
/// A describe and a plan take tens of ms on a loaded controller; the slot is held no longer
/// than this.
pub const LEAD: Duration = Duration::from_millis(500);

/// The input and plan to act on: the present ones, or, when a routing change falls due within
/// [`LEAD`] and the deadline changes nothing but routing, the ones as of that deadline (the
/// input's `now` is then the deadline, and the act stage waits for it).
pub fn plan(input: PlanInput) -> (PlanInput, Plan) {
    let present = super::plan(&input);
    let due = present
        .requeue_after
        .filter(|d| present.routing.is_none() && !d.is_zero() && *d <= LEAD)
        .and_then(|d| clock::add(input.now, d));
    let Some(at) = due else {
        return (input, present);
    };
    let mut ahead = input.clone();
    ahead.now = at;
    let later = super::plan(&ahead);
    if later.routing.is_some() && same_other_writes(&present, &later) {
        (ahead, later)
    } else {
        (input, present)
    }
}

/// When to look again after a plan that asked to look again after `timer`: [`LEAD`] early
/// while the target ramps (its deadlines are routing changes), else at `timer`.
pub fn wake(plan: &Plan, timer: Duration) -> Duration {
    if plan.progress.phase == Phase::Ramping && timer > LEAD {
        timer - LEAD
    } else {
        timer
    }
}

/// Whether two plans write the same, routing (and the routing manager claim) apart. `a` is
/// taken apart field by field, so a new field of [`Plan`] does not compile until it is sorted
/// here: a write compared, or said not to be one.
fn same_other_writes(a: &Plan, b: &Plan) -> bool {
    let Plan {
        create,
        adopt,
        update,
        scale,
        start_gates,
        delete,
        pinned_batches,
        start_step_gates,
        forget_versions,
        restart,
        adoption,
        // The routing change itself, which the deadline brings.
        claim_manager: _,
        routing: _,
        // Not writes: what status reports and when to look again.
        progress: _,
        requeue_after: _,
        control: _,
        held_at_zero: _,
        pollers_lost_too_long: _,
        retired: _,
    } = a;
    // A restart is stamped with the plan's time: a pending one is written now.
    restart.is_none()
        && b.restart.is_none()
        && *create == b.create
        && *adopt == b.adopt
        && *update == b.update
        && *scale == b.scale
        && *start_gates == b.start_gates
        && *delete == b.delete
        && *pinned_batches == b.pinned_batches
        && *start_step_gates == b.start_step_gates
        && *forget_versions == b.forget_versions
        && *adoption == b.adoption
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;

    use super::*;
    use crate::fixtures::{NOW, ts};
    use crate::planner::model::{DeleteDeployment, DeleteReason, RoutingChange};
    use crate::planner::test_fixtures::{rollout, set_ramp, set_ramping, steps};

    /// A rollout at 25 % whose step (300 s) ends `left` from now.
    fn step_ends_in(left: Duration) -> PlanInput {
        let mut i = rollout(steps(&[(25.0, 300), (50.0, 300)]));
        let since =
            ts(NOW) - SignedDuration::from_secs(300) + SignedDuration::try_from(left).unwrap();
        set_ramp(&mut i, "v2", 25.0, since);
        i
    }

    #[test]
    fn a_step_ending_within_the_lead_is_planned_for_its_deadline() {
        let input = step_ends_in(Duration::from_millis(200));
        let (acted, plan) = plan(input.clone());
        assert_eq!(plan.routing, set_ramping("v2", 50.0));
        assert_eq!(
            acted.now,
            ts(NOW) + SignedDuration::from_millis(200),
            "written at the deadline, not before"
        );
    }

    #[test]
    fn a_step_ending_later_is_planned_now_and_woken_early() {
        let input = step_ends_in(Duration::from_secs(30));
        let (acted, plan) = plan(input);
        assert_eq!(plan.routing, None);
        assert_eq!(acted.now, ts(NOW));
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
        assert_eq!(
            wake(&plan, Duration::from_secs(30)),
            Duration::from_secs(30) - LEAD
        );
        assert_eq!(
            wake(&plan, LEAD),
            LEAD,
            "within the lead: woken at the deadline itself, never in a loop"
        );
    }

    #[test]
    fn only_a_ramping_target_is_woken_early() {
        let mut plan = Plan::default();
        plan.progress.phase = Phase::WaitingForPollers;
        assert_eq!(
            wake(&plan, Duration::from_secs(600)),
            Duration::from_secs(600)
        );
    }

    #[test]
    fn a_due_change_is_not_postponed() {
        let input = step_ends_in(Duration::ZERO);
        let (acted, plan) = plan(input);
        assert_eq!(plan.routing, set_ramping("v2", 50.0));
        assert_eq!(acted.now, ts(NOW));
    }

    #[test]
    fn a_deadline_that_brings_other_writes_is_left_to_its_own_pass() {
        let routing_only = Plan {
            routing: Some(RoutingChange::SetCurrent {
                build_id: "v2".into(),
            }),
            ..Plan::default()
        };
        assert!(same_other_writes(&Plan::default(), &routing_only));
        let deleting = Plan {
            delete: vec![DeleteDeployment {
                name: "api-v0".into(),
                build_id: "v0".into(),
                reason: DeleteReason::Sunset,
            }],
            ..routing_only
        };
        assert!(!same_other_writes(&Plan::default(), &deleting));
    }
}
