//! Prometheus metrics in the OpenMetrics text format.
//!
//! Two kinds of families:
//! - operational counters and histograms ([`operational`]: reconciles, Temporal RPCs,
//!   Kubernetes writes, leadership, gates), updated from hot paths through atomics;
//! - state computed at scrape time: rollouts from the reflector store ([`rollout`]), so a
//!   deleted `TemporalWorkerDeployment` leaves no stale series behind, Connections' client
//!   certificates and reachability from the Connection caches ([`connections`]), the last
//!   backlog poll ([`backlog`]), the mirrored work queues ([`queue`]) and the process
//!   ([`process`]);
//! - the admission webhook's requests and certificate ([`webhook`]).
//!
//! One vocabulary for our families (prefix `temporal_worker_controller_`; every label set is
//! in [`labels`]):
//! - a build ID is labelled `build_id`; a family that needs two says which:
//!   `target_build_id` and `current_build_id` (only `rollout_info`). The backlog families also
//!   carry `temporal_worker_build_id`, `temporal_worker_deployment_name` and
//!   `temporal_namespace`: the labels autoscaler metric selectors use, shared with the Go
//!   controller, so they keep those names;
//! - how something ended is labelled `outcome`;
//! - a reconcile metric names its reconciler in `controller` ([`ControllerKind`]);
//! - a unit is given to `register_with_unit`, which appends it to the name, never typed into
//!   the name; counters get `_total` from the encoder;
//! - histograms carry no per-object labels (no namespace, name or build ID).
//!
//! Build IDs appear on `rollout_info`, the two old-version families and the four backlog
//! families; `docs/status-api.md` lists them and a test (`tests.rs`) checks the list.

mod backlog;
mod connections;
mod labels;
mod operational;
mod process;
mod queue;
mod rollout;
mod text;
mod webhook;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::registry::Registry;

pub use operational::{ControllerKind, ReconcileOutcome, ReconcileTimer, RolloutOutcome};
pub use queue::{QueueSnapshot, QueueTracker, WorkQueues};
pub use text::openmetrics_to_prometheus_text;
pub use webhook::WebhookVerdict;

/// Metric name prefix (without the trailing underscore).
pub const PREFIX: &str = "temporal_worker_controller";
/// Content type of [`Metrics::encode`] output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of [`Metrics::encode_prometheus_text`] output.
pub const CONTENT_TYPE_PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// All controller metrics. Share it behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    ops: operational::Operational,
    /// The last per-version task-queue poll (`crate::backlog`), rendered at scrape time.
    pub backlog: Arc<crate::backlog::Stats>,
    /// The Connection caches, for the certificate families, rendered at scrape time.
    pub connections: connections::ConnectionStores,
    /// Each controller's reconcile requests, mirrored by its wiring (`src/controller`).
    pub queues: Arc<WorkQueues>,
    webhook: webhook::WebhookFamilies,
    system_trust_roots: prometheus_client::metrics::gauge::Gauge,
    start_time: f64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix(PREFIX);
        let ops = operational::Operational::register(&mut registry);
        let webhook = webhook::WebhookFamilies::register(&mut registry);
        let system_trust_roots = prometheus_client::metrics::gauge::Gauge::default();
        registry.register(
            "system_trust_roots",
            "CA certificates the controller loaded from the system trust store at start",
            system_trust_roots.clone(),
        );
        let start_time = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
        Metrics {
            registry,
            ops,
            backlog: Arc::default(),
            connections: connections::ConnectionStores::default(),
            queues: Arc::default(),
            webhook,
            system_trust_roots,
            start_time,
        }
    }

    /// How many system trust roots the process loaded at start.
    pub fn set_system_trust_roots(&self, loaded: usize) {
        self.system_trust_roots
            .set(i64::try_from(loaded).unwrap_or(i64::MAX));
    }

    /// Starts timing one reconcile of `controller`; finish it with how it ended.
    pub fn reconcile_started(&self, controller: ControllerKind) -> ReconcileTimer {
        self.ops.reconcile_started(controller)
    }

    /// Counts a failed or blocked reconcile; `reason` is the condition reason (bounded set).
    pub fn reconcile_error(&self, controller: ControllerKind, reason: &'static str) {
        self.ops.reconcile_error(controller, reason);
    }

    /// One Temporal gRPC call. `code` is the gRPC status code name (`OK`, `Unavailable`…).
    pub fn temporal_rpc(&self, method: &'static str, code: &'static str, latency: Duration) {
        self.ops.temporal_rpc(method, code, latency);
    }

    /// One Temporal call that waited `waited` for its namespace's budget.
    pub fn budget_wait(&self, class: &'static str, waited: Duration) {
        self.ops.budget_wait(class, waited);
    }

    /// One Kubernetes write; `ok` becomes the `outcome` label (`success` or `error`).
    pub fn kube_write(&self, verb: &'static str, resource: &'static str, ok: bool) {
        self.ops.kube_write(verb, resource, ok);
    }

    /// A write refused with 409 because the object changed since it was read (counted apart
    /// from errors: each one is a wasted round trip and a retry).
    pub fn kube_write_conflict(&self, verb: &'static str, resource: &'static str) {
        self.ops.kube_write_outcome(verb, resource, "conflict");
    }

    pub fn set_leader(&self, leader: bool) {
        self.ops.set_leader(leader);
    }

    /// Whether this replica currently acts as leader (what `set_leader` last said).
    pub fn is_leader(&self) -> bool {
        self.ops.is_leader()
    }

    /// A gate workflow finished: `completed` or `failed`.
    pub fn gate_outcome(&self, outcome: &'static str) {
        self.ops.gate_outcome(outcome);
    }

    /// Temporal was asked to `signal`, `cancel` or `terminate` the workflows pinned to an old
    /// version.
    pub fn pinned_workflows_ended(&self, action: &'static str) {
        self.ops.pinned_workflows_ended(action);
    }

    /// A Draining version at 0 replicas with open pinned workflows: `scaled_up` (no
    /// autoscaler) or `held_by_autoscaler` (reported).
    pub fn draining_at_zero(&self, action: &'static str) {
        self.ops.draining_at_zero(action);
    }

    /// One attempt to delete an old version's record in Temporal: `deleted`, `already_gone`,
    /// `has_pollers` (refused, retried later) or `error`.
    pub fn version_record_deletion(&self, outcome: &'static str) {
        self.ops.version_record_deletion(outcome);
    }

    /// A canary analysis verdict, counted under `outcome`: `pass`, `fail` or `inconclusive`.
    pub fn analysis_verdict(&self, outcome: &'static str) {
        self.ops.analysis_verdict(outcome);
    }

    /// A rollout ended with `outcome`.
    pub fn rollout_outcome(&self, outcome: RolloutOutcome) {
        self.ops.rollout_outcome(outcome);
    }

    /// A completed rollout took `took`, from its target's Deployment to the target Current.
    pub fn rollout_duration(&self, took: Duration) {
        self.ops.rollout_duration(took);
    }

    /// One admission request the webhook answered for an object of `kind`, in `took`.
    pub fn webhook_request(&self, kind: &str, verdict: WebhookVerdict, took: Duration) {
        self.webhook.request(kind, verdict, took);
    }

    /// The webhook now serves a certificate ending at `not_after` (`None`: none it can read).
    pub fn webhook_certificate(&self, not_after: Option<jiff::Timestamp>) {
        self.webhook.certificate(not_after);
    }

    /// The full exposition: operational metrics, rollout state from `store`, process metrics.
    pub fn encode(&self, store: &crate::workers::Workers) -> String {
        self.encode_at(store, jiff::Timestamp::now())
    }

    /// The same exposition in Prometheus text format 0.0.4.
    pub fn encode_prometheus_text(&self, store: &crate::workers::Workers) -> String {
        openmetrics_to_prometheus_text(&self.encode(store))
    }

    /// [`Metrics::encode`] with an explicit clock (tests).
    pub fn encode_at(&self, store: &crate::workers::Workers, now: jiff::Timestamp) -> String {
        let scrape = self.scrape_registry(store, now);
        let mut out = String::with_capacity(16 * 1024);
        // Writing into a String cannot fail; an Err here would only come from a broken
        // encoder, and a partial exposition is still better than none.
        let _ = encode_registry(&mut out, &self.registry);
        let _ = encode_registry(&mut out, &scrape);
        let _ = encode_eof(&mut out);
        out
    }

    /// A fresh registry per scrape for the families derived from the store, the last backlog
    /// poll and the process.
    fn scrape_registry(&self, store: &crate::workers::Workers, now: jiff::Timestamp) -> Registry {
        let mut root = Registry::default();
        process::register(&mut root, self.start_time);
        let reg = root.sub_registry_with_prefix(PREFIX);
        rollout::register(reg, store, now);
        backlog::register(reg, &self.backlog.get());
        connections::register(reg, &self.connections);
        queue::register(reg, &self.queues.snapshot(std::time::Instant::now()));
        self.webhook.register_certificate(reg);
        root
    }
}

#[cfg(test)]
mod tests;
