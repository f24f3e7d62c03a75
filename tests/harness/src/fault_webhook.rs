//! A validating admission webhook that refuses a share of some users' writes with 500 or 409
//! (the chaos suite's fault (b)): the real API server calls it over TLS by URL and answers the
//! writer with the code the webhook chose, exactly as a failing webhook or an overloaded
//! server would. Writes of other users, and all writes while the share is 0, are allowed.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};
use base64::Engine as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::certs::{Authority, Usage};

/// The running webhook; its configuration stays registered (with `failurePolicy: Ignore`, so
/// a stopped webhook refuses nothing).
pub struct FaultWebhook {
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

struct Shared {
    users: Vec<String>,
    /// Share of the users' writes refused, in per mille.
    per_mille: AtomicU64,
    seen: AtomicU64,
    refused: Mutex<BTreeMap<u16, u64>>,
}

impl FaultWebhook {
    /// Serves on a free loopback port and registers ValidatingWebhookConfiguration `name` for
    /// writes to Deployments and to every `temporal.io` resource (and status) by `users`.
    pub async fn start(
        client: &kube::Client,
        name: &str,
        users: Vec<String>,
    ) -> Result<FaultWebhook> {
        let ca = Authority::new("twc-fault-webhook-ca")?;
        let serving = ca.issue("127.0.0.1", None, &["127.0.0.1"], Usage::Server)?;
        let certs = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("parsing the serving certificate: {e}"))?;
        let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes())
            .map_err(|e| anyhow::anyhow!("parsing the serving key: {e}"))?;
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()?
                .with_no_client_auth()
                .with_single_cert(certs, key)?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            users,
            per_mille: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            refused: Mutex::new(BTreeMap::new()),
        });
        let accept = tokio::spawn(accept_loop(listener, acceptor, shared.clone()));
        register(client, name, addr, &ca.ca_pem).await?;
        Ok(FaultWebhook { shared, accept })
    }

    /// Refuse this share (0–1) of the users' writes from now on.
    pub fn set_share(&self, share: f64) {
        let per_mille = (share.clamp(0.0, 1.0) * 1000.0).round() as u64;
        self.shared.per_mille.store(per_mille, Ordering::SeqCst);
    }

    /// Writes refused so far, by HTTP code.
    pub fn refused(&self) -> BTreeMap<u16, u64> {
        self.shared
            .refused
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

impl Drop for FaultWebhook {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn register(client: &kube::Client, name: &str, addr: SocketAddr, ca_pem: &str) -> Result<()> {
    let gvk = GroupVersionKind::gvk(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
    );
    let ar = kube::api::ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let rule = |groups: &[&str], resources: &[&str]| {
        json!({"apiGroups": groups, "apiVersions": ["*"], "resources": resources,
               "operations": ["CREATE", "UPDATE", "DELETE"]})
    };
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "faults.chaos.twc.test",
            "clientConfig": {
                "url": format!("https://{addr}/"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
            },
            "rules": [rule(&["apps"], &["deployments"]), rule(&["temporal.io"], &["*", "*/status"])],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }],
    });
    api.patch(
        name,
        &PatchParams::apply("twc-chaos").force(),
        &Patch::Apply(&config),
    )
    .await
    .context("registering the fault webhook")?;
    Ok(())
}

async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    while let Ok((tcp, _)) = listener.accept().await {
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            if let Ok(tls) = acceptor.accept(tcp).await {
                let _ = serve(tls, &shared).await;
            }
        });
    }
}

/// HTTP/1.1 with keep-alive: one AdmissionReview per request, until the peer closes.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut s: S,
    shared: &Shared,
) -> Result<()> {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 8192];
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let review: Value =
            serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null);
        buf.drain(..head_end + length);
        let body = decide(shared, &review).to_string();
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(response.as_bytes()).await?;
        s.flush().await?;
    }
}

/// Allows, or refuses with 500 or 409 (alternately) a deterministic share of the users' writes.
fn decide(shared: &Shared, review: &Value) -> Value {
    let request = &review["request"];
    let uid = request["uid"].clone();
    let user = request["userInfo"]["username"].as_str().unwrap_or("");
    let per_mille = shared.per_mille.load(Ordering::SeqCst);
    let mut response = json!({"uid": uid, "allowed": true});
    if per_mille > 0 && shared.users.iter().any(|u| u == user) {
        let n = shared.seen.fetch_add(1, Ordering::SeqCst);
        // A scrambled counter: spreads the refusals over the requests.
        if n.wrapping_mul(7919) % 1000 < per_mille {
            let (code, reason) = if n.is_multiple_of(2) {
                (500, "InternalError")
            } else {
                (409, "Conflict")
            };
            response = json!({"uid": uid, "allowed": false, "status": {
                "code": code, "reason": reason, "message": format!("chaos: injected {code}")}});
            if let Ok(mut r) = shared.refused.lock() {
                *r.entry(code).or_default() += 1;
            }
        }
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}
