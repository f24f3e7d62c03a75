//! Plan-level tests: every rollout rule, stated as given/when/then cases. Cases named
//! `case_NN_*` reproduce the upstream Go controller's behaviour (numbered as in our original
//! case list); where we deliberately differ from the Go controller the test says so.

use std::time::Duration;

use jiff::Timestamp;

use super::plan;
use crate::api::twd::GateWorkflowStatus;
use crate::planner::model::*;
use crate::planner::polling;
use crate::temporal::state::{
    GateObservation, RoutingInstall, RoutingState, TemporalVersionStatus as T, VersionState,
    WorkerDeploymentState,
};

use crate::fixtures::{NOW, ago, hours, ts};

fn mins(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

fn steps(spec: &[(f32, u64)]) -> Strategy {
    Strategy::Progressive(
        spec.iter()
            .map(|&(p, secs)| Step {
                ramp_percentage: p,
                pause: Duration::from_secs(secs),
            })
            .collect(),
    )
}

/// v1 is Current with 3 ready pods; v2 (the target) is registered, Inactive and healthy.
fn rollout(strategy: Strategy) -> PlanInput {
    PlanInput::test().strategy(strategy)
}

/// The target is Current; nothing else exists.
fn settled() -> PlanInput {
    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments = vec![ObservedDeployment::test("v2", 3)];
    i.temporal.versions = vec![VersionState::test("v2", T::Current)];
    i.temporal.routing.current_build_id = Some("v2".into());
    i
}

fn set_ramp(i: &mut PlanInput, build: &str, pct: f32, changed_at: Timestamp) {
    i.temporal.routing.ramping_build_id = Some(build.into());
    i.temporal.routing.ramp_percentage = pct;
    i.temporal.routing.ramping_changed_at = Some(changed_at);
    i.temporal.routing.ramp_percentage_changed_at = Some(changed_at);
    if let Some(v) = i.temporal.versions.iter_mut().find(|v| v.build_id == build) {
        v.status = T::Ramping;
    }
}

fn set_current(build: &str) -> Option<RoutingChange> {
    Some(RoutingChange::SetCurrent {
        build_id: build.into(),
    })
}

fn set_ramping(build: &str, pct: f32) -> Option<RoutingChange> {
    Some(RoutingChange::SetRamping {
        build_id: build.into(),
        percentage: pct,
    })
}

fn scaled(p: &Plan) -> Vec<(&str, i32)> {
    p.scale
        .iter()
        .map(|s| (s.build_id.as_str(), s.replicas))
        .collect()
}

fn deleted(p: &Plan) -> Vec<(&str, DeleteReason)> {
    p.delete
        .iter()
        .map(|d| (d.build_id.as_str(), d.reason))
        .collect()
}

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
    // no timer, no Temporal poll until a Pod is Ready.
    assert_eq!(p.requeue_after, None);
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
// Sunset
// ---------------------------------------------------------------------------------------

/// v2 is Current; v1 is an old version in `v1` state with a Deployment at `replicas`.
fn with_old(v1: VersionState, replicas: i32) -> PlanInput {
    let mut i = settled();
    i.deployments.push(ObservedDeployment::test("v1", replicas));
    i.temporal.versions.push(v1);
    i
}

#[test]
fn case_22_drained_past_both_delays_and_at_zero_is_deleted() {
    let mut i = with_old(VersionState::drained("v1", ago(24 * 3600)), 0);
    i.desired.delete_delay = hours(4);
    let p = plan(&i);
    assert_eq!(deleted(&p), vec![("v1", DeleteReason::Sunset)]);
    assert!(p.scale.is_empty());

    // Drained for one hour: scale-down is due (it is at 0 already), deletion is not.
    let mut i = with_old(VersionState::drained("v1", ago(3600)), 0);
    i.desired.delete_delay = hours(4);
    let p = plan(&i);
    assert!(p.delete.is_empty());
    assert_eq!(
        p.requeue_after,
        Some(hours(4)),
        "requeue exactly at the delete deadline"
    );
}

#[test]
fn case_23_drained_past_scaledown_is_scaled_to_zero_not_deleted() {
    let mut i = with_old(VersionState::drained("v1", ago(2 * 3600)), 1);
    i.desired.delete_delay = Duration::ZERO; // even when deletion is due, it waits for 0 replicas
    let p = plan(&i);
    assert_eq!(scaled(&p), vec![("v1", 0)]);
    assert_eq!(p.scale[0].reason, ScaleReason::Sunset);
    assert!(p.delete.is_empty());
}

#[test]
fn an_autoscaled_drained_version_is_still_scaled_to_zero_at_sunset() {
    // The one replicas write an autoscaled version gets, once no autoscaler copy targets it.
    let mut i = with_old(VersionState::drained("v1", ago(2 * 3600)), 4);
    i.deployments[1].autoscaled = true;
    let p = plan(&i);
    assert_eq!(scaled(&p), vec![("v1", 0)]);
    assert_eq!(p.scale[0].reason, ScaleReason::Sunset);
}

#[test]
fn sunset_waits_for_the_autoscaler_copy_to_go_before_scaling_to_zero() {
    // Due for scale-down, but an HPA still targets v1: scaling now would fight it.
    let mut i = with_old(VersionState::drained("v1", ago(2 * 3600)), 4);
    i.deployments[1].autoscaled = true;
    i.deployments[1].autoscaler_present = true;
    let p = plan(&i);
    assert!(scaled(&p).is_empty(), "{p:?}");
    assert_eq!(
        p.requeue_after,
        Some(crate::planner::sunset::AUTOSCALER_HANDOFF_POLL)
    );
    // The copy is gone: now the scale-down happens.
    i.deployments[1].autoscaler_present = false;
    assert_eq!(scaled(&plan(&i)), vec![("v1", 0)]);
}

#[test]
fn an_autoscaled_version_is_never_updated_with_replicas() {
    // Connection drift re-renders the pod template only: the update carries no replicas, so
    // the executor (`refresh_template` with `replicas: None`) leaves the autoscaler's choice.
    let mut i = rollout(Strategy::AllAtOnce);
    i.connection_hash = "new".into();
    i.deployments[0].autoscaled = true;
    i.deployments[0].replicas = Some(9);
    let p = plan(&i);
    assert!(p.update.iter().any(|u| u.build_id == "v1"), "{p:?}");
    assert!(!scaled(&p).iter().any(|(b, _)| *b == "v1"), "{p:?}");
}

#[test]
fn case_24_recently_drained_is_untouched_and_requeued_at_scaledown() {
    let mut i = with_old(VersionState::drained("v1", ago(30 * 60)), 3);
    i.desired.scaledown_delay = hours(2);
    let p = plan(&i);
    assert!(p.scale.is_empty() && p.delete.is_empty(), "{p:?}");
    assert_eq!(p.requeue_after, Some(mins(90)));
}

#[test]
fn drained_without_a_drain_time_is_left_alone() {
    let i = with_old(VersionState::test("v1", T::Drained), 3);
    let p = plan(&i);
    assert!(p.scale.is_empty() && p.delete.is_empty(), "{p:?}");
}

#[test]
fn case_25_draining_is_never_scaled_or_deleted_and_polled_slowly() {
    let mut i = with_old(
        VersionState {
            drainage_changed_at: Some(ago(10 * 86_400)),
            ..VersionState::test("v1", T::Draining)
        },
        3,
    );
    i.desired.scaledown_delay = Duration::ZERO;
    i.desired.delete_delay = Duration::ZERO;
    let p = plan(&i);
    assert!(p.scale.is_empty() && p.delete.is_empty(), "{p:?}");
    assert_eq!(p.requeue_after, Some(Duration::from_secs(30)));
}

#[test]
fn case_26_inactive_old_version_is_scaled_to_zero_at_once() {
    let i = with_old(VersionState::test("v1", T::Inactive), 3);
    let p = plan(&i);
    assert_eq!(scaled(&p), vec![("v1", 0)]);
    assert!(p.delete.is_empty());
    let mut i = with_old(VersionState::test("v1", T::Inactive), 3);
    i.deployments[1].replicas = None; // unset counts as running
    assert_eq!(scaled(&plan(&i)), vec![("v1", 0)]);
}

#[test]
fn inactive_superseded_version_is_deleted_once_its_pods_are_gone() {
    // Differs from the Go controller, which keeps such Deployments forever and counts them
    // against the version limit: an Inactive version never received work, so nothing drains.
    let mut i = with_old(VersionState::test("v1", T::Inactive), 0);
    i.deployments[1].status_replicas = 1;
    assert!(plan(&i).delete.is_empty(), "pods still terminating");
    i.deployments[1].status_replicas = 0;
    assert_eq!(deleted(&plan(&i)), vec![("v1", DeleteReason::Superseded)]);
}

#[test]
fn versions_with_open_pinned_workflows_are_never_retired() {
    // Differs from the Go controller, which scales an Inactive version to 0 at once: workflows
    // pinned to it by a gate or an override would lose their workers.
    let pinned = |status: VersionState, n: Option<u64>| VersionState {
        open_pinned_workflows: n,
        pinned: None,
        pinned_asked: Default::default(),
        ..status
    };
    for old in [
        VersionState::test("v1", T::Inactive),
        VersionState::drained("v1", ago(10 * 86_400)),
    ] {
        for n in [Some(2), None] {
            for replicas in [3, 0] {
                let mut i = with_old(pinned(old.clone(), n), replicas);
                i.desired.delete_delay = Duration::ZERO;
                let p = plan(&i);
                assert!(p.scale.is_empty() && p.delete.is_empty(), "{n:?} {p:?}");
                assert_eq!(p.requeue_after, Some(Duration::from_secs(30)), "{n:?}");
            }
        }
        let i = with_old(pinned(old, Some(0)), 3);
        assert_eq!(scaled(&plan(&i)), vec![("v1", 0)]);
    }
}

#[test]
fn pinned_workflows_are_counted_only_for_versions_about_to_be_retired() {
    let uncounted = |v: VersionState| VersionState {
        open_pinned_workflows: None,
        pinned: None,
        pinned_asked: Default::default(),
        ..v
    };
    let mut i = settled();
    i.deployments.extend([
        ObservedDeployment::test("inactive", 3),
        ObservedDeployment::test("drained-due", 3),
        ObservedDeployment::test("drained-recent", 3),
        ObservedDeployment::test("draining", 3),
        ObservedDeployment::test("counted", 3),
    ]);
    i.temporal.versions.extend([
        uncounted(VersionState::test("inactive", T::Inactive)),
        uncounted(VersionState::drained("drained-due", ago(2 * 3600))),
        uncounted(VersionState::drained("drained-recent", ago(60))),
        uncounted(VersionState::test("draining", T::Draining)),
        VersionState::test("counted", T::Inactive),
    ]);
    for v in &mut i.temporal.versions {
        if v.build_id == "v2" {
            v.open_pinned_workflows = None;
        }
    }
    assert_eq!(
        super::sunset::pinned_check_candidates(&i),
        vec!["inactive".to_string(), "drained-due".to_string()]
    );
}

#[test]
fn case_27_unregistered_leftover_deleted_only_when_temporal_lists_versions() {
    let mut i = settled();
    i.deployments.push(ObservedDeployment::test("gone", 2));
    assert_eq!(
        deleted(&plan(&i)),
        vec![("gone", DeleteReason::NotRegistered)]
    );

    let mut i = settled();
    i.deployments.push(ObservedDeployment::test("gone", 2));
    i.temporal.versions.clear();
    assert!(plan(&i).delete.is_empty());

    let mut i = settled();
    i.deployments.push(ObservedDeployment::test("gone", 2));
    i.temporal.exists = false;
    assert!(plan(&i).delete.is_empty());
}

#[test]
fn deployments_already_being_deleted_are_left_alone() {
    let mut i = settled();
    let mut d = ObservedDeployment::test("gone", 0);
    d.deleting = true;
    i.deployments.push(d);
    let p = plan(&i);
    assert!(
        p.delete.is_empty() && p.scale.is_empty() && p.update.is_empty(),
        "{p:?}"
    );
}

#[test]
fn idle_when_nothing_is_pending() {
    let p = plan(&settled());
    assert_eq!(
        p,
        Plan {
            progress: p.progress.clone(),
            ..Default::default()
        }
    );
    assert_eq!(p.progress.phase, Phase::Complete);
    assert_eq!(p.progress.message, "Rollout complete for build ID v2");
    assert_eq!(p.requeue_after, None);
}

// ---------------------------------------------------------------------------------------
// In-place updates
// ---------------------------------------------------------------------------------------

#[test]
fn case_34_connection_drift_updates_every_version() {
    let mut i = with_old(VersionState::drained("v1", ago(60)), 3);
    i.connection_hash = "conn-2".into();
    let p = plan(&i);
    let mut updated: Vec<_> = p
        .update
        .iter()
        .map(|u| (u.build_id.as_str(), u.reason))
        .collect();
    updated.sort_by_key(|u| u.0);
    assert_eq!(
        updated,
        vec![
            ("v1", UpdateReason::ConnectionDrift),
            ("v2", UpdateReason::ConnectionDrift)
        ]
    );
}

#[test]
fn deployments_about_to_be_deleted_are_not_updated() {
    let mut i = settled();
    i.deployments.push(ObservedDeployment::test("gone", 1));
    i.connection_hash = "conn-2".into();
    let p = plan(&i);
    assert_eq!(p.update.len(), 1);
    assert_eq!(p.update[0].build_id, "v2");
}

#[test]
fn case_36_custom_build_id_template_drift_is_a_rolling_update() {
    let mut i = settled();
    i.desired.custom_build_id = true;
    i.desired.pod_template_hash = "tpl-2".into();
    let p = plan(&i);
    assert_eq!(
        p.update,
        vec![UpdateDeployment {
            name: "w-v2".into(),
            build_id: "v2".into(),
            reason: UpdateReason::PodTemplateDrift
        }]
    );

    // Template and connection both drifted: one update re-renders both.
    i.connection_hash = "conn-2".into();
    assert_eq!(plan(&i).update.len(), 1);

    // Replicas-only change: hashes equal, only a scale.
    let mut i = settled();
    i.desired.custom_build_id = true;
    i.desired.replicas = Some(5);
    let p = plan(&i);
    assert!(p.update.is_empty());
    assert_eq!(scaled(&p), vec![("v2", 5)]);

    // Legacy Deployment without the annotation: never guessed at.
    let mut i = settled();
    i.desired.custom_build_id = true;
    i.desired.pod_template_hash = "tpl-2".into();
    i.deployments[0].pod_template_hash = None;
    assert!(plan(&i).update.is_empty());

    // Derived build ID: a template change is a new build, never an in-place update.
    let mut i = settled();
    i.desired.pod_template_hash = "tpl-2".into();
    assert!(plan(&i).update.is_empty());
}

/// `build`'s Deployment was rolled in place to the current Connection and Kubernetes gave up
/// waiting for its new Pods (`ProgressDeadlineExceeded`); its old Pods are still Ready.
fn stall(i: &mut PlanInput, build: &str) {
    let d = i
        .deployments
        .iter_mut()
        .find(|d| d.build_id == build)
        .expect("deployment of the stalled build");
    d.rolled_in_place = true;
    d.progress_deadline_exceeded = true;
}

#[test]
fn a_stalled_connection_roll_of_the_target_holds_promotion_and_is_reported() {
    let mut i = rollout(Strategy::AllAtOnce);
    stall(&mut i, "v2");
    let p = plan(&i);
    assert_eq!(
        p.routing, None,
        "never promote a version whose new Pods are not Ready"
    );
    assert!(!p.claim_manager);
    assert_eq!(p.progress.phase, Phase::ConnectionRolloutStalled);
    let m = &p.progress.message;
    for part in [
        "w-v2 (build ID v2, target)",
        "ProgressDeadlineExceeded",
        "routing to these versions is held",
        "hostPort, TLS and API key Secret",
    ] {
        assert!(m.contains(part), "{part:?} missing from {m}");
    }
    // Recovery: Kubernetes sees the new Pods Ready (the condition flips back).
    i.deployments[1].progress_deadline_exceeded = false;
    let p = plan(&i);
    assert_eq!(p.routing, set_current("v2"));
    assert_eq!(p.progress.phase, Phase::Complete);
}

#[test]
fn a_stalled_ramping_target_does_not_advance_its_steps() {
    let mut i = rollout(steps(&[(10.0, 60), (50.0, 60)]));
    set_ramp(&mut i, "v2", 10.0, ago(3600));
    stall(&mut i, "v2");
    let p = plan(&i);
    assert_eq!(p.routing, None, "{p:?}");
    assert_eq!(p.progress.phase, Phase::ConnectionRolloutStalled);
    // Without the stall the next step is due.
    i.deployments[1].progress_deadline_exceeded = false;
    assert_eq!(plan(&i).routing, set_ramping("v2", 50.0));
}

#[test]
fn a_stalled_current_version_is_reported_but_work_may_move_off_it() {
    let mut i = rollout(Strategy::AllAtOnce);
    stall(&mut i, "v1");
    let p = plan(&i);
    assert_eq!(
        p.routing,
        set_current("v2"),
        "the healthy target takes over"
    );
    assert_eq!(p.progress.phase, Phase::ConnectionRolloutStalled);
    assert!(
        p.progress.message.contains("w-v1 (build ID v1, Current)"),
        "{}",
        p.progress.message
    );
    assert!(
        !p.progress.message.contains("held"),
        "{}",
        p.progress.message
    );

    // Clearing a stale ramp sends the ramped share to the stalled Current version: held.
    let mut i = settled();
    i.deployments.push(ObservedDeployment::test("v3", 3));
    i.temporal
        .versions
        .push(VersionState::test("v3", T::Ramping));
    set_ramp(&mut i, "v3", 20.0, ago(60));
    assert_eq!(plan(&i).routing, Some(RoutingChange::ClearRamp));
    stall(&mut i, "v2");
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::ConnectionRolloutStalled);
}

#[test]
fn a_stall_of_a_draining_version_keeps_a_finished_rollout_from_reading_ready() {
    let mut i = with_old(VersionState::test("v1", T::Draining), 3);
    stall(&mut i, "v1");
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::ConnectionRolloutStalled);
    assert!(
        p.progress.message.contains("build ID v1, Draining"),
        "{}",
        p.progress.message
    );
    assert!(p.scale.iter().all(|s| s.replicas > 0), "{p:?}");
}

#[test]
fn only_rolls_to_the_current_connection_count_as_stalled() {
    // A fresh Deployment that never got Ready is a new version waiting for pollers, not a
    // Connection roll.
    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments[1].progress_deadline_exceeded = true;
    assert_ne!(plan(&i).progress.phase, Phase::ConnectionRolloutStalled);

    // The Connection was fixed: the stalled Deployment carries the previous settings and is
    // rolled again this reconcile; the old verdict says nothing about the new settings.
    let mut i = rollout(Strategy::AllAtOnce);
    stall(&mut i, "v2");
    i.connection_hash = "conn-fixed".into();
    let p = plan(&i);
    assert_ne!(p.progress.phase, Phase::ConnectionRolloutStalled);
    assert!(
        p.update
            .iter()
            .any(|u| u.build_id == "v2" && u.reason == UpdateReason::ConnectionDrift),
        "{p:?}"
    );

    // A Deployment being deleted is not part of the rollout any more.
    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments.push(ObservedDeployment {
        deleting: true,
        ..ObservedDeployment::test("v0", 1)
    });
    stall(&mut i, "v0");
    assert_ne!(plan(&i).progress.phase, Phase::ConnectionRolloutStalled);
}

#[test]
fn a_failed_gate_outranks_a_stalled_connection_roll() {
    let mut i = gated(Strategy::AllAtOnce, &["q1"]);
    i.gates = vec![GateObservation::test("q1", GateWorkflowStatus::Failed)];
    stall(&mut i, "v2");
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::GateFailed);
}

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
fn a_target_without_ready_pods_is_not_polled_for_pollers() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.temporal.versions.truncate(1);
    let target = i
        .deployments
        .iter_mut()
        .find(|d| d.build_id == "v2")
        .unwrap();
    target.ready_replicas = 0;
    target.healthy_since = None;
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
    assert_eq!(p.routing, None);
    assert_eq!(
        p.requeue_after, None,
        "a readiness change arrives through the Deployment watch"
    );
}

#[test]
fn a_running_gate_is_looked_at_with_a_backoff_from_its_start() {
    let mut i = gated(Strategy::AllAtOnce, &["q"]);
    let mut running = GateObservation::test("q", GateWorkflowStatus::Running);
    running.started_at = Some(ago(4));
    i.gates = vec![running];
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::WaitingForGate);
    assert_eq!(p.requeue_after, Some(Duration::from_secs(4)));
    // Started long ago: at the cap, not at --fast-poll.
    i.gates[0].started_at = Some(ago(3600));
    assert_eq!(plan(&i).requeue_after, Some(polling::POLLER_WAIT_CAP));
}

#[test]
fn pollers_of_a_target_ready_for_2s_are_looked_for_after_2s() {
    let mut i = rollout(Strategy::AllAtOnce);
    i.temporal.versions.truncate(1);
    let now = i.now;
    let target = i
        .deployments
        .iter_mut()
        .find(|d| d.build_id == "v2")
        .unwrap();
    target.healthy_since = Some(now - jiff::SignedDuration::from_secs(2));
    assert_eq!(plan(&i).requeue_after, Some(Duration::from_secs(2)));
    // Just Ready: the first look comes at --fast-poll.
    let target = i
        .deployments
        .iter_mut()
        .find(|d| d.build_id == "v2")
        .unwrap();
    target.healthy_since = Some(now);
    assert_eq!(plan(&i).requeue_after, Some(i.fast_poll));
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
// Gates
// ---------------------------------------------------------------------------------------

fn gated(strategy: Strategy, queues: &[&str]) -> PlanInput {
    let mut i = rollout(strategy);
    i.desired.gate = Some(Gate {
        workflow_type: "Smoke".into(),
    });
    i.target_task_queues = queues.iter().map(|q| q.to_string()).collect();
    i
}

#[test]
fn case_09_partial_gate_completion_starts_only_the_missing_queue() {
    let mut i = gated(Strategy::AllAtOnce, &["q1", "q2"]);
    i.gates = vec![GateObservation::test("q1", GateWorkflowStatus::Completed)];
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.start_gates, vec!["q2".to_string()]);
    assert_eq!(p.progress.phase, Phase::WaitingForGate);
    assert!(
        p.progress.message.contains("1 of 2"),
        "{}",
        p.progress.message
    );
    assert_eq!(p.requeue_after, Some(Duration::from_secs(1)));
}

#[test]
fn case_10_failed_gate_never_promotes_and_names_the_workflow() {
    for status in [
        GateWorkflowStatus::Failed,
        GateWorkflowStatus::Canceled,
        GateWorkflowStatus::Terminated,
        GateWorkflowStatus::TimedOut,
    ] {
        let mut i = gated(Strategy::AllAtOnce, &["q1", "q2"]);
        i.gates = vec![
            GateObservation::test("q1", GateWorkflowStatus::Completed),
            GateObservation::test("q2", status),
        ];
        let p = plan(&i);
        assert_eq!(p.routing, None, "{status:?}");
        assert!(p.start_gates.is_empty(), "a failed gate is not restarted");
        assert_eq!(p.progress.phase, Phase::GateFailed);
        assert!(
            p.progress.message.contains("test-ns/w:v2-q2"),
            "{}",
            p.progress.message
        );
        assert_eq!(p.requeue_after, None, "terminal: waits for a spec change");
    }
}

#[test]
fn case_11_gate_without_workflow_task_queues_never_promotes() {
    let i = gated(Strategy::AllAtOnce, &[]);
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert!(p.start_gates.is_empty());
    assert_eq!(p.progress.phase, Phase::WaitingForGate);
    assert!(
        p.progress.message.contains("workflow task queue"),
        "{}",
        p.progress.message
    );
}

#[test]
fn case_12_manual_with_gate_runs_the_gate_but_never_routes() {
    let i = gated(Strategy::Manual, &["q1"]);
    let p = plan(&i);
    assert_eq!(p.start_gates, vec!["q1".to_string()]);
    assert_eq!(p.routing, None);
    assert!(!p.claim_manager);
    assert_eq!(p.progress.phase, Phase::WaitingForGate);

    let mut i = gated(Strategy::Manual, &["q1"]);
    i.gates = vec![GateObservation::test("q1", GateWorkflowStatus::Completed)];
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::WaitingForPromotion);
    assert!(
        p.progress.message.contains("Manual"),
        "{}",
        p.progress.message
    );
    // A human promotes in Temporal: look again soon so the status follows within seconds.
    assert_eq!(p.requeue_after, Some(Duration::from_secs(5)));
}

#[test]
fn gates_are_not_started_for_an_unregistered_target() {
    let mut i = gated(Strategy::AllAtOnce, &["q1"]);
    i.temporal.versions.truncate(1);
    assert!(plan(&i).start_gates.is_empty());
}

#[test]
fn gates_are_not_started_once_the_target_is_current() {
    let mut i = settled();
    i.desired.gate = Some(Gate {
        workflow_type: "Smoke".into(),
    });
    i.target_task_queues = vec!["q1".into()];
    assert!(plan(&i).start_gates.is_empty());
}

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
