//! Poller health of a rolled-out version (issue 26 item 2, issue 38): a worker that stops
//! polling while its Pod stays Ready turns `Ready` False with `NoActivePollers`, in progress
//! (kstatus InProgress: it may heal), and back to True with `PollersHealthy` (and a Normal
//! event) once it polls again; a loss that outlasts the progress deadline becomes
//! `Stalled=True/ProgressDeadlineExceeded`, and clears when the pollers come back.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use serde_json::json;

use crate::support::*;

const T: Duration = Duration::from_secs(120);
/// The WorkerDeployment's progress deadline: long enough to see a loss heal before it.
const DEADLINE_S: u64 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_version_whose_workers_stop_polling_is_not_ready_until_they_poll_again()
-> Result<()> {
    let c = case("pollers").await?;
    let Some(kubelet) = c.env.kubelet.as_ref() else {
        // On a user's cluster the test cannot reach into a Pod's worker.
        eprintln!("skipped: needs the kubelet stand-in");
        return Ok(());
    };
    c.apply_twd(
        "orders",
        "v1",
        json!({"strategy": "AllAtOnce"}),
        json!({"progressDeadlineSeconds": DEADLINE_S}),
    )
    .await?;
    let twd = c.wait_twd("orders", "v1 Ready", T, is_ready).await?;
    let v1 = current_build(&twd).context("Ready without a current version")?;
    let dep = deployment_of("orders", &v1);

    // The worker process keeps running and its Pod stays Ready; only Temporal sees no poller.
    let reached = kubelet.set_polling(&c.ns, &dep, false);
    ensure!(reached >= 1, "no running worker of {dep} to pause");
    let twd = c
        .wait_twd("orders", "Ready=False/NoActivePollers", T, |t| {
            condition_is(t, "Ready", "False", "NoActivePollers")
        })
        .await?;
    let lost_at = Instant::now();
    ensure!(
        condition_is(&twd, "Stalled", "False", "NoActivePollers")
            && condition_is(&twd, "Reconciling", "True", "NoActivePollers"),
        "a loss that may heal is in progress, not stalled: {:?}",
        twd.status
    );
    let (k, kmsg) = test_harness::gitops::kstatus(&serde_json::to_value(&twd)?);
    ensure!(
        k == test_harness::gitops::Status::InProgress,
        "kstatus {k:?}: {kmsg}"
    );
    let message = &condition(&twd, "Ready").context("Ready")?.message;
    ensure!(
        message.contains(&v1) && message.contains(&c.task_queue),
        "{message}"
    );
    let ready_pods = c
        .deployments()
        .get(&dep)
        .await?
        .status
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    ensure!(ready_pods >= 1, "the Pods must stay Ready: {ready_pods}");
    ensure!(
        kubelet.running_workers(&c.ns, &dep) >= 1,
        "worker process ended"
    );

    // Back before the deadline: healthy again, never stalled on the way.
    ensure!(
        lost_at.elapsed() < Duration::from_secs(DEADLINE_S),
        "too slow to come back before the deadline"
    );
    kubelet.set_polling(&c.ns, &dep, true);
    let back = c
        .wait_twd("orders", "Ready=True/PollersHealthy", T, |t| {
            condition_is(t, "Ready", "True", "PollersHealthy")
                && condition_is(t, "Stalled", "False", "PollersHealthy")
        })
        .await?;
    ensure!(
        back.status
            .as_ref()
            .and_then(|s| s.rollout_control.as_ref())
            .is_none_or(|r| r.pollers_lost.is_none()),
        "the clock was not cleared: {:?}",
        back.status
    );

    let events = eventually("the recovery event", T, || async {
        let events = c.events_of("orders").await?;
        let seen = events
            .iter()
            .any(|e| e.type_ == "Normal" && e.reason == "PollersHealthy");
        Ok(seen.then_some(events))
    })
    .await?;
    ensure!(
        events
            .iter()
            .any(|e| e.type_ == "Warning" && e.reason == "NoActivePollers"),
        "{events:?}"
    );
    lost_too_long(&c, kubelet, &dep).await
}

/// Gone for longer than the deadline: Stalled, by the same clock; back: cleared.
async fn lost_too_long(
    c: &Case,
    kubelet: &test_harness::kubelet::Kubelet,
    dep: &str,
) -> Result<()> {
    kubelet.set_polling(&c.ns, dep, false);
    c.wait_twd("orders", "NoActivePollers again", T, |t| {
        condition_is(t, "Ready", "False", "NoActivePollers")
    })
    .await?;
    let lost_at = Instant::now();
    let twd = c
        .wait_twd(
            "orders",
            "Stalled=True/ProgressDeadlineExceeded",
            Duration::from_secs(DEADLINE_S + 20),
            |t| condition_is(t, "Stalled", "True", "ProgressDeadlineExceeded"),
        )
        .await?;
    let took = lost_at.elapsed();
    ensure!(
        took >= Duration::from_secs(DEADLINE_S - 2),
        "stalled {took:?} after the loss, before its {DEADLINE_S}s deadline"
    );
    let m = &condition(&twd, "Stalled").context("Stalled")?.message;
    ensure!(m.starts_with("NoActivePollers"), "{m}");
    let (k, kmsg) = test_harness::gitops::kstatus(&serde_json::to_value(&twd)?);
    ensure!(
        k == test_harness::gitops::Status::Failed,
        "kstatus {k:?}: {kmsg}"
    );
    kubelet.set_polling(&c.ns, dep, true);
    c.wait_twd("orders", "Ready=True/PollersHealthy", T, |t| {
        condition_is(t, "Ready", "True", "PollersHealthy")
            && condition_is(t, "Stalled", "False", "PollersHealthy")
    })
    .await?;
    Ok(())
}
