//! What every pass of the owned-resource reconciler shares: clients, settings and the
//! memories kept between passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;

use crate::api::TemporalWorkerOwnedResource;
use crate::metrics::Metrics;
use crate::owned::apply::Resources;
use crate::owned::validate;
use crate::reconciler::Streaks;
use crate::temporal::ClientPool;

/// Shared state of the TWOR controller.
pub struct OwnedContext {
    pub client: kube::Client,
    /// True while this replica may write (see `worker_deployment::Context::leads`).
    pub leader: watch::Receiver<bool>,
    /// Kinds a TWOR may carry.
    pub allowed_kinds: Vec<String>,
    /// Whether the webhook checked each TWOR's author, or TWORs of unchecked kinds are refused.
    pub access_check: validate::AccessCheck,
    /// Temporal clients (shared with the TWD reconciler) and the identity to use, for
    /// task-queue lookups.
    pub pool: Arc<ClientPool>,
    pub identity: String,
    pub metrics: Arc<Metrics>,
    /// What passes read of Kubernetes (`crate::caches`, `crate::workers`); `None` (tests)
    /// reads the API server.
    pub caches: Option<crate::caches::Caches>,
    pub workers: Option<crate::workers::Workers>,
    /// A sharded install's shard and Temporal namespace claims (`crate::shard`): a template
    /// follows its worker deployment's shard.
    pub shard: Option<Arc<crate::shard::Shard>>,
    pub claims: Option<Arc<crate::shard::Claims>>,
    pub(crate) resources: Resources,
    pub(crate) task_queues: Known,
    pub(crate) streaks: Streaks<ObjectRef<TemporalWorkerOwnedResource>>,
}

impl OwnedContext {
    pub fn new(
        client: kube::Client,
        leader: watch::Receiver<bool>,
        pool: Arc<ClientPool>,
        identity: String,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            shard: None,
            claims: None,
            client,
            leader,
            pool,
            identity,
            metrics,
            caches: None,
            workers: None,
            task_queues: Known::default(),
            allowed_kinds: validate::DEFAULT_ALLOWED_KINDS
                .iter()
                .map(|k| k.to_string())
                .collect(),
            resources: Resources::default(),
            streaks: Streaks::default(),
            access_check: validate::AccessCheck::default(),
        }
    }

    pub(crate) fn leads(&self) -> bool {
        *self.leader.borrow()
    }
}

/// Found task queues by (TWD uid, build ID).
#[derive(Default)]
pub struct Known(Mutex<HashMap<(String, String), String>>);

impl Known {
    pub(crate) fn get(&self, key: &(String, String)) -> Option<String> {
        // A poisoned lock only means another reconcile panicked mid-insert; the map is intact.
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    pub(crate) fn insert(&self, key: (String, String), queue: String) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, queue);
    }
}
