//! The take-over step, before observe: on an object whose status a predecessor controller
//! wrote (`planner::takeover::predecessor_target`), record on the version that status names
//! our own hash of the spec's pod template, so that every later pass — and every restart —
//! keeps that version as the target instead of computing a new build ID
//! (`planner::takeover::adopted_target`). It runs before anything that could write our
//! status: our first status write replaces the predecessor's, the only evidence of which build
//! its spec produced. Thin: the decision is `planner::takeover::template_adoption`.

use kube::ResourceExt;

use crate::api::TemporalWorkerDeployment;
use crate::planner::model::Desired;
use crate::planner::takeover;
use crate::worker_deployment::context::Context;
use crate::worker_deployment::observe::owned_deployments;
use crate::worker_deployment::outcome::Failure;

/// Records the predecessor's target as adopted, if there is one to record.
pub async fn record(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    desired: &Desired,
) -> Result<(), Failure> {
    let generation = twd.metadata.generation;
    let Some(build) = takeover::predecessor_target(generation, twd.status.as_ref()) else {
        return Ok(());
    };
    // A follower writes nothing; the act stage stops it too.
    if !ctx.services.leads() {
        return Ok(());
    }
    let deployments =
        owned_deployments(&ctx.services.client, ctx.services.ready_caches().await, twd)
            .await
            .map_err(Failure::DeploymentsUnreadable)?;
    let Some(adoption) = takeover::template_adoption(desired, &deployments, &build) else {
        return Ok(());
    };
    let ns = twd.namespace().unwrap_or_default();
    crate::worker_deployment::act::execute::adopt(
        &ctx.services.client,
        &ns,
        &adoption,
        &ctx.services.metrics,
    )
    .await
}

/// While a predecessor's trustworthy status is still there, a pass that ends before planning
/// for a reason that may pass (Temporal or the Connection not reachable yet) leaves that status
/// alone: overwriting it would lose which build the spec produced before the take-over record
/// is written. A terminal reason (an invalid spec) is reported: the record would not help.
/// Deletion is always reported: nothing is left to take over.
pub fn keeps_predecessor_status(twd: &TemporalWorkerDeployment) -> bool {
    twd.metadata.deletion_timestamp.is_none()
        && takeover::predecessor_target(twd.metadata.generation, twd.status.as_ref()).is_some()
}
