//! Poller health of a rolled-out version (issue 26 item 2): a worker that stops polling while
//! its Pod stays Ready turns `Ready` False with `NoActivePollers`, and back to True with
//! `PollersHealthy` (and a Normal event) once it polls again.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use serde_json::json;

use crate::support::*;

const T: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_version_whose_workers_stop_polling_is_not_ready_until_they_poll_again()
-> Result<()> {
    let c = case("pollers").await?;
    let Some(kubelet) = c.env.kubelet.as_ref() else {
        // On a user's cluster the test cannot reach into a Pod's worker.
        eprintln!("skipped: needs the kubelet stand-in");
        return Ok(());
    };
    c.apply_twd("orders", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
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
    ensure!(
        condition_is(&twd, "Stalled", "True", "NoActivePollers"),
        "{:?}",
        twd.status
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

    kubelet.set_polling(&c.ns, &dep, true);
    c.wait_twd("orders", "Ready=True/PollersHealthy", T, |t| {
        condition_is(t, "Ready", "True", "PollersHealthy")
            && condition_is(t, "Stalled", "False", "PollersHealthy")
    })
    .await?;
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
    Ok(())
}
