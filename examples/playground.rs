//! The main job: a local playground on one machine. Starts a real Kubernetes control plane
//! (etcd + kube-apiserver + kube-controller-manager, built once from pinned Go modules by
//! `.ci/setup`), a real Temporal dev server, the controller and the pod-level kubelet stand-in
//! (one real versioned Rust SDK worker per Pod), applies `examples/manifests` for v1, waits until it is
//! Ready, applies v2 with a Progressive strategy, and prints every status transition until v2
//! is Current and v1 is drained and gone.
//!
//! `--quick` (or `PLAYGROUND_QUICK=1`), what CI runs: sunset delays of 1 s, and each milestone (v1
//! Current, v2 Promoted (Current), v1 scaled down, v1 deleted) must be reached within its own
//! deadline, the whole run within [`QUICK_TOTAL`]; otherwise it exits non-zero naming the milestone
//! and the last status seen. Without it, each wait allows [`DEADLINE`].
//!
//! Against a real cluster: `PLAYGROUND_KUBECONFIG=~/.kube/config TEMPORAL_ADDRESS=host:7233
//! cargo run --example playground` (the worker image in the manifests must exist; set
//! `PLAYGROUND_EXTERNAL_CONTROLLER=1` when the Helm chart already runs the controller).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::Value;
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::api::twd::VersionStatus;

const NAMESPACE: &str = "default";
const NAME: &str = "hello-worker";
const DEADLINE: Duration = Duration::from_secs(300);
/// The whole quick run, start-up of Kubernetes and Temporal included.
const QUICK_TOTAL: Duration = Duration::from_secs(240);

/// What the playground waits for, in order.
#[derive(Clone, Copy)]
enum Milestone {
    V1Current,
    V2Current,
    V1ScaledDown,
    V1Deleted,
}

impl Milestone {
    fn name(self) -> &'static str {
        match self {
            Milestone::V1Current => "v1 Current",
            Milestone::V2Current => "v2 Promoted (Current)",
            Milestone::V1ScaledDown => "v1 scaled down",
            Milestone::V1Deleted => "v1 deleted",
        }
    }
}

/// Normal or quick mode: the deadlines and sunset delays.
#[derive(Clone, Copy)]
struct Pace {
    quick: bool,
}

impl Pace {
    fn from_args() -> Result<Pace> {
        let mut quick = std::env::var("PLAYGROUND_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        for arg in std::env::args().skip(1) {
            match arg.as_str() {
                "--quick" => quick = true,
                other => bail!("unknown argument {other:?}; usage: playground [--quick]"),
            }
        }
        Ok(Pace { quick })
    }

    /// Each bound has room for a loaded 2-core CI machine (measured: README, "CI budget").
    fn deadline(self, milestone: Milestone) -> Duration {
        if !self.quick {
            return DEADLINE;
        }
        Duration::from_secs(match milestone {
            Milestone::V1Current => 90,
            Milestone::V2Current => 60,
            Milestone::V1ScaledDown => 45,
            Milestone::V1Deleted => 30,
        })
    }

    /// Quick mode shortens the manifests' 5 s sunset delays so that v1 goes away sooner.
    fn sunset_delay(self) -> Option<&'static str> {
        self.quick.then_some("1s")
    }

    /// The error for a milestone not reached in time, with what was seen last.
    fn missed(self, milestone: Milestone, last_seen: &str) -> anyhow::Error {
        let mode = if self.quick {
            "playground --quick: "
        } else {
            ""
        };
        anyhow::anyhow!(
            "{mode}milestone \"{}\" not reached within {:?}; last seen: {last_seen}",
            milestone.name(),
            self.deadline(milestone)
        )
    }
}

/// What the playground started locally; dropping it stops them (Temporal first).
#[derive(Default)]
struct Local {
    _temporal: Option<test_harness::temporal_server::DevServer>,
    _plane: Option<test_harness::control_plane::ControlPlane>,
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let started = Instant::now();
    let pace = Pace::from_args()?;
    if !pace.quick {
        return run(pace, started).await;
    }
    match tokio::time::timeout(QUICK_TOTAL, run(pace, started)).await {
        Ok(result) => result?,
        Err(_) => bail!("playground --quick: not finished within {QUICK_TOTAL:?}"),
    }
    println!(
        "playground --quick: every milestone reached in {:.1?} (v1 Current, v2 Promoted (Current), v1 scaled down, v1 deleted)",
        started.elapsed()
    );
    Ok(())
}

/// The playground itself; dropping it part-way stops what it started.
async fn run(pace: Pace, started: Instant) -> Result<()> {
    let manifests = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/manifests");

    let (local, client, temporal_address) = kubernetes_and_temporal(started).await?;
    // The pod-level kubelet stand-in runs one real worker per Pod (local control plane only).
    let kubelet = match local._plane {
        Some(_) => Some(test_harness::kubelet::Kubelet::start(client.clone()).await?),
        None => None,
    };
    let controller = start_controller(&client).await?;

    let watcher = tokio::spawn(print_transitions(client.clone(), started));
    let rollout = Rollout {
        client: &client,
        manifests: &manifests,
        temporal_address: &temporal_address,
        started,
        pace,
    };
    let v1 = rollout.v1_current().await?;
    let v2 = rollout.v2_current(&v1).await?;
    step(
        started,
        &format!("v2 ({v2}) is Current; waiting for v1 to drain and go away"),
    );
    wait_scaled_down(&client, &v1, pace).await?;
    step(started, "v1 scaled to 0");
    wait_retired(&client, &v1, pace).await?;
    step(
        started,
        &format!("v1 drained, scaled to 0 and deleted; rollout of {v2} complete"),
    );

    watcher.abort();
    if let Some(c) = controller {
        print_status_command(&c).await?;
        c.stop().await;
    }
    if let Some(k) = kubelet {
        k.shutdown().await;
    }
    Ok(())
}

/// Kubernetes and Temporal: the local control plane and a dev server, or a real cluster.
async fn kubernetes_and_temporal(started: Instant) -> Result<(Local, kube::Client, String)> {
    if let Some(path) = std::env::var_os("PLAYGROUND_KUBECONFIG") {
        let kc = kube::config::Kubeconfig::read_from(PathBuf::from(path))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
        let address = std::env::var("TEMPORAL_ADDRESS")
            .context("set TEMPORAL_ADDRESS (host:port) for a real cluster")?;
        return Ok((Local::default(), kube::Client::try_from(config)?, address));
    }
    step(
        started,
        "starting Kubernetes (etcd, kube-apiserver, kube-controller-manager) and a Temporal dev server",
    );
    let (plane, temporal) = tokio::try_join!(
        test_harness::control_plane::ControlPlane::start(),
        test_harness::temporal_server::DevServer::start()
    )?;
    let client = plane.client().await?;
    let crds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crds");
    test_harness::control_plane::install_crds(&client, &crds).await?;
    println!(
        "  kubeconfig: {} (Kubernetes ready in {:.1?})",
        plane.kubeconfig_path().display(),
        plane.started_in()
    );
    println!("  Temporal:   {}", temporal.address());
    let address = temporal.address();
    let local = Local {
        _temporal: Some(temporal),
        _plane: Some(plane),
    };
    Ok((local, client, address))
}

/// The controller in-process, unless `PLAYGROUND_EXTERNAL_CONTROLLER` says one already runs.
async fn start_controller(
    client: &kube::Client,
) -> Result<Option<temporal_worker_controller::run::Running>> {
    if std::env::var_os("PLAYGROUND_EXTERNAL_CONTROLLER").is_some() {
        return Ok(None);
    }
    // The flags a user passes to `temporal-worker-controller run`, checked as the binary checks
    // them.
    let flags = [
        "--http-addr=127.0.0.1:0",
        "--fast-poll=300ms",
        "--idle-interval=10s",
    ];
    let opts = temporal_worker_controller::run::args::RunArgs::from_flags(flags)?.options()?;
    let running = temporal_worker_controller::run::start(client.clone(), opts).await?;
    println!(
        "  controller: metrics and status API on http://{}",
        running.http_addr
    );
    Ok(Some(running))
}

/// Applies the example manifests and waits for each version to become Current.
struct Rollout<'a> {
    client: &'a kube::Client,
    manifests: &'a Path,
    temporal_address: &'a str,
    started: Instant,
    pace: Pace,
}

impl Rollout<'_> {
    async fn apply(&self, file: &str) -> Result<()> {
        apply_file(
            self.client,
            &self.manifests.join(file),
            self.temporal_address,
            self.pace.sunset_delay(),
        )
        .await
    }

    /// The Connection and v1 (AllAtOnce); returns v1's build ID once it is Current.
    async fn v1_current(&self) -> Result<String> {
        step(self.started, "applying the Connection and v1 (AllAtOnce)");
        self.apply("connection.yaml").await?;
        self.apply("worker-v1.yaml").await?;
        let twd = wait(self.client, self.pace, Milestone::V1Current, |t| {
            ready(t)
                && t.status
                    .as_ref()
                    .and_then(|s| s.current_version.as_ref())
                    .is_some()
        })
        .await?;
        let v1 = twd
            .status
            .and_then(|s| s.current_version)
            .map(|v| v.build_id)
            .context("no current version")?;
        step(self.started, &format!("v1 ({v1}) is Current"));
        Ok(v1)
    }

    /// v2 (Progressive); returns its build ID once it replaced `v1` as Current.
    async fn v2_current(&self, v1: &str) -> Result<String> {
        step(
            self.started,
            "applying v2 (Progressive: 25% for 5s, 50% for 5s)",
        );
        self.apply("worker-v2.yaml").await?;
        let twd = wait(self.client, self.pace, Milestone::V2Current, |t| {
            ready(t)
                && t.status
                    .as_ref()
                    .and_then(|s| s.current_version.as_ref())
                    .is_some_and(|c| c.build_id != v1)
        })
        .await?;
        twd.status
            .and_then(|s| s.current_version)
            .map(|v| v.build_id)
            .context("no current version")
    }
}

/// Waits until `v1`'s Deployment is scaled to 0: seen at 0 replicas, or (when the delete
/// followed too fast to see) its `ScaledDown` event.
async fn wait_scaled_down(client: &kube::Client, v1: &str, pace: Pace) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    let v1_deployment = temporal_worker_controller::build_id::deployment_name(NAME, v1);
    let deadline = Instant::now() + pace.deadline(Milestone::V1ScaledDown);
    loop {
        let replicas = deployments
            .get_opt(&v1_deployment)
            .await?
            .map(|d| d.spec.replicas.unwrap_or(1));
        if replicas == Some(0) {
            return Ok(());
        }
        let event_seen = events
            .list(&Default::default())
            .await?
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("ScaledDown")
                    && e.note.as_deref().is_some_and(|n| n.contains(v1))
            });
        if event_seen {
            return Ok(());
        }
        if Instant::now() > deadline {
            let seen = match replicas {
                Some(r) => format!("Deployment {v1_deployment} at {r} replicas"),
                None => format!("Deployment {v1_deployment} gone without a ScaledDown event"),
            };
            return Err(pace.missed(Milestone::V1ScaledDown, &seen));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until `v1`'s Deployment is gone and the TWD no longer lists it.
async fn wait_retired(client: &kube::Client, v1: &str, pace: Pace) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let v1_deployment = temporal_worker_controller::build_id::deployment_name(NAME, v1);
    let deadline = Instant::now() + pace.deadline(Milestone::V1Deleted);
    loop {
        let twd: TemporalWorkerDeployment =
            TemporalWorkerDeployment::api(client.clone(), NAMESPACE, KindSet::Canonical)
                .get(NAME)
                .await?;
        let still_listed = twd
            .status
            .iter()
            .flat_map(|s| s.deprecated_versions.iter())
            .any(|d| d.version.build_id == v1);
        if deployments.get_opt(&v1_deployment).await?.is_none() && !still_listed {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(pace.missed(Milestone::V1Deleted, &summary(&twd)));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What an operator sees: the `status` command over the status API.
async fn print_status_command(c: &temporal_worker_controller::run::Running) -> Result<()> {
    let api_url = format!("http://{}", c.http_addr);
    let view = temporal_worker_controller::cli::status::fetch(
        &temporal_worker_controller::cli::status::StatusArgs {
            namespace: Some(NAMESPACE.into()),
            name: Some(NAME.into()),
            api_url: Some(api_url.clone()),
            ..Default::default()
        },
    )
    .await?;
    println!("\n$ temporal-worker-controller status -n {NAMESPACE} {NAME} --api-url {api_url}");
    print!(
        "{}",
        temporal_worker_controller::cli::status::render(&view, jiff::Timestamp::now())
    );
    Ok(())
}

fn step(started: Instant, what: &str) {
    println!("[{:>6.1}s] == {what}", started.elapsed().as_secs_f64());
}

fn ready(t: &TemporalWorkerDeployment) -> bool {
    let Some(s) = &t.status else { return false };
    s.observed_generation == t.metadata.generation
        && s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

async fn wait(
    client: &kube::Client,
    pace: Pace,
    milestone: Milestone,
    pred: impl Fn(&TemporalWorkerDeployment) -> bool,
) -> Result<TemporalWorkerDeployment> {
    let api: Api<TemporalWorkerDeployment> =
        TemporalWorkerDeployment::api(client.clone(), NAMESPACE, KindSet::Canonical);
    let deadline = Instant::now() + pace.deadline(milestone);
    let mut last_seen = format!("no {NAME} yet");
    loop {
        match api.get_opt(NAME).await? {
            Some(t) if pred(&t) => return Ok(t),
            Some(t) => last_seen = summary(&t),
            None => {}
        }
        if Instant::now() > deadline {
            return Err(pace.missed(milestone, &last_seen));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Server-side applies every document of a manifest file, filling in `${TEMPORAL_ADDRESS}` and,
/// when given, a worker deployment's sunset delays.
async fn apply_file(
    client: &kube::Client,
    path: &std::path::Path,
    temporal_address: &str,
    sunset_delay: Option<&str>,
) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let text = text.replace("${TEMPORAL_ADDRESS}", temporal_address);
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let mut obj: Value = serde::Deserialize::deserialize(doc)?;
        if let Some(delay) = sunset_delay
            && obj["kind"] == "WorkerDeployment"
        {
            obj["spec"]["sunset"]["scaledownDelay"] = delay.into();
            obj["spec"]["sunset"]["deleteDelay"] = delay.into();
        }
        let api_version = obj["apiVersion"].as_str().context("apiVersion")?;
        let kind = obj["kind"].as_str().context("kind")?;
        let name = obj["metadata"]["name"].as_str().context("metadata.name")?;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let plural = format!("{}s", kind.to_lowercase());
        let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
        api.patch(
            name,
            &PatchParams::apply("playground").force(),
            &Patch::Apply(&obj),
        )
        .await?;
    }
    Ok(())
}

/// Prints one line whenever what a human would care about changes.
async fn print_transitions(client: kube::Client, started: Instant) {
    let api: Api<TemporalWorkerDeployment> =
        TemporalWorkerDeployment::api(client, NAMESPACE, KindSet::Canonical);
    let stream = kube::runtime::watcher::watch_object(api, NAME);
    let mut stream = std::pin::pin!(stream);
    let mut last = String::new();
    while let Some(event) = stream.next().await {
        let Ok(Some(twd)) = event else { continue };
        let line = summary(&twd);
        if line != last {
            println!("[{:>6.1}s] {line}", started.elapsed().as_secs_f64());
            last = line;
        }
    }
}

fn summary(t: &TemporalWorkerDeployment) -> String {
    let Some(s) = &t.status else {
        return format!(
            "generation {} (no status yet)",
            t.metadata.generation.unwrap_or(0)
        );
    };
    let ready = s.conditions.iter().find(|c| c.type_ == "Ready");
    let mut line = format!(
        "gen {}/{} Ready={} ({})",
        s.observed_generation.unwrap_or(0),
        t.metadata.generation.unwrap_or(0),
        ready.map(|c| c.status.as_str()).unwrap_or("?"),
        ready.map(|c| c.reason.as_str()).unwrap_or("?"),
    );
    if let Some(target) = &s.target_version {
        line.push_str(&format!(
            " target={} {}",
            target.version.build_id,
            word(target.version.status)
        ));
        if let Some(p) = target.ramp_percentage.filter(|p| *p > 0.0) {
            line.push_str(&format!(" {p}%"));
        }
        if let Some(step) = target.current_step {
            // `currentStep` is numbered from 1 already.
            line.push_str(&format!(" step {step}"));
        }
    }
    if let Some(current) = &s.current_version {
        line.push_str(&format!(" current={}", current.build_id));
    }
    for d in &s.deprecated_versions {
        line.push_str(&format!(
            " old={} {} replicas={}",
            d.version.build_id,
            word(d.version.status),
            d.version.replicas.unwrap_or(0)
        ));
    }
    line
}

fn word(s: VersionStatus) -> String {
    format!("{s:?}")
}
