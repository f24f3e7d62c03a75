//! The act stage: the only code that changes the cluster or Temporal.
//!
//! Order of writes in one reconcile: our finalizer on the TWD (so nothing is created that
//! deletion could not clean up) → our finalizer on the Connection (so cleanup can still reach
//! Temporal) → the plan, in [`execute`]'s fixed order. Deletion uses [`finalizers`] only.

mod adoption;
pub mod done;
pub mod execute;
mod failures;
pub mod finalizers;
mod restart;

use std::sync::Arc;

pub use execute::Done;

use crate::api::TemporalWorkerDeployment;

use jiff::Timestamp;

use crate::planner::clock;
use crate::planner::model::{Phase, Plan, PlanInput};
use crate::worker_deployment::context::Context;
use crate::worker_deployment::observe::Observed;
use crate::worker_deployment::outcome::Outcome;
use execute::ExecContext;

/// What the act stage did.
pub struct Acted {
    /// The object after our finalizer was added (fresh resourceVersion for the status write).
    pub twd: Arc<TemporalWorkerDeployment>,
    /// Writes that succeeded, in order.
    pub done: Vec<Done>,
    pub outcome: Outcome,
}

/// Applies `plan`; stops at the first failure.
pub async fn apply(
    ctx: &Context,
    twd: &Arc<TemporalWorkerDeployment>,
    observed: &Observed,
    input: &PlanInput,
    plan: &Plan,
) -> Acted {
    // Never before the time the plan was made for (`crate::planner::punctual`).
    if let Some(early) = clock::until(Timestamp::now(), input.now) {
        tokio::time::sleep(early).await;
    }
    let not_leader = || Acted {
        twd: twd.clone(),
        done: Vec::new(),
        // Nothing written; the new leader looks again.
        outcome: Outcome::Stale,
    };
    if !ctx.services.leads() || !ctx.still_ours(twd) {
        return not_leader();
    }
    let twd = match finalizers::ensure(ctx, twd).await {
        // The API server's copy, when the finalizer was just added.
        Ok(twd) => ctx.dressed(twd),
        Err(outcome) => {
            return Acted {
                twd: twd.clone(),
                done: Vec::new(),
                outcome,
            };
        }
    };
    if !ctx.services.leads() {
        return not_leader();
    }
    finalizers::protect_connection(ctx, &observed.connection).await;
    if !ctx.services.leads() || !ctx.still_ours(&twd) {
        return not_leader();
    }
    let exec = ExecContext {
        kube: &ctx.services.client,
        temporal: &observed.client,
        twd: &twd,
        connection: &observed.connection.spec,
        recorded_connections: &observed.recorded_connections,
        deployment_name: &twd.temporal_deployment_name(),
        conflict_token: input.temporal.conflict_token.clone(),
        gate_input: observed.gate_input.as_ref(),
        gate_workflow_type: input
            .desired
            .gate
            .as_ref()
            .map(|g| g.workflow_type.as_str()),
        step_gate: crate::planner::step_gates::in_effect(input)
            .map(|(_, g)| (g.workflow_type.as_str(), observed.step_gate_input.as_ref())),
        target_build_id: &input.desired.build_id,
        controller_version: &ctx.settings.controller_version,
        metrics: &ctx.services.metrics,
    };
    let executed = execute::execute(&exec, plan).await;
    remember(ctx, &twd, input, plan, &executed.done);
    Acted {
        twd: twd.clone(),
        done: executed.done,
        outcome: executed.failure.map_or(Outcome::Done, Outcome::Failed),
    }
}

/// What the next reconcile may take from this one instead of asking Temporal again: the
/// target's task queues while it waits for its gate, and that our own write made the
/// remembered view of Temporal stale (and keeps the worker deployment's system workflow busy
/// for a moment).
/// The target's task queues while it waits only for its running gate workflows: then the
/// next passes ask only the gates. Not while its task queues are still unknown (a target that
/// has not polled yet): that wait needs the version described again, and remembering no queues
/// would skip that describe until the remembered view ages out.
fn gate_queues_to_remember(input: &PlanInput, plan: &Plan) -> Option<Vec<String>> {
    let gate_pending = plan.progress.phase == Phase::WaitingForGate && plan.start_gates.is_empty();
    (gate_pending && !input.target_task_queues.is_empty()).then(|| input.target_task_queues.clone())
}

fn remember(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    input: &PlanInput,
    plan: &Plan,
    done: &[Done],
) {
    let object = twd.key();
    ctx.remembered
        .note_gate(&object, gate_queues_to_remember(input, plan));
    if done.iter().any(Done::wrote_temporal_deployment) {
        ctx.remembered.wrote(&object);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_queues_are_remembered_only_once_known() {
        let mut plan = Plan::default();
        plan.progress.phase = Phase::WaitingForGate;
        let mut input = PlanInput::test();
        // The target has not polled yet: describe it again next time.
        input.target_task_queues = Vec::new();
        assert_eq!(gate_queues_to_remember(&input, &plan), None);
        input.target_task_queues = vec!["orders".into()];
        assert_eq!(
            gate_queues_to_remember(&input, &plan),
            Some(vec!["orders".to_string()])
        );
        plan.progress.phase = Phase::Ramping;
        assert_eq!(gate_queues_to_remember(&input, &plan), None);
    }
}
