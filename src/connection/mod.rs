//! The TemporalConnection reconciler. It reports the Connection's status (`Ready`: the auth
//! Secret is valid and the Temporal frontend answers; the client certificate's expiry, with a
//! Warning event once it is within `--certificate-expiry-warning`; the worker deployments that
//! use it), and a Connection that is being deleted loses our delete-protection finalizer once
//! no TemporalWorkerDeployment uses it any more (for example after a TWD switched to another
//! Connection; a TWD's own deletion releases it too). It follows the skeleton of every
//! reconciler ([`crate::reconciler`]), one file per stage: [`observe`] which TWDs use it (from
//! the TWD cache, only once that cache has listed), its Secret and, at a slow cadence, Temporal
//! → [`plan`] (pure, with [`rules`]) → [`act`] → [`report`] (the status, only when it changed;
//! events; failures counted, retried with backoff).

pub mod act;
mod context;
pub mod observe;
pub mod outcome;
pub mod plan;
pub mod report;
pub mod settings;
pub mod status;

pub use context::ConnectionContext;
pub use settings::ConnectionSettings;
use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::Action;

use crate::api::TemporalConnection;
use crate::error::Error;
use crate::reconciler::{ControllerKind, lead};

/// The kube-runtime entry point for one Connection: observe → plan → act → report.
pub async fn reconcile(
    conn: Arc<TemporalConnection>,
    ctx: Arc<ConnectionContext>,
) -> Result<Action, Error> {
    if ctx
        .services
        .shard
        .as_ref()
        .is_some_and(|shard| !shard.matches(conn.labels()))
    {
        // Another shard's Connection (every shard reads it; one writes it).
        return Ok(Action::await_change());
    }
    let (metrics, leads) = (&ctx.services.metrics, ctx.services.leads());
    lead(
        ControllerKind::Connection,
        metrics,
        leads,
        &*conn,
        |_ns| async {
            let attempt = attempt(&ctx, &conn).await;
            report::report(&ctx, &conn, attempt).await
        },
    )
    .await
}

/// The same for one ClusterConnection, through its Connection-model view.
pub async fn reconcile_cluster(
    cluster: Arc<crate::api::ClusterConnection>,
    ctx: Arc<ConnectionContext>,
) -> Result<Action, Error> {
    let mut view = cluster.as_connection();
    // The reconciler skeleton keys its span and metrics by namespace: a cluster-scoped
    // object's is empty (nothing here reads a ClusterConnection's namespace otherwise).
    view.metadata.namespace = Some(String::new());
    reconcile(Arc::new(view), ctx).await
}

async fn attempt(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
) -> Result<plan::Plan, outcome::ConnectionFailure> {
    let observed = observe::observe(ctx, conn).await?;
    let plan = plan::plan(conn, &observed, ctx.settings.expiry_warning);
    if ctx.services.leads() {
        act::act(ctx, conn, &observed, &plan).await?;
    }
    Ok(plan)
}
