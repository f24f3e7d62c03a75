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
pub mod observe;
pub mod outcome;
pub mod plan;
pub mod report;
pub mod rules;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;

use crate::api::TemporalConnection;
use crate::error::Error;
use crate::events::EventSink;
use crate::metrics::Metrics;
use crate::reconciler::{ControllerKind, Streaks, lead};
use crate::temporal::ClientPool;
use crate::workers::Workers;

/// Shared state of the Connection reconciler.
pub struct ConnectionContext {
    pub client: kube::Client,
    /// The worker-deployment reconciler's cache: who uses which Connection.
    pub workers: Workers,
    /// True while this replica may write.
    pub leader: watch::Receiver<bool>,
    pub metrics: Arc<Metrics>,
    /// The Temporal client pool the worker deployments use: a check dials no connection of
    /// its own.
    pub pool: Arc<ClientPool>,
    /// The controller's Temporal identity.
    pub identity: String,
    pub events: EventSink,
    /// How long before the client certificate's expiry it is reported.
    pub expiry_warning: Duration,
    /// Where the Secret is read from (`crate::caches`); `None` (tests) reads the API server.
    pub caches: Option<crate::caches::Caches>,
    streaks: Streaks<ObjectRef<TemporalConnection>>,
    /// The last reachability check per Connection.
    checks: Mutex<HashMap<ObjectRef<TemporalConnection>, rules::LastCheck>>,
}

impl ConnectionContext {
    pub fn new(
        client: kube::Client,
        workers: Workers,
        leader: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
        temporal: (Arc<ClientPool>, String),
        events: EventSink,
        expiry_warning: Duration,
    ) -> Self {
        let (pool, identity) = temporal;
        Self {
            client,
            workers,
            leader,
            metrics,
            pool,
            identity,
            events,
            expiry_warning,
            caches: None,
            streaks: Streaks::default(),
            checks: Mutex::default(),
        }
    }

    fn leads(&self) -> bool {
        *self.leader.borrow()
    }

    fn checks(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<TemporalConnection>, rules::LastCheck>> {
        // A poisoned map only means another reconcile panicked mid-update; it is still usable.
        self.checks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn last_check(&self, conn: &TemporalConnection) -> Option<rules::LastCheck> {
        self.checks().get(&conn.key()).cloned()
    }

    fn remember_check(&self, conn: &TemporalConnection, check: rules::LastCheck) {
        self.checks().insert(conn.key(), check);
    }

    fn forget_check(&self, conn: &TemporalConnection) {
        self.checks().remove(&conn.key());
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
    let plan = plan::plan(conn, &observed, ctx.expiry_warning);
    if ctx.leads() {
        act::act(ctx, conn, &observed, &plan).await?;
    }
    Ok(plan)
}
