//! Scaling down and deleting old versions (`src/planner/sunset.rs`), through `plan()`.
//!
//! Cases named `case_NN_*` reproduce the upstream Go controller's behaviour (numbered as in our
//! original case list); where we deliberately differ from the Go controller the test says so.

use std::time::Duration;

use super::plan;
use crate::planner::model::*;
use crate::temporal::state::{TemporalVersionStatus as T, VersionState};

use crate::fixtures::{ago, hours};
use crate::planner::test_fixtures::*;

// ---------------------------------------------------------------------------------------
// Sunset
// ---------------------------------------------------------------------------------------

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
fn a_late_look_keeps_delete_delay_after_the_actual_scale_down() {
    // Issue 26 item 9. Drained 10 h ago, noticed only now (a controller outage): both the
    // scale-down (1 h) and the deletion (+4 h) deadlines are long past.
    let mut i = with_old(VersionState::drained("v1", ago(10 * 3600)), 2);
    i.desired.scaledown_delay = hours(1);
    i.desired.delete_delay = hours(4);
    let p = plan(&i);
    assert_eq!(scaled(&p), vec![("v1", 0)]);
    assert_eq!(p.scale[0].record_scaled_down_at, Some(i.now), "{p:?}");
    assert!(p.delete.is_empty(), "{p:?}");

    // The next pass sees it at zero with the scale-down recorded: the Deployment stays warm
    // for the whole deleteDelay (a rollback can still scale it up), and the controller comes
    // back exactly when it is due.
    let scaled_at = i.now;
    i.deployments[1].replicas = Some(0);
    i.deployments[1].scaled_down_at = Some(scaled_at);
    i.now = scaled_at + jiff::SignedDuration::from_secs(5);
    let p = plan(&i);
    assert!(
        p.delete.is_empty(),
        "deleted in the pass after the scale-down: {p:?}"
    );
    assert_eq!(p.requeue_after, Some(hours(4) - Duration::from_secs(5)));
    let report = crate::worker_deployment::status::Report::Planned {
        input: &i,
        plan: &p,
        routed: None,
        outcome: Ok(()),
    };
    let status = crate::worker_deployment::status::compute(None, 1, &report, i.now);
    let old = status.deprecated_versions.first().expect("v1 listed");
    assert_eq!(
        old.delete_at.as_ref().map(|t| t.0),
        Some(scaled_at + jiff::SignedDuration::from_hours(4)),
        "status says when it will really go"
    );

    // deleteDelay after the scale-down: now it goes.
    i.now = scaled_at + jiff::SignedDuration::from_hours(4);
    assert_eq!(deleted(&plan(&i)), vec![("v1", DeleteReason::Sunset)]);
}

#[test]
fn a_stale_scale_down_record_does_not_postpone_past_the_deadline_or_bring_it_forward() {
    // Recorded before the deadline (an earlier sunset, since scaled up again and then scaled
    // to zero by someone else): the deadline formula holds.
    let mut i = with_old(VersionState::drained("v1", ago(3 * 3600)), 0);
    i.desired.scaledown_delay = hours(1);
    i.desired.delete_delay = hours(1);
    i.deployments[1].scaled_down_at = Some(ago(30 * 86_400));
    assert_eq!(deleted(&plan(&i)), vec![("v1", DeleteReason::Sunset)]);
    // A record on a Deployment that is not at zero is ignored (scaled up again since).
    let mut i = with_old(VersionState::drained("v1", ago(3 * 3600)), 2);
    i.desired.scaledown_delay = hours(1);
    i.deployments[1].scaled_down_at = Some(ago(60));
    let p = plan(&i);
    assert_eq!(scaled(&p), vec![("v1", 0)]);
    assert!(p.delete.is_empty(), "{p:?}");
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
fn an_uncounted_drained_version_wakes_at_its_scaledown_deadline_not_the_drain_poll() {
    // In a real reconcile a Drained version's pinned workflows are counted only once a sunset
    // deadline is due, so before that the count is unknown. The wake-up must still be the
    // deadline: measured 16 s late on average when only the 30 s drain poll brought the
    // controller back (issue 27, `cargo bench --bench scale_probe -- --scenarios promote`).
    let mut i = with_old(
        VersionState {
            open_pinned_workflows: None,
            ..VersionState::drained("v1", ago(30))
        },
        1,
    );
    i.desired.scaledown_delay = Duration::from_secs(45);
    let p = plan(&i);
    assert!(p.scale.is_empty() && p.delete.is_empty(), "{p:?}");
    assert_eq!(p.requeue_after, Some(Duration::from_secs(15)));
    assert_eq!(
        super::sunset::pinned_check_candidates(&i),
        Vec::<String>::new(),
        "nothing is counted before the deadline"
    );
    // At the deadline it is a candidate: the observe stage counts it, and with none pinned
    // the plan scales it down.
    i.now += jiff::SignedDuration::from_secs(15);
    assert_eq!(
        super::sunset::pinned_check_candidates(&i),
        vec!["v1".to_string()]
    );
    let v1 = i.temporal.versions.iter_mut().find(|v| v.build_id == "v1");
    v1.expect("v1").open_pinned_workflows = Some(0);
    assert_eq!(scaled(&plan(&i)), vec![("v1", 0)]);
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
