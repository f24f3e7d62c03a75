//! A pod-level kubelet stand-in for the real control plane ([`crate::control_plane`]), which
//! has neither a scheduler nor a kubelet. It is one Node, its kubelet and the scheduler:
//!
//! - **Node.** Registers Node `twc-kubelet-<pid>-<n>` (Ready, `127.0.0.1`, a `podCIDR`), removes
//!   the `node.kubernetes.io/not-ready` taint the API server puts on new Nodes (the
//!   node-lifecycle controller's job, which is not running), renews its Lease in
//!   `kube-node-lease` and refreshes the Ready condition's heartbeat every 10 s.
//! - **Scheduler.** Binds every Pod that has no `spec.nodeName` and whose `spec.schedulerName`
//!   is `default-scheduler` (or empty) to this Node through `pods/binding`, unless its
//!   `nodeSelector` asks for a label the Node lacks (it has `kubernetes.io/hostname`, `os`,
//!   `arch`): such a Pod stays `Pending`, unbound, with `PodScheduled=False/Unschedulable` and
//!   the scheduler's message, as a real scheduler leaves it (never retried: the Node does not
//!   change). It ignores resources, taints and affinity.
//! - **Kubelet.** For every Pod bound to this Node, a per-Pod actor (fed by one watch, no
//!   per-Pod polling of the API) runs the first container and reports through `pods/status`
//!   what a kubelet would show:
//!   - The container is configured only from the Pod as rendered: `env` (`value` with `$(VAR)`
//!     expansion, `valueFrom.secretKeyRef` / `configMapKeyRef`, `fieldRef` for
//!     `metadata.name|namespace|uid|labels|annotations`, `spec.nodeName|serviceAccountName`,
//!     `status.podIP|hostIP`), `envFrom` (Secrets and ConfigMaps, with `prefix`) and `secret` /
//!     `configMap` volumes mounted into it (each key at `<mountPath>/<key>`, `items`,
//!     `subPath`), so that e.g. `TEMPORAL_TLS_CLIENT_CERT_PATH` and
//!     `TEMPORAL_TLS_SERVER_CA_CERT_PATH` resolve like in a real Pod (the worker reads its
//!     variables as the SDK's envconfig does: [`crate::worker`]).
//!     Secrets and ConfigMaps are read from watch caches.
//!   - A Pod whose first container's env has `TEMPORAL_ADDRESS` is a **worker Pod**: its
//!     container is one real Temporal worker ([`crate::worker`]: its own thread, tokio runtime,
//!     SDK runtime and connection; or, with [`KubeletOptions::shared_worker_host`], one SDK
//!     worker on a shared host, below), identity `1@<pod name>` (the SDK's `pid@hostname`). It is `Running` as soon as the worker thread
//!     starts and `Ready` only once Temporal lists this worker's identity as a poller of its
//!     task queue (with a poll time after the start), checked by one shared prober with one
//!     `DescribeTaskQueue` per task queue every 500 ms while some Pod waits for it.
//!     Readiness is established once per container start: afterwards the Pod stays Ready
//!     until its worker ends (no periodic probe).
//!   - Any other Pod is a **generic workload**: its container starts and is Ready at once and
//!     runs until the Pod is deleted (so plain Deployments become available).
//!   - **Images of the rig's registry** ([`KubeletOptions::registry`], [`crate::registry`]) are
//!     pulled and run from their own root file system as process Pods (`kubelet/image.rs`,
//!     `kubelet/container_root.rs`): `imagePullPolicy` honoured, a missing image fails as below.
//!   - **Other images** are not pulled, except that an image whose registry host is a reserved name
//!     that never resolves (`registry.invalid/...`, RFC 2606), which fails for a real kubelet
//!     too, fails to pull: the container waits in `ErrImagePull` (the resolver's message) for
//!     1 s, then in `ImagePullBackOff` (`Back-off pulling image "..."`) for a back-off of 1 s
//!     doubling up to 30 s (a kubelet: 10 s to 5 min), then tries again. The pull comes before
//!     the env is resolved, as in a kubelet.
//!   - A missing Secret/ConfigMap (or key) of a volume keeps the Pod `Pending` with the
//!     container waiting in `ContainerCreating`; of an env var, `CreateContainerConfigError`
//!     (message like `secret "x" not found`). Both start as soon as the object appears.
//!   - A worker that ends (cannot connect, bad config, namespace unknown, …) is a container that
//!     exited (code 1, reason `Error`, or 0 / `Completed`): `lastState.terminated`, the state
//!     waiting in `CrashLoopBackOff`, and a restart after a back-off of 1 s doubling up to 30 s
//!     (a kubelet: 10 s to 5 min), which `restartCount` counts. `restartPolicy` `Never` /
//!     `OnFailure` end the Pod in `Succeeded` / `Failed` instead.
//!   - When a Pod gets a `deletionTimestamp` its worker is stopped (gracefully, within the grace
//!     period), the terminated container status is written, and the deletion is finished with
//!     `gracePeriodSeconds: 0` and a UID precondition, as a kubelet does.
//!
//! What of a kubelet it skips: images of other registries (not pulled; `image` is only echoed,
//! except the unresolvable registry above; no `imagePullSecrets`), a container runtime for
//! anything but process Pods, cgroups, resource limits and eviction, probes (readiness is "the worker polls"),
//! restarts of anything but the worker thread, every container but the first (sidecars and
//! init containers are reported as running / completed at once), logs, exec, attach, port
//! forwarding, `hostNetwork`/ports, volumes other than Secret and ConfigMap (projected
//! ServiceAccount tokens, `emptyDir`, … are not mounted), `resourceFieldRef`, admission
//! (capacity; node selectors are judged by the scheduler above), static Pods, Events, and status updates of Pods after the
//! stand-in is shut down (the Node and its Pods then look like a kubelet that vanished).
//! Pod IPs come from `10.88.0.0/16` but nothing listens on them; workers dial from loopback.
//! Process Pods reach Services by name only: their `/etc/hosts` maps every Service's name to
//! loopback (`kubelet/controller_pod.rs`), standing in for cluster DNS and kube-proxy.
//!
//! **Process Pods**: a Pod whose first container's image is one of the rig's registry runs that
//! image (its root, entrypoint, user); one whose image the test maps to a local binary
//! ([`KubeletOptions::images`]) runs that binary on the machine's root. Either is a process with the Pod's args, env, ServiceAccount token, mounted Secrets and readiness probe,
//! and runs to completion under `restartPolicy: Never` (the chart's `helm test` Pod, the same
//! image with the `probe` subcommand); see `kubelet/controller_pod.rs` for what that covers and
//! skips.
//!
//! One stand-in per cluster: a second one would race the first for pending Pods. Its tasks and
//! Pod actors run on the runtime that called [`Kubelet::start`], so a stand-in shared by several
//! `#[tokio::test]`s belongs on a runtime of its own (with a client built there).
//!
//! **Shared worker host** ([`KubeletOptions::shared_worker_host`], [`crate::worker_host`]): every
//! worker Pod of the stand-in is one SDK `Worker` on one host thread over one 2-thread tokio
//! runtime and one SDK runtime, its connection shared with up to 50 other Pods of the same
//! connection settings (never with a replica of its own version: the SDK refuses two workers of
//! one namespace, task queue and build ID on a connection). Each Pod keeps its identity
//! (`1@<pod name>`, on every poll), task queue, version and Pinned default, its own pollers with
//! the SDK's normal long-poll timeout, its sticky queue, readiness (Ready only once Temporal lists
//! its identity as a poller), stop, polling pause and failure → `CrashLoopBackOff`. What a real
//! Pod has that it does not: a process of its own (a stuck or busy worker here slows the other
//! Pods on the host thread; one that panics takes the host down), its own TCP/HTTP/2
//! connection (Temporal sees up to 50 Pods' polls on one connection, from one address), its own
//! SDK runtime (the 60 s worker heartbeat goes out once per connection and Temporal namespace
//! for all its workers, with the host's process id and host name, instead of once per Pod),
//! and its own CPU and memory. A failed worker retires its connection from new Pods (a crashed
//! process takes its connection along) and a connection closes with its last worker. What the
//! controller sees (pollers, versions, Pods) is the same; per-worker costs are not.
//!
//! [`Kubelet::set_polling`] stops (and resumes) the polling of a Deployment's workers while
//! their Pods stay Ready: a worker alive in its Pod but absent from Temporal.
//!
//! [`Kubelet::running_workers`] / [`Kubelet::worker_configs`] see the workers of Pods whose
//! controlling owner is ReplicaSet `<deployment>-<pod-template-hash>` (what
//! kube-controller-manager creates), counting a worker from its construction (before it is
//! Ready) until it has stopped.
//! [`KubeletOptions::trusted_ca_pem`] stands for the CA bundle baked into the worker image: it
//! goes into every [`WorkerConfig`] as [`WorkerConfig::trusted_ca_pem`]; a Pod's own server CA
//! (`TEMPORAL_TLS_SERVER_CA_CERT_PATH` / `_DATA`) replaces it, as the SDK's setting replaces
//! the system roots.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, Result};
use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, Namespace, Node, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use temporalio_client::Connection;
use tokio::sync::{Notify, Semaphore, oneshot, watch};
use tokio::task::JoinHandle;

use crate::worker::{self, ENV_ADDRESS, WorkerConfig, WorkerHandle, WorkerState};
use crate::worker_host::WorkerHost;

mod container_root;
mod controller_pod;
mod image;
use controller_pod::{ProcState, Process, Source};

/// Field manager of every write.
const MANAGER: &str = "twc-kubelet";
/// Lease renewal and Node heartbeat (a kubelet's `nodeLeaseRenewInterval`-ish).
const HEARTBEAT: Duration = Duration::from_secs(10);
const LEASE_SECONDS: i32 = 40;
/// How often the prober asks Temporal about task queues with Pods waiting to become Ready.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// One `DescribeTaskQueue` (or connection) may not hold up the others for long.
const PROBE_CALL_DEADLINE: Duration = Duration::from_secs(5);
/// Crash-loop back-off: first delay, cap, and how long a container must run to reset it.
const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
const BACKOFF_RESET: Duration = Duration::from_secs(60);
/// How long `ErrImagePull` shows before `ImagePullBackOff` (a kubelet's next Pod sync).
const PULL_ERROR_SHOWN: Duration = Duration::from_secs(1);
/// A failed status write is retried after this.
const WRITE_RETRY: Duration = Duration::from_secs(1);
/// Concurrent `pods/binding` calls.
const BIND_CONCURRENCY: usize = 16;
/// A kubelet keeps at most this much of a termination message.
const MAX_MESSAGE: usize = 4096;
/// Waiting for the Secret/ConfigMap caches at start.
const CACHE_DEADLINE: Duration = Duration::from_secs(60);

/// What the kubelet stand-in knows beyond the Kubernetes API.
#[derive(Clone, Debug, Default)]
pub struct KubeletOptions {
    /// PEM CA bundle standing for the worker image's trust store (e.g. a [`TestPki`] CA, so
    /// workers trust a TLS proxy). It does not come from the pod: real images bake it in.
    ///
    /// [`TestPki`]: crate::tls_proxy::TestPki
    pub trusted_ca_pem: Option<Vec<u8>>,
    /// Container image (exactly as the Pod spec writes it) → local binary: Pods with such an
    /// image are **process Pods** (`kubelet/controller_pod.rs`), e.g. the chart's controller
    /// image → the controller built by Cargo.
    pub images: BTreeMap<String, std::path::PathBuf>,
    /// `(host, port)` of the API server, given to process Pods as `KUBERNETES_SERVICE_HOST` /
    /// `KUBERNETES_SERVICE_PORT` (a real kubelet gives the `kubernetes` Service's ClusterIP,
    /// which nothing routes here).
    pub api_server: Option<(String, u16)>,
    /// `host:port` of the rig's registry ([`crate::registry`]): a process Pod whose image is a
    /// repository there is pulled and run from its own root file system (`kubelet/image.rs`,
    /// `kubelet/controller_pod.rs`), not mapped through [`KubeletOptions::images`].
    pub registry: Option<String>,
    /// Runs every worker Pod on one shared [`WorkerHost`] (one thread, one runtime, shared
    /// connections) instead of a thread, runtime and connection each: light enough for hundreds
    /// of live worker Pods (the scale probe). See the module docs for what that gives up.
    pub shared_worker_host: bool,
}

/// The running stand-in. Dropping it aborts everything (workers are asked to stop);
/// [`Kubelet::shutdown`] also waits for the workers to stop.
pub struct Kubelet {
    ctx: Arc<Ctx>,
    tasks: Vec<JoinHandle<()>>,
}

/// What every task and Pod actor shares.
struct Ctx {
    client: kube::Client,
    node: String,
    options: KubeletOptions,
    secrets: Store<Secret>,
    config_maps: Store<ConfigMap>,
    /// Bumped on every Secret/ConfigMap change: Pods waiting for one re-resolve.
    refs_changed: watch::Receiver<u64>,
    probe: Arc<Prober>,
    /// `true`: stop every worker and exit, without touching the API.
    shutdown: watch::Sender<bool>,
    /// Running (or starting) workers by Pod UID.
    workers: Mutex<HashMap<String, WorkerView>>,
    actors: Mutex<Vec<JoinHandle<()>>>,
    next_ip: AtomicU32,
    /// When each worker Pod became Ready, on this stand-in's clock ([`Kubelet::readiness`]).
    readiness: Mutex<Vec<WorkerReady>>,
    /// [`KubeletOptions::shared_worker_host`]: where worker Pods run.
    host: Option<WorkerHost>,
}

/// A worker Pod's container became Ready (Temporal listed its poller) at `at`.
#[derive(Clone, Debug)]
pub struct WorkerReady {
    pub namespace: String,
    pub pod: String,
    /// The worker's Temporal deployment name and build ID (from its env).
    pub deployment_name: String,
    pub build_id: String,
    pub at: SystemTime,
}

#[derive(Clone)]
struct WorkerView {
    namespace: String,
    deployment: Option<String>,
    config: WorkerConfig,
    state: watch::Receiver<WorkerState>,
    /// Pauses (`false`) or resumes the worker's polling ([`Kubelet::set_polling`]).
    polling: watch::Sender<bool>,
}

impl Kubelet {
    /// Registers the Node, fills the Secret/ConfigMap caches and starts binding and running
    /// Pods. Fails fast if the API refuses any of that.
    pub async fn start(client: kube::Client) -> Result<Kubelet> {
        Kubelet::start_with(client, KubeletOptions::default()).await
    }

    /// [`Kubelet::start`] with options (e.g. the CA bundle workers trust).
    pub async fn start_with(client: kube::Client, options: KubeletOptions) -> Result<Kubelet> {
        static N: AtomicU32 = AtomicU32::new(0);
        let node = format!(
            "twc-kubelet-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        register_node(&client, &node).await?;
        let mut tasks = Vec::new();

        let (refs_tx, refs_changed) = watch::channel(0u64);
        let refs_tx = Arc::new(refs_tx);
        let (secrets, task) = cache::<Secret>(&client, refs_tx.clone());
        tasks.push(task);
        let (config_maps, task) = cache::<ConfigMap>(&client, refs_tx);
        tasks.push(task);
        let ready = async {
            secrets.wait_until_ready().await?;
            config_maps.wait_until_ready().await?;
            anyhow::Ok(())
        };
        let filled = tokio::time::timeout(CACHE_DEADLINE, ready).await;
        if !matches!(filled, Ok(Ok(()))) {
            for t in &tasks {
                t.abort();
            }
            anyhow::bail!("Secret/ConfigMap caches not filled within {CACHE_DEADLINE:?}");
        }

        let host = match options.shared_worker_host {
            true => Some(WorkerHost::start().await?),
            false => None,
        };
        let probe = Arc::new(Prober::default());
        let (shutdown, _) = watch::channel(false);
        let ctx = Arc::new(Ctx {
            client: client.clone(),
            node: node.clone(),
            options,
            secrets,
            config_maps,
            refs_changed,
            probe: probe.clone(),
            shutdown,
            workers: Mutex::new(HashMap::new()),
            actors: Mutex::new(Vec::new()),
            next_ip: AtomicU32::new(0),
            readiness: Mutex::new(Vec::new()),
            host,
        });
        tasks.push(tokio::spawn(probe.run()));
        tasks.push(tokio::spawn(heartbeat(client.clone(), node.clone())));
        tasks.push(tokio::spawn(schedule(client.clone(), node.clone())));
        tasks.push(tokio::spawn(run_pods(ctx.clone())));
        tracing::info!(node, "kubelet stand-in started");
        Ok(Kubelet { ctx, tasks })
    }

    /// The Node this stand-in registered (and binds Pods to).
    pub fn node_name(&self) -> &str {
        &self.ctx.node
    }

    /// Every time a worker Pod became Ready since the start, in order: the readiness clock of
    /// latency measurements (a Pod condition's time has a resolution of one second).
    pub fn readiness(&self) -> Vec<WorkerReady> {
        self.ctx
            .readiness
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Workers of this Deployment's Pods whose SDK worker is constructed and running (Ready or
    /// not yet). A Pod belongs to Deployment `d` when its controlling owner is ReplicaSet
    /// `d-<pod-template-hash>`.
    pub fn running_workers(&self, namespace: &str, deployment: &str) -> usize {
        self.worker_configs(namespace, deployment).len()
    }

    /// Configs (identity `1@<pod name>`) of this Deployment's running workers.
    pub fn worker_configs(&self, namespace: &str, deployment: &str) -> Vec<WorkerConfig> {
        let Ok(workers) = self.ctx.workers.lock() else {
            return Vec::new();
        };
        let mut configs: Vec<WorkerConfig> = workers
            .values()
            .filter(|w| w.namespace == namespace && w.deployment.as_deref() == Some(deployment))
            .filter(|w| *w.state.borrow() == WorkerState::Running)
            .map(|w| w.config.clone())
            .collect();
        configs.sort_by(|a, b| a.identity.cmp(&b.identity));
        configs
    }

    /// Stops (`polling: false`) or resumes the polling of the workers of this Deployment's
    /// Pods while their processes keep running: the Pods stay Running and Ready (readiness is
    /// not probed again once established, as for a worker whose readiness probe only checks
    /// that the process is up) while Temporal sees no poller, as when a worker is stuck or
    /// crash-looping inside its process or lost its credentials. A worker resumed polls again
    /// with the same identity. Returns how many workers it reached (running ones only; a Pod
    /// started later polls normally).
    pub fn set_polling(&self, namespace: &str, deployment: &str, polling: bool) -> usize {
        let Ok(workers) = self.ctx.workers.lock() else {
            return 0;
        };
        let mut reached = 0;
        for w in workers
            .values()
            .filter(|w| w.namespace == namespace && w.deployment.as_deref() == Some(deployment))
            .filter(|w| *w.state.borrow() == WorkerState::Running)
        {
            w.polling.send_replace(polling);
            reached += 1;
        }
        reached
    }

    /// Stops binding and watching, stops every worker and waits for them. Pods keep the status
    /// they had (like Pods of a kubelet that went away).
    pub async fn shutdown(mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        self.ctx.shutdown.send_replace(true);
        let actors: Vec<JoinHandle<()>> = match self.ctx.actors.lock() {
            Ok(mut a) => a.drain(..).collect(),
            Err(_) => Vec::new(),
        };
        for a in actors {
            let _ = a.await;
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        self.ctx.shutdown.send_replace(true);
        if let Ok(mut actors) = self.ctx.actors.lock() {
            for a in actors.drain(..) {
                a.abort();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Node, Lease, caches, scheduler

fn time(ts: jiff::Timestamp) -> Value {
    serde_json::to_value(Time(ts)).unwrap_or(Value::Null)
}

fn now() -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    }
}

/// The labels of the one Node (what a kubelet sets on its own Node).
fn node_labels(node: &str) -> BTreeMap<String, String> {
    [
        ("kubernetes.io/hostname", node),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", node_arch()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn node_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Why no Node fits the Pod, in the scheduler's words, when its `nodeSelector` asks for a
/// label the one Node does not have.
fn unschedulable(pod: &Pod, node: &str) -> Option<String> {
    let selector = pod.spec.as_ref()?.node_selector.as_ref()?;
    let labels = node_labels(node);
    let fits = selector.iter().all(|(k, v)| labels.get(k) == Some(v));
    (!fits).then(|| {
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. \
         preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
            .to_string()
    })
}

/// Marks a Pod no Node fits as the scheduler does: `PodScheduled=False/Unschedulable`, left
/// Pending and unbound.
async fn mark_unschedulable(api: &Api<Pod>, pod: &Pod, message: &str) -> bool {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(api.clone().into_client(), &ns);
    let patch = json!({"status": {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": message, "lastProbeTime": null, "lastTransitionTime": time(now()),
    }]}});
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => true,
        Err(e) if is_status(&e, 404) => true,
        Err(e) => {
            tracing::debug!(pod = %format!("{ns}/{name}"), error = %e, "marking unschedulable failed (retrying)");
            false
        }
    }
}

async fn register_node(client: &kube::Client, node: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let arch = node_arch();
    let body: Node = serde_json::from_value(json!({
        "metadata": {"name": node, "labels": node_labels(node)},
        "spec": {"podCIDR": "10.88.0.0/16", "podCIDRs": ["10.88.0.0/16"]},
    }))?;
    let created = nodes
        .create(&PostParams::default(), &body)
        .await
        .with_context(|| format!("registering Node {node}"))?;
    // A kubelet reports its own version, which matches the control plane's minor; the stand-in
    // takes the API server's, so a rig on another minor (the smoke command) reads as one.
    let kubelet_version = client
        .apiserver_version()
        .await
        .context("reading the API server's version")?
        .git_version;
    let t = time(now());
    let status = json!({"status": {
        "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000", "ephemeral-storage": "100Gi"},
        "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000", "ephemeral-storage": "100Gi"},
        "addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": node},
        ],
        "conditions": [
            node_condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", &t),
            node_condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", &t),
            node_condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", &t),
            node_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", &t),
        ],
        "nodeInfo": {
            "machineID": node, "systemUUID": node, "bootID": node,
            "kernelVersion": "", "osImage": "twc kubelet stand-in",
            "containerRuntimeVersion": "twc-standin://1",
            "kubeletVersion": kubelet_version, "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": arch,
        },
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
    }});
    nodes
        .patch_status(node, &params(), &Patch::Strategic(&status))
        .await
        .with_context(|| format!("reporting Node {node} Ready"))?;
    // The API server taints new Nodes not-ready; the node-lifecycle controller (not running)
    // removes that once the Node is Ready.
    nodes
        .patch(
            node,
            &params(),
            &Patch::Merge(&json!({"spec": {"taints": null}})),
        )
        .await
        .with_context(|| format!("untainting Node {node}"))?;
    // kube-node-lease comes from the API server's system-namespaces loop; make sure.
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "kube-node-lease"}}))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Err(e) if !is_status(&e, 409) => return Err(e).context("creating kube-node-lease"),
        _ => {}
    }
    let uid = created.metadata.uid.unwrap_or_default();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": node, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}
        ]},
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": serde_json::to_value(MicroTime(jiff::Timestamp::now()))?,
        },
    }))?;
    Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .create(&PostParams::default(), &lease)
        .await
        .with_context(|| format!("creating the Lease of Node {node}"))?;
    Ok(())
}

fn node_condition(type_: &str, status: &str, reason: &str, message: &str, t: &Value) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastHeartbeatTime": t, "lastTransitionTime": t})
}

/// Renews the Lease and the Ready heartbeat until aborted.
async fn heartbeat(client: kube::Client, node: String) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(client);
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        let renew = json!({"spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": serde_json::to_value(MicroTime(jiff::Timestamp::now())).unwrap_or(Value::Null),
        }});
        if let Err(e) = leases.patch(&node, &params(), &Patch::Merge(&renew)).await {
            tracing::debug!(node, error = %e, "renewing the node Lease");
        }
        let t = time(now());
        // Strategic merge by `type`: only the heartbeat moves; the transition time stays.
        let ready = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "message": "kubelet is posting ready status", "lastHeartbeatTime": t}
        ]}});
        if let Err(e) = nodes
            .patch_status(&node, &params(), &Patch::Strategic(&ready))
            .await
        {
            tracing::debug!(node, error = %e, "node heartbeat");
        }
    }
}

/// A watch cache of all `K` in the cluster; every change bumps `changed`.
fn cache<K>(client: &kube::Client, changed: Arc<watch::Sender<u64>>) -> (Store<K>, JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let stream = reflector::reflector(
        writer,
        watcher::watcher(Api::<K>::all(client.clone()), watcher::Config::default())
            .default_backoff(),
    );
    let task = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => {
                    changed.send_modify(|n| *n = n.wrapping_add(1));
                }
                Err(e) => tracing::debug!(error = %e, "kubelet cache watch error (retrying)"),
            }
        }
    });
    (store, task)
}

/// The scheduler: binds unassigned Pods meant for the default scheduler to `node`.
async fn schedule(client: kube::Client, node: String) {
    let api: Api<Pod> = Api::all(client);
    let cfg = watcher::Config::default()
        .fields("spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed");
    let stream = watcher::watcher(api.clone(), cfg).default_backoff();
    futures::pin_mut!(stream);
    let binding: Arc<Mutex<HashSet<String>>> = Arc::default();
    let permits = Arc::new(Semaphore::new(BIND_CONCURRENCY));
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Apply(pod)) | Ok(Event::InitApply(pod)) => {
                let scheduler = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.scheduler_name.as_deref())
                    .unwrap_or_default();
                let ours = scheduler.is_empty() || scheduler == "default-scheduler";
                let unbound = pod
                    .spec
                    .as_ref()
                    .is_some_and(|s| s.node_name.as_deref().unwrap_or_default().is_empty());
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if !ours || !unbound || pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let fresh = binding
                    .lock()
                    .map(|mut b| b.insert(uid.clone()))
                    .unwrap_or(false);
                if !fresh {
                    continue;
                }
                let (api, node, binding, permits) =
                    (api.clone(), node.clone(), binding.clone(), permits.clone());
                tokio::spawn(async move {
                    let Ok(_permit) = permits.acquire().await else {
                        return;
                    };
                    let done = match unschedulable(&pod, &node) {
                        Some(why) => mark_unschedulable(&api, &pod, &why).await,
                        None => bind(&api, &pod, &node).await,
                    };
                    if !done && let Ok(mut b) = binding.lock() {
                        // A later event of this Pod retries.
                        b.remove(&uid);
                    }
                });
            }
            Ok(Event::Delete(pod)) => {
                if let (Ok(mut b), Some(uid)) = (binding.lock(), pod.metadata.uid.as_ref()) {
                    b.remove(uid);
                }
            }
            Ok(Event::Init) | Ok(Event::InitDone) => {}
            Err(e) => tracing::debug!(error = %e, "scheduler watch error (retrying)"),
        }
    }
}

/// `POST pods/<name>/binding`; `true` when bound (or no longer bindable).
async fn bind(api: &Api<Pod>, pod: &Pod, node: &str) -> bool {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let body = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": ns, "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    let api: Api<Pod> = Api::namespaced(api.clone().into_client(), &ns);
    let mut delay = Duration::from_millis(100);
    for _ in 0..5 {
        match api
            .create_subresource::<_, Value>("binding", &name, &PostParams::default(), &body)
            .await
        {
            Ok(_) => return true,
            // Gone, or bound by someone else meanwhile.
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => return true,
            Err(e) => {
                tracing::debug!(pod = %format!("{ns}/{name}"), error = %e, "binding failed (retrying)");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
    false
}

// ---------------------------------------------------------------------------------------------
// Pods of this node

/// The Deployment a Pod belongs to: its controlling ReplicaSet is `<deployment>-<hash>`.
fn deployment_of(pod: &Pod) -> Option<String> {
    let rs = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "ReplicaSet" && o.controller == Some(true))?;
    let hash = pod.metadata.labels.as_ref()?.get("pod-template-hash")?;
    rs.name
        .strip_suffix(hash.as_str())?
        .strip_suffix('-')
        .map(str::to_string)
}

/// Watches the Pods bound to this node; one actor per Pod UID.
async fn run_pods(ctx: Arc<Ctx>) {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", ctx.node));
    let stream = watcher::watcher(api, cfg).default_backoff();
    futures::pin_mut!(stream);
    let mut actors: HashMap<String, watch::Sender<Option<Arc<Pod>>>> = HashMap::new();
    let mut listed: HashSet<String> = HashSet::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Apply(pod)) | Ok(Event::InitApply(pod)) => {
                let Some(uid) = pod.metadata.uid.clone() else {
                    continue;
                };
                listed.insert(uid.clone());
                let pod = Arc::new(pod);
                match actors.get(&uid) {
                    Some(tx) => {
                        tx.send_replace(Some(pod));
                    }
                    None => {
                        let (tx, rx) = watch::channel(Some(pod.clone()));
                        let actor = PodActor::new(ctx.clone(), pod, rx);
                        let task = tokio::spawn(actor.run());
                        if let Ok(mut all) = ctx.actors.lock() {
                            all.retain(|t| !t.is_finished());
                            all.push(task);
                        }
                        actors.insert(uid, tx);
                    }
                }
            }
            Ok(Event::Delete(pod)) => {
                // Dropping the sender tells the actor its Pod is gone.
                if let Some(uid) = pod.metadata.uid.as_ref() {
                    actors.remove(uid);
                }
            }
            Ok(Event::Init) => listed.clear(),
            Ok(Event::InitDone) => actors.retain(|uid, _| listed.contains(uid)),
            Err(e) => tracing::debug!(error = %e, "kubelet pod watch error (retrying)"),
        }
    }
}

/// What the first container is doing.
enum Run {
    /// Not (re)started: volumes (`ContainerCreating`) or env (`CreateContainerConfigError`)
    /// cannot be resolved yet.
    Waiting {
        reason: &'static str,
        message: Option<String>,
    },
    /// Exited; restarts at `until`.
    BackOff { until: Instant, message: String },
    /// The image cannot be pulled: `ErrImagePull` right after an attempt, then
    /// `ImagePullBackOff` until the next attempt (`retry` at `until`).
    Pull {
        reason: &'static str,
        message: String,
        until: Instant,
        retry: bool,
    },
    /// Started. `worker` is `None` for a generic container (ready at once).
    Running {
        started_at: jiff::Timestamp,
        since: Instant,
        worker: Option<Box<RunningWorker>>,
        ready: bool,
    },
    /// Exited for good (restart policy, or the Pod is being deleted).
    Done { terminated: Value, exit_code: i32 },
}

struct RunningWorker {
    handle: WorkerHandle,
    state: watch::Receiver<WorkerState>,
    spawned_at: SystemTime,
    /// Fires once Temporal lists the worker as a poller; `None` before registration/after.
    polled: Option<oneshot::Receiver<()>>,
}

struct PodActor {
    ctx: Arc<Ctx>,
    pod: Arc<Pod>,
    uid: String,
    namespace: String,
    name: String,
    deployment: Option<String>,
    rx: watch::Receiver<Option<Arc<Pod>>>,
    shutdown: watch::Receiver<bool>,
    refs: watch::Receiver<u64>,
    run: Run,
    ip: Option<String>,
    started_once: bool,
    start_time: jiff::Timestamp,
    restart_count: i32,
    last_terminated: Option<Value>,
    backoff: Duration,
    /// Image-pull back-off (the next one).
    pull_backoff: Duration,
    ready: bool,
    ready_changed: jiff::Timestamp,
    last_written: Option<Value>,
    retry_write_at: Option<Instant>,
    deleted: bool,
    /// Seen only in a terminal phase: never written, only its deletion is finished.
    inert: bool,
    /// The container's process, for a process Pod.
    process: Option<Process>,
}

enum Wake {
    Pod,
    PodGone,
    Shutdown,
    /// Temporal listed the worker as a poller (`true`), or the prober went away (`false`).
    Polled(bool),
    Other,
}

impl PodActor {
    fn new(ctx: Arc<Ctx>, pod: Arc<Pod>, rx: watch::Receiver<Option<Arc<Pod>>>) -> PodActor {
        let t = now();
        PodActor {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            deployment: deployment_of(&pod),
            shutdown: ctx.shutdown.subscribe(),
            refs: ctx.refs_changed.clone(),
            rx,
            pod,
            ctx,
            run: Run::Waiting {
                reason: "ContainerCreating",
                message: None,
            },
            ip: None,
            started_once: false,
            start_time: t,
            restart_count: 0,
            last_terminated: None,
            backoff: BACKOFF_START,
            pull_backoff: BACKOFF_START,
            ready: false,
            ready_changed: t,
            last_written: None,
            retry_write_at: None,
            deleted: false,
            inert: false,
            process: None,
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.ctx.client.clone(), &self.namespace)
    }

    /// Records [`WorkerReady`] for this Pod's worker (the moment the prober saw its poller).
    fn note_ready(&self) {
        let at = SystemTime::now();
        let config = self
            .ctx
            .workers
            .lock()
            .ok()
            .and_then(|w| w.get(&self.uid).map(|v| v.config.clone()));
        let (Some(config), Ok(mut log)) = (config, self.ctx.readiness.lock()) else {
            return;
        };
        log.push(WorkerReady {
            namespace: self.namespace.clone(),
            pod: self.name.clone(),
            deployment_name: config.deployment_name,
            build_id: config.build_id,
            at,
        });
    }

    async fn run(mut self) {
        let phase = self.pod.status.as_ref().and_then(|s| s.phase.clone());
        let terminal = matches!(phase.as_deref(), Some("Succeeded" | "Failed"));
        if terminal {
            // Finished before we saw it: nothing to run, and its status stays as it is.
            self.run = Run::Done {
                terminated: Value::Null,
                exit_code: 0,
            };
            self.inert = true;
        }
        loop {
            self.step().await;
            match self.wait().await {
                Wake::Pod => match self.rx.borrow_and_update().clone() {
                    Some(pod) => self.pod = pod,
                    None => break,
                },
                Wake::PodGone | Wake::Shutdown => break,
                Wake::Polled(seen) => {
                    if let Run::Running {
                        worker: Some(w),
                        ready,
                        ..
                    } = &mut self.run
                    {
                        w.polled = None;
                        let became_ready = seen && !*ready;
                        *ready |= seen;
                        if became_ready {
                            self.note_ready();
                        }
                    }
                }
                Wake::Other => {}
            }
        }
        self.stop_worker(Duration::from_secs(30)).await;
    }

    /// One step: react to deletion, worker state, readiness and back-off; write status.
    async fn step(&mut self) {
        if self.retry_write_at.is_some_and(|r| Instant::now() >= r) {
            self.retry_write_at = None;
        }
        if self.deleted {
            return;
        }
        if self.pod.metadata.deletion_timestamp.is_some() {
            self.terminate().await;
            return;
        }
        let process = self.process.as_ref().map(Process::state);
        let mut exit = None;
        match &mut self.run {
            Run::Waiting { .. } => self.try_start().await,
            Run::BackOff { until, .. } if Instant::now() >= *until => self.try_start().await,
            Run::Pull { until, retry, .. } if Instant::now() >= *until => {
                if *retry {
                    self.try_start().await;
                } else {
                    self.pull_backed_off();
                }
            }
            Run::BackOff { .. } | Run::Done { .. } | Run::Pull { .. } => {}
            Run::Running {
                worker: Some(w),
                ready,
                ..
            } => {
                let state = w.state.borrow().clone();
                match state {
                    WorkerState::Starting => {}
                    WorkerState::Running => {
                        if w.polled.is_none() && !*ready {
                            let (tx, rx) = oneshot::channel();
                            self.ctx.probe.register(w.handle.config(), w.spawned_at, tx);
                            w.polled = Some(rx);
                        }
                        if let Some(rx) = w.polled.as_mut()
                            && rx.try_recv().is_ok()
                        {
                            *ready = true;
                            w.polled = None;
                        }
                    }
                    WorkerState::Stopped => self.exited(0, "Completed", None),
                    WorkerState::Failed(e) => self.exited(1, "Error", Some(e)),
                }
            }
            Run::Running {
                worker: None,
                ready,
                ..
            } => match process {
                Some(ProcState::Running { ready: r }) => *ready = r,
                Some(ProcState::Exited { code, message }) => exit = Some((code, message)),
                None => {}
            },
        }
        if let Some((code, message)) = exit {
            self.process = None;
            let reason = if code == 0 { "Completed" } else { "Error" };
            self.exited(code, reason, Some(message));
        }
        self.write_status().await;
    }

    /// Resolves volumes and env and starts the container.
    async fn try_start(&mut self) {
        let Some(spec) = self.pod.spec.clone() else {
            return;
        };
        let Some(container) = spec.containers.first() else {
            return;
        };
        let files = match self.mounted_files(&spec, container) {
            Ok(files) => files,
            Err(message) => {
                tracing::debug!(pod = %self.name, message, "volume not ready");
                self.run = Run::Waiting {
                    reason: "ContainerCreating",
                    message: None,
                };
                return;
            }
        };
        if self.ip.is_none() {
            let n = self.ctx.next_ip.fetch_add(1, Ordering::SeqCst);
            self.ip = Some(format!("10.88.{}.{}", (n / 250) % 256, n % 250 + 2));
        }
        // A kubelet pulls the image before it makes the container's config.
        let Some(pulled) = self.pull(container).await else {
            return;
        };
        let env = match self.resolve_env(container) {
            Ok(env) => env,
            Err(message) => {
                self.run = Run::Waiting {
                    reason: "CreateContainerConfigError",
                    message: Some(message),
                };
                return;
            }
        };
        if let Some(source) = controller_pod::source_for(self, container, pulled) {
            self.start_process(&spec, container, &source, env).await;
            return;
        }
        if self.started_once {
            self.restart_count += 1;
        }
        self.started_once = true;
        let started_at = now();
        let since = Instant::now();
        if !env.contains_key(ENV_ADDRESS) {
            self.run = Run::Running {
                started_at,
                since,
                worker: None,
                ready: true,
            };
            return;
        }
        let spawned = WorkerConfig::from_pod(&env, &files).and_then(|mut cfg| {
            cfg.identity = format!("1@{}", self.name);
            cfg.trusted_ca_pem = self.ctx.options.trusted_ca_pem.clone();
            match &self.ctx.host {
                Some(host) => host.spawn(cfg),
                None => worker::spawn(cfg),
            }
        });
        match spawned {
            Ok(handle) => {
                let state = handle.subscribe();
                if let Ok(mut workers) = self.ctx.workers.lock() {
                    workers.insert(
                        self.uid.clone(),
                        WorkerView {
                            namespace: self.namespace.clone(),
                            deployment: self.deployment.clone(),
                            config: handle.config().clone(),
                            state: state.clone(),
                            polling: handle.polling_control(),
                        },
                    );
                }
                self.run = Run::Running {
                    started_at,
                    since,
                    worker: Some(Box::new(RunningWorker {
                        handle,
                        state,
                        spawned_at: SystemTime::now(),
                        polled: None,
                    })),
                    ready: false,
                };
            }
            // The worker process would exit at once complaining about its config.
            Err(e) => {
                self.run = Run::Running {
                    started_at,
                    since,
                    worker: None,
                    ready: false,
                };
                self.exited(1, "Error", Some(format!("{e:#}")));
            }
        }
    }

    /// Starts a process Pod's container (`kubelet/controller_pod.rs`).
    async fn start_process(
        &mut self,
        spec: &k8s_openapi::api::core::v1::PodSpec,
        container: &Container,
        source: &Source,
        env: BTreeMap<String, String>,
    ) {
        match controller_pod::start(self, spec, container, source, env).await {
            Ok(process) => {
                if self.started_once {
                    self.restart_count += 1;
                }
                self.started_once = true;
                self.process = Some(process);
                self.run = Run::Running {
                    started_at: now(),
                    since: Instant::now(),
                    worker: None,
                    ready: false,
                };
            }
            Err(message) => {
                tracing::debug!(pod = %self.name, message, "process Pod not started");
                // Not only a Secret/ConfigMap change can unblock it (a TokenRequest may fail
                // once): try again soon.
                self.retry_write_at = Some(Instant::now() + WRITE_RETRY);
                self.run = Run::Waiting {
                    reason: "ContainerCreating",
                    message: Some(message),
                };
            }
        }
    }

    /// Pulls the image: `None` (and `ErrImagePull` or `ErrImageNeverPull`) when it cannot be
    /// pulled, else the pulled image if it is one of the rig's registry.
    async fn pull(&mut self, container: &Container) -> Option<Option<image::Image>> {
        if self.pull_failed(container) {
            return None;
        }
        match self.pull_from_registry(container).await {
            Ok(pulled) => Some(pulled),
            Err((reason, message)) => {
                self.run = Run::Pull {
                    reason,
                    message,
                    until: Instant::now() + PULL_ERROR_SHOWN,
                    retry: false,
                };
                None
            }
        }
    }

    /// Pulls the container's image if it is one of the rig's registry (`kubelet/image.rs`):
    /// `Ok(None)` for any other image.
    async fn pull_from_registry(
        &mut self,
        container: &Container,
    ) -> Result<Option<image::Image>, image::PullError> {
        let Some(name) = container.image.clone() else {
            return Ok(None);
        };
        if !image::from_registry(self.ctx.options.registry.as_deref(), &name) {
            return Ok(None);
        }
        let policy = container.image_pull_policy.clone();
        let pulled = tokio::task::spawn_blocking(move || image::pull(&name, policy.as_deref()))
            .await
            .map_err(|e| ("ErrImagePull", format!("pull task: {e}")))??;
        Ok(Some(pulled))
    }

    /// Pulls the image: `ErrImagePull` when it cannot be pulled ([`pull_failure`]).
    fn pull_failed(&mut self, container: &Container) -> bool {
        let Some(message) = container.image.as_deref().and_then(pull_failure) else {
            return false;
        };
        self.run = Run::Pull {
            reason: "ErrImagePull",
            message,
            until: Instant::now() + PULL_ERROR_SHOWN,
            retry: false,
        };
        true
    }

    /// After `ErrImagePull`: `ImagePullBackOff` until the next attempt, the back-off doubling.
    fn pull_backed_off(&mut self) {
        let image = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let delay = self.pull_backoff;
        self.pull_backoff = (self.pull_backoff * 2).min(BACKOFF_MAX);
        self.run = Run::Pull {
            reason: "ImagePullBackOff",
            message: format!("Back-off pulling image {image:?}"),
            until: Instant::now() + delay,
            retry: true,
        };
    }

    /// The container exited: back off and restart, or finish, as `restartPolicy` says.
    fn exited(&mut self, exit_code: i32, reason: &str, message: Option<String>) {
        let (started_at, since) = match &self.run {
            Run::Running {
                started_at, since, ..
            } => (*started_at, *since),
            _ => (now(), Instant::now()),
        };
        if let Ok(mut workers) = self.ctx.workers.lock() {
            workers.remove(&self.uid);
        }
        let mut terminated = json!({
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": time(started_at),
            "finishedAt": time(now()),
            "containerID": self.container_id(),
        });
        if let Some(m) = message {
            let mut m = m;
            if m.len() > MAX_MESSAGE {
                let mut cut = MAX_MESSAGE;
                while !m.is_char_boundary(cut) {
                    cut -= 1;
                }
                m.truncate(cut);
            }
            terminated["message"] = json!(m);
        }
        tracing::debug!(pod = %self.name, exit_code, reason, "container exited");
        let policy = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into());
        let restart = policy == "Always" || (policy == "OnFailure" && exit_code != 0);
        if !restart {
            self.run = Run::Done {
                terminated,
                exit_code,
            };
            return;
        }
        if since.elapsed() >= BACKOFF_RESET {
            self.backoff = BACKOFF_START;
        }
        let delay = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        self.last_terminated = Some(terminated);
        let container = self.container_name();
        self.run = Run::BackOff {
            until: Instant::now() + delay,
            message: format!(
                "back-off {}s restarting failed container={container} pod={}_{}({})",
                delay.as_secs(),
                self.name,
                self.namespace,
                self.uid
            ),
        };
    }

    /// The Pod is being deleted: stop the worker, report the container terminated, and finish
    /// the deletion.
    async fn terminate(&mut self) {
        let grace = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30)
            .clamp(1, 60);
        let grace = Duration::from_secs(u64::try_from(grace).unwrap_or(30));
        if let Run::Running { started_at, .. } = &self.run {
            let started_at = *started_at;
            let clean = self.stop_worker(grace).await;
            let exit_code = if clean { 0 } else { 137 };
            let reason = if clean { "Completed" } else { "Error" };
            self.run = Run::Done {
                terminated: json!({
                    "exitCode": exit_code,
                    "reason": reason,
                    "startedAt": time(started_at),
                    "finishedAt": time(now()),
                    "containerID": self.container_id(),
                }),
                exit_code,
            };
        } else if !matches!(self.run, Run::Done { .. }) {
            // Never started, or between crashes: the Pod ends Failed unless its last run
            // exited 0.
            let exit_code = self
                .last_terminated
                .as_ref()
                .and_then(|t| t["exitCode"].as_i64())
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(1);
            self.run = Run::Done {
                terminated: Value::Null,
                exit_code,
            };
        }
        self.write_status().await;
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.pods().delete(&self.name, &dp).await {
            Ok(_) => self.deleted = true,
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => self.deleted = true,
            Err(e) => {
                tracing::debug!(pod = %self.name, error = %e, "finishing the deletion (retrying)");
                self.retry_write_at = Some(Instant::now() + WRITE_RETRY);
            }
        }
    }

    /// Stops the worker (if any) within `grace`; `true` if it ended cleanly or there was none.
    async fn stop_worker(&mut self, grace: Duration) -> bool {
        if let Some(mut process) = self.process.take() {
            return process.stop(grace).await;
        }
        if let Ok(mut workers) = self.ctx.workers.lock() {
            workers.remove(&self.uid);
        }
        let Run::Running { worker, .. } = &mut self.run else {
            return true;
        };
        let Some(w) = worker.take() else {
            return true;
        };
        w.handle.request_stop();
        let mut state = w.state.clone();
        let finished = tokio::time::timeout(grace, state.wait_for(WorkerState::is_finished))
            .await
            .map(|r| r.map(|s| s.clone()));
        match finished {
            Ok(Ok(WorkerState::Stopped)) => {
                // Join the thread off the runtime; it is at its last statement.
                let _ = w.handle.stop().await;
                true
            }
            // Failed, vanished, or still running after the grace period (then left to end on
            // its own: dropping the handle has asked it to stop).
            _ => false,
        }
    }

    async fn wait(&mut self) -> Wake {
        let deadline = match (&self.run, self.retry_write_at) {
            (Run::BackOff { until, .. } | Run::Pull { until, .. }, Some(r)) => {
                Some((*until).min(r))
            }
            (Run::BackOff { until, .. } | Run::Pull { until, .. }, None) => Some(*until),
            (_, r) => r,
        };
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => futures::future::pending().await,
            }
        };
        let waiting_for_refs = matches!(self.run, Run::Waiting { .. }) && !self.deleted;
        let refs = &mut self.refs;
        let refs_changed = async {
            if waiting_for_refs {
                if refs.changed().await.is_err() {
                    futures::future::pending::<()>().await;
                }
            } else {
                futures::future::pending::<()>().await;
            }
        };
        let (state, polled) = match &mut self.run {
            Run::Running {
                worker: Some(w), ..
            } if !self.deleted => (Some(&mut w.state), w.polled.as_mut()),
            _ => (None, None),
        };
        let worker_changed = async {
            match state {
                Some(s) => {
                    if s.changed().await.is_err() {
                        futures::future::pending::<()>().await;
                    }
                }
                None => futures::future::pending().await,
            }
        };
        let deleted = self.deleted;
        let process = self.process.as_mut();
        let process = async {
            match process {
                Some(p) if !deleted => p.changed().await,
                _ => futures::future::pending().await,
            }
        };
        let polled = async {
            match polled {
                // Ready, or the prober is gone (a later step re-registers).
                Some(rx) => rx.await.is_ok(),
                None => futures::future::pending().await,
            }
        };
        tokio::select! {
            changed = self.rx.changed() => if changed.is_ok() { Wake::Pod } else { Wake::PodGone },
            _ = self.shutdown.wait_for(|s| *s) => Wake::Shutdown,
            _ = worker_changed => Wake::Other,
            _ = process => Wake::Other,
            seen = polled => Wake::Polled(seen),
            _ = refs_changed => Wake::Other,
            _ = sleep => Wake::Other,
        }
    }

    fn container_name(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .map(|c| c.name.clone())
            .unwrap_or_default()
    }

    fn container_id(&self) -> String {
        format!("twc-standin://{}-{}", self.uid, self.restart_count)
    }

    /// The status a kubelet would report now.
    fn render(&mut self) -> Value {
        let spec = self.pod.spec.clone().unwrap_or_default();
        let main_ready = matches!(self.run, Run::Running { ready: true, .. });
        if main_ready != self.ready {
            self.ready = main_ready;
            self.ready_changed = now();
        }
        let done = matches!(self.run, Run::Done { .. });
        let phase = match &self.run {
            Run::Done { exit_code: 0, .. } => "Succeeded",
            Run::Done { .. } => "Failed",
            _ if self.started_once => "Running",
            _ => "Pending",
        };
        let mut status = json!({
            "phase": phase,
            "conditions": self.conditions(main_ready, done),
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "startTime": time(self.start_time),
            "containerStatuses": self.container_statuses(&spec, main_ready, done),
        });
        let init_statuses = self.init_statuses(&spec);
        if !init_statuses.is_empty() {
            status["initContainerStatuses"] = json!(init_statuses);
        }
        if let Some(ip) = &self.ip {
            status["podIP"] = json!(ip);
            status["podIPs"] = json!([{"ip": ip}]);
        }
        status
    }

    /// The main container's state, and whether it has started.
    fn main_state(&self) -> (Value, bool) {
        match &self.run {
            Run::Waiting { reason, message } => {
                let mut w = json!({"reason": reason});
                if let Some(m) = message {
                    w["message"] = json!(m);
                }
                (json!({"waiting": w}), false)
            }
            Run::BackOff { message, .. } => (
                json!({"waiting": {"reason": "CrashLoopBackOff", "message": message}}),
                false,
            ),
            Run::Pull {
                reason, message, ..
            } => (
                json!({"waiting": {"reason": reason, "message": message}}),
                false,
            ),
            Run::Running { started_at, .. } => {
                (json!({"running": {"startedAt": time(*started_at)}}), true)
            }
            Run::Done { terminated, .. } if terminated.is_null() => {
                (json!({"waiting": {"reason": "ContainerCreating"}}), false)
            }
            Run::Done { terminated, .. } => (json!({"terminated": terminated}), false),
        }
    }

    /// One status per container: the first is the worker this stand-in runs; sidecars are not
    /// run, and are reported as running since the first start.
    fn container_statuses(
        &self,
        spec: &k8s_openapi::api::core::v1::PodSpec,
        main_ready: bool,
        done: bool,
    ) -> Vec<Value> {
        let (main_state, main_started) = self.main_state();
        let mut statuses = Vec::new();
        for (i, c) in spec.containers.iter().enumerate() {
            let mut s = json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": "",
                "restartCount": 0,
                "lastState": {},
            });
            if i == 0 {
                s["state"] = main_state.clone();
                s["ready"] = json!(main_ready);
                s["started"] = json!(main_started);
                s["restartCount"] = json!(self.restart_count);
                if let Some(t) = &self.last_terminated {
                    s["lastState"] = json!({"terminated": t});
                }
                if main_started || done {
                    s["containerID"] = json!(self.container_id());
                    s["imageID"] = json!(c.image.clone().unwrap_or_default());
                }
            } else if self.started_once && !done {
                s["state"] = json!({"running": {"startedAt": time(self.start_time)}});
                s["ready"] = json!(true);
                s["started"] = json!(true);
            } else {
                s["state"] = json!({"waiting": {"reason": "PodInitializing"}});
                s["ready"] = json!(false);
                s["started"] = json!(false);
            }
            statuses.push(s);
        }
        statuses
    }

    /// Init containers are not run; they are reported as completed at the start.
    fn init_statuses(&self, spec: &k8s_openapi::api::core::v1::PodSpec) -> Vec<Value> {
        spec.init_containers
            .iter()
            .flatten()
            .map(|c| {
                json!({
                    "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                    "ready": true, "started": false, "restartCount": 0, "lastState": {},
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                              "startedAt": time(self.start_time), "finishedAt": time(self.start_time)}},
                })
            })
            .collect()
    }

    fn conditions(&self, main_ready: bool, done: bool) -> Vec<Value> {
        let unready = format!(
            "containers with unready status: [{}]",
            self.container_name()
        );
        let ready_cond = |type_: &str| {
            let mut c = json!({
                "type": type_,
                "status": if main_ready { "True" } else { "False" },
                "lastProbeTime": null,
                "lastTransitionTime": time(self.ready_changed),
            });
            if !main_ready {
                c["reason"] = json!(if done {
                    "PodCompleted"
                } else {
                    "ContainersNotReady"
                });
                c["message"] = json!(unready);
            }
            c
        };
        let mut conditions = vec![
            json!({"type": "Initialized", "status": "True", "lastProbeTime": null,
                   "lastTransitionTime": time(self.start_time)}),
            ready_cond("Ready"),
            ready_cond("ContainersReady"),
        ];
        if self.ip.is_some() {
            conditions.push(json!({"type": "PodReadyToStartContainers",
                "status": if done { "False" } else { "True" }, "lastProbeTime": null,
                "lastTransitionTime": time(self.start_time)}));
        }
        conditions
    }

    /// `PATCH pods/<name>/status` (strategic merge) when the rendered status changed.
    async fn write_status(&mut self) {
        if self.deleted || self.inert {
            return;
        }
        let status = self.render();
        if self.last_written.as_ref() == Some(&status) {
            return;
        }
        let patch = json!({"status": status});
        match self
            .pods()
            .patch_status(&self.name, &params(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {
                self.last_written = Some(status);
                self.retry_write_at = None;
            }
            Err(e) if is_status(&e, 404) => self.last_written = Some(status),
            Err(e) => {
                tracing::debug!(pod = %self.name, error = %e, "writing pod status (retrying)");
                self.retry_write_at = Some(Instant::now() + WRITE_RETRY);
            }
        }
    }

    // --- what the container sees ------------------------------------------------------------

    fn secret(&self, name: &str) -> Option<Arc<Secret>> {
        self.ctx
            .secrets
            .get(&ObjectRef::new(name).within(&self.namespace))
    }

    fn config_map(&self, name: &str) -> Option<Arc<ConfigMap>> {
        self.ctx
            .config_maps
            .get(&ObjectRef::new(name).within(&self.namespace))
    }

    /// The container's environment. `Err`: the kubelet's `CreateContainerConfigError` message.
    fn resolve_env(&self, container: &Container) -> Result<BTreeMap<String, String>, String> {
        let ns = &self.namespace;
        let mut env = BTreeMap::new();
        for from in container.env_from.iter().flatten() {
            let prefix = from.prefix.clone().unwrap_or_default();
            if let Some(r) = &from.secret_ref {
                match self.secret(&r.name) {
                    Some(s) => {
                        for (k, v) in secret_data(&s) {
                            env.insert(
                                format!("{prefix}{k}"),
                                String::from_utf8_lossy(&v).into_owned(),
                            );
                        }
                    }
                    None if r.optional == Some(true) => {}
                    None => return Err(format!("secret \"{}\" not found", r.name)),
                }
            }
            if let Some(r) = &from.config_map_ref {
                match self.config_map(&r.name) {
                    Some(cm) => {
                        for (k, v) in cm.data.iter().flatten() {
                            env.insert(format!("{prefix}{k}"), v.clone());
                        }
                    }
                    None if r.optional == Some(true) => {}
                    None => return Err(format!("configmap \"{}\" not found", r.name)),
                }
            }
        }
        for var in container.env.iter().flatten() {
            if let Some(value) = self.env_value(var, &env, ns)? {
                env.insert(var.name.clone(), value);
            }
        }
        Ok(env)
    }

    fn env_value(
        &self,
        var: &EnvVar,
        env: &BTreeMap<String, String>,
        ns: &str,
    ) -> Result<Option<String>, String> {
        let Some(from) = var.value_from.as_ref() else {
            return Ok(Some(expand(var.value.as_deref().unwrap_or_default(), env)));
        };
        if let Some(sel) = &from.secret_key_ref {
            let optional = sel.optional == Some(true);
            return match self.secret(&sel.name) {
                None if optional => Ok(None),
                None => Err(format!("secret \"{}\" not found", sel.name)),
                Some(s) => match secret_data(&s).remove(&sel.key) {
                    Some(v) => Ok(Some(String::from_utf8_lossy(&v).into_owned())),
                    None if optional => Ok(None),
                    None => Err(format!(
                        "couldn't find key {} in Secret {ns}/{}",
                        sel.key, sel.name
                    )),
                },
            };
        }
        if let Some(sel) = &from.config_map_key_ref {
            let optional = sel.optional == Some(true);
            return match self.config_map(&sel.name) {
                None if optional => Ok(None),
                None => Err(format!("configmap \"{}\" not found", sel.name)),
                Some(cm) => match cm.data.as_ref().and_then(|d| d.get(&sel.key)) {
                    Some(v) => Ok(Some(v.clone())),
                    None if optional => Ok(None),
                    None => Err(format!(
                        "couldn't find key {} in ConfigMap {ns}/{}",
                        sel.key, sel.name
                    )),
                },
            };
        }
        if let Some(f) = &from.field_ref {
            return Ok(Some(self.field(&f.field_path)));
        }
        // resourceFieldRef is not supported.
        Ok(None)
    }

    /// The downward API's `fieldRef`.
    fn field(&self, path: &str) -> String {
        let meta = &self.pod.metadata;
        let spec = self.pod.spec.as_ref();
        let keyed = |prefix: &str, map: Option<&BTreeMap<String, String>>| {
            path.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix("']"))
                .and_then(|k| map?.get(k).cloned())
                .unwrap_or_default()
        };
        match path {
            "metadata.name" => self.name.clone(),
            "metadata.namespace" => self.namespace.clone(),
            "metadata.uid" => self.uid.clone(),
            "spec.nodeName" => self.ctx.node.clone(),
            "spec.serviceAccountName" => spec
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_default(),
            "status.podIP" | "status.podIPs" => self.ip.clone().unwrap_or_default(),
            "status.hostIP" | "status.hostIPs" => "127.0.0.1".into(),
            p if p.starts_with("metadata.labels['") => {
                keyed("metadata.labels['", meta.labels.as_ref())
            }
            p if p.starts_with("metadata.annotations['") => {
                keyed("metadata.annotations['", meta.annotations.as_ref())
            }
            _ => String::new(),
        }
    }

    /// Files the container sees from its `secret` and `configMap` volume mounts: absolute
    /// path → bytes. `Err`: why the volume cannot be set up (`ContainerCreating`).
    fn mounted_files(
        &self,
        spec: &k8s_openapi::api::core::v1::PodSpec,
        container: &Container,
    ) -> Result<BTreeMap<String, Vec<u8>>, String> {
        let mut files = BTreeMap::new();
        for mount in container.volume_mounts.iter().flatten() {
            let Some(volume) = spec.volumes.iter().flatten().find(|v| v.name == mount.name) else {
                continue;
            };
            let (data, items, optional, kind, name) = if let Some(s) = &volume.secret {
                let name = s.secret_name.clone().unwrap_or_default();
                let data = self.secret(&name).map(|s| secret_data(&s));
                (
                    data,
                    s.items.clone(),
                    s.optional == Some(true),
                    "secret",
                    name,
                )
            } else if let Some(c) = &volume.config_map {
                let name = c.name.clone();
                let data = self
                    .config_map(&name)
                    .map(|cm| controller_pod::config_map_bytes(&cm));
                (
                    data,
                    c.items.clone(),
                    c.optional == Some(true),
                    "configmap",
                    name,
                )
            } else {
                // Not mounted: projected tokens, emptyDir, hostPath, …
                continue;
            };
            let setup_failed = |why: String| {
                format!(
                    "MountVolume.SetUp failed for volume {:?} : {why}",
                    volume.name
                )
            };
            let mut data = match data {
                Some(d) => d,
                None if optional => BTreeMap::new(),
                None => return Err(setup_failed(format!("{kind} \"{name}\" not found"))),
            };
            let projected = match items.filter(|i| !i.is_empty()) {
                None => data,
                Some(items) => {
                    let mut p = BTreeMap::new();
                    for item in items {
                        match data.remove(&item.key) {
                            Some(bytes) => {
                                p.insert(item.path.clone(), bytes);
                            }
                            None if optional => {}
                            None => {
                                return Err(setup_failed(format!(
                                    "references non-existent {kind} key: {}",
                                    item.key
                                )));
                            }
                        }
                    }
                    p
                }
            };
            let mount_path = mount.mount_path.trim_end_matches('/');
            match mount.sub_path.as_deref().filter(|p| !p.is_empty()) {
                Some(sub) => {
                    if let Some(bytes) = projected.get(sub.trim_matches('/')) {
                        files.insert(mount_path.to_string(), bytes.clone());
                    }
                }
                None => {
                    for (rel, bytes) in projected {
                        files.insert(
                            format!("{mount_path}/{}", rel.trim_start_matches('/')),
                            bytes,
                        );
                    }
                }
            }
        }
        Ok(files)
    }
}

/// A Secret's `data` (plus `stringData`, which the API server normally folds into `data`).
fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), v.clone().into_bytes());
    }
    data
}

/// Kubernetes' `$(VAR)` expansion of env values: known names are replaced, `$$` is a literal
/// `$`, anything else is kept as written.
/// Why pulling `image` fails as it would for a real kubelet, if it does: its registry host is
/// a reserved name that never resolves (RFC 2606 `.invalid`). Everything else "pulls".
fn pull_failure(image: &str) -> Option<String> {
    let (first, rest) = image.split_once('/')?;
    let host = first.split(':').next().unwrap_or(first);
    let registry = first.contains('.') || first.contains(':') || first == "localhost";
    if !registry || !(host == "invalid" || host.ends_with(".invalid")) {
        return None;
    }
    let (repo, reference) = match rest.rsplit_once('@') {
        Some((r, d)) => (r, d),
        None => match rest.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, t),
            _ => (rest, "latest"),
        },
    };
    Some(format!(
        "failed to pull and unpack image {image:?}: failed to resolve reference {image:?}: \
         failed to do request: Head \"https://{first}/v2/{repo}/manifests/{reference}\": dial \
         tcp: lookup {host}: no such host"
    ))
}

fn expand(value: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        if let Some(after) = tail.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(inner) = tail.strip_prefix('(')
            && let Some(end) = inner.find(')')
            && let Some(v) = env.get(&inner[..end])
        {
            out.push_str(v);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

// ---------------------------------------------------------------------------------------------
// Readiness: has the worker polled?

/// Connection, Temporal namespace and task queue: one `DescribeTaskQueue` answers for every
/// waiting worker on it.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ProbeTarget {
    /// The worker's connection settings (identity and the non-connection fields blanked).
    connection: WorkerConfig,
    namespace: String,
    task_queue: String,
}

struct Waiter {
    identity: String,
    deployment: String,
    build_id: String,
    /// An unversioned worker polls with no version: its identity alone names it.
    unversioned: bool,
    since: SystemTime,
    ready: oneshot::Sender<()>,
}

#[derive(Default)]
struct Prober {
    pending: Mutex<HashMap<ProbeTarget, Vec<Waiter>>>,
    wake: Notify,
}

impl Prober {
    /// `ready` fires once Temporal lists `cfg.identity` as a poller of `cfg`'s version that
    /// polled after `since`.
    fn register(&self, cfg: &WorkerConfig, since: SystemTime, ready: oneshot::Sender<()>) {
        let target = ProbeTarget {
            connection: WorkerConfig {
                identity: MANAGER.into(),
                namespace: String::new(),
                deployment_name: String::new(),
                build_id: String::new(),
                task_queue: String::new(),
                ..cfg.clone()
            },
            namespace: cfg.namespace.clone(),
            task_queue: cfg.task_queue.clone(),
        };
        let waiter = Waiter {
            identity: cfg.identity.clone(),
            deployment: cfg.deployment_name.clone(),
            build_id: cfg.build_id.clone(),
            unversioned: cfg.unversioned,
            since,
            ready,
        };
        if let Ok(mut p) = self.pending.lock() {
            p.entry(target).or_default().push(waiter);
        }
        self.wake.notify_one();
    }

    async fn run(self: Arc<Self>) {
        let mut connections: HashMap<WorkerConfig, Connection> = HashMap::new();
        loop {
            let targets: Vec<ProbeTarget> = match self.pending.lock() {
                Ok(mut p) => {
                    p.retain(|_, ws| {
                        ws.retain(|w| !w.ready.is_closed());
                        !ws.is_empty()
                    });
                    p.keys().cloned().collect()
                }
                Err(_) => return,
            };
            if targets.is_empty() {
                self.wake.notified().await;
                continue;
            }
            let mut calls = Vec::new();
            for target in targets {
                let conn = match connections.get(&target.connection) {
                    Some(c) => c.clone(),
                    None => match connect(&target.connection).await {
                        Ok(c) => {
                            connections.insert(target.connection.clone(), c.clone());
                            c
                        }
                        Err(e) => {
                            tracing::debug!(address = %target.connection.address, error = %format!("{e:#}"), "readiness prober cannot connect");
                            continue;
                        }
                    },
                };
                calls.push(async move {
                    let pollers = describe(conn, &target.namespace, &target.task_queue).await;
                    (target, pollers)
                });
            }
            for (target, pollers) in futures::future::join_all(calls).await {
                let pollers = match pollers {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::debug!(task_queue = %target.task_queue, error = %format!("{e:#}"), "readiness probe failed");
                        // Reconnect next time only if the connection itself is the problem.
                        let transport = e
                            .downcast_ref::<temporalio_client::tonic::Status>()
                            .is_none_or(|s| {
                                s.code() == temporalio_client::tonic::Code::Unavailable
                            });
                        if transport {
                            connections.remove(&target.connection);
                        }
                        continue;
                    }
                };
                let Ok(mut pending) = self.pending.lock() else {
                    return;
                };
                let Some(waiters) = pending.remove(&target) else {
                    continue;
                };
                let mut left = Vec::new();
                for w in waiters {
                    let seen = pollers.iter().any(|p| {
                        p.identity == w.identity
                            && (w.unversioned
                                || (p.deployment == w.deployment && p.build_id == w.build_id))
                            && p.last_access >= w.since
                    });
                    if seen {
                        let _ = w.ready.send(());
                    } else {
                        left.push(w);
                    }
                }
                if !left.is_empty() {
                    pending.entry(target).or_default().extend(left);
                }
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    }
}

struct Poller {
    identity: String,
    deployment: String,
    build_id: String,
    last_access: SystemTime,
}

async fn connect(cfg: &WorkerConfig) -> Result<Connection> {
    let opts = cfg.connection_options()?;
    tokio::time::timeout(PROBE_CALL_DEADLINE, Connection::connect(opts))
        .await
        .context("connecting timed out")?
        .context("connecting")
}

/// Workflow-task pollers of a task queue, as Temporal lists them.
async fn describe(conn: Connection, namespace: &str, task_queue: &str) -> Result<Vec<Poller>> {
    let pollers = tokio::time::timeout(
        PROBE_CALL_DEADLINE,
        crate::observe::workflow_pollers(&conn, namespace, task_queue),
    )
    .await
    .context("DescribeTaskQueue timed out")??;
    Ok(pollers
        .into_iter()
        .map(|p| {
            let last_access = p
                .last_access_time
                .and_then(|t| {
                    let secs = u64::try_from(t.seconds).ok()?;
                    let nanos = u32::try_from(t.nanos).ok()?;
                    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
                })
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let (deployment, build_id) = p
                .deployment_options
                .map(|o| (o.deployment_name, o.build_id))
                .unwrap_or_default();
            Poller {
                identity: p.identity,
                deployment,
                build_id,
                last_access,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::{expand, pull_failure, unschedulable};
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[test]
    fn only_images_of_an_unresolvable_registry_fail_to_pull() {
        let m = pull_failure("registry.invalid/team/worker:v2").expect("fails");
        assert!(m.contains("lookup registry.invalid: no such host"), "{m}");
        assert!(m.contains("/v2/team/worker/manifests/v2"), "{m}");
        assert!(pull_failure("registry.invalid:5000/w@sha256:abc").is_some());
        assert_eq!(pull_failure("worker:v2"), None);
        assert_eq!(pull_failure("ghcr.io/temporalio/worker:v2"), None);
        assert_eq!(
            pull_failure("invalid/worker:v2"),
            None,
            "a Docker Hub user, not a host"
        );
    }

    #[test]
    fn a_node_selector_the_node_lacks_is_unschedulable() {
        let pod = |selector: serde_json::Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c"}], "nodeSelector": selector}}))
            .unwrap()
        };
        assert_eq!(
            unschedulable(&pod(json!({"kubernetes.io/os": "linux"})), "n"),
            None
        );
        let why = unschedulable(&pod(json!({"pool": "gpu"})), "n").expect("unschedulable");
        assert!(
            why.contains("didn't match Pod's node affinity/selector"),
            "{why}"
        );
    }

    #[test]
    fn env_expansion_follows_kubernetes() {
        let env: BTreeMap<String, String> = [("A".to_string(), "x".to_string())].into();
        assert_eq!(expand("$(A)/b", &env), "x/b");
        assert_eq!(expand("$$(A)", &env), "$(A)");
        assert_eq!(expand("$(B)", &env), "$(B)");
        assert_eq!(expand("a$", &env), "a$");
        assert_eq!(expand("$(A", &env), "$(A");
    }
}
