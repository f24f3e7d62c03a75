//! The scenarios, each on a fresh [`Rig`]: create N `WorkerDeployment`s (the Go controller's
//! kind, which both controllers serve), wait until each reached the scenario's state, let the
//! controller's writes settle, then measure a steady window.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};
use test_harness::go_controller;

use crate::measure::{self, KubeTally, ProcSample, TemporalCounts};
use crate::rig::{NS, Rig, Which};
use crate::rollout;

/// What the N objects do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Pods never become Ready (their scheduler does not exist): rollouts wait for pollers.
    Waiting,
    /// Rolled out (AllAtOnce) with one live worker each, then left alone.
    Idle,
    /// Rolled out at v1 with live workers, then all changed to v2 at once: a Progressive
    /// rollout of two steps ([`rollout::PAUSE`] each).
    Rollout,
}

impl Scenario {
    pub fn label(self) -> &'static str {
        match self {
            Scenario::Waiting => "waiting",
            Scenario::Idle => "idle (rolled out, live workers)",
            Scenario::Rollout => "Progressive rollout v1 → v2 (25 %, 50 %, 30 s pauses)",
        }
    }
}

/// How long to wait and measure.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// The steady window.
    pub window: Duration,
    /// Settled = no controller write for this long...
    pub quiet: Duration,
    /// ...or this long after every object reached its state, whichever comes first.
    pub settle_max: Duration,
    /// Every object must reach its state within this.
    pub reach_deadline: Duration,
}

/// Everything measured in one scenario run.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub which: Which,
    pub scenario: Scenario,
    pub n: usize,
    /// Controller process spawn → readiness endpoint 200.
    pub ready_in: Duration,
    /// First apply → every object in its state.
    pub reach: Duration,
    /// The controller's requests from the first apply until every object reached its state.
    pub creation: KubeTally,
    /// Temporal requests (frontend, controller methods only) in the same span.
    pub creation_temporal: TemporalCounts,
    pub creation_exhausted: f64,
    /// Whether the writes went quiet before [`Timing::settle_max`].
    pub settled: bool,
    pub window: Duration,
    pub steady: KubeTally,
    /// Temporal requests by method in the window (all frontend methods; see
    /// [`measure::is_worker_method`]).
    pub steady_temporal: TemporalCounts,
    pub steady_exhausted: f64,
    /// Our controller's own count of its Temporal requests in the window.
    pub ours_temporal: Option<TemporalCounts>,
    /// At controller readiness, before any object existed.
    pub proc_empty: ProcSample,
    pub proc_before: ProcSample,
    pub proc_after: ProcSample,
    /// Idle: for each object, Temporal's `currentSinceTime − createTime` of its version (ms).
    pub promote_ms: Vec<f64>,
    /// `DescribeWorkerDeployment` round trips measured after the window (ms): the floor.
    pub temporal_rtt_ms: Vec<f64>,
    /// Rollout: step and promotion lateness, overhead.
    pub rollout: Option<rollout::RolloutTimes>,
}

/// Runs `scenario` with `n` objects on a fresh rig of `which`.
pub async fn run(which: Which, scenario: Scenario, n: usize, timing: Timing) -> Result<Outcome> {
    let mut rig = Rig::start(which).await?;
    let pid = rig.controller.pid();
    let proc_empty = measure::proc_sample(pid)?;
    let audit = rig.plane.audit_log_path().to_path_buf();
    let metrics: SocketAddr = rig.temporal.metrics_address().parse()?;
    let mark = measure::audit_mark(&audit)?;
    let (t0, x0) = measure::temporal_counts(metrics).await?;
    let begin = Instant::now();
    apply_all(&rig.client, (0..n).map(|i| manifest(scenario, i))).await?;
    wait_reached(&mut rig, scenario, n, timing.reach_deadline).await?;
    let reach = begin.elapsed();
    let (creation, mark) = measure::audit_since(&audit, mark)?;
    let (t1, x1) = measure::temporal_counts(metrics).await?;
    let (settled, mark) = settle(&audit, mark, timing).await?;
    let (steady, rollout_times) = measured_span(&mut rig, scenario, mark, timing.window).await?;
    let (promote_ms, temporal_rtt_ms) = match scenario {
        Scenario::Idle => routing_latencies(&rig, n).await?,
        // v2's createTime → currentSinceTime spans the pauses: only the floor is of use.
        Scenario::Rollout => (Vec::new(), routing_latencies(&rig, n).await?.1),
        Scenario::Waiting => (Vec::new(), Vec::new()),
    };
    Ok(Outcome {
        which,
        scenario,
        n,
        ready_in: rig.controller.ready_in(),
        reach,
        creation,
        creation_temporal: controller_methods(measure::grown(&t0, &t1)),
        creation_exhausted: x1 - x0,
        settled,
        window: steady.elapsed,
        steady: steady.kube,
        steady_temporal: steady.temporal,
        steady_exhausted: steady.exhausted,
        ours_temporal: steady.ours,
        proc_empty,
        proc_before: steady.before,
        proc_after: steady.after,
        promote_ms,
        temporal_rtt_ms,
        rollout: rollout_times,
    })
}

/// The methods a controller calls (worker polls and heartbeats left out).
pub fn controller_methods(counts: TemporalCounts) -> TemporalCounts {
    counts
        .into_iter()
        .filter(|(m, _)| !measure::is_worker_method(m))
        .collect()
}

/// `WorkerDeployment` `wd-<i>`: one replica polling its own task queue, AllAtOnce.
pub fn manifest(scenario: Scenario, i: usize) -> Value {
    if scenario == Scenario::Rollout {
        return rollout::progressive(i, "v1");
    }
    let name = format!("wd-{i:04}");
    let mut wd = go_controller::worker_deployment_manifest(
        &name,
        "temporal",
        NS,
        &test_harness::manifests::worker_image("v1"),
        &format!("q-{name}"),
        json!({"strategy": "AllAtOnce"}),
    );
    if scenario == Scenario::Waiting {
        // No scheduler by that name runs, so the Pods stay Pending, as on a full cluster.
        wd["spec"]["template"]["spec"]["schedulerName"] = json!("nobody");
    }
    wd
}

/// Server-side applies every manifest, 16 at a time, as the admin.
pub async fn apply_all(
    client: &kube::Client,
    manifests: impl Iterator<Item = Value>,
) -> Result<()> {
    futures::stream::iter(manifests)
        .map(|m| async move { go_controller::apply(client, NS, &m).await })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Waits until every object has a target version in its status (Waiting) or its current
/// version is the target (Idle); both controllers write these fields alike.
async fn wait_reached(
    rig: &mut Rig,
    scenario: Scenario,
    n: usize,
    deadline: Duration,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        rig.client.clone(),
        NS,
        &go_controller::api_resource("WorkerDeployment"),
    );
    let begin = Instant::now();
    loop {
        rig.controller.check_alive()?;
        let list = api.list(&ListParams::default()).await?;
        let reached = list
            .items
            .iter()
            .filter(|o| reached_state(scenario, &o.data["status"]))
            .count();
        if reached >= n {
            return Ok(());
        }
        if begin.elapsed() > deadline {
            bail!(
                "{} of {n} objects reached the {} state within {deadline:?}",
                reached,
                scenario.label()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn reached_state(scenario: Scenario, status: &Value) -> bool {
    let target = status["targetVersion"]["buildID"].as_str().unwrap_or("");
    match scenario {
        Scenario::Waiting => !target.is_empty(),
        Scenario::Idle | Scenario::Rollout => {
            !target.is_empty() && status["currentVersion"]["buildID"].as_str() == Some(target)
        }
    }
}

/// Waits until the controller made no write for [`Timing::quiet`], at most
/// [`Timing::settle_max`]; returns whether it went quiet and the audit position.
async fn settle(
    audit: &std::path::Path,
    mut mark: measure::AuditMark,
    timing: Timing,
) -> Result<(bool, measure::AuditMark)> {
    let begin = Instant::now();
    let mut last_write = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (tally, next) = measure::audit_since(audit, mark)?;
        mark = next;
        if tally.writes() > 0 {
            last_write = Instant::now();
        }
        if last_write.elapsed() >= timing.quiet {
            return Ok((true, mark));
        }
        if begin.elapsed() >= timing.settle_max {
            return Ok((false, mark));
        }
    }
}

struct Steady {
    kube: KubeTally,
    temporal: TemporalCounts,
    exhausted: f64,
    ours: Option<TemporalCounts>,
    before: ProcSample,
    after: ProcSample,
    elapsed: Duration,
}

/// Where the instruments read, and what they read at the start of a window.
struct Probe {
    audit: std::path::PathBuf,
    metrics: SocketAddr,
    pid: u32,
    ours_http: Option<SocketAddr>,
}

struct ProbeStart {
    mark: measure::AuditMark,
    temporal: TemporalCounts,
    exhausted: f64,
    ours: Option<TemporalCounts>,
    proc: ProcSample,
    at: Instant,
}

impl Probe {
    fn of(rig: &Rig) -> Result<Probe> {
        Ok(Probe {
            audit: rig.plane.audit_log_path().to_path_buf(),
            metrics: rig.temporal.metrics_address().parse()?,
            pid: rig.controller.pid(),
            ours_http: rig.controller.ours_http(),
        })
    }

    async fn start(&self, mark: measure::AuditMark) -> Result<ProbeStart> {
        let (_, mark) = measure::audit_since(&self.audit, mark)?;
        let (temporal, exhausted) = measure::temporal_counts(self.metrics).await?;
        let ours = match self.ours_http {
            Some(http) => Some(measure::ours_requests(http).await?),
            None => None,
        };
        Ok(ProbeStart {
            mark,
            temporal,
            exhausted,
            ours,
            proc: measure::proc_sample(self.pid)?,
            at: Instant::now(),
        })
    }

    async fn finish(&self, start: ProbeStart) -> Result<Steady> {
        let after = measure::proc_sample(self.pid)?;
        let elapsed = start.at.elapsed();
        let (kube, _) = measure::audit_since(&self.audit, start.mark)?;
        let (t1, x1) = measure::temporal_counts(self.metrics).await?;
        let ours = match (self.ours_http, &start.ours) {
            (Some(http), Some(o0)) => {
                Some(measure::grown(o0, &measure::ours_requests(http).await?))
            }
            _ => None,
        };
        Ok(Steady {
            kube,
            temporal: measure::grown(&start.temporal, &t1),
            exhausted: x1 - start.exhausted,
            ours,
            before: start.proc,
            after,
            elapsed,
        })
    }
}

/// The measured span: a steady window of fixed length (the measurement is "what happens in
/// this much time", so it is not a wait for a condition), or the whole v2 rollout.
async fn measured_span(
    rig: &mut Rig,
    scenario: Scenario,
    mark: measure::AuditMark,
    window: Duration,
) -> Result<(Steady, Option<rollout::RolloutTimes>)> {
    let probe = Probe::of(rig)?;
    let start = probe.start(mark).await?;
    let times = match scenario {
        Scenario::Rollout => {
            let v1 = rollout::current_builds(&rig.client).await?;
            let applied = rollout::now_ms();
            apply_all(
                &rig.client,
                (0..v1.len()).map(|i| rollout::progressive(i, "v2")),
            )
            .await?;
            let (timelines, reads) = rollout::record(rig, &v1).await?;
            Some((
                rollout::RolloutTimes::from_timelines(applied, &timelines),
                reads,
            ))
        }
        Scenario::Waiting | Scenario::Idle => {
            tokio::time::sleep(window).await;
            None
        }
    };
    let mut steady = probe.finish(start).await?;
    rig.controller.check_alive()?;
    let Some((times, probe_reads)) = times else {
        return Ok((steady, None));
    };
    if let Some(count) = steady.temporal.get_mut("DescribeWorkerDeploymentVersion") {
        *count = (*count - probe_reads as f64).max(0.0);
    }
    Ok((steady, Some(times)))
}

/// For every object: Temporal's `currentSinceTime − createTime` of its current version (the
/// version is created when its first poller arrives), and a few `DescribeWorkerDeployment`
/// round trips as the floor.
async fn routing_latencies(rig: &Rig, n: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let conn = rig.temporal.connect("scale-probe").await?;
    let mut promote = Vec::new();
    let mut rtt = Vec::new();
    for i in 0..n {
        let deployment = format!("{NS}/wd-{i:04}");
        let begin = Instant::now();
        let described = test_harness::observe::describe_deployment(&conn, NS, &deployment)
            .await?
            .with_context(|| format!("{deployment} unknown to Temporal"))?;
        rtt.push(begin.elapsed().as_secs_f64() * 1e3);
        let Some(info) = described.worker_deployment_info else {
            continue;
        };
        let current = info
            .routing_config
            .as_ref()
            .and_then(|r| r.current_deployment_version.as_ref())
            .map(|v| v.build_id.clone());
        let summary = info
            .version_summaries
            .iter()
            .find(|s| s.deployment_version.as_ref().map(|v| &v.build_id) == current.as_ref());
        let ms = |seconds: i64, nanos: i32| seconds as f64 * 1e3 + f64::from(nanos) / 1e6;
        let times = summary.and_then(|s| {
            let created = s.create_time.as_ref()?;
            let current = s.current_since_time.as_ref()?;
            Some(ms(current.seconds, current.nanos) - ms(created.seconds, created.nanos))
        });
        promote.extend(times);
    }
    Ok((promote, rtt))
}
