//! TemporalWorkerOwnedResource (TWOR): a user's object copied once per live worker version.
//!
//! A reconciler of its own (wired in `src/controller/owned.rs`), so a Temporal outage that holds
//! back a TWD's rollout never holds back its autoscalers. It follows the skeleton of every
//! reconciler ([`crate::reconciler`]), one file per stage:
//! [`observe`] the worker, its live versioned Deployments and, when asked for, their task
//! queues → [`plan`] (pure): check `spec.object` against the [`rules`] (the admission webhook's,
//! so with it off a refusal reads the same in status, and nothing is applied), [`render`] each
//! copy, decide removals → [`act`]: apply only copies whose hash changed (server-side apply,
//! one field manager per TWOR), remove copies of a replaced kind or a retiring version →
//! [`report`]: one status write from [`status::compute`], only when it changed; failures
//! ([`outcome`]) counted and retried with backoff. Each copy is owned by its versioned
//! Deployment, so Kubernetes' garbage collector removes it with its version; deleting the
//! TWOR removes every copy before our finalizer goes.

pub mod act;
pub mod apply;
mod context;
pub mod observe;
pub mod outcome;
pub mod plan;
pub mod render;
pub mod report;
pub mod settings;
pub mod status;
pub mod task_queue;
pub mod template;
pub mod validate;
pub mod versions;

pub use context::OwnedContext;
pub use settings::OwnedSettings;
use std::sync::Arc;

use kube::runtime::controller::Action;

use crate::api::TemporalWorkerOwnedResource;
use crate::error::Error;
use crate::reconciler::{ControllerKind, lead};

/// The kube-runtime entry point for one TWOR: observe → plan → act → report.
pub async fn reconcile(
    twor: Arc<TemporalWorkerOwnedResource>,
    ctx: Arc<OwnedContext>,
) -> Result<Action, Error> {
    if let Some(shard) = &ctx.services.shard
        && !follows_to_this_shard(&ctx, shard, &twor).await
    {
        return Ok(Action::await_change());
    }
    let (metrics, leads) = (&ctx.services.metrics, ctx.services.leads());
    lead(
        ControllerKind::OwnedResource,
        metrics,
        leads,
        &*twor,
        |ns| async {
            let attempt = attempt(&ctx, &twor, ns).await;
            report::report(&ctx, &twor, attempt).await
        },
    )
    .await
}

/// Whether a template is this shard's: it follows the worker deployment it names (this
/// shard's cache holds only this shard's; one missing from it is asked of the API server),
/// and only a template whose worker deployment does not exist goes by its own labels. A read
/// that fails counts as another shard's: nothing is written, and the worker deployment's next
/// change looks again.
async fn follows_to_this_shard(
    ctx: &OwnedContext,
    shard: &crate::shard::Shard,
    twor: &TemporalWorkerOwnedResource,
) -> bool {
    use kube::ResourceExt;
    let ns = twor.namespace().unwrap_or_default();
    let name = twor.spec.worker_name();
    let set = twor.kind_set();
    if let Some(workers) = ctx.services.workers()
        && workers.get(set, &ns, name).is_some()
    {
        return true;
    }
    let api = crate::api::TemporalWorkerDeployment::api(ctx.services.client.clone(), &ns, set);
    match api.get_opt(name).await {
        Ok(Some(worker)) => shard.matches(worker.labels()),
        Ok(None) => shard.matches(twor.labels()),
        Err(e) => {
            tracing::debug!(error = %e, "reading a template's worker deployment to find its shard");
            false
        }
    }
}

async fn attempt(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    ns: String,
) -> report::Attempt {
    let allowed: Vec<&str> = ctx
        .settings
        .allowed_kinds
        .iter()
        .map(String::as_str)
        .collect();
    // Validate: the webhook's rules, checked before anything else, so with the webhook off a
    // refused object is reported in status with the webhook's words and nothing is applied.
    let valid = validate::check_template_spec(&twor.spec, &allowed)
        .and_then(|()| ctx.settings.access_check.check(twor.spec.object()));
    let observed = observe::observe(ctx, twor, ns, valid.is_ok()).await?;
    let plan = plan::plan(twor, &observed, valid, &allowed);
    let next_scaledown = match &plan {
        plan::Plan::Sync(s) => s.next_scaledown,
        plan::Plan::Delete { .. } => None,
    };
    let pass = act::act(ctx, twor, &observed.namespace, plan).await?;
    Ok(pass.map(|p| (p, next_scaledown)))
}
