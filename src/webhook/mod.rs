//! The validating admission webhook, served by the controller binary on its own HTTPS port
//! when `--webhook-port` is given (the chart's `webhook.enabled`). It is optional: the
//! controller checks the same rules itself and reports them in status, so with it off a bad
//! object is admitted but never acted on. What only admission can do: refuse a bad object
//! before it is stored, and check who asks (a TWOR's SubjectAccessReview).
//!
//! - [`server`]: axum over rustls, the certificate swapped in place on renewal;
//! - [`certs`]: the CA and serving certificate, and when to renew them (pure);
//! - [`rotate`]: the Secret and the ValidatingWebhookConfiguration's caBundle (the Lease
//!   holder writes, every replica reloads), or certificate files (cert-manager);
//! - [`review`]: AdmissionReview in and out;
//! - [`twor`], [`twd`]: the policies; [`access`]: the SubjectAccessReviews.
//!
//! docs/webhook.md describes the whole for users.

pub mod access;
pub mod certs;
pub mod review;
pub mod rotate;
pub mod server;
pub mod twd;
pub mod twor;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State as AxumState;
use axum::routing::post;
use axum::{Json, Router};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionResponse, AdmissionReview};
use tokio::sync::watch;

use crate::api::{TemporalWorkerDeployment, TemporalWorkerOwnedResource};
use crate::metrics::{Metrics, WebhookVerdict};
use review::Verdict;

/// Path of the TemporalWorkerOwnedResource webhook (the chart's ValidatingWebhookConfiguration
/// points here).
pub const PATH_TWOR: &str = "/validate/temporalworkerownedresources";
/// Path of the TemporalWorkerDeployment webhook.
pub const PATH_TWD: &str = "/validate/temporalworkerdeployments";

/// How often every replica re-reads its certificate by default: a renewal reaches followers
/// within this (the old certificate stays valid and trusted for `renew_before`).
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(30);

/// Where the serving certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertMode {
    /// The controller makes and renews it (the default): a CA and a serving certificate in
    /// the Secret `secret_name`, and the caBundle of `configuration_name` kept current.
    SelfManaged {
        secret_name: String,
        configuration_name: String,
        validity: certs::Validity,
    },
    /// `tls.crt` and `tls.key` in `dir` (a mounted cert-manager Secret), re-read when they
    /// change; caBundle is someone else's job (cert-manager's CA injector).
    Files { dir: PathBuf },
}

/// The webhook's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookOptions {
    /// Listen address; port 0 picks a free one (tests).
    pub addr: SocketAddr,
    pub certs: CertMode,
    /// Namespace of the Secret and of the Service (the controller's own).
    pub namespace: String,
    /// The Service in front of the replicas; its DNS names go into the certificate.
    pub service_name: Option<String>,
    /// Hosts the certificate must also name, e.g. `127.0.0.1` when the API server calls a
    /// local process by URL (tests, development).
    pub extra_hosts: Vec<String>,
    /// How often every replica re-reads the certificate (and the leader checks it).
    pub check_interval: Duration,
}

impl WebhookOptions {
    /// The names the serving certificate is made for, in a stable order.
    pub fn hosts(&self) -> Vec<String> {
        let mut hosts = Vec::new();
        if let Some(svc) = &self.service_name {
            let ns = &self.namespace;
            hosts.push(format!("{svc}.{ns}.svc"));
            hosts.push(format!("{svc}.{ns}.svc.cluster.local"));
        }
        for h in &self.extra_hosts {
            if !hosts.contains(h) {
                hosts.push(h.clone());
            }
        }
        hosts
    }
}

/// What the handlers share.
pub struct State {
    pub client: kube::Client,
    /// Kinds a TWOR may carry (the controller's own check uses the same list).
    pub allowed_kinds: Vec<String>,
    pub identity: access::ControllerIdentity,
    /// Counts and times every answer (`webhook_requests_total`).
    pub metrics: Arc<Metrics>,
}

/// The webhook's routes.
pub fn router(state: Arc<State>) -> Router {
    Router::new()
        .route(PATH_TWOR, post(validate_twor))
        .route(PATH_TWD, post(validate_twd))
        .with_state(state)
}

async fn validate_twor(
    AxumState(state): AxumState<Arc<State>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    tracing::debug!("TWOR admission request");
    let started = Instant::now();
    let kind = "TemporalWorkerOwnedResource";
    let decoded = match review::decode::<TemporalWorkerOwnedResource>(review, kind) {
        Ok(d) => d,
        Err(e) => return undecodable(&state, kind, e, started),
    };
    let base = AdmissionResponse::from(&decoded.request);
    let namespace = decoded.request.namespace.clone().unwrap_or_default();
    let verdict = match (&decoded.object, &decoded.old) {
        (Some(new), old) => {
            twor::admit(
                &state,
                &decoded.request.user_info,
                &namespace,
                new,
                old.as_ref(),
            )
            .await
        }
        // DELETE: the controller then deletes every copy.
        (None, Some(deleted)) => {
            twor::admit_delete(&state, &decoded.request.user_info, &namespace, deleted).await
        }
        (None, None) => Verdict::Allow,
    };
    log(&decoded.request.name, &namespace, &verdict);
    answer(&state, &decoded.request.kind.kind, base, verdict, started)
}

async fn validate_twd(
    AxumState(state): AxumState<Arc<State>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let started = Instant::now();
    let kind = "TemporalWorkerDeployment";
    let decoded = match review::decode::<TemporalWorkerDeployment>(review, kind) {
        Ok(d) => d,
        Err(e) => return undecodable(&state, kind, e, started),
    };
    let base = AdmissionResponse::from(&decoded.request);
    let namespace = decoded.request.namespace.clone().unwrap_or_default();
    let verdict = match &decoded.object {
        Some(new) => twd::admit(&state, &namespace, new, decoded.old.as_ref()).await,
        None => Verdict::Allow,
    };
    log(&decoded.request.name, &namespace, &verdict);
    answer(&state, &decoded.request.kind.kind, base, verdict, started)
}

/// The response for `verdict`, counted and timed under the request's `kind`.
fn answer(
    state: &State,
    kind: &str,
    base: AdmissionResponse,
    verdict: Verdict,
    started: Instant,
) -> Json<AdmissionReview<DynamicObject>> {
    let counted = match &verdict {
        Verdict::Allow | Verdict::AllowWithWarnings(_) => WebhookVerdict::Allowed,
        Verdict::Invalid(_) => WebhookVerdict::Denied(422),
        Verdict::Forbidden(_) => WebhookVerdict::Denied(403),
        Verdict::Error(_) => WebhookVerdict::Error(500),
    };
    state
        .metrics
        .webhook_request(kind, counted, started.elapsed());
    Json(review::respond(base, verdict).into_review())
}

/// A review that could not be read: refused (400), and counted as the webhook's error.
fn undecodable(
    state: &State,
    kind: &str,
    e: review::DecodeError,
    started: Instant,
) -> Json<AdmissionReview<DynamicObject>> {
    state
        .metrics
        .webhook_request(kind, WebhookVerdict::Error(400), started.elapsed());
    let mut response = AdmissionResponse::invalid(e);
    // The code the metric says; kube leaves it unset.
    response.result.code = 400;
    Json(response.into_review())
}

fn log(name: &str, namespace: &str, verdict: &Verdict) {
    match verdict {
        Verdict::Allow | Verdict::AllowWithWarnings(_) => {
            tracing::debug!(%namespace, %name, "admitted");
        }
        refused => tracing::info!(%namespace, %name, ?refused, "admission refused"),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error(transparent)]
    Server(#[from] server::ServerError),
}

/// A bound webhook: its address, and the future that serves it and keeps its certificate
/// current until `stop` turns true.
pub struct Started {
    pub addr: SocketAddr,
    /// True once a certificate is served (for readiness).
    pub serving: watch::Receiver<bool>,
    pub run: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

/// Binds the webhook port and prepares the server and the certificate upkeep; nothing is
/// served before the returned future runs. Only the Lease holder (`leader`) writes the Secret
/// and the caBundle; every replica serves the current certificate.
pub async fn start(
    client: kube::Client,
    opts: WebhookOptions,
    allowed_kinds: Vec<String>,
    (leader, stop): (watch::Receiver<bool>, watch::Receiver<bool>),
    metrics: Arc<Metrics>,
) -> Result<Started, WebhookError> {
    let (listener, addr) = server::bind(opts.addr).await?;
    let cert = Arc::new(server::CurrentCert::observed(metrics.clone()));
    let tls = server::tls_config(cert.clone())?;
    // An empty list means the default, as for the controller's own check.
    let allowed_kinds = if allowed_kinds.is_empty() {
        crate::owned::validate::DEFAULT_ALLOWED_KINDS
            .iter()
            .map(|k| (*k).to_string())
            .collect()
    } else {
        allowed_kinds
    };
    let state = Arc::new(State {
        client: client.clone(),
        allowed_kinds,
        identity: access::ControllerIdentity::default(),
        metrics,
    });
    let app = router(state);
    let mut stop_serve = stop.clone();
    let shutdown = async move {
        let _ = stop_serve.wait_for(|s| *s).await;
    };
    let serve = server::serve(listener, tls, app, shutdown);
    let serving = cert.loaded();
    let upkeep = rotate::run(client, opts, cert, leader, stop);
    let run = Box::pin(async move {
        tokio::join!(serve, upkeep);
    });
    tracing::info!(%addr, "admission webhook listening");
    Ok(Started { addr, serving, run })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_names_the_service_and_any_extra_host_once() {
        let opts = WebhookOptions {
            addr: "127.0.0.1:0".parse().expect("addr"),
            certs: CertMode::Files { dir: "/tmp".into() },
            namespace: "twc".into(),
            service_name: Some("twc-webhook".into()),
            extra_hosts: vec!["127.0.0.1".into(), "twc-webhook.twc.svc".into()],
            check_interval: Duration::from_secs(10),
        };
        assert_eq!(
            opts.hosts(),
            vec![
                "twc-webhook.twc.svc".to_string(),
                "twc-webhook.twc.svc.cluster.local".to_string(),
                "127.0.0.1".to_string()
            ]
        );
    }
}
