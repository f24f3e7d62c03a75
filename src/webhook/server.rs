//! The webhook's HTTPS listener: axum served by hyper over tokio-rustls, with the serving
//! certificate chosen per handshake by [`CurrentCert`]. Swapping the certificate there takes
//! effect on the next connection, so a renewed certificate is served without a restart.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("binding the webhook address {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("the serving certificate is not valid PEM: {0}")]
    Pem(String),
}

/// The certificate every new TLS connection is served with; `None` until one is loaded (a
/// handshake then fails, which the API server reports as a webhook call error).
#[derive(Debug)]
pub struct CurrentCert {
    current: RwLock<Option<Loaded>>,
    /// Turns true with the first certificate loaded (readiness waits for it).
    loaded: tokio::sync::watch::Sender<bool>,
    /// Told the expiry of each certificate loaded (`webhook_certificate_expiry_timestamp`).
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl Default for CurrentCert {
    fn default() -> Self {
        Self {
            current: RwLock::default(),
            loaded: tokio::sync::watch::Sender::new(false),
            metrics: None,
        }
    }
}

#[derive(Debug)]
struct Loaded {
    cert_pem: Vec<u8>,
    key: Arc<CertifiedKey>,
}

impl CurrentCert {
    /// No certificate yet; each one loaded is reported to `metrics`.
    pub fn observed(metrics: Arc<crate::metrics::Metrics>) -> Self {
        Self {
            metrics: Some(metrics),
            ..Self::default()
        }
    }

    /// Serves `cert_pem`/`key_pem` from the next handshake on. Returns `false` when they are
    /// the ones already served (nothing changed).
    pub fn load(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<bool, ServerError> {
        if self
            .current
            .read()
            .map(|c| c.as_ref().is_some_and(|l| l.cert_pem == cert_pem))
            .unwrap_or(false)
        {
            return Ok(false);
        }
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| ServerError::Pem(format!("tls.crt: {e}")))?;
        if certs.is_empty() {
            return Err(ServerError::Pem("tls.crt holds no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| ServerError::Pem(format!("tls.key: {e}")))?;
        let signer = any_supported_type(&key)?;
        let certified = CertifiedKey::new(certs, signer);
        certified.keys_match()?;
        let loaded = Loaded {
            cert_pem: cert_pem.to_vec(),
            key: Arc::new(certified),
        };
        // A poisoned lock only means a panic while swapping; the value is still whole.
        let mut guard = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *guard = Some(loaded);
        self.loaded.send_replace(true);
        if let Some(metrics) = &self.metrics {
            metrics.webhook_certificate(crate::webhook::certs::not_after(cert_pem));
        }
        Ok(true)
    }

    /// True once a certificate is served.
    pub fn loaded(&self) -> tokio::sync::watch::Receiver<bool> {
        self.loaded.subscribe()
    }

    /// The PEM of the certificate being served, if any.
    pub fn cert_pem(&self) -> Option<Vec<u8>> {
        self.current
            .read()
            .ok()
            .and_then(|c| c.as_ref().map(|l| l.cert_pem.clone()))
    }
}

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .ok()
            .and_then(|c| c.as_ref().map(|l| l.key.clone()))
    }
}

/// Binds `addr` (port 0 picks a free one) and returns the listener with its address.
pub async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), ServerError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { addr, source })?;
    Ok((listener, local))
}

/// The TLS settings: TLS 1.2+ with ring, HTTP/2 or HTTP/1.1, certificate from `cert`.
pub fn tls_config(cert: Arc<CurrentCert>) -> Result<rustls::ServerConfig, ServerError> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Accepts connections until `shutdown` resolves; each is served on its own task, and a
/// failed handshake only ends that connection.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: rustls::ServerConfig,
    app: axum::Router,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook accept failed");
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "webhook TLS handshake failed");
                    return;
                }
            };
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "webhook connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_certificate_is_swapped_in_place() {
        let hosts = vec!["127.0.0.1".to_string()];
        let now = jiff::Timestamp::now();
        let a =
            crate::webhook::certs::generate(&hosts, now, std::time::Duration::from_secs(60), None)
                .expect("a");
        let b =
            crate::webhook::certs::generate(&hosts, now, std::time::Duration::from_secs(60), None)
                .expect("b");
        let cert = CurrentCert::default();
        let loaded = cert.loaded();
        assert!(cert.cert_pem().is_none());
        assert!(!*loaded.borrow());
        assert!(
            cert.load(a.cert_pem.as_bytes(), a.key_pem.as_bytes())
                .expect("load a")
        );
        assert!(*loaded.borrow());
        assert!(
            !cert
                .load(a.cert_pem.as_bytes(), a.key_pem.as_bytes())
                .expect("again")
        );
        assert!(
            cert.load(b.cert_pem.as_bytes(), b.key_pem.as_bytes())
                .expect("load b")
        );
        assert_eq!(cert.cert_pem(), Some(b.cert_pem.clone().into_bytes()));
        // A key that does not belong to the certificate is refused, and the old pair stays.
        assert!(
            cert.load(a.cert_pem.as_bytes(), b.key_pem.as_bytes())
                .is_err()
        );
        assert_eq!(cert.cert_pem(), Some(b.cert_pem.into_bytes()));
        assert!(cert.load(b"not pem", b"").is_err());
    }
}

#[cfg(test)]
mod observed_tests {
    use super::*;

    /// Every certificate served is reported with its own `notAfter`, renewals included.
    #[test]
    fn each_loaded_certificate_reports_its_expiry() {
        let hosts = vec!["127.0.0.1".to_string()];
        let now = jiff::Timestamp::now();
        let issue = |secs| {
            crate::webhook::certs::generate(&hosts, now, std::time::Duration::from_secs(secs), None)
                .expect("certificate")
        };
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let scrape = || metrics.encode(&crate::workers::Workers::of(vec![]));
        let family = "temporal_worker_controller_webhook_certificate_expiry_timestamp_seconds";
        let cert = CurrentCert::observed(metrics.clone());
        assert!(!scrape().contains(family), "nothing served yet");
        for secs in [600, 7200] {
            let pair = issue(secs);
            cert.load(pair.cert_pem.as_bytes(), pair.key_pem.as_bytes())
                .expect("load");
            let end = crate::webhook::certs::not_after(pair.cert_pem.as_bytes()).expect("end");
            assert!(
                scrape().contains(&format!("{family} {}", end.as_second())),
                "{}",
                scrape()
            );
        }
    }
}

#[cfg(test)]
mod serve_tests {
    use super::*;

    /// Over HTTP/2 and HTTP/1.1 (the API server may use either), a client that trusts only the
    /// bundle gets an answer; after a swap, new connections see the new certificate.
    #[tokio::test]
    async fn serves_both_http_versions_with_the_current_certificate() {
        let hosts = vec!["127.0.0.1".to_string()];
        let now = jiff::Timestamp::now();
        let ttl = std::time::Duration::from_secs(600);
        let a = crate::webhook::certs::generate(&hosts, now, ttl, None).expect("a");
        let b = crate::webhook::certs::generate(&hosts, now, ttl, None).expect("b");
        let cert = Arc::new(CurrentCert::default());
        cert.load(a.cert_pem.as_bytes(), a.key_pem.as_bytes())
            .expect("load");
        let (listener, addr) = bind("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("bind");
        let app = axum::Router::new().route(
            "/x",
            axum::routing::post(|body: String| async move { format!("got {}", body.len()) }),
        );
        let tls = tls_config(cert.clone()).expect("tls");
        tokio::spawn(serve(listener, tls, app, std::future::pending()));
        let dir = std::env::temp_dir().join(format!("twc-webhook-serve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let call = |ca: &str, version: &'static str| {
            let path = dir.join(format!("{version}.pem"));
            std::fs::write(&path, ca).expect("write ca");
            let url = format!("https://{addr}/x");
            async move {
                let out = tokio::process::Command::new("curl")
                    .args(["-sS", "-m", "5", version, "--cacert"])
                    .arg(&path)
                    .args(["-d", "hello", &url])
                    .output()
                    .await
                    .expect("curl");
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )
            }
        };
        for version in ["--http2", "--http1.1"] {
            assert_eq!(call(&a.ca_bundle_pem, version).await, "got 5", "{version}");
        }
        cert.load(b.cert_pem.as_bytes(), b.key_pem.as_bytes())
            .expect("swap");
        assert_ne!(call(&a.ca_bundle_pem, "--http2").await, "got 5");
        assert_eq!(call(&b.ca_bundle_pem, "--http2").await, "got 5");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
