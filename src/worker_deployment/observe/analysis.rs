//! Observe for canary analysis: counts closed workflows in Temporal visibility when an
//! analysis is due. The verdict is decided in `src/planner/analysis.rs`; the report stage
//! counts it and announces an abort (`analysis()` in `src/worker_deployment/report/events.rs`).

use crate::planner::analysis;
use crate::planner::model::{AnalysisObservation, PlanInput, Sample};
use crate::temporal::TemporalClient;

/// Counts the target's and the current version's closed workflows since the step started,
/// when an analysis is due. A failed count leaves it undone (the step then holds).
pub async fn observe(client: &TemporalClient, deployment: &str, input: &mut PlanInput) {
    let Some((step, since)) = analysis::due(input) else {
        return;
    };
    let types = input
        .desired
        .analysis
        .as_ref()
        .map(|a| a.workflow_types.clone())
        .unwrap_or_default();
    let count = |build: String| {
        let types = types.clone();
        async move {
            client
                .count_closed_workflows(deployment, &build, since, &types)
                .await
                .map(|(closed, failed)| Sample { closed, failed })
        }
    };
    let target = count(input.desired.build_id.clone()).await;
    let current = match input
        .temporal
        .routing
        .current_build_id
        .clone()
        .filter(|b| !b.is_empty())
    {
        Some(build) => count(build).await,
        None => Ok(Sample::default()),
    };
    match (target, current) {
        (Ok(target), Ok(current)) => {
            input.analysis = Some(AnalysisObservation {
                step,
                target,
                current,
                at: input.now,
            });
        }
        // Only logged: without a sample the step holds, and the status says it waits.
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(error = %e, "canary analysis: counting closed workflows failed");
        }
    }
}
