//! The TemporalConnection reconciler: a Connection that is being deleted loses our
//! delete-protection finalizer once no TemporalWorkerDeployment uses it any more (for example
//! after a TWD switched to another Connection; a TWD's own deletion releases it too). It
//! follows the skeleton of every reconciler ([`crate::reconciler`]), one file per stage:
//! [`observe`] which TWDs use it (from the TWD cache, only once that cache has listed) → [`plan`]
//! (pure) → [`act`] → [`report`] (failures counted, retried with backoff). A Connection has
//! no status of its own yet.

pub mod act;
pub mod observe;
pub mod outcome;
pub mod plan;
pub mod report;

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;

use crate::api::TemporalConnection;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::reconciler::{ControllerKind, Streaks, lead};
use crate::workers::Workers;

/// Shared state of the Connection reconciler.
pub struct ConnectionContext {
    pub client: kube::Client,
    /// The worker-deployment reconciler's cache: who uses which Connection.
    pub workers: Workers,
    /// True while this replica may write.
    pub leader: watch::Receiver<bool>,
    pub metrics: Arc<Metrics>,
    streaks: Streaks<ObjectRef<TemporalConnection>>,
}

impl ConnectionContext {
    pub fn new(
        client: kube::Client,
        workers: Workers,
        leader: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            client,
            workers,
            leader,
            metrics,
            streaks: Streaks::default(),
        }
    }

    fn leads(&self) -> bool {
        *self.leader.borrow()
    }
}

/// The kube-runtime entry point for one Connection: observe → plan → act → report.
pub async fn reconcile(
    conn: Arc<TemporalConnection>,
    ctx: Arc<ConnectionContext>,
) -> Result<Action, Error> {
    let (metrics, leads) = (&ctx.metrics, ctx.leads());
    lead(
        ControllerKind::Connection,
        metrics,
        leads,
        &*conn,
        |_ns| async {
            let attempt = attempt(&ctx, &conn).await;
            report::report(&ctx, &conn, attempt)
        },
    )
    .await
}

async fn attempt(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
) -> Result<plan::Plan, outcome::ConnectionFailure> {
    let observed = observe::observe(ctx, conn).await?;
    let plan = plan::plan(conn, &observed);
    if ctx.leads() {
        act::act(ctx, conn, &plan).await?;
    }
    Ok(plan)
}
