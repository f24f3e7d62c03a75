//! The operational families: counters and histograms updated from hot paths through atomics
//! (reconciles, Temporal RPCs and budget, Kubernetes writes, leadership, gates, analysis).

use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::labels::{
    ActionLabels, ClassLabels, ControllerLabels, KubeWriteLabels, MethodLabels, OutcomeLabels,
    ReconcileErrorLabels, ReconcileLabels, RpcLabels, VersionLabels,
};

const RECONCILE_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
const BUDGET_BUCKETS: [f64; 9] = [0.005, 0.02, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0];
/// A rollout lasts from seconds (AllAtOnce with a fast worker) to hours (long pauses between
/// steps): 10 s to 1 day.
const ROLLOUT_BUCKETS: [f64; 12] = [
    10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0,
];
const RPC_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// Which reconciler a reconcile metric counts: the `controller` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControllerKind {
    /// TemporalWorkerDeployment (`src/worker_deployment`).
    WorkerDeployment,
    /// TemporalWorkerOwnedResource (`src/owned`).
    OwnedResource,
    /// TemporalConnection (`src/connection`).
    Connection,
}

impl ControllerKind {
    /// Every counted controller; their series are pre-created.
    pub const ALL: [ControllerKind; 3] = [
        ControllerKind::WorkerDeployment,
        ControllerKind::OwnedResource,
        ControllerKind::Connection,
    ];

    /// The label value: the lowercase kind name, as controller-runtime (and so the Go
    /// controller) labels its reconcile metrics; `temporalworkerdeployment` predates the other.
    pub fn as_str(self) -> &'static str {
        match self {
            ControllerKind::WorkerDeployment => "temporalworkerdeployment",
            ControllerKind::OwnedResource => "temporalworkerownedresource",
            ControllerKind::Connection => "temporalconnection",
        }
    }
}

/// How one reconcile ended: the `outcome` label of `reconcile_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileOutcome {
    Success,
    /// Failed or blocked; the reason is counted by [`Metrics::reconcile_error`].
    Error,
}

impl ReconcileOutcome {
    pub const ALL: [ReconcileOutcome; 2] = [ReconcileOutcome::Success, ReconcileOutcome::Error];

    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileOutcome::Success => "success",
            ReconcileOutcome::Error => "error",
        }
    }
}

/// How a rollout ended: the `outcome` label of `rollout_outcomes_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RolloutOutcome {
    /// The target was made Current.
    Completed,
    /// `Stalled` turned True for another reason than an abort (an invalid spec, a failed
    /// gate, the progress deadline).
    Stalled,
    /// `Stalled` turned True with `RolloutAborted` (a failed analysis or step gate, or a
    /// human's abort).
    Aborted,
    /// A build Current within the rollback window was made Current again.
    RolledBack,
}

impl RolloutOutcome {
    pub const ALL: [RolloutOutcome; 4] = [
        RolloutOutcome::Completed,
        RolloutOutcome::Stalled,
        RolloutOutcome::Aborted,
        RolloutOutcome::RolledBack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RolloutOutcome::Completed => "completed",
            RolloutOutcome::Stalled => "stalled",
            RolloutOutcome::Aborted => "aborted",
            RolloutOutcome::RolledBack => "rolled_back",
        }
    }
}

type RpcHistograms = Family<MethodLabels, Histogram, fn() -> Histogram>;
type BudgetWait = Family<ClassLabels, Histogram, fn() -> Histogram>;

/// The operational families, registered once in the long-lived registry; [`super::Metrics`]
/// hands its recording calls to the methods below.
#[derive(Debug)]
pub(super) struct Operational {
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    reconcile_duration: Family<ControllerLabels, Histogram>,
    temporal_requests: Family<RpcLabels, Counter>,
    temporal_duration: RpcHistograms,
    kube_writes: Family<KubeWriteLabels, Counter>,
    leader: Gauge,
    gates: Family<OutcomeLabels, Counter>,
    pinned_ended: Family<ActionLabels, Counter>,
    draining_at_zero: Family<ActionLabels, Counter>,
    version_records: Family<OutcomeLabels, Counter>,
    analysis: Family<OutcomeLabels, Counter>,
    budget_wait: BudgetWait,
    exhausted: Family<MethodLabels, Counter>,
    rollout_outcomes: Family<OutcomeLabels, Counter>,
    rollout_duration: Histogram,
}

impl Operational {
    pub(super) fn register(registry: &mut Registry) -> Operational {
        let (reconciles, reconcile_errors, reconcile_duration) = register_reconcile(registry);
        let (temporal_requests, temporal_duration) = register_temporal(registry);
        let kube_writes = counters(
            registry,
            "kube_writes",
            "Kubernetes API writes by verb, resource and outcome",
            [],
        );
        let leader = register_leader(registry);
        // Pre-created series: rates exist before the first event.
        let gates = counters(
            registry,
            "gate_workflows",
            "Finished gate workflows by outcome",
            ["completed", "failed"].map(|outcome| OutcomeLabels { outcome }),
        );
        let pinned_ended = counters(
            registry,
            "pinned_workflow_batches",
            "Batch operations that signalled, cancelled or terminated the workflows pinned to an old version (spec.sunset.upgradeSignal / cancelPinnedAfter / terminatePinnedAfter), by action",
            ["signal", "cancel", "terminate"].map(|action| ActionLabels { action }),
        );
        let draining_at_zero = counters(
            registry,
            "draining_versions_at_zero",
            "Draining versions found at 0 replicas with open pinned workflows: scaled back up (no autoscaler) or held there by an autoscaler (reported once per episode), by action",
            ["scaled_up", "held_by_autoscaler"].map(|action| ActionLabels { action }),
        );
        let version_records = counters(
            registry,
            "version_record_deletions",
            "Deletions of old versions' records in Temporal once their Deployments are gone, by outcome (deleted, already_gone, has_pollers: refused while Temporal remembers pollers, retried; error)",
            ["deleted", "already_gone", "has_pollers", "error"]
                .map(|outcome| OutcomeLabels { outcome }),
        );
        let analysis = counters(
            registry,
            "analysis_verdicts",
            "Canary analysis verdicts by outcome",
            ["pass", "fail", "inconclusive"].map(|outcome| OutcomeLabels { outcome }),
        );
        let (budget_wait, exhausted) = register_budget(registry);
        let (rollout_outcomes, rollout_duration) = register_rollouts(registry);
        register_build_info(registry);
        Operational {
            reconciles,
            reconcile_errors,
            reconcile_duration,
            temporal_requests,
            temporal_duration,
            kube_writes,
            leader,
            gates,
            pinned_ended,
            draining_at_zero,
            version_records,
            analysis,
            budget_wait,
            exhausted,
            rollout_outcomes,
            rollout_duration,
        }
    }
}

/// Temporal gRPC calls by method and code, and their latency.
fn register_temporal(registry: &mut Registry) -> (Family<RpcLabels, Counter>, RpcHistograms) {
    let requests = counters(
        registry,
        "temporal_requests",
        "Temporal gRPC calls by method and status code",
        [],
    );
    let duration = RpcHistograms::new_with_constructor(rpc_histogram as fn() -> Histogram);
    registry.register_with_unit(
        "temporal_request_duration",
        "Latency of Temporal gRPC calls",
        Unit::Seconds,
        duration.clone(),
    );
    (requests, duration)
}

fn register_leader(registry: &mut Registry) -> Gauge {
    let leader = Gauge::default();
    registry.register(
        "leader",
        "1 while this replica holds the leader lease",
        leader.clone(),
    );
    leader
}

/// How rollouts ended (every outcome pre-created) and how long completed ones took.
fn register_rollouts(registry: &mut Registry) -> (Family<OutcomeLabels, Counter>, Histogram) {
    let outcomes = counters(
        registry,
        "rollout_outcomes",
        "Rollouts that ended, by outcome: completed (target made Current), stalled, aborted (RolloutAborted), rolled_back",
        RolloutOutcome::ALL.map(|o| OutcomeLabels {
            outcome: o.as_str(),
        }),
    );
    let duration = Histogram::new(ROLLOUT_BUCKETS);
    registry.register_with_unit(
        "rollout_duration",
        "Time from the creation of a target's versioned Deployment to the target made Current, for completed rollouts",
        Unit::Seconds,
        duration.clone(),
    );
    (outcomes, duration)
}

type ReconcileFamilies = (
    Family<ReconcileLabels, Counter>,
    Family<ReconcileErrorLabels, Counter>,
    Family<ControllerLabels, Histogram>,
);

/// Reconcile count, errors by reason and duration, with every controller's count and duration
/// pre-created so dashboards can divide by them before its first reconcile.
fn register_reconcile(registry: &mut Registry) -> ReconcileFamilies {
    let reconciles = counters(
        registry,
        "reconcile",
        "Reconciles by controller and outcome",
        ControllerKind::ALL.into_iter().flat_map(|kind| {
            ReconcileOutcome::ALL.map(|outcome| ReconcileLabels {
                controller: kind.as_str(),
                outcome: outcome.as_str(),
            })
        }),
    );
    let reconcile_errors = counters(
        registry,
        "reconcile_errors",
        "Reconciles that ended blocked or failed, by controller and condition reason",
        [],
    );
    let reconcile_duration = Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
        Histogram::new(RECONCILE_BUCKETS)
    });
    registry.register_with_unit(
        "reconcile_duration",
        "Time spent in one reconcile, by controller",
        Unit::Seconds,
        reconcile_duration.clone(),
    );
    for kind in ControllerKind::ALL {
        let _ = reconcile_duration.get_or_create(&ControllerLabels {
            controller: kind.as_str(),
        });
    }
    (reconciles, reconcile_errors, reconcile_duration)
}

fn rpc_histogram() -> Histogram {
    Histogram::new(RPC_BUCKETS)
}

fn budget_histogram() -> Histogram {
    Histogram::new(BUDGET_BUCKETS)
}

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

/// Measures one reconcile; call [`ReconcileTimer::finish`] with how it ended.
#[must_use = "call finish() to record the reconcile"]
pub struct ReconcileTimer {
    started: Instant,
    controller: ControllerKind,
    reconciles: Family<ReconcileLabels, Counter>,
    duration: Family<ControllerLabels, Histogram>,
}

impl ReconcileTimer {
    /// Records the duration and counts the reconcile under `outcome`.
    pub fn finish(self, outcome: ReconcileOutcome) {
        let controller = self.controller.as_str();
        let elapsed = self.started.elapsed().as_secs_f64();
        self.duration
            .get_or_create(&ControllerLabels { controller })
            .observe(elapsed);
        self.reconciles
            .get_or_create(&ReconcileLabels {
                controller,
                outcome: outcome.as_str(),
            })
            .inc();
    }
}

impl Operational {
    /// Starts timing one reconcile of `controller`.
    pub(super) fn reconcile_started(&self, controller: ControllerKind) -> ReconcileTimer {
        ReconcileTimer {
            started: Instant::now(),
            controller,
            reconciles: self.reconciles.clone(),
            duration: self.reconcile_duration.clone(),
        }
    }

    /// Counts a failed or blocked reconcile; `reason` is the condition reason (bounded set).
    pub(super) fn reconcile_error(&self, controller: ControllerKind, reason: &'static str) {
        self.reconcile_errors
            .get_or_create(&ReconcileErrorLabels {
                controller: controller.as_str(),
                reason,
            })
            .inc();
    }

    /// One Temporal gRPC call. `code` is the gRPC status code name (`OK`, `Unavailable`…).
    pub(super) fn temporal_rpc(&self, method: &'static str, code: &'static str, latency: Duration) {
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
    pub(super) fn budget_wait(&self, class: &'static str, waited: Duration) {
        self.budget_wait
            .get_or_create(&ClassLabels { class })
            .observe(waited.as_secs_f64());
    }

    /// One Kubernetes write; `ok` becomes the `outcome` label (`success` or `error`).
    pub(super) fn kube_write(&self, verb: &'static str, resource: &'static str, ok: bool) {
        let outcome = if ok {
            ReconcileOutcome::Success
        } else {
            ReconcileOutcome::Error
        };
        self.kube_write_outcome(verb, resource, outcome.as_str());
    }

    pub(super) fn kube_write_outcome(
        &self,
        verb: &'static str,
        resource: &'static str,
        outcome: &'static str,
    ) {
        self.kube_writes
            .get_or_create(&KubeWriteLabels {
                verb,
                resource,
                outcome,
            })
            .inc();
    }

    pub(super) fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Whether this replica currently acts as leader (what `set_leader` last said).
    pub(super) fn is_leader(&self) -> bool {
        self.leader.get() == 1
    }

    /// A gate workflow finished: `completed` or `failed`.
    pub(super) fn gate_outcome(&self, outcome: &'static str) {
        self.gates.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Temporal was asked to `signal`, `cancel` or `terminate` the workflows pinned to an old
    /// version.
    pub(super) fn pinned_workflows_ended(&self, action: &'static str) {
        self.pinned_ended
            .get_or_create(&ActionLabels { action })
            .inc();
    }

    /// A Draining version at 0 replicas with open pinned workflows: `scaled_up` or
    /// `held_by_autoscaler`.
    pub(super) fn draining_at_zero(&self, action: &'static str) {
        self.draining_at_zero
            .get_or_create(&ActionLabels { action })
            .inc();
    }

    /// One attempt to delete an old version's record in Temporal, by outcome.
    pub(super) fn version_record_deletion(&self, outcome: &'static str) {
        self.version_records
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// A canary analysis verdict, counted under `outcome`: `pass`, `fail` or `inconclusive`.
    pub(super) fn analysis_verdict(&self, outcome: &'static str) {
        self.analysis
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// A rollout ended with `outcome`.
    pub(super) fn rollout_outcome(&self, outcome: RolloutOutcome) {
        self.rollout_outcomes
            .get_or_create(&OutcomeLabels {
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// A completed rollout took `took`.
    pub(super) fn rollout_duration(&self, took: Duration) {
        self.rollout_duration.observe(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::metrics::Metrics;

    fn encoded(m: &Metrics) -> String {
        m.encode(&crate::workers::Workers::of(vec![]))
    }

    #[test]
    fn operational_metrics_are_encoded() {
        let m = Metrics::new();
        m.reconcile_started(ControllerKind::WorkerDeployment)
            .finish(ReconcileOutcome::Success);
        m.reconcile_error(ControllerKind::WorkerDeployment, "InvalidSpec");
        m.temporal_rpc("DescribeWorkerDeployment", "OK", Duration::from_millis(3));
        m.kube_write("patch", "deployments/scale", false);
        m.set_leader(true);
        m.gate_outcome("failed");
        m.pinned_workflows_ended("cancel");
        m.analysis_verdict("fail");
        let text = encoded(&m);
        for line in [
            "temporal_worker_controller_reconcile_total{controller=\"temporalworkerdeployment\",outcome=\"success\"} 1",
            "temporal_worker_controller_reconcile_total{controller=\"temporalworkerdeployment\",outcome=\"error\"} 0",
            "temporal_worker_controller_reconcile_errors_total{controller=\"temporalworkerdeployment\",reason=\"InvalidSpec\"} 1",
            "temporal_worker_controller_reconcile_duration_seconds_count{controller=\"temporalworkerdeployment\"} 1",
            "temporal_worker_controller_temporal_requests_total{method=\"DescribeWorkerDeployment\",code=\"OK\"} 1",
            "temporal_worker_controller_temporal_request_duration_seconds_bucket{le=\"0.005\",method=\"DescribeWorkerDeployment\"} 1",
            "temporal_worker_controller_kube_writes_total{verb=\"patch\",resource=\"deployments/scale\",outcome=\"error\"} 1",
            "temporal_worker_controller_leader 1",
            "temporal_worker_controller_gate_workflows_total{outcome=\"failed\"} 1",
            "temporal_worker_controller_gate_workflows_total{outcome=\"completed\"} 0",
            "temporal_worker_controller_analysis_verdicts_total{outcome=\"fail\"} 1",
            "temporal_worker_controller_analysis_verdicts_total{outcome=\"pass\"} 0",
            "temporal_worker_controller_pinned_workflow_batches_total{action=\"cancel\"} 1",
            "temporal_worker_controller_pinned_workflow_batches_total{action=\"terminate\"} 0",
            "temporal_worker_controller_pinned_workflow_batches_total{action=\"signal\"} 0",
            "temporal_worker_controller_rollouts{phase=\"Completed\"} 0",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
        for old in ["result=", "verdict="] {
            assert!(!text.contains(old), "old label {old} in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(text.matches("# EOF").count(), 1);
        m.set_leader(false);
        assert!(encoded(&m).contains("temporal_worker_controller_leader 0"));
    }

    #[test]
    fn rollout_outcomes_exist_from_the_start_and_durations_are_observed() {
        let m = Metrics::new();
        let before = encoded(&m);
        for o in RolloutOutcome::ALL {
            let line = format!(
                "temporal_worker_controller_rollout_outcomes_total{{outcome=\"{}\"}} 0",
                o.as_str()
            );
            assert!(before.contains(&line), "missing {line:?} in:\n{before}");
        }
        m.rollout_outcome(RolloutOutcome::RolledBack);
        m.rollout_duration(Duration::from_secs(90));
        let after = encoded(&m);
        for line in [
            "temporal_worker_controller_rollout_outcomes_total{outcome=\"rolled_back\"} 1",
            "temporal_worker_controller_rollout_outcomes_total{outcome=\"completed\"} 0",
            "temporal_worker_controller_rollout_duration_seconds_count 1",
            "temporal_worker_controller_rollout_duration_seconds_bucket{le=\"60.0\"} 0",
            "temporal_worker_controller_rollout_duration_seconds_bucket{le=\"120.0\"} 1",
        ] {
            assert!(after.contains(line), "missing {line:?} in:\n{after}");
        }
    }

    #[test]
    fn every_controller_is_counted_under_its_own_label_from_the_start() {
        let m = Metrics::new();
        let before = encoded(&m);
        for kind in ControllerKind::ALL {
            let c = kind.as_str();
            for outcome in ["success", "error"] {
                let line = format!(
                    "temporal_worker_controller_reconcile_total{{controller=\"{c}\",outcome=\"{outcome}\"}} 0"
                );
                assert!(before.contains(&line), "missing {line:?} in:\n{before}");
            }
            let count = format!(
                "temporal_worker_controller_reconcile_duration_seconds_count{{controller=\"{c}\"}} 0"
            );
            assert!(before.contains(&count), "missing {count:?}");
        }
        m.reconcile_started(ControllerKind::OwnedResource)
            .finish(ReconcileOutcome::Error);
        m.reconcile_error(ControllerKind::OwnedResource, "ApplyFailed");
        let after = encoded(&m);
        for line in [
            "temporal_worker_controller_reconcile_total{controller=\"temporalworkerownedresource\",outcome=\"error\"} 1",
            "temporal_worker_controller_reconcile_total{controller=\"temporalworkerdeployment\",outcome=\"error\"} 0",
            "temporal_worker_controller_reconcile_errors_total{controller=\"temporalworkerownedresource\",reason=\"ApplyFailed\"} 1",
            "temporal_worker_controller_reconcile_duration_seconds_count{controller=\"temporalworkerownedresource\"} 1",
        ] {
            assert!(after.contains(line), "missing {line:?} in:\n{after}");
        }
    }
}
