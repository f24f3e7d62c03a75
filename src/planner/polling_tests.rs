//! When Temporal is worth asking again (`src/planner/polling.rs`), through `plan()`.

use std::time::Duration;

use super::plan;
use crate::api::twd::GateWorkflowStatus;
use crate::planner::model::*;
use crate::temporal::state::GateObservation;

use crate::fixtures::ago;
use crate::planner::polling;
use crate::planner::test_fixtures::*;

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
        p.requeue_after,
        Some(i.desired.progress_deadline),
        "a readiness change arrives through the Deployment watch: the only timer is the \
         progress deadline"
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
