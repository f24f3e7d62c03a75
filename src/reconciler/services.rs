//! What the three reconcilers share, built once per process (`run::start`) and handed by
//! `crate::controller` to each reconciler's context: the Kubernetes client, leadership, the
//! metrics, the Temporal client pool and the identity it acts as, the event sink, the shard
//! and its claims, and the caches every pass reads. Each context (`worker_deployment::Context`,
//! `owned::OwnedContext`, `connection::ConnectionContext`) holds one `Arc<Services>` beside
//! its own settings and memories, so a service is added, or wired differently, in one place.

use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use crate::caches::Caches;
use crate::events::EventSink;
use crate::metrics::Metrics;
use crate::reconciler::connect::Connector;
use crate::shard::{Claims, Shard};
use crate::temporal::ClientPool;
use crate::workers::Workers;

/// The services every reconciler's context carries.
pub struct Services {
    pub client: kube::Client,
    /// True while this replica holds the leader lease (always true without leader election).
    pub leader: watch::Receiver<bool>,
    pub metrics: Arc<Metrics>,
    /// Temporal clients, one per Connection and namespace, shared by every reconciler: a
    /// Connection check or a task-queue lookup dials no connection of its own.
    pub pool: Arc<ClientPool>,
    /// Identity used for every Temporal write and as the routing manager identity.
    pub identity: String,
    /// Recorded with every routing write (`temporal.io/controller-install-id`) so that
    /// another install using the same identity is detected (`DuplicateInstall`).
    pub install_id: String,
    pub events: EventSink,
    /// The namespaces the controllers watch; empty: all namespaces (a cluster install, which
    /// alone may read ClusterConnections).
    pub watch_namespaces: Vec<String>,
    /// This replica's shard (`crate::shard`); `None`: the install is not sharded.
    pub shard: Option<Arc<Shard>>,
    /// A sharded install's claims of Temporal namespaces (`crate::shard::claims`).
    pub claims: Option<Arc<Claims>>,
    // The caches are set once, by `controller::build`, not passed to `new`: they are the
    // controllers' own watches, which exist only once the controllers are built, while the
    // services exist before (`run::start` hands them to the backlog poller and the claim
    // keeper first). Until then, and in tools and tests that build no controller, a pass
    // reads the API server instead.
    caches: OnceLock<Caches>,
    workers: OnceLock<Workers>,
}

impl Services {
    /// Services for all namespaces, unsharded, without caches until [`Services::set_caches`].
    pub fn new(
        client: kube::Client,
        leader: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
        events: EventSink,
        pool: Arc<ClientPool>,
        identity: String,
    ) -> Self {
        Self {
            client,
            leader,
            metrics,
            pool,
            identity,
            install_id: String::new(),
            events,
            watch_namespaces: Vec::new(),
            shard: None,
            claims: None,
            caches: OnceLock::new(),
            workers: OnceLock::new(),
        }
    }

    /// True while this replica may write (it holds the leader lease, or runs without
    /// leader election). Checked before every write.
    pub fn leads(&self) -> bool {
        *self.leader.borrow()
    }

    /// Whether `namespace` is one the controllers watch.
    pub fn watches(&self, namespace: &str) -> bool {
        self.watch_namespaces.is_empty() || self.watch_namespaces.iter().any(|n| n == namespace)
    }

    /// Sets the caches once the controllers that fill them are built. Set once per process:
    /// a second call (never made) keeps the first caches.
    pub fn set_caches(&self, caches: Caches, workers: Workers) {
        let _ = self.caches.set(caches);
        let _ = self.workers.set(workers);
    }

    /// What passes read of Kubernetes (`crate::caches`), possibly still listing; `None`
    /// before the controllers are built, or without them (tools, tests).
    pub fn caches(&self) -> Option<&Caches> {
        self.caches.get()
    }

    /// The worker-deployment caches of both kinds (`crate::workers`); `None` as for
    /// [`Services::caches`].
    pub fn workers(&self) -> Option<&Workers> {
        self.workers.get()
    }

    /// The caches once they have listed (waited for, never read unfilled); `None` when there
    /// are none (tools, tests) or they stopped (shutdown): then reads go to the API server.
    pub async fn ready_caches(&self) -> Option<&Caches> {
        let caches = self.caches()?;
        caches.ready().await.ok()?;
        Some(caches)
    }

    /// The Temporal connect sequence with this controller's identity and pool.
    pub fn connector(&self) -> Connector<'_> {
        Connector {
            kube: &self.client,
            pool: &self.pool,
            identity: &self.identity,
            install_id: &self.install_id,
            caches: self.caches(),
            cluster_connections: self.watch_namespaces.is_empty(),
            claims: self.claims.as_deref(),
        }
    }
}
