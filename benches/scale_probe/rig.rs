//! One fresh world per scenario and controller: a control plane with the controller's own
//! CRDs, a Temporal dev server (with its metrics endpoint), the kubelet stand-in (its worker
//! Pods on one shared worker host unless `TWC_PROBE_WORKERS=threads`), the
//! scenario's namespaces (Kubernetes `bench`, `bench-1`, …, each with Connection `temporal`;
//! Temporal `bench`, `bench-t1`, …), and the controller under test as a process of its own,
//! authenticated as [`CONTROLLER_USER`] so that the audit log tells its requests apart.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use test_harness::control_plane::{self, ControlPlane};
use test_harness::go_controller::{self, GoController, GoControllerBuild, GoControllerOptions};
use test_harness::kubelet::{Kubelet, KubeletOptions};
use test_harness::temporal_server::DevServer;

use crate::ground::{CONTROLLER_USER, SYSTEM_NS};

/// The dev server's per-namespace limits, raised so that a fleet fits:
/// - Temporal refuses the pollers of more than 100 worker deployments per namespace by default
///   (`matching.maxDeployments`); the burst scenario needs 200, a fleet of 10,000 over
///   [`TEMPORAL_NAMESPACES`](crate::ground::TEMPORAL_NAMESPACES) namespaces 2,500 each;
/// - the frontend admits 1,200 concurrent long polls per namespace (`frontend.namespaceCount`),
///   fewer than the pollers of a few hundred live workers.
///
/// Request rates are left at the server's defaults: both controllers meet the same limits.
const TEMPORAL_CONFIG: &[&str] = &[
    "matching.maxDeployments=20000",
    "frontend.namespaceCount=20000",
];
/// How long our controller may take to answer `/readyz` on a loaded machine.
const READY_DEADLINE: Duration = Duration::from_secs(60);

/// Which controller a rig runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// This repository's controller, the binary Cargo built for this bench.
    Ours,
    /// The Go temporal-worker-controller v1.8.1 (tools/go-controller).
    Go,
}

impl Which {
    pub fn label(self) -> &'static str {
        match self {
            Which::Ours => "ours",
            Which::Go => "Go v1.8.1",
        }
    }
}

/// The controller process under test.
pub enum Controller {
    Ours(OursProcess),
    Go(GoController),
}

impl Controller {
    pub fn pid(&self) -> u32 {
        match self {
            Controller::Ours(p) => p.pid,
            Controller::Go(g) => g.pid(),
        }
    }

    /// From spawn until its readiness endpoint answered 200.
    pub fn ready_in(&self) -> Duration {
        match self {
            Controller::Ours(p) => p.ready_in,
            Controller::Go(g) => g.ready_in(),
        }
    }

    /// Our controller's HTTP address (for its own request counters).
    pub fn ours_http(&self) -> Option<SocketAddr> {
        match self {
            Controller::Ours(p) => Some(p.http),
            Controller::Go(_) => None,
        }
    }

    pub fn check_alive(&mut self) -> Result<()> {
        match self {
            Controller::Ours(p) => match p.child.try_wait()? {
                Some(status) => bail!(
                    "our controller exited ({status}); log tail:\n{}",
                    test_harness::supervise::log_tail(&p.log)
                ),
                None => Ok(()),
            },
            Controller::Go(g) => g.check_alive(),
        }
    }
}

/// Our controller as a child process; killed on drop.
pub struct OursProcess {
    child: tokio::process::Child,
    pid: u32,
    http: SocketAddr,
    log: PathBuf,
    ready_in: Duration,
}

/// Everything one scenario runs on. Dropped in field order: the controller first.
pub struct Rig {
    pub controller: Controller,
    /// Binds and runs the Pods; its readiness log is a latency clock.
    pub kubelet: Kubelet,
    pub temporal: DevServer,
    pub plane: ControlPlane,
    /// Admin client (its requests are not the controller's).
    pub client: kube::Client,
    /// Wall clock (ms since the epoch) just before the controller process was spawned.
    pub spawned_ms: f64,
}

impl Rig {
    /// Starts a fresh rig for `which` (the Go controller's build comes from its cache), with
    /// the namespaces of objects `0..objects` ([`crate::ground::namespaces`]: each Kubernetes
    /// one with its `Connection`) and the `preload` manifests applied before the controller
    /// starts (a cold start).
    pub async fn start(which: Which, objects: usize, preload: &[serde_json::Value]) -> Result<Rig> {
        let go_build = match which {
            Which::Go => Some(GoControllerBuild::locate_async().await?),
            Which::Ours => None,
        };
        let (plane, temporal) = tokio::join!(
            ControlPlane::start(),
            DevServer::start_with(TEMPORAL_CONFIG)
        );
        let (plane, temporal) = (plane?, temporal?);
        let client = plane.client().await?;
        match &go_build {
            Some(build) => go_controller::install_crds(&client, build).await?,
            None => control_plane::install_crds(&client, &control_plane::repo_crds_dir()).await?,
        }
        let (kube_namespaces, temporal_namespaces) = crate::ground::namespaces(objects);
        go_controller::create_namespace(&client, SYSTEM_NS).await?;
        // Both controllers serve the Go controller's `Connection` kind.
        let connection = go_controller::connection_manifest("temporal", &temporal.address());
        for ns in &kube_namespaces {
            go_controller::create_namespace(&client, ns).await?;
            go_controller::apply(&client, ns, &connection).await?;
        }
        for ns in &temporal_namespaces {
            temporal.create_namespace(ns).await?;
        }
        // Hundreds of live workers fit only on the shared worker host (issue 52; the kubelet
        // module docs say what it gives up); `TWC_PROBE_WORKERS=threads` gives each its thread.
        let options = KubeletOptions {
            shared_worker_host: std::env::var("TWC_PROBE_WORKERS").as_deref() != Ok("threads"),
            ..Default::default()
        };
        let kubelet = Kubelet::start_with(client.clone(), options).await?;
        crate::ground::apply_all(&client, preload.iter().cloned()).await?;
        let kubeconfig = plane.user_kubeconfig(CONTROLLER_USER, Some("system:masters"))?;
        let spawned_ms = crate::ground::now_ms();
        let controller = match go_build {
            Some(build) => {
                let options = GoControllerOptions::new(SYSTEM_NS);
                Controller::Go(GoController::start(&build, &kubeconfig, &options).await?)
            }
            None => Controller::Ours(start_ours(&kubeconfig, plane.dir()).await?),
        };
        Ok(Rig {
            controller,
            kubelet,
            temporal,
            plane,
            client,
            spawned_ms,
        })
    }
}

/// Our controller at the chart's defaults (leader election on), out of cluster.
async fn start_ours(kubeconfig: &Path, dir: &Path) -> Result<OursProcess> {
    let http: SocketAddr =
        format!("127.0.0.1:{}", test_harness::supervise::free_port()?).parse()?;
    // `TWC_PROBE_LOG_DIR` keeps the log after the rig is gone (the rig's directory is not).
    let log = match std::env::var_os("TWC_PROBE_LOG_DIR") {
        Some(keep) => PathBuf::from(keep).join(format!(
            "controller-{}.log",
            dir.file_name().and_then(|n| n.to_str()).unwrap_or("rig")
        )),
        None => dir.join("controller.log"),
    };
    let out = std::fs::File::create(&log)?;
    let begin = Instant::now();
    let binary = env!("CARGO_BIN_EXE_temporal-worker-controller");
    // A memory profiler can wrap the controller (e.g. `TWC_PROBE_WRAP="heaptrack -o /tmp/twc"`);
    // RSS and CPU then describe the wrapper, so only the profile is worth reading.
    let mut command = match std::env::var("TWC_PROBE_WRAP") {
        Ok(wrap) if !wrap.trim().is_empty() => {
            let mut words = wrap.split_whitespace();
            let mut command = tokio::process::Command::new(words.next().unwrap_or(binary));
            command.args(words).arg(binary);
            command
        }
        _ => tokio::process::Command::new(binary),
    };
    let child = command
        .args(["run", "--http-addr", &http.to_string(), "--leader-elect"])
        .args(["--lease-namespace", SYSTEM_NS])
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .context("spawning our controller")?;
    let pid = child.id().context("our controller has no pid")?;
    let mut process = OursProcess {
        child,
        pid,
        http,
        log,
        ready_in: Duration::ZERO,
    };
    loop {
        if let Some(status) = process.child.try_wait()? {
            bail!(
                "our controller exited ({status}); log tail:\n{}",
                test_harness::supervise::log_tail(&process.log)
            );
        }
        let ready = test_harness::loopback_http::get(http, "/readyz", "text/plain", None).await;
        if matches!(ready, Ok((200, _))) {
            process.ready_in = begin.elapsed();
            return Ok(process);
        }
        if begin.elapsed() > READY_DEADLINE {
            bail!("our controller not ready within {READY_DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
