//! Shared end-to-end environment: one Kubernetes API (the real control plane started by the test
//! harness, or a user's cluster when `TWC_E2E_KUBECONFIG` is set), one real Temporal dev server, the kubelet stand-in running
//! real versioned workers, and the controller in-process. Started once per test binary on a
//! background runtime; each test uses its own Kubernetes namespace and Temporal namespace.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use tokio::sync::OnceCell;

pub struct Env {
    pub kubeconfig: PathBuf,
    pub temporal_address: String,
    pub http_addr: std::net::SocketAddr,
    /// A ServiceAccount token (TokenRequest, audience [`API_AUDIENCE`]) for the status API,
    /// which runs with TokenReview auth here like in a hardened install.
    pub api_token: String,
    /// The local control plane (None on a user's cluster).
    pub plane: Option<&'static test_harness::control_plane::ControlPlane>,
    pub kubelet: Option<test_harness::kubelet::Kubelet>,
    _controller: temporal_worker_controller::run::Running,
}

static ENV: OnceCell<Arc<Env>> = OnceCell::const_new();

pub const IDENTITY: &str = test_harness::chart::E2E_IDENTITY;
/// How long an audit event may trail the response the test has seen.
const T_AUDIT: Duration = Duration::from_secs(10);
/// The namespace the chart is "installed" in (its ServiceAccount, RBAC and Lease).
pub const CONTROLLER_NS: &str = test_harness::chart::E2E_NAMESPACE;
/// The only token audience the status API accepts.
pub const API_AUDIENCE: &str = test_harness::chart::E2E_API_AUDIENCE;
/// Where the status-API reader ServiceAccount lives.
pub const READER_NS: &str = "twc-e2e-readers";
pub const READER_SA: &str = "status-reader";

pub async fn env() -> Arc<Env> {
    ENV.get_or_init(|| async {
        test_harness::runtime::on_infra(start_env())
            .await
            .expect("start e2e environment")
    })
    .await
    .clone()
}

async fn start_env() -> Result<Arc<Env>> {
    crate::controller::init_tracing("warn,temporal_worker_controller=info");
    let infra = test_harness::world::Infra::start(test_harness::world::InfraOptions {
        audit_log: Some(test_harness::chart::e2e_audit_log(env!(
            "CARGO_TARGET_TMPDIR"
        ))),
        // KEDA's ScaledObject kind (no KEDA controller), for TemporalWorkerOwnedResource tests.
        extra_crds: vec![test_harness::repo_root().join("tests/fixtures/keda")],
        kubeconfig: std::env::var_os("TWC_E2E_KUBECONFIG").map(PathBuf::from),
    })
    .await?;
    let test_harness::world::Infra {
        plane,
        kubeconfig,
        client,
        temporal_address,
        kubelet,
    } = infra;
    // On the local control plane the controller runs as the chart's ServiceAccount with exactly
    // the chart's RBAC (a verb the code needs and the chart forgets fails the suite), with
    // leader election on, as installed by default.
    let (controller_client, leader_elect) = match plane {
        Some(plane) => {
            let values = test_harness::chart::e2e_values();
            let id = test_harness::chart::install_identity(plane, &values, CONTROLLER_NS).await?;
            tokio::spawn(watch_denials(
                test_harness::chart::e2e_audit_log(env!("CARGO_TARGET_TMPDIR")),
                format!(
                    "system:serviceaccount:{CONTROLLER_NS}:{}",
                    id.service_account
                ),
            ));
            (
                test_harness::control_plane::client_from(&id.kubeconfig).await?,
                true,
            )
        }
        None => (client.clone(), false),
    };
    let unchecked = test_harness::chart::E2E_UNCHECKED_KINDS.join(",");
    let flags = [
        format!("--leader-elect={leader_elect}"),
        format!("--lease-namespace={CONTROLLER_NS}"),
        format!("--identity={IDENTITY}"),
        "--idle-interval=10s".into(),
        // At rest a rollout is looked at (and Temporal described) every 24-30 s, not 5 min.
        "--rest-interval=30s".into(),
        "--fast-poll=300ms".into(),
        "--rollback-window=1h".into(),
        // Fast enough for the backlog test to see a backlog come and go within its deadlines.
        "--backlog-poll-interval=2s".into(),
        // No webhook here (tests/webhook.rs and tests/webhook_default.rs cover it), so the
        // suite opts out of the TWOR access check for the kinds it copies, as the chart's
        // values below do (webhook.kindsWithoutAccessCheck).
        format!("--owned-resource-kinds-without-access-check={unchecked}"),
        "--api-auth=token-review".into(),
        format!("--api-auth-audiences={API_AUDIENCE}"),
        // The dev server forgets a stopped poller after 5 s (`matching.PollerHistoryTTL`) and
        // live ones re-poll every 2 s, so a 10 s threshold judges by the poller list alone;
        // checked every 5 s so that the poller case sees a vanished worker within seconds.
        "--poller-live-threshold=10s".into(),
        "--poller-check-interval=5s".into(),
    ];
    let api_token = mint_token(&client, READER_NS, READER_SA, API_AUDIENCE).await?;
    let controller = crate::controller::start(controller_client, &flags).await?;
    Ok(Arc::new(Env {
        kubeconfig,
        temporal_address,
        http_addr: controller.http_addr,
        api_token,
        plane,
        kubelet,
        _controller: controller,
    }))
}

/// The first request of the controller the API server refused with 403, if any.
static DENIED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Tails the audit log for 403s of `user`: a grant the chart forgets fails the waiting test at
/// once, naming the request, instead of after every deadline of the suite.
async fn watch_denials(log: PathBuf, user: String) {
    use std::io::{Read as _, Seek as _, SeekFrom};
    // Only what was appended since the last look is read; a partial last line waits for more.
    let mut offset = 0u64;
    let mut pending = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let Ok(mut file) = std::fs::File::open(&log) else {
            continue;
        };
        if file.seek(SeekFrom::Start(offset)).is_err() {
            continue;
        }
        let Ok(read) = file.read_to_end(&mut pending) else {
            continue;
        };
        offset += read as u64;
        let Some(end) = pending.iter().rposition(|b| *b == b'\n') else {
            continue;
        };
        let complete: Vec<u8> = pending.drain(..=end).collect();
        for line in String::from_utf8_lossy(&complete).lines() {
            let Ok(e) = serde_json::from_str::<test_harness::control_plane::AuditEvent>(line)
            else {
                continue;
            };
            if e.acting_user() == user
                && e.code() == 403
                && let Ok(mut d) = DENIED.lock()
            {
                d.get_or_insert(format!("{} {} {}", e.verb, e.resource(), e.request_uri));
            }
        }
    }
}

/// Fails when the API server refused the controller a request (RBAC of the chart).
pub fn check_not_denied() -> Result<()> {
    match DENIED.lock().ok().and_then(|d| d.clone()) {
        Some(req) => bail!("the chart's RBAC refused the controller: {req}"),
        None => Ok(()),
    }
}

/// Creates (if needed) namespace `ns` and ServiceAccount `sa`, and mints a one-hour token for
/// `audience` with a TokenRequest, as `kubectl create token --audience` does.
pub async fn mint_token(
    client: &kube::Client,
    ns: &str,
    sa: &str,
    audience: &str,
) -> Result<String> {
    test_harness::control_plane::mint_token(client, ns, sa, vec![audience.to_string()], 3600).await
}

/// An Event as a user sees it in `kubectl events`.
#[derive(Clone, Debug)]
pub struct SeenEvent {
    pub type_: String,
    pub reason: String,
    pub note: String,
    /// How many times it happened (`series.count`; 1 without a series).
    pub count: i32,
    /// When the controller emitted it (`eventTime`, microseconds).
    pub time: Option<jiff::Timestamp>,
}

/// True when `want` occurs in `have` in order (other items may sit in between).
pub fn is_subsequence(have: &[&str], want: &[&str]) -> bool {
    let mut it = have.iter();
    want.iter().all(|w| it.any(|h| h == w))
}

/// One test's isolated world.
pub struct Case {
    pub env: Arc<Env>,
    pub client: kube::Client,
    pub ns: String,
    pub temporal_ns: String,
    pub task_queue: String,
}

static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

pub async fn case(prefix: &str) -> Result<Case> {
    let env = env().await;
    let client = test_harness::control_plane::client_from(&env.kubeconfig).await?;
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let suffix = format!("{}-{n}", std::process::id() % 10000);
    let ns = format!("{prefix}-{suffix}");
    test_harness::world::create_namespace(&client, &ns).await?;
    let temporal_ns = format!("e2e-{prefix}-{suffix}");
    let server = test_harness::temporal_server::shared().await?;
    server.create_namespace(&temporal_ns).await?;
    let case = Case {
        env,
        client,
        ns,
        temporal_ns,
        task_queue: format!("tq-{prefix}"),
    };
    case.apply_connection("temporal", &case.env.temporal_address.clone())
        .await?;
    Ok(case)
}

impl Case {
    pub fn twds(&self) -> Api<TemporalWorkerDeployment> {
        TemporalWorkerDeployment::api(self.client.clone(), &self.ns, KindSet::Seed)
    }

    /// The case's worker deployments under the canonical kind (`WorkerDeployment`).
    pub fn wds(&self) -> Api<TemporalWorkerDeployment> {
        TemporalWorkerDeployment::api(self.client.clone(), &self.ns, KindSet::Canonical)
    }

    /// Polls WorkerDeployment `name` (the canonical kind) until `pred` holds, at most `timeout`;
    /// returns that object.
    pub async fn wait_wd(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&TemporalWorkerDeployment) -> bool,
    ) -> Result<TemporalWorkerDeployment> {
        eventually(what, timeout, || async {
            let wd = self.wds().get(name).await?;
            Ok(pred(&wd).then_some(wd))
        })
        .await
    }

    /// The backlog the controller exports on `/metrics` for `build`'s task queue of type
    /// `queue_type` (`workflow` or `activity`), if it exports one.
    pub async fn exported_backlog<N: std::str::FromStr>(
        &self,
        name: &str,
        build: &str,
        queue_type: &str,
    ) -> Result<Option<N>> {
        let (_, text) =
            test_harness::loopback_http::get(self.env.http_addr, "/metrics", "text/plain", None)
                .await?;
        let prefix = format!(
            "temporal_worker_controller_version_backlog_tasks{{namespace=\"{}\",name=\"{name}\",build_id=\"{build}\",task_queue=\"{}\",task_queue_type=\"{queue_type}\",",
            self.ns, self.task_queue
        );
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|rest| rest.rsplit_once(' '))
            .and_then(|(_, v)| v.trim().parse().ok()))
    }

    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn temporal_deployment_name(&self, twd: &str) -> String {
        format!("{}/{twd}", self.ns)
    }

    /// Server-side applies `manifest` (one of the controller's kinds, from
    /// [`test_harness::manifests`]) in this case's namespace.
    pub async fn apply(&self, manifest: Value) -> Result<()> {
        test_harness::world::apply(&self.client, &self.ns, "e2e-test", manifest).await
    }

    pub async fn apply_connection(&self, name: &str, host_port: &str) -> Result<()> {
        self.apply(test_harness::manifests::connection(name, host_port))
            .await
    }

    /// Applies a TWD whose pod template runs image `worker:<tag>` polling this case's task
    /// queue, with a 2 s sunset, and `extra_spec` merged into its spec.
    pub async fn apply_twd(
        &self,
        name: &str,
        tag: &str,
        rollout: Value,
        extra_spec: Value,
    ) -> Result<()> {
        let twd = test_harness::manifests::twd(name)
            .replicas(1)
            .pod_labels(json!({"app": name}))
            .tag(tag)
            .task_queue(&self.task_queue)
            .rollout(rollout)
            .sunset("2s", "2s")
            .temporal_namespace(&self.temporal_ns)
            .spec(extra_spec)
            .build();
        self.apply(twd).await
    }

    /// The versioned Deployment's Pods come from Kubernetes, not from the test: a ReplicaSet
    /// owned by the Deployment owns them, they are bound to a Node and Ready, and the
    /// Deployment's status (written by kube-controller-manager, never by the controller under
    /// test, as the audit log shows) counts them available.
    pub async fn check_pods_come_from_kubernetes(&self, deployment: &str) -> Result<()> {
        use k8s_openapi::api::apps::v1::ReplicaSet;
        use k8s_openapi::api::core::v1::Pod;
        let dep = self.deployments().get(deployment).await?;
        let want = dep.spec.replicas.unwrap_or(1);
        let available = dep
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        ensure!(
            available == want,
            "{deployment}: {available}/{want} available"
        );
        let rss: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &self.ns);
        let owned_by =
            |refs: &Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
             kind: &str,
             name: &str| {
                refs.iter()
                    .flatten()
                    .any(|o| o.kind == kind && o.name == name && o.controller == Some(true))
            };
        let rs_names: Vec<String> = rss
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|rs| owned_by(&rs.metadata.owner_references, "Deployment", deployment))
            .filter_map(|rs| rs.metadata.name)
            .collect();
        ensure!(!rs_names.is_empty(), "{deployment} has no ReplicaSet");
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let ready: Vec<Pod> = pods
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|p| {
                rs_names
                    .iter()
                    .any(|rs| owned_by(&p.metadata.owner_references, "ReplicaSet", rs))
            })
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .collect();
        ensure!(
            ready.len() >= usize::try_from(want).unwrap_or(0),
            "{deployment}: {} ready Pods, want {want}",
            ready.len()
        );
        for pod in &ready {
            ensure!(
                pod.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some(),
                "Pod not bound"
            );
        }
        if let Some(plane) = self.env.plane {
            // The audit event of a request is written as the response completes, so it can
            // trail the status the test has just read: wait for it.
            let writers = eventually(
                "the Deployment status writes in the audit log",
                T_AUDIT,
                || async {
                    let writers: Vec<String> = plane
                        .audit_events()?
                        .into_iter()
                        .filter(|e| e.is_write() && e.resource() == "deployments/status")
                        .filter(|e| {
                            e.object_ref
                                .as_ref()
                                .is_some_and(|o| o.namespace == self.ns && o.name == deployment)
                        })
                        .map(|e| e.acting_user().to_string())
                        .collect();
                    Ok((!writers.is_empty()).then_some(writers))
                },
            )
            .await?;
            ensure!(
                writers
                    .iter()
                    .all(|u| u == "system:serviceaccount:kube-system:deployment-controller"),
                "{deployment}'s status written by {writers:?}"
            );
        }
        Ok(())
    }

    pub async fn get_twd(&self, name: &str) -> Result<TemporalWorkerDeployment> {
        Ok(self.twds().get(name).await?)
    }

    /// Polls the TWD until `pred` holds or the deadline passes; returns the last object.
    pub async fn wait_twd(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&TemporalWorkerDeployment) -> bool,
    ) -> Result<TemporalWorkerDeployment> {
        let deadline = Instant::now() + timeout;
        loop {
            check_not_denied()?;
            let twd = self.twds().get(name).await?;
            if pred(&twd) {
                return Ok(twd);
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {what}; status: {}",
                    serde_json::to_string_pretty(&twd.status)?
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn temporal(&self) -> Result<temporal_worker_controller::temporal::TemporalClient> {
        let pool = temporal_worker_controller::temporal::ClientPool::default();
        let spec = temporal_worker_controller::api::TemporalConnectionSpec {
            host_port: self.env.temporal_address.clone(),
            tls: None,
            mutual_tls_secret_ref: None,
            api_key_secret_ref: None,
            worker_credentials: None,
        };
        let key = temporal_worker_controller::temporal::ConnectionKey::new(
            &spec,
            temporal_worker_controller::temporal::AuthMaterial::Plain,
        );
        Ok(pool
            .get_or_connect(key, &self.temporal_ns, "e2e-observer")
            .await?)
    }

    /// Runs the real `temporal` CLI against this case's Temporal namespace.
    pub async fn temporal_cli(&self, args: &[&str]) -> Result<String> {
        let out = tokio::process::Command::new("temporal")
            .args(args)
            .args([
                "--address",
                &self.env.temporal_address,
                "--namespace",
                &self.temporal_ns,
            ])
            .output()
            .await
            .context("running temporal CLI")?;
        if !out.status.success() {
            return Err(anyhow!(
                "temporal {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Events about one TWD (events.k8s.io/v1), oldest first.
    pub async fn events_of(&self, twd: &str) -> Result<Vec<SeenEvent>> {
        let list =
            Api::<k8s_openapi::api::events::v1::Event>::namespaced(self.client.clone(), &self.ns)
                .list(&Default::default())
                .await?;
        let mut out: Vec<SeenEvent> = list
            .items
            .into_iter()
            .filter(|e| {
                e.regarding
                    .as_ref()
                    .is_some_and(|r| r.name.as_deref() == Some(twd))
            })
            .map(|e| SeenEvent {
                time: e.event_time.as_ref().map(|t| t.0),
                type_: e.type_.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                note: e.note.unwrap_or_default(),
                count: e.series.map(|s| s.count).unwrap_or(1),
            })
            .collect();
        // Timestamps, not their text: RFC 3339 strings with trimmed fractions do not sort.
        out.sort_by_key(|e| e.time);
        Ok(out)
    }

    pub fn kubectl(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.env.kubeconfig)
            .args(["-n", &self.ns]);
        cmd
    }
}

pub fn condition<'a>(
    twd: &'a TemporalWorkerDeployment,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    twd.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

pub fn condition_is(
    twd: &TemporalWorkerDeployment,
    type_: &str,
    status: &str,
    reason: &str,
) -> bool {
    condition(twd, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

pub fn target_build(twd: &TemporalWorkerDeployment) -> Option<String> {
    twd.status
        .as_ref()?
        .target_version
        .as_ref()
        .map(|t| t.version.build_id.clone())
}

pub fn current_build(twd: &TemporalWorkerDeployment) -> Option<String> {
    twd.status
        .as_ref()?
        .current_version
        .as_ref()
        .map(|t| t.build_id.clone())
}

pub fn env_of(d: &Deployment) -> BTreeMap<String, String> {
    d.spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.first())
        .and_then(|c| c.env.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| e.value.map(|v| (e.name, v)))
        .collect()
}

/// One sample of everything a rollout test asserts on.
#[derive(Clone, Debug)]
pub struct Sample {
    pub at: Instant,
    /// The TWD as JSON (what kstatus/ArgoCD see).
    pub twd: Value,
    pub temporal: temporal_worker_controller::temporal::state::WorkerDeploymentState,
    /// Running workers per versioned Deployment name (local control plane only; empty on a
    /// user's cluster).
    pub workers: BTreeMap<String, usize>,
}

/// Records every version of a TWD (polled every 40 ms) and samples its Temporal worker deployment
/// and workers (a Describe can take a second right after routing writes, so samples are
/// sparse; assertions on timing use Temporal's own timestamps).
pub struct Recorder {
    samples: Arc<std::sync::Mutex<Vec<Sample>>>,
    history: Arc<std::sync::Mutex<Vec<(Instant, Value)>>>,
    twds: Api<TemporalWorkerDeployment>,
    name: String,
    task: tokio::task::JoinHandle<()>,
    watch: tokio::task::JoinHandle<()>,
}

impl Case {
    pub async fn record(&self, twd: &str) -> Result<Recorder> {
        let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
        let out = samples.clone();
        let twds = self.twds();
        let deployments = self.deployments();
        let temporal = self.temporal().await?;
        let name = twd.to_string();
        let dep_name = self.temporal_deployment_name(twd);
        let env = self.env.clone();
        let ns = self.ns.clone();
        let history = Arc::new(std::sync::Mutex::new(Vec::new()));
        // The state before the test acts is recorded before this returns, so the history
        // always starts from it (a background first read could race the test's next apply).
        let mut first_rv: Option<String> = None;
        if let Some(obj) = self.twds().get_opt(twd).await? {
            first_rv = obj.metadata.resource_version.clone();
            history
                .lock()
                .expect("history")
                .push((Instant::now(), serde_json::to_value(&obj)?));
        }
        // A watch from the first read delivers every revision in order, as a GitOps tool
        // sees them; polling GETs could miss a revision that lived shorter than a poll.
        let watch = tokio::spawn(watch_history(
            self.twds(),
            twd.to_string(),
            first_rv,
            history.clone(),
        ));
        let task = tokio::spawn(async move {
            loop {
                // TWD first: anything its status claims happened before Temporal is read.
                let obj = twds.get_opt(&name).await;
                let state = temporal.describe_deployment(&dep_name).await;
                let deps = deployments
                    .list(&kube::api::ListParams::default().labels(&format!(
                        "{}={}",
                        temporal_worker_controller::api::LABEL_DEPLOYMENT_NAME,
                        temporal_worker_controller::render::label_value(&name)
                    )))
                    .await;
                let (state, obj, deps) = match (state, obj, deps) {
                    (Ok(s), Ok(o), Ok(d)) => (s, o, d),
                    (s, o, d) => {
                        // Temporal rate-limits reads per worker deployment; just sample again.
                        tracing::debug!(
                            "recorder: read failed: {:?} {:?} {:?}",
                            s.err(),
                            o.err(),
                            d.err()
                        );
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                if let Some(obj) = obj {
                    let workers = match &env.kubelet {
                        Some(k) => deps
                            .items
                            .iter()
                            .filter_map(|d| d.metadata.name.clone())
                            .map(|d| {
                                let n = k.running_workers(&ns, &d);
                                (d, n)
                            })
                            .collect(),
                        None => BTreeMap::new(),
                    };
                    let sample = Sample {
                        at: Instant::now(),
                        twd: serde_json::to_value(&obj).unwrap_or(Value::Null),
                        temporal: state,
                        workers,
                    };
                    out.lock().expect("samples").push(sample);
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        });
        Ok(Recorder {
            samples,
            history,
            twds: self.twds(),
            name: twd.to_string(),
            task,
            watch,
        })
    }
}

/// Appends every revision of TWD `name` after `rv` to `history`; re-watches from the last
/// revision seen when a watch ends, and re-reads when it is too old (410).
async fn watch_history(
    api: Api<TemporalWorkerDeployment>,
    name: String,
    mut rv: Option<String>,
    history: Arc<std::sync::Mutex<Vec<(Instant, Value)>>>,
) {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let push = |obj: &TemporalWorkerDeployment| {
        if let Ok(v) = serde_json::to_value(obj) {
            history.lock().expect("history").push((Instant::now(), v));
        }
    };
    loop {
        let Some(from) = rv.clone() else {
            // Nothing read yet (the TWD did not exist): start from a fresh read.
            if let Ok(Some(obj)) = api.get_opt(&name).await {
                rv = obj.metadata.resource_version.clone();
                push(&obj);
            } else {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            continue;
        };
        let params = WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(60);
        let Ok(stream) = api.watch(&params, &from).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
                    rv = obj.metadata.resource_version.clone();
                    push(&obj);
                }
                Ok(WatchEvent::Deleted(_) | WatchEvent::Bookmark(_)) => {}
                // Too old to resume from: a gap is unavoidable, so record it by re-reading.
                Ok(WatchEvent::Error(_)) | Err(_) => {
                    rv = None;
                    break;
                }
            }
        }
    }
}

impl Recorder {
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().expect("samples").clone()
    }

    /// Every version of the TWD seen so far with when it was first seen, oldest first.
    pub fn timed_history(&self) -> Vec<(Instant, Value)> {
        self.history.lock().expect("history").clone()
    }

    /// Every version of the TWD seen so far, oldest first.
    pub fn history(&self) -> Vec<Value> {
        self.timed_history().into_iter().map(|(_, v)| v).collect()
    }

    /// Waits until the history holds the TWD as it is now and a Temporal sample was taken
    /// after this call.
    pub async fn catch_up(&self) -> Result<()> {
        let now = Instant::now();
        let latest = self.twds.get(&self.name).await?;
        let rv = latest.metadata.resource_version.clone();
        let deadline = now + Duration::from_secs(60);
        loop {
            let seen = self
                .history
                .lock()
                .expect("history")
                .iter()
                .any(|(_, v)| v["metadata"]["resourceVersion"].as_str() == rv.as_deref());
            let sampled = self.samples().last().is_some_and(|s| s.at > now);
            if seen && sampled {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("recorder did not catch up (history {seen}, sampled {sampled})");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Catches up, then stops; returns the samples and the history.
    pub async fn finish(self) -> Result<(Vec<Sample>, Vec<Value>)> {
        self.catch_up().await?;
        self.task.abort();
        self.watch.abort();
        Ok((self.samples(), self.history()))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
        self.watch.abort();
    }
}

/// Describe, retrying briefly: Temporal answers ResourceExhausted for a moment after writes.
pub async fn describe_soon(
    temporal: &temporal_worker_controller::temporal::TemporalClient,
    deployment: &str,
) -> Result<temporal_worker_controller::temporal::state::WorkerDeploymentState> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match temporal.describe_deployment(deployment).await {
            Ok(s) => return Ok(s),
            Err(e) if std::time::Instant::now() > deadline => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Waits until `f` returns `Some`, polling every 100 ms.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last_err = None;
    loop {
        check_not_denied()?;
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_err = Some(e),
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what} (last error: {last_err:?})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Name of the versioned Deployment of `build` (same rule as the controller).
pub fn deployment_of(twd: &str, build: &str) -> String {
    temporal_worker_controller::build_id::deployment_name(twd, build)
}

pub fn is_ready(twd: &TemporalWorkerDeployment) -> bool {
    condition_is(twd, "Ready", "True", "RolloutComplete")
        && twd.status.as_ref().and_then(|s| s.observed_generation) == twd.metadata.generation
}
