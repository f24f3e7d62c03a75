//! What runs beside the controller: the readiness inputs, the admission webhook, the backlog
//! poller, and the HTTP listener with its authentication.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

use crate::http::{KubeTokenReviewer, Readiness, TokenAuth};
use crate::metrics::Metrics;
use crate::worker_deployment::Context;

use super::RunError;
use super::options::{ApiAuth, RunOptions};

/// The futures that flip the readiness inputs: caches synced, and the leader-election state
/// known.
pub(super) fn readiness_inputs<S: std::future::Future<Output = ()>>(
    store: crate::workers::Workers,
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
pub(super) async fn webhook(
    client: &kube::Client,
    opts: &RunOptions,
    leader: &watch::Receiver<bool>,
    stop: &watch::Receiver<bool>,
    (readiness, metrics): (&Readiness, &Arc<Metrics>),
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
                (leader.clone(), stop.clone()),
                metrics.clone(),
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
pub(super) fn backlog_poller(
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
pub(super) async fn bind(
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

/// Serves the HTTP endpoints on `listener` and on every one of `extra` (the Go manager's
/// metrics and probe addresses): one future that ends when they all have, with the first
/// failure.
pub(super) async fn serve_http<S>(
    listener: tokio::net::TcpListener,
    extra: &[SocketAddr],
    state: crate::http::AppState,
    shutdown: S,
) -> Result<impl std::future::Future<Output = std::io::Result<()>> + use<S>, RunError>
where
    S: std::future::Future<Output = ()> + Clone + Send + 'static,
{
    let mut more = Vec::new();
    for addr in extra {
        let (listener, _) = bind(*addr).await?;
        more.push(crate::http::serve_listener(
            listener,
            state.clone(),
            shutdown.clone(),
        ));
    }
    let main = crate::http::serve_listener(listener, state, shutdown);
    Ok(async move {
        let (main, rest) = futures::future::join(main, futures::future::join_all(more)).await;
        rest.into_iter().find(Result::is_err).unwrap_or(main)
    })
}

/// The status API's authentication, if any.
pub(super) fn token_auth(client: &kube::Client, auth: &ApiAuth) -> Option<TokenAuth> {
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
