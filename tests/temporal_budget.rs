//! Temporal is a shared budget (issue: waiting rollouts never starve progressing ones), on
//! the real control plane, the real Temporal dev server and real workers:
//!
//! 1. 300 TemporalWorkerDeployments whose Pods never become Ready (their pod template names a
//!    scheduler nobody runs, so the Pods stay Pending, as on a cluster without capacity) reach
//!    `WaitingForPollers`. Then, until each has had its rest look (`--rest-interval`, issue
//!    52) while nothing changes, the controller makes **no** Kubernetes write and **no** GET
//!    or LIST (the API server's audit log: reconciles read caches fed by watches) and at most
//!    one Temporal request per look.
//! 2. While they keep waiting, 10 Progressive rollouts on the same Temporal namespace run to the
//!    end: every step starts within 1 s of its deadline (Temporal's own timestamps), and
//!    Temporal answers **no** `ResourceExhausted` (Temporal's own metrics, which also count
//!    refusals the SDK retried).
//!
//! It prints the Temporal requests per minute of both phases. One test: the 300 waiting
//! rollouts are the load the 10 run under.

#[path = "common/controller.rs"]
mod controller;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use jiff::{SignedDuration, Timestamp};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporalio_common::protos::temporal::api::deployment::v1::{
    WorkerDeploymentVersion, WorkerDeploymentVersionInfo,
};
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeWorkerDeploymentVersionRequest;

use test_harness::manifests;
use test_harness::world::World;

const WAITING: usize = 300;
const REQUESTS: &str = "temporal_worker_controller_temporal_requests_total";
const RECONCILES: &str = "temporal_worker_controller_reconcile_total";
const PROGRESSING: usize = 10;
/// The user the controller authenticates as, so the audit log tells its writes apart.
const CONTROLLER_USER: &str = "budget-controller";
/// This test's `--rest-interval`: shorter than the default, so that every waiting rollout
/// has its rest look within the test.
const REST: Duration = Duration::from_secs(90);
const STEP_PAUSE: Duration = Duration::from_secs(8);
/// How late a step may start after its deadline.
const STEP_TOLERANCE: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_rollouts_cost_nothing_and_progressing_ones_keep_their_deadlines() -> Result<()> {
    let world = World::new("budget").await?;
    let plane = test_harness::control_plane::shared().await?;
    let controller = start_controller(&world, plane).await?;

    // 1. 300 rollouts that wait for Pods that never become Ready.
    apply_waiting_rollouts_and_wait_for_pollers(&world).await?;
    wait_for_the_controllers_writes_to_settle(plane).await?;
    check_the_rest_looks_cost_nothing(plane, controller.http_addr).await?;

    // 2. 10 Progressive rollouts on the same Temporal namespace, under that load.
    let names: Vec<String> = (0..PROGRESSING).map(|i| format!("prog-{i}")).collect();
    apply_all(&world, progressing_twds(&world, &names, "v1")).await?;
    wait_all_ready(&world, &names, "v1").await?;
    let (timelines, exhausted, ours) =
        roll_out_v2_under_load(&world, &names, controller.http_addr).await?;
    check_every_step_started_on_time(&timelines)?;
    ensure!(
        exhausted == 0.0,
        "Temporal refused {exhausted} requests with ResourceExhausted"
    );
    ensure!(
        ours == 0.0,
        "the controller saw {ours} ResourceExhausted answers"
    );
    controller.stop().await;
    Ok(())
}

/// The controller as installed by default, except that it watches this test's namespace and
/// authenticates as [`CONTROLLER_USER`].
async fn start_controller(
    world: &World,
    plane: &test_harness::control_plane::ControlPlane,
) -> Result<temporal_worker_controller::run::Running> {
    let controller_client = test_harness::control_plane::client_from(
        &plane.user_kubeconfig(CONTROLLER_USER, Some("system:masters"))?,
    )
    .await?;
    controller::start(
        controller_client,
        &[
            format!("--watch-namespaces={}", world.ns),
            String::from("--backlog-poll-interval=0s"),
            format!("--rest-interval={}s", REST.as_secs()),
            format!("--max-concurrent-reconciles={}", concurrency()?),
        ],
    )
    .await
}

async fn apply_waiting_rollouts_and_wait_for_pollers(world: &World) -> Result<()> {
    let started = Instant::now();
    apply_all(world, (0..WAITING).map(|i| waiting_twd(world, i))).await?;
    wait_until(
        "every waiting rollout reports WaitingForPollers",
        Duration::from_secs(600),
        || async {
            let twds =
                TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed)
                    .list(&ListParams::default())
                    .await?;
            Ok(twds
                .items
                .iter()
                .filter(|t| ready_reason(t) == Some("WaitingForPollers"))
                .count()
                >= WAITING)
        },
    )
    .await?;
    println!(
        "{WAITING} waiting rollouts reported WaitingForPollers after {:.1} s (--max-concurrent-reconciles={})",
        started.elapsed().as_secs_f64(),
        concurrency()?
    );
    Ok(())
}

/// Our own first writes may still be reaching the audit log: wait until it is still.
async fn wait_for_the_controllers_writes_to_settle(
    plane: &test_harness::control_plane::ControlPlane,
) -> Result<()> {
    let mut last = controller_writes(plane)?.len();
    wait_until(
        "the controller's writes settle",
        Duration::from_secs(120),
        || {
            let seen = controller_writes(plane).map(|w| w.len());
            let settled = seen.as_ref().is_ok_and(|n| *n == last);
            if let Ok(n) = seen {
                last = n;
            }
            async move { Ok(settled) }
        },
    )
    .await
}

/// Until every waiting rollout has had its rest look while nothing changes, the controller
/// makes no Kubernetes write, reads Kubernetes only through its watches (no GET or LIST
/// although every rollout reconciles in that time), and asks Temporal at most once per look.
async fn check_the_rest_looks_cost_nothing(
    plane: &test_harness::control_plane::ControlPlane,
    controller: SocketAddr,
) -> Result<()> {
    let writes_before = controller_writes(plane)?;
    let reads_before = controller_reads(plane)?;
    let requests_before = scrape_sum(controller, REQUESTS).await?;
    let reconciles_before = scrape_sum(controller, RECONCILES).await?;
    let began = Instant::now();
    // Each rollout is looked at again at most REST after the look before.
    wait_until(
        "every waiting rollout had its rest look",
        REST * 2 + Duration::from_secs(60),
        || async {
            Ok(scrape_sum(controller, RECONCILES).await? - reconciles_before >= WAITING as f64)
        },
    )
    .await?;
    let took = began.elapsed();
    let requests = scrape_sum(controller, REQUESTS).await? - requests_before;
    let reconciles = scrape_sum(controller, RECONCILES).await? - reconciles_before;
    let writes_after = controller_writes(plane)?;
    let new_writes: Vec<&String> = writes_after.iter().skip(writes_before.len()).collect();
    let reads_after = controller_reads(plane)?;
    let new_reads: Vec<&String> = reads_after.iter().skip(reads_before.len()).collect();
    println!(
        "rest looks, {WAITING} rollouts waiting: {reconciles:.0} reconciles in {:.0} s, {} Kubernetes writes and {} GET/LIST requests by the controller, {requests:.0} Temporal requests",
        took.as_secs_f64(),
        new_writes.len(),
        new_reads.len()
    );
    ensure!(
        new_writes.is_empty(),
        "the controller wrote while nothing changed: {new_writes:?}"
    );
    ensure!(
        new_reads.is_empty(),
        "reconciles read the API server instead of the caches: {new_reads:?}"
    );
    // A rest look describes the worker deployment once (`planner::rest`), nothing more.
    ensure!(
        requests <= reconciles,
        "{requests} Temporal requests for {reconciles} rest looks of {WAITING} waiting rollouts"
    );
    Ok(())
}

/// The Progressive TWDs `names` at `tag`: two 8 s steps each, each on its own task queue.
fn progressing_twds(world: &World, names: &[String], tag: &str) -> Vec<Value> {
    let steps = json!({"rollout": {"strategy": "Progressive", "steps": [
        {"rampPercentage": 25, "pauseDuration": "8s"},
        {"rampPercentage": 50, "pauseDuration": "8s"},
    ]}});
    names
        .iter()
        .map(|n| twd(n, tag, &format!("q-{n}"), &world.temporal_ns, steps.clone()))
        .collect()
}

/// Rolls `names` out to v2 and records their routing; prints the Temporal requests per
/// minute. Returns the timelines, the ResourceExhausted answers Temporal's frontend counted,
/// and those the controller saw.
async fn roll_out_v2_under_load(
    world: &World,
    names: &[String],
    controller: SocketAddr,
) -> Result<(BTreeMap<String, Timeline>, f64, f64)> {
    let server = test_harness::temporal_server::shared().await?;
    let temporal_metrics: SocketAddr = server.metrics_address().parse()?;
    let exhausted_before = scrape(temporal_metrics, "service_errors_resource_exhausted").await?;
    let methods_before = scrape(controller, REQUESTS).await?;
    ensure!(
        scrape_sum(temporal_metrics, "service_requests").await? > 0.0,
        "Temporal's metrics endpoint counts no requests: not the endpoint we think"
    );
    let requests_before = scrape_sum(controller, REQUESTS).await?;
    let rollout_started = Instant::now();
    apply_all(world, progressing_twds(world, names, "v2")).await?;
    let timelines = record_routing(world, names).await?;
    let minutes = rollout_started.elapsed().as_secs_f64() / 60.0;
    let requests = scrape_sum(controller, REQUESTS).await? - requests_before;
    let exhausted_after = scrape(temporal_metrics, "service_errors_resource_exhausted").await?;
    // What clients were told: each refusal is counted again by the history service behind it.
    let frontend = |m: &BTreeMap<String, f64>| {
        m.iter()
            .filter(|(series, _)| series.contains(r#"service_name="frontend""#))
            .map(|(_, v)| v)
            .sum::<f64>()
    };
    let exhausted = frontend(&exhausted_after) - frontend(&exhausted_before);
    for line in grown(&methods_before, &scrape(controller, REQUESTS).await?) {
        println!("  controller: {line}");
    }
    for line in grown(&exhausted_before, &exhausted_after) {
        println!("  refused by Temporal: {line}");
    }
    let ours = scrape_sum(
        controller,
        "temporal_worker_controller_temporal_resource_exhausted_total",
    )
    .await?;
    println!(
        "{PROGRESSING} Progressive rollouts beside {WAITING} waiting ones: {:.0} Temporal requests per minute ({requests:.0} in {:.1} s); ResourceExhausted: {exhausted:.0} counted by Temporal, {ours:.0} seen by the controller",
        requests / minutes,
        minutes * 60.0
    );
    Ok((timelines, exhausted, ours))
}

/// Every step started within [`STEP_TOLERANCE`] of its deadline, and none before it.
fn check_every_step_started_on_time(timelines: &BTreeMap<String, Timeline>) -> Result<()> {
    let mut worst = SignedDuration::ZERO;
    for (name, t) in timelines {
        for (what, late) in t.lateness()? {
            println!(
                "{name}: {what} started {:.3} s after its deadline",
                late.as_secs_f64()
            );
            ensure!(
                late >= SignedDuration::from_millis(-50),
                "{name}: {what} started {late:?} before its deadline"
            );
            worst = worst.max(late);
        }
    }
    println!(
        "latest step start after its deadline: {:.3} s",
        worst.as_secs_f64()
    );
    ensure!(
        worst <= SignedDuration::try_from(STEP_TOLERANCE)?,
        "a step started {worst:?} after its deadline"
    );
    Ok(())
}

/// `--max-concurrent-reconciles` as installed by default, or `TWC_BUDGET_TEST_CONCURRENCY`
/// (how the default was chosen: docs/temporal-budget.md).
fn concurrency() -> Result<u16> {
    let default = temporal_worker_controller::run::defaults::MAX_CONCURRENT_RECONCILES;
    match std::env::var("TWC_BUDGET_TEST_CONCURRENCY") {
        Ok(v) => Ok(v.parse().context("TWC_BUDGET_TEST_CONCURRENCY")?),
        Err(_) => Ok(default),
    }
}

/// TWD `wait-<i>`: its Pods name a scheduler nobody runs, so they stay Pending.
fn waiting_twd(world: &World, i: usize) -> Value {
    twd(
        &format!("wait-{i:03}"),
        "v1",
        "waiting",
        &world.temporal_ns,
        json!({"rollout": {"strategy": "AllAtOnce"}, "template": {"spec": {"schedulerName": "nobody"}}}),
    )
}

/// A one-replica TWD `name` running `image:<tag>` polling `queue`, with `extra` merged into
/// its spec.
fn twd(name: &str, tag: &str, queue: &str, temporal_ns: &str, extra: Value) -> Value {
    manifests::twd(name)
        .replicas(1)
        .tag(tag)
        .task_queue(queue)
        .temporal_namespace(temporal_ns)
        .spec(extra)
        .build()
}

/// Server-side applies every object, 16 at a time.
async fn apply_all(world: &World, objs: impl IntoIterator<Item = Value>) -> Result<()> {
    let api = TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed);
    futures::stream::iter(objs)
        .map(|obj| {
            let api = api.clone();
            async move {
                let name = obj["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                api.patch(
                    &name,
                    &PatchParams::apply("budget-test").force(),
                    &Patch::Apply(obj),
                )
                .await
                .with_context(|| format!("applying {name}"))
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

fn ready_reason(t: &TemporalWorkerDeployment) -> Option<&str> {
    let s = t.status.as_ref()?;
    (s.observed_generation == t.metadata.generation).then_some(())?;
    s.conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.reason.as_str())
}

async fn wait_all_ready(world: &World, names: &[String], tag: &str) -> Result<()> {
    wait_until(
        &format!("{tag} Current everywhere"),
        Duration::from_secs(300),
        || async {
            let twds =
                TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed)
                    .list(&ListParams::default())
                    .await?;
            Ok(twds
                .items
                .iter()
                .filter(|t| names.iter().any(|n| Some(n) == t.metadata.name.as_ref()))
                .filter(|t| ready_reason(t) == Some("RolloutComplete"))
                .filter(|t| image_tag(t) == Some(tag))
                .count()
                == names.len())
        },
    )
    .await
}

fn image_tag(t: &TemporalWorkerDeployment) -> Option<&str> {
    t.spec
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .as_deref()?
        .rsplit(':')
        .next()
}

/// Every write the controller's user made so far (`verb resource`), in log order.
fn controller_writes(plane: &test_harness::control_plane::ControlPlane) -> Result<Vec<String>> {
    Ok(plane
        .audit_events()?
        .into_iter()
        .filter(|e| {
            e.acting_user() == CONTROLLER_USER && e.is_write() && e.stage == "ResponseComplete"
        })
        .map(|e| format!("{} {} {}", e.verb, e.resource(), e.request_uri))
        .collect())
}

/// The controller's reads that are not watches (a watch's own re-list after its expiry would
/// show here too, but a watch lasts minutes and the window is one), Leases apart.
fn controller_reads(plane: &test_harness::control_plane::ControlPlane) -> Result<Vec<String>> {
    Ok(plane
        .audit_events()?
        .into_iter()
        .filter(|e| {
            e.acting_user() == CONTROLLER_USER
                && matches!(e.verb.as_str(), "get" | "list")
                && e.resource() != "leases"
                && e.stage == "ResponseComplete"
        })
        .map(|e| format!("{} {} {}", e.verb, e.resource(), e.request_uri))
        .collect())
}

/// The sum of every sample of metric family `name` (with or without `_total`).
async fn scrape_sum(addr: SocketAddr, name: &str) -> Result<f64> {
    // `+ 0.0`: an empty sum is -0.0.
    Ok(scrape(addr, name).await?.values().sum::<f64>() + 0.0)
}

/// Every sample of metric family `name` (with or without `_total`), by series.
async fn scrape(addr: SocketAddr, name: &str) -> Result<BTreeMap<String, f64>> {
    let (code, body) =
        test_harness::loopback_http::get(addr, "/metrics", "text/plain", None).await?;
    ensure!(code == 200, "GET /metrics on {addr}: {code}");
    Ok(body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let family = series.split('{').next()?;
            (family == name || family == format!("{name}_total"))
                .then(|| Some((series.to_string(), value.parse::<f64>().ok()?)))?
        })
        .collect())
}

/// The series of `after` that grew since `before`, with how much.
fn grown(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> Vec<String> {
    after
        .iter()
        .filter_map(|(series, v)| {
            let d = v - before.get(series).copied().unwrap_or_default();
            (d > 0.0).then(|| format!("{d:.0} {series}"))
        })
        .collect()
}

/// Routing as Temporal timestamps it: every ramp step's start and the promotion.
#[derive(Debug, Default)]
struct Timeline {
    /// Ramp percentage → when Temporal set it.
    steps: BTreeMap<u32, Timestamp>,
    promoted: Option<Timestamp>,
}

impl Timeline {
    /// How late each step change came after the deadline the previous step set.
    fn lateness(&self) -> Result<Vec<(String, SignedDuration)>> {
        let pause = SignedDuration::try_from(STEP_PAUSE)?;
        let s25 = *self
            .steps
            .get(&25)
            .context("the 25 % step was never seen")?;
        let s50 = *self
            .steps
            .get(&50)
            .context("the 50 % step was never seen")?;
        let promoted = self.promoted.context("never promoted")?;
        Ok(vec![
            ("step 2 (50 %)".into(), s50.duration_since(s25 + pause)),
            ("promotion".into(), promoted.duration_since(s50 + pause)),
        ])
    }
}

/// Reads each rollout's v2 version from Temporal once per routing change, 3 s after the TWD's
/// status first showed it, until v2 is Current everywhere. Temporal refuses (`BusyWorkflow`)
/// reads of a deployment that was just written to; steps last 8 s, so a read 3 s into one
/// meets no write, and the test causes none of the refusals it counts.
async fn record_routing(world: &World, names: &[String]) -> Result<BTreeMap<String, Timeline>> {
    const SETTLED: Duration = Duration::from_secs(3);
    let server = test_harness::temporal_server::shared().await?;
    let conn = server.connect("budget-test").await?;
    let mut timelines: BTreeMap<String, Timeline> = names
        .iter()
        .map(|n| (n.clone(), Timeline::default()))
        .collect();
    // Per rollout: the routing the status shows, since when, and whether it was read.
    let mut seen: BTreeMap<String, (String, Instant, bool)> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        for name in names {
            let Some((build, routing)) = v2_routing(world, name).await? else {
                continue;
            };
            let entry = seen
                .entry(name.clone())
                .or_insert_with(|| (routing.clone(), Instant::now(), false));
            if entry.0 != routing {
                *entry = (routing, Instant::now(), false);
            }
            if entry.2 || entry.1.elapsed() < SETTLED {
                continue;
            }
            let deployment = format!("{}/{name}", world.ns);
            let Some(info) = version_info(&conn, &world.temporal_ns, &deployment, &build).await
            else {
                continue;
            };
            let t = timelines.get_mut(name).context("timeline")?;
            let at = |ts: Option<&prost_wkt_types::Timestamp>| {
                ts.and_then(|ts| Timestamp::new(ts.seconds, ts.nanos).ok())
            };
            if let Some(since) = at(info.current_since_time.as_ref()) {
                t.promoted = Some(since);
            } else if info.ramp_percentage > 0.0
                && let Some(changed) = at(info.routing_changed_time.as_ref())
            {
                t.steps
                    .entry(info.ramp_percentage.round() as u32)
                    .or_insert(changed);
            } else {
                // The version's own record follows the deployment's routing a moment later
                // (Temporal propagates it between the two): on a busy machine it may not show
                // the ramp the status already reports. Read it again next round.
                continue;
            }
            entry.2 = true;
        }
        if timelines.values().all(|t| t.promoted.is_some()) {
            return Ok(timelines);
        }
        if Instant::now() > deadline {
            bail!("not every rollout finished: {timelines:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The target build ID of TWD `name` once it is v2's, and its routing as the status shows it.
async fn v2_routing(world: &World, name: &str) -> Result<Option<(String, String)>> {
    let t = TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed)
        .get(name)
        .await?;
    let Some(status) = t.status else {
        return Ok(None);
    };
    let Some(target) = status
        .target_version
        .filter(|v| v.version.build_id.starts_with("v2"))
    else {
        return Ok(None);
    };
    let current = status
        .current_version
        .map(|c| c.build_id)
        .unwrap_or_default();
    let routing = format!(
        "{current} {:?} {:?}",
        target.current_step, target.ramp_percentage
    );
    Ok(Some((target.version.build_id, routing)))
}

/// `DescribeWorkerDeploymentVersion`, or `None` while Temporal does not know the version.
async fn version_info(
    conn: &temporalio_client::Connection,
    namespace: &str,
    deployment: &str,
    build: &str,
) -> Option<WorkerDeploymentVersionInfo> {
    use temporalio_client::grpc::WorkflowService as _;
    #[allow(deprecated)]
    let req = DescribeWorkerDeploymentVersionRequest {
        namespace: namespace.into(),
        deployment_version: Some(WorkerDeploymentVersion {
            deployment_name: deployment.into(),
            build_id: build.into(),
        }),
        ..Default::default()
    };
    conn.clone()
        .describe_worker_deployment_version(temporalio_client::tonic::Request::new(req))
        .await
        .ok()?
        .into_inner()
        .worker_deployment_version_info
}

/// Polls `check` every second until it holds, for at most `timeout`.
async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
