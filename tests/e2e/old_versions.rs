//! Old versions handled to the end (issue 17): what keeps a draining version alive (status,
//! CLI, metrics), and the workflows pinned to it cancelled after `spec.sunset.cancelPinnedAfter`
//! so that it drains and goes away.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::temporal::state::TemporalVersionStatus;

use crate::lifecycle::events_with_reason;
use crate::rollout::deploy_first;
use crate::support::*;

const T: Duration = Duration::from_secs(120);

/// The status entry of an old version.
fn old_version(
    twd: &TemporalWorkerDeployment,
    build: &str,
) -> Option<temporal_worker_controller::api::twd::DeprecatedVersion> {
    twd.status
        .as_ref()?
        .deprecated_versions
        .iter()
        .find(|d| d.version.build_id == build)
        .cloned()
}

/// `temporal-worker-controller status NAME -n NS` from the real binary, against Kubernetes.
async fn status_cli(c: &Case, name: &str) -> Result<String> {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_temporal-worker-controller"))
        .args(["status", name, "-n", &c.ns])
        .env("KUBECONFIG", &c.env.kubeconfig)
        .output()
        .await?;
    ensure!(out.status.success(), "status CLI failed: {out:?}");
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_workflows_keep_a_draining_version_alive() -> Result<()> {
    let c = case("pinned").await?;
    let v1 = deploy_first(&c, "ledger").await?;
    let wf = format!("pinned-{}", c.ns);
    start_waiting_workflow(&c, &wf).await?;
    // The workflow starts on v1 (Current) and is pinned there by the worker's default behaviour.
    c.apply_twd("ledger", "v2", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    c.wait_twd("ledger", "v2 Current", T, |t| {
        is_ready(t) && current_build(t).is_some_and(|b| b != v1)
    })
    .await?;
    let temporal = c.temporal().await?;
    let dep_name = c.temporal_deployment_name("ledger");
    eventually("v1 Draining in Temporal", T, || async {
        let s = describe_soon(&temporal, &dep_name).await?;
        Ok(
            (s.version(&v1).map(|v| v.status) == Some(TemporalVersionStatus::Draining))
                .then_some(()),
        )
    })
    .await?;
    check_drain_visibility(&c, &v1, &wf).await?;
    watch_v1_kept_over_two_drain_polls(&c, &temporal, &v1, &wf).await?;
    check_nothing_ended_the_pinned_workflow(&c, &v1).await?;

    // Finish the workflow: v1 drains and goes away.
    finish_workflow(&c, &wf).await?;
    wait_gone(
        &c,
        &deployment_of("ledger", &v1),
        "v1 Deployment deleted after draining",
    )
    .await?;
    Ok(())
}

/// Drain visibility: the status, the CLI and the metrics say since when v1 drains and which
/// workflow keeps it.
async fn check_drain_visibility(c: &Case, v1: &str, wf: &str) -> Result<()> {
    let twd = c
        .wait_twd("ledger", "v1's pinned workflow in status", T, |t| {
            old_version(t, v1).is_some_and(|d| {
                d.open_pinned_workflows == Some(1)
                    && d.draining_since.is_some()
                    && d.oldest_pinned_workflows
                        .first()
                        .map(|w| w.workflow_id.as_str())
                        == Some(wf)
            })
        })
        .await?;
    let d = old_version(&twd, v1).context("v1 in status")?;
    ensure!(
        d.waiting_for
            .as_deref()
            .is_some_and(|w| w.starts_with("1 open workflow pinned")),
        "{d:?}"
    );
    ensure!(
        d.oldest_pinned_workflows[0].workflow_type == "wait",
        "{d:?}"
    );
    let cli = status_cli(c, "ledger").await?;
    ensure!(
        cli.contains("Old versions (what keeps them):") && cli.contains(&format!("wait/{wf}")),
        "CLI status lacks v1's pinned workflow:\n{cli}"
    );
    let gauge = format!(
        "temporal_worker_controller_version_open_pinned_workflows{{namespace=\"{}\",name=\"ledger\",build_id=\"{v1}\"}} 1",
        c.ns
    );
    let (_, metrics) =
        test_harness::loopback_http::get(c.env.http_addr, "/metrics", "text/plain", None).await?;
    ensure!(metrics.contains(&gauge), "no {gauge:?} in /metrics");
    Ok(())
}

/// Over two drain polls (and many times the sunset delays), v1 keeps its replica, stays
/// Draining, and its workflow keeps running: without `cancelPinnedAfter` nothing ends it.
async fn watch_v1_kept_over_two_drain_polls(
    c: &Case,
    temporal: &temporal_worker_controller::temporal::TemporalClient,
    v1: &str,
    wf: &str,
) -> Result<()> {
    let dep_name = c.temporal_deployment_name("ledger");
    let v1_dep = deployment_of("ledger", v1);
    let watch_until = std::time::Instant::now()
        + 2 * temporal_worker_controller::planner::clock::DRAIN_POLL
        + Duration::from_secs(5);
    let mut next_describe = std::time::Instant::now();
    while std::time::Instant::now() < watch_until {
        let d = c.deployments().get(&v1_dep).await?;
        ensure!(
            d.spec.replicas == Some(1),
            "v1 scaled down while a pinned workflow runs"
        );
        let s = describe_soon(temporal, &dep_name).await?;
        ensure!(s.version(v1).map(|v| v.status) == Some(TemporalVersionStatus::Draining));
        if std::time::Instant::now() >= next_describe {
            let w = describe_workflow(c, wf).await?;
            let status = w["workflowExecutionInfo"]["status"].as_str().unwrap_or("");
            ensure!(
                status == "WORKFLOW_EXECUTION_STATUS_RUNNING",
                "the pinned workflow ended without cancelPinnedAfter: {status}"
            );
            next_describe = std::time::Instant::now() + Duration::from_secs(5);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// No event says a pinned workflow was ended, and v1 is neither scheduled for scale-down nor
/// eligible for deletion.
async fn check_nothing_ended_the_pinned_workflow(c: &Case, v1: &str) -> Result<()> {
    for reason in [
        "PinnedWorkflowsCancelled",
        "PinnedWorkflowsTerminated",
        "PinnedWorkflowsSignalled",
    ] {
        ensure!(
            events_with_reason(c, reason).await?.is_empty(),
            "{reason} without any spec.sunset setting asking for it"
        );
    }
    let twd = c.get_twd("ledger").await?;
    let deprecated = twd.status.as_ref().and_then(|s| {
        s.deprecated_versions
            .iter()
            .find(|d| d.version.build_id == v1)
            .cloned()
    });
    ensure!(
        deprecated.is_some_and(|d| d.scaledown_at.is_none() && !d.eligible_for_deletion),
        "{:?}",
        twd.status
    );
    Ok(())
}

/// Waits until the versioned Deployment `name` is gone.
async fn wait_gone(c: &Case, name: &str, what: &str) -> Result<()> {
    eventually(what, T, || async {
        Ok(c.deployments().get_opt(name).await?.is_none().then_some(()))
    })
    .await
}

/// Waits until the Deployment of `twd`'s version `build` is gone.
async fn wait_deleted(c: &Case, twd: &str, build: &str, what: &str) -> Result<()> {
    wait_gone(c, &deployment_of(twd, build), what).await
}

/// Starts a `wait` workflow (it runs until signalled) on the case's task queue: the worker's
/// default versioning behaviour pins it to the Current version.
pub(crate) async fn start_waiting_workflow(c: &Case, id: &str) -> Result<()> {
    start_waiting_workflow_on(c, id, &c.task_queue).await
}

/// [`start_waiting_workflow`] on task queue `queue`.
pub(crate) async fn start_waiting_workflow_on(c: &Case, id: &str, queue: &str) -> Result<()> {
    c.temporal_cli(&[
        "workflow",
        "start",
        "--type",
        "wait",
        "--task-queue",
        queue,
        "--workflow-id",
        id,
    ])
    .await?;
    Ok(())
}

/// Signals a `wait` workflow to finish.
pub(crate) async fn finish_workflow(c: &Case, id: &str) -> Result<()> {
    c.temporal_cli(&[
        "workflow",
        "signal",
        "--workflow-id",
        id,
        "--name",
        "finish",
    ])
    .await?;
    Ok(())
}

/// `temporal workflow describe` as JSON.
async fn describe_workflow(c: &Case, id: &str) -> Result<Value> {
    let out = c
        .temporal_cli(&["workflow", "describe", "--workflow-id", id, "-o", "json"])
        .await?;
    Ok(serde_json::from_str(&out)?)
}

/// Rolls `name` from its first version to a second one and waits until Temporal reports the
/// first Draining; returns v1, v2 and when v1 began to drain (Temporal's clock).
pub(crate) async fn roll_and_wait_draining(
    c: &Case,
    name: &str,
    extra: Value,
) -> Result<(String, String, jiff::Timestamp)> {
    let v1 = current_build(&c.get_twd(name).await?).context("v1 current")?;
    c.apply_twd(name, "v2", json!({"strategy": "AllAtOnce"}), extra)
        .await?;
    let twd = c
        .wait_twd(name, "v2 Current", T, |t| {
            is_ready(t) && current_build(t).is_some_and(|b| b != v1)
        })
        .await?;
    let v2 = current_build(&twd).context("v2 current")?;
    let temporal = c.temporal().await?;
    let dep_name = c.temporal_deployment_name(name);
    let since = eventually("v1 Draining in Temporal", T, || async {
        let s = describe_soon(&temporal, &dep_name).await?;
        Ok(s.version(&v1)
            .filter(|v| v.status == TemporalVersionStatus::Draining)
            .and_then(|v| v.drainage_changed_at))
    })
    .await?;
    Ok((v1, v2, since))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_workflows_are_cancelled_after_cancel_pinned_after_and_the_version_goes()
-> Result<()> {
    let c = case("cancelpinned").await?;
    // Termination before cancellation is refused at admission (CEL), with the reason.
    let backwards = json!({"sunset": {"cancelPinnedAfter": "10s", "terminatePinnedAfter": "5s"}});
    let err = c
        .apply_twd("billing", "v1", json!({"strategy": "AllAtOnce"}), backwards)
        .await
        .err()
        .context("terminatePinnedAfter < cancelPinnedAfter was admitted")?;
    ensure!(
        format!("{err:#}").contains("terminatePinnedAfter must be longer than cancelPinnedAfter"),
        "unclear admission error: {err:#}"
    );
    let sunset =
        json!({"sunset": {"scaledownDelay": "1s", "deleteDelay": "1s", "cancelPinnedAfter": "5s"}});
    c.apply_twd(
        "billing",
        "v1",
        json!({"strategy": "AllAtOnce"}),
        sunset.clone(),
    )
    .await?;
    c.wait_twd("billing", "v1 Ready", T, is_ready).await?;
    let wf = format!("cancel-me-{}", c.ns);
    start_waiting_workflow(&c, &wf).await?;
    let (v1, v2, since) = roll_and_wait_draining(&c, "billing", sunset).await?;

    // Cancelled by the controller (a batch operation), no sooner than 5 s after v1 began to
    // drain by Temporal's own clock.
    let described = eventually("the pinned workflow cancelled", T, || async {
        let d = describe_workflow(&c, &wf).await?;
        let status = d["workflowExecutionInfo"]["status"].as_str().unwrap_or("");
        Ok((status == "WORKFLOW_EXECUTION_STATUS_CANCELED").then_some(d))
    })
    .await?;
    let closed: jiff::Timestamp = described["workflowExecutionInfo"]["closeTime"]
        .as_str()
        .context("closeTime")?
        .parse()?;
    ensure!(
        closed >= since + jiff::SignedDuration::from_secs(5),
        "cancelled at {closed}, before cancelPinnedAfter (5 s) from draining since {since}"
    );
    ensure!(
        !events_with_reason(&c, "PinnedWorkflowsCancelled")
            .await?
            .is_empty(),
        "no PinnedWorkflowsCancelled event"
    );

    // With nothing pinned any more, v1 drains, is scaled down and deleted; v2 is untouched.
    wait_deleted(
        &c,
        "billing",
        &v1,
        "v1 Deployment deleted after its workflows were cancelled",
    )
    .await?;
    let twd = c.get_twd("billing").await?;
    ensure!(is_ready(&twd) && current_build(&twd).as_deref() == Some(v2.as_str()));
    Ok(())
}

/// The build ID the latest run of `id` is on (its versioning info), and its run ID.
async fn run_version(c: &Case, id: &str) -> Result<(Option<String>, String)> {
    let d = describe_workflow(c, id).await?;
    let info = &d["workflowExecutionInfo"];
    let build = info
        .pointer("/versioningInfo/deploymentVersion/buildId")
        .and_then(Value::as_str)
        .map(str::to_string);
    let run = info["execution"]["runId"]
        .as_str()
        .unwrap_or("")
        .to_string();
    Ok((build, run))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_signal_moves_pinned_workflows_to_the_current_version() -> Result<()> {
    let c = case("upgradesig").await?;
    let sunset = json!({"sunset": {"scaledownDelay": "1s", "deleteDelay": "1s", "upgradeSignal": "upgrade"}});
    c.apply_twd(
        "search",
        "v1",
        json!({"strategy": "AllAtOnce"}),
        sunset.clone(),
    )
    .await?;
    let v1 = current_build(&c.wait_twd("search", "v1 Ready", T, is_ready).await?)
        .context("v1 current")?;
    let wf = format!("upgradable-{}", c.ns);
    let first_run = start_an_upgradable_workflow_on(&c, &wf, &v1).await?;

    // v1 drains only briefly here (the nudge moves its workflow at once): wait for v2 alone.
    c.apply_twd("search", "v2", json!({"strategy": "AllAtOnce"}), sunset)
        .await?;
    let twd = c
        .wait_twd("search", "v2 Current", T, |t| {
            is_ready(t) && current_build(t).is_some_and(|b| b != v1)
        })
        .await?;
    let v2 = current_build(&twd).context("v2 current")?;
    // Signalled once, the workflow continues as new onto v2 (AutoUpgrade for its first task).
    eventually("the workflow continued as new onto v2", T, || async {
        let (build, run) = run_version(&c, &wf).await?;
        Ok((run != first_run && build.as_deref() == Some(v2.as_str())).then_some(()))
    })
    .await?;
    // Nothing is pinned to v1 any more: it drains and goes away.
    wait_deleted(
        &c,
        "search",
        &v1,
        "v1 Deployment deleted after its workflow moved",
    )
    .await?;
    check_the_first_run_was_signalled_once(&c, &wf, &first_run).await
}

/// Starts an `upgradable` workflow and waits until it runs on `v1`; returns its run ID.
async fn start_an_upgradable_workflow_on(c: &Case, wf: &str, v1: &str) -> Result<String> {
    c.temporal_cli(&[
        "workflow",
        "start",
        "--type",
        "upgradable",
        "--task-queue",
        &c.task_queue,
        "--workflow-id",
        wf,
    ])
    .await?;
    eventually("the workflow runs on v1", T, || async {
        let (build, run) = run_version(c, wf).await?;
        Ok((build.as_deref() == Some(v1)).then_some(run))
    })
    .await
}

/// The old run got exactly one upgrade signal, however many reconciles saw v1 draining, and
/// the controller said so in an event.
async fn check_the_first_run_was_signalled_once(c: &Case, wf: &str, first_run: &str) -> Result<()> {
    let history = c
        .temporal_cli(&[
            "workflow",
            "show",
            "--workflow-id",
            wf,
            "--run-id",
            first_run,
            "-o",
            "json",
        ])
        .await?;
    let history: Value = serde_json::from_str(&history)?;
    let signals = history["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|e| {
                    e["eventType"]
                        .as_str()
                        .is_some_and(|t| t.contains("SIGNALED"))
                })
                .count()
        })
        .unwrap_or(0);
    ensure!(
        signals == 1,
        "the first run was signalled {signals} times: {history}"
    );
    ensure!(
        !events_with_reason(c, "PinnedWorkflowsSignalled")
            .await?
            .is_empty(),
        "no PinnedWorkflowsSignalled event"
    );
    Ok(())
}
