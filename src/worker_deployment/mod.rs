//! One reconcile of a `TemporalWorkerDeployment`, following the skeleton every reconciler
//! shares ([`crate::reconciler`]), as stages that each live in one file or folder:
//!
//! 1. [`validate`]: the spec, checked once, into the planner's `Desired` (pure); on an object
//!    a predecessor controller managed, [`takeover`] first records which of its versions the
//!    spec is (the one write before observe);
//! 2. [`observe`]: every object the plan depends on — a Temporal client through the
//!    Connection ([`connect`]), gate input, versioned Deployments — and Temporal's view
//!    (read-only);
//! 3. [`crate::planner::plan`]: every rollout rule (pure);
//! 4. [`act`]: the only stage that writes to Kubernetes or Temporal, finalizers included;
//! 5. [`report`]: the only stage that writes status and events and counts failures, from one
//!    [`Outcome`] through the pure [`outcome::verdict`].
//!
//! Deletion runs [`finalize`] (observe and act of the deletion path) and then the same report
//! stage. `docs/architecture.md` walks through the stages and the order of writes.

pub mod act;
mod attempt;
mod context;
mod finalize;
mod first_look;
pub mod observe;
pub mod outcome;
mod remembered;
mod report;
mod settings;
pub mod status;
pub mod step;
pub mod superseded;
mod takeover;
pub mod validate;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

pub use attempt::{Attempt, Planned};
pub use context::Context;
pub use outcome::{Failure, Outcome, Verdict, verdict};
pub use settings::Settings;

use crate::api::TemporalWorkerDeployment;
use crate::error::{Error, Result};
use crate::planner::{self};
use crate::reconciler::{ControllerKind, ReconcileOutcome, lead};
use crate::temporal::budget;

/// What one pass asks for next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// When to look again; `None`: at the next change.
    pub requeue: Option<Duration>,
    /// That look keeps a promise on the clock ([`planner::promise`]): the lane runs it.
    pub time_bound: bool,
}

impl Pass {
    /// The pass's wish as kube-runtime's action.
    pub fn action(&self) -> Action {
        self.requeue
            .map_or_else(Action::await_change, Action::requeue)
    }
}

/// The kube-runtime entry point: one pass ([`pass`]) as kube-runtime's action.
pub async fn reconcile(twd: Arc<TemporalWorkerDeployment>, ctx: Arc<Context>) -> Result<Action> {
    pass(twd, ctx).await.map(|p| p.action())
}

/// One pass of `twd`, whoever runs it (kube-runtime's queue or the lane, `crate::lane`):
/// one span and one timer per pass, and never two passes of one object at once.
pub async fn pass(twd: Arc<TemporalWorkerDeployment>, ctx: Arc<Context>) -> Result<Pass> {
    let ns = twd.namespace().ok_or(Error::MissingObjectKey)?;
    if !ctx.services.watches(&ns) || !ctx.still_ours(&twd) {
        return Ok(Pass::default());
    }
    if ctx.services.leads() {
        // Every first look before the first full pass: a cold start's statuses come first.
        // Waited for before the slot is taken: the sweep takes the slots of what it looks at.
        ctx.swept.get_or_init(|| first_look::sweep(&ctx)).await;
    }
    let _slot = ctx.slots.take(twd.key()).await;
    // Re-read once the slot is held: a pass that waited sees what the one before it wrote.
    let twd = ctx.latest(twd);
    let (metrics, leads, object) = (&ctx.services.metrics, ctx.services.leads(), twd.clone());
    let kind = ControllerKind::WorkerDeployment;
    let next = std::sync::OnceLock::new();
    lead(kind, metrics, leads, &*object, |_ns| {
        stages(&ctx, twd, &next)
    })
    .await?;
    Ok(next.into_inner().unwrap_or_default())
}

/// The first look of an object that appeared while the controller runs, offered by the lane
/// (`crate::lane`): written if none is yet, under the object's slot; whether it was.
pub async fn offered_first_look(ctx: &Context, twd: Arc<TemporalWorkerDeployment>) -> bool {
    let watched = twd.namespace().is_some_and(|ns| ctx.services.watches(&ns));
    if !ctx.services.leads() || !watched {
        return false;
    }
    ctx.swept.get_or_init(|| first_look::sweep(ctx)).await;
    first_look::look(ctx, twd).await
}

/// One pass: the deletion path, or validate → observe → plan → act; then report. What it
/// asks for next is left in `next`.
async fn stages(
    ctx: &Context,
    twd: Arc<TemporalWorkerDeployment>,
    next: &std::sync::OnceLock<Pass>,
) -> (Action, ReconcileOutcome) {
    let twd = ctx.dressed(ctx.freshest(twd));
    let attempt = if twd.meta().deletion_timestamp.is_some() {
        ctx.remembered.forget(&twd.key());
        ctx.pollers.forget(&twd.key());
        finalize::run(ctx, twd).await
    } else {
        attempt(ctx, twd).await
    };
    let ended = match attempt.outcome {
        Outcome::Failed(_) => ReconcileOutcome::Error,
        Outcome::Done | Outcome::Stale => ReconcileOutcome::Success,
    };
    if !ctx.services.leads() || !ctx.still_ours(&attempt.twd) {
        // Leadership was lost mid-reconcile, or the object moved to another shard: the new
        // leader reports.
        return (Action::await_change(), ended);
    }
    let promised = attempt
        .planned
        .as_ref()
        .is_some_and(|p| planner::promise::time_bound(&p.input, &p.plan));
    let requeue = report::report(ctx, attempt).await;
    let pass = Pass {
        requeue,
        time_bound: promised && requeue.is_some_and(|d| d < ctx.settings.idle_interval),
    };
    let _ = next.set(pass);
    (pass.action(), ended)
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
            finalized: Vec::new(),
            outcome: Outcome::Failed(failure),
        },
    }
}

/// The stages, in order.
async fn plan_and_act(
    ctx: &Context,
    twd: &Arc<TemporalWorkerDeployment>,
) -> Result<Attempt, Failure> {
    if let Some(why) = superseded::superseded(twd, ctx.canonical_of(twd).as_deref()) {
        return Err(Failure::InvalidSpec(why.into()));
    }
    let desired = validate::desired(twd, &ctx.settings.planner)
        .map_err(|invalid| Failure::InvalidSpec(invalid.into()))?;
    if let Some(first) = first_look::attempt(ctx, twd, &desired).await? {
        return Ok(first);
    }
    takeover::record(ctx, twd, &desired).await?;
    let (observed, input) = observe::everything(ctx, twd, desired).await?;
    let (input, plan) = planner::punctual::plan(input);
    tracing::debug!(?plan, "planned");
    let acted = act::apply(ctx, twd, &observed, &input, &plan).await;
    Ok(Attempt {
        twd: acted.twd,
        planned: Some(Planned {
            input,
            plan,
            done: acted.done,
        }),
        finalized: Vec::new(),
        outcome: acted.outcome,
    })
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
