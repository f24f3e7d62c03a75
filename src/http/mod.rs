//! The controller's HTTP server: `/metrics`, `/healthz`, `/readyz` and the read-only status
//! API under `/api/v1` (see `docs/status-api.md` and `docs/openapi.yaml`).
//!
//! Everything is served from the reflector store the controller already keeps, so the API
//! costs the API server nothing and answers in microseconds.

pub mod auth;
mod rollouts;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::{broadcast, watch};

pub use crate::summary::{Phase, RolloutList, RolloutSummary, RolloutView};
pub use auth::{
    AuthError, KubeTokenReviewer, ReviewError, ReviewFuture, ReviewOutcome, TokenAuth,
    TokenReviewer,
};

use crate::api::TemporalWorkerDeployment;
use crate::metrics::{self, Metrics};
use crate::milestones::Milestones;

/// Readiness inputs, flipped by the process wiring. Clones share the flags.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    caches_synced: Arc<AtomicBool>,
    leader_known: Arc<AtomicBool>,
    /// True while the admission webhook runs without a certificate to serve: a replica that
    /// cannot answer admission must not get the webhook Service's traffic.
    webhook_waiting: Arc<AtomicBool>,
}

impl Readiness {
    pub fn set_caches_synced(&self, synced: bool) {
        self.caches_synced.store(synced, Ordering::SeqCst);
    }

    /// Set once the leader-election state is known (or at once when election is off).
    pub fn set_leader_known(&self, known: bool) {
        self.leader_known.store(known, Ordering::SeqCst);
    }

    pub fn caches_synced(&self) -> bool {
        self.caches_synced.load(Ordering::SeqCst)
    }

    pub fn leader_known(&self) -> bool {
        self.leader_known.load(Ordering::SeqCst)
    }

    /// Set while the admission webhook has no certificate yet (never set without a webhook).
    pub fn set_webhook_waiting(&self, waiting: bool) {
        self.webhook_waiting.store(waiting, Ordering::SeqCst);
    }

    pub fn webhook_waiting(&self) -> bool {
        self.webhook_waiting.load(Ordering::SeqCst)
    }

    pub fn is_ready(&self) -> bool {
        self.caches_synced() && self.leader_known() && !self.webhook_waiting()
    }
}

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    pub store: crate::workers::Workers,
    pub metrics: Arc<Metrics>,
    pub milestones: Arc<Milestones>,
    /// Every status the controller writes is published here (drives `/watch`).
    pub feed: broadcast::Sender<Arc<TemporalWorkerDeployment>>,
    pub readiness: Readiness,
    /// `None`: the API is open (rely on NetworkPolicy / port-forward).
    pub auth: Option<TokenAuth>,
}

/// Error body: `{"error": {"code": 404, "message": "..."}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: StatusCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body =
            serde_json::json!({ "error": { "code": self.code.as_u16(), "message": self.message } });
        let mut resp = (self.code, axum::Json(body)).into_response();
        if self.code == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

/// Sent to open watch streams when the server shuts down, so graceful shutdown does not wait
/// forever on never-ending SSE responses.
#[derive(Clone)]
pub(crate) struct StreamShutdown(pub(crate) watch::Receiver<bool>);

/// All routes. Watch streams served by this router alone end only when the client leaves;
/// [`serve`] / [`serve_listener`] also end them on shutdown.
pub fn router(state: AppState) -> Router {
    let mut api = Router::new()
        .route("/api/v1/rollouts", get(rollouts::list_all))
        .route(
            "/api/v1/namespaces/{namespace}/rollouts",
            get(rollouts::list_namespace),
        )
        .route(
            "/api/v1/namespaces/{namespace}/rollouts/{name}",
            get(rollouts::get_one),
        )
        .route(
            "/api/v1/namespaces/{namespace}/rollouts/{name}/watch",
            get(rollouts::watch),
        );
    let mut metrics_routes = Router::new().route("/metrics", get(serve_metrics));
    if let Some(auth) = &state.auth {
        api = api.route_layer(middleware::from_fn_with_state(state.clone(), require_token));
        if auth.protects_metrics() {
            metrics_routes = metrics_routes
                .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
        }
    }
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(api)
        .merge(metrics_routes)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "read-only API: only GET is supported",
            )
        })
        .with_state(state)
}

/// Binds `addr` and serves until `shutdown` completes.
pub async fn serve(
    addr: SocketAddr,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve_listener(listener, state, shutdown).await
}

/// Serves on an already bound listener (lets callers learn the port before serving).
pub async fn serve_listener(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let app = router(state).layer(axum::Extension(StreamShutdown(stop_rx)));
    let signal = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(signal)
        .await
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Response {
    let r = &state.readiness;
    if r.is_ready() {
        return (StatusCode::OK, "ok").into_response();
    }
    let mut why = Vec::new();
    if !r.caches_synced() {
        why.push("caches not synced");
    }
    if !r.leader_known() {
        why.push("leader election state unknown");
    }
    if r.webhook_waiting() {
        why.push("admission webhook has no certificate yet");
    }
    (StatusCode::SERVICE_UNAVAILABLE, why.join(", ")).into_response()
}

/// OpenMetrics when the scraper asks for it (Prometheus does), else text format 0.0.4.
async fn serve_metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let wants_openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    if wants_openmetrics {
        (
            [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
            state.metrics.encode(&state.store),
        )
            .into_response()
    } else {
        let body = state.metrics.encode_prometheus_text(&state.store);
        (
            [(header::CONTENT_TYPE, metrics::CONTENT_TYPE_PROMETHEUS)],
            body,
        )
            .into_response()
    }
}

async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(auth) = &state.auth else {
        return next.run(req).await;
    };
    let header_value = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match auth.authenticate(header_value).await {
        Ok(_) => next.run(req).await,
        Err(e @ (AuthError::Missing | AuthError::Invalid)) => {
            ApiError::new(StatusCode::UNAUTHORIZED, e.to_string()).into_response()
        }
        Err(e @ AuthError::Unavailable(_)) => {
            tracing::warn!(error = %e, "token review failed");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "cannot verify token right now",
            )
            .into_response()
        }
    }
}
