//! A real Kubernetes control plane on loopback: etcd, kube-apiserver and
//! kube-controller-manager, built from pinned Go modules (`tools/control-plane`) and started as
//! child processes with freshly generated PKI.
//!
//! - kube-apiserver: RBAC + Node authorization, the default admission plugins, service-account
//!   tokens signed by a fresh key, and an audit log of every request (user, verb, resource,
//!   field manager) that tests read with [`ControlPlane::audit_events`].
//! - kube-controller-manager: the Deployment, ReplicaSet, garbage-collector, namespace,
//!   ServiceAccount (+ token), root-CA publisher, disruption, HPA and ClusterRole-aggregation
//!   controllers, each acting as
//!   its own ServiceAccount. There is no scheduler and no kubelet: the pod-level kubelet
//!   stand-in ([`crate::kubelet`]) binds Pods and runs them.
//! - Test identities: [`ControlPlane::user_kubeconfig`] (client certificates signed by the
//!   cluster CA), [`ControlPlane::impersonating_kubeconfig`] (several groups) and
//!   [`ControlPlane::service_account_kubeconfig`] (TokenRequest).
//!
//! Processes run under [`crate::supervise`] so they never outlive the test process.

pub mod audit;
mod binaries;
mod kubeconfig;
mod pki;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::sync::OnceCell;

pub use audit::AuditEvent;
pub use binaries::Binaries;
pub use kubeconfig::Credentials;
pub use pki::{CertPair, ClusterPki};

use crate::supervise::{Supervised, free_port};

/// How long a start may take on a loaded 2-core machine (etcd + apiserver + first controllers).
const START_DEADLINE: Duration = Duration::from_secs(120);
/// The controllers the tests rely on (kube-controller-manager's own names).
const CONTROLLERS: &[&str] = &[
    "deployment-controller",
    "replicaset-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "disruption-controller",
    "horizontal-pod-autoscaler-controller",
    // Fills the aggregated ClusterRoles (admin, edit, view) that users bind to.
    "clusterrole-aggregation-controller",
];
/// Service-account tokens carry this issuer.
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// What [`ControlPlane::start`] took and where it lives.
#[derive(Clone, Debug)]
pub struct StartReport {
    pub server: String,
    pub elapsed: Duration,
}

pub struct ControlPlane {
    dir: PathBuf,
    server: String,
    pki: ClusterPki,
    admin_kubeconfig: PathBuf,
    audit_log: PathBuf,
    // kube-controller-manager, kube-apiserver, etcd: stopped in that order.
    processes: Mutex<Vec<Supervised>>,
    started_in: Duration,
    next_file: AtomicU32,
    // A failed start keeps its logs for the error message's reader.
    keep_dir: bool,
    // How kube-apiserver was started, so that [`ControlPlane::restart_apiserver`] can do it again.
    apiserver: ProcessSpec,
}

/// A program with its arguments and log file.
#[derive(Clone, Debug)]
struct ProcessSpec {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    log: PathBuf,
}

impl ProcessSpec {
    fn spawn(&self) -> Result<Supervised> {
        Supervised::spawn(self.name, &self.program, &self.args, &self.log)
    }
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server", &self.server)
            .field("dir", &self.dir)
            .finish()
    }
}

/// How to start a [`ControlPlane`].
#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// Where the API server writes its audit log (truncated first). By default it lives in the
    /// plane's own directory and goes with it; a path outside lets a later process read it.
    pub audit_log: Option<PathBuf>,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager in a fresh directory and waits
    /// until the API server is ready and the ServiceAccount controller has run.
    pub async fn start() -> Result<ControlPlane> {
        ControlPlane::start_with(StartOptions::default()).await
    }

    /// [`ControlPlane::start`] with options.
    pub async fn start_with(options: StartOptions) -> Result<ControlPlane> {
        let begin = Instant::now();
        let bins = tokio::task::spawn_blocking(Binaries::locate).await??;
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "twc-control-plane-{}-{}",
            std::process::id(),
            unique()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let pki = ClusterPki::generate()?;
        let files = Files::write(&dir, &pki, options.audit_log)?;
        let etcd_port = free_port()?;
        let etcd = start_etcd(&bins, &dir, etcd_port)?;
        let api_port = free_port()?;
        let apiserver_spec = apiserver_spec(&bins, &files, etcd_port, api_port);
        let apiserver = apiserver_spec.spawn()?;
        let processes = vec![apiserver, etcd];
        let server = format!("https://127.0.0.1:{api_port}");
        let admin = kubeconfig::write(
            &dir.join("admin.kubeconfig"),
            &server,
            &pki.ca_pem,
            &Credentials::Cert(pki.client_cert("twc-admin", Some("system:masters"))?),
        )?;
        let mut plane = ControlPlane {
            dir: dir.clone(),
            server,
            pki,
            admin_kubeconfig: admin,
            audit_log: files.audit_log.clone(),
            processes: Mutex::new(processes),
            started_in: Duration::ZERO,
            next_file: AtomicU32::new(0),
            keep_dir: false,
            apiserver: apiserver_spec,
        };
        if let Err(e) = plane.wait_ready(begin + START_DEADLINE).await {
            plane.keep_dir = true;
            return Err(e.context(format!("logs kept in {}", plane.dir.display())));
        }
        let kcm_config = kubeconfig::write(
            &dir.join("kube-controller-manager.kubeconfig"),
            &plane.server,
            &plane.pki.ca_pem,
            &Credentials::Cert(
                plane
                    .pki
                    .client_cert("system:kube-controller-manager", None)?,
            ),
        )?;
        let kcm = start_controller_manager(&bins, &files, &kcm_config)?;
        plane.lock_processes()?.insert(0, kcm);
        if let Err(e) = plane
            .wait_default_service_account(begin + START_DEADLINE)
            .await
        {
            plane.keep_dir = true;
            return Err(e.context(format!("logs kept in {}", plane.dir.display())));
        }
        plane.started_in = begin.elapsed();
        tracing::info!(server = %plane.server, elapsed = ?plane.started_in, "control plane ready");
        Ok(plane)
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The API server's host and port, as a kubelet's Pods reach it
    /// (`KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT`).
    pub fn host_port(&self) -> anyhow::Result<(String, u16)> {
        use anyhow::Context as _;
        let (host, port) = self
            .server
            .trim_start_matches("https://")
            .rsplit_once(':')
            .context("API server address")?;
        Ok((host.to_string(), port.parse()?))
    }

    /// How long [`ControlPlane::start`] took.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The cluster CA (PEM): it signs the serving certificate and all client certificates.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The PKI, e.g. to sign more client certificates.
    pub fn pki(&self) -> &ClusterPki {
        &self.pki
    }

    /// A kubeconfig for `twc-admin` in `system:masters`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The directory holding data, logs and kubeconfigs of this control plane.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A client with admin rights.
    pub async fn client(&self) -> Result<kube::Client> {
        client_from(&self.admin_kubeconfig).await
    }

    /// A kubeconfig for `user` (optionally in `group`) authenticated by a client certificate
    /// signed by the cluster CA; it has exactly the rights RBAC grants that user/group.
    pub fn user_kubeconfig(&self, user: &str, group: Option<&str>) -> Result<PathBuf> {
        let creds = Credentials::Cert(self.pki.client_cert(user, group)?);
        kubeconfig::write(&self.new_file(user), &self.server, &self.pki.ca_pem, &creds)
    }

    /// A kubeconfig that acts as `user` in `groups` through impersonation by the admin.
    pub fn impersonating_kubeconfig(&self, user: &str, groups: &[&str]) -> Result<PathBuf> {
        let creds = Credentials::Impersonate {
            admin: self.pki.client_cert("twc-admin", Some("system:masters"))?,
            user: user.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        };
        kubeconfig::write(&self.new_file(user), &self.server, &self.pki.ca_pem, &creds)
    }

    /// A kubeconfig for ServiceAccount `namespace/name` with a fresh token (TokenRequest, 24 h,
    /// the API server's default audience). Creates the namespace and ServiceAccount if missing.
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> Result<PathBuf> {
        let token = self.service_account_token(namespace, name, None).await?;
        kubeconfig::write(
            &self.new_file(&format!("{namespace}-{name}")),
            &self.server,
            &self.pki.ca_pem,
            &Credentials::Token(token),
        )
    }

    /// A token for ServiceAccount `namespace/name` (TokenRequest), for `audience` or the API
    /// server's own. Creates the namespace and ServiceAccount if missing.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        audience: Option<&str>,
    ) -> Result<String> {
        let audiences = audience.map(|a| vec![a.to_string()]).unwrap_or_default();
        mint_token(&self.client().await?, namespace, name, audiences, 24 * 3600).await
    }

    /// Every audit event so far (the API server logs each request once it completes).
    pub fn audit_events(&self) -> Result<Vec<AuditEvent>> {
        audit::read(&self.audit_log)
    }

    /// Path of the audit log (JSON lines).
    pub fn audit_log_path(&self) -> &Path {
        &self.audit_log
    }

    /// Stops kube-controller-manager, kube-apiserver and etcd, in that order.
    pub fn stop(&self) {
        if let Ok(mut procs) = self.processes.lock() {
            for mut p in procs.drain(..) {
                p.stop(Duration::from_secs(10));
            }
        }
    }

    /// Stops kube-apiserver (SIGTERM, SIGKILL after `grace`) and starts it again on the same
    /// port with the same etcd, then waits until it is ready: every watch breaks, and
    /// clients resuming from an old resourceVersion may get `410 Gone`. The audit log goes on
    /// in the same file. Returns how long the API was down.
    pub async fn restart_apiserver(&self, grace: Duration) -> Result<Duration> {
        let begin = Instant::now();
        {
            let mut procs = self.lock_processes()?;
            // [kube-controller-manager,] kube-apiserver, etcd: the server is second to last.
            let index = procs
                .len()
                .checked_sub(2)
                .context("kube-apiserver is not running")?;
            procs[index].stop(grace);
            procs[index] = self.apiserver.spawn()?;
        }
        self.wait_ready(Instant::now() + START_DEADLINE).await?;
        Ok(begin.elapsed())
    }

    fn new_file(&self, stem: &str) -> PathBuf {
        let n = self.next_file.fetch_add(1, Ordering::SeqCst);
        let safe: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{safe}-{n}.kubeconfig"))
    }

    fn lock_processes(&self) -> Result<std::sync::MutexGuard<'_, Vec<Supervised>>> {
        self.processes
            .lock()
            .map_err(|_| anyhow::anyhow!("control-plane process list poisoned"))
    }

    fn check_alive(&self) -> Result<()> {
        let mut procs = self.lock_processes()?;
        for p in procs.iter_mut() {
            if let Some(err) = p.died() {
                return Err(err);
            }
        }
        Ok(())
    }

    /// Polls `/readyz` with `kubectl get --raw`: kube-rs's client logs every 5xx at ERROR,
    /// and a starting API server answers 500 for a while, which is no error worth a log line.
    async fn wait_ready(&self, deadline: Instant) -> Result<()> {
        loop {
            self.check_alive()?;
            let out = tokio::process::Command::new("kubectl")
                .env("KUBECONFIG", &self.admin_kubeconfig)
                .args(["get", "--raw=/readyz", "--request-timeout=2s"])
                .output()
                .await
                .context("running kubectl (is it on PATH?)")?;
            if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok" {
                return Ok(());
            }
            tracing::debug!(stderr = %String::from_utf8_lossy(&out.stderr), "kube-apiserver not ready");
            if Instant::now() > deadline {
                bail!(
                    "kube-apiserver not ready after {START_DEADLINE:?}; log tail:\n{}",
                    self.log_tail(0)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The ServiceAccount controller creates `default` in every namespace; Pods are refused
    /// until it exists, so this is the point from which tests can create workloads.
    async fn wait_default_service_account(&self, deadline: Instant) -> Result<()> {
        let sas: Api<ServiceAccount> = Api::namespaced(self.client().await?, "default");
        loop {
            self.check_alive()?;
            if sas.get_opt("default").await?.is_some() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "kube-controller-manager created no default ServiceAccount within {START_DEADLINE:?}; log tail:\n{}",
                    self.log_tail(0)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn log_tail(&self, index: usize) -> String {
        self.lock_processes()
            .ok()
            .and_then(|p| p.get(index).map(|p| p.log_tail()))
            .unwrap_or_default()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

static SHARED: OnceCell<ControlPlane> = OnceCell::const_new();

/// One control plane per test binary, started on first use. It lives in a `static` and is
/// never dropped; its processes still stop when the test process exits (see
/// [`crate::supervise`]), and its directory is removed by the next start on this machine.
pub async fn shared() -> Result<&'static ControlPlane> {
    SHARED.get_or_try_init(ControlPlane::start).await
}

/// A client from a kubeconfig file.
pub async fn client_from(path: &Path) -> Result<kube::Client> {
    Ok(kube::Client::try_from(config_from(path).await?)?)
}

/// The client configuration of a kubeconfig file (for a client built with layers of its own).
pub async fn config_from(path: &Path) -> Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(path)?;
    Ok(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?)
}

/// Creates (if needed) namespace `namespace` and ServiceAccount `name` with `client`, and
/// mints a token for it with a TokenRequest, as `kubectl create token` does (no audiences: the
/// API server's own).
pub async fn mint_token(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    audiences: Vec<String>,
    expiration_seconds: i64,
) -> Result<String> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    ensure_service_account(client, namespace, name).await?;
    let req = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(audiences),
            expiration_seconds: Some(expiration_seconds),
            ..Default::default()
        }),
        ..Default::default()
    };
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let minted = sas
        .create_token_request(name, &PostParams::default(), &req)
        .await
        .with_context(|| format!("TokenRequest for {namespace}/{name}"))?;
    minted
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .context("TokenRequest returned no token")
}

async fn ensure_service_account(client: &kube::Client, namespace: &str, name: &str) -> Result<()> {
    let pp = PostParams::default();
    fn ignore_exists<T>(r: kube::Result<T>) -> kube::Result<()> {
        match r {
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            other => other.map(|_| ()),
        }
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    ignore_exists(Api::<Namespace>::all(client.clone()).create(&pp, &ns).await)?;
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    ignore_exists(
        Api::<ServiceAccount>::namespaced(client.clone(), namespace)
            .create(&pp, &sa)
            .await,
    )?;
    Ok(())
}

struct Files {
    ca: PathBuf,
    front_proxy_ca: PathBuf,
    proxy_client_cert: PathBuf,
    proxy_client_key: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    sa_key: PathBuf,
    sa_public: PathBuf,
    audit_policy: PathBuf,
    audit_log: PathBuf,
    dir: PathBuf,
}

/// Records every request once it completes, with user, verb, resource and request URI (which
/// carries the field manager of writes). Writes to Deployments (their scale and status too)
/// also keep the request body, so that a benchmark can tell a scale-down or a Deployment
/// turning ready from any other write. A watch is also recorded when it starts
/// (`ResponseStarted`): a streaming watch list (client-go's WatchList, which Helm 4 uses and
/// Kubernetes 1.37 serves) completes only when the client stops watching, and a test may need to
/// see that a client is watching. Counters of requests read `ResponseComplete` events only.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  omitStages: [ResponseStarted]
  verbs: [update, patch]
  resources:
  - group: apps
    resources: [deployments, deployments/scale, deployments/status]
- level: Metadata
  verbs: [watch]
- level: Metadata
  omitStages: [ResponseStarted]
";

impl Files {
    fn write(dir: &Path, pki: &ClusterPki, audit_log: Option<PathBuf>) -> Result<Files> {
        let files = Files {
            ca: dir.join("ca.crt"),
            front_proxy_ca: dir.join("front-proxy-ca.crt"),
            proxy_client_cert: dir.join("front-proxy-client.crt"),
            proxy_client_key: dir.join("front-proxy-client.key"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            sa_key: dir.join("service-account.key"),
            sa_public: dir.join("service-account.pub"),
            audit_policy: dir.join("audit-policy.yaml"),
            audit_log: audit_log.unwrap_or_else(|| dir.join("audit.log")),
            dir: dir.to_path_buf(),
        };
        for (path, content) in [
            (&files.ca, pki.ca_pem.as_str()),
            (&files.front_proxy_ca, pki.front_proxy_ca_pem.as_str()),
            (
                &files.proxy_client_cert,
                pki.front_proxy_client.cert_pem.as_str(),
            ),
            (
                &files.proxy_client_key,
                pki.front_proxy_client.key_pem.as_str(),
            ),
            (&files.serving_cert, pki.serving.cert_pem.as_str()),
            (&files.serving_key, pki.serving.key_pem.as_str()),
            (&files.sa_key, pki.service_account_key_pem.as_str()),
            (&files.sa_public, pki.service_account_public_pem.as_str()),
            (&files.audit_policy, AUDIT_POLICY),
        ] {
            std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))?;
        }
        if files.audit_log.exists() {
            std::fs::remove_file(&files.audit_log)?;
        }
        Ok(files)
    }
}

fn start_etcd(bins: &Binaries, dir: &Path, port: u16) -> Result<Supervised> {
    let peer = free_port()?;
    let client_url = format!("http://127.0.0.1:{port}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    Supervised::spawn(
        "etcd",
        &bins.etcd,
        [
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ],
        &dir.join("etcd.log"),
    )
}

fn apiserver_spec(bins: &Binaries, f: &Files, etcd_port: u16, port: u16) -> ProcessSpec {
    let p = |path: &PathBuf| path.display().to_string();
    ProcessSpec {
        name: "kube-apiserver",
        program: bins.kube_apiserver.clone(),
        args: vec![
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // The `kubernetes` Service's endpoints cannot be a loopback address.
            "--endpoint-reconciler-type=none".into(),
            format!("--tls-cert-file={}", p(&f.serving_cert)),
            format!("--tls-private-key-file={}", p(&f.serving_key)),
            format!("--client-ca-file={}", p(&f.ca)),
            format!("--service-account-issuer={ISSUER}"),
            format!("--service-account-key-file={}", p(&f.sa_public)),
            format!("--service-account-signing-key-file={}", p(&f.sa_key)),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--authorization-mode=Node,RBAC".into(),
            // The aggregation layer, as a real cluster has it: the API server proxies
            // `/apis/<aggregated group>` with this client certificate and names the user in
            // these headers; aggregated servers read the CA and names from the
            // kube-system/extension-apiserver-authentication ConfigMap the API server publishes.
            format!("--requestheader-client-ca-file={}", p(&f.front_proxy_ca)),
            format!("--requestheader-allowed-names={}", pki::FRONT_PROXY_CLIENT),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-username-headers=X-Remote-User".into(),
            format!("--proxy-client-cert-file={}", p(&f.proxy_client_cert)),
            format!("--proxy-client-key-file={}", p(&f.proxy_client_key)),
            // The default, stated because the test rig relies on it: with aggregator routing
            // off, an APIService's Service is resolved to its ClusterIP, or for an ExternalName
            // Service to the external name itself (k8s.io/apiserver ResolveCluster), which is
            // how an aggregated server on loopback is reached ([`crate::metrics_adapter`]).
            "--enable-aggregator-routing=false".into(),
            // On top of the defaults, as hardened clusters (e.g. OpenShift) run it: setting
            // blockOwnerDeletion needs `update` on the owner's finalizers.
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement".into(),
            format!("--audit-policy-file={}", p(&f.audit_policy)),
            format!("--audit-log-path={}", p(&f.audit_log)),
            // One file for the plane's life (in MB; 0 means lumberjack's default of 100 MB, after
            // which it starts a new file): readers that keep an offset into the log (the scale
            // probe's per-minute counts) would read nothing after a rotation.
            "--audit-log-maxsize=1000000".into(),
            "--audit-log-mode=blocking".into(),
            "--profiling=false".into(),
        ],
        log: f.dir.join("kube-apiserver.log"),
    }
}

fn start_controller_manager(bins: &Binaries, f: &Files, kubeconfig: &Path) -> Result<Supervised> {
    let p = |path: &Path| path.display().to_string();
    Supervised::spawn(
        "kube-controller-manager",
        &bins.kube_controller_manager,
        [
            format!("--kubeconfig={}", p(kubeconfig)),
            format!("--controllers={}", CONTROLLERS.join(",")),
            "--use-service-account-credentials=true".into(),
            format!("--service-account-private-key-file={}", p(&f.sa_key)),
            format!("--root-ca-file={}", p(&f.ca)),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--horizontal-pod-autoscaler-sync-period=5s".into(),
            "--controller-start-interval=0".into(),
            // Each controller's client may send 100 requests/s (the default, 20, took 11 minutes
            // to make the Pods of a 5,000-object fleet in the scale probe; busy clusters raise it
            // the same way).
            "--kube-api-qps=100".into(),
            "--kube-api-burst=200".into(),
        ],
        &f.dir.join("kube-controller-manager.log"),
    )
}

fn unique() -> u32 {
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// Directories of control planes whose test process is gone (a `static` plane is never dropped).
fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix("twc-control-plane-") else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or_default();
        if !pid.is_empty() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Applies every CustomResourceDefinition in `dir` (`*.yaml`, server-side apply) and waits until
/// the API server reports each one Established.
pub async fn install_crds(client: &kube::Client, dir: &Path) -> Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path)?;
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let name = crd.metadata.name.clone().context("CRD without a name")?;
        api.patch(
            &name,
            &PatchParams::apply("twc-test-harness").force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("applying {}", path.display()))?;
        names.push(name);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for name in names {
        loop {
            let crd = api.get(&name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if Instant::now() > deadline {
                bail!("CRD {name} not Established within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// The repository's CRDs (`crds/`).
pub fn repo_crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds")
}

/// The shared control plane with the repository's CRDs installed, and an admin client for the
/// caller's runtime.
pub async fn shared_with_crds() -> Result<(&'static ControlPlane, kube::Client)> {
    let plane = shared().await?;
    let client = plane.client().await?;
    install_crds(&client, &repo_crds_dir()).await?;
    Ok((plane, client))
}
