//! What every pass of the Connection reconciler shares: clients, settings and the last
//! reachability check of each Connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;

use crate::api::TemporalConnection;
use crate::connection::status;
use crate::events::EventSink;
use crate::metrics::Metrics;
use crate::reconciler::Streaks;
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
    /// A sharded install's shard: it reconciles only the Connections its selector matches,
    /// and asks the API server which worker deployments (of every shard) use them.
    pub shard: Option<Arc<crate::shard::Shard>>,
    pub(crate) streaks: Streaks<ObjectRef<TemporalConnection>>,
    /// The last reachability check per Connection.
    checks: Mutex<HashMap<ObjectRef<TemporalConnection>, status::LastCheck>>,
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
            shard: None,
            streaks: Streaks::default(),
            checks: Mutex::default(),
        }
    }

    pub(crate) fn leads(&self) -> bool {
        *self.leader.borrow()
    }

    fn checks(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<TemporalConnection>, status::LastCheck>> {
        // A poisoned map only means another reconcile panicked mid-update; it is still usable.
        self.checks.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn last_check(&self, conn: &TemporalConnection) -> Option<status::LastCheck> {
        self.checks().get(&conn.key()).cloned()
    }

    pub(crate) fn remember_check(&self, conn: &TemporalConnection, check: status::LastCheck) {
        self.checks().insert(conn.key(), check);
    }

    pub(crate) fn forget_check(&self, conn: &TemporalConnection) {
        self.checks().remove(&conn.key());
    }
}
