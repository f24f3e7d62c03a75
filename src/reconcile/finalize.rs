//! Deletion of a TWD: stop its workers, clean Temporal state, release the Connection, then
//! drop our finalizer. Ends in an [`Attempt`] like any reconcile, so the report stage writes
//! the `Deleting` status and counts failures.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::{Resource, ResourceExt};

use crate::api::{FINALIZER, TemporalWorkerDeployment};
use crate::events;
use crate::reconcile::act::finalizers;
use crate::reconcile::{Attempt, Context, Failure, Outcome, observe};

/// After this long in deletion, the finalizer is released even if Temporal cleanup failed
/// (twice Temporal's default PollerHistoryTTL plus slack).
const CLEANUP_GIVE_UP_AFTER: Duration = Duration::from_secs(15 * 60);

pub async fn run(ctx: &Context, twd: Arc<TemporalWorkerDeployment>) -> Attempt {
    ctx.backlog
        .forget(&(twd.namespace().unwrap_or_default(), twd.name_any()));
    let outcome = finalize(ctx, &twd).await;
    Attempt {
        twd,
        planned: None,
        outcome,
    }
}

async fn finalize(ctx: &Context, twd: &TemporalWorkerDeployment) -> Outcome {
    if !twd.finalizers().iter().any(|f| f == FINALIZER) {
        return Outcome::Done;
    }
    let kube_failed = |step: &str, e: kube::Error| match e {
        kube::Error::Api(s) if s.code == 409 => Outcome::Stale,
        e => Outcome::Failed(Failure::CleanupPending(format!("{step}: {e}"))),
    };
    // Every step writes: only while this replica leads.
    if !ctx.leads() {
        return Outcome::Stale;
    }
    if let Err(e) = finalizers::delete_owned_deployments(ctx, twd).await {
        return kube_failed("deleting versioned Deployments", e);
    }
    let ns = twd.namespace().unwrap_or_default();
    let connection = match observe::connection_opt(&ctx.client, &ns, twd).await {
        Ok(c) => c,
        Err(e) => return kube_failed("reading the TemporalConnection", e),
    };
    match connection {
        Some(connection) => {
            if !ctx.leads() {
                return Outcome::Stale;
            }
            if let Err(message) = finalizers::cleanup_temporal(ctx, twd, &connection).await {
                let deleting_for = twd
                    .meta()
                    .deletion_timestamp
                    .as_ref()
                    .map(|t| Timestamp::now().duration_since(t.0).unsigned_abs())
                    .unwrap_or_default();
                if deleting_for < CLEANUP_GIVE_UP_AFTER {
                    // Keep the finalizer and retry: Temporal would otherwise keep a stale
                    // deployment. Stopped workers stay "pollers" for matching.PollerHistoryTTL.
                    return Outcome::Failed(Failure::CleanupPending(format!(
                        "cleaning up Temporal state (workers stopped; Temporal forgets their pollers after matching.PollerHistoryTTL, 5m by default): {message}"
                    )));
                }
                // Never hang deletion forever: leave Temporal state behind, loudly.
                let note = format!(
                    "gave up cleaning worker deployment {:?} in Temporal after {}s: {message}",
                    twd.temporal_deployment_name(),
                    deleting_for.as_secs()
                );
                ctx.events
                    .warning(twd, events::CLEANUP_ABANDONED, note)
                    .await;
            }
            if !ctx.leads() {
                return Outcome::Stale;
            }
            if let Err(e) = finalizers::release_connection(ctx, twd, &connection).await {
                return kube_failed("releasing the TemporalConnection", e);
            }
        }
        // Without a Connection there is no way to reach Temporal; don't hang deletion forever.
        None => tracing::warn!(
            connection = %twd.spec.worker_options.connection_ref.name,
            "TemporalConnection gone; skipping Temporal cleanup"
        ),
    }
    if !ctx.leads() {
        return Outcome::Stale;
    }
    match finalizers::remove(ctx, twd).await {
        Ok(()) => Outcome::Done,
        Err(e) => kube_failed("removing the finalizer", e),
    }
}
