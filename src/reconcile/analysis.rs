//! Canary analysis around the pure planner: counts closed workflows in Temporal visibility
//! when an analysis is due ([`observe`]), and after acting counts verdicts and emits the
//! `AnalysisFailed` Warning event ([`report`]). The verdict itself is decided in
//! `src/planner/analysis.rs`.

use crate::api::TemporalWorkerDeployment;
use crate::api::twd::AnalysisVerdict;
use crate::planner::analysis::{self, ANALYSIS_FAILED};
use crate::planner::model::{AnalysisObservation, Plan, PlanInput, Sample};
use crate::reconcile::Context;
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
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(error = %e, "canary analysis: counting closed workflows failed");
        }
    }
}

/// After the act stage: a new verdict is counted, and a new analysis abort is announced.
pub async fn report(ctx: &Context, twd: &TemporalWorkerDeployment, input: &PlanInput, plan: &Plan) {
    let Some(obs) = &input.analysis else { return };
    let verdict = plan.control.analysis.as_ref().and_then(|r| {
        r.steps
            .iter()
            .find(|s| usize::try_from(s.step).ok() == Some(obs.step) && s.at.0 == obs.at)
    });
    if let Some(v) = verdict {
        ctx.metrics.analysis_verdict(match v.verdict {
            AnalysisVerdict::Pass => "pass",
            AnalysisVerdict::Fail => "fail",
            AnalysisVerdict::Inconclusive => "inconclusive",
        });
    }
    let before = input.desired.control.record.aborted.as_ref();
    if let Some(a) = &plan.control.aborted
        && a.reason == ANALYSIS_FAILED
        && before != Some(a)
    {
        ctx.events
            .warning(twd, ANALYSIS_FAILED, a.message.clone())
            .await;
    }
}
