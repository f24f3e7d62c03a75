//! In-place updates and stalled Connection rolls (`src/planner/drift.rs`), through `plan()`.
//!
//! Cases named `case_NN_*` reproduce the upstream Go controller's behaviour (numbered as in our
//! original case list); where we deliberately differ from the Go controller the test says so.

use super::plan;
use crate::api::twd::GateWorkflowStatus;
use crate::planner::model::*;
use crate::temporal::state::{GateObservation, TemporalVersionStatus as T, VersionState};

use crate::fixtures::ago;
use crate::planner::test_fixtures::*;

// ---------------------------------------------------------------------------------------
// In-place updates
// ---------------------------------------------------------------------------------------

/// An edit of the Connection every version records (the fixtures' `Connection/temporal`)
/// rolls them all; a `connectionRef` change does not (below).
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

fn updates(p: &Plan) -> Vec<(&str, UpdateReason, Option<&str>)> {
    let mut out: Vec<_> = p
        .update
        .iter()
        .map(|u| (u.build_id.as_str(), u.reason, u.connection.as_deref()))
        .collect();
    out.sort_by_key(|u| u.0);
    out
}

/// v2 Current, v1 Draining on `Connection/temporal`; the spec now names `Connection/moved`.
fn moved(v1: VersionState) -> PlanInput {
    let mut i = with_old(v1, 3);
    i.connection_ref = "Connection/moved".into();
    i.connection_hash = "conn-moved".into();
    i.recorded_connections = [("Connection/temporal".to_string(), "conn".to_string())].into();
    i
}

#[test]
fn a_connection_ref_change_moves_target_and_current_and_old_versions_keep_theirs() {
    // Go v1.10 (its PR #525): the Draining version's Pods keep serving its pinned workflows
    // where they run.
    let i = moved(VersionState::test("v1", T::Draining));
    assert_eq!(
        updates(&plan(&i)),
        [("v2", UpdateReason::ConnectionDrift, None)]
    );
    for old in [
        VersionState::drained("v1", ago(60)),
        VersionState::test("v1", T::Inactive),
    ] {
        let p = plan(&moved(old));
        assert!(p.update.iter().all(|u| u.build_id != "v1"), "{p:?}");
    }

    // Mid-rollout both the target and the Current version move.
    let mut i = rollout(Strategy::Manual);
    i.connection_ref = "Connection/moved".into();
    i.connection_hash = "conn-moved".into();
    assert_eq!(
        updates(&plan(&i)),
        [
            ("v1", UpdateReason::ConnectionDrift, None),
            ("v2", UpdateReason::ConnectionDrift, None)
        ]
    );
}

#[test]
fn an_old_version_follows_edits_of_its_own_connection_only() {
    let mut i = moved(VersionState::test("v1", T::Draining));
    i.deployments[0].connection_hash = Some("conn-moved".into());
    assert!(plan(&i).update.is_empty(), "both carry what they should");

    // Its Connection was edited (a moved address, a rotated Secret): rolled with that one.
    i.recorded_connections
        .insert("Connection/temporal".into(), "conn-edited".into());
    assert_eq!(
        updates(&plan(&i)),
        [(
            "v1",
            UpdateReason::ConnectionDrift,
            Some("Connection/temporal")
        )]
    );

    // Its Connection is gone (or unreadable): its Pods keep what they carry.
    i.recorded_connections.clear();
    assert!(plan(&i).update.is_empty());

    // No record (made before the record existed, or by the Go controller): as in Go v1.10,
    // an old version is never rolled for a Connection.
    let mut i = moved(VersionState::test("v1", T::Draining));
    i.deployments[0].connection_hash = Some("conn-moved".into());
    i.deployments[1].connection_ref = None;
    i.deployments[1].connection_hash = Some("anything".into());
    assert!(plan(&i).update.is_empty());
}

#[test]
fn an_unregistered_version_on_another_connection_is_not_deleted() {
    // The other Connection may reach another Temporal than the one asked.
    let mut i = settled();
    let mut d = ObservedDeployment::test("elsewhere", 1);
    d.connection_ref = Some("Connection/old".into());
    i.deployments.push(d);
    assert!(plan(&i).delete.is_empty());
    i.deployments[1].connection_ref = Some("Connection/temporal".into());
    assert_eq!(
        deleted(&plan(&i)),
        [("elsewhere", DeleteReason::NotRegistered)]
    );
}

#[test]
fn deployment_settings_changes_update_every_version_in_place_and_only_then() {
    // Neither a record nor settings (our older Deployments, a take-over): nothing to do.
    let mut i = with_old(VersionState::drained("v1", ago(60)), 3);
    assert!(plan(&i).update.is_empty());
    // Settings set: every live version gets them, as a settings-only update.
    i.desired.deployment_settings = Some(r#"{"labels":{"team":"a"}}"#.into());
    let reasons = |i: &PlanInput| -> Vec<(String, UpdateReason)> {
        let mut u: Vec<_> = plan(i)
            .update
            .iter()
            .map(|u| (u.build_id.clone(), u.reason))
            .collect();
        u.sort_by(|a, b| a.0.cmp(&b.0));
        u
    };
    assert_eq!(
        reasons(&i),
        [
            ("v1".to_string(), UpdateReason::SettingsDrift),
            ("v2".to_string(), UpdateReason::SettingsDrift)
        ]
    );
    // Once recorded, nothing more; a Connection change still rolls (and applies them too).
    for d in &mut i.deployments {
        d.settings = i.desired.deployment_settings.clone();
    }
    assert!(plan(&i).update.is_empty());
    i.connection_hash = "conn-2".into();
    assert!(
        reasons(&i)
            .iter()
            .all(|(_, r)| *r == UpdateReason::ConnectionDrift)
    );
    // Settings removed from the spec: the recorded ones are taken off again.
    i.connection_hash = "conn".into();
    i.desired.deployment_settings = None;
    assert_eq!(reasons(&i).len(), 2);
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
            reason: UpdateReason::PodTemplateDrift,
            connection: None,
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
