//! The scenarios, each on a fresh [`Rig`]: create N `WorkerDeployment`s (the Go controller's
//! kind, which both controllers serve), wait until each reached the scenario's state, let the
//! controller's writes settle, then measure a steady window.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use crate::ground::{Scenario, apply_all, manifest, reached_state, temporal_of};
use crate::measure::{self, KubeTally, ProcSample, TemporalCounts};
use crate::rig::{Rig, Which};
use crate::{burst, churn, promote, rollout};

/// The window of steady measurement after the scenario's own span.
fn window(scenario: Scenario, timing: Timing) -> Duration {
    match scenario {
        Scenario::Idle => timing.window,
        // Nothing changes while Pods wait, but resting objects are looked at once per rest
        // round (`--rest-interval`, 4-5 min): a window of one round reads its average.
        Scenario::Waiting => timing.window.min(WAITING_WINDOW),
        // What follows a cold start is the waiting scenario's steady state.
        Scenario::Startup => timing.window.min(STARTUP_WINDOW),
        Scenario::Rollout | Scenario::Promote | Scenario::Burst | Scenario::Churn => Duration::ZERO,
    }
}

/// Steady window of the waiting scenario (at most): one rest round of the controller's default
/// `--rest-interval` (5 min), so every resting object's look falls inside it once.
const WAITING_WINDOW: Duration = Duration::from_secs(300);
/// Steady window after a cold start.
const STARTUP_WINDOW: Duration = Duration::from_secs(30);

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
    /// Progressive rollouts run beside a waiting fleet (waiting and cold start) after its
    /// window: issue 41's step lateness beside N.
    pub beside: usize,
    /// How many minutes the churn scenario creates and deletes objects.
    pub churn_minutes: u64,
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
    /// Our controller's own measure of its Temporal round trips in the window: mean ms by
    /// method (the floor of the latency rows: the call itself).
    pub ours_rtt_ms: BTreeMap<String, f64>,
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
    /// Promote: pollers → SetCurrent and Drained → scaled down.
    pub promote: Option<promote::PromoteTimes>,
    pub burst: Option<burst::BurstTimes>,
    /// Startup: controller spawn → its first status write (ms).
    pub first_write_ms: Option<f64>,
    /// Progressive rollouts run beside the fleet (their times are in [`Outcome::rollout`]).
    pub beside: usize,
    pub churn: Option<churn::ChurnTimes>,
}

/// Runs `scenario` with `n` objects on a fresh rig of `which`.
pub async fn run(which: Which, scenario: Scenario, n: usize, timing: Timing) -> Result<Outcome> {
    let churning = scenario == Scenario::Churn;
    // The churn scenario creates its objects in its measured span.
    let fleet = if churning { 0 } else { n };
    let manifests: Vec<Value> = (0..fleet).map(|i| manifest(scenario, i)).collect();
    let cold = scenario == Scenario::Startup;
    let preload: &[Value] = if cold { &manifests } else { &[] };
    let beside = match scenario {
        Scenario::Waiting | Scenario::Startup => timing.beside,
        _ => 0,
    };
    let objects = match scenario {
        Scenario::Churn => n * timing.churn_minutes as usize,
        _ => n + beside,
    };
    let mut rig = Rig::start(which, objects, preload).await?;
    let pid = rig.controller.pid();
    let proc_empty = measure::proc_sample(pid)?;
    let audit = rig.plane.audit_log_path().to_path_buf();
    let metrics: SocketAddr = rig.temporal.metrics_address().parse()?;
    let mark = if cold {
        measure::AuditMark::START
    } else {
        measure::audit_mark(&audit)?
    };
    let (t0, x0) = measure::temporal_counts(metrics).await?;
    let begin = Instant::now();
    if !cold {
        apply_all(&rig.client, manifests.into_iter()).await?;
    }
    wait_reached(&mut rig, scenario, fleet, timing.reach_deadline).await?;
    // A cold start counts from the process's spawn.
    let reach = if cold {
        Duration::from_secs_f64((crate::ground::now_ms() - rig.spawned_ms).max(0.0) / 1e3)
    } else {
        begin.elapsed()
    };
    let first_write_ms = if cold {
        measure::first_status_write(&audit, mark)?.map(|t| t - rig.spawned_ms)
    } else {
        None
    };
    let (creation, mark) = measure::audit_since(&audit, mark)?;
    let (t1, x1) = measure::temporal_counts(metrics).await?;
    let (settled, mark) = settle(&audit, mark, timing).await?;
    let span = measured_span(
        &mut rig,
        scenario,
        n,
        mark,
        window(scenario, timing),
        timing,
    )
    .await?;
    let steady = span.steady;
    let (promote_ms, temporal_rtt_ms) = match scenario {
        Scenario::Idle => routing_latencies(&rig, n).await?,
        // v2's createTime → currentSinceTime spans the pauses: only the floor is of use.
        Scenario::Rollout | Scenario::Promote | Scenario::Burst => {
            (Vec::new(), routing_latencies(&rig, n).await?.1)
        }
        Scenario::Waiting | Scenario::Startup | Scenario::Churn => (Vec::new(), Vec::new()),
    };
    let promote = match &span.promoted {
        Some(promoted) => Some(promote::times(&rig, promoted).await?),
        None => None,
    };
    Ok(Outcome {
        which,
        scenario,
        n,
        ready_in: rig.controller.ready_in(),
        reach,
        creation,
        creation_temporal: measure::controller_methods(measure::grown(&t0, &t1)),
        creation_exhausted: x1 - x0,
        settled,
        window: steady.elapsed,
        steady: steady.kube,
        steady_temporal: steady.temporal,
        steady_exhausted: steady.exhausted,
        ours_temporal: steady.ours,
        ours_rtt_ms: steady.ours_rtt_ms,
        proc_empty,
        proc_before: steady.before,
        proc_after: steady.after,
        promote_ms,
        temporal_rtt_ms,
        rollout: span.rollout,
        promote,
        burst: span.burst,
        first_write_ms,
        beside,
        churn: span.churn,
    })
}

/// Waits until every object has a target version in its status (Waiting) or its current
/// version is the target (Idle); both controllers write these fields alike.
async fn wait_reached(
    rig: &mut Rig,
    scenario: Scenario,
    n: usize,
    deadline: Duration,
) -> Result<()> {
    let api = crate::ground::worker_deployments(&rig.client);
    let begin = Instant::now();
    // A list of 10,000 objects is tens of MB: look less often the more there are (the time to
    // reach the state is then known to within this, against minutes).
    let every = Duration::from_millis((n as u64 / 2).clamp(1000, 5000));
    loop {
        rig.controller.check_alive()?;
        let list = api.list(&crate::ground::of_role("fleet")).await?;
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
        tokio::time::sleep(every).await;
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
    ours_rtt_ms: BTreeMap<String, f64>,
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
    ours: Option<(TemporalCounts, TemporalCounts)>,
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
        let (ours, ours_rtt_ms) = match (self.ours_http, &start.ours) {
            (Some(http), Some((c0, s0))) => {
                let (c1, s1) = measure::ours_requests(http).await?;
                let counts = measure::grown(c0, &c1);
                let rtt = measure::grown(s0, &s1)
                    .into_iter()
                    .filter_map(|(m, secs)| Some((m.clone(), secs * 1e3 / counts.get(&m)?)))
                    .collect();
                (Some(counts), rtt)
            }
            _ => (None, BTreeMap::new()),
        };
        Ok(Steady {
            kube,
            temporal: measure::grown(&start.temporal, &t1),
            exhausted: x1 - start.exhausted,
            ours,
            ours_rtt_ms,
            before: start.proc,
            after,
            elapsed,
        })
    }
}

/// What the measured span gave beyond the steady numbers.
struct Span {
    steady: Steady,
    rollout: Option<rollout::RolloutTimes>,
    promoted: Option<promote::Promoted>,
    burst: Option<burst::BurstTimes>,
    churn: Option<churn::ChurnTimes>,
}

/// The measured span: a steady window of fixed length (the measurement is "what happens in
/// this much time", so it is not a wait for a condition), or the scenario's rollouts.
async fn measured_span(
    rig: &mut Rig,
    scenario: Scenario,
    n: usize,
    mark: measure::AuditMark,
    window: Duration,
    timing: Timing,
) -> Result<Span> {
    let probe = Probe::of(rig)?;
    let start = probe.start(mark).await?;
    let (mut rollout_times, mut promoted, mut burst_times, mut probe_reads) = (None, None, None, 0);
    let mut churn_times = None;
    match scenario {
        Scenario::Rollout => {
            let v1 = rollout::current_builds(&rig.client, "fleet").await?;
            let applied =
                rollout::apply_staggered(&rig.client, 0..v1.len(), crate::ground::progressive)
                    .await?;
            let (timelines, reads) = rollout::record(rig, &v1, "fleet").await?;
            probe_reads = reads;
            rollout_times = Some(rollout::RolloutTimes::from_timelines(&applied, &timelines));
        }
        Scenario::Promote => promoted = Some(promote::run(rig).await?),
        Scenario::Burst => burst_times = Some(burst::run(rig).await?),
        Scenario::Churn => {
            churn_times = Some(churn::run(rig, n, timing.churn_minutes).await?);
        }
        Scenario::Waiting | Scenario::Idle | Scenario::Startup => {
            tokio::time::sleep(window).await;
        }
    }
    let mut steady = probe.finish(start).await?;
    rig.controller.check_alive()?;
    if let Some(count) = steady.temporal.get_mut("DescribeWorkerDeploymentVersion") {
        *count = (*count - probe_reads as f64).max(0.0);
    }
    // After the window, so that its rates are the fleet's alone.
    if matches!(scenario, Scenario::Waiting | Scenario::Startup) && timing.beside > 0 {
        // Their failure leaves the fleet's numbers standing.
        match rollout::beside(rig, n, timing.beside).await {
            Ok((times, _)) => rollout_times = Some(times),
            Err(e) => println!("FAILED: the rollouts beside N = {n}: {e:#}"),
        }
    }
    Ok(Span {
        steady,
        rollout: rollout_times,
        promoted,
        burst: burst_times,
        churn: churn_times,
    })
}

/// For every object: Temporal's `currentSinceTime − createTime` of its current version (the
/// version is created when its first poller arrives), and a few `DescribeWorkerDeployment`
/// round trips as the floor.
async fn routing_latencies(rig: &Rig, n: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let conn = rig.temporal.connect("scale-probe").await?;
    let mut promote = Vec::new();
    let mut rtt = Vec::new();
    for i in 0..n {
        let (namespace, deployment) = temporal_of(&crate::ground::object_name(i));
        let begin = Instant::now();
        let described = test_harness::observe::describe_deployment(&conn, &namespace, &deployment)
            .await?
            .with_context(|| format!("{deployment} unknown to Temporal"))?;
        rtt.push(begin.elapsed().as_secs_f64() * 1e3);
        let Some(info) = described.worker_deployment_info else {
            continue;
        };
        let current = rollout::current_build(&info);
        let times = current
            .and_then(|b| rollout::summary_of(&info, b))
            .and_then(|s| {
                let created = s.create_time.as_ref()?;
                let current = s.current_since_time.as_ref()?;
                Some(crate::ground::ts_ms(current) - crate::ground::ts_ms(created))
            });
        promote.extend(times);
    }
    Ok((promote, rtt))
}
