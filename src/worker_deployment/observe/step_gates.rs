//! Step gates around the pure planner: while the target ramps at a step that has a gate, reads
//! that gate's workflows and resolves its input for the act stage. The rules are in
//! `src/planner/step_gates.rs`.

use kube::ResourceExt;

use crate::api::TemporalWorkerDeployment;
use crate::planner::model::PlanInput;
use crate::planner::step_gates::in_effect;
use crate::worker_deployment::context::Context;
use crate::worker_deployment::observe::gate_input::resolve_gate_input;
use crate::worker_deployment::observe::observed::Observed;
use crate::worker_deployment::outcome::Failure;

/// Fills `input.step_gates` and `observed.step_gate_input` for the step gate in effect.
pub async fn observe(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    observed: &mut Observed,
    input: &mut PlanInput,
) -> Result<(), Failure> {
    let Some((step, _)) = in_effect(input) else {
        return Ok(());
    };
    let Some(spec) = twd
        .spec
        .rollout
        .steps
        .get(step)
        .and_then(|s| s.gate.as_ref())
    else {
        return Ok(());
    };
    let ns = twd.namespace().unwrap_or_default();
    observed.step_gate_input = resolve_gate_input(&ctx.services.client, &ns, spec)
        .await
        .map_err(Failure::GateInputUnavailable)?;
    if input.target_task_queues.is_empty() {
        return Ok(());
    }
    input.step_gates = observed
        .client
        .describe_step_gates(
            &twd.temporal_deployment_name(),
            &input.desired.build_id,
            step,
            &input.target_task_queues,
        )
        .await
        .map_err(|source| Failure::StateFetchFailed {
            what: format!("describing step {} gate", step + 1),
            source,
        })?;
    Ok(())
}
