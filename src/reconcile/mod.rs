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
mod analysis;
mod autoscalers;
mod context;
mod drain_visibility;
mod finalize;
pub mod observe;
pub mod outcome;
mod remembered;
mod report;
mod step_gates;
pub mod validate;

use std::sync::Arc;

use jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::{Instrument, info_span};

pub use context::{Context, Settings};
pub use outcome::{Failure, Outcome, Verdict, verdict};

use crate::api::TemporalWorkerDeployment;
use crate::error::{Error, Result};
use crate::metrics::{ControllerKind, ReconcileOutcome};
use crate::planner::{self, model::Phase, model::Plan, model::PlanInput};
use crate::temporal::budget;
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
        let timer = ctx
            .metrics
            .reconcile_started(ControllerKind::WorkerDeployment);
        let attempt = if twd.meta().deletion_timestamp.is_some() {
            ctx.remembered.forget(&ObjectRef::from_obj(&*twd));
            finalize::run(&ctx, twd).await
        } else {
            attempt(&ctx, twd).await
        };
        timer.finish(match attempt.outcome {
            Outcome::Failed(_) => ReconcileOutcome::Error,
            Outcome::Done | Outcome::Stale => ReconcileOutcome::Success,
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

/// validate → observe → plan → act, with the time its Temporal calls waited for the budget.
async fn attempt(ctx: &Context, twd: Arc<TemporalWorkerDeployment>) -> Attempt {
    let (result, waited) = budget::tally(plan_and_act(ctx, &twd)).await;
    match result {
        Ok(mut attempt) => {
            if let Some(p) = &mut attempt.planned {
                p.input.delayed_by_budget =
                    (waited >= ctx.settings.budget_delay_report).then_some(waited);
            }
            attempt
        }
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
    let (observed, mut input) = observe_everything(ctx, twd, desired).await?;
    let plan = planner::plan(&input);
    tracing::debug!(?plan, "planned");
    let object = ObjectRef::from_obj(&**twd);
    let gate_pending = plan.progress.phase == Phase::WaitingForGate && plan.start_gates.is_empty();
    ctx.remembered.note_gate(
        &object,
        gate_pending.then(|| input.target_task_queues.clone()),
    );
    let acted = act::apply(ctx, twd, &observed, &input, &plan).await;
    if acted.done.iter().any(Done::wrote_temporal_deployment) {
        // Our own write made the remembered view of Temporal stale, and keeps the worker
        // deployment's system workflow busy for a moment.
        ctx.remembered.wrote(&object);
    }
    drain_visibility::note_requested(&mut input, &acted.done);
    if matches!(acted.outcome, Outcome::Done) {
        analysis::report(ctx, twd, &input, &plan).await;
    }
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

/// The observe stage: Kubernetes and Temporal state, then the facts single rules need
/// (autoscalers, step gates, pinned workflows, analysis samples). Publishes the live versions
/// to the backlog poller.
async fn observe_everything(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    desired: planner::model::Desired,
) -> Result<(observe::Observed, PlanInput), Failure> {
    let mut observed = observe::all(ctx, twd, &desired).await?;
    let mut input = observed.plan_input(desired, &ctx.settings, Timestamp::now());
    autoscalers::mark(&ctx.client, twd, &mut input.deployments).await;
    step_gates::observe(ctx, twd, &mut observed, &mut input).await?;
    let deployment = twd.temporal_deployment_name();
    let client = &observed.client;
    observe::open_pinned_workflows(client, &deployment, &mut input).await;
    let prior = twd.status.as_ref();
    drain_visibility::observe(client, &ctx.pinned, &deployment, prior, &mut input).await;
    analysis::observe(client, &deployment, &mut input).await;
    ctx.backlog.publish(
        (twd.namespace().unwrap_or_default(), twd.name_any()),
        crate::backlog::Target {
            client: client.clone(),
            deployment,
            build_ids: crate::backlog::live_builds(&input),
        },
    );
    Ok((observed, input))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::runtime::controller::Action;

    use super::reconcile;
    use crate::api::TemporalWorkerDeployment;
    use crate::fixtures::offline_context as context;

    fn twd() -> Arc<TemporalWorkerDeployment> {
        Arc::new(TemporalWorkerDeployment::test())
    }

    #[tokio::test]
    async fn a_follower_waits_for_a_change_instead_of_polling() {
        let (ctx, _leader) = context(false);
        let action = reconcile(twd(), ctx).await.expect("reconcile");
        // Winning the Lease reconciles everything (`reconcile_all_on`): nothing to requeue.
        assert_eq!(action, Action::await_change());
    }

    #[tokio::test]
    async fn a_leader_runs_the_stages_and_looks_again() {
        // The same object with the Lease held: the stages run (and fail on the closed port),
        // so the reconcile asks to look again; the follower test above is not vacuous.
        let (ctx, _leader) = context(true);
        let action = reconcile(twd(), ctx).await.expect("reconcile");
        assert_ne!(action, Action::await_change());
    }
}
