//! Per-version autoscaling signals (issue 17 item 4): the task-queue backlog of a live version,
//! read from Temporal's per-version task-queue stats, on `/metrics` with its build ID.

use std::time::Duration;

use anyhow::{Context as _, Result};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::support::*;

const T: Duration = Duration::from_secs(120);

/// The value of the workflow-queue backlog gauge of `build` on `/metrics`, if exported.
async fn backlog(c: &Case, name: &str, build: &str) -> Result<Option<i64>> {
    c.exported_backlog(name, build, "workflow").await
}

/// Scales a versioned Deployment the way an autoscaler would (the scale subresource).
async fn scale(c: &Case, deployment: &str, replicas: i32) -> Result<()> {
    c.deployments()
        .patch_scale(
            deployment,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_without_pollers_shows_its_backlog_until_workers_poll() -> Result<()> {
    let c = case("backlog").await?;
    // No spec.replicas: an autoscaler owns the versions' replicas, so the test may act as one.
    c.apply_twd(
        "queue",
        "v1",
        json!({"strategy": "AllAtOnce"}),
        json!({"replicas": null}),
    )
    .await?;
    let v1 = current_build(&c.wait_twd("queue", "v1 Ready", T, is_ready).await?)
        .context("v1 current")?;
    let dep = deployment_of("queue", &v1);
    eventually("v1's backlog exported (empty)", T, || async {
        Ok((backlog(&c, "queue", &v1).await? == Some(0)).then_some(()))
    })
    .await?;

    // A Manual v2 becomes the target and v1 stays Current: the controller keeps a target at one
    // replica at least, but leaves a Current version's replicas to the autoscaler.
    c.apply_twd(
        "queue",
        "v2",
        json!({"strategy": "Manual"}),
        json!({"replicas": null}),
    )
    .await?;
    c.wait_twd("queue", "v2 waiting for promotion", T, |t| {
        condition_is(t, "Progressing", "True", "WaitingForPromotion")
    })
    .await?;
    // The autoscaler takes v1 to zero: no pollers. New workflows wait in v1's queue.
    scale(&c, &dep, 0).await?;
    let kubelet = c.env.kubelet.as_ref().context("kubelet")?;
    eventually("v1's workers stopped", T, || async {
        Ok((kubelet.running_workers(&c.ns, &dep) == 0).then_some(()))
    })
    .await?;
    const N: i64 = 3;
    for i in 0..N {
        c.temporal_cli(&[
            "workflow",
            "start",
            "--type",
            "hello",
            "--task-queue",
            &c.task_queue,
            "--workflow-id",
            &format!("backlogged-{i}-{}", c.ns),
        ])
        .await?;
    }
    eventually("v1's backlog reads N", T, || async {
        Ok((backlog(&c, "queue", &v1).await? == Some(N)).then_some(()))
    })
    .await?;

    // Workers are back: they drain the queue and the gauge returns to 0.
    scale(&c, &dep, 1).await?;
    eventually("v1's backlog back to 0", T, || async {
        Ok((backlog(&c, "queue", &v1).await? == Some(0)).then_some(()))
    })
    .await?;
    Ok(())
}
