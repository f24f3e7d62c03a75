//! Gate workflows: one per workflow task queue of the target, all of which must complete
//! before the target receives traffic.
//!
//! Gate workflow IDs are deterministic per build and Temporal refuses duplicates, so a failed
//! gate cannot be re-run for the same build: it is terminal until the spec changes.

use crate::api::twd::{GateWorkflow, GateWorkflowStatus};
use crate::planner::model::Gate;
use crate::temporal::state::GateObservation;

#[derive(Clone, Debug, PartialEq)]
pub enum GateState {
    /// No gate configured (or it does not apply).
    Open,
    /// Every task queue's gate workflow completed.
    Passed,
    /// Still waiting; `start` lists task queues without a gate workflow yet.
    Pending { start: Vec<String>, message: String },
    /// A gate workflow ended in a failure state.
    Failed { message: String },
}

pub fn evaluate(
    gate: Option<&Gate>,
    build_id: &str,
    queues: &[String],
    observed: &[GateObservation],
) -> GateState {
    let Some(gate) = gate else {
        return GateState::Open;
    };
    if queues.is_empty() {
        return GateState::Pending {
            start: Vec::new(),
            message: format!(
                "Waiting for build ID {build_id} to poll a workflow task queue before starting gate workflow {}",
                gate.workflow_type
            ),
        };
    }
    let relevant: Vec<&GateObservation> = observed
        .iter()
        .filter(|o| queues.contains(&o.task_queue))
        .collect();
    if let Some(failed) = relevant.iter().find(|o| is_failure(o.status)) {
        return GateState::Failed {
            message: format!(
                "Gate workflow {} on task queue {} for build ID {build_id} ended {:?}; a failed gate is not re-run, \
                 change the spec (a new build ID) to retry",
                failed.workflow_id, failed.task_queue, failed.status
            ),
        };
    }
    let completed = |q: &String| {
        relevant
            .iter()
            .any(|o| &o.task_queue == q && o.status == GateWorkflowStatus::Completed)
    };
    if queues.iter().all(completed) {
        return GateState::Passed;
    }
    let start: Vec<String> = queues
        .iter()
        .filter(|q| !relevant.iter().any(|o| &o.task_queue == *q))
        .cloned()
        .collect();
    let done = queues.iter().filter(|q| completed(q)).count();
    GateState::Pending {
        start,
        message: format!(
            "Waiting for gate workflow {} on build ID {build_id} ({done} of {} task queues completed)",
            gate.workflow_type,
            queues.len()
        ),
    }
}

fn is_failure(s: GateWorkflowStatus) -> bool {
    matches!(
        s,
        GateWorkflowStatus::Failed
            | GateWorkflowStatus::Canceled
            | GateWorkflowStatus::Terminated
            | GateWorkflowStatus::TimedOut
    )
}

/// Gate workflows observed in a terminal state that the last written status did not record
/// as such, as metric outcomes (`completed` or `failed`). A failed gate stays in the status,
/// so it is counted once; a completed one is usually observed exactly once, in the reconcile
/// that promotes (gates are only observed before the target is Current).
pub fn newly_finished(before: &[GateWorkflow], observed: &[GateObservation]) -> Vec<&'static str> {
    observed
        .iter()
        .filter(|g| g.status != GateWorkflowStatus::Running)
        .filter(|g| {
            !before.iter().any(|b| {
                b.workflow_id == g.workflow_id && b.run_id == g.run_id && b.status == g.status
            })
        })
        .map(|g| match g.status {
            GateWorkflowStatus::Completed => "completed",
            _ => "failed",
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gw(id: &str, run: &str, status: GateWorkflowStatus) -> GateWorkflow {
        GateWorkflow {
            workflow_id: id.into(),
            run_id: run.into(),
            task_queue: "q".into(),
            status,
        }
    }

    fn seen(id: &str, run: &str, status: GateWorkflowStatus) -> GateObservation {
        GateObservation {
            workflow_id: id.into(),
            run_id: run.into(),
            task_queue: "q".into(),
            status,
            started_at: None,
        }
    }

    #[test]
    fn finished_gates_are_counted_once_per_run() {
        use GateWorkflowStatus::*;
        let running = [gw("g", "r1", Running)];
        let done = [gw("g", "r1", Completed)];
        assert_eq!(
            newly_finished(&running, &[seen("g", "r1", Completed)]),
            vec!["completed"]
        );
        assert_eq!(
            newly_finished(&[], &[seen("g", "r1", Completed)]),
            vec!["completed"]
        );
        // Already recorded: not counted again.
        assert!(newly_finished(&done, &[seen("g", "r1", Completed)]).is_empty());
        // Still running, or nothing observed (target already Current): nothing.
        assert!(newly_finished(&[], &[seen("g", "r1", Running)]).is_empty());
        assert!(newly_finished(&running, &[]).is_empty());
        // Every non-success terminal state is a failure.
        for s in [Failed, Canceled, Terminated, TimedOut] {
            assert_eq!(
                newly_finished(&running, &[seen("g", "r1", s)]),
                vec!["failed"]
            );
        }
        // A new run of the same workflow ID counts again.
        assert_eq!(
            newly_finished(&done, &[seen("g", "r2", Completed)]),
            vec!["completed"]
        );
        // Two queues, one finishing.
        let before = [gw("a", "1", Completed), gw("b", "1", Running)];
        let after = [seen("a", "1", Completed), seen("b", "1", Failed)];
        assert_eq!(newly_finished(&before, &after), vec!["failed"]);
    }

    fn gate() -> Gate {
        Gate {
            workflow_type: "Smoke".into(),
        }
    }

    fn obs(q: &str, status: GateWorkflowStatus) -> GateObservation {
        GateObservation {
            workflow_id: format!("test-ns/w:v2-{q}"),
            run_id: "r".into(),
            task_queue: q.into(),
            status,
            started_at: None,
        }
    }

    fn queues(qs: &[&str]) -> Vec<String> {
        qs.iter().map(|q| q.to_string()).collect()
    }

    #[test]
    fn no_gate_is_open() {
        assert_eq!(evaluate(None, "v2", &queues(&["q1"]), &[]), GateState::Open);
    }

    #[test]
    fn all_completed_passes() {
        let o = [
            obs("q1", GateWorkflowStatus::Completed),
            obs("q2", GateWorkflowStatus::Completed),
        ];
        assert_eq!(
            evaluate(Some(&gate()), "v2", &queues(&["q1", "q2"]), &o),
            GateState::Passed
        );
    }

    #[test]
    fn every_failure_state_is_terminal_and_names_the_workflow() {
        for s in [
            GateWorkflowStatus::Failed,
            GateWorkflowStatus::Canceled,
            GateWorkflowStatus::Terminated,
            GateWorkflowStatus::TimedOut,
        ] {
            let o = [obs("q1", GateWorkflowStatus::Completed), obs("q2", s)];
            match evaluate(Some(&gate()), "v2", &queues(&["q1", "q2"]), &o) {
                GateState::Failed { message } => {
                    assert!(message.contains("test-ns/w:v2-q2"), "{message}");
                    assert!(message.contains(&format!("{s:?}")), "{message}");
                }
                other => panic!("{s:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn observations_for_other_queues_are_ignored() {
        let o = [
            obs("old-queue", GateWorkflowStatus::Failed),
            obs("q1", GateWorkflowStatus::Completed),
        ];
        assert_eq!(
            evaluate(Some(&gate()), "v2", &queues(&["q1"]), &o),
            GateState::Passed
        );
    }

    #[test]
    fn running_waits_without_restarting() {
        let o = [obs("q1", GateWorkflowStatus::Running)];
        match evaluate(Some(&gate()), "v2", &queues(&["q1"]), &o) {
            GateState::Pending { start, message } => {
                assert!(start.is_empty());
                assert!(message.contains("0 of 1"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
