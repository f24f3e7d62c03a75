//! Progressive steps (`src/planner/progressive.rs`), through `plan()`.
//!
//! Cases named `case_NN_*` reproduce the upstream Go controller's behaviour (numbered as in our
//! original case list); where we deliberately differ from the Go controller the test says so.

use std::time::Duration;

use jiff::Timestamp;

use super::plan;
use crate::planner::model::*;
use crate::temporal::state::TemporalVersionStatus as T;

use crate::fixtures::{NOW, ago, ts};
use crate::planner::test_fixtures::*;

// ---------------------------------------------------------------------------------------
// Progressive
// ---------------------------------------------------------------------------------------

#[test]
fn progressive_starts_at_step_one_and_requeues_after_its_pause() {
    let p = plan(&rollout(steps(&[(25.0, 600), (50.0, 900)])));
    assert_eq!(p.routing, set_ramping("v2", 25.0));
    assert_eq!(p.progress.phase, Phase::Ramping);
    let step = p.progress.step.unwrap();
    assert_eq!((step.index, step.ramp_percentage), (0, 25.0));
    assert_eq!(step.started_at, Some(ts(NOW)));
    assert_eq!(step.next_at, Some(ts("2026-03-02T12:10:00Z")));
    assert_eq!(p.requeue_after, Some(mins(10)));
    assert_eq!(
        p.progress.message,
        "Ramping build ID v2 at 25% (step 1 of 2); next step at 2026-03-02T12:10:00Z"
    );
}

#[test]
fn progressive_holds_and_requeues_exactly_at_the_next_step() {
    let mut i = rollout(steps(&[(25.0, 600), (50.0, 900)]));
    set_ramp(&mut i, "v2", 50.0, ago(300));
    let p = plan(&i);
    assert_eq!(p.routing, None);
    let step = p.progress.step.unwrap();
    assert_eq!(step.index, 1);
    assert_eq!(step.started_at, Some(ago(300)));
    assert_eq!(step.next_at, Some(ts("2026-03-02T12:10:00Z")));
    assert_eq!(p.requeue_after, Some(mins(10)));
    assert!(
        p.progress
            .message
            .contains("(step 2 of 2); promotion at 2026-03-02T12:10:00Z"),
        "{}",
        p.progress.message
    );
}

#[test]
fn case_13_last_step_long_past_promotes() {
    let mut i = rollout(steps(&[(25.0, 3600), (75.0, 3600)]));
    set_ramp(&mut i, "v2", 75.0, ago(4 * 3600));
    assert_eq!(plan(&i).routing, set_current("v2"));
}

#[test]
fn case_14_exactly_one_pause_ago_advances() {
    let mut i = rollout(steps(&[(25.0, 300), (50.0, 300)]));
    set_ramp(&mut i, "v2", 25.0, ago(300));
    assert_eq!(plan(&i).routing, set_ramping("v2", 50.0));
}

#[test]
fn case_16_ramping_without_a_change_time_waits() {
    let mut i = rollout(steps(&[(25.0, 300), (50.0, 300)]));
    set_ramp(&mut i, "v2", 25.0, ago(300));
    i.temporal.routing.ramp_percentage_changed_at = None;
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Ramping);
    assert_eq!(p.requeue_after, Some(Duration::from_secs(1)));
}

#[test]
fn case_17_manual_ramp_between_steps_snaps_down_then_continues() {
    let mut i = rollout(steps(&[(5.0, 60), (10.0, 60), (25.0, 60), (50.0, 60)]));
    set_ramp(&mut i, "v2", 20.0, ago(3600));
    assert_eq!(plan(&i).routing, set_ramping("v2", 10.0));
}

#[test]
fn case_18_manual_ramp_below_every_step_goes_to_the_first() {
    let mut i = rollout(steps(&[(10.0, 60), (25.0, 60), (50.0, 60)]));
    set_ramp(&mut i, "v2", 1.0, ago(10));
    assert_eq!(plan(&i).routing, set_ramping("v2", 10.0));
}

#[test]
fn case_19_progressive_without_steps_never_routes() {
    let p = plan(&rollout(Strategy::Progressive(vec![])));
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::WaitingForPromotion);
}

#[test]
fn case_20_target_listed_ramping_without_routing_ramp_starts_step_one() {
    let mut i = rollout(steps(&[(25.0, 60)]));
    i.temporal.versions[1].status = T::Ramping; // summary says Ramping, routing does not
    assert_eq!(plan(&i).routing, set_ramping("v2", 25.0));
}

/// Applies a routing change the way Temporal would, at `at`.
fn apply(i: &mut PlanInput, change: &RoutingChange, at: Timestamp) {
    let r = &mut i.temporal.routing;
    match change {
        RoutingChange::SetCurrent { build_id } => {
            r.current_build_id = Some(build_id.clone());
            r.ramping_build_id = None;
            r.ramp_percentage = 0.0;
            r.ramp_percentage_changed_at = Some(at);
        }
        RoutingChange::SetRamping {
            build_id,
            percentage,
        } => {
            r.ramping_build_id = Some(build_id.clone());
            r.ramp_percentage = *percentage;
            r.ramp_percentage_changed_at = Some(at);
        }
        RoutingChange::ClearRamp => {
            r.ramping_build_id = None;
            r.ramp_percentage = 0.0;
        }
    }
}

#[test]
fn case_21_one_step_per_reconcile_when_reconciles_are_slow() {
    let mut i = rollout(steps(&[(25.0, 5), (50.0, 10), (75.0, 30)]));
    let mut seen = Vec::new();
    for _ in 0..6 {
        let p = plan(&i);
        if let Some(change) = &p.routing {
            seen.push(change.clone());
            let at = i.now;
            apply(&mut i, change, at);
        }
        i.now += jiff::SignedDuration::from_secs(60);
    }
    assert_eq!(
        seen,
        vec![
            set_ramping("v2", 25.0).unwrap(),
            set_ramping("v2", 50.0).unwrap(),
            set_ramping("v2", 75.0).unwrap(),
            set_current("v2").unwrap(),
        ]
    );
}

#[test]
fn a_restarted_controller_follows_the_requeue_deadlines_to_completion() {
    // Drive the loop only by requeue_after: every wake-up lands on a deadline and progresses.
    let mut i = rollout(steps(&[(10.0, 30), (50.0, 120)]));
    let mut changes = Vec::new();
    for _ in 0..10 {
        let p = plan(&i);
        if let Some(change) = &p.routing {
            changes.push(change.clone());
            let at = i.now;
            apply(&mut i, change, at);
        }
        let Some(after) = p.requeue_after else { break };
        i.now += jiff::SignedDuration::try_from(after).unwrap();
        if matches!(changes.last(), Some(RoutingChange::SetCurrent { .. })) {
            break;
        }
    }
    assert_eq!(changes.len(), 3, "{changes:?}");
    assert_eq!(i.now, ts(NOW) + jiff::SignedDuration::from_secs(150 + 1));
}

#[test]
fn strategy_switched_to_all_at_once_mid_ramp_promotes() {
    let mut i = rollout(Strategy::AllAtOnce);
    set_ramp(&mut i, "v2", 25.0, ago(10));
    assert_eq!(plan(&i).routing, set_current("v2"));
}

#[test]
fn strategy_switched_to_manual_mid_ramp_freezes() {
    let mut i = rollout(Strategy::Manual);
    set_ramp(&mut i, "v2", 25.0, ago(10_000));
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Ramping);
    assert!(
        p.progress.message.contains("Manual"),
        "{}",
        p.progress.message
    );
    assert_eq!(p.requeue_after, Some(Duration::from_secs(5)));
}
