//! Process-wide pool of Temporal connections, one per (endpoint, credentials, namespace).
//!
//! Credentials are part of the key through a fingerprint, so a rotated Secret simply maps to a
//! new connection; the old one ages out. Connections are made lazily, once per key even under
//! concurrent reconciles, and are dropped on auth failures, on client-certificate expiry and
//! after a long idle period.

use std::fmt;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use temporalio_client::danger::ServerCertVerifier;
use temporalio_client::{
    ClientTlsOptions, Connection, ConnectionOptions, RetryOptions, TlsOptions, Url,
};
use tokio::sync::OnceCell;

use super::auth::{AuthMaterial, CERT_EXPIRY_MARGIN};
use super::budget::Budgets;
use super::client::TemporalClient;
use super::connections::{Entry, EvictHandle, MapKey, PoolInner, RpcObserver};
use super::error::{TemporalError, code_label};
use crate::api::connection::TemporalConnectionSpec;

/// TCP/TLS establishment limit handed to the transport.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);
/// Limit on the whole connect, including the eager `GetSystemInfo` health check.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(8);
/// Connections unused this long are dropped from the pool (the key is usually stale: a rotated
/// Secret or a deleted connection).
const IDLE_TTL: Duration = Duration::from_secs(30 * 60);
/// Retries of retryable codes (Unavailable, ResourceExhausted, …) inside one RPC. Kept short:
/// the reconcile loop has its own backoff and must not sit on one call for long.
const RPC_RETRY_BUDGET: Duration = Duration::from_secs(5);

/// Where and how to connect. Build it with [`ConnectionKey::new`]; equality and hashing use the
/// endpoint plus a fingerprint of the credentials, never the raw material.
#[derive(Clone)]
pub struct ConnectionKey {
    host_port: String,
    server_name: Option<String>,
    auth: AuthMaterial,
    /// The `ca.crt` of `tls.caCertSecretRef`, trusted besides the system roots.
    server_ca: Option<Vec<u8>>,
    fingerprint: String,
    cert_not_after: Option<Timestamp>,
}

impl ConnectionKey {
    pub fn new(spec: &TemporalConnectionSpec, auth: AuthMaterial) -> Self {
        Self::from_parts(&spec.host_port, spec.server_name(), auth)
    }

    pub fn from_parts(host_port: &str, server_name: Option<&str>, auth: AuthMaterial) -> Self {
        let server_name = server_name.filter(|s| !s.is_empty()).map(str::to_string);
        let cert_not_after = auth.cert_not_after();
        let mut key = ConnectionKey {
            host_port: host_port.to_string(),
            server_name,
            auth,
            server_ca: None,
            fingerprint: String::new(),
            cert_not_after,
        };
        key.fingerprint = key.compute_fingerprint();
        key
    }

    /// This key, also trusting `ca_pem` (the `ca.crt` of `tls.caCertSecretRef`): part of the
    /// fingerprint, so a changed CA is a new pooled connection (as in the Go controller).
    pub fn with_server_ca(mut self, ca_pem: Option<Vec<u8>>) -> Self {
        self.server_ca = ca_pem;
        self.fingerprint = self.compute_fingerprint();
        self
    }

    fn compute_fingerprint(&self) -> String {
        use sha2::{Digest as _, Sha256};
        let mut h = Sha256::new();
        let auth = self.auth.fingerprint();
        let mut parts = vec![
            self.host_port.as_bytes(),
            self.server_name.as_deref().unwrap_or("\0").as_bytes(),
            auth.as_bytes(),
        ];
        // Only when set, so that keys without a CA keep their fingerprints.
        if let Some(ca) = &self.server_ca {
            parts.push(ca);
        }
        for part in parts {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
        hex::encode(h.finalize())
    }

    pub fn host_port(&self) -> &str {
        &self.host_port
    }

    pub fn server_name(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    pub fn auth(&self) -> &AuthMaterial {
        &self.auth
    }

    /// Hex SHA-256 of endpoint, server name and credentials.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn uses_tls(&self) -> bool {
        !matches!(self.auth, AuthMaterial::Plain)
            || self.server_name.is_some()
            || self.server_ca.is_some()
    }

    /// The URL the SDK dials: `https` whenever TLS is on (credentials or a server name).
    pub(crate) fn target(&self) -> String {
        format!(
            "{}://{}",
            if self.uses_tls() { "https" } else { "http" },
            self.host_port
        )
    }

    /// Past this instant the client certificate is too close to expiry to keep using.
    fn reuse_deadline(&self) -> Option<Timestamp> {
        self.cert_not_after.map(|t| t - CERT_EXPIRY_MARGIN)
    }

    /// The verifier trusting the system roots plus `secret_ca` (an mTLS Secret's `ca.crt`)
    /// and `tls.caCertSecretRef`'s CA; `None` (the system roots alone) without either.
    fn server_trust(
        &self,
        secret_ca: Option<&[u8]>,
    ) -> Result<Option<Arc<dyn ServerCertVerifier>>, TemporalError> {
        let extra: Option<Vec<u8>> = match (secret_ca, self.server_ca.as_deref()) {
            (None, None) => None,
            (Some(a), None) | (None, Some(a)) => Some(a.to_vec()),
            (Some(a), Some(b)) => Some([a, b"\n", b].concat()),
        };
        extra
            .as_deref()
            .map(|ca| {
                super::tls::system_roots_plus(ca).map_err(|e| TemporalError::Connect {
                    target: self.target(),
                    code: None,
                    message: e.to_string(),
                })
            })
            .transpose()
    }

    fn options(&self) -> Result<ConnectionOptions, TemporalError> {
        let target = self.target();
        let url = Url::from_str(&target).map_err(|e| TemporalError::InvalidAddress {
            address: self.host_port.clone(),
            message: e.to_string(),
        })?;
        let tls = match &self.auth {
            AuthMaterial::MutualTls {
                cert_pem,
                key_pem,
                ca_pem,
            } => Some(
                TlsOptions::builder()
                    // ca.crt adds to the system roots (see `super::tls`); without it the SDK
                    // uses the system roots alone.
                    .maybe_server_cert_verifier(self.server_trust(ca_pem.as_deref())?)
                    .maybe_domain(self.server_name.clone())
                    .client_tls_options(
                        ClientTlsOptions::builder()
                            .client_cert(cert_pem.clone())
                            .client_private_key(key_pem.clone())
                            .build(),
                    )
                    .build(),
            ),
            // API keys always travel over TLS; plain mode only when a server name or a CA
            // asks for it.
            AuthMaterial::ApiKey(_) | AuthMaterial::Plain if self.uses_tls() => Some(
                TlsOptions::builder()
                    .maybe_server_cert_verifier(self.server_trust(None)?)
                    .maybe_domain(self.server_name.clone())
                    .build(),
            ),
            AuthMaterial::ApiKey(_) | AuthMaterial::Plain => None,
        };
        let api_key = match &self.auth {
            AuthMaterial::ApiKey(k) => Some(k.clone()),
            _ => None,
        };
        Ok(ConnectionOptions::new(url)
            .identity("temporal-worker-controller".to_string())
            .maybe_tls_options(tls)
            .maybe_api_key(api_key)
            .connect_timeout(DIAL_TIMEOUT)
            .retry_options(
                RetryOptions::builder()
                    .max_elapsed_time(Some(RPC_RETRY_BUDGET))
                    .build(),
            )
            .build())
    }
}

impl PartialEq for ConnectionKey {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Eq for ConnectionKey {}

impl std::hash::Hash for ConnectionKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.fingerprint.hash(state);
    }
}

impl fmt::Debug for ConnectionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionKey")
            .field("host_port", &self.host_port)
            .field("server_name", &self.server_name)
            .field("auth", &self.auth)
            .field("server_ca", &self.server_ca.is_some())
            .field("cert_not_after", &self.cert_not_after)
            .finish()
    }
}

/// Shared, cheap to clone (wrap in `Arc` or clone the pool itself).
#[derive(Clone, Default)]
pub struct ClientPool {
    inner: Arc<PoolInner>,
    observer: Option<RpcObserver>,
    /// `None`: no client-side limits (tests that drive Temporal directly).
    budgets: Option<Arc<Budgets>>,
}

impl fmt::Debug for ClientPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientPool")
            .field("connections", &self.len())
            .finish()
    }
}

impl ClientPool {
    pub fn new() -> Self {
        Self::default()
    }

    /// A pool whose clients report every RPC to `observer` (metrics).
    pub fn with_observer(observer: RpcObserver) -> Self {
        ClientPool {
            inner: Arc::default(),
            observer: Some(observer),
            budgets: None,
        }
    }

    /// This pool, its clients taking every call's token from `budgets` (one budget per
    /// Temporal address and namespace, shared by every rollout there).
    pub fn with_budgets(mut self, budgets: Arc<Budgets>) -> Self {
        self.budgets = Some(budgets);
        self
    }

    /// Number of pooled (possibly still connecting) entries.
    pub fn len(&self) -> usize {
        self.inner.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A client for `key` in `temporal_namespace` acting as `identity`, dialling on first use.
    /// Concurrent callers for the same key share one connection attempt.
    pub async fn get_or_connect(
        &self,
        key: ConnectionKey,
        temporal_namespace: &str,
        identity: &str,
    ) -> Result<TemporalClient, TemporalError> {
        let map_key: MapKey = (key.fingerprint.clone(), temporal_namespace.to_string());
        let (cell, id) = {
            let mut map = self.inner.lock();
            let now = Instant::now();
            let wall = Timestamp::now();
            map.retain(|_, e| {
                now.duration_since(e.last_used) < IDLE_TTL
                    && e.reuse_deadline.is_none_or(|deadline| wall < deadline)
            });
            let entry = map.entry(map_key.clone()).or_insert_with(|| Entry {
                id: self
                    .inner
                    .next_id
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                cell: Arc::new(OnceCell::new()),
                last_used: now,
                reuse_deadline: key.reuse_deadline(),
            });
            entry.last_used = now;
            (entry.cell.clone(), entry.id)
        };
        let conn = cell.get_or_try_init(|| self.connect(&key)).await?.clone();
        let evict = EvictHandle {
            pool: Arc::downgrade(&self.inner),
            key: map_key,
            id,
        };
        Ok(TemporalClient::new(
            conn,
            temporal_namespace,
            identity,
            self.observer.clone(),
            Some(evict),
            self.budgets
                .as_ref()
                .map(|b| b.of(key.host_port(), temporal_namespace)),
        ))
    }

    /// Drops the pooled connection for `key` (e.g. after PermissionDenied/Unauthenticated).
    /// Clients already handed out keep working until they are dropped.
    pub fn evict(&self, key: &ConnectionKey, temporal_namespace: &str) {
        self.inner
            .lock()
            .remove(&(key.fingerprint.clone(), temporal_namespace.to_string()));
    }

    async fn connect(&self, key: &ConnectionKey) -> Result<Connection, TemporalError> {
        let target = key.target();
        let options = key.options()?;
        let started = Instant::now();
        let result = match tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect(options)).await
        {
            Err(_) => Err(TemporalError::ConnectTimeout {
                target,
                timeout: CONNECT_TIMEOUT,
            }),
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => {
                let code = match &e {
                    temporalio_client::errors::ClientConnectError::SystemInfoCallError(status) => {
                        Some(status.code())
                    }
                    _ => None,
                };
                Err(TemporalError::Connect {
                    target,
                    code,
                    message: connect_message(&e),
                })
            }
        };
        if let Some(observe) = &self.observer {
            let label = match &result {
                Ok(_) => code_label(temporalio_client::tonic::Code::Ok),
                Err(e) => e.code_label(),
            };
            observe("Connect", label, started.elapsed());
        }
        result
    }
}

/// The SDK's connect errors print with `{:?}` of tonic internals; keep the useful part short.
fn connect_message(e: &temporalio_client::errors::ClientConnectError) -> String {
    use std::error::Error as _;
    use temporalio_client::errors::ClientConnectError as E;
    match e {
        E::SystemInfoCallError(status) => {
            format!(
                "health check (GetSystemInfo) failed with {}: {}",
                code_label(status.code()),
                status.message()
            )
        }
        E::TonicTransportError(t) => {
            let mut text = t.to_string();
            let mut source = t.source();
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::connection::TlsOptions as SpecTls;
    use std::sync::Mutex;

    fn spec(host_port: &str, server_name: Option<&str>) -> TemporalConnectionSpec {
        TemporalConnectionSpec {
            host_port: host_port.into(),
            tls: server_name.map(|s| SpecTls {
                server_name: Some(s.into()),
                ..Default::default()
            }),
            mutual_tls_secret_ref: None,
            api_key_secret_ref: None,
            worker_credentials: None,
        }
    }

    #[test]
    fn keys_differ_by_endpoint_server_name_and_material() {
        let a = ConnectionKey::new(&spec("t:7233", None), AuthMaterial::Plain);
        let same = ConnectionKey::new(&spec("t:7233", None), AuthMaterial::Plain);
        let other_host = ConnectionKey::new(&spec("u:7233", None), AuthMaterial::Plain);
        let sni = ConnectionKey::new(&spec("t:7233", Some("t.example")), AuthMaterial::Plain);
        let key1 = ConnectionKey::new(&spec("t:7233", None), AuthMaterial::ApiKey("k1".into()));
        let key2 = ConnectionKey::new(&spec("t:7233", None), AuthMaterial::ApiKey("k2".into()));
        assert_eq!(a, same);
        for other in [&other_host, &sni, &key1, &key2] {
            assert_ne!(&a, other);
        }
        assert_ne!(key1, key2);
        let dbg = format!("{key1:?}");
        assert!(!dbg.contains("k1\""), "{dbg}");
    }

    #[test]
    fn target_scheme_follows_tls() {
        assert_eq!(
            ConnectionKey::new(&spec("t:7233", None), AuthMaterial::Plain).target(),
            "http://t:7233"
        );
        assert_eq!(
            ConnectionKey::new(&spec("t:7233", Some("x")), AuthMaterial::Plain).target(),
            "https://t:7233"
        );
        assert_eq!(
            ConnectionKey::new(&spec("t:7233", None), AuthMaterial::ApiKey("k".into())).target(),
            "https://t:7233"
        );
        // A private CA (tls.caCertSecretRef) alone means TLS, and is part of the key.
        let ca = include_bytes!("../../tests/fixtures/tls/ca.crt").to_vec();
        let plain = ConnectionKey::new(&spec("t:7233", None), AuthMaterial::Plain);
        let with_ca = plain.clone().with_server_ca(Some(ca.clone()));
        assert_eq!(with_ca.target(), "https://t:7233");
        assert_ne!(plain, with_ca);
        assert_eq!(with_ca, plain.clone().with_server_ca(Some(ca)));
        assert_eq!(plain, with_ca.with_server_ca(None));
        assert!(
            ConnectionKey::new(&spec("t:7233", None), AuthMaterial::ApiKey("k".into()))
                .with_server_ca(Some(b"-----BEGIN CERTIFICATE-----".to_vec()))
                .options()
                .is_err(),
            "a CA that holds no certificate must not fall back to the system roots"
        );
        // An empty server name is the same as none.
        assert_eq!(
            ConnectionKey::from_parts("t:7233", Some(""), AuthMaterial::Plain).target(),
            "http://t:7233"
        );
    }

    #[tokio::test]
    async fn unreachable_server_fails_fast_and_is_observed() {
        // Bind then drop a listener so the port is (almost certainly) closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let seen: Arc<Mutex<Vec<(&'static str, &'static str)>>> = Arc::default();
        let sink = seen.clone();
        let pool =
            ClientPool::with_observer(Arc::new(move |m, c, _| sink.lock().unwrap().push((m, c))));
        let key =
            ConnectionKey::from_parts(&format!("127.0.0.1:{port}"), None, AuthMaterial::Plain);
        let started = Instant::now();
        let err = pool
            .get_or_connect(key.clone(), "default", "me")
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < CONNECT_TIMEOUT + Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(
            matches!(
                err,
                TemporalError::Connect { code: None, .. } | TemporalError::ConnectTimeout { .. }
            ),
            "{err:?}"
        );
        assert!(!err.is_auth());
        assert_eq!(
            seen.lock().unwrap().first().map(|(m, _)| *m),
            Some("Connect")
        );
        // The failed attempt leaves an empty slot that the next call retries; evict clears it.
        assert_eq!(pool.len(), 1);
        pool.evict(&key, "default");
        assert!(pool.is_empty());
    }
}
