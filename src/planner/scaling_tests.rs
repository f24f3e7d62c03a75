//! Creation, the version limit and scaling (`src/planner/scaling.rs`, the limit in `plan()`), through `plan()`.
//!
//! Cases named `case_NN_*` reproduce the upstream Go controller's behaviour (numbered as in our
//! original case list); where we deliberately differ from the Go controller the test says so.

use std::time::Duration;

use super::plan;
use crate::planner::model::*;
use crate::temporal::state::{TemporalVersionStatus as T, VersionState, WorkerDeploymentState};

use crate::fixtures::ago;
use crate::planner::test_fixtures::*;

// ---------------------------------------------------------------------------------------
// Creation and the version limit
// ---------------------------------------------------------------------------------------

#[test]
fn case_01_no_temporal_deployment_creates_target_and_touches_nothing_else() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.temporal = WorkerDeploymentState::default();
    // A leftover of an earlier build and the missing target: nothing may be deleted or scaled down.
    i.deployments = vec![ObservedDeployment::test("v0", 2)];
    let p = plan(&i);
    assert_eq!(
        p.create,
        Some(CreateDeployment {
            build_id: "v2".into(),
            replicas: Some(3)
        })
    );
    assert!(p.delete.is_empty(), "{p:?}");
    assert!(p.scale.is_empty(), "{p:?}");
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
    assert!(p.progress.message.contains("v2"), "{}", p.progress.message);
    // The Deployment's creation (then its readiness) wakes the rollout through the watch:
    // no Temporal poll until a Pod is Ready; the only timer is the progress deadline.
    assert_eq!(p.requeue_after, Some(i.desired.progress_deadline));
}

#[test]
fn create_uses_unset_replicas_in_autoscaler_mode() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.desired.replicas = None;
    i.deployments = vec![ObservedDeployment::test("v1", 3)];
    i.temporal.versions.truncate(1);
    assert_eq!(
        plan(&i).create,
        Some(CreateDeployment {
            build_id: "v2".into(),
            replicas: None
        })
    );
}

#[test]
fn a_target_deployment_being_deleted_is_not_recreated_yet() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.temporal.versions.truncate(1);
    i.deployments[1].deleting = true;
    let p = plan(&i);
    assert_eq!(p.create, None);
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
    assert!(
        p.progress.message.contains("finish deleting"),
        "{}",
        p.progress.message
    );
}

/// `n` drained versions that still have pods (not eligible for deletion), each with a Deployment.
fn with_ineligible(i: &mut PlanInput, n: usize) {
    for k in 0..n {
        let b = format!("old{k:03}");
        i.deployments.push(ObservedDeployment::test(&b, 0));
        let last = i.deployments.len() - 1;
        i.deployments[last].status_replicas = 1; // pods still terminating
        i.temporal.versions.push(VersionState::drained(&b, ago(60)));
    }
}

#[test]
fn case_30_version_limit_holds_back_a_new_target() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments = vec![ObservedDeployment::test("v1", 3)];
    i.temporal.versions = vec![VersionState::test("v1", T::Current)];
    with_ineligible(&mut i, 75);
    let p = plan(&i);
    assert_eq!(p.create, None);
    assert_eq!(p.progress.phase, Phase::TooManyVersions);
    assert!(
        p.progress.message.contains("75 older versions"),
        "{}",
        p.progress.message
    );
    assert!(
        p.progress.message.contains("limit 75"),
        "{}",
        p.progress.message
    );
    assert!(
        p.progress.message.contains("scaledownDelay"),
        "says what to do: {}",
        p.progress.message
    );
    assert_eq!(p.requeue_after, Some(Duration::from_secs(30)));

    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments = vec![ObservedDeployment::test("v1", 3)];
    i.temporal.versions = vec![VersionState::test("v1", T::Current)];
    i.desired.max_versions_ineligible_for_deletion = 5;
    with_ineligible(&mut i, 4);
    let p = plan(&i);
    assert!(p.create.is_some());
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
}

#[test]
fn case_31_drained_versions_with_pods_block_until_they_are_gone() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.desired.max_versions_ineligible_for_deletion = 2;
    i.deployments = vec![ObservedDeployment::test("v1", 3)];
    i.temporal.versions = vec![VersionState::test("v1", T::Current)];
    with_ineligible(&mut i, 2);
    assert_eq!(plan(&i).progress.phase, Phase::TooManyVersions);

    // The pods of old000 are gone (eligible), and the server forgot old001 (now NotRegistered).
    i.deployments[1].status_replicas = 0;
    i.temporal.versions.retain(|v| v.build_id != "old001");
    let p = plan(&i);
    assert!(p.create.is_some(), "{p:?}");
    assert_eq!(deleted(&p), vec![("old001", DeleteReason::NotRegistered)]);
}

#[test]
fn the_limit_does_not_hold_back_a_version_temporal_already_knows() {
    // Re-creating the Deployment of a known version adds no version to Temporal.
    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments = vec![ObservedDeployment::test("v1", 3)];
    i.temporal.versions = vec![
        VersionState::test("v1", T::Current),
        VersionState::drained("v2", ago(7200)),
    ];
    i.desired.max_versions_ineligible_for_deletion = 1;
    with_ineligible(&mut i, 3);
    assert!(plan(&i).create.is_some());
}

#[test]
fn unregistered_leftovers_do_not_count_against_the_limit() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.desired.max_versions_ineligible_for_deletion = 1;
    i.deployments = vec![
        ObservedDeployment::test("v1", 3),
        ObservedDeployment::test("stray", 1),
    ];
    i.temporal.versions = vec![VersionState::test("v1", T::Current)];
    let p = plan(&i);
    assert!(p.create.is_some());
    assert_eq!(deleted(&p), vec![("stray", DeleteReason::NotRegistered)]);
}

// ---------------------------------------------------------------------------------------
// Scaling
// ---------------------------------------------------------------------------------------

#[test]
fn case_29_fixed_replicas_bring_target_and_current_to_spec() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments[1] = ObservedDeployment::test("v2", 0);
    assert!(scaled(&plan(&i)).contains(&("v2", 3)));

    let mut i = rollout(Strategy::AllAtOnce);
    i.desired.replicas = Some(2);
    i.deployments[0] = ObservedDeployment::test("v1", 1);
    let p = plan(&i);
    assert!(scaled(&p).contains(&("v1", 2)), "{p:?}");
    assert!(scaled(&p).contains(&("v2", 2)), "{p:?}");
    assert!(p.scale.iter().all(|s| s.reason == ScaleReason::Desired));
}

#[test]
fn case_28_autoscaler_mode_revives_a_target_at_zero_only() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.desired.replicas = None;
    i.deployments[1] = ObservedDeployment::test("v2", 0);
    i.deployments[0].replicas = Some(7); // HPA's choice for the current version: untouched
    assert_eq!(scaled(&plan(&i)), vec![("v2", 1)]);

    for replicas in [None, Some(4)] {
        let mut i = rollout(Strategy::AllAtOnce);
        i.desired.replicas = None;
        i.deployments[1].replicas = replicas;
        assert!(plan(&i).scale.is_empty(), "{replicas:?}");
    }
}

#[test]
fn an_autoscaled_version_keeps_the_autoscalers_replicas_whatever_spec_replicas_says() {
    // spec.replicas is 3, the HPA chose 5 for the current and 2 for the target: no writes.
    let mut i = rollout(Strategy::AllAtOnce);
    i.desired.replicas = Some(3);
    i.deployments[0] = ObservedDeployment::test("v1", 5);
    i.deployments[1] = ObservedDeployment::test("v2", 2);
    for d in &mut i.deployments {
        d.autoscaled = true;
    }
    assert_eq!(scaled(&plan(&i)), vec![]);

    // Only the autoscaled one is left alone.
    i.deployments[1].autoscaled = false;
    assert_eq!(scaled(&plan(&i)), vec![("v2", 3)]);
}

#[test]
fn an_autoscaled_target_at_zero_is_woken_to_one_only() {
    // An HPA switches itself off for a Deployment at 0, so nothing else would wake it.
    let mut i = rollout(Strategy::AllAtOnce);
    i.desired.replicas = Some(3);
    i.deployments[1] = ObservedDeployment::test("v2", 0);
    i.deployments[1].autoscaled = true;
    assert_eq!(scaled(&plan(&i)), vec![("v2", 1)]);
}

#[test]
fn an_old_ramping_version_is_kept_at_spec_replicas() {
    // The spec changed mid-ramp: v2 still holds the ramp while v3 comes up.
    let mut i = rollout(steps(&[(25.0, 600)]));
    i.desired.build_id = "v3".into();
    i.deployments[1] = ObservedDeployment::test("v2", 1);
    i.deployments.push(ObservedDeployment::test("v3", 3));
    i.temporal
        .versions
        .push(VersionState::test("v3", T::Inactive));
    set_ramp(&mut i, "v2", 25.0, ago(60));
    let p = plan(&i);
    assert_eq!(scaled(&p), vec![("v2", 3)]);
    assert!(p.delete.is_empty());
    // v3 replaces v2 in the single ramping slot.
    assert_eq!(p.routing, set_ramping("v3", 25.0));
}

#[test]
fn current_and_ramping_versions_are_never_scaled_down_or_deleted() {
    let mut i = rollout(steps(&[(25.0, 600)]));
    i.desired.build_id = "v3".into();
    i.deployments.push(ObservedDeployment::test("v3", 3));
    set_ramp(&mut i, "v2", 25.0, ago(60));
    // Temporal lists neither as Drained; even with absurd sunset settings they stay.
    i.desired.scaledown_delay = Duration::ZERO;
    i.desired.delete_delay = Duration::ZERO;
    let p = plan(&i);
    assert!(p.scale.iter().all(|s| s.replicas > 0), "{p:?}");
    assert!(
        p.delete
            .iter()
            .all(|d| d.build_id != "v1" && d.build_id != "v2"),
        "{p:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Draining versions left at 0 replicas (issue 26 item 5)
// ---------------------------------------------------------------------------------------

/// v2 is Current; v1 is Draining with `open` pinned workflows counted and its Deployment at 0.
fn draining_at_zero(open: Option<u64>, autoscaled: bool) -> PlanInput {
    let mut v1 = VersionState::test("v1", T::Draining);
    v1.drainage_changed_at = Some(ago(600));
    v1.pinned = open.map(|count| crate::temporal::state::PinnedView {
        count,
        counted_at: ago(5),
        oldest: Vec::new(),
    });
    let mut i = with_old(v1, 0);
    i.deployments[1].autoscaled = autoscaled;
    i.deployments[1].autoscaler_present = autoscaled;
    i
}

#[test]
fn a_draining_version_with_open_workflows_at_zero_goes_back_to_its_replicas() {
    let p = plan(&draining_at_zero(Some(2), false));
    assert_eq!(scaled(&p), [("v1", 3)], "{p:?}");
    assert_eq!(p.scale[0].reason, ScaleReason::DrainingAtZero);
    assert!(p.held_at_zero.is_empty());

    // Autoscaler mode without an autoscaler on this version: one worker lets them finish.
    let mut i = draining_at_zero(Some(2), false);
    i.desired.replicas = None;
    assert_eq!(scaled(&plan(&i)), [("v1", 1)]);
}

#[test]
fn a_draining_version_an_autoscaler_holds_at_zero_is_reported_not_scaled() {
    let p = plan(&draining_at_zero(Some(4), true));
    assert!(scaled(&p).is_empty(), "{p:?}");
    assert_eq!(
        p.held_at_zero,
        [HeldAtZero {
            build_id: "v1".into(),
            open: 4
        }]
    );
    let m = &p.progress.message;
    assert!(
        m.contains("build ID v1 is Draining at 0 replicas with 4 open pinned workflow(s)"),
        "{m}"
    );
}

#[test]
fn a_draining_version_at_zero_is_left_alone_without_open_workflows_or_a_count() {
    for open in [None, Some(0)] {
        let p = plan(&draining_at_zero(open, false));
        assert!(scaled(&p).is_empty(), "{open:?}: {p:?}");
        assert!(p.held_at_zero.is_empty(), "{open:?}");
    }
    // Drained (not Draining) at 0 is the sunset's business: never woken.
    let mut i = draining_at_zero(Some(2), false);
    i.temporal.versions[1].status = T::Drained;
    assert!(!scaled(&plan(&i)).contains(&("v1", 3)));
}
