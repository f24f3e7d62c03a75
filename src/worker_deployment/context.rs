//! Shared state of the worker-deployment reconciler: the services every reconciler shares
//! ([`Services`]), its settings, the status feed, and the memories kept between passes
//! (remembered views, failure streaks, our last status writes, the per-object slots).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::ObjectRef;
use tokio::sync::broadcast;

use crate::api::TemporalWorkerDeployment;
use crate::api::twd::TemporalWorkerDeploymentStatus;
use crate::reconciler::Streaks;
use crate::reconciler::services::Services;
use crate::worker_deployment::outcome::Outcome;
use crate::worker_deployment::remembered::RememberedViews;
use crate::worker_deployment::remembered::pinned::PinnedCounts;
use crate::worker_deployment::remembered::pollers::PollerChecks;
use crate::worker_deployment::settings::Settings;

/// Shared state of the worker-deployment reconciler.
pub struct Context {
    /// What the three reconcilers share: clients, leadership, metrics, events, caches.
    pub services: Arc<Services>,
    pub settings: Settings,
    /// Every status written is published here (SSE watch of the status API).
    pub feed: broadcast::Sender<Arc<TemporalWorkerDeployment>>,
    /// What the backlog poller watches; each reconcile publishes its live versions.
    pub backlog: Arc<crate::backlog::Targets>,
    /// The last count of open pinned workflows per old version (drain visibility).
    pub pinned: PinnedCounts,
    /// What the last reconcile of each object saw of Temporal (skips needless describes).
    pub remembered: RememberedViews,
    /// The last poller health check of each object.
    pub pollers: PollerChecks,
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
        let workers = self.services.workers()?;
        workers.get(
            crate::api::KindSet::Canonical,
            &twd.namespace().unwrap_or_default(),
            &twd.name_any(),
        )
    }

    pub fn new(
        services: Arc<Services>,
        settings: Settings,
        feed: broadcast::Sender<Arc<TemporalWorkerDeployment>>,
    ) -> Self {
        Self {
            services,
            settings,
            feed,
            backlog: Arc::default(),
            pinned: PinnedCounts::default(),
            remembered: RememberedViews::default(),
            pollers: PollerChecks::default(),
            failures: Streaks::default(),
            written: Mutex::default(),
            swept: tokio::sync::OnceCell::new(),
            slots: crate::lane::Slots::default(),
        }
    }

    /// `twd` as this shard reconciles it: with its shard labels among those it puts on its
    /// versioned Deployments (`Shard::dress`). Every copy read from the API server in a pass
    /// goes through here.
    pub fn dressed(&self, twd: Arc<TemporalWorkerDeployment>) -> Arc<TemporalWorkerDeployment> {
        match &self.services.shard {
            Some(shard) => Arc::new(shard.dress(&twd)),
            None => twd,
        }
    }

    /// Whether `twd` is still this shard's (always, unsharded): its cached copy is there and
    /// matches the shard's selector. A worker deployment relabelled for another shard leaves
    /// this shard's watch; a reconcile already under way then stops before it writes.
    pub fn still_ours(&self, twd: &TemporalWorkerDeployment) -> bool {
        use kube::ResourceExt;
        let Some(shard) = &self.services.shard else {
            return true;
        };
        let cached = match self.services.workers() {
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
        let (Some(workers), Some(ns)) = (self.services.workers(), given.namespace()) else {
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
