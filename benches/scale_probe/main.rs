//! Scale probe and side-by-side benchmark (issues 30 and 27): what a controller costs the API
//! server, Temporal and its own process when it manages N `WorkerDeployment`s, measured the
//! same way for this repository's controller (the release binary Cargo builds for this bench,
//! at the chart's default flags) and for the Go temporal-worker-controller v1.8.1.
//!
//! Each (controller, scenario, N) runs on a fresh rig: its own control plane (etcd,
//! kube-apiserver with an audit log, kube-controller-manager), Temporal dev server (with its
//! metrics endpoint) and kubelet stand-in, so that the two controllers never share an API
//! server (their CRDs share the `temporal.io` group). Scenarios:
//! - `idle`: N objects rolled out (AllAtOnce) with one live worker each, then left alone;
//! - `waiting`: N objects whose Pods never become Ready (rollouts wait for pollers);
//! - `startup`: N waiting objects exist before the controller starts (cold list);
//! - `rollout`: N objects rolled out at v1, then changed to v2 1.5 s apart, Progressive with
//!   two 30 s pauses: step and promotion lateness from Temporal's timestamps, overhead;
//! - `promote`: the same with AllAtOnce: pollers → SetCurrent, then Drained → scaled down;
//! - `burst`: N objects rolled out at v1, then all changed to v2 at once;
//! - `churn`: N objects a minute created (live workers) and deleted a minute later, for
//!   `--churn-minutes`; then nothing of them may be left in Kubernetes or Temporal.
//!
//! Objects spread as a fleet does: 500 per Kubernetes namespace (`bench`, `bench-1`, …), the
//! Kubernetes namespaces round robin over up to 4 Temporal namespaces (`bench`, `bench-t1`, …),
//! so N ≤ 500 stays in `bench`. `--beside K` runs K Progressive rollouts beside a waiting (or
//! cold-started) fleet after its window: their step lateness beside N.
//!
//! Run (see docs/performance.md for recorded runs and the defaults):
//!   cargo bench --bench scale_probe -- [--controller ours|go|both]
//!       [--scenarios idle,waiting,startup,rollout,promote,burst] [--idle-n 50,200]
//!       [--waiting-n 300] [--startup-n 300] [--rollout-n 20] [--promote-n 20]
//!       [--burst-n 100] [--churn-n 60] [--churn-minutes 5] [--beside 0] [--window 300]
//!       [--reach-deadline 900]
//!   cargo test --bench scale_probe -- --quick     (CI smoke test: every scenario but churn,
//!       whose minutes are its point, at a small N with a 10 s window, the two controllers
//!       of a scenario side by side; fails only if a scenario does not complete)
//! Env instead of flags: TWC_PROBE_CONTROLLER, TWC_PROBE_SCENARIOS, TWC_PROBE_<SCENARIO>_N,
//! TWC_PROBE_WINDOW, TWC_PROBE_CHURN_MINUTES, TWC_PROBE_BESIDE, TWC_PROBE_REACH_DEADLINE.
//! The kubelet stand-in runs the live workers on its shared worker host (one thread, runtime and
//! a few connections for all: light enough for N = 500); `TWC_PROBE_WORKERS=threads` gives
//! each worker Pod a thread, runtime and connection of its own (as before issue 52). Under `cargo test --benches` without `--quick` it prints how to run it
//! and exits: it starts servers.

mod burst;
mod churn;
mod ground;
mod measure;
mod promote;
mod report;
mod rig;
mod rollout;
mod scenarios;

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use ground::Scenario;
use rig::Which;
use scenarios::{Outcome, Timing};

/// What to run.
#[derive(Clone, Debug)]
struct Plan {
    controllers: Vec<Which>,
    scenarios: Vec<Scenario>,
    /// The sizes N of each scenario.
    sizes: Vec<(Scenario, Vec<usize>)>,
    timing: Timing,
    /// The controllers of one scenario run at once (`--quick`).
    side_by_side: bool,
}

impl Plan {
    fn sizes(&self, scenario: Scenario) -> &[usize] {
        self.sizes
            .iter()
            .find(|(s, _)| *s == scenario)
            .map_or(&[], |(_, n)| n.as_slice())
    }
}

/// Every scenario: its name on the command line, its sizes flag and env, and its default N
/// (full run, quick run).
const SCENARIOS: &[(Scenario, &str, &str, &str, &str, &str)] = &[
    (
        Scenario::Idle,
        "idle",
        "--idle-n",
        "TWC_PROBE_IDLE_N",
        "50,200",
        "2",
    ),
    (
        Scenario::Waiting,
        "waiting",
        "--waiting-n",
        "TWC_PROBE_WAITING_N",
        "300",
        "5",
    ),
    (
        Scenario::Startup,
        "startup",
        "--startup-n",
        "TWC_PROBE_STARTUP_N",
        "300",
        "5",
    ),
    (
        Scenario::Rollout,
        "rollout",
        "--rollout-n",
        "TWC_PROBE_ROLLOUT_N",
        "20",
        "1",
    ),
    (
        Scenario::Promote,
        "promote",
        "--promote-n",
        "TWC_PROBE_PROMOTE_N",
        "20",
        "1",
    ),
    (
        Scenario::Burst,
        "burst",
        "--burst-n",
        "TWC_PROBE_BURST_N",
        "100",
        "2",
    ),
    (
        Scenario::Churn,
        "churn",
        "--churn-n",
        "TWC_PROBE_CHURN_N",
        "60",
        "2",
    ),
];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing.
    if !quick && !args.iter().any(|a| a == "--bench") {
        println!(
            "scale_probe: starts control planes and Temporal; run it with \
             `cargo bench --bench scale_probe` or `cargo test --bench scale_probe -- --quick`"
        );
        return Ok(());
    }
    if quick {
        ground::use_quick_times();
    }
    let plan = plan(&args, quick)?;
    println!("scale_probe plan: {plan:?}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(plan))
}

async fn run(plan: Plan) -> Result<()> {
    let begin = Instant::now();
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    for &scenario in &plan.scenarios {
        for &n in plan.sizes(scenario) {
            for (which, t, result) in run_controllers(&plan, scenario, n).await {
                let what = format!("{} / {} / N = {n}", which.label(), scenario.label());
                match result {
                    Ok(outcome) => record(outcome, &what, t, &mut outcomes, &mut failed),
                    // The other scenarios still run; the probe fails at the end.
                    Err(e) => {
                        println!("FAILED: {what}: {e:#}");
                        failed.push(what);
                    }
                }
            }
            let same: Vec<&Outcome> = outcomes
                .iter()
                .filter(|o| o.scenario == scenario && o.n == n)
                .collect();
            print!("{}", report::summary(&same));
        }
    }
    println!("\n## All summaries\n");
    for scenario in &plan.scenarios {
        let mut sizes: Vec<usize> = outcomes
            .iter()
            .filter(|o| o.scenario == *scenario)
            .map(|o| o.n)
            .collect();
        sizes.dedup();
        for n in sizes {
            let same: Vec<&Outcome> = outcomes
                .iter()
                .filter(|o| o.scenario == *scenario && o.n == n)
                .collect();
            print!("{}", report::summary(&same));
        }
    }
    println!(
        "\nscale_probe finished in {:.0} s",
        begin.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("scenarios that did not complete: {failed:?}");
    }
    Ok(())
}

/// One scenario at one N for each controller: one after the other (a measured run: the two
/// never share the machine), or side by side in the smoke test, whose figures are not
/// measurements and whose scenarios mostly wait on the clock (a step pause, a scale-down
/// delay), so that CI pays for each scenario once.
async fn run_controllers(
    plan: &Plan,
    scenario: Scenario,
    n: usize,
) -> Vec<(Which, Duration, Result<Outcome>)> {
    let one = |which: Which| async move {
        let t = Instant::now();
        let result = scenarios::run(which, scenario, n, plan.timing).await;
        (which, t.elapsed(), result)
    };
    if plan.side_by_side {
        return futures::future::join_all(plan.controllers.iter().map(|&w| one(w))).await;
    }
    let mut done = Vec::new();
    for &which in &plan.controllers {
        done.push(one(which).await);
    }
    done
}

/// Prints one completed run and keeps its outcome; churned objects left behind fail it.
fn record(
    outcome: Outcome,
    what: &str,
    took: Duration,
    outcomes: &mut Vec<Outcome>,
    failed: &mut Vec<String>,
) {
    println!("done: {what} in {:.0} s", took.as_secs_f64());
    print!("{}", report::raw(&outcome));
    if let Some(churn) = outcome.churn.as_ref().filter(|c| !c.left_behind.is_empty()) {
        println!("FAILED: {what}: left behind:");
        for line in &churn.left_behind {
            println!("  {line}");
        }
        failed.push(format!("{what}: {} left behind", churn.left_behind.len()));
    }
    outcomes.push(outcome);
}

/// The plan from flags (`--name value`), else env, else defaults (`--quick`: a smoke test).
fn plan(args: &[String], quick: bool) -> Result<Plan> {
    let get = |flag: &str, env: &str| -> Option<String> {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
            .or_else(|| std::env::var(env).ok())
    };
    let controllers = match get("--controller", "TWC_PROBE_CONTROLLER").as_deref() {
        None | Some("both") => vec![Which::Ours, Which::Go],
        Some("ours") => vec![Which::Ours],
        Some("go") => vec![Which::Go],
        Some(other) => bail!("--controller {other:?}: ours, go or both"),
    };
    let names: Vec<&str> = SCENARIOS.iter().map(|s| s.1).collect();
    let scenarios = match get("--scenarios", "TWC_PROBE_SCENARIOS") {
        // The smoke test leaves churn out: its minutes are its point.
        None if quick => SCENARIOS
            .iter()
            .map(|s| s.0)
            .filter(|s| *s != Scenario::Churn)
            .collect(),
        None => SCENARIOS.iter().map(|s| s.0).collect(),
        Some(list) => list
            .split(',')
            .map(|name| {
                SCENARIOS
                    .iter()
                    .find(|s| s.1 == name.trim())
                    .map(|s| s.0)
                    .with_context(|| format!("scenario {name:?}: one of {names:?}"))
            })
            .collect::<Result<Vec<_>>>()?,
    };
    let sizes = SCENARIOS
        .iter()
        .map(|&(scenario, _, flag, env, full, small)| {
            let list = get(flag, env).unwrap_or_else(|| (if quick { small } else { full }).into());
            let ns = list
                .split(',')
                .map(|n| n.trim().parse().with_context(|| format!("{flag} {n:?}")))
                .collect::<Result<Vec<usize>>>()?;
            Ok((scenario, ns))
        })
        .collect::<Result<Vec<_>>>()?;
    let window_default = if quick { "10" } else { "300" };
    let window: u64 = get("--window", "TWC_PROBE_WINDOW")
        .unwrap_or_else(|| window_default.into())
        .parse()
        .context("--window (seconds)")?;
    let number = |flag: &str, env: &str, default: u64| -> Result<u64> {
        get(flag, env).map_or(Ok(default), |v| {
            v.trim().parse().with_context(|| format!("{flag} {v:?}"))
        })
    };
    let timing = Timing {
        window: Duration::from_secs(window),
        quiet: Duration::from_secs(if quick { 2 } else { 10 }),
        settle_max: Duration::from_secs(if quick { 15 } else { 60 }),
        reach_deadline: Duration::from_secs(number(
            "--reach-deadline",
            "TWC_PROBE_REACH_DEADLINE",
            900,
        )?),
        beside: number("--beside", "TWC_PROBE_BESIDE", 0)? as usize,
        churn_minutes: number("--churn-minutes", "TWC_PROBE_CHURN_MINUTES", 5)?,
    };
    Ok(Plan {
        controllers,
        scenarios,
        sizes,
        timing,
        side_by_side: quick,
    })
}
