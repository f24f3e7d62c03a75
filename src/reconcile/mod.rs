//! One reconcile of a `TemporalWorkerDeployment`, as stages that each live in one file:
//!
//! 1. [`validate`]: the spec, checked once, into the planner's `Desired` (pure);
//! 2. [`observe`]: every object the plan depends on — Connection, Secrets, gate input,
//!    versioned Deployments — and Temporal's view (read-only);
//! 3. [`crate::planner::plan`]: every rollout rule (pure);
//! 4. [`act`]: the only stage that writes to Kubernetes or Temporal, finalizers included;
//! 5. [`report`]: the only stage that writes status and events and counts failures, from one
//!    [`Outcome`] through the pure [`outcome::verdict`].
//!
//! Deletion runs [`finalize`] (act-only) and then the same report stage.
//! `docs/architecture.md` walks through the stages and the order of writes.

pub mod act;
mod autoscalers;
mod context;
mod finalize;
pub mod observe;
pub mod outcome;
mod report;
pub mod validate;

use std::sync::Arc;

use jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tracing::{Instrument, info_span};

pub use context::{Context, Settings};
pub use outcome::{Failure, Outcome, Verdict, verdict};

use crate::api::TemporalWorkerDeployment;
use crate::error::{Error, Result};
use crate::planner::{self, model::Plan, model::PlanInput};
use act::Done;

/// What one pass through the stages produced, for the report stage.
pub struct Attempt {
    /// The object as last seen or written (after the act stage added its finalizer).
    pub twd: Arc<TemporalWorkerDeployment>,
    /// `None` when the reconcile ended before planning.
    pub planned: Option<Planned>,
    pub outcome: Outcome,
}

/// The plan, what it was made from, and the writes that succeeded.
pub struct Planned {
    pub input: PlanInput,
    pub plan: Plan,
    pub done: Vec<Done>,
}

/// The kube-runtime entry point: one span and one timer per reconcile.
pub async fn reconcile(twd: Arc<TemporalWorkerDeployment>, ctx: Arc<Context>) -> Result<Action> {
    let ns = twd.namespace().ok_or(Error::MissingObjectKey)?;
    if !ctx.settings.watches(&ns) {
        return Ok(Action::await_change());
    }
    if !ctx.leads() {
        // Followers never write. Winning the Lease reconciles every object at once
        // (`reconcile_all_on` in `src/controller.rs`), so there is nothing to poll for.
        return Ok(Action::await_change());
    }
    let span = info_span!("reconcile", namespace = %ns, name = %twd.name_any(), generation = twd.metadata.generation);
    async move {
        let timer = ctx.metrics.reconcile_started();
        let attempt = if twd.meta().deletion_timestamp.is_some() {
            finalize::run(&ctx, twd).await
        } else {
            attempt(&ctx, twd).await
        };
        timer.finish(match attempt.outcome {
            Outcome::Failed(_) => "error",
            Outcome::Done | Outcome::Stale => "success",
        });
        if !ctx.leads() {
            // Leadership was lost mid-reconcile: the new leader reports.
            return Ok(Action::await_change());
        }
        Ok(report::report(&ctx, attempt).await)
    }
    .instrument(span)
    .await
}

/// validate → observe → plan → act.
async fn attempt(ctx: &Context, twd: Arc<TemporalWorkerDeployment>) -> Attempt {
    match plan_and_act(ctx, &twd).await {
        Ok(attempt) => attempt,
        Err(failure) => Attempt {
            twd,
            planned: None,
            outcome: Outcome::Failed(failure),
        },
    }
}

async fn plan_and_act(
    ctx: &Context,
    twd: &Arc<TemporalWorkerDeployment>,
) -> Result<Attempt, Failure> {
    let desired = validate::desired(twd, &ctx.settings.planner)
        .map_err(|invalid| Failure::InvalidSpec(invalid.message))?;
    let observed = observe::all(ctx, twd, &desired).await?;
    let mut input = observed.plan_input(desired, &ctx.settings, Timestamp::now());
    autoscalers::mark(&ctx.client, twd, &mut input.deployments).await;
    observe::open_pinned_workflows(
        &observed.client,
        &twd.temporal_deployment_name(),
        &mut input,
    )
    .await;
    let plan = planner::plan(&input);
    tracing::debug!(?plan, "planned");
    let acted = act::apply(ctx, twd, &observed, &input, &plan).await;
    Ok(Attempt {
        twd: acted.twd,
        planned: Some(Planned {
            input,
            plan,
            done: acted.done,
        }),
        outcome: acted.outcome,
    })
}
