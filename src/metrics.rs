//! Prometheus metrics in the OpenMetrics text format.
//!
//! Two kinds of families:
//! - operational counters and histograms (reconciles, Temporal RPCs, Kubernetes writes,
//!   leadership, gates), updated from hot paths through atomics;
//! - rollout state (phase, ramp, versions, steps…), computed from the reflector store at
//!   scrape time, so a deleted `TemporalWorkerDeployment` leaves no stale series behind.
//!
//! Naming follows the Prometheus conventions: prefix `temporal_worker_controller_`, base
//! units as suffixes, `_total` on counters (added by the encoder), build IDs only on the
//! `_info` gauge and no per-object labels on histograms.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::api::TemporalWorkerDeployment;
use crate::summary::{self as view, Phase, RolloutSummary};

/// Metric name prefix (without the trailing underscore).
pub const PREFIX: &str = "temporal_worker_controller";
/// The `controller` label value on reconcile metrics.
/// Content type of [`Metrics::encode`] output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of [`Metrics::encode_prometheus_text`] output.
pub const CONTENT_TYPE_PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

const RECONCILE_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
const BUDGET_BUCKETS: [f64; 9] = [0.005, 0.02, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0];
const RPC_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// Which reconciler (the skeleton in `src/reconciler.rs`): the `controller` label of the
/// reconcile metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Controller {
    WorkerDeployment,
    OwnedResource,
    Connection,
}

impl Controller {
    pub const ALL: [Controller; 3] = [
        Controller::WorkerDeployment,
        Controller::OwnedResource,
        Controller::Connection,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Controller::WorkerDeployment => "temporalworkerdeployment",
            Controller::OwnedResource => "temporalworkerownedresource",
            Controller::Connection => "temporalconnection",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    controller: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileErrorLabels {
    controller: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    method: &'static str,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KubeWriteLabels {
    verb: &'static str,
    resource: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: &'static str,
}

// Scrape-time label sets (owned strings: they come from the store).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjLabels {
    namespace: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    namespace: String,
    name: String,
    strategy: &'static str,
    phase: &'static str,
    reason: String,
    target_build: String,
    current_build: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjBuildLabels {
    namespace: String,
    name: String,
    build_id: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjStatusLabels {
    namespace: String,
    name: String,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

type GaugeF = Gauge<f64, AtomicU64>;

fn rpc_histogram() -> Histogram {
    Histogram::new(RPC_BUCKETS)
}

fn budget_histogram() -> Histogram {
    Histogram::new(BUDGET_BUCKETS)
}

type BudgetWait = Family<ClassLabels, Histogram, fn() -> Histogram>;

/// The Temporal budget's series: waits per class (pre-created) and refusals per method.
fn register_budget(registry: &mut Registry) -> (BudgetWait, Family<MethodLabels, Counter>) {
    let wait = BudgetWait::new_with_constructor(budget_histogram as fn() -> Histogram);
    registry.register_with_unit(
        "temporal_budget_wait",
        "Time Temporal calls waited for the client-side budget of their Temporal namespace (--temporal-qps and friends), by class (shared, visibility, routing)",
        Unit::Seconds,
        wait.clone(),
    );
    for class in ["shared", "visibility", "routing"] {
        let _ = wait.get_or_create(&ClassLabels { class });
    }
    let exhausted = counters(
        registry,
        "temporal_resource_exhausted",
        "Temporal calls answered ResourceExhausted (rate limited by the server), by method",
        [],
    );
    (wait, exhausted)
}

/// All controller metrics. Share it behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    reconcile_duration: Family<ControllerLabels, Histogram>,
    temporal_requests: Family<RpcLabels, Counter>,
    temporal_duration: Family<MethodLabels, Histogram, fn() -> Histogram>,
    kube_writes: Family<KubeWriteLabels, Counter>,
    leader: Gauge,
    gates: Family<OutcomeLabels, Counter>,
    pinned_ended: Family<ActionLabels, Counter>,
    /// The last per-version task-queue poll (`crate::backlog`), rendered at scrape time.
    pub backlog: Arc<crate::backlog::Stats>,
    analysis: Family<VerdictLabels, Counter>,
    budget_wait: BudgetWait,
    exhausted: Family<MethodLabels, Counter>,
    start_time: f64,
}

/// Measures one reconcile; call [`ReconcileTimer::finish`] with the result label.
#[must_use = "call finish() to record the reconcile"]
pub struct ReconcileTimer {
    started: Instant,
    controller: &'static str,
    reconciles: Family<ReconcileLabels, Counter>,
    duration: Family<ControllerLabels, Histogram>,
}

impl ReconcileTimer {
    /// Records the duration and counts the reconcile under `result` (`success`, `error`…).
    pub fn finish(self, result: &'static str) {
        let elapsed = self.started.elapsed().as_secs_f64();
        self.duration
            .get_or_create(&ControllerLabels {
                controller: self.controller,
            })
            .observe(elapsed);
        self.reconciles
            .get_or_create(&ReconcileLabels {
                controller: self.controller,
                result,
            })
            .inc();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix(PREFIX);
        let reconciles = counters(
            &mut registry,
            "reconcile",
            "Reconciles by result",
            Controller::ALL.into_iter().flat_map(|c| {
                ["success", "error"].map(|result| ReconcileLabels {
                    controller: c.as_str(),
                    result,
                })
            }),
        );
        let reconcile_errors = counters(
            &mut registry,
            "reconcile_errors",
            "Reconciles that ended blocked or failed, by condition reason",
            [],
        );
        let reconcile_duration =
            Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
                Histogram::new(RECONCILE_BUCKETS)
            });
        registry.register_with_unit(
            "reconcile_duration",
            "Time spent in one reconcile",
            Unit::Seconds,
            reconcile_duration.clone(),
        );
        let temporal_requests = counters(
            &mut registry,
            "temporal_requests",
            "Temporal gRPC calls by method and status code",
            [],
        );
        let temporal_duration =
            Family::<MethodLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                rpc_histogram as fn() -> Histogram,
            );
        registry.register_with_unit(
            "temporal_request_duration",
            "Latency of Temporal gRPC calls",
            Unit::Seconds,
            temporal_duration.clone(),
        );
        let kube_writes = counters(
            &mut registry,
            "kube_writes",
            "Kubernetes API writes by verb, resource and result",
            [],
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader lease",
            leader.clone(),
        );
        // Pre-created series: rates exist before the first event.
        let gates = counters(
            &mut registry,
            "gate_workflows",
            "Finished gate workflows by outcome",
            ["completed", "failed"].map(|outcome| OutcomeLabels { outcome }),
        );
        let pinned_ended = counters(
            &mut registry,
            "pinned_workflow_batches",
            "Batch operations that signalled, cancelled or terminated the workflows pinned to an old version (spec.sunset.upgradeSignal / cancelPinnedAfter / terminatePinnedAfter), by action",
            ["signal", "cancel", "terminate"].map(|action| ActionLabels { action }),
        );
        let analysis = counters(
            &mut registry,
            "analysis_verdicts",
            "Canary analysis verdicts by verdict",
            ["pass", "fail", "inconclusive"].map(|verdict| VerdictLabels { verdict }),
        );
        let (budget_wait, exhausted) = register_budget(&mut registry);
        register_build_info(&mut registry);
        // Pre-create the series dashboards divide by, so rates exist before the first event.
        for c in Controller::ALL {
            let _ = reconcile_duration.get_or_create(&ControllerLabels {
                controller: c.as_str(),
            });
        }

        let start_time = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
        Metrics {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_duration,
            temporal_requests,
            temporal_duration,
            kube_writes,
            leader,
            gates,
            pinned_ended,
            backlog: Arc::default(),
            analysis,
            budget_wait,
            exhausted,
            start_time,
        }
    }

    pub fn reconcile_started(&self, controller: Controller) -> ReconcileTimer {
        ReconcileTimer {
            started: Instant::now(),
            controller: controller.as_str(),
            reconciles: self.reconciles.clone(),
            duration: self.reconcile_duration.clone(),
        }
    }

    /// Counts a failed or blocked reconcile; `reason` is the condition reason (bounded set).
    pub fn reconcile_error(&self, controller: Controller, reason: &'static str) {
        self.reconcile_errors
            .get_or_create(&ReconcileErrorLabels {
                controller: controller.as_str(),
                reason,
            })
            .inc();
    }

    /// One Temporal gRPC call. `code` is the gRPC status code name (`OK`, `Unavailable`…).
    pub fn temporal_rpc(&self, method: &'static str, code: &'static str, latency: Duration) {
        if code == "ResourceExhausted" {
            self.exhausted.get_or_create(&MethodLabels { method }).inc();
        }
        self.temporal_requests
            .get_or_create(&RpcLabels { method, code })
            .inc();
        self.temporal_duration
            .get_or_create(&MethodLabels { method })
            .observe(latency.as_secs_f64());
    }

    /// One Temporal call that waited `waited` for its namespace's budget.
    pub fn budget_wait(&self, class: &'static str, waited: Duration) {
        self.budget_wait
            .get_or_create(&ClassLabels { class })
            .observe(waited.as_secs_f64());
    }

    pub fn kube_write(&self, verb: &'static str, resource: &'static str, ok: bool) {
        let result = if ok { "success" } else { "error" };
        self.kube_writes
            .get_or_create(&KubeWriteLabels {
                verb,
                resource,
                result,
            })
            .inc();
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Whether this replica currently acts as leader (what `set_leader` last said).
    pub fn is_leader(&self) -> bool {
        self.leader.get() == 1
    }

    /// A gate workflow finished: `completed` or `failed`.
    pub fn gate_outcome(&self, outcome: &'static str) {
        self.gates.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Temporal was asked to `cancel` or `terminate` the workflows pinned to an old version.
    pub fn pinned_workflows_ended(&self, action: &'static str) {
        self.pinned_ended
            .get_or_create(&ActionLabels { action })
            .inc();
    }

    /// A canary analysis verdict: `pass`, `fail` or `inconclusive`.
    pub fn analysis_verdict(&self, verdict: &'static str) {
        self.analysis
            .get_or_create(&VerdictLabels { verdict })
            .inc();
    }

    /// The full exposition: operational metrics, rollout state from `store`, process metrics.
    pub fn encode(&self, store: &Store<TemporalWorkerDeployment>) -> String {
        self.encode_at(store, jiff::Timestamp::now())
    }

    /// The same exposition in Prometheus text format 0.0.4.
    pub fn encode_prometheus_text(&self, store: &Store<TemporalWorkerDeployment>) -> String {
        openmetrics_to_prometheus_text(&self.encode(store))
    }

    /// [`Metrics::encode`] with an explicit clock (tests).
    pub fn encode_at(
        &self,
        store: &Store<TemporalWorkerDeployment>,
        now: jiff::Timestamp,
    ) -> String {
        let mut scrape = scrape_registry(store, now, self.start_time);
        register_backlog(&mut scrape, &self.backlog.get());
        let mut out = String::with_capacity(16 * 1024);
        // Writing into a String cannot fail; an Err here would only come from a broken
        // encoder, and a partial exposition is still better than none.
        let _ = encode_registry(&mut out, &self.registry);
        let _ = encode_registry(&mut out, &scrape);
        let _ = encode_eof(&mut out);
        out
    }
}

/// Rewrites an OpenMetrics exposition as Prometheus text format 0.0.4, for scrapers (and
/// `promtool check metrics`) that do not speak OpenMetrics. The two differ only in metadata:
/// 0.0.4 names counter families with their `_total` suffix, has no `# UNIT` / `# EOF`
/// lines and no `info` type.
pub fn openmetrics_to_prometheus_text(text: &str) -> String {
    use std::collections::HashMap;
    // Family name -> (suffix to append in metadata, type to print).
    let mut families: HashMap<&str, (&str, &str)> = HashMap::new();
    for line in text.lines() {
        if let Some((name, ty)) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_once(' '))
        {
            let mapped = match ty {
                "counter" => ("_total", "counter"),
                "info" => ("_info", "gauge"),
                "gauge" | "histogram" | "summary" => ("", ty),
                _ => ("", "untyped"),
            };
            families.insert(name, mapped);
        }
    }
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match meta {
            Some((kind, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let (suffix, ty) = families.get(name).copied().unwrap_or(("", "untyped"));
                out.push_str(kind);
                out.push_str(name);
                if !name.ends_with(suffix) {
                    out.push_str(suffix);
                }
                out.push(' ');
                out.push_str(if kind == "# TYPE " { ty } else { tail });
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The standard `process_*` families, read at scrape time.
fn register_process(root: &mut Registry, start_time: f64) {
    let process = process_stats();
    let proc_reg = root.sub_registry_with_prefix("process");
    let g = |v: f64| -> GaugeF {
        let g = GaugeF::default();
        g.set(v);
        g
    };
    if let Some(rss) = process.resident_bytes {
        proc_reg.register_with_unit(
            "resident_memory",
            "Resident memory size",
            Unit::Bytes,
            g(rss),
        );
    }
    if let Some(vms) = process.virtual_bytes {
        proc_reg.register_with_unit("virtual_memory", "Virtual memory size", Unit::Bytes, g(vms));
    }
    if let Some(fds) = process.open_fds {
        proc_reg.register("open_fds", "Open file descriptors", g(fds));
    }
    if let Some(cpu) = process.cpu_seconds {
        // Counter semantics, but the value is read, not accumulated here.
        let c = Counter::<f64, AtomicU64>::default();
        c.inc_by(cpu);
        proc_reg.register_with_unit("cpu", "User and system CPU time", Unit::Seconds, c);
    }
    proc_reg.register_with_unit(
        "start_time",
        "Start time of the process since the Unix epoch",
        Unit::Seconds,
        g(start_time),
    );
}

/// The per-rollout families of one scrape.
#[derive(Default)]
struct RolloutFamilies {
    info: Family<InfoLabels, Gauge>,
    by_phase: Family<PhaseLabels, Gauge>,
    ramp: Family<ObjLabels, GaugeF>,
    versions: Family<ObjStatusLabels, Gauge>,
    step: Family<ObjLabels, Gauge>,
    steps: Family<ObjLabels, Gauge>,
    next_step: Family<ObjLabels, GaugeF>,
    transition: Family<ObjLabels, GaugeF>,
    in_phase: Family<ObjLabels, GaugeF>,
    ready: Family<ObjLabels, Gauge>,
    stalled: Family<ObjLabels, Gauge>,
    lag: Family<ObjLabels, Gauge>,
    pinned: Family<ObjBuildLabels, Gauge>,
    draining_since: Family<ObjBuildLabels, GaugeF>,
}

impl RolloutFamilies {
    /// Adds one rollout's series.
    fn record(&self, s: &RolloutSummary, now_s: f64) {
        let obj = ObjLabels {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
        };
        self.info
            .get_or_create(&InfoLabels {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                strategy: view::strategy_str(s.strategy),
                phase: s.phase.as_str(),
                reason: s.reason.clone().unwrap_or_default(),
                target_build: s.target_build_id.clone().unwrap_or_default(),
                current_build: s.current_build_id.clone().unwrap_or_default(),
            })
            .set(1);
        self.by_phase
            .get_or_create(&PhaseLabels {
                phase: s.phase.as_str(),
            })
            .inc();
        self.ramp.get_or_create(&obj).set(s.target_traffic_ratio);
        // Only statuses present: six always-on series per object would dominate the scrape.
        for v in &s.versions {
            let labels = ObjStatusLabels {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                status: view::version_status_str(v.status),
            };
            self.versions.get_or_create(&labels).set(v.count as i64);
        }
        if let Some(i) = s.step {
            self.step.get_or_create(&obj).set(i64::from(i));
        }
        if s.steps > 0 {
            self.steps.get_or_create(&obj).set(s.steps as i64);
        }
        if let Some(t) = s.next_step_at {
            self.next_step
                .get_or_create(&obj)
                .set(t.as_millisecond() as f64 / 1000.0);
        }
        if let Some(t) = s.phase_since {
            let t = t.as_millisecond() as f64 / 1000.0;
            self.transition.get_or_create(&obj).set(t);
            self.in_phase.get_or_create(&obj).set((now_s - t).max(0.0));
        }
        self.ready.get_or_create(&obj).set(i64::from(s.ready));
        self.stalled.get_or_create(&obj).set(i64::from(s.stalled));
        self.lag.get_or_create(&obj).set(s.generation_lag());
        for d in &s.draining {
            let labels = ObjBuildLabels {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                build_id: d.build_id.clone(),
            };
            if let Some(n) = d.open_pinned_workflows {
                self.pinned.get_or_create(&labels).set(n);
            }
            if let Some(t) = d.draining_since {
                self.draining_since
                    .get_or_create(&labels)
                    .set(t.as_millisecond() as f64 / 1000.0);
            }
        }
    }
}

/// A fresh registry per scrape for the families derived from the store.
fn scrape_registry(
    store: &Store<TemporalWorkerDeployment>,
    now: jiff::Timestamp,
    start_time: f64,
) -> Registry {
    let mut root = Registry::default();
    register_process(&mut root, start_time);

    let reg = root.sub_registry_with_prefix(PREFIX);
    let f = RolloutFamilies::default();

    for phase in Phase::ALL {
        let _ = f.by_phase.get_or_create(&PhaseLabels {
            phase: phase.as_str(),
        });
    }
    let now_s = now.as_millisecond() as f64 / 1000.0;
    for twd in store.state() {
        f.record(&RolloutSummary::from_twd(&twd), now_s);
    }

    reg.register(
        "rollout_info",
        "One series per TemporalWorkerDeployment (value 1) carrying strategy, phase, reason and build IDs",
        f.info,
    );
    reg.register("rollouts", "TemporalWorkerDeployments by phase", f.by_phase);
    reg.register(
        "rollout_ramp_ratio",
        "Share of new workflows routed to the target version (1 once it is Current)",
        f.ramp,
    );
    reg.register(
        "rollout_versions",
        "Versions listed in status by Temporal version status",
        f.versions,
    );
    reg.register(
        "version_open_pinned_workflows",
        "Open workflows pinned to an old (Draining or Drained) version, from Temporal visibility",
        f.pinned,
    );
    reg.register(
        "version_draining_since_timestamp_seconds",
        "When Temporal started draining an old version, Unix time",
        f.draining_since,
    );
    reg.register(
        "rollout_step",
        "Zero-based index of the progressive step in effect",
        f.step,
    );
    reg.register(
        "rollout_configured_steps",
        "Number of progressive steps in the spec",
        f.steps,
    );
    reg.register(
        "rollout_next_step_timestamp_seconds",
        "When the next progressive step (or promotion) is due, Unix time",
        f.next_step,
    );
    reg.register(
        "rollout_phase_transition_timestamp_seconds",
        "When the rollout entered its current phase, Unix time",
        f.transition,
    );
    reg.register_with_unit(
        "rollout_time_in_phase",
        "Time since the rollout entered its current phase",
        Unit::Seconds,
        f.in_phase,
    );
    reg.register(
        "rollout_ready",
        "1 when the Ready condition is True",
        f.ready,
    );
    reg.register(
        "rollout_stalled",
        "1 when the Stalled condition is True",
        f.stalled,
    );
    reg.register(
        "rollout_observed_generation_lag",
        "metadata.generation minus status.observedGeneration",
        f.lag,
    );
    root
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    namespace: String,
    name: String,
    build_id: String,
    task_queue: String,
    task_queue_type: &'static str,
    // The version labels a TemporalWorkerOwnedResource injects into an HPA's external-metric
    // selector (the owned-resource rules' `METRIC_LABEL_*`; tests/metrics.rs checks they agree),
    // so such an HPA selects its own version's series.
    temporal_worker_deployment_name: String,
    temporal_worker_build_id: String,
    temporal_namespace: String,
}

fn register_build_info(registry: &mut Registry) {
    let build_info = Family::<VersionLabels, Gauge>::default();
    build_info
        .get_or_create(&VersionLabels {
            version: env!("CARGO_PKG_VERSION"),
        })
        .set(1);
    registry.register(
        "build_info",
        "Controller version (value is always 1)",
        build_info,
    );
}

/// A registered counter family with `pre` series created at zero.
fn counters<L>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    pre: impl IntoIterator<Item = L>,
) -> Family<L, Counter>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    let family = Family::<L, Counter>::default();
    registry.register(name, help, family.clone());
    for labels in pre {
        let _ = family.get_or_create(&labels);
    }
    family
}

/// The per-version task-queue families from the last backlog poll (`crate::backlog`).
fn register_backlog(root: &mut Registry, queues: &[crate::backlog::VersionQueue]) {
    let count = Family::<QueueLabels, Gauge>::default();
    let age = Family::<QueueLabels, GaugeF>::default();
    let added = Family::<QueueLabels, GaugeF>::default();
    let dispatched = Family::<QueueLabels, GaugeF>::default();
    for q in queues {
        let labels = QueueLabels {
            namespace: q.namespace.clone(),
            name: q.name.clone(),
            build_id: q.build_id.clone(),
            task_queue: q.stats.task_queue.clone(),
            task_queue_type: q.stats.queue_type,
            temporal_worker_deployment_name: format!("{}_{}", q.namespace, q.name),
            temporal_worker_build_id: q.build_id.clone(),
            temporal_namespace: q.temporal_namespace.clone(),
        };
        count.get_or_create(&labels).set(q.stats.backlog_count);
        age.get_or_create(&labels).set(q.stats.backlog_age_seconds);
        added.get_or_create(&labels).set(q.stats.add_rate);
        dispatched.get_or_create(&labels).set(q.stats.dispatch_rate);
    }
    let reg = root.sub_registry_with_prefix(PREFIX);
    reg.register(
        "version_backlog_tasks",
        "Approximate tasks waiting in a live version's task queue (Temporal's per-version task-queue stats)",
        count,
    );
    reg.register(
        "version_backlog_age_seconds",
        "Age of the oldest task waiting in a live version's task queue",
        age,
    );
    reg.register(
        "version_task_add_rate",
        "Tasks added per second to a live version's task queue (Temporal's 30 s average)",
        added,
    );
    reg.register(
        "version_task_dispatch_rate",
        "Tasks dispatched per second from a live version's task queue (Temporal's 30 s average)",
        dispatched,
    );
}

#[derive(Debug, Default, Clone, Copy)]
struct ProcessStats {
    resident_bytes: Option<f64>,
    virtual_bytes: Option<f64>,
    open_fds: Option<f64>,
    cpu_seconds: Option<f64>,
}

/// Linux `/proc/self` figures; absent elsewhere (the families are then omitted).
fn process_stats() -> ProcessStats {
    // Pages in /proc are 4 KiB on the platforms we ship (x86_64, aarch64 with 4 KiB pages);
    // USER_HZ is 100 on both. Reading them via libc is not worth a dependency.
    const PAGE: f64 = 4096.0;
    const USER_HZ: f64 = 100.0;
    let mut out = ProcessStats::default();
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
        let mut fields = statm.split_whitespace().map(|f| f.parse::<f64>().ok());
        out.virtual_bytes = fields.next().flatten().map(|p| p * PAGE);
        out.resident_bytes = fields.next().flatten().map(|p| p * PAGE);
    }
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // The command name (field 2) may contain spaces: parse after its closing paren.
        if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) {
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // rest starts at field 3 (state); utime and stime are fields 14 and 15.
            let utime = fields.get(11).and_then(|v| v.parse::<f64>().ok());
            let stime = fields.get(12).and_then(|v| v.parse::<f64>().ok());
            if let (Some(u), Some(s)) = (utime, stime) {
                out.cpu_seconds = Some((u + s) / USER_HZ);
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        out.open_fds = Some(dir.count() as f64);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;

    #[test]
    fn operational_metrics_are_encoded() {
        let m = Metrics::new();
        let t = m.reconcile_started(Controller::OwnedResource);
        t.finish("success");
        m.reconcile_error(Controller::WorkerDeployment, "InvalidSpec");
        m.temporal_rpc("DescribeWorkerDeployment", "OK", Duration::from_millis(3));
        m.kube_write("patch", "deployments/scale", false);
        m.set_leader(true);
        m.gate_outcome("failed");
        m.pinned_workflows_ended("cancel");
        let store = Writer::<TemporalWorkerDeployment>::default().as_reader();
        let text = m.encode(&store);
        for line in [
            "temporal_worker_controller_reconcile_total{controller=\"temporalworkerownedresource\",result=\"success\"} 1",
            "temporal_worker_controller_reconcile_total{controller=\"temporalworkerdeployment\",result=\"success\"} 0",
            "temporal_worker_controller_reconcile_total{controller=\"temporalconnection\",result=\"error\"} 0",
            "temporal_worker_controller_reconcile_errors_total{controller=\"temporalworkerdeployment\",reason=\"InvalidSpec\"} 1",
            "temporal_worker_controller_reconcile_duration_seconds_count{controller=\"temporalworkerownedresource\"} 1",
            "temporal_worker_controller_reconcile_duration_seconds_count{controller=\"temporalconnection\"} 0",
            "temporal_worker_controller_temporal_requests_total{method=\"DescribeWorkerDeployment\",code=\"OK\"} 1",
            "temporal_worker_controller_temporal_request_duration_seconds_bucket{le=\"0.005\",method=\"DescribeWorkerDeployment\"} 1",
            "temporal_worker_controller_kube_writes_total{verb=\"patch\",resource=\"deployments/scale\",result=\"error\"} 1",
            "temporal_worker_controller_leader 1",
            "temporal_worker_controller_gate_workflows_total{outcome=\"failed\"} 1",
            "temporal_worker_controller_pinned_workflow_batches_total{action=\"cancel\"} 1",
            "temporal_worker_controller_pinned_workflow_batches_total{action=\"terminate\"} 0",
            "temporal_worker_controller_pinned_workflow_batches_total{action=\"signal\"} 0",
            "temporal_worker_controller_rollouts{phase=\"Completed\"} 0",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(text.matches("# EOF").count(), 1);
        m.set_leader(false);
        assert!(
            m.encode(&store)
                .contains("temporal_worker_controller_leader 0")
        );
    }

    #[test]
    fn old_versions_export_their_pinned_workflows_and_drain_start() {
        use crate::api::twd::{DeprecatedVersion, TemporalWorkerDeploymentStatus, VersionStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let old = |build: &str, status, pinned: Option<i64>, since: Option<&str>| {
            let mut d = DeprecatedVersion::test(build, status);
            d.draining_since = since.map(|s| Time(s.parse().expect("ts")));
            d.open_pinned_workflows = pinned;
            d
        };
        let mut twd = TemporalWorkerDeployment::test();
        twd.status = Some(TemporalWorkerDeploymentStatus {
            deprecated_versions: vec![
                old(
                    "v1",
                    VersionStatus::Draining,
                    Some(3),
                    Some("2026-03-02T10:00:00Z"),
                ),
                old("v0", VersionStatus::Drained, Some(0), None),
                old("vi", VersionStatus::Inactive, Some(9), None),
            ],
            ..Default::default()
        });
        let mut writer = Writer::<TemporalWorkerDeployment>::default();
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(twd));
        let text = Metrics::new().encode(&writer.as_reader());
        for line in [
            "temporal_worker_controller_version_open_pinned_workflows{namespace=\"shop\",name=\"orders\",build_id=\"v1\"} 3",
            "temporal_worker_controller_version_open_pinned_workflows{namespace=\"shop\",name=\"orders\",build_id=\"v0\"} 0",
            "temporal_worker_controller_version_draining_since_timestamp_seconds{namespace=\"shop\",name=\"orders\",build_id=\"v1\"} 1772445600",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
        assert!(
            !text.contains("build_id=\"vi\""),
            "an Inactive version is not draining"
        );
    }

    #[test]
    fn the_backlog_of_each_live_version_is_exported_with_its_build_id() {
        use crate::backlog::VersionQueue;
        use crate::temporal::task_queue_stats::QueueStats;
        let m = Metrics::new();
        let store = Writer::<TemporalWorkerDeployment>::default().as_reader();
        assert!(
            !m.encode(&store).contains("version_backlog_tasks{"),
            "no poll yet"
        );
        let queue = |build: &str, count| VersionQueue {
            namespace: "shop".into(),
            name: "orders".into(),
            build_id: build.into(),
            temporal_namespace: "prod".into(),
            stats: QueueStats {
                task_queue: "orders".into(),
                queue_type: "workflow",
                backlog_count: count,
                backlog_age_seconds: 1.5,
                add_rate: 2.0,
                dispatch_rate: 0.5,
            },
        };
        m.backlog.replace(vec![queue("v1", 0), queue("v2", 7)]);
        let text = m.encode(&store);
        let labels = "namespace=\"shop\",name=\"orders\",build_id=\"v2\",task_queue=\"orders\",task_queue_type=\"workflow\",temporal_worker_deployment_name=\"shop_orders\",temporal_worker_build_id=\"v2\",temporal_namespace=\"prod\"";
        for line in [
            format!("temporal_worker_controller_version_backlog_tasks{{{labels}}} 7"),
            format!("temporal_worker_controller_version_backlog_age_seconds{{{labels}}} 1.5"),
            format!("temporal_worker_controller_version_task_add_rate{{{labels}}} 2.0"),
            format!("temporal_worker_controller_version_task_dispatch_rate{{{labels}}} 0.5"),
        ] {
            assert!(text.contains(&line), "missing {line:?} in:\n{text}");
        }
        assert!(text.contains(
            "build_id=\"v1\",task_queue=\"orders\",task_queue_type=\"workflow\",temporal_worker_deployment_name=\"shop_orders\",temporal_worker_build_id=\"v1\",temporal_namespace=\"prod\"} 0"
        ));
    }

    #[test]
    fn converts_to_prometheus_text() {
        let om = "# HELP a_reconcile Reconciles.\n# TYPE a_reconcile counter\na_reconcile_total{x=\"1\"} 2\n\
                  # HELP a_dur_seconds Time.\n# TYPE a_dur_seconds histogram\n# UNIT a_dur_seconds seconds\n\
                  a_dur_seconds_sum 1.0\n# HELP a_build Build.\n# TYPE a_build info\na_build_info{v=\"1\"} 1\n# EOF\n";
        let want = "# HELP a_reconcile_total Reconciles.\n# TYPE a_reconcile_total counter\na_reconcile_total{x=\"1\"} 2\n\
                    # HELP a_dur_seconds Time.\n# TYPE a_dur_seconds histogram\na_dur_seconds_sum 1.0\n\
                    # HELP a_build_info Build.\n# TYPE a_build_info gauge\na_build_info{v=\"1\"} 1\n";
        assert_eq!(openmetrics_to_prometheus_text(om), want);
    }

    #[test]
    fn process_stats_on_linux() {
        let p = process_stats();
        if cfg!(target_os = "linux") {
            assert!(p.resident_bytes.unwrap() > 0.0);
            assert!(p.open_fds.unwrap() >= 1.0);
            assert!(p.cpu_seconds.is_some());
        }
    }
}
