//! Progress-deadline rules (`src/planner/deadline.rs`), one test per rule, through `plan()`.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::plan;
use crate::api::conditions::PROGRESS_DEADLINE_EXCEEDED;
use crate::api::twd::{AbortRecord, WaitingSince};
use crate::fixtures::{NOW, ago, ts};
use crate::planner::model::*;
use crate::planner::test_fixtures::set_current;

const DEADLINE: Duration = Duration::from_secs(600);

/// v1 Current; v2 (the target, AllAtOnce) has a Deployment whose Pods are not Ready and is
/// unknown to Temporal.
fn waiting() -> PlanInput {
    let mut i = PlanInput::test();
    let d = &mut i.deployments[1];
    d.ready_replicas = 0;
    d.healthy_since = None;
    d.created_at = Some(ts(NOW));
    i.temporal.versions.retain(|v| v.build_id != "v2");
    i.target_task_queues.clear();
    i
}

/// `waiting()` with the clock started `secs` ago (as the last status recorded it).
fn waiting_for(secs: i64) -> PlanInput {
    let mut i = waiting();
    i.desired.control.record.waiting = Some(WaitingSince {
        build_id: "v2".into(),
        since: Time(ago(secs)),
        deadline: Time(ago(secs - 600)),
    });
    i
}

fn image_pull() -> PodTrouble {
    PodTrouble {
        pod: "w-v2-abc".into(),
        cause: PodCause::ImagePull {
            container: "worker".into(),
            image: "registry.invalid/w:2".into(),
            reason: "ImagePullBackOff".into(),
            message: "Back-off pulling image".into(),
        },
    }
}

fn failed_record(generation: i64) -> AbortRecord {
    AbortRecord {
        build_id: "v2".into(),
        reason: PROGRESS_DEADLINE_EXCEEDED.into(),
        message: "Build ID v2 did not become routable: recorded cause".into(),
        at: Time(ago(60)),
        generation: Some(generation),
    }
}

#[test]
fn the_clock_starts_when_the_target_starts_waiting_and_the_planner_wakes_at_its_end() {
    let p = plan(&waiting());
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
    let w = p.control.waiting.as_ref().expect("clock recorded");
    assert_eq!((w.build_id.as_str(), w.since.0), ("v2", ts(NOW)));
    assert_eq!(w.deadline.0, ts("2026-03-02T12:10:00Z"));
    assert_eq!(p.requeue_after, Some(DEADLINE));
    assert!(
        p.progress
            .message
            .contains("progress deadline at 2026-03-02T12:10:00Z (600s)"),
        "{}",
        p.progress.message
    );
    assert_eq!(p.routing, None);
}

#[test]
fn a_restarted_controller_keeps_the_recorded_start_and_wakes_exactly_at_the_deadline() {
    let p = plan(&waiting_for(590));
    let w = p.control.waiting.as_ref().unwrap();
    assert_eq!(w.since.0, ago(590), "the recorded start is kept, not now");
    assert_eq!(p.requeue_after, Some(Duration::from_secs(10)));
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
}

#[test]
fn the_cause_is_in_the_message_as_soon_as_it_is_known() {
    let mut i = waiting_for(30);
    i.target_pods = Some(image_pull());
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::WaitingForPollers, "not failed yet");
    let m = &p.progress.message;
    assert!(m.contains("registry.invalid/w:2"), "{m}");
    assert!(m.contains("Pod w-v2-abc"), "{m}");
}

#[test]
fn past_the_deadline_the_build_has_failed_and_nothing_is_routed_to_it() {
    let mut i = waiting_for(600);
    i.target_pods = Some(image_pull());
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::DeadlineExceeded);
    assert_eq!(p.routing, None);
    let m = &p.progress.message;
    assert!(m.contains("600s"), "{m}");
    assert!(m.contains("ImagePullBackOff"), "{m}");
    assert!(m.contains("build ID v1 stays Current"), "{m}");
    assert!(m.contains("temporal.io/retry=v2"), "{m}");
    let r = p.control.aborted.as_ref().expect("failure recorded");
    assert_eq!(r.reason, PROGRESS_DEADLINE_EXCEEDED);
    assert_eq!((r.build_id.as_str(), r.generation), ("v2", Some(1)));
    assert_eq!(&r.message, m);
    assert_eq!(p.control.waiting, None);
    // Hold: the failed build keeps its Pods for inspection.
    assert!(
        p.scale
            .iter()
            .all(|s| s.build_id != "v2" || s.replicas == 3)
    );
}

#[test]
fn without_a_pod_level_cause_the_failure_says_the_workers_never_polled() {
    let p = plan(&waiting_for(601));
    assert!(
        p.progress.message.contains("never polled"),
        "{}",
        p.progress.message
    );
    // The Deployment's own verdict is a cause too.
    let mut i = waiting_for(601);
    i.deployments[1].progress_deadline_exceeded = true;
    let p = plan(&i);
    assert!(
        p.progress
            .message
            .contains("w-v2 reports ProgressDeadlineExceeded"),
        "{}",
        p.progress.message
    );
}

#[test]
fn a_remembered_failure_holds_a_reapplied_spec_even_once_the_build_looks_healthy() {
    // The unchanged spec is re-applied; meanwhile the Pods became Ready and registered.
    let mut i = PlanInput::test();
    i.desired.control.record.aborted = Some(failed_record(1));
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::DeadlineExceeded);
    assert_eq!(p.routing, None, "never promoted without a clear");
    assert_eq!(p.progress.message, failed_record(1).message);
    assert_eq!(p.control.aborted, Some(failed_record(1)));
    // The promote annotation does not override it.
    i.desired.control.promote = Some("v2".into());
    assert_eq!(plan(&i).routing, None);
}

#[test]
fn a_spec_change_clears_the_failure_and_starts_the_clock_again() {
    let mut i = waiting();
    i.desired.control.record.aborted = Some(failed_record(1));
    i.desired.control.record.waiting = None;
    i.desired.generation = 2;
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
    assert_eq!(p.control.aborted, None);
    assert_eq!(p.control.waiting.as_ref().unwrap().since.0, ts(NOW));
    // A healthy build after the change is routed at once.
    let mut i = PlanInput::test();
    i.desired.control.record.aborted = Some(failed_record(1));
    i.desired.generation = 2;
    assert_eq!(plan(&i).routing, set_current("v2"));
}

#[test]
fn the_retry_annotation_clears_the_failure_once_per_value() {
    let mut i = waiting();
    i.desired.control.record.aborted = Some(failed_record(1));
    // A stale clock of the failed wait is not reused.
    i.desired.control.record.waiting = Some(WaitingSince {
        build_id: "v2".into(),
        since: Time(ago(5000)),
        deadline: Time(ago(4400)),
    });
    i.desired.control.retry = Some("v2".into());
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::WaitingForPollers);
    assert_eq!(p.control.retried.as_deref(), Some("v2"));
    assert_eq!(p.control.aborted, None);
    assert_eq!(p.control.waiting.as_ref().unwrap().since.0, ts(NOW));
    // Acted on already: the same value does not clear a later failure.
    i.desired.control.record.retried = Some("v2".into());
    assert_eq!(plan(&i).progress.phase, Phase::DeadlineExceeded);
    // A new value does; one naming another build does not.
    i.desired.control.retry = Some("v2/2".into());
    assert_eq!(plan(&i).progress.phase, Phase::WaitingForPollers);
    i.desired.control.retry = Some("v9".into());
    assert_eq!(plan(&i).progress.phase, Phase::DeadlineExceeded);
}

#[test]
fn abort_on_failure_scales_the_failed_build_to_zero_and_keeps_current() {
    let mut i = waiting_for(600);
    i.desired.abort_on_failure = true;
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::DeadlineExceeded);
    let v2: Vec<_> = p.scale.iter().filter(|s| s.build_id == "v2").collect();
    assert_eq!(v2.len(), 1, "{:?}", p.scale);
    assert_eq!((v2[0].replicas, v2[0].reason), (0, ScaleReason::Failed));
    assert!(
        p.scale
            .iter()
            .all(|s| s.build_id != "v1" || s.replicas == 3),
        "Current untouched"
    );
    assert!(p.progress.message.contains("scaled to zero"));
    assert_eq!(p.routing, None);
    // Held afterwards: still at zero, never re-created.
    let mut i = waiting();
    i.desired.abort_on_failure = true;
    i.desired.control.record.aborted = Some(failed_record(1));
    i.deployments[1].replicas = Some(0);
    let p = plan(&i);
    assert!(p.scale.iter().all(|s| s.build_id != "v2"), "{:?}", p.scale);
    i.deployments.remove(1);
    assert_eq!(plan(&i).create, None);
}

#[test]
fn an_explicit_abort_or_pause_wins_over_the_clock() {
    let mut i = waiting_for(700);
    i.desired.control.abort = true;
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::Aborted);
    assert_eq!(p.control.aborted, None);
    let mut i = waiting_for(700);
    i.desired.control.paused = true;
    let p = plan(&i);
    assert_ne!(p.progress.phase, Phase::DeadlineExceeded);
    assert_eq!(p.control.waiting, None, "a resume starts the clock again");
}

#[test]
fn a_target_missing_a_task_queue_of_current_is_not_routed_and_fails_with_that_cause() {
    let mut i = PlanInput::test();
    i.current_task_queues = vec!["orders".into()];
    i.target_task_queues = vec!["ordres".into()];
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::WaitingForPromotion);
    assert!(
        p.progress.message.contains("orders"),
        "{}",
        p.progress.message
    );
    i.desired.control.record.waiting = Some(WaitingSince {
        build_id: "v2".into(),
        since: Time(ago(600)),
        deadline: Time(ts(NOW)),
    });
    let p = plan(&i);
    assert_eq!(p.progress.phase, Phase::DeadlineExceeded);
    let m = &p.progress.message;
    assert!(
        m.contains("poll task queue(s) ordres but not orders"),
        "{m}"
    );
    // Polling every queue: routed.
    i.target_task_queues = vec!["orders".into(), "ordres".into()];
    i.desired.control.record.waiting = None;
    assert_eq!(plan(&i).routing, set_current("v2"));
}

#[test]
fn a_routable_or_current_target_has_no_clock() {
    let p = plan(&PlanInput::test());
    assert_eq!(p.control.waiting, None);
    assert_eq!(p.routing, set_current("v2"));
}

#[test]
fn lost_pollers_run_the_same_clock_and_stall_only_past_it() {
    let mut i = crate::planner::test_fixtures::settled();
    i.pollers.health = Some(Health::NoActivePollers {
        missing: vec![Missing {
            build_id: "v2".into(),
            task_queue: "q1".into(),
        }],
        live_within: Duration::from_secs(120),
    });
    let p = plan(&i);
    let lost = p.control.pollers_lost.clone().expect("clock started");
    assert_eq!((lost.build_id.as_str(), lost.since.0), ("v2", ts(NOW)));
    assert!(!p.pollers_lost_too_long);
    assert!(p.requeue_after.is_some_and(|d| d <= DEADLINE));
    // Recorded earlier: kept, and past the deadline it has lasted too long.
    i.desired.control.record.pollers_lost = Some(WaitingSince {
        since: Time(ago(599)),
        deadline: Time(ago(-1)),
        ..lost.clone()
    });
    let p = plan(&i);
    assert!(!p.pollers_lost_too_long);
    assert_eq!(p.requeue_after, Some(Duration::from_secs(1)));
    i.desired.control.record.pollers_lost = Some(WaitingSince {
        since: Time(ago(600)),
        deadline: Time(ts(NOW)),
        ..lost.clone()
    });
    assert!(plan(&i).pollers_lost_too_long);
    // Temporal could not be asked: the clock keeps running.
    i.pollers.health = Some(Health::Unknown { why: "x".into() });
    assert!(plan(&i).pollers_lost_too_long);
    // Back before (or after) the deadline: cleared.
    i.pollers.health = Some(Health::Healthy);
    let p = plan(&i);
    assert_eq!(p.control.pollers_lost, None);
    assert!(!p.pollers_lost_too_long);
}

#[test]
fn the_targets_pods_are_read_only_when_its_recorded_deadline_has_come() {
    use super::deadline::wants_pods;
    // No clock yet, or one still running: the caches and Temporal say what they know; a fleet
    // of waiting rollouts reads no Pods (tests/temporal_budget.rs: no API reads in a quiet minute).
    assert!(!wants_pods(&waiting()));
    assert!(!wants_pods(&waiting_for(60)));
    // At the deadline: this reconcile writes the failure, whose message names the Pods' trouble.
    assert!(wants_pods(&waiting_for(600)));
    assert!(wants_pods(&waiting_for(700)));
    // Another build's clock, or a failure already held, reads nothing.
    let mut other = waiting_for(700);
    if let Some(w) = other.desired.control.record.waiting.as_mut() {
        w.build_id = "v1".into();
    }
    assert!(!wants_pods(&other));
    let mut held = waiting_for(700);
    held.desired.control.record.aborted = Some(failed_record(held.desired.generation));
    assert!(!wants_pods(&held));
}
