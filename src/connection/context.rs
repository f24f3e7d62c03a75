//! What every pass of the Connection reconciler shares: the services of every reconciler, its
//! settings and the last reachability check of each Connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::ObjectRef;

use crate::api::TemporalConnection;
use crate::connection::settings::ConnectionSettings;
use crate::connection::status;
use crate::reconciler::Streaks;
use crate::reconciler::services::Services;

/// Shared state of the Connection reconciler.
pub struct ConnectionContext {
    /// What the three reconcilers share: clients, leadership, metrics, events, the Temporal
    /// pool the worker deployments use (a check dials no connection of its own), the shard (it
    /// reconciles only the Connections its selector matches, and asks the API server which
    /// worker deployments of every shard use them), and the worker-deployment caches (who uses
    /// which Connection).
    pub services: Arc<Services>,
    pub settings: ConnectionSettings,
    pub(crate) streaks: Streaks<ObjectRef<TemporalConnection>>,
    /// The last reachability check per Connection.
    checks: Mutex<HashMap<ObjectRef<TemporalConnection>, status::LastCheck>>,
}

impl ConnectionContext {
    pub fn new(services: Arc<Services>, settings: ConnectionSettings) -> Self {
        Self {
            services,
            settings,
            streaks: Streaks::default(),
            checks: Mutex::default(),
        }
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
