//! Shared state of the reconciler: clients, settings, sinks, and per-object failure streaks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;
use tokio::sync::{broadcast, watch};

use crate::api::TemporalWorkerDeployment;
use crate::api::twd::TemporalWorkerDeploymentStatus;
use crate::events::EventSink;
use crate::metrics::Metrics;
use crate::reconciler::Streaks;
use crate::reconciler::connect::Connector;
use crate::temporal::ClientPool;
use crate::worker_deployment::outcome::Outcome;
use crate::worker_deployment::remembered::RememberedViews;
use crate::worker_deployment::remembered::pinned::PinnedCounts;
use crate::worker_deployment::remembered::pollers::PollerChecks;
use crate::worker_deployment::validate::ControllerSettings;

/// Runtime settings (typed once from the command line in `run::RunOptions`).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Identity used for every Temporal write and as the routing manager identity.
    pub identity: String,
    /// Identities whose routing this controller takes over: its own earlier identity and
    /// predecessor controllers (`planner::takeover`).
    pub succession: crate::planner::takeover::Succession,
    /// Recorded with every routing write (`temporal.io/controller-install-id`) so that
    /// another install using the same identity is detected (`DuplicateInstall`).
    pub install_id: String,
    pub controller_version: String,
    /// Re-check interval for resources with nothing pending.
    pub idle_interval: Duration,
    /// Re-check interval at rest ([`crate::planner::rest`]).
    pub rest_interval: Duration,
    /// Poll interval while waiting for Temporal-side facts (pollers, gates); also the
    /// planner's (`PlanInput::fast_poll`).
    pub fast_poll: Duration,
    /// Empty = all namespaces.
    pub watch_namespaces: Vec<String>,
    /// Kinds a TemporalWorkerOwnedResource may carry (empty: the default list).
    pub owned_kinds: Vec<String>,
    /// `None`: the webhook checks each TWOR author's rights on its kind. `Some(kinds)`: no
    /// webhook, so TWORs of other kinds are refused (the TWOR controller's `AccessCheck`).
    pub owned_unchecked_kinds: Option<Vec<String>>,
    pub planner: ControllerSettings,
    /// Reconciles running at once (0: unbounded); kube-runtime queues the rest.
    pub max_concurrent_reconciles: u16,
    /// Budget waits in one reconcile at least this long are reported in the status.
    pub budget_delay_report: Duration,
    /// Whose per-version backlog the backlog poller reads (`crate::backlog::consumed`).
    pub backlog_scope: crate::backlog::Scope,
    /// Poller health of the live versions: threshold and interval.
    pub pollers: crate::planner::poller_health::PollerSettings,
    /// A Connection's client certificate this close to expiry is reported (Warning event,
    /// `expiringSoon`, metric).
    pub certificate_expiry_warning: Duration,
    /// This replica's shard (`crate::shard`); `None`: the install is not sharded.
    pub shard: Option<Arc<crate::shard::Shard>>,
}

impl Settings {
    /// The looks-again bounds of the planner's rest cadence.
    pub fn cadence(&self) -> crate::planner::rest::Cadence {
        crate::planner::rest::Cadence {
            idle: self.idle_interval,
            rest: self.rest_interval,
        }
    }

    pub fn watches(&self, namespace: &str) -> bool {
        self.watch_namespaces.is_empty() || self.watch_namespaces.iter().any(|n| n == namespace)
    }
}

/// Shared state of the reconciler.
pub struct Context {
    pub client: kube::Client,
    pub pool: Arc<ClientPool>,
    pub settings: Settings,
    pub events: EventSink,
    pub metrics: Arc<Metrics>,
    /// Every status written is published here (SSE watch of the status API).
    pub feed: broadcast::Sender<Arc<TemporalWorkerDeployment>>,
    /// The worker-deployment caches of both kinds, set once the controllers are built.
    pub workers: std::sync::OnceLock<crate::workers::Workers>,
    /// What reconciles read of Kubernetes (`crate::caches`), set once the controllers are
    /// built; without it (tools, tests) they read the API server.
    pub caches: std::sync::OnceLock<crate::caches::Caches>,
    /// True while this replica holds the leader lease (always true without leader election).
    pub leader: watch::Receiver<bool>,
    /// What the backlog poller watches; each reconcile publishes its live versions.
    pub backlog: Arc<crate::backlog::Targets>,
    /// The last count of open pinned workflows per old version (drain visibility).
    pub pinned: PinnedCounts,
    /// What the last reconcile of each object saw of Temporal (skips needless describes).
    pub remembered: RememberedViews,
    /// The last poller health check of each object.
    pub pollers: PollerChecks,
    /// A sharded install's claims of Temporal namespaces (`crate::shard::claims`).
    pub claims: Option<Arc<crate::shard::Claims>>,
    /// Consecutive failed reconciles per object (backoff, quiet retries).
    failures: Streaks<ObjectRef<TemporalWorkerDeployment>>,
    /// Our last successful status write per object: newer than the watch cache until the
    /// watch delivers it (see `report::after_own_write`).
    written: Mutex<HashMap<ObjectRef<TemporalWorkerDeployment>, Written>>,
    /// Set once the leader's first looks of the objects it found unreported are written
    /// (`first_look::sweep`).
    pub(super) swept: tokio::sync::OnceCell<()>,
    /// One pass of an object at a time, whoever runs it (`crate::lane::slots`).
    pub(super) slots: crate::lane::Slots<ObjectRef<TemporalWorkerDeployment>>,
}

/// What a status write left on the server, enough to write again on top of it.
#[derive(Clone, Debug)]
pub struct Written {
    pub uid: Option<String>,
    pub generation: Option<i64>,
    pub resource_version: Option<String>,
    /// The resourceVersion the write replaced: while the cache still shows it, the cache lags.
    pub base_resource_version: Option<String>,
    pub status: Option<TemporalWorkerDeploymentStatus>,
}

impl Context {
    /// The cached WorkerDeployment of `twd`'s namespace and name (see
    /// [`crate::worker_deployment::superseded`]).
    pub fn canonical_of(
        &self,
        twd: &TemporalWorkerDeployment,
    ) -> Option<Arc<TemporalWorkerDeployment>> {
        use kube::ResourceExt;
        let workers = self.workers.get()?;
        workers.get(
            crate::api::KindSet::Canonical,
            &twd.namespace().unwrap_or_default(),
            &twd.name_any(),
        )
    }

    /// The caches once they have listed (waited for, never read unfilled); `None` when there
    /// are none (tools, tests) or they stopped (shutdown): then reads go to the API server.
    pub async fn ready_caches(&self) -> Option<&crate::caches::Caches> {
        let caches = self.caches.get()?;
        caches.ready().await.ok()?;
        Some(caches)
    }

    pub fn new(
        client: kube::Client,
        pool: Arc<ClientPool>,
        settings: Settings,
        events: EventSink,
        metrics: Arc<Metrics>,
        feed: broadcast::Sender<Arc<TemporalWorkerDeployment>>,
        leader: watch::Receiver<bool>,
    ) -> Self {
        Self {
            client,
            pool,
            settings,
            events,
            metrics,
            feed,
            leader,
            workers: std::sync::OnceLock::new(),
            caches: std::sync::OnceLock::new(),
            backlog: Arc::default(),
            pinned: PinnedCounts::default(),
            remembered: RememberedViews::default(),
            pollers: PollerChecks::default(),
            claims: None,
            failures: Streaks::default(),
            written: Mutex::default(),
            swept: tokio::sync::OnceCell::new(),
            slots: crate::lane::Slots::default(),
        }
    }

    /// The Temporal connect sequence with this controller's identity and pool.
    pub fn connector(&self) -> Connector<'_> {
        Connector {
            kube: &self.client,
            pool: &self.pool,
            identity: &self.settings.identity,
            install_id: &self.settings.install_id,
            caches: self.caches.get(),
            cluster_connections: self.settings.watch_namespaces.is_empty(),
            claims: self.claims.as_deref(),
        }
    }

    /// `twd` as this shard reconciles it: with its shard labels among those it puts on its
    /// versioned Deployments (`Shard::dress`). Every copy read from the API server in a pass
    /// goes through here.
    pub fn dressed(&self, twd: Arc<TemporalWorkerDeployment>) -> Arc<TemporalWorkerDeployment> {
        match &self.settings.shard {
            Some(shard) => Arc::new(shard.dress(&twd)),
            None => twd,
        }
    }

    /// Whether `twd` is still this shard's (always, unsharded): its cached copy is there and
    /// matches the shard's selector. A worker deployment relabelled for another shard leaves
    /// this shard's watch; a reconcile already under way then stops before it writes.
    pub fn still_ours(&self, twd: &TemporalWorkerDeployment) -> bool {
        use kube::ResourceExt;
        let Some(shard) = &self.settings.shard else {
            return true;
        };
        let cached = match self.workers.get() {
            Some(workers) => workers.get(
                twd.kind_set(),
                &twd.namespace().unwrap_or_default(),
                &twd.name_any(),
            ),
            // Tools and tests without caches: the object as given.
            None => Some(Arc::new(twd.clone())),
        };
        cached.is_some_and(|c| shard.matches(c.labels()))
    }

    /// True while this replica may write (it holds the leader lease, or runs without
    /// leader election). Checked before every write.
    pub fn leads(&self) -> bool {
        *self.leader.borrow()
    }

    /// Remembers a status write that succeeded.
    /// `base`: the resourceVersion the write was made on top of.
    pub(super) fn remember_write(&self, twd: &TemporalWorkerDeployment, base: Option<String>) {
        let mut m = self.written.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(
            twd.key(),
            Written {
                uid: twd.metadata.uid.clone(),
                generation: twd.metadata.generation,
                resource_version: twd.metadata.resource_version.clone(),
                base_resource_version: base,
                status: twd.status.clone(),
            },
        );
    }

    /// The cache's copy of `given` (the newest the watch delivered: a pass that waited for its
    /// slot may have been handed an older one), or `given` when the cache has none.
    pub fn latest(&self, given: Arc<TemporalWorkerDeployment>) -> Arc<TemporalWorkerDeployment> {
        use kube::ResourceExt;
        let (Some(workers), Some(ns)) = (self.workers.get(), given.namespace()) else {
            return given;
        };
        workers
            .get(given.kind_set(), &ns, &given.name_any())
            .unwrap_or(given)
    }

    /// The freshest known state of `cached`: while the watch has not yet delivered our own
    /// last status write (the cache still shows the version that write replaced), that write,
    /// so the reconcile writes on top of it instead of earning a 409. Once the cache has moved
    /// past it, the record is dropped (it bounds the memory to writes in flight).
    pub fn freshest(&self, cached: Arc<TemporalWorkerDeployment>) -> Arc<TemporalWorkerDeployment> {
        let mut m = self.written.lock().unwrap_or_else(|p| p.into_inner());
        let key = cached.key();
        let Some(last) = m.get(&key) else {
            return cached;
        };
        let lagging = last.uid == cached.metadata.uid
            && last.generation == cached.metadata.generation
            && last.base_resource_version.is_some()
            && last.base_resource_version == cached.metadata.resource_version;
        if !lagging {
            m.remove(&key);
            return cached;
        }
        let mut obj = (*cached).clone();
        obj.metadata.resource_version = last.resource_version.clone();
        obj.status = last.status.clone();
        Arc::new(obj)
    }

    /// Forgets an object being deleted.
    pub(super) fn forget_write(&self, twd: &TemporalWorkerDeployment) {
        let mut m = self.written.lock().unwrap_or_else(|p| p.into_inner());
        m.remove(&twd.key());
    }

    /// Our last successful status write to `twd`, if any.
    pub(super) fn last_write(&self, twd: &TemporalWorkerDeployment) -> Option<Written> {
        let m = self.written.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&twd.key()).cloned()
    }

    /// Records `outcome` and returns the failure streak including it (0 after a success).
    pub(super) fn streak(
        &self,
        key: &ObjectRef<TemporalWorkerDeployment>,
        outcome: &Outcome,
    ) -> u32 {
        match outcome {
            Outcome::Done => self.failures.succeeded(key),
            Outcome::Stale => self.failures.current(key),
            Outcome::Failed(_) => self.failures.failed(key),
        }
    }
}
