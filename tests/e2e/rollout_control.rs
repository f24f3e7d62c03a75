//! Rollout control end to end (issue 16): pause / resume / promote / skip / abort, from plain
//! spec and annotation edits and from the CLI, with real workers, real Temporal routing and the
//! GitOps verdicts of each state.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::TemporalWorkerDeployment;

use crate::rollout::deploy_first;
use crate::support::*;
use test_harness::gitops::{self, Status};

const T: Duration = Duration::from_secs(120);

fn progressive(steps: &[(i32, &str)], extra: Value) -> Value {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(p, d)| json!({"rampPercentage": p, "pauseDuration": d}))
        .collect();
    let mut rollout = json!({"strategy": "Progressive", "steps": steps});
    if let (Some(r), Some(e)) = (rollout.as_object_mut(), extra.as_object()) {
        r.extend(e.clone());
    }
    rollout
}

pub(crate) fn ramp(t: &TemporalWorkerDeployment) -> Option<f32> {
    t.status.as_ref()?.target_version.as_ref()?.ramp_percentage
}

pub(crate) fn ready_reason(t: &TemporalWorkerDeployment) -> String {
    condition(t, "Ready")
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

/// kstatus and Argo CD on the object as the API server returns it.
fn gitops(t: &TemporalWorkerDeployment) -> Result<(Status, String)> {
    let v = gitops::verdicts(&serde_json::to_value(t)?);
    Ok((v.kstatus.status, v.argocd.0))
}

/// Temporal's routing: (ramping build, ramp %, when the ramp % last changed, current build).
async fn routing(
    c: &Case,
    name: &str,
) -> Result<(Option<String>, f32, Option<jiff::Timestamp>, Option<String>)> {
    let state = describe_soon(&c.temporal().await?, &c.temporal_deployment_name(name)).await?;
    let r = state.routing;
    Ok((
        r.ramping_build_id.filter(|b| !b.is_empty()),
        r.ramp_percentage,
        r.ramp_percentage_changed_at,
        r.current_build_id.filter(|b| !b.is_empty()),
    ))
}

async fn annotate(c: &Case, name: &str, key: &str, value: &str) -> Result<()> {
    c.twds()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
        )
        .await?;
    Ok(())
}

/// Runs the real CLI binary with the case's kubeconfig; returns (stdout, stderr).
async fn cli(c: &Case, args: &[&str]) -> Result<(String, String)> {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_temporal-worker-controller"))
        .args(args)
        .args(["-n", &c.ns])
        .env("KUBECONFIG", &c.env.kubeconfig)
        .output()
        .await?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    ensure!(out.status.success(), "{args:?} failed: {stderr}");
    Ok((stdout, stderr))
}

/// Pause holds a step past its deadline (Ready=False/RolloutPaused, kstatus InProgress, Argo CD
/// Suspended); resume continues with the time the step had left, not a fresh pause and not at
/// once; the promote annotation then skips a 10-minute step. All from plain spec and
/// annotation edits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_holds_past_the_deadline_resume_continues_and_promote_skips() -> Result<()> {
    let c = case("pause").await?;
    let v1 = deploy_first(&c, "orders").await?;
    c.apply_twd(
        "orders",
        "v2",
        progressive(&PAUSE_STEPS, json!({})),
        json!({}),
    )
    .await?;
    let twd = c
        .wait_twd("orders", "20% step", T, |t| ramp(t) == Some(20.0))
        .await?;
    let v2 = target_build(&twd).context("target")?;
    let started = routing(&c, "orders").await?.2.context("no step start")?;
    let remaining = pause_and_check_it_reads_suspended(&c).await?;
    check_the_paused_step_holds_past_its_deadline(&c, started, &v1, &v2).await?;
    resume_and_check_the_step_keeps_its_remaining_time(&c, remaining).await?;
    promote_by_annotation(&c, &v2).await
}

/// The 20% step of [`pause_holds_past_the_deadline_resume_continues_and_promote_skips`].
const PAUSE_STEP: i64 = 12;
const PAUSE_STEPS: [(i32, &str); 2] = [(20, "12s"), (60, "600s")];

/// Pauses the rollout: Reconciling and not Ready, suspended to GitOps tools, with the step's
/// remaining time recorded (returned).
async fn pause_and_check_it_reads_suspended(c: &Case) -> Result<i64> {
    const STEP: i64 = PAUSE_STEP;
    c.apply_twd(
        "orders",
        "v2",
        progressive(&PAUSE_STEPS, json!({"paused": true})),
        json!({}),
    )
    .await?;
    let twd = c
        .wait_twd("orders", "RolloutPaused", T, |t| {
            ready_reason(t) == "RolloutPaused"
                && t.status.as_ref().and_then(|s| s.observed_generation) == t.metadata.generation
        })
        .await?;
    ensure!(
        condition_is(&twd, "Reconciling", "True", "RolloutPaused")
            && condition_is(&twd, "Ready", "False", "RolloutPaused")
    );
    ensure!(condition_is(&twd, "Stalled", "False", "RolloutPaused"));
    ensure!(
        gitops(&twd)? == (Status::InProgress, "Suspended".to_string()),
        "paused reads as {:?}",
        gitops(&twd)?
    );
    let remaining = twd
        .status
        .as_ref()
        .and_then(|s| s.rollout_control.as_ref())
        .and_then(|r| r.paused.as_ref())
        .and_then(|p| p.remaining_seconds)
        .context("no remaining time recorded")?;
    ensure!((0..=STEP).contains(&remaining), "remaining {remaining}s");
    Ok(remaining)
}

/// Past the step's deadline by Temporal's clock, the step still holds.
async fn check_the_paused_step_holds_past_its_deadline(
    c: &Case,
    started: jiff::Timestamp,
    v1: &str,
    v2: &str,
) -> Result<()> {
    let deadline = started + jiff::SignedDuration::from_secs(PAUSE_STEP + 3);
    let wait = deadline.duration_since(jiff::Timestamp::now());
    if wait.is_positive() {
        tokio::time::sleep(Duration::try_from(wait)?).await;
    }
    let (ramping, pct, changed, current) = routing(c, "orders").await?;
    ensure!(
        ramping.as_deref() == Some(v2) && pct == 20.0 && changed == Some(started),
        "paused step moved: {ramping:?} at {pct}% since {changed:?}"
    );
    ensure!(current.as_deref() == Some(v1));
    ensure!(ready_reason(&c.get_twd("orders").await?) == "RolloutPaused");
    Ok(())
}

/// Resumed, the step runs out its remaining time, not a new one and not none.
async fn resume_and_check_the_step_keeps_its_remaining_time(
    c: &Case,
    remaining: i64,
) -> Result<()> {
    let resumed = jiff::Timestamp::now();
    c.apply_twd(
        "orders",
        "v2",
        progressive(&PAUSE_STEPS, json!({})),
        json!({}),
    )
    .await?;
    c.wait_twd("orders", "60% step after resume", T, |t| {
        ramp(t) == Some(60.0)
    })
    .await?;
    let (_, pct, next_started, _) = routing(c, "orders").await?;
    ensure!(pct == 60.0);
    let next_started = next_started.context("no step start")?;
    let took = next_started.duration_since(resumed).as_secs_f64();
    println!("paused with {remaining}s left; the next step began {took:.1}s after resume");
    ensure!(
        took >= remaining as f64 - 1.0 && took <= remaining as f64 + 6.0,
        "resume with {remaining}s left moved on after {took:.1}s"
    );
    Ok(())
}

/// The 60% step lasts 10 minutes; the annotation promotes now, and stays.
async fn promote_by_annotation(c: &Case, v2: &str) -> Result<()> {
    annotate(c, "orders", "temporal.io/promote", v2).await?;
    let twd = c
        .wait_twd(
            "orders",
            "promoted by annotation",
            Duration::from_secs(60),
            |t| is_ready(t) && current_build(t).as_deref() == Some(v2),
        )
        .await?;
    let recorded = twd
        .status
        .as_ref()
        .and_then(|s| s.rollout_control.as_ref())
        .and_then(|r| r.promoted.clone());
    ensure!(recorded.as_deref() == Some(v2), "{recorded:?}");
    let annotations = twd.metadata.annotations.unwrap_or_default();
    ensure!(
        annotations.get("temporal.io/promote").map(String::as_str) == Some(v2),
        "the controller must leave the annotation in place"
    );
    Ok(())
}

/// From the CLI: skip moves exactly one step; abort ramps the target back to 0 % with the
/// current version untouched (Stalled=True/RolloutAborted: kstatus Failed, Argo CD Degraded);
/// `abort --clear` starts again at the first step; pause and resume round-trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_abort_and_pause_from_the_cli() -> Result<()> {
    let c = case("ctlcli").await?;
    let v1 = deploy_first(&c, "billing").await?;
    let steps = [(10, "600s"), (30, "600s"), (50, "600s")];
    c.apply_twd("billing", "v2", progressive(&steps, json!({})), json!({}))
        .await?;
    let twd = c
        .wait_twd("billing", "10% step", T, |t| ramp(t) == Some(10.0))
        .await?;
    let v2 = target_build(&twd).context("target")?;

    let (out, _) = cli(&c, &["skip", "billing"]).await?;
    ensure!(out.contains(&format!("{v2}/1")), "{out}");
    let twd = c
        .wait_twd("billing", "30% step after skip", T, |t| {
            ramp(t) == Some(30.0)
        })
        .await?;
    let skipped = twd
        .status
        .as_ref()
        .and_then(|s| s.rollout_control.as_ref())
        .and_then(|r| r.skipped_step.clone());
    ensure!(skipped == Some(format!("{v2}/1")), "{skipped:?}");
    let (ramping, pct, _, _) = routing(&c, "billing").await?;
    ensure!(ramping.as_deref() == Some(v2.as_str()) && pct == 30.0);

    let (out, err) = cli(&c, &["abort", "billing"]).await?;
    ensure!(out.contains("Aborting billing"), "{out}");
    ensure!(
        err.contains("self-heal"),
        "spec patches warn about GitOps: {err}"
    );
    let twd = c
        .wait_twd("billing", "RolloutAborted", T, |t| {
            condition_is(t, "Stalled", "True", "RolloutAborted")
        })
        .await?;
    ensure!(condition_is(&twd, "Reconciling", "False", "RolloutAborted"));
    ensure!(
        gitops(&twd)? == (Status::Failed, "Degraded".to_string()),
        "aborted reads as {:?}",
        gitops(&twd)?
    );
    let (ramping, _, _, current) = routing(&c, "billing").await?;
    ensure!(ramping.is_none(), "aborted target still ramps: {ramping:?}");
    ensure!(
        current.as_deref() == Some(v1.as_str()),
        "current changed: {current:?}"
    );
    ensure!(current_build(&twd).as_deref() == Some(v1.as_str()));

    cli(&c, &["abort", "billing", "--clear"]).await?;
    c.wait_twd("billing", "first step again", T, |t| {
        ramp(t) == Some(10.0) && ready_reason(t) == "Ramping"
    })
    .await?;

    cli(&c, &["pause", "billing"]).await?;
    c.wait_twd("billing", "paused by the CLI", T, |t| {
        ready_reason(t) == "RolloutPaused"
    })
    .await?;
    cli(&c, &["resume", "billing"]).await?;
    let twd = c
        .wait_twd("billing", "resumed by the CLI", T, |t| {
            ready_reason(t) == "Ramping"
        })
        .await?;
    ensure!(ramp(&twd) == Some(10.0));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Canary analysis
// ---------------------------------------------------------------------------------------

/// Applies `tag` whose workers fail every `flaky` run they get when `bad` (`TEST_FLAKY_FAILS`).
async fn apply_flaky(c: &Case, name: &str, tag: &str, bad: bool, rollout: Value) -> Result<()> {
    let mut env = vec![json!({"name": "TEMPORAL_TASK_QUEUE", "value": c.task_queue})];
    if bad {
        env.push(json!({"name": "TEST_FLAKY_FAILS", "value": "true"}));
    }
    let template = json!({"template": {"spec": {"containers": [{
        "name": "worker",
        "image": format!("registry.example/worker:{tag}"),
        "env": env,
    }]}}});
    c.apply_twd(name, tag, rollout, template).await
}

/// v1 (healthy or bad) Current, then v2 (healthy or bad) ramping at its 50 % first step under
/// `rollout`. Returns (v1, v2, when the step started by Temporal's clock).
async fn canary(
    c: &Case,
    name: &str,
    (v1_bad, v2_bad): (bool, bool),
    rollout: Value,
) -> Result<(String, String, jiff::Timestamp)> {
    apply_flaky(c, name, "v1", v1_bad, json!({"strategy": "AllAtOnce"})).await?;
    let v1 = current_build(&c.wait_twd(name, "v1 Ready", T, is_ready).await?).context("current")?;
    apply_flaky(c, name, "v2", v2_bad, rollout).await?;
    let twd = c
        .wait_twd(name, "50% step", T, |t| ramp(t) == Some(50.0))
        .await?;
    let v2 = target_build(&twd).context("target")?;
    let since = routing(c, name).await?.2.context("no step start")?;
    Ok((v1, v2, since))
}

/// Starts `count` `flaky` workflows asking for `fail_percent` % failures (only bad workers
/// honour it).
async fn start_flaky(c: &Case, count: u32, fail_percent: u32) -> Result<()> {
    use temporalio_common::data_converters::{PayloadConverter, RawValue};
    let server = test_harness::temporal_server::shared().await?;
    let client = server.client(&c.temporal_ns, "e2e-load").await?;
    for n in 0..count {
        let input = RawValue::from_value(
            &json!({"n": n, "failPercent": fail_percent}),
            &PayloadConverter::default(),
        );
        let opts = temporalio_client::WorkflowStartOptions::new(
            c.task_queue.clone(),
            test_harness::names::unique("flaky"),
        )
        .build();
        client
            .start_workflow(test_harness::worker::FlakyWorkflow::run, input, opts)
            .await?;
    }
    Ok(())
}

fn analysis_rollout(interval: &str, dry_run: bool) -> Value {
    progressive(
        &[(50, "300s"), (90, "300s")],
        json!({"analysis": {
            "interval": interval,
            "maxFailureRate": 20,
            "maxFailureRateIncrease": 10,
            "minSampleSize": 5,
            "dryRun": dry_run,
        }}),
    )
}

fn step_verdicts(t: &TemporalWorkerDeployment) -> Vec<(i32, String)> {
    t.status
        .as_ref()
        .and_then(|s| s.rollout_control.as_ref())
        .and_then(|r| r.analysis.as_ref())
        .map(|a| {
            a.steps
                .iter()
                .map(|s| (s.step, format!("{:?}", s.verdict)))
                .collect()
        })
        .unwrap_or_default()
}

/// A target whose workflows fail is aborted during its first step, within one analysis
/// interval of the failures crossing the threshold in visibility: ramp back to 0, the current
/// version untouched, `Stalled=True/RolloutAborted` with the rates, an `AnalysisFailed` Warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_target_is_aborted_during_its_first_step() -> Result<()> {
    const INTERVAL: Duration = Duration::from_secs(5);
    let c = case("canary").await?;
    let (v1, v2, since) =
        canary(&c, "payments", (false, true), analysis_rollout("5s", false)).await?;

    start_flaky(&c, 40, 100).await?;
    // When visibility first shows the target over the threshold (5 closed, > 20 % failed).
    let temporal = c.temporal().await?;
    let deployment = c.temporal_deployment_name("payments");
    let crossed = eventually("target failures in visibility", T, || async {
        let (closed, failed) = temporal
            .count_closed_workflows(&deployment, &v2, since, &[])
            .await?;
        Ok((closed >= 5 && failed * 5 > closed).then(Instant::now))
    })
    .await?;
    let twd = c
        .wait_twd("payments", "RolloutAborted", T, |t| {
            condition_is(t, "Stalled", "True", "RolloutAborted")
        })
        .await?;
    let took = crossed.elapsed();
    println!(
        "aborted {:.1}s after visibility crossed the threshold (interval {INTERVAL:?})",
        took.as_secs_f64()
    );
    ensure!(
        took <= INTERVAL + Duration::from_secs(3),
        "abort took {took:?}"
    );
    let message = &condition(&twd, "Ready").context("Ready")?.message;
    ensure!(
        message.contains("Canary analysis failed")
            && message.contains("at step 1")
            && message.contains("% failed ("),
        "{message}"
    );
    ensure!(
        step_verdicts(&twd) == vec![(1, "Fail".to_string())],
        "{:?}",
        step_verdicts(&twd)
    );
    let (ramping, _, _, current) = eventually("ramp cleared", T, || async {
        let r = routing(&c, "payments").await?;
        Ok(r.0.is_none().then_some(r))
    })
    .await?;
    ensure!(ramping.is_none() && current.as_deref() == Some(v1.as_str()));
    ensure!(gitops(&twd)? == (Status::Failed, "Degraded".to_string()));
    let events = c.events_of("payments").await?;
    ensure!(
        events
            .iter()
            .any(|e| e.type_ == "Warning" && e.reason == "AnalysisFailed"),
        "no AnalysisFailed event: {:?}",
        events.iter().map(|e| &e.reason).collect::<Vec<_>>()
    );
    Ok(())
}

/// With `dryRun`, the same failing target gets a recorded Fail verdict and keeps ramping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_analysis_records_a_failure_and_does_not_act() -> Result<()> {
    let c = case("dryrun").await?;
    let (_, v2, _) = canary(&c, "refunds", (false, true), analysis_rollout("2s", true)).await?;
    start_flaky(&c, 40, 100).await?;
    let twd = c
        .wait_twd("refunds", "Fail verdict recorded", T, |t| {
            step_verdicts(t) == vec![(1, "Fail".to_string())]
        })
        .await?;
    ensure!(ready_reason(&twd) == "Ramping", "{}", ready_reason(&twd));
    let (ramping, pct, _, _) = routing(&c, "refunds").await?;
    ensure!(ramping.as_deref() == Some(v2.as_str()) && pct == 50.0);
    Ok(())
}

/// Target and current failing at the same non-zero rate pass the relative threshold (an
/// absolute one of 20 % would have failed both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_failure_rates_pass() -> Result<()> {
    let c = case("equal").await?;
    // The split between versions is Temporal's: up to 30 points of difference are chance.
    let rollout = progressive(
        &[(50, "300s"), (90, "300s")],
        json!({"analysis": {"interval": "2s", "maxFailureRateIncrease": 30, "minSampleSize": 20}}),
    );
    canary(&c, "ledger", (true, true), rollout).await?;
    start_flaky(&c, 100, 30).await?;
    let twd = c
        .wait_twd("ledger", "Pass verdict", T, |t| {
            step_verdicts(t) == vec![(1, "Pass".to_string())]
                && t.status
                    .as_ref()
                    .and_then(|s| s.rollout_control.as_ref())
                    .and_then(|r| r.analysis.as_ref())
                    .is_some_and(|a| {
                        a.steps
                            .iter()
                            .all(|s| s.target_failed > 0 && s.current_failed > 0)
                    })
        })
        .await?;
    ensure!(ready_reason(&twd) == "Ramping", "{}", ready_reason(&twd));
    ensure!(ramp(&twd) == Some(50.0));
    Ok(())
}

/// Below the minimum sample the verdict is inconclusive and the step holds past its pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inconclusive_analysis_holds_the_step() -> Result<()> {
    let c = case("inconcl").await?;
    let rollout = progressive(
        &[(50, "3s"), (90, "3s")],
        json!({"analysis": {"interval": "2s", "maxFailureRate": 20, "minSampleSize": 1000, "maxInconclusive": "10m"}}),
    );
    let (_, _, since) = canary(&c, "audit", (false, false), rollout).await?;
    start_flaky(&c, 10, 0).await?;
    let twd = c
        .wait_twd("audit", "held as inconclusive", T, |t| {
            step_verdicts(t) == vec![(1, "Inconclusive".to_string())]
                && condition(t, "Ready")
                    .is_some_and(|r| r.message.contains("analysis inconclusive"))
        })
        .await?;
    ensure!(ramp(&twd) == Some(50.0));
    // Well past the 3 s pause, Temporal still ramps at the first step.
    let past = since + jiff::SignedDuration::from_secs(8);
    let wait = past.duration_since(jiff::Timestamp::now());
    if wait.is_positive() {
        tokio::time::sleep(Duration::try_from(wait)?).await;
    }
    let (_, pct, changed, _) = routing(&c, "audit").await?;
    ensure!(
        pct == 50.0 && changed == Some(since),
        "moved to {pct}% at {changed:?}"
    );
    Ok(())
}

/// A gate attached to the first step fails: the target's ramp goes back to 0 % and the rollout
/// stalls (`Stalled=True/RolloutAborted`), the current version untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_gate_ramps_back_to_zero() -> Result<()> {
    let c = case("stepgate").await?;
    let v1 = deploy_first(&c, "invoices").await?;
    let rollout = json!({"strategy": "Progressive", "steps": [
        {"rampPercentage": 30, "pauseDuration": "300s",
         "gate": {"workflowType": "gate", "input": {"outcome": "fail"}}},
        {"rampPercentage": 60, "pauseDuration": "300s"},
    ]});
    c.apply_twd("invoices", "v2", rollout, json!({})).await?;
    let twd = c
        .wait_twd("invoices", "aborted by the step gate", T, |t| {
            condition_is(t, "Stalled", "True", "RolloutAborted")
        })
        .await?;
    let message = &condition(&twd, "Ready").context("Ready")?.message;
    ensure!(message.contains("Step 1 gate failed"), "{message}");
    let reason = twd
        .status
        .as_ref()
        .and_then(|s| s.rollout_control.as_ref())
        .and_then(|r| r.aborted.as_ref())
        .map(|a| a.reason.clone());
    ensure!(reason.as_deref() == Some("StepGateFailed"), "{reason:?}");
    let (ramping, _, _, current) = eventually("ramp cleared", T, || async {
        let r = routing(&c, "invoices").await?;
        Ok(r.0.is_none().then_some(r))
    })
    .await?;
    ensure!(ramping.is_none() && current.as_deref() == Some(v1.as_str()));
    Ok(())
}

/// The other entry point of each action: skip by annotation, abort by a spec edit (and
/// clearing it in the spec restarts at the first step), promote from the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_by_annotation_abort_by_spec_promote_from_the_cli() -> Result<()> {
    let c = case("ctlspec").await?;
    let v1 = deploy_first(&c, "orders").await?;
    let steps = [(10, "600s"), (30, "600s"), (50, "600s")];
    c.apply_twd("orders", "v2", progressive(&steps, json!({})), json!({}))
        .await?;
    let twd = c
        .wait_twd("orders", "10% step", T, |t| ramp(t) == Some(10.0))
        .await?;
    let v2 = target_build(&twd).context("target")?;

    annotate(&c, "orders", "temporal.io/skip-step", &format!("{v2}/1")).await?;
    c.wait_twd("orders", "30% step after skip", T, |t| {
        ramp(t) == Some(30.0)
    })
    .await?;

    c.apply_twd(
        "orders",
        "v2",
        progressive(&steps, json!({"abort": true})),
        json!({}),
    )
    .await?;
    let twd = c
        .wait_twd("orders", "RolloutAborted", T, |t| {
            condition_is(t, "Stalled", "True", "RolloutAborted")
        })
        .await?;
    ensure!(gitops(&twd)? == (Status::Failed, "Degraded".to_string()));
    let (ramping, _, _, current) = routing(&c, "orders").await?;
    ensure!(ramping.is_none() && current.as_deref() == Some(v1.as_str()));

    c.apply_twd("orders", "v2", progressive(&steps, json!({})), json!({}))
        .await?;
    let twd = c
        .wait_twd("orders", "first step again", T, |t| {
            ramp(t) == Some(10.0) && ready_reason(t) == "Ramping"
        })
        .await?;
    ensure!(gitops(&twd)?.0 == Status::InProgress);

    let (out, err) = cli(&c, &["promote", "orders"]).await?;
    ensure!(out.contains(&format!("temporal.io/promote={v2}")), "{out}");
    ensure!(
        !err.contains("self-heal"),
        "annotations need no GitOps warning: {err}"
    );
    let twd = c
        .wait_twd(
            "orders",
            "promoted from the CLI",
            Duration::from_secs(60),
            |t| is_ready(t) && current_build(t).as_deref() == Some(v2.as_str()),
        )
        .await?;
    ensure!(gitops(&twd)? == (Status::Current, "Healthy".to_string()));
    Ok(())
}
