//! A first look (`crate::planner::first_look`): the first status of a worker deployment never
//! reported on, from its spec and the Deployment cache, before Temporal is asked. The report
//! stage writes it like any other; the pass after it does the rest.
//!
//! At a cold start the leader first [`sweep`]s every object it found unreported: kube-runtime
//! takes due reconciles in no particular order once its slots are full, so left to the queue
//! a cold start's first looks would interleave with the full passes they requeue, and the last
//! first status would wait for nearly all of them.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt as _;
use jiff::Timestamp;
use kube::ResourceExt as _;

use crate::api::TemporalWorkerDeployment;
use crate::planner::first_look;
use crate::planner::model::Desired;
use crate::worker_deployment::attempt::{Attempt, Planned};
use crate::worker_deployment::context::Context;
use crate::worker_deployment::outcome::{Failure, Outcome};
use crate::worker_deployment::{observe, report, superseded, validate};

/// Writes the first look of every cached worker deployment nobody has reported on, up to the
/// reconcile concurrency at a time (run once, by the leader's first reconcile, which the
/// others wait for). A swept object's own reconcile then finds the status written (the
/// context's last write, if the cache lags) and makes its full pass.
pub async fn sweep(ctx: &Context) {
    let Some(workers) = ctx.services.workers() else {
        return;
    };
    if workers.wait_until_ready().await.is_err() {
        return;
    }
    let began = Instant::now();
    let unreported: Vec<_> = workers
        .state()
        .into_iter()
        .filter(|t| t.metadata.deletion_timestamp.is_none())
        .filter(|t| !reported(t))
        .filter(|t| ctx.services.watches(&t.namespace().unwrap_or_default()))
        .collect();
    let at_once = usize::from(ctx.settings.max_concurrent_reconciles.max(1));
    let written = futures::stream::iter(unreported)
        .map(|twd| look(ctx, twd))
        .buffer_unordered(at_once)
        .filter(|wrote| std::future::ready(*wrote))
        .count()
        .await;
    tracing::info!(written, elapsed = ?began.elapsed(), "first looks written before any full pass");
}

/// Whether a controller has reported on `twd` (the API server fills in the schema's
/// placeholder status, so "no status" is never seen).
fn reported(twd: &TemporalWorkerDeployment) -> bool {
    twd.status.as_ref().is_some_and(|s| s.reported())
}

/// One object's first look, written by the report stage; whether one was due and reported.
/// Under the object's slot, with the object re-read once it is held: a first look the
/// object's own reconcile (or the lane) wrote is seen, and none is written twice.
pub(super) async fn look(ctx: &Context, twd: Arc<TemporalWorkerDeployment>) -> bool {
    let _slot = ctx.slots.take(twd.key()).await;
    let twd = ctx.dressed(ctx.freshest(ctx.latest(twd)));
    if !ctx.still_ours(&twd)
        || superseded::superseded(&twd, ctx.canonical_of(&twd).as_deref()).is_some()
    {
        return false;
    }
    let Ok(desired) = validate::desired(&twd, &ctx.settings.planner) else {
        return false;
    };
    match attempt(ctx, &twd, &desired).await {
        Ok(Some(first)) if ctx.services.leads() => {
            // Its own reconcile is queued already (the initial list): the requeue asked for
            // here is that one.
            let _ = report::report(ctx, first).await;
            true
        }
        _ => false,
    }
}

/// The first look's attempt, when one is due (else the full pass runs).
pub async fn attempt(
    ctx: &Context,
    twd: &Arc<TemporalWorkerDeployment>,
    desired: &Desired,
) -> Result<Option<Attempt>, Failure> {
    let reported = reported(twd);
    if reported {
        return Ok(None);
    }
    let deployments =
        observe::owned_deployments(&ctx.services.client, ctx.services.ready_caches().await, twd)
            .await
            .map_err(Failure::DeploymentsUnreadable)?;
    let input = observe::before_temporal(desired.clone(), deployments, ctx, Timestamp::now());
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
