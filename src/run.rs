//! Process wiring for `temporal-worker-controller run`: leader election, the controller, the
//! connection janitor and the HTTP server (metrics, health, status API). Also used in-process
//! by the end-to-end tests and the playground.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{broadcast, oneshot, watch};

use crate::controller;
use crate::events::EventSink;
use crate::http::{self, AppState, KubeTokenReviewer, Readiness, TokenAuth};
use crate::metrics::Metrics;
use crate::milestones::Milestones;
use crate::reconcile::validate::ControllerSettings;
use crate::reconcile::{Context, Settings};
use crate::temporal::budget::Class;
use crate::temporal::{BudgetConfig, Budgets, ClientPool};

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub http_addr: SocketAddr,
    pub leader_elect: bool,
    pub lease_name: String,
    pub lease_namespace: Option<String>,
    pub watch_namespaces: Vec<String>,
    pub identity: String,
    /// Recorded with every routing write to tell installs apart that share `identity`
    /// (duplicate-install detection). `None` or empty: [`RunOptions::install_id`] derives it.
    pub install_id: Option<String>,
    pub idle_interval: Duration,
    pub fast_poll: Duration,
    pub max_versions_ineligible_for_deletion: usize,
    pub rollback_window: Duration,
    pub pod_name: Option<String>,
    /// Bearer-token authentication of the status API (and optionally `/metrics`).
    pub api_auth: ApiAuth,
    /// How often the task-queue backlog of every live version is read for the backlog
    /// metrics; `None` turns it off.
    pub backlog_poll: Option<Duration>,
    /// The admission webhook (`crate::webhook`); `None` serves none.
    pub webhook: Option<crate::webhook::WebhookOptions>,
    /// Kinds a TemporalWorkerOwnedResource may carry, for the controller's own check and the
    /// webhook's alike.
    pub owned_kinds: Vec<String>,
    /// Client-side Temporal rate limits, per Temporal namespace and per worker deployment.
    pub temporal_budget: BudgetConfig,
    /// Reconciles of TemporalWorkerDeployments running at once (0: unbounded).
    pub max_concurrent_reconciles: u16,
    /// A rollout whose Temporal calls waited this long in one reconcile for the budget says
    /// so in its status (`DelayedByTemporalBudget`).
    pub budget_delay_report: Duration,
}

/// Who may read the status API.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ApiAuth {
    /// Anyone who can reach the port (restrict it with a NetworkPolicy).
    #[default]
    None,
    /// Bearer tokens checked with a Kubernetes TokenReview. With `audiences`, only tokens
    /// minted for one of them pass; with `protect_metrics`, `/metrics` needs a token too.
    TokenReview {
        audiences: Vec<String>,
        protect_metrics: bool,
    },
}

/// Defaults of the options; the command line takes its defaults from here too.
pub mod defaults {
    use std::time::Duration;

    pub const IDLE_INTERVAL: Duration = Duration::from_secs(60);
    pub const FAST_POLL: Duration = Duration::from_millis(500);
    /// One `DescribeWorkerDeploymentVersion` per live version per interval: fresh enough for
    /// an autoscaler's 15-30 s sync period, modest for Temporal.
    pub const BACKLOG_POLL: Duration = Duration::from_secs(15);
    pub const MAX_VERSIONS_INELIGIBLE_FOR_DELETION: usize = 75;
    pub const ROLLBACK_WINDOW: Duration = Duration::from_secs(3600);
    pub const IDENTITY: &str = "temporal-worker-controller";
    pub const LEASE_NAME: &str = "temporal-worker-controller";
    /// Enough to keep 2 cores busy while calls wait on Temporal, few enough that a storm of
    /// events (a restart with 1,000 TWDs) queues in kube-runtime instead of in the budget
    /// (measured in `docs/temporal-budget.md`).
    pub const MAX_CONCURRENT_RECONCILES: u16 = 16;
    /// Long enough that an ordinary burst (a restart reconciling everything) does not show.
    pub const BUDGET_DELAY_REPORT: Duration = Duration::from_secs(5);
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            http_addr: SocketAddr::from(([0, 0, 0, 0], 8080)),
            leader_elect: false,
            lease_name: defaults::LEASE_NAME.into(),
            lease_namespace: None,
            watch_namespaces: Vec::new(),
            identity: defaults::IDENTITY.into(),
            install_id: None,
            idle_interval: defaults::IDLE_INTERVAL,
            fast_poll: defaults::FAST_POLL,
            max_versions_ineligible_for_deletion: defaults::MAX_VERSIONS_INELIGIBLE_FOR_DELETION,
            rollback_window: defaults::ROLLBACK_WINDOW,
            pod_name: None,
            api_auth: ApiAuth::None,
            backlog_poll: Some(defaults::BACKLOG_POLL),
            webhook: None,
            owned_kinds: crate::owned::rules::DEFAULT_ALLOWED_KINDS
                .iter()
                .map(|k| (*k).to_string())
                .collect(),
            temporal_budget: BudgetConfig::DEFAULT,
            max_concurrent_reconciles: defaults::MAX_CONCURRENT_RECONCILES,
            budget_delay_report: defaults::BUDGET_DELAY_REPORT,
        }
    }
}

impl RunOptions {
    /// The install ID: `--install-id` if set, else `<lease namespace>/<lease name>`, else the
    /// controller identity.
    ///
    /// The default must survive upgrades of one install (a new ID after `helm upgrade` would
    /// make the install look like a stranger to its own earlier routing writes and stall it as
    /// `DuplicateInstall`) and differ between installs: the Lease's namespace and name are
    /// both. Two installs sharing one Lease would share leadership too, so in one cluster a
    /// distinct install already has a distinct Lease; the pod name or a random value would
    /// change on every rollout. Without a namespace (run outside a pod, no `--lease-namespace`)
    /// nothing install-specific is known and the identity is used; installs in different
    /// clusters with the same release namespace and Lease name also collide, so they set
    /// `--install-id` explicitly.
    pub fn install_id(&self) -> String {
        if let Some(id) = self
            .install_id
            .as_deref()
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            return id.to_string();
        }
        match self
            .lease_namespace
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            Some(ns) => format!("{ns}/{}", self.lease_name),
            None => self.identity.clone(),
        }
    }
}

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
}

/// How long in-flight reconciles may take to finish after a stop request. A Temporal call is
/// bounded by 20 s (a write by 8 s), and Kubernetes SIGKILLs 30 s after SIGTERM by default: the lease is
/// released within what is left.
pub const DRAIN_BUDGET: Duration = Duration::from_secs(22);
/// How long releasing the lease may take.
const RELEASE_BUDGET: Duration = Duration::from_secs(5);

/// A running controller (in-process). Dropping it does not stop it; call [`Running::stop`].
pub struct Running {
    pub http_addr: SocketAddr,
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

/// Releases the leader lease on request, after the controller stopped acting.
struct LeaseHandle {
    release: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaseHandle {
    async fn release(self) {
        let _ = self.release.send(());
        if tokio::time::timeout(RELEASE_BUDGET, self.task)
            .await
            .is_err()
        {
            tracing::warn!("releasing the lease timed out; it expires on its own");
        }
    }
}

/// Starts everything and returns once the HTTP listener is bound.
pub async fn start(client: kube::Client, opts: RunOptions) -> Result<Running, RunError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let shutdown = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
        .shared()
    };

    let metrics = Arc::new(Metrics::new());
    let milestones = Arc::new(Milestones::default());
    let (feed, _) = broadcast::channel(256);
    let (leader, lease) = leader_channel(&client, &opts, metrics.clone()).await?;
    let rpc_metrics = metrics.clone();
    let wait_metrics = metrics.clone();
    let budgets = Arc::new(Budgets::new(
        opts.temporal_budget,
        Some(Arc::new(move |class: Class, waited| {
            wait_metrics.budget_wait(class.label(), waited)
        })),
    ));
    let pool = Arc::new(
        ClientPool::with_observer(Arc::new(move |method, code, latency| {
            rpc_metrics.temporal_rpc(method, code, latency)
        }))
        .with_budgets(budgets),
    );
    let settings = settings(&opts);
    let events = EventSink::new(
        client.clone(),
        opts.pod_name.clone(),
        milestones.clone(),
        metrics.clone(),
    );
    let ctx = Arc::new(Context::new(
        client.clone(),
        pool,
        settings,
        events,
        metrics.clone(),
        feed.clone(),
        leader.clone(),
    ));
    let backlog_fut = backlog_poller(&opts, &ctx, &metrics, &leader, &stop_rx);
    let (store, controller_fut) = controller::build(ctx, shutdown.clone());

    let readiness = Readiness::default();
    let (webhook_addr, webhook_fut) =
        webhook(&client, &opts, &leader, &stop_rx, &readiness).await?;
    let (listener, http_addr) = bind(opts.http_addr).await?;
    let state = AppState {
        store: store.clone(),
        metrics: metrics.clone(),
        milestones,
        feed,
        readiness: readiness.clone(),
        auth: token_auth(&client, &opts.api_auth),
    };
    let http_fut = http::serve_listener(listener, state, shutdown.clone());

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
        tokio::join!(
            controller_fut,
            http,
            sync_fut,
            leader_fut.then(|_| async {}),
            backlog_fut,
            webhook_fut
        );
    });
    Ok(Running {
        http_addr,
        webhook_addr,
        metrics,
        stop: stop_tx,
        task,
        lease,
    })
}

/// The futures that flip the readiness inputs: caches synced, and the leader-election state
/// known.
fn readiness_inputs<S: std::future::Future<Output = ()>>(
    store: kube::runtime::reflector::Store<crate::api::TemporalWorkerDeployment>,
    readiness: &Readiness,
    mut leader_rx: watch::Receiver<bool>,
    leader_elect: bool,
    shutdown: S,
) -> (
    impl std::future::Future<Output = ()> + use<S>,
    impl std::future::Future<Output = ()> + use<S>,
) {
    let ready_flag = readiness.clone();
    let sync_fut = async move {
        if store.wait_until_ready().await.is_ok() {
            ready_flag.set_caches_synced(true);
        }
        if !leader_elect {
            ready_flag.set_leader_known(true);
        }
    };
    let leader_flag = readiness.clone();
    let leader_fut = async move {
        // The first value of the lease channel means the leader state is known.
        leader_flag.set_leader_known(true);
        tokio::select! {
            () = shutdown => {}
            () = async { while leader_rx.changed().await.is_ok() {} } => {}
        }
    };
    (sync_fut, leader_fut)
}

/// The admission webhook's address and the future serving it, or nothing when it is off.
async fn webhook(
    client: &kube::Client,
    opts: &RunOptions,
    leader: &watch::Receiver<bool>,
    stop: &watch::Receiver<bool>,
    readiness: &Readiness,
) -> Result<
    (
        Option<SocketAddr>,
        impl std::future::Future<Output = ()> + use<>,
    ),
    RunError,
> {
    let started = match &opts.webhook {
        Some(w) => Some(
            crate::webhook::start(
                client.clone(),
                w.clone(),
                opts.owned_kinds.clone(),
                leader.clone(),
                stop.clone(),
            )
            .await?,
        ),
        None => None,
    };
    let addr = started.as_ref().map(|w| w.addr);
    if started.is_some() {
        readiness.set_webhook_waiting(true);
    }
    let readiness = readiness.clone();
    Ok((addr, async move {
        if let Some(w) = started {
            // Not ready until a certificate is served, so the webhook Service only sends
            // admission calls to replicas that can answer them.
            let mut serving = w.serving;
            let ready = async move {
                if serving.wait_for(|s| *s).await.is_ok() {
                    readiness.set_webhook_waiting(false);
                }
            };
            tokio::join!(w.run, ready);
        }
    }))
}

/// The per-version backlog poller (`crate::backlog`), or nothing when turned off.
fn backlog_poller(
    opts: &RunOptions,
    ctx: &Context,
    metrics: &Metrics,
    leader: &watch::Receiver<bool>,
    stop: &watch::Receiver<bool>,
) -> impl std::future::Future<Output = ()> + use<> {
    let poll = opts.backlog_poll.filter(|d| !d.is_zero()).map(|interval| {
        crate::backlog::run(
            ctx.backlog.clone(),
            metrics.backlog.clone(),
            interval,
            leader.clone(),
            stop.clone(),
        )
    });
    async move {
        if let Some(poll) = poll {
            poll.await;
        }
    }
}

/// The HTTP listener and the address it got (port 0 picks a free one).
async fn bind(
    addr: std::net::SocketAddr,
) -> Result<(tokio::net::TcpListener, std::net::SocketAddr), RunError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| RunError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| RunError::Bind { addr, source })?;
    Ok((listener, local))
}

/// The reconciler's settings from the typed options.
fn settings(opts: &RunOptions) -> Settings {
    let install_id = opts.install_id();
    tracing::info!(identity = %opts.identity, %install_id, "Temporal identity and install ID");
    Settings {
        identity: opts.identity.clone(),
        install_id,
        controller_version: env!("CARGO_PKG_VERSION").to_string(),
        idle_interval: opts.idle_interval,
        fast_poll: opts.fast_poll,
        watch_namespaces: opts.watch_namespaces.clone(),
        owned_kinds: opts.owned_kinds.clone(),
        planner: ControllerSettings {
            max_versions_ineligible_for_deletion: opts.max_versions_ineligible_for_deletion,
            rollback_window: opts.rollback_window,
        },
        max_concurrent_reconciles: opts.max_concurrent_reconciles,
        budget_delay_report: opts.budget_delay_report,
    }
}

/// The status API's authentication, if any.
fn token_auth(client: &kube::Client, auth: &ApiAuth) -> Option<TokenAuth> {
    match auth {
        ApiAuth::None => None,
        ApiAuth::TokenReview {
            audiences,
            protect_metrics,
        } => Some(
            TokenAuth::with_reviewer(Arc::new(KubeTokenReviewer::new(
                client.clone(),
                audiences.clone(),
            )))
            .protect_metrics(*protect_metrics),
        ),
    }
}

/// Without leader election the channel is constantly `true`. The handle releases the lease
/// (and turns the channel `false`) when asked, not before: only once the controller stopped.
async fn leader_channel(
    client: &kube::Client,
    opts: &RunOptions,
    metrics: Arc<Metrics>,
) -> Result<(watch::Receiver<bool>, LeaseHandle), RunError> {
    let (release_tx, release_rx) = oneshot::channel::<()>();
    if !opts.leader_elect {
        metrics.set_leader(true);
        let (tx, rx) = watch::channel(true);
        // Keep the sender alive until the release.
        let task = tokio::spawn(async move {
            let _ = release_rx.await;
            drop(tx);
        });
        return Ok((
            rx,
            LeaseHandle {
                release: release_tx,
                task,
            },
        ));
    }
    let lease = LeaseConfig {
        client: client.clone(),
        name: opts.lease_name.clone(),
        namespace: opts
            .lease_namespace
            .clone()
            // kube-lease-manager's default.
            .unwrap_or_else(|| "default".to_string()),
        identity: lease_identity(opts),
    };
    let (mut lease_rx, mut watcher) = lease.watch().await?;
    let (tx, rx) = watch::channel(*lease_rx.borrow());
    metrics.set_leader(*lease_rx.borrow());
    let task = tokio::spawn(async move {
        let mut release = std::pin::pin!(release_rx);
        let mut follow = tokio::time::interval(FOLLOWER_RECHECK);
        follow.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // When our Lease ends, as last confirmed by reading it back (see `acting`).
        let mut confirmed_until = lease_rx.borrow().then(lease_end_from_now);
        loop {
            tokio::select! {
                _ = &mut release => break,
                changed = lease_rx.changed() => {
                    if changed.is_err() { break; }
                    let leader = *lease_rx.borrow();
                    tracing::info!(leader, "leader election state changed");
                    // The manager has just acquired or renewed the Lease when it says leader.
                    confirmed_until = leader.then(lease_end_from_now);
                    metrics.set_leader(leader);
                    if tx.send(leader).is_err() { break; }
                }
                // A leader confirms how much of its Lease is left; a follower looks for a
                // released Lease (see the two functions).
                _ = follow.tick() => {
                    let keep_going = if *lease_rx.borrow() {
                        confirm_leadership(&lease, &mut confirmed_until, &tx, &metrics).await
                    } else {
                        take_over_if_free(&lease, &mut lease_rx, &mut watcher, &tx, &metrics).await
                    };
                    if !keep_going { break; }
                }
            }
        }
        // Released, or the lease task is gone (we can no longer prove leadership): stop acting.
        let _ = tx.send(false);
        metrics.set_leader(false);
        // Closing the lease channel makes the lease manager clear holderIdentity and return.
        drop(lease_rx);
        match watcher.await {
            Ok(Ok(_)) => tracing::info!("leader lease released"),
            Ok(Err(e)) => tracing::warn!(error = %e, "releasing the leader lease failed"),
            Err(e) if e.is_cancelled() => {}
            Err(e) => tracing::warn!(error = %e, "leader lease task failed"),
        }
    });
    Ok((
        rx,
        LeaseHandle {
            release: release_tx,
            task,
        },
    ))
}

/// How often a follower re-reads the Lease to notice that it was released.
const FOLLOWER_RECHECK: Duration = Duration::from_secs(1);
/// The Lease's validity after each renewal, and how long before its end the leader renews it
/// (every 3 s, so a read-back normally finds 12–15 s left, well above `min_lease_left`). While renewals succeed, the holder's Lease always has at least the grace left,
/// so a Temporal write it starts (bounded by `temporal::client::WRITE_TIMEOUT`, shorter than the
/// grace) ends before that Lease could expire and another replica take over, even if the
/// renewals after the write started all fail. A crashed leader is still replaced after 15 s.
const LEASE_DURATION_SECS: u64 = 15;
const LEASE_GRACE_SECS: u64 = 12;
/// Clock skew between this node and the next leader's that the write bound tolerates.
const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(1);

/// kube-lease-manager keeps saying "leader" while its renewals fail, until it sees another
/// holder. So a leader reads its Lease back and stops acting once too little of it is confirmed
/// left for a write to finish inside it (and acts again once a renewal shows). False when the
/// receiver is gone.
async fn confirm_leadership(
    lease: &LeaseConfig,
    confirmed_until: &mut Option<jiff::Timestamp>,
    tx: &watch::Sender<bool>,
    metrics: &Metrics,
) -> bool {
    match lease.held_until().await {
        Ok(held) => *confirmed_until = held,
        Err(e) => tracing::debug!(error = %e, "reading our Lease back failed"),
    }
    let act = acting(*confirmed_until, jiff::Timestamp::now());
    if *tx.borrow() == act {
        return true;
    }
    tracing::warn!(acting = act, until = ?confirmed_until, "leadership confirmation changed");
    metrics.set_leader(act);
    tx.send(act).is_ok()
}

/// The lease manager of a follower sleeps until the holder's lease would expire and only then
/// reads the Lease again, so it misses a release (a clean shutdown) by up to the lease
/// duration. Re-read it and start over with a fresh manager, which takes the free Lease at
/// once. False when election cannot go on.
async fn take_over_if_free(
    lease: &LeaseConfig,
    lease_rx: &mut watch::Receiver<bool>,
    watcher: &mut LeaseWatcher,
    tx: &watch::Sender<bool>,
    metrics: &Metrics,
) -> bool {
    if !lease.is_free().await {
        return true;
    }
    tracing::info!("leader lease is free; taking it over");
    // A follower holds nothing: stopping its manager writes nothing.
    watcher.abort();
    match lease.watch().await {
        Ok((new_rx, new_watcher)) => {
            *lease_rx = new_rx;
            *watcher = new_watcher;
            let leader = *lease_rx.borrow();
            metrics.set_leader(leader);
            tx.send(leader).is_ok()
        }
        Err(e) => {
            tracing::warn!(error = %e, "restarting leader election failed");
            false
        }
    }
}

/// A leader starts no new write unless this much of its Lease is confirmed left: a Temporal
/// write (`temporal::client::WRITE_TIMEOUT`) plus clock skew then ends inside the Lease even if
/// every renewal from now on fails.
fn min_lease_left() -> Duration {
    crate::temporal::client::WRITE_TIMEOUT + CLOCK_SKEW_ALLOWANCE
}

/// Whether a leader whose Lease is confirmed until `until` may still act at `now`.
fn acting(until: Option<jiff::Timestamp>, now: jiff::Timestamp) -> bool {
    until.is_some_and(|u| {
        u.duration_since(now)
            .try_into()
            .is_ok_and(|left: Duration| left >= min_lease_left())
    })
}

/// The end of a Lease renewed just now.
fn lease_end_from_now() -> jiff::Timestamp {
    jiff::Timestamp::now() + jiff::SignedDuration::from_secs(LEASE_DURATION_SECS as i64)
}

type LeaseWatcher =
    tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>;

/// Where the Lease is and whom this process holds it as.
struct LeaseConfig {
    client: kube::Client,
    name: String,
    namespace: String,
    identity: String,
}

impl LeaseConfig {
    /// A fresh lease manager, watching: the channel says whether this process leads.
    async fn watch(&self) -> Result<(watch::Receiver<bool>, LeaseWatcher), RunError> {
        let manager = kube_lease_manager::LeaseManagerBuilder::new(self.client.clone(), &self.name)
            .with_namespace(&self.namespace)
            .with_identity(&self.identity)
            .with_duration(LEASE_DURATION_SECS)
            .with_grace(LEASE_GRACE_SECS)
            .build()
            .await
            .map_err(|e| RunError::Lease(e.to_string()))?;
        Ok(manager.watch().await)
    }

    /// When our hold of the Lease ends as stored (`renewTime + leaseDurationSeconds`); `None`
    /// when someone else holds it.
    async fn held_until(&self) -> kube::Result<Option<jiff::Timestamp>> {
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(self.client.clone(), &self.namespace);
        let spec = leases.get(&self.name).await?.spec.unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(None);
        }
        Ok(spec
            .renew_time
            .zip(spec.lease_duration_seconds)
            .map(|(renewed, secs)| renewed.0 + jiff::SignedDuration::from_secs(i64::from(secs))))
    }

    /// True when nobody holds the Lease (released) or its holder's term has run out.
    async fn is_free(&self) -> bool {
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(self.client.clone(), &self.namespace);
        let Ok(Some(lease)) = leases.get_opt(&self.name).await else {
            return false;
        };
        let spec = lease.spec.unwrap_or_default();
        if spec.holder_identity.as_deref().is_none_or(str::is_empty) {
            return true;
        }
        match (spec.renew_time, spec.lease_duration_seconds) {
            (Some(renewed), Some(secs)) => {
                let until = renewed.0 + jiff::SignedDuration::from_secs(i64::from(secs));
                until < jiff::Timestamp::now()
            }
            _ => true,
        }
    }
}

/// The identity this process holds the Lease under: the pod name, else
/// `<identity>-<host>-<pid>-<random>`. Never the bare controller identity, which every replica
/// shares: two processes holding the Lease under one identity would both act as leader.
fn lease_identity(opts: &RunOptions) -> String {
    if let Some(pod) = opts.pod_name.as_ref().filter(|p| !p.is_empty()) {
        return pod.clone();
    }
    use std::hash::BuildHasher as _;
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    // RandomState is seeded randomly per instance: a nonce without another dependency.
    let nonce = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    format!(
        "{}-{host}-{}-{:08x}",
        opts.identity,
        std::process::id(),
        nonce as u32
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_has_its_own_lease_identity_even_without_a_pod_name() {
        let named = RunOptions {
            pod_name: Some("twc-7d9f-abcde".into()),
            ..RunOptions::default()
        };
        assert_eq!(lease_identity(&named), "twc-7d9f-abcde");
        // Two replicas run outside a pod (or without POD_NAME) share the controller identity;
        // with it as lease identity both would believe they hold the lease.
        let a = lease_identity(&RunOptions::default());
        let b = lease_identity(&RunOptions::default());
        assert_ne!(a, b, "two processes would share the lease identity {a:?}");
        assert!(a.starts_with(defaults::IDENTITY), "{a}");
    }

    #[test]
    fn a_leader_acts_only_while_enough_of_its_lease_is_confirmed() {
        let now = jiff::Timestamp::now();
        let at = |secs: i64| Some(now + jiff::SignedDuration::from_secs(secs));
        assert!(acting(at(15), now), "just renewed");
        assert!(acting(at(10), now));
        assert!(!acting(at(8), now), "a write could outlast the Lease");
        assert!(!acting(at(-1), now), "expired");
        assert!(!acting(None, now), "someone else holds it");
        // Read back one tick before a renewal, a healthy leader still has enough left.
        assert!(Duration::from_secs(LEASE_GRACE_SECS) >= min_lease_left() + FOLLOWER_RECHECK);
    }

    #[test]
    fn a_temporal_write_ends_before_the_lease_it_started_under_can_expire() {
        use crate::temporal::client::WRITE_TIMEOUT;
        let grace = Duration::from_secs(LEASE_GRACE_SECS);
        assert!(
            WRITE_TIMEOUT + CLOCK_SKEW_ALLOWANCE <= grace,
            "a write of up to {WRITE_TIMEOUT:?} can outlast the {grace:?} of Lease left at renewal"
        );
        const {
            assert!(
                LEASE_GRACE_SECS < LEASE_DURATION_SECS,
                "the lease manager needs a renewal before expiry"
            );
            // Renewing every second or faster would only load the API server.
            assert!(LEASE_DURATION_SECS - LEASE_GRACE_SECS >= 2);
        }
    }

    #[test]
    fn install_id_defaults_to_the_lease_and_is_overridable() {
        let in_pod = RunOptions {
            lease_namespace: Some("temporal-system".into()),
            lease_name: "twc-east".into(),
            pod_name: Some("twc-7d9f-abcde".into()),
            ..RunOptions::default()
        };
        assert_eq!(in_pod.install_id(), "temporal-system/twc-east");
        // Stable across a rollout (new pod name) and the process.
        let upgraded = RunOptions {
            pod_name: Some("twc-5c4b-fghij".into()),
            ..in_pod.clone()
        };
        assert_eq!(upgraded.install_id(), in_pod.install_id());
        assert_eq!(settings(&in_pod).install_id, "temporal-system/twc-east");
        // Distinct between installs: another namespace or another Lease.
        let other_ns = RunOptions {
            lease_namespace: Some("team-a".into()),
            ..in_pod.clone()
        };
        let other_lease = RunOptions {
            lease_name: "twc-west".into(),
            ..in_pod.clone()
        };
        assert_ne!(other_ns.install_id(), in_pod.install_id());
        assert_ne!(other_lease.install_id(), in_pod.install_id());
        // No namespace known: the controller identity.
        for ns in [None, Some(String::new())] {
            let outside = RunOptions {
                lease_namespace: ns,
                identity: "prod-east".into(),
                ..RunOptions::default()
            };
            assert_eq!(outside.install_id(), "prod-east");
        }
        // An explicit ID wins; an empty one means "derive".
        let explicit = RunOptions {
            install_id: Some(" cluster-1/twc ".into()),
            ..in_pod.clone()
        };
        assert_eq!(explicit.install_id(), "cluster-1/twc");
        let empty = RunOptions {
            install_id: Some(String::new()),
            ..in_pod.clone()
        };
        assert_eq!(empty.install_id(), in_pod.install_id());
    }
}
