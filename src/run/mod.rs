//! Process wiring for `temporal-worker-controller run`: leader election, the controller, the
//! connection janitor and the HTTP server (metrics, health, status API). Also used in-process
//! by the end-to-end tests and the playground.
//!
//! By concept: [`options`] (what `run` is given), [`servers`] (HTTP, webhook, readiness,
//! backlog poller), [`leadership`] (the Lease); this file starts and stops them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{broadcast, watch};

use crate::controller;
use crate::events::EventSink;
use crate::http::{AppState, Readiness};
use crate::metrics::Metrics;
use crate::milestones::Milestones;
use crate::reconciler::services::Services;
use crate::temporal::budget::Class;
use crate::temporal::{Budgets, ClientPool};
use crate::worker_deployment::Context;

pub mod args;
pub mod go_flags;
mod leadership;
mod options;
mod servers;

pub use options::{ApiAuth, Identity, IdentityError, RunOptions, defaults};

use leadership::{LeaseHandle, leader_channel};
use options::settings;
use servers::{backlog_poller, bind, readiness_inputs, token_auth, webhook};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("binding HTTP address {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("leader election: {0}")]
    Lease(String),
    #[error("HTTP server: {0}")]
    Http(std::io::Error),
    #[error("admission webhook: {0}")]
    Webhook(#[from] crate::webhook::WebhookError),
    #[error("controller identity: {0}")]
    Identity(#[from] options::IdentityError),
}

/// How long in-flight reconciles may take to finish after a stop request. A Temporal call is
/// bounded by 20 s (a write by 8 s), and Kubernetes SIGKILLs 30 s after SIGTERM by default: the lease is
/// released within what is left.
pub const DRAIN_BUDGET: Duration = Duration::from_secs(22);

/// A running controller (in-process). Dropping it does not stop it; call [`Running::stop`].
pub struct Running {
    pub http_addr: SocketAddr,
    /// The identity the controller acts as in Temporal (with its cluster-unique part).
    pub identity: String,
    /// The admission webhook's HTTPS address, when it runs.
    pub webhook_addr: Option<SocketAddr>,
    pub metrics: Arc<Metrics>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    lease: LeaseHandle,
}

impl Running {
    /// Stops taking work, lets in-flight reconciles finish (at most [`DRAIN_BUDGET`]), then
    /// releases the lease so that another replica takes over without waiting for it to
    /// expire. When reconciles are still running at the deadline the lease is not released
    /// (it expires on its own), so no other replica writes while they might.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        match tokio::time::timeout(DRAIN_BUDGET, self.task).await {
            Ok(_) => self.lease.release().await,
            Err(_) => tracing::warn!(
                budget = ?DRAIN_BUDGET,
                "in-flight reconciles did not finish in time; leaving the lease to expire"
            ),
        }
    }
}

/// Waits for SIGTERM (what Kubernetes sends a pod) or SIGINT (Ctrl-C) and names it.
#[cfg(unix)]
pub async fn shutdown_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

/// Waits for Ctrl-C.
#[cfg(not(unix))]
pub async fn shutdown_signal() -> std::io::Result<&'static str> {
    tokio::signal::ctrl_c().await.map(|()| "Ctrl-C")
}

/// Resolves once a stop is requested (shared by every part that stops).
fn stopped(
    stop: &watch::Receiver<bool>,
) -> futures::future::Shared<futures::future::BoxFuture<'static, ()>> {
    let mut rx = stop.clone();
    async move {
        let _ = rx.wait_for(|s| *s).await;
    }
    .boxed()
    .shared()
}

/// Temporal clients that count their calls in the metrics and wait on the request budget.
fn temporal_pool(opts: &RunOptions, metrics: &Arc<Metrics>) -> Arc<ClientPool> {
    let rpc_metrics = metrics.clone();
    let wait_metrics = metrics.clone();
    let budgets = Arc::new(Budgets::new(
        opts.temporal_budget,
        Some(Arc::new(move |class: Class, waited| {
            wait_metrics.budget_wait(class.label(), waited)
        })),
    ));
    Arc::new(
        ClientPool::with_observer(Arc::new(move |method, code, latency| {
            rpc_metrics.temporal_rpc(method, code, latency)
        }))
        .with_budgets(budgets),
    )
}

/// The options with the shard's own leader Lease (each shard elects its leader apart); the
/// install ID stays derived from the install's lease name, shared by all its shards.
fn shard_lease(opts: &RunOptions) -> RunOptions {
    let mut out = opts.clone();
    if let Some(shard) = &opts.shard {
        out.lease_name = shard.lease_name(&opts.lease_name);
    }
    out
}

/// A sharded install's claims of Temporal namespaces, on Leases beside the leader Lease.
fn claims(client: &kube::Client, opts: &RunOptions) -> Option<Arc<crate::shard::Claims>> {
    let shard = opts.shard.as_ref()?;
    let namespace = opts
        .lease_namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    Some(Arc::new(crate::shard::Claims::new(
        client.clone(),
        &namespace,
        &opts.lease_name,
        shard.name(),
    )))
}

/// While this replica leads its shard: renews the Temporal namespace claims its worker
/// deployments use and releases the others, every [`crate::shard::claims::RENEW_EVERY`].
async fn keep_claims(ctx: Arc<Context>, stop: watch::Receiver<bool>) {
    let Some(claims) = ctx.services.claims.clone() else {
        return;
    };
    let until = stopped(&stop);
    let keeping = async {
        let mut tick = tokio::time::interval(crate::shard::claims::RENEW_EVERY);
        loop {
            tick.tick().await;
            if !ctx.services.leads() {
                claims.forget();
                continue;
            }
            if let (Some(workers), Some(caches)) =
                (ctx.services.workers(), ctx.services.ready_caches().await)
            {
                // A worker deployment moved to another shard: its backlog is that shard's to read.
                ctx.backlog
                    .retain(|(ns, name)| workers.find(ns, name).is_some());
                claims
                    .keep(&crate::shard::claims::in_use(workers, caches))
                    .await;
            }
        }
    };
    futures::future::select(Box::pin(keeping), until).await;
}

/// Says (log line and `system_trust_roots` gauge) how many CA certificates the system trust
/// store gave: 0 means an image without a CA bundle (docs/image.md).
fn with_trust_roots(metrics: Metrics) -> Arc<Metrics> {
    let roots = crate::temporal::tls::system_roots();
    metrics.set_system_trust_roots(roots.loaded);
    if roots.loaded == 0 {
        tracing::warn!(
            system_trust_roots = 0,
            errors = roots.errors,
            "no system trust roots found: TLS to publicly signed servers will fail"
        );
    } else {
        tracing::info!(
            system_trust_roots = roots.loaded,
            errors = roots.errors,
            "system trust roots loaded"
        );
    }
    Arc::new(metrics)
}

/// The services every reconciler shares (client, Temporal pool and identity, events, metrics,
/// leadership, shard and claims), built once for the three reconcilers' contexts.
fn services(
    client: &kube::Client,
    opts: &RunOptions,
    identity: &Identity,
    (metrics, milestones): (&Arc<Metrics>, &Arc<Milestones>),
    leader: &watch::Receiver<bool>,
) -> Arc<Services> {
    let events = EventSink::new(
        client.clone(),
        opts.pod_name.clone(),
        milestones.clone(),
        metrics.clone(),
    );
    let mut services = Services::new(
        client.clone(),
        leader.clone(),
        metrics.clone(),
        events,
        temporal_pool(opts, metrics),
        identity.identity.clone(),
    );
    services.claims = claims(client, opts);
    Arc::new(options::installed(services, opts, identity))
}

/// Starts everything and returns once the HTTP listener is bound.
pub async fn start(client: kube::Client, opts: RunOptions) -> Result<Running, RunError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let shutdown = stopped(&stop_rx);
    let metrics = with_trust_roots(Metrics::new());
    let milestones = Arc::new(Milestones::default());
    let (feed, _) = broadcast::channel(256);
    let (leader, lease) = leader_channel(&client, &shard_lease(&opts), metrics.clone()).await?;
    let identity = options::identity(&client, &opts).await?;
    let services = services(&client, &opts, &identity, (&metrics, &milestones), &leader);
    let settings = settings(&opts, &identity);
    let ctx = Arc::new(Context::new(services, settings.worker, feed.clone()));
    let backlog_fut = backlog_poller(&opts, &ctx, &metrics, &leader, &stop_rx);
    let claims_fut = keep_claims(ctx.clone(), stop_rx.clone());
    let (store, controller_fut) =
        controller::build(ctx, (settings.owned, settings.connection), shutdown.clone());

    let readiness = Readiness::default();
    let (webhook_addr, webhook_fut) =
        webhook(&client, &opts, &leader, &stop_rx, (&readiness, &metrics)).await?;
    let (listener, http_addr) = bind(opts.http_addr).await?;
    let state = AppState {
        store: store.clone(),
        metrics: metrics.clone(),
        milestones,
        feed,
        readiness: readiness.clone(),
        auth: token_auth(&client, &opts.api_auth),
    };
    let http_fut =
        servers::serve_http(listener, &opts.extra_http_addrs, state, shutdown.clone()).await?;

    let (sync_fut, leader_fut) = readiness_inputs(
        store.clone(),
        &readiness,
        leader,
        opts.leader_elect,
        shutdown.clone(),
    );

    let task = tokio::spawn(async move {
        let http = async {
            if let Err(e) = http_fut.await {
                tracing::error!(error = %e, "HTTP server failed");
            }
        };
        let parts = [controller_fut.boxed(), http.boxed(), sync_fut.boxed()];
        let more = [
            leader_fut.map(|_| ()).boxed(),
            backlog_fut.boxed(),
            webhook_fut.boxed(),
            claims_fut.boxed(),
        ];
        futures::future::join_all(parts.into_iter().chain(more)).await;
    });
    Ok(Running {
        http_addr,
        identity: identity.identity,
        webhook_addr,
        metrics,
        stop: stop_tx,
        task,
        lease,
    })
}
