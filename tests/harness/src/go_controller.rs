//! The real Go temporal-worker-controller (the peer pinned in `tools/go-controller/versions.env`,
//! v1.8.1) as a child process against a control plane of [`crate::control_plane`]: the drop-in
//! take-over test and the side-by-side benchmark run the controller users run today.
//!
//! - [`GoControllerBuild::locate`] runs `tools/go-controller/build.sh` once per test process (it
//!   reuses its cache, which `.ci/setup-tests` fills) and finds the binary, its CRDs and the extracted
//!   module (whose `examples/` and `docs/` the manifest-acceptance test reads).
//! - [`install_crds`] installs its CRDs. They share the group `temporal.io` with ours, so they go
//!   on a control plane of their own ([`crate::control_plane::ControlPlane::start`]), never on
//!   the shared one with our CRDs.
//! - [`GoController::start`] runs it out of cluster: env `POD_NAMESPACE` (a namespace it reads
//!   at start for its identity suffix), `CONTROLLER_IDENTITY`, a serving certificate in
//!   `$TMPDIR/k8s-webhook-server/serving-certs` (`TMPDIR` is a directory per instance), metrics
//!   and health probes on free loopback ports, leader election off (its default).
//!
//! Its webhook server always listens on `:9443` (not a flag), so only one instance can run on
//! the machine at a time; [`GoController::start`] says so instead of timing out.
//!
//! The helpers at the end write and read the Go controller's own kinds (`Connection`,
//! `WorkerDeployment`, with its field names), and wait for its status and Temporal's routing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use temporalio_client::Connection as TemporalConnection;
use temporalio_common::protos::temporal::api::enums::v1::WorkerDeploymentVersionStatus;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::certs::{Authority, Usage};
use crate::supervise::{Supervised, free_port, log_tail};

/// The API group and version of every kind the Go controller serves.
pub const GROUP: &str = "temporal.io";
pub const VERSION: &str = "v1alpha1";
/// The port its webhook server binds (controller-runtime's default; v1.8.1 has no flag for it).
pub const WEBHOOK_PORT: u16 = 9443;
/// Field manager of the writes made by these helpers.
const MANAGER: &str = "twc-go-controller-rig";
/// How long the manager may take to serve `/readyz` on a loaded 2-core machine.
const READY_DEADLINE: Duration = Duration::from_secs(60);
/// How long a graceful stop may take before the process is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Where the Go controller's build lives (the layout `tools/go-controller/build.sh` documents).
#[derive(Clone, Debug)]
pub struct GoControllerBuild {
    /// The manager binary (`./cmd` of the module).
    pub binary: PathBuf,
    /// Its CRDs, copied from `helm/temporal-worker-controller-crds/templates`.
    pub crds_dir: PathBuf,
    /// A copy of the downloaded module (`examples/`, `docs/`, `api/`, ...).
    pub module_dir: PathBuf,
    /// The pinned version, e.g. `v1.8.1`.
    pub version: String,
}

impl GoControllerBuild {
    /// Builds (or finds cached) the pinned Go controller; the script runs once per process.
    /// Blocking: call it through `spawn_blocking` from async code.
    pub fn locate() -> Result<GoControllerBuild> {
        static BUILD: OnceLock<std::result::Result<GoControllerBuild, String>> = OnceLock::new();
        BUILD
            .get_or_init(|| build_or_reuse().map_err(|e| format!("{e:#}")))
            .clone()
            .map_err(|e| anyhow!(e))
    }

    /// [`GoControllerBuild::locate`] from async code.
    pub async fn locate_async() -> Result<GoControllerBuild> {
        tokio::task::spawn_blocking(GoControllerBuild::locate).await?
    }
}

fn build_or_reuse() -> Result<GoControllerBuild> {
    let binary = crate::cached_build("go-controller")?;
    // <cache>/<version>/bin/temporal-worker-controller
    let root = binary
        .parent()
        .and_then(Path::parent)
        .context("binary path has no <version> directory")?
        .to_path_buf();
    let build = GoControllerBuild {
        version: root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        crds_dir: root.join("crds"),
        module_dir: root.join("module"),
        binary,
    };
    for path in [&build.binary, &build.crds_dir, &build.module_dir] {
        if !path.exists() {
            bail!("Go controller build incomplete: {} missing", path.display());
        }
    }
    Ok(build)
}

/// Installs the Go controller's CRDs and waits until they are Established.
pub async fn install_crds(client: &kube::Client, build: &GoControllerBuild) -> Result<()> {
    crate::control_plane::install_crds(client, &build.crds_dir).await
}

/// How to run the Go controller.
#[derive(Clone, Debug)]
pub struct GoControllerOptions {
    /// `POD_NAMESPACE`: must exist; its UID becomes the identity suffix.
    pub pod_namespace: String,
    /// `CONTROLLER_IDENTITY` (the chart sets `<release>/<release namespace>`).
    pub identity: String,
    /// `--watch-namespaces`; empty watches all namespaces.
    pub watch_namespaces: Vec<String>,
    /// More env, e.g. `ALLOWED_KINDS` or `SERVICE_ACCOUNT_NAME` as the chart sets them.
    pub extra_env: Vec<(String, String)>,
}

impl GoControllerOptions {
    /// Identity `twc-test/<pod_namespace>`, as the chart would name release `twc-test`.
    pub fn new(pod_namespace: &str) -> GoControllerOptions {
        GoControllerOptions {
            pod_namespace: pod_namespace.to_string(),
            identity: format!("twc-test/{pod_namespace}"),
            watch_namespaces: Vec::new(),
            extra_env: Vec::new(),
        }
    }
}

/// A running Go controller; killed (SIGKILL) on drop.
pub struct GoController {
    process: Option<Supervised>,
    pid: u32,
    dir: PathBuf,
    log_path: PathBuf,
    metrics_port: u16,
    health_port: u16,
    identity: String,
    ready_in: Duration,
}

impl std::fmt::Debug for GoController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoController")
            .field("pid", &self.pid)
            .field("log", &self.log_path)
            .finish()
    }
}

impl GoController {
    /// Starts the manager with `kubeconfig` and waits until its `/readyz` answers 200.
    ///
    /// Tried again (up to three times, with fresh ports) when it exits because a port was taken
    /// between the probe and its bind; any other failure is returned at once.
    pub async fn start(
        build: &GoControllerBuild,
        kubeconfig: &Path,
        options: &GoControllerOptions,
    ) -> Result<GoController> {
        let mut attempt = 1;
        loop {
            match Self::start_once(build, kubeconfig, options).await {
                Err(e) if attempt < 3 && format!("{e:#}").contains("address already in use") => {
                    tracing::warn!(attempt, error = %format!("{e:#}"), "Go controller lost a port race; starting it again");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn start_once(
        build: &GoControllerBuild,
        kubeconfig: &Path,
        options: &GoControllerOptions,
    ) -> Result<GoController> {
        if std::net::TcpListener::bind(("0.0.0.0", WEBHOOK_PORT)).is_err() {
            bail!(
                "port {WEBHOOK_PORT} is taken: the Go controller's webhook server binds it \
                 unconditionally, so another instance (or something else) is in the way"
            );
        }
        let begin = Instant::now();
        let dir = instance_dir()?;
        write_serving_cert(&dir)?;
        let log_path = dir.join("go-controller.log");
        let pid_file = dir.join("pid");
        let metrics_port = free_port()?;
        let health_port = free_port()?;
        let process = spawn(
            build,
            kubeconfig,
            options,
            &dir,
            &pid_file,
            [metrics_port, health_port],
        )?;
        let mut controller = GoController {
            process: Some(process),
            pid: 0,
            dir,
            log_path,
            metrics_port,
            health_port,
            identity: options.identity.clone(),
            ready_in: Duration::ZERO,
        };
        controller.pid = controller.read_pid(&pid_file, begin).await?;
        controller.wait_ready(begin).await?;
        controller.ready_in = begin.elapsed();
        tracing::info!(pid = controller.pid, ready_in = ?controller.ready_in, "Go controller ready");
        Ok(controller)
    }

    /// The manager's process ID (for RSS and CPU readings in `/proc`).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Where its stdout and stderr go (JSON log lines).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last few KiB of its log.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log_path)
    }

    /// `127.0.0.1:PORT` of its Prometheus metrics (controller-runtime's defaults only).
    pub fn metrics_address(&self) -> String {
        format!("127.0.0.1:{}", self.metrics_port)
    }

    /// `127.0.0.1:PORT` of its `/healthz` and `/readyz`.
    pub fn health_address(&self) -> String {
        format!("127.0.0.1:{}", self.health_port)
    }

    /// `CONTROLLER_IDENTITY` as given; Temporal sees `<this>/<UID of POD_NAMESPACE>`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// From spawn until `/readyz` answered 200.
    pub fn ready_in(&self) -> Duration {
        self.ready_in
    }

    /// An error with the log tail if the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        match self.process.as_mut().and_then(Supervised::died) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Stops it as a Deployment rollout or `helm uninstall` would (SIGTERM, then SIGKILL after
    /// a grace period) and waits for the process to end.
    pub fn stop(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.stop(STOP_GRACE);
        }
    }

    /// Kills it at once (SIGKILL), as a node failure would, and waits for the process to end.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            if self.pid != 0 {
                let _ = Command::new("kill")
                    .args(["-KILL", &self.pid.to_string()])
                    .status();
            }
            p.stop(STOP_GRACE);
        }
    }

    async fn read_pid(&mut self, pid_file: &Path, begin: Instant) -> Result<u32> {
        loop {
            if let Some(pid) = std::fs::read_to_string(pid_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                return Ok(pid);
            }
            self.check_alive()?;
            if begin.elapsed() > READY_DEADLINE {
                bail!("the Go controller wrote no pid within {READY_DEADLINE:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_ready(&mut self, begin: Instant) -> Result<()> {
        loop {
            self.check_alive()?;
            if http_get_status(&self.health_address(), "/readyz").await == Some(200) {
                return Ok(());
            }
            if begin.elapsed() > READY_DEADLINE {
                bail!(
                    "the Go controller's /readyz did not answer 200 within {READY_DEADLINE:?}; log tail:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for GoController {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh directory per instance: `TMPDIR` (so the serving certificate is its own) and the log.
fn instance_dir() -> Result<PathBuf> {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "twc-go-controller-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// The webhook server refuses to start without a certificate in
/// `$TMPDIR/k8s-webhook-server/serving-certs`; nothing calls it, so any CA will do.
fn write_serving_cert(tmpdir: &Path) -> Result<()> {
    let certs = tmpdir.join("k8s-webhook-server/serving-certs");
    std::fs::create_dir_all(&certs)?;
    let ca = Authority::new("twc-go-controller-webhook-ca")?;
    let pair = ca.issue(
        "localhost",
        None,
        &["localhost", "127.0.0.1"],
        Usage::Server,
    )?;
    std::fs::write(certs.join("tls.crt"), &pair.cert_pem)?;
    std::fs::write(certs.join("tls.key"), &pair.key_pem)?;
    Ok(())
}

/// Spawns the manager through `sh`, which writes its own PID and `exec`s the binary, so the
/// PID file names the manager itself (for SIGKILL and `/proc` readings).
fn spawn(
    build: &GoControllerBuild,
    kubeconfig: &Path,
    options: &GoControllerOptions,
    dir: &Path,
    pid_file: &Path,
    [metrics_port, health_port]: [u16; 2],
) -> Result<Supervised> {
    let mut args: Vec<String> = vec![
        "-c".into(),
        r#"echo $$ > "$1"; shift; exec "$@""#.into(),
        "go-controller".into(),
        pid_file.display().to_string(),
        "env".into(),
        format!("KUBECONFIG={}", kubeconfig.display()),
        format!("TMPDIR={}", dir.display()),
        format!("POD_NAMESPACE={}", options.pod_namespace),
        format!("CONTROLLER_IDENTITY={}", options.identity),
        // What the chart sets: the version without its `v`, recorded in Temporal's metadata.
        format!(
            "CONTROLLER_VERSION={}",
            build.version.trim_start_matches('v')
        ),
    ];
    args.extend(options.extra_env.iter().map(|(k, v)| format!("{k}={v}")));
    args.extend([
        build.binary.display().to_string(),
        format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
        format!("--health-probe-bind-address=127.0.0.1:{health_port}"),
    ]);
    if !options.watch_namespaces.is_empty() {
        args.push(format!(
            "--watch-namespaces={}",
            options.watch_namespaces.join(",")
        ));
    }
    Supervised::spawn(
        "temporal-worker-controller (Go)",
        Path::new("sh"),
        args,
        &dir.join("go-controller.log"),
    )
}

/// The status code of `GET path` on `addr` (HTTP/1.0, loopback), or `None` if there is no answer.
async fn http_get_status(addr: &str, path: &str) -> Option<u16> {
    let io = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        stream.read_to_end(&mut buf).await?;
        std::io::Result::Ok(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(2), io)
        .await
        .ok()?
        .ok()?;
    String::from_utf8_lossy(&buf)
        .lines()
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

// --- The Go controller's kinds ---------------------------------------------------------------

/// The `ApiResource` of one of its kinds (`WorkerDeployment`, `Connection`,
/// `WorkerResourceTemplate`, `TemporalWorkerDeployment`, `TemporalConnection`).
pub fn api_resource(kind: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

/// A `Connection` to a Temporal frontend without credentials.
pub fn connection_manifest(name: &str, host_port: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "Connection",
        "metadata": {"name": name},
        "spec": {"hostPort": host_port}
    })
}

/// A `WorkerDeployment` as the Go controller's docs write one: one replica of `image` polling
/// `task_queue`, `rollout` as given (e.g. `{"strategy": "AllAtOnce"}`), short sunset delays.
/// The kubelet stand-in runs any Pod whose env has `TEMPORAL_ADDRESS` as a real worker, so an
/// image like `registry.example/worker:v1` is enough.
pub fn worker_deployment_manifest(
    name: &str,
    connection: &str,
    temporal_namespace: &str,
    image: &str,
    task_queue: &str,
    rollout: Value,
) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "WorkerDeployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "worker",
                    "image": image,
                    "env": [{"name": "TEMPORAL_TASK_QUEUE", "value": task_queue}]
                }]}
            },
            "rollout": rollout,
            "sunset": {"scaledownDelay": "2s", "deleteDelay": "2s"},
            "workerOptions": {
                "connectionRef": {"name": connection},
                "temporalNamespace": temporal_namespace
            }
        }
    })
}

/// Server-side applies `manifest` (one of the Go controller's kinds) in `namespace`.
pub async fn apply(client: &kube::Client, namespace: &str, manifest: &Value) -> Result<()> {
    let kind = manifest["kind"].as_str().context("manifest without kind")?;
    let name = manifest["metadata"]["name"]
        .as_str()
        .context("manifest without metadata.name")?;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &api_resource(kind));
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(manifest),
    )
    .await
    .with_context(|| format!("applying {kind} {namespace}/{name}"))?;
    Ok(())
}

/// A `WorkerDeployment` as JSON, `None` if absent.
pub async fn get_worker_deployment(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &api_resource("WorkerDeployment"));
    Ok(api
        .get_opt(name)
        .await?
        .map(serde_json::to_value)
        .transpose()?)
}

/// Waits until the `WorkerDeployment`'s `status.currentVersion` has a build ID with status
/// `Current` (and, if given, equal to `build_id`); returns the build ID.
pub async fn wait_current_in_status(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    build_id: Option<&str>,
    timeout: Duration,
) -> Result<String> {
    // What was last seen, for the timeout's message.
    let last = &Mutex::new(Value::Null);
    let found = crate::wait::eventually(
        &format!("WorkerDeployment {namespace}/{name} status.currentVersion"),
        timeout,
        || async move {
            let wd = get_worker_deployment(client, namespace, name).await?;
            let status = wd.map(|w| w["status"].clone()).unwrap_or(Value::Null);
            let current = &status["currentVersion"];
            let id = current["buildID"]
                .as_str()
                .filter(|b| !b.is_empty())
                .filter(|id| build_id.is_none_or(|want| want == *id))
                .filter(|_| current["status"] == "Current")
                .map(str::to_string);
            if let Ok(mut l) = last.lock() {
                *l = status;
            }
            Ok(id)
        },
    )
    .await;
    found.with_context(|| format!("last status: {}", lock_text(last)))
}

/// `Debug` of what a mutex holds, for error messages.
fn lock_text<T: std::fmt::Debug>(m: &Mutex<T>) -> String {
    m.lock()
        .map(|v| format!("{:?}", *v))
        .unwrap_or_else(|_| "(poisoned)".into())
}

/// Temporal's routing for a worker deployment, as `DescribeWorkerDeployment` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TemporalRouting {
    pub current_build_id: Option<String>,
    /// Status of the current build in `version_summaries` (`Current` once routing settled).
    pub current_status: Option<String>,
    pub manager_identity: String,
    pub last_modifier_identity: String,
    /// Every build ID Temporal lists for the deployment.
    pub build_ids: Vec<String>,
}

/// Reads [`TemporalRouting`]; `None` while the worker deployment does not exist.
pub async fn temporal_routing(
    conn: &TemporalConnection,
    namespace: &str,
    deployment: &str,
) -> Result<Option<TemporalRouting>> {
    let Some(resp) = crate::observe::describe_deployment(conn, namespace, deployment).await? else {
        return Ok(None);
    };
    let Some(info) = resp.worker_deployment_info else {
        return Ok(Some(TemporalRouting::default()));
    };
    let current = info
        .routing_config
        .as_ref()
        .and_then(|rc| rc.current_deployment_version.as_ref())
        .map(|v| v.build_id.clone())
        .filter(|b| !b.is_empty());
    let status_of = |build: &str| {
        info.version_summaries
            .iter()
            .find(|s| {
                s.deployment_version
                    .as_ref()
                    .is_some_and(|v| v.build_id == build)
            })
            .and_then(|s| WorkerDeploymentVersionStatus::try_from(s.status).ok())
            .map(|s| {
                s.as_str_name()
                    .trim_start_matches("WORKER_DEPLOYMENT_VERSION_STATUS_")
                    .to_string()
            })
    };
    Ok(Some(TemporalRouting {
        current_status: current.as_deref().and_then(status_of),
        current_build_id: current,
        manager_identity: info.manager_identity.clone(),
        last_modifier_identity: info.last_modifier_identity.clone(),
        build_ids: info
            .version_summaries
            .iter()
            .filter_map(|s| s.deployment_version.as_ref().map(|v| v.build_id.clone()))
            .collect(),
    }))
}

/// Waits until Temporal routes to `build_id` as the current version with status `CURRENT`.
pub async fn wait_current_in_temporal(
    conn: &TemporalConnection,
    namespace: &str,
    deployment: &str,
    build_id: &str,
    timeout: Duration,
) -> Result<TemporalRouting> {
    let last = &Mutex::new(None::<TemporalRouting>);
    let found = crate::wait::eventually(
        &format!("Temporal to route {deployment} to {build_id} as Current"),
        timeout,
        || async move {
            let routing = temporal_routing(conn, namespace, deployment).await?;
            if let Ok(mut l) = last.lock() {
                l.clone_from(&routing);
            }
            Ok(routing.filter(|r| {
                r.current_build_id.as_deref() == Some(build_id)
                    && r.current_status.as_deref() == Some("CURRENT")
            }))
        },
    )
    .await;
    found.with_context(|| format!("last routing: {}", lock_text(last)))
}

/// The identity the Go controller uses in Temporal: `CONTROLLER_IDENTITY/<UID of POD_NAMESPACE>`.
pub async fn temporal_identity(
    client: &kube::Client,
    options: &GoControllerOptions,
) -> Result<String> {
    let ns = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .get(&options.pod_namespace)
        .await?;
    let uid = ns.metadata.uid.context("namespace without a UID")?;
    Ok(format!("{}/{uid}", options.identity))
}

/// `true` if `id` has the shape of a v1.8.1 image-based build ID for tag `tag`: `<tag>-` and
/// four characters of Kubernetes' safe-encode alphabet (its FNV-32a hash of the pod template).
pub fn is_go_build_id_for_tag(id: &str, tag: &str) -> bool {
    const SAFE: &str = "bcdfghjklmnpqrstvwxz2456789";
    id.strip_prefix(tag)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hash| hash.len() == 4 && hash.chars().all(|c| SAFE.contains(c)))
}

// --- A whole rig ------------------------------------------------------------------------------

/// How long each part of [`GoRig::start`] took.
#[derive(Clone, Copy, Debug, Default)]
pub struct RigTimings {
    pub build: Duration,
    pub control_plane: Duration,
    pub temporal: Duration,
    pub crds: Duration,
    pub controller_ready: Duration,
}

/// The Go controller on a fresh control plane of its own (its CRDs only), with a fresh Temporal
/// dev server and the kubelet stand-in. Everything stops on drop, the controller first.
///
/// The stand-in's tasks run on the runtime that called [`GoRig::start`]: keep the rig inside
/// one `#[tokio::test]` (or on a runtime that outlives the tests using it).
pub struct GoRig {
    /// `None` once taken (e.g. to stop it before another controller takes over).
    pub controller: Option<GoController>,
    pub kubelet: crate::kubelet::Kubelet,
    pub temporal: crate::temporal_server::DevServer,
    pub plane: crate::control_plane::ControlPlane,
    /// Admin client of [`GoRig::plane`].
    pub client: kube::Client,
    pub build: GoControllerBuild,
    pub options: GoControllerOptions,
    pub timings: RigTimings,
}

impl GoRig {
    /// Builds (or reuses) the Go controller, starts the control plane and the dev server in
    /// parallel, installs its CRDs, starts the stand-in and the controller (identity
    /// `twc-test/<pod namespace>`, `POD_NAMESPACE` = `go-controller-system`).
    pub async fn start() -> Result<GoRig> {
        let t = Instant::now();
        let build = GoControllerBuild::locate_async().await?;
        let build_time = t.elapsed();
        let t = Instant::now();
        let (plane, temporal) = tokio::join!(
            async {
                let plane = crate::control_plane::ControlPlane::start().await;
                (plane, t.elapsed())
            },
            async {
                let server = crate::temporal_server::DevServer::start().await;
                (server, t.elapsed())
            }
        );
        let ((plane, plane_time), (temporal, temporal_time)) = (plane, temporal);
        let (plane, temporal) = (plane?, temporal?);
        let client = plane.client().await?;
        let t = Instant::now();
        install_crds(&client, &build).await?;
        let crds_time = t.elapsed();
        let options = GoControllerOptions::new("go-controller-system");
        create_namespace(&client, &options.pod_namespace).await?;
        let kubelet = crate::kubelet::Kubelet::start(client.clone()).await?;
        let controller = GoController::start(&build, plane.kubeconfig_path(), &options).await?;
        let timings = RigTimings {
            build: build_time,
            control_plane: plane_time,
            temporal: temporal_time,
            crds: crds_time,
            controller_ready: controller.ready_in(),
        };
        Ok(GoRig {
            controller: Some(controller),
            kubelet,
            temporal,
            plane,
            client,
            build,
            options,
            timings,
        })
    }

    /// A fresh Kubernetes namespace and Temporal namespace (both named `<prefix>-<pid>-<n>`)
    /// with a `Connection` named `temporal` to the rig's dev server.
    pub async fn case(&self, prefix: &str) -> Result<RigCase> {
        let name = crate::names::unique(prefix);
        create_namespace(&self.client, &name).await?;
        self.temporal.create_namespace(&name).await?;
        apply(
            &self.client,
            &name,
            &connection_manifest("temporal", &self.temporal.address()),
        )
        .await?;
        Ok(RigCase {
            namespace: name.clone(),
            temporal_namespace: name,
            connection: "temporal".into(),
        })
    }

    /// The controller's log tail, or a note that it is not running.
    pub fn controller_log_tail(&self) -> String {
        self.controller
            .as_ref()
            .map(GoController::log_tail)
            .unwrap_or_else(|| "(the Go controller is not running)".into())
    }
}

/// One test's namespaces in a [`GoRig`].
#[derive(Clone, Debug)]
pub struct RigCase {
    pub namespace: String,
    pub temporal_namespace: String,
    /// Name of the `Connection` in [`RigCase::namespace`].
    pub connection: String,
}

impl RigCase {
    /// Temporal's worker deployment name for `WorkerDeployment` `name`: `<namespace>/<name>`.
    pub fn temporal_deployment(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }
}

/// Creates namespace `name` (an existing one is fine).
pub async fn create_namespace(client: &kube::Client, name: &str) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match Api::<Namespace>::all(client.clone())
        .create(&kube::api::PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating namespace {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_build_id_shape() {
        assert!(is_go_build_id_for_tag("v1-f645", "v1"));
        assert!(is_go_build_id_for_tag("v1.2.3-4b9z", "v1.2.3"));
        // Ours (tag + 10 hex), a wrong tag, a wrong length, characters outside the alphabet.
        assert!(!is_go_build_id_for_tag("v1-0123456789", "v1"));
        assert!(!is_go_build_id_for_tag("v2-f645", "v1"));
        assert!(!is_go_build_id_for_tag("v1-f64", "v1"));
        assert!(!is_go_build_id_for_tag("v1-f6a5", "v1"));
    }

    #[test]
    fn plurals_of_its_kinds() {
        assert_eq!(api_resource("WorkerDeployment").plural, "workerdeployments");
        assert_eq!(api_resource("Connection").plural, "connections");
        assert_eq!(
            api_resource("WorkerResourceTemplate").plural,
            "workerresourcetemplates"
        );
    }
}
