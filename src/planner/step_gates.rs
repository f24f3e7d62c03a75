//! Gates per step: a gate workflow attached to a Progressive step is started on every workflow
//! task queue of the target once the target ramps at that step; the step ends only when every
//! one completed, and a failed one ramps the target back to 0 % and stalls the rollout
//! (`RolloutAborted`, recorded for the build like a failed analysis).
//!
//! Step gate workflow IDs carry the step (`…-step<N>`), so each step's gate runs once per build.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::twd::{AbortRecord, RolloutControl};
use crate::planner::analysis::hold_aborted;
use crate::planner::clock::Wake;
use crate::planner::gates::{self, GateState};
use crate::planner::model::{Decision, Gate, PlanInput, RoutingChange, StepGateStart};
use crate::planner::progressive;
use crate::planner::view::View;

/// Reason recorded for an abort by a failed step gate.
pub const STEP_GATE_FAILED: &str = "StepGateFailed";

/// The step the target ramps at exactly, if that step has a gate.
pub fn in_effect(input: &PlanInput) -> Option<(usize, &Gate)> {
    let step = progressive::target_step(input)?;
    let gate = input.desired.step_gates.get(step)?.as_ref()?;
    Some((step, gate))
}

/// Starts the step's gate where missing, holds the step while it runs, aborts on a failure.
pub fn apply(view: &View, d: &mut Decision, record: &mut RolloutControl, wake: &mut Wake) {
    let input = view.input;
    let Some((step, gate)) = in_effect(input) else {
        return;
    };
    let state = gates::evaluate(
        Some(gate),
        view.target,
        &input.target_task_queues,
        &input.step_gates,
    );
    match state {
        GateState::Open | GateState::Passed => {}
        GateState::Failed { message } => {
            let message = format!(
                "Step {} gate failed: {message}. The ramp of build ID {} is back to 0%; a new \
                 build ID starts over, or {} overrides",
                step + 1,
                view.target,
                crate::api::ANNOTATION_PROMOTE
            );
            record.aborted = Some(AbortRecord {
                build_id: view.target.to_string(),
                reason: STEP_GATE_FAILED.to_string(),
                message: message.clone(),
                at: Time(input.now),
                generation: None,
            });
            hold_aborted(view, d, message, wake);
        }
        GateState::Pending { start, message } => {
            wake.after(input.fast_poll);
            if !start.is_empty() {
                d.start_step_gates = Some(StepGateStart {
                    step,
                    task_queues: start,
                });
            }
            let forward = matches!(
                d.change,
                Some(RoutingChange::SetCurrent { .. } | RoutingChange::SetRamping { .. })
            );
            if forward {
                d.change = None;
                d.progress.message = format!(
                    "Holding build ID {} at step {}: {message}",
                    view.target,
                    step + 1
                );
            }
        }
    }
}
