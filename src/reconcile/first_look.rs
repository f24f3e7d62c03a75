//! A first look (`crate::planner::first_look`): the first status of a worker deployment never
//! reported on, from its spec and the Deployment cache, before Temporal is asked. The report
//! stage writes it like any other; the pass after it does the rest.

use std::sync::Arc;

use jiff::Timestamp;

use crate::api::TemporalWorkerDeployment;
use crate::planner::first_look;
use crate::planner::model::Desired;
use crate::reconcile::observe;
use crate::reconcile::{Attempt, Context, Failure, Outcome, Planned};

/// The first look's attempt, when one is due (else the full pass runs).
pub async fn attempt(
    ctx: &Context,
    twd: &Arc<TemporalWorkerDeployment>,
    desired: &Desired,
) -> Result<Option<Attempt>, Failure> {
    // The API server fills in the schema's placeholder status, so "no status" is never seen.
    let reported = twd.status.as_ref().is_some_and(|s| s.reported());
    if reported {
        return Ok(None);
    }
    let deployments = observe::owned_deployments(&ctx.client, ctx.ready_caches().await, twd)
        .await
        .map_err(Failure::DeploymentsUnreadable)?;
    let input = observe::before_temporal(
        desired.clone(),
        deployments,
        &ctx.settings,
        Timestamp::now(),
    );
    if !first_look::due(reported, &input) {
        return Ok(None);
    }
    let plan = first_look::plan(&input);
    tracing::debug!("first look: reported before Temporal is asked");
    Ok(Some(Attempt {
        twd: twd.clone(),
        planned: Some(Planned {
            input,
            plan,
            done: Vec::new(),
        }),
        finalized: Vec::new(),
        outcome: Outcome::Done,
    }))
}
