//! A TLS-terminating gRPC proxy that makes the plaintext `temporal server start-dev` look like a
//! Temporal endpoint requiring **mTLS** or an **API key**.
//!
//! ```text
//! client ──TLS (h2, ALPN)──▶ GrpcTlsProxy ──h2c──▶ dev server
//! ```
//!
//! - [`TestPki`] makes a throwaway CA plus server and client certificates (fresh keys per call).
//! - [`GrpcTlsProxy::start`] listens on `127.0.0.1:0`. With [`ProxyAuth::ClientCert`] the TLS
//!   handshake requires a client certificate issued by the [`TestPki`] CA; with
//!   [`ProxyAuth::ApiKey`] any TLS client may connect, but every request must carry
//!   `authorization: Bearer <key>` or it is answered locally with gRPC `UNAUTHENTICATED`.
//! - Requests and responses are streamed (bodies and trailers), never buffered, so long polls
//!   behave as they do against a real server.
//! - [`GrpcTlsProxy::forwarded`] counts requests sent upstream, [`GrpcTlsProxy::rejected`]
//!   counts failed handshakes and refused requests.
//!
//! Dropping the proxy stops it: the accept task is aborted, and with it every open connection.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result};
use http_body_util::{Either, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject as _;

use crate::certs::{Authority, Usage};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

/// A TLS handshake that has not finished by then is dropped (and counted as rejected).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// gRPC status code `UNAUTHENTICATED`.
const GRPC_UNAUTHENTICATED: u16 = 16;
/// gRPC status code `UNAVAILABLE`.
const GRPC_UNAVAILABLE: u16 = 14;
/// gRPC status code `INTERNAL`.
const GRPC_INTERNAL: u16 = 13;

/// A throwaway PKI: a self-signed CA, a server certificate for `localhost` / `127.0.0.1` and a
/// client certificate, all PEM. Every [`TestPki::generate`] makes fresh ECDSA P-256 keys.
#[derive(Clone)]
pub struct TestPki {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

impl std::fmt::Debug for TestPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestPki")
            .field("ca_pem", &self.ca_pem.len())
            .field("server_cert_pem", &self.server_cert_pem.len())
            .field("server_key_pem", &"<redacted>")
            .field("client_cert_pem", &self.client_cert_pem.len())
            .field("client_key_pem", &"<redacted>")
            .finish()
    }
}

impl TestPki {
    /// CA `CN=twc-test-ca`; server certificate with SANs `localhost` and `127.0.0.1`
    /// (serverAuth); client certificate `CN=twc-test-client` (clientAuth).
    pub fn generate() -> Result<TestPki> {
        let ca = Authority::new("twc-test-ca")?;
        let server = ca.issue(
            "localhost",
            None,
            &["localhost", "127.0.0.1"],
            Usage::Server,
        )?;
        let client = ca.issue("twc-test-client", None, &[], Usage::Client)?;
        Ok(TestPki {
            ca_pem: ca.ca_pem.clone(),
            server_cert_pem: server.cert_pem,
            server_key_pem: server.key_pem,
            client_cert_pem: client.cert_pem,
            client_key_pem: client.key_pem,
        })
    }
}

/// What the proxy demands from clients.
#[derive(Clone, PartialEq, Eq)]
pub enum ProxyAuth {
    /// The TLS handshake requires a client certificate issued by the [`TestPki`] CA.
    ClientCert,
    /// Plain server-side TLS; every request must carry `authorization: Bearer <key>`.
    ApiKey(String),
}

impl std::fmt::Debug for ProxyAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyAuth::ClientCert => f.write_str("ClientCert"),
            ProxyAuth::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
        }
    }
}

#[derive(Default)]
struct Stats {
    forwarded: AtomicU64,
    rejected: AtomicU64,
}

/// Called with the path of every request (`/temporal.api.workflowservice.v1.WorkflowService/<Method>`)
/// before it is forwarded.
pub type Recorder = Arc<dyn Fn(&str) + Send + Sync>;

struct Shared {
    upstream: SocketAddr,
    record: Option<Recorder>,
    /// Told the path again once the upstream's response headers arrive (for a unary call, when
    /// the server has answered).
    answered: Option<Recorder>,
    /// `Bearer <key>` in API-key mode.
    expected_authorization: Option<String>,
    client: Client<HttpConnector, Incoming>,
    stats: Arc<Stats>,
}

/// A running TLS-terminating proxy in front of a plaintext gRPC server. Dropping it stops it.
pub struct GrpcTlsProxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    /// `None`: plaintext, recording (see [`GrpcTlsProxy::start_recording`]).
    auth: Option<ProxyAuth>,
    stats: Arc<Stats>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for GrpcTlsProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcTlsProxy")
            .field("addr", &self.addr)
            .field("upstream", &self.upstream)
            .field("auth", &self.auth)
            .field("forwarded", &self.forwarded())
            .field("rejected", &self.rejected())
            .finish()
    }
}

impl GrpcTlsProxy {
    /// Listens on `127.0.0.1:0` with the [`TestPki`] server certificate and forwards every
    /// request to `upstream` over plaintext HTTP/2.
    pub async fn start(
        upstream: SocketAddr,
        pki: &TestPki,
        auth: ProxyAuth,
    ) -> Result<GrpcTlsProxy> {
        let config = server_config(pki, &auth)?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let expected_authorization = match &auth {
            ProxyAuth::ApiKey(key) => Some(format!("Bearer {key}")),
            ProxyAuth::ClientCert => None,
        };
        let shared = Shared::new(upstream, None, expected_authorization);
        Self::listen(shared, Some(acceptor), Some(auth)).await
    }

    /// Listens on `127.0.0.1:0` in plaintext (h2c, as the dev server) and forwards every
    /// request to `upstream`, telling `record` its method first: the Temporal half of a
    /// request-level log of what a controller does, the real server answering.
    pub async fn start_recording(upstream: SocketAddr, record: Recorder) -> Result<GrpcTlsProxy> {
        Self::listen(Shared::new(upstream, Some(record), None), None, None).await
    }

    /// [`GrpcTlsProxy::start_recording`], also telling `answered` each request's path when its
    /// answer arrives: how long after a call's answer the controller did something else.
    pub async fn start_recording_answers(
        upstream: SocketAddr,
        record: Recorder,
        answered: Recorder,
    ) -> Result<GrpcTlsProxy> {
        let mut shared = Shared::new(upstream, Some(record), None);
        shared.answered = Some(answered);
        Self::listen(shared, None, None).await
    }

    async fn listen(
        shared: Shared,
        acceptor: Option<TlsAcceptor>,
        auth: Option<ProxyAuth>,
    ) -> Result<GrpcTlsProxy> {
        let listener = TcpListener::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
            .await
            .context("binding the proxy listener")?;
        let addr = listener
            .local_addr()
            .context("reading the proxy's address")?;
        let (upstream, stats) = (shared.upstream, shared.stats.clone());
        let accept = tokio::spawn(accept_loop(listener, acceptor, Arc::new(shared)));
        Ok(GrpcTlsProxy {
            addr,
            upstream,
            auth,
            stats,
            accept,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:PORT`, the form `TEMPORAL_ADDRESS` takes.
    pub fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    /// Requests sent upstream so far (counted when forwarding starts).
    pub fn forwarded(&self) -> u64 {
        self.stats.forwarded.load(Ordering::SeqCst)
    }

    /// Failed TLS handshakes plus requests refused for a missing or wrong API key.
    pub fn rejected(&self) -> u64 {
        self.stats.rejected.load(Ordering::SeqCst)
    }
}

impl Drop for GrpcTlsProxy {
    fn drop(&mut self) {
        // The accept task owns the connection tasks (a JoinSet): aborting it closes them all.
        self.accept.abort();
    }
}

impl Shared {
    fn new(
        upstream: SocketAddr,
        record: Option<Recorder>,
        expected_authorization: Option<String>,
    ) -> Shared {
        Shared {
            upstream,
            record,
            answered: None,
            expected_authorization,
            client: upstream_client(),
            stats: Arc::default(),
        }
    }
}

/// The HTTP/2 client to the plaintext upstream.
fn upstream_client() -> Client<HttpConnector, Incoming> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build(connector)
}

fn server_config(pki: &TestPki, auth: &ProxyAuth) -> Result<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = CertificateDer::pem_slice_iter(pki.server_cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("parsing the server certificate PEM: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(pki.server_key_pem.as_bytes())
        .map_err(|e| anyhow::anyhow!("parsing the server key PEM: {e}"))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("choosing TLS protocol versions")?;
    let builder = match auth {
        ProxyAuth::ClientCert => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
                let cert = cert.map_err(|e| anyhow::anyhow!("parsing the CA PEM: {e}"))?;
                roots.add(cert).context("adding the CA to the root store")?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .context("building the client-certificate verifier")?;
            builder.with_client_cert_verifier(verifier)
        }
        ProxyAuth::ApiKey(_) => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .context("installing the server certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// Without an acceptor, connections are served in plaintext.
async fn accept_loop(listener: TcpListener, acceptor: Option<TlsAcceptor>, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    connections.spawn(serve_connection(tcp, peer, acceptor.clone(), shared.clone()));
                }
                Err(e) => {
                    // E.g. out of file descriptors: back off instead of spinning.
                    tracing::debug!(error = %e, "TLS proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: Option<TlsAcceptor>,
    shared: Arc<Shared>,
) {
    let _ = tcp.set_nodelay(true);
    let Some(acceptor) = acceptor else {
        return serve_h2(TokioIo::new(tcp), peer, shared).await;
    };
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            shared.stats.rejected.fetch_add(1, Ordering::SeqCst);
            tracing::debug!(%peer, error = %e, "TLS proxy handshake failed");
            return;
        }
        Err(_) => {
            shared.stats.rejected.fetch_add(1, Ordering::SeqCst);
            tracing::debug!(%peer, "TLS proxy handshake timed out");
            return;
        }
    };
    serve_h2(TokioIo::new(tls), peer, shared).await;
}

async fn serve_h2<I>(io: I, peer: SocketAddr, shared: Arc<Shared>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(forward(req, &shared).await) }
    });
    if let Err(e) = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(io, service)
        .await
    {
        tracing::debug!(%peer, error = %e, "gRPC proxy connection ended with an error");
    }
}

type ProxyBody = Either<Incoming, Empty<Bytes>>;

async fn forward(req: Request<Incoming>, shared: &Shared) -> Response<ProxyBody> {
    if let Some(expected) = &shared.expected_authorization {
        let ok = req
            .headers()
            .get(AUTHORIZATION)
            .is_some_and(|v| v.as_bytes() == expected.as_bytes());
        if !ok {
            shared.stats.rejected.fetch_add(1, Ordering::SeqCst);
            return grpc_error(
                GRPC_UNAUTHENTICATED,
                "missing or invalid API key (test TLS proxy)",
            );
        }
    }
    let (mut parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .to_string();
    parts.uri = match Uri::builder()
        .scheme("http")
        .authority(shared.upstream.to_string())
        .path_and_query(path)
        .build()
    {
        Ok(uri) => uri,
        Err(e) => {
            return grpc_error(
                GRPC_INTERNAL,
                &format!("test TLS proxy cannot rewrite the URI: {e}"),
            );
        }
    };
    // An HTTP/1-only header would make the HTTP/2 client refuse the request.
    parts.headers.remove(hyper::header::HOST);
    if let Some(record) = &shared.record {
        record(parts.uri.path());
    }
    shared.stats.forwarded.fetch_add(1, Ordering::SeqCst);
    let method = shared
        .answered
        .as_ref()
        .map(|_| parts.uri.path().to_string());
    match shared
        .client
        .request(Request::from_parts(parts, body))
        .await
    {
        Ok(resp) => {
            if let (Some(answered), Some(method)) = (&shared.answered, method) {
                answered(&method);
            }
            resp.map(Either::Left)
        }
        Err(e) => grpc_error(
            GRPC_UNAVAILABLE,
            &format!("test TLS proxy cannot reach upstream: {e}"),
        ),
    }
}

/// A trailers-only gRPC error: HTTP 200 with `grpc-status` and `grpc-message` in the headers
/// and an empty body (HEADERS frame with END_STREAM).
fn grpc_error(code: u16, message: &str) -> Response<ProxyBody> {
    let mut resp = Response::new(Either::Right(Empty::new()));
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from(code));
    if let Ok(v) = HeaderValue::from_str(&percent_encode(message)) {
        headers.insert("grpc-message", v);
    }
    resp
}

/// gRPC's `grpc-message` encoding: printable ASCII except `%` as is, everything else `%XX`.
fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use futures::channel::mpsc;
    use http_body_util::{BodyExt as _, StreamBody};
    use hyper::HeaderMap;
    use hyper::body::Frame;
    use rustls::pki_types::ServerName;

    type Chunks = mpsc::UnboundedReceiver<Result<Frame<Bytes>, Infallible>>;

    /// A plaintext HTTP/2 upstream that echoes every request data frame as soon as it arrives
    /// and ends with trailers counting them; it reports the authority and path it saw in
    /// response headers.
    async fn echo_upstream() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
                    let authority = req.uri().authority().map(|a| a.to_string());
                    let path = req.uri().path().to_string();
                    let (tx, rx) = mpsc::unbounded::<Result<Frame<Bytes>, Infallible>>();
                    tokio::spawn(async move {
                        let mut body = req.into_body();
                        let mut n = 0u32;
                        while let Some(Ok(frame)) = body.frame().await {
                            // The end of a stream may come as an empty DATA frame.
                            if let Ok(data) = frame.into_data().map_err(drop)
                                && !data.is_empty()
                            {
                                n += 1;
                                let _ = tx.unbounded_send(Ok(Frame::data(data)));
                            }
                        }
                        let mut trailers = HeaderMap::new();
                        trailers.insert("grpc-status", HeaderValue::from_static("0"));
                        trailers.insert("x-echo-count", HeaderValue::from(n));
                        let _ = tx.unbounded_send(Ok(Frame::trailers(trailers)));
                    });
                    let resp = Response::builder()
                        .header(CONTENT_TYPE, "application/grpc")
                        .header("x-seen-authority", authority.unwrap_or_default())
                        .header("x-seen-path", path)
                        .body(StreamBody::new(rx))
                        .unwrap();
                    Ok::<_, Infallible>(resp)
                });
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), service),
                );
            }
        });
        addr
    }

    async fn tls_client(
        proxy: &GrpcTlsProxy,
        pki: &TestPki,
    ) -> hyper::client::conn::http2::SendRequest<StreamBody<Chunks>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(pki.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let certs = vec![CertificateDer::from_pem_slice(pki.client_cert_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(pki.client_key_pem.as_bytes()).unwrap();
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let tcp = TcpStream::connect(proxy.addr()).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        let (send, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        send
    }

    async fn next_frame(body: &mut Incoming) -> Frame<Bytes> {
        tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("a frame within the deadline")
            .expect("the body has another frame")
            .expect("the frame is not an error")
    }

    #[tokio::test]
    async fn streams_both_directions_and_trailers_without_buffering() {
        let upstream = echo_upstream().await;
        let pki = TestPki::generate().unwrap();
        let proxy = GrpcTlsProxy::start(upstream, &pki, ProxyAuth::ClientCert)
            .await
            .unwrap();
        let mut send = tls_client(&proxy, &pki).await;
        let (tx, rx) = mpsc::unbounded();
        let req = Request::builder()
            .method("POST")
            .uri("https://localhost/temporal.api.Test/Echo?x=1")
            .header(CONTENT_TYPE, "application/grpc")
            .header("te", "trailers")
            .body(StreamBody::new(rx))
            .unwrap();
        tx.unbounded_send(Ok(Frame::data(Bytes::from_static(b"ping-1"))))
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(10), send.send_request(req))
            .await
            .expect("response headers while the request is still open")
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(
            resp.headers()["x-seen-authority"].to_str().unwrap(),
            upstream.to_string()
        );
        assert_eq!(resp.headers()["x-seen-path"], "/temporal.api.Test/Echo");
        let mut body = resp.into_body();
        // Each echo arrives while the request body is still open: nothing is buffered.
        let echo = next_frame(&mut body).await.into_data().unwrap();
        assert_eq!(&echo[..], b"ping-1");
        tx.unbounded_send(Ok(Frame::data(Bytes::from_static(b"ping-2"))))
            .unwrap();
        let echo = next_frame(&mut body).await.into_data().unwrap();
        assert_eq!(&echo[..], b"ping-2");
        drop(tx);
        let trailers = next_frame(&mut body).await.into_trailers().unwrap();
        assert_eq!(trailers["grpc-status"], "0");
        assert_eq!(trailers["x-echo-count"], "2");
        assert_eq!(proxy.forwarded(), 1);
        assert_eq!(proxy.rejected(), 0);
    }

    #[tokio::test]
    async fn api_key_mode_answers_unauthenticated_locally() {
        let upstream = echo_upstream().await;
        let pki = TestPki::generate().unwrap();
        let proxy = GrpcTlsProxy::start(upstream, &pki, ProxyAuth::ApiKey("k1".into()))
            .await
            .unwrap();
        // The client certificate is simply not asked for in this mode.
        let mut send = tls_client(&proxy, &pki).await;
        for (auth, expect_ok) in [
            (Some("Bearer k1"), true),
            (Some("Bearer k2"), false),
            (None, false),
        ] {
            let (tx, rx) = mpsc::unbounded();
            drop(tx);
            let mut req = Request::builder()
                .method("POST")
                .uri("https://localhost/temporal.api.Test/Echo")
                .header(CONTENT_TYPE, "application/grpc");
            if let Some(auth) = auth {
                req = req.header(AUTHORIZATION, auth);
            }
            let resp = send
                .send_request(req.body(StreamBody::new(rx)).unwrap())
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::OK);
            if expect_ok {
                assert!(resp.headers().get("grpc-status").is_none());
                let trailers = resp
                    .into_body()
                    .collect()
                    .await
                    .unwrap()
                    .trailers()
                    .cloned();
                assert_eq!(trailers.unwrap()["grpc-status"], "0");
            } else {
                assert_eq!(resp.headers()["grpc-status"], "16");
                assert_eq!(resp.headers()[CONTENT_TYPE], "application/grpc");
                assert!(resp.headers().contains_key("grpc-message"));
                let body = resp.into_body();
                assert!(
                    hyper::body::Body::is_end_stream(&body),
                    "trailers-only response"
                );
            }
        }
        assert_eq!((proxy.forwarded(), proxy.rejected()), (1, 2));

        // Dropping the proxy aborts the accept task and, with it, open connections.
        drop(proxy);
        tokio::time::timeout(Duration::from_secs(10), async {
            while !send.is_closed() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the open connection is closed once the proxy is dropped");
    }

    #[test]
    fn percent_encoding_follows_grpc() {
        assert_eq!(percent_encode("a b%c\n"), "a b%25c%0A");
        assert_eq!(percent_encode("ü"), "%C3%BC");
    }

    #[test]
    fn pki_debug_hides_keys_and_generates_fresh_keys() {
        let a = TestPki::generate().unwrap();
        let b = TestPki::generate().unwrap();
        assert_ne!(a.client_key_pem, b.client_key_pem);
        assert_ne!(a.ca_pem, b.ca_pem);
        let text = format!("{a:?}");
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        assert!(a.ca_pem.contains("BEGIN CERTIFICATE"));
        assert!(a.server_key_pem.contains("PRIVATE KEY"));
        assert!(server_config(&a, &ProxyAuth::ClientCert).is_ok());
        assert!(server_config(&a, &ProxyAuth::ApiKey("k".into())).is_ok());
        assert_eq!(
            format!("{:?}", ProxyAuth::ApiKey("secret".into())),
            "ApiKey(<redacted>)"
        );
    }
}
