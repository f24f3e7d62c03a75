//! Gate workflows before promotion (`src/planner/gates.rs`), through `plan()`.
//!
//! Cases named `case_NN_*` reproduce the upstream Go controller's behaviour (numbered as in our
//! original case list); where we deliberately differ from the Go controller the test says so.

use std::time::Duration;

use super::plan;
use crate::api::twd::GateWorkflowStatus;
use crate::planner::model::*;
use crate::temporal::state::GateObservation;

use crate::planner::test_fixtures::*;

// ---------------------------------------------------------------------------------------
// Gates
// ---------------------------------------------------------------------------------------

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
