//! The routing change of a reconcile (`src/planner/routing.rs`): preconditions, manager identity,
//! stale ramps and promotion, the first version, rollback; through `plan()`.
//!
//! Cases named `case_NN_*` reproduce the upstream Go controller's behaviour (numbered as in our
//! original case list); where we deliberately differ from the Go controller the test says so.

use std::time::Duration;

use super::plan;
use crate::api::twd::GateWorkflowStatus;
use crate::planner::model::*;
use crate::planner::polling;
use crate::temporal::state::{
    GateObservation, RoutingInstall, RoutingState, TemporalVersionStatus as T, VersionState,
};

use crate::fixtures::{NOW, ago, ts};
use crate::planner::test_fixtures::*;

// ---------------------------------------------------------------------------------------
// Routing preconditions
// ---------------------------------------------------------------------------------------

#[test]
fn never_routes_to_an_unregistered_target() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.temporal.versions.truncate(1);
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
    assert!(
        p.progress.message.contains("3/3 replicas ready"),
        "{}",
        p.progress.message
    );
    // Ready for 10 minutes and still no pollers: looked for at the backoff's cap.
    assert_eq!(p.requeue_after, Some(polling::POLLER_WAIT_CAP));
}

#[test]
fn never_routes_to_a_target_without_ready_pods() {
    // Available but scaled to zero: Temporal still lists its (dead) pollers.
    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments[1].ready_replicas = 0;
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::WaitingForPromotion);
    assert!(
        p.progress.message.contains("0/3 replicas ready"),
        "{}",
        p.progress.message
    );

    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments[1].healthy_since = None;
    assert_eq!(plan(&i).routing, None);
}

#[test]
fn all_at_once_promotes_a_healthy_registered_target() {
    let p = plan(&rollout(Strategy::AllAtOnce));
    assert_eq!(p.routing, set_current("v2"));
    assert_eq!(p.progress.phase, Phase::Complete);
    assert!(!p.progress.rollback);
    assert!(!p.claim_manager, "already ours");
    assert_eq!(p.requeue_after, Some(Duration::from_secs(1)));
}

#[test]
fn routing_propagation_is_polled_fast() {
    let mut i = settled();
    i.temporal.routing.update_in_progress = true;
    assert_eq!(plan(&i).requeue_after, Some(Duration::from_secs(1)));
}

// ---------------------------------------------------------------------------------------
// Manager identity
// ---------------------------------------------------------------------------------------

#[test]
fn case_02_empty_manager_identity_is_claimed_before_routing() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.temporal.manager_identity.clear();
    let p = plan(&i);
    assert!(p.claim_manager);
    assert_eq!(p.routing, set_current("v2"));

    // Nothing to route: nothing to claim.
    let mut i = settled();
    i.temporal.manager_identity.clear();
    assert!(!plan(&i).claim_manager);
}

#[test]
fn case_03_another_manager_blocks_routing_until_released() {
    // Differs from the Go controller, which sends the call anyway and fails the plan.
    let mut i = rollout(steps(&[(25.0, 600), (50.0, 600)]));
    i.temporal.manager_identity = "someone-else".into();
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert!(!p.claim_manager);
    assert_eq!(p.progress.phase, Phase::ManagedElsewhere);
    assert!(
        p.progress.message.contains("\"someone-else\""),
        "{}",
        p.progress.message
    );
    assert!(
        p.progress.message.contains("manager-identity unset"),
        "{}",
        p.progress.message
    );
    assert_eq!(p.requeue_after, Some(Duration::from_secs(5)));

    // After `manager-identity unset`: claim, then step 1.
    i.temporal.manager_identity.clear();
    let p = plan(&i);
    assert!(p.claim_manager);
    assert_eq!(p.routing, set_ramping("v2", 25.0));
}

#[test]
fn case_04_own_identity_is_not_reclaimed() {
    let p = plan(&rollout(Strategy::AllAtOnce));
    assert!(!p.claim_manager);
    assert!(p.routing.is_some());
}

#[test]
fn another_manager_does_not_undo_a_completed_rollout() {
    let mut i = settled();
    i.temporal.manager_identity = "someone-else".into();
    i.temporal
        .versions
        .push(VersionState::test("v9", T::Ramping));
    i.deployments.push(ObservedDeployment::test("v9", 1));
    set_ramp(&mut i, "v9", 10.0, ago(60));
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Complete);
}

/// The last routing change was made with our identity by install `install`, recorded on `build`.
fn routed_by(i: &mut PlanInput, install: &str, build: &str) {
    i.temporal.last_modifier_identity = i.controller_identity.clone();
    i.temporal.last_routing_install = Some(RoutingInstall {
        build_id: build.into(),
        install_id: install.into(),
    });
}

#[test]
fn another_install_with_our_identity_stops_every_routing_write() {
    let mut i = rollout(steps(&[(10.0, 60)]));
    routed_by(&mut i, "install-b", "v1");
    i.temporal.manager_identity = String::new();
    let p = plan(&i);
    assert_eq!(p.routing, None, "{p:?}");
    assert!(!p.claim_manager);
    assert_eq!(p.progress.phase, Phase::DuplicateInstall);
    let m = &p.progress.message;
    for part in [
        "\"install-b\"",
        "\"install-a\"",
        "identity \"release/ns-uid\"",
        "build ID v1",
        "--identity, Helm value controller.identity",
        "temporal.io/controller-install-id",
    ] {
        assert!(m.contains(part), "{part:?} missing from {m}");
    }
    // Even a finished rollout reports it: the other install may undo it any time.
    let mut i = settled();
    routed_by(&mut i, "install-b", "v2");
    assert_eq!(plan(&i).progress.phase, Phase::DuplicateInstall);
}

#[test]
fn our_own_record_or_another_identity_is_no_duplicate() {
    // Our own install made the last change.
    let mut i = rollout(Strategy::AllAtOnce);
    routed_by(&mut i, "install-a", "v1");
    assert_eq!(plan(&i).routing, set_current("v2"));
    // Another identity made the last change: its install is none of our business.
    let mut i = rollout(Strategy::AllAtOnce);
    routed_by(&mut i, "install-b", "v1");
    i.temporal.last_modifier_identity = "ops-oncall".into();
    assert_ne!(plan(&i).progress.phase, Phase::DuplicateInstall);
    // This install does not know its own ID: nothing can be told apart.
    let mut i = rollout(Strategy::AllAtOnce);
    routed_by(&mut i, "install-b", "v1");
    i.install_id = String::new();
    assert_eq!(plan(&i).routing, set_current("v2"));
}

#[test]
fn last_routed_build_is_the_one_the_last_change_routed_to() {
    let mut i = rollout(Strategy::AllAtOnce);
    assert_eq!(i.temporal.last_routed_build(), Some("v1"));
    set_ramp(&mut i, "v2", 10.0, ago(60));
    assert_eq!(i.temporal.last_routed_build(), Some("v2"));
    // Promoted after the ramp started.
    i.temporal.routing.current_changed_at = Some(ago(10));
    assert_eq!(i.temporal.last_routed_build(), Some("v1"));
    i.temporal.routing = RoutingState::default();
    assert_eq!(i.temporal.last_routed_build(), None);
}

// ---------------------------------------------------------------------------------------
// Stale ramps and promotion
// ---------------------------------------------------------------------------------------

#[test]
fn case_05_target_current_with_another_build_ramping_clears_the_ramp() {
    let mut i = settled();
    i.deployments.push(ObservedDeployment::test("v3", 1));
    i.temporal
        .versions
        .push(VersionState::test("v3", T::Ramping));
    set_ramp(&mut i, "v3", 10.0, ago(60));
    let p = plan(&i);
    assert_eq!(p.routing, Some(RoutingChange::ClearRamp));
    assert_eq!(p.progress.phase, Phase::Complete);

    // Manual leaves it alone.
    i.desired.strategy = Strategy::Manual;
    assert_eq!(plan(&i).routing, None);
}

#[test]
fn case_06_target_not_current_with_a_third_build_ramping_becomes_current() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments.push(ObservedDeployment::test("v9", 1));
    i.temporal
        .versions
        .push(VersionState::test("v9", T::Ramping));
    set_ramp(&mut i, "v9", 10.0, ago(60));
    assert_eq!(plan(&i).routing, set_current("v2"));
}

#[test]
fn case_59_promoting_the_ramping_target_needs_no_extra_clear() {
    let mut i = rollout(Strategy::AllAtOnce);
    set_ramp(&mut i, "v2", 50.0, ago(60));
    let p = plan(&i);
    assert_eq!(p.routing, set_current("v2"));
}

// ---------------------------------------------------------------------------------------
// First version and unversioned migration
// ---------------------------------------------------------------------------------------

fn first_version(strategy: Strategy) -> PlanInput {
    let mut i = rollout(strategy);
    i.deployments = vec![ObservedDeployment::test("v2", 3)];
    i.temporal.versions = vec![VersionState::test("v2", T::Inactive)];
    i.temporal.routing = RoutingState::default();
    i
}

#[test]
fn case_07_progressive_first_version_is_promoted_at_once() {
    let p = plan(&first_version(steps(&[(25.0, 600)])));
    assert_eq!(p.routing, set_current("v2"));
    assert_eq!(p.progress.phase, Phase::Complete);
}

#[test]
fn case_07_unversioned_pollers_on_every_queue_ramp_normally() {
    let mut i = first_version(steps(&[(25.0, 600)]));
    i.unversioned_pollers_on_all_queues = true;
    let p = plan(&i);
    assert_eq!(p.routing, set_ramping("v2", 25.0));
    assert_eq!(p.progress.phase, Phase::Ramping);
}

#[test]
fn a_ramp_against_unversioned_workers_is_not_cut_short() {
    // The probe for unversioned pollers only runs in some reconciles; once ramping, keep ramping.
    let mut i = first_version(steps(&[(25.0, 600), (50.0, 600)]));
    set_ramp(&mut i, "v2", 25.0, ago(60));
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Ramping);
}

#[test]
fn case_08_gate_comes_first_even_for_the_first_version() {
    let mut i = first_version(Strategy::AllAtOnce);
    i.desired.gate = Some(Gate {
        workflow_type: "Smoke".into(),
    });
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.start_gates, vec!["q1".to_string()]);
    assert_eq!(p.progress.phase, Phase::WaitingForGate);

    i.gates = vec![GateObservation::test("q1", GateWorkflowStatus::Completed)];
    let p = plan(&i);
    assert_eq!(p.routing, set_current("v2"));
    assert!(p.start_gates.is_empty());
}

// ---------------------------------------------------------------------------------------
// Rollback
// ---------------------------------------------------------------------------------------

/// The spec went back to v1, which was Current 10 minutes ago; v2 is Current now.
fn rolled_back(strategy: Strategy) -> PlanInput {
    let mut i = rollout(strategy);
    i.desired.build_id = "v1".into();
    i.temporal.routing.current_build_id = Some("v2".into());
    i.temporal.versions = vec![
        VersionState {
            last_current_at: Some(ago(600)),
            drainage_changed_at: Some(ago(600)),
            ..VersionState::test("v1", T::Draining)
        },
        VersionState {
            last_current_at: Some(ts(NOW)),
            ..VersionState::test("v2", T::Current)
        },
    ];
    i
}

#[test]
fn case_32_recent_rollback_skips_ramp_and_gate() {
    let mut i = rolled_back(steps(&[(25.0, 600)]));
    i.desired.gate = Some(Gate {
        workflow_type: "Smoke".into(),
    });
    let p = plan(&i);
    assert_eq!(p.routing, set_current("v1"));
    assert!(p.progress.rollback);
    assert_eq!(p.progress.phase, Phase::Complete);
    assert!(
        p.progress.message.contains("rolled back"),
        "{}",
        p.progress.message
    );
}

#[test]
fn case_32_no_or_old_last_current_time_uses_the_strategy() {
    let mut i = rolled_back(steps(&[(25.0, 600)]));
    i.temporal.versions[0].last_current_at = None;
    let p = plan(&i);
    assert_eq!(p.routing, set_ramping("v1", 25.0));
    assert!(!p.progress.rollback);

    let mut i = rolled_back(steps(&[(25.0, 600)]));
    i.temporal.versions[0].last_current_at = Some(ago(3601));
    assert_eq!(plan(&i).routing, set_ramping("v1", 25.0));
}

#[test]
fn case_32_manual_never_rolls_back() {
    let p = plan(&rolled_back(Strategy::Manual));
    assert_eq!(p.routing, None);
    assert!(!p.progress.rollback);
    assert_eq!(p.progress.phase, Phase::WaitingForPromotion);
}

#[test]
fn case_32_target_unknown_to_temporal_waits_for_pollers() {
    let mut i = rolled_back(Strategy::AllAtOnce);
    i.temporal.versions.remove(0);
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
}

#[test]
fn case_33_rollback_to_a_drained_version_is_immediate() {
    let mut i = rolled_back(steps(&[(25.0, 600)]));
    i.temporal.versions[0].status = T::Drained;
    assert_eq!(plan(&i).routing, set_current("v1"));
}

#[test]
fn rollback_waits_for_ready_pods_and_scales_back_up() {
    // v1 was sunset to zero; it may still report Available. Scale it up first, promote once ready.
    let mut i = rolled_back(Strategy::AllAtOnce);
    i.desired.replicas = None;
    i.deployments[0] = ObservedDeployment::test("v1", 0);
    i.deployments[0].healthy_since = Some(ago(7200));
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(scaled(&p), vec![("v1", 1)]);
    assert_eq!(p.progress.phase, Phase::WaitingForPromotion);

    i.deployments[0] = ObservedDeployment::test("v1", 1);
    assert_eq!(plan(&i).routing, set_current("v1"));
}

#[test]
fn case_57_rollback_starts_missing_gates_but_does_not_wait() {
    let mut i = rolled_back(Strategy::AllAtOnce);
    i.desired.gate = Some(Gate {
        workflow_type: "Smoke".into(),
    });
    i.target_task_queues = vec!["q1".into()];
    let p = plan(&i);
    assert_eq!(p.start_gates, vec!["q1".to_string()]);
    assert_eq!(p.routing, set_current("v1"));
}

#[test]
fn case_58_manual_target_draining_reports_waiting_for_promotion() {
    // The Go controller reports WaitingForPollers here although the version is registered.
    let p = plan(&rolled_back(Strategy::Manual));
    assert_eq!(p.progress.phase, Phase::WaitingForPromotion);
    assert!(
        p.progress.message.contains("Draining"),
        "{}",
        p.progress.message
    );
}
