//! Version records the controller never made (issue 50): workers run outside Kubernetes (real
//! SDK workers started by the test) register two versions under the worker deployment's name,
//! one with a workflow pinned to it and still open, then stop, so Temporal would accept their
//! deletion (it forgets pollers after 5 s here). The controller's record GC leaves both
//! alone, while it still deletes the record of its own version that was superseded before it
//! served (Inactive). Both happen in the same passes: the GC deletes v2's record only once
//! Temporal forgot v2's pollers, which stopped after the outside workers did.
//!
//! Temporal itself reports the version with the pinned workflow Draining (the override makes
//! it so), which no record GC ever deletes; the idle one stays Inactive, and only the ledger
//! keeps it.
//!
//! **Mutation** (run 2026-12-02): `planner::records::forget` as it was before, deleting every
//! Drained or Inactive record without a Deployment (no ledger, no visibility check): the test
//! fails at "outside versions survive: outside-idle's record was deleted".

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use serde_json::json;
use test_harness::worker::{self, WorkerConfig};

use crate::old_versions::start_waiting_workflow_on;
use crate::rollout::deploy_first;
use crate::support::*;

const T: Duration = Duration::from_secs(180);
const OUTSIDE: [&str; 2] = ["outside-pinned", "outside-idle"];

/// An SDK worker of `build` under the worker deployment `deployment`, outside Kubernetes.
async fn outside_worker(
    c: &Case,
    deployment: &str,
    build: &str,
    queue: &str,
) -> Result<worker::WorkerHandle> {
    let w = worker::spawn(WorkerConfig {
        address: c.env.temporal_address.clone(),
        namespace: c.temporal_ns.clone(),
        deployment_name: deployment.into(),
        build_id: build.into(),
        task_queue: queue.into(),
        identity: format!("outside@{build}"),
        ..Default::default()
    })?;
    w.wait_running(T).await?;
    Ok(w)
}

/// Starts a `wait` workflow on `queue` and pins it to `build` (an override, as a user moving
/// workflows by hand does); it stays open until signalled.
async fn pin_workflow(c: &Case, deployment: &str, build: &str, queue: &str) -> Result<String> {
    let id = format!("pinned-outside-{}", c.ns);
    start_waiting_workflow_on(c, &id, queue).await?;
    c.temporal_cli(&[
        "workflow",
        "update-options",
        "--workflow-id",
        &id,
        "--versioning-override-behavior",
        "pinned",
        "--versioning-override-deployment-name",
        deployment,
        "--versioning-override-build-id",
        build,
    ])
    .await?;
    Ok(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_registered_outside_kubernetes_keep_their_records() -> Result<()> {
    let c = case("foreign").await?;
    let name = "mixed";
    let v1 = deploy_first(&c, name).await?;
    let deployment = c.temporal_deployment_name(name);
    let temporal = c.temporal().await?;

    // Workers outside Kubernetes register two more versions under the same name.
    let queue = format!("outside-{}", c.ns);
    let mut workers = Vec::new();
    for build in OUTSIDE {
        workers.push(outside_worker(&c, &deployment, build, &queue).await?);
    }
    eventually("outside versions registered", T, || async {
        let s = describe_soon(&temporal, &deployment).await?;
        Ok(OUTSIDE.iter().all(|b| s.version(b).is_some()).then_some(()))
    })
    .await?;
    let wf = pin_workflow(&c, &deployment, OUTSIDE[0], &queue).await?;
    eventually("the pinned workflow counted on its version", T, || async {
        let n = temporal
            .count_open_workflows(&deployment, OUTSIDE[0], false)
            .await?;
        Ok((n > 0).then_some(()))
    })
    .await?;
    for w in workers {
        w.stop().await?;
    }

    // Our own version superseded before it served: v2 waits for a human, v3 replaces it.
    c.apply_twd(name, "v2", json!({"strategy": "Manual"}), json!({}))
        .await?;
    let twd = c
        .wait_twd(name, "v2 waiting for promotion", T, |t| {
            condition_is(t, "Ready", "False", "WaitingForPromotion")
        })
        .await?;
    let v2 = target_build(&twd).context("v2 target")?;
    ensure!(v2 != v1, "v2 is a new build");
    c.apply_twd(name, "v3", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    c.wait_twd(name, "v3 Current", T, |t| {
        is_ready(t) && current_build(t).is_some_and(|b| b != v1 && b != v2)
    })
    .await?;
    let gone = eventually("v2's record deleted (superseded, Inactive)", T, || async {
        let s = describe_soon(&temporal, &deployment).await?;
        Ok(s.version(&v2).is_none().then_some(()))
    })
    .await;
    if let Err(e) = gone {
        let s = describe_soon(&temporal, &deployment).await?;
        let twd = c.get_twd(name).await?;
        let deployments: Vec<_> = c
            .deployments()
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .map(|d| (d.metadata.name, d.spec.replicas))
            .collect();
        anyhow::bail!(
            "{e:#}\nTemporal: {:?}\nstatus: {}\nDeployments: {deployments:?}",
            s.versions
                .iter()
                .map(|v| (&v.build_id, v.status))
                .collect::<Vec<_>>(),
            serde_json::to_string(&twd.status)?
        );
    }

    let s = describe_soon(&temporal, &deployment).await?;
    for build in OUTSIDE {
        ensure!(
            s.version(build).is_some(),
            "outside versions survive: {build}'s record was deleted ({:?})",
            s.versions.iter().map(|v| &v.build_id).collect::<Vec<_>>()
        );
    }
    let twd = c.get_twd(name).await?;
    let retired = twd
        .status
        .as_ref()
        .map(|s| s.retired_versions.clone())
        .unwrap_or_default();
    ensure!(
        OUTSIDE.iter().all(|b| !retired.iter().any(|r| r == b)),
        "outside versions in status.retiredVersions: {retired:?}"
    );
    c.temporal_cli(&[
        "workflow",
        "terminate",
        "--workflow-id",
        &wf,
        "--reason",
        "test done",
    ])
    .await?;
    Ok(())
}
