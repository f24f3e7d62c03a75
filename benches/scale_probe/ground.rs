//! The ground every scenario stands on: the namespace, the controller's user, the objects the
//! scenarios apply (one manifest per object and scenario) and the clock their timings read.
//! It imports no other module of the probe, so the scenarios and the rig import it freely.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use futures::{StreamExt as _, TryStreamExt as _};
use serde_json::{Value, json};
use test_harness::go_controller;

/// The Kubernetes and Temporal namespace of the first [`PER_KUBE_NS`] objects of a scenario
/// (every object of a scenario of at most that many).
pub const NS: &str = "bench";

/// Objects per Kubernetes namespace, as a fleet spreads them: object `i` lives in [`NS`] for
/// `i < PER_KUBE_NS`, else in `bench-<i / PER_KUBE_NS>` ([`kube_ns`]).
pub const PER_KUBE_NS: usize = 500;

/// The Kubernetes namespaces share this many Temporal namespaces, round robin ([`temporal_ns`]):
/// at 10,000 objects, 20 Kubernetes namespaces over 4 Temporal ones (2,500 objects each).
pub const TEMPORAL_NAMESPACES: usize = 4;

/// The label that tells a scenario's objects apart: `fleet` (the N objects), `beside` (the
/// Progressive rollouts run beside a waiting fleet) or `churn`.
pub const ROLE: &str = "scale-probe/role";

/// The Kubernetes namespace of object `i`.
pub fn kube_ns(i: usize) -> String {
    match i / PER_KUBE_NS {
        0 => NS.into(),
        j => format!("{NS}-{j}"),
    }
}

/// The Temporal namespace of object `i` (the same for every object of a Kubernetes namespace).
pub fn temporal_ns(i: usize) -> String {
    match (i / PER_KUBE_NS) % TEMPORAL_NAMESPACES {
        0 => NS.into(),
        j => format!("{NS}-t{j}"),
    }
}

/// The name of object `i`.
pub fn object_name(i: usize) -> String {
    format!("wd-{i:04}")
}

/// The index of the object named `name` ([`object_name`]).
pub fn index_of(name: &str) -> Option<usize> {
    name.strip_prefix("wd-")?.parse().ok()
}

/// The Temporal namespace and worker deployment name (`<k8s-namespace>/<name>`) of the object
/// named `name`.
pub fn temporal_of(name: &str) -> (String, String) {
    let i = index_of(name).unwrap_or_default();
    (temporal_ns(i), format!("{}/{name}", kube_ns(i)))
}

/// The Kubernetes and Temporal namespaces objects `0..n` live in, each once.
pub fn namespaces(n: usize) -> (Vec<String>, Vec<String>) {
    let kube: Vec<String> = (0..n.max(1).div_ceil(PER_KUBE_NS))
        .map(|j| kube_ns(j * PER_KUBE_NS))
        .collect();
    let mut temporal: Vec<String> = (0..kube.len())
        .map(|j| temporal_ns(j * PER_KUBE_NS))
        .collect();
    temporal.sort();
    temporal.dedup();
    (kube, temporal)
}

/// `wd` labelled with its role ([`ROLE`]).
pub fn with_role(mut wd: Value, role: &str) -> Value {
    wd["metadata"]["labels"][ROLE] = json!(role);
    wd
}

/// List parameters selecting the objects of one role.
pub fn of_role(role: &str) -> kube::api::ListParams {
    kube::api::ListParams::default().labels(&format!("{ROLE}={role}"))
}

/// The controller's own namespace (its Lease, the Go controller's identity suffix).
pub const SYSTEM_NS: &str = "bench-system";

/// The user both controllers authenticate as (client certificate, `system:masters`).
pub const CONTROLLER_USER: &str = "bench-controller";

/// The `WorkerDeployment`s of every namespace (the Go controller's kind, which both
/// controllers serve).
pub fn worker_deployments(client: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::all_with(
        client.clone(),
        &go_controller::api_resource("WorkerDeployment"),
    )
}

/// What the N objects do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Pods never become Ready (their scheduler does not exist): rollouts wait for pollers.
    Waiting,
    /// Rolled out (AllAtOnce) with one live worker each, then left alone.
    Idle,
    /// Rolled out at v1 with live workers, then changed to v2 one after another: a
    /// Progressive rollout of two steps ([`pause`] each).
    Rollout,
    /// Rolled out at v1, then changed to v2 one after another (AllAtOnce): pollers →
    /// SetCurrent, then v1 drains and is scaled down ([`promote`]).
    Promote,
    /// Rolled out at v1, then all changed to v2 at once ([`burst`]).
    Burst,
    /// N waiting objects exist before the controller starts: its cold start.
    Startup,
    /// N objects a minute created with live workers and deleted a minute later, for several
    /// minutes; then nothing of them may be left ([`churn`](crate::churn)).
    Churn,
}

impl Scenario {
    pub fn label(self) -> String {
        match self {
            Scenario::Waiting => "waiting".into(),
            Scenario::Idle => "idle (rolled out, live workers)".into(),
            Scenario::Rollout => format!(
                "Progressive rollouts v1 → v2 (25 %, 50 %, {} s pauses), 1.5 s apart",
                pause().as_secs()
            ),
            Scenario::Promote => format!(
                "AllAtOnce rollouts v1 → v2 1.5 s apart, then v1 drains (scaledownDelay {} s)",
                scaledown_delay().as_secs()
            ),
            Scenario::Burst => "burst: all change image at once (AllAtOnce)".into(),
            Scenario::Startup => "cold start with N waiting objects".into(),
            Scenario::Churn => format!(
                "churn: N objects a minute created and deleted {} s later",
                LIFETIME.as_secs()
            ),
        }
    }
}

/// `WorkerDeployment` `wd-<i>` in [`kube_ns`]`(i)`: one replica polling its own task queue in
/// [`temporal_ns`]`(i)`, AllAtOnce, labelled `fleet` ([`ROLE`]).
pub fn manifest(scenario: Scenario, i: usize) -> Value {
    match scenario {
        Scenario::Rollout => return progressive(i, "v1"),
        Scenario::Promote | Scenario::Burst => return manifest_at(i, "v1"),
        Scenario::Churn => return with_role(manifest(Scenario::Idle, i), "churn"),
        Scenario::Waiting | Scenario::Idle | Scenario::Startup => {}
    }
    let name = object_name(i);
    let mut wd = go_controller::worker_deployment_manifest(
        &name,
        "temporal",
        &temporal_ns(i),
        &test_harness::manifests::worker_image("v1"),
        &format!("q-{name}"),
        json!({"strategy": "AllAtOnce"}),
    );
    wd["metadata"]["namespace"] = json!(kube_ns(i));
    let mut wd = with_role(wd, "fleet");
    if matches!(scenario, Scenario::Waiting | Scenario::Startup) {
        // No scheduler by that name runs, so the Pods stay Pending, as on a full cluster.
        wd["spec"]["template"]["spec"]["schedulerName"] = json!("nobody");
    }
    wd
}

/// How long each object of the churn scenario lives.
pub const LIFETIME: Duration = Duration::from_secs(60);

/// The step pause of the Progressive scenario and the scale-down delay of the promotion
/// scenario: the benchmark's, or a smoke test's (`--quick`), set once by `main` before any
/// scenario runs. The quick ones keep the CI smoke test short; every measured row of
/// docs/performance.md comes from a full run.
static TIMES: OnceLock<(Duration, Duration)> = OnceLock::new();
const FULL_TIMES: (Duration, Duration) = (Duration::from_secs(30), Duration::from_secs(45));
// The Go controller's schema refuses a step pause under 30 s, so only the delay is shorter.
const QUICK_TIMES: (Duration, Duration) = (Duration::from_secs(30), Duration::from_secs(10));

/// Uses the smoke test's shorter scale-down delay (call before any scenario).
pub fn use_quick_times() {
    let _ = TIMES.set(QUICK_TIMES);
}

/// Each step's pause in the Progressive scenario.
pub fn pause() -> Duration {
    TIMES.get().unwrap_or(&FULL_TIMES).0
}

/// The promotion scenario's `scaledownDelay`.
pub fn scaledown_delay() -> Duration {
    TIMES.get().unwrap_or(&FULL_TIMES).1
}

/// `wd-<i>` at `tag` with the two-step Progressive strategy.
pub fn progressive(i: usize, tag: &str) -> Value {
    let mut wd = manifest(Scenario::Idle, i);
    let pause = format!("{}s", pause().as_secs());
    wd["spec"]["rollout"] = json!({"strategy": "Progressive", "steps": [
        {"rampPercentage": 25, "pauseDuration": pause},
        {"rampPercentage": 50, "pauseDuration": pause},
    ]});
    wd["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!(test_harness::manifests::worker_image(tag));
    wd
}

/// `wd-<i>` at `tag`, AllAtOnce, scaled down [`scaledown_delay`] after Drained (deleted much
/// later, so that nothing is deleted while the probe reads).
pub fn manifest_at(i: usize, tag: &str) -> Value {
    let mut wd = manifest(Scenario::Idle, i);
    wd["spec"]["sunset"] = json!({
        "scaledownDelay": format!("{}s", scaledown_delay().as_secs()),
        "deleteDelay": "1h",
    });
    wd["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!(test_harness::manifests::worker_image(tag));
    wd
}

/// Server-side applies every manifest (in its `metadata.namespace`, else [`NS`]), 16 at a
/// time, as the admin.
pub async fn apply_all(
    client: &kube::Client,
    manifests: impl Iterator<Item = Value>,
) -> Result<()> {
    futures::stream::iter(manifests)
        .map(|m| async move {
            let ns = m["metadata"]["namespace"]
                .as_str()
                .unwrap_or(NS)
                .to_string();
            go_controller::apply(client, &ns, &m).await
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Whether an object's status shows the scenario's state (see `wait_reached` in `scenarios`).
pub fn reached_state(scenario: Scenario, status: &Value) -> bool {
    let target = status["targetVersion"]["buildID"].as_str().unwrap_or("");
    match scenario {
        Scenario::Waiting | Scenario::Startup => !target.is_empty(),
        Scenario::Idle
        | Scenario::Rollout
        | Scenario::Promote
        | Scenario::Burst
        | Scenario::Churn => {
            !target.is_empty() && status["currentVersion"]["buildID"].as_str() == Some(target)
        }
    }
}

/// Now, in ms since the epoch (Temporal's timestamps come from the same machine's clock).
pub fn now_ms() -> f64 {
    system_ms(SystemTime::now())
}

/// `t` in ms since the epoch.
pub fn system_ms(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or_default()
}

/// A protobuf timestamp in ms since the epoch.
pub fn ts_ms(ts: &prost_wkt_types::Timestamp) -> f64 {
    ts.seconds as f64 * 1e3 + f64::from(ts.nanos) / 1e6
}
