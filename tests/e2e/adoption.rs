//! Adopting an existing unversioned worker Deployment (`spec.adopt`, issue 51): a plain
//! Deployment of unversioned workers with workflows in flight; the TWD adopts it, its first
//! build ramps from those workers and is promoted; every workflow completes; the old
//! Deployment reaches zero only once the visibility check says no running workflow on the
//! task queue is still unversioned; no workflow task fails for lack of a worker. Then a
//! GitOps-style scale-up is undone and `afterAdoption: Delete` deletes it.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::api::adopt::AdoptionPhase;

use crate::old_versions::{finish_workflow, start_waiting_workflow};
use crate::support::*;

const T: Duration = Duration::from_secs(180);
const LEGACY: &str = "legacy";

/// The Deployment a team runs before adopting worker versioning: unversioned workers on the
/// case's task queue, configured by hand.
fn legacy_deployment(c: &Case) -> Value {
    let env = json!([
        {"name": "TEMPORAL_ADDRESS", "value": c.env.temporal_address},
        {"name": "TEMPORAL_NAMESPACE", "value": c.temporal_ns},
        {"name": "TEMPORAL_TASK_QUEUE", "value": c.task_queue},
        {"name": test_harness::worker::ENV_UNVERSIONED, "value": "true"},
    ]);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": LEGACY},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": LEGACY}},
            "template": {
                "metadata": {"labels": {"app": LEGACY}},
                "spec": {"containers": [{
                    "name": "worker",
                    "image": test_harness::manifests::worker_image("legacy"),
                    "env": env,
                }]},
            },
        },
    })
}

fn adoption(
    t: &TemporalWorkerDeployment,
) -> Option<&temporal_worker_controller::api::adopt::AdoptionStatus> {
    t.status.as_ref()?.adoption.as_ref()
}

fn phase_is(t: &TemporalWorkerDeployment, phase: AdoptionPhase) -> bool {
    adoption(t).is_some_and(|a| a.phase == phase)
}

/// Applies [`legacy_deployment`] server-side, forcing its fields as a GitOps tool's sync does.
async fn apply_legacy(c: &Case) -> Result<()> {
    let params = kube::api::PatchParams::apply("e2e-gitops").force();
    c.deployments()
        .patch(
            LEGACY,
            &params,
            &kube::api::Patch::Apply(&legacy_deployment(c)),
        )
        .await?;
    Ok(())
}

async fn legacy_replicas(c: &Case) -> Result<Option<i32>> {
    Ok(c.deployments().get(LEGACY).await?.spec.replicas)
}

/// `temporal workflow describe` as JSON.
async fn describe(c: &Case, id: &str) -> Result<Value> {
    let out = c
        .temporal_cli(&["workflow", "describe", "--workflow-id", id, "-o", "json"])
        .await?;
    Ok(serde_json::from_str(&out)?)
}

fn status_of(described: &Value) -> String {
    described["workflowExecutionInfo"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Waits until the workflow has completed its first workflow task (on an unversioned worker:
/// nothing is versioned yet), so that it is in flight there.
async fn wait_started_on_a_worker(c: &Case, id: &str) -> Result<()> {
    eventually(&format!("{id} ran its first workflow task"), T, || async {
        let d = describe(c, id).await?;
        let length: u64 = d["workflowExecutionInfo"]["historyLength"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .or_else(|| d["workflowExecutionInfo"]["historyLength"].as_u64())
            .unwrap_or(0);
        Ok((length >= 4).then_some(()))
    })
    .await
}

/// Waits until the workflow completed, and checks that none of its workflow tasks failed or
/// timed out (a task sent where no worker took it).
async fn wait_completed_cleanly(c: &Case, id: &str) -> Result<()> {
    eventually(&format!("{id} completed"), T, || async {
        let s = status_of(&describe(c, id).await?);
        ensure!(
            !s.contains("FAILED") && !s.contains("TIMED_OUT") && !s.contains("TERMINATED"),
            "{id}: {s}"
        );
        Ok(s.contains("COMPLETED").then_some(()))
    })
    .await?;
    let history = c
        .temporal_cli(&["workflow", "show", "--workflow-id", id, "-o", "json"])
        .await?;
    for bad in [
        "WORKFLOW_TASK_FAILED",
        "WORKFLOW_TASK_TIMED_OUT",
        "WorkflowTaskFailed",
        "WorkflowTaskTimedOut",
    ] {
        ensure!(
            !history.contains(bad),
            "{id}: a workflow task {bad}: {history}"
        );
    }
    Ok(())
}

async fn start_hello(c: &Case, id: &str) -> Result<()> {
    c.temporal_cli(&[
        "workflow",
        "start",
        "--type",
        "hello",
        "--task-queue",
        &c.task_queue,
        "--workflow-id",
        id,
    ])
    .await?;
    Ok(())
}

/// The legacy Deployment Ready, with three `wait` workflows in flight on its workers.
async fn legacy_with_workflows_in_flight(c: &Case) -> Result<Vec<String>> {
    apply_legacy(c).await?;
    eventually("the unversioned worker Ready", T, || async {
        let d = c.deployments().get(LEGACY).await?;
        Ok((d.status.and_then(|s| s.ready_replicas) == Some(1)).then_some(()))
    })
    .await?;
    // Workflows in flight on the unversioned workers.
    let waiting: Vec<String> = (0..3).map(|i| format!("in-flight-{i}-{}", c.ns)).collect();
    for id in &waiting {
        start_waiting_workflow(c, id).await?;
        wait_started_on_a_worker(c, id).await?;
    }
    let queues = vec![c.task_queue.clone()];
    ensure!(
        c.temporal().await?.count_open_unversioned(&queues).await? == 3,
        "three unversioned workflows open"
    );
    Ok(waiting)
}

/// The TWD adopts it; its first build ramps from the unversioned workers and is promoted while
/// the Deployment is kept for the workflows still unversioned.
async fn adopt_ramp_and_promote(c: &Case) -> Result<()> {
    // The TWD adopts it; its first build ramps from the unversioned workers.
    let rollout = json!({"strategy": "Progressive", "steps": [{"rampPercentage": 50, "pauseDuration": "8s"}]});
    c.apply_twd(
        "orders",
        "v1",
        rollout,
        json!({"adopt": {"deploymentName": LEGACY}}),
    )
    .await?;
    c.wait_twd(
        "orders",
        "ramping at 50 % from the unversioned workers",
        T,
        |t| {
            t.status
                .as_ref()
                .and_then(|s| s.target_version.as_ref())
                .and_then(|v| v.ramp_percentage)
                == Some(50.0)
                && phase_is(t, AdoptionPhase::Waiting)
        },
    )
    .await?;
    let during_ramp: Vec<String> = (0..4).map(|i| format!("ramp-{i}-{}", c.ns)).collect();
    for id in &during_ramp {
        start_hello(c, id).await?;
    }
    let twd = c
        .wait_twd(
            "orders",
            "promoted, the adopted Deployment kept for its workflows",
            T,
            |t| {
                is_ready(t)
                    && phase_is(t, AdoptionPhase::Draining)
                    && adoption(t).and_then(|a| a.open_unversioned_workflows) == Some(3)
            },
        )
        .await?;
    ensure!(
        current_build(&twd).is_some(),
        "a versioned build is Current"
    );
    ensure!(
        legacy_replicas(c).await? == Some(1),
        "kept while unversioned workflows run"
    );
    for id in &during_ramp {
        wait_completed_cleanly(c, id).await?;
    }

    Ok(())
}

/// Each in-flight workflow moves to the Current version at its next task and completes; only
/// then is the Deployment scaled to zero.
async fn finish_and_scale_down(c: &Case, waiting: &[String]) -> Result<()> {
    let temporal = c.temporal().await?;
    let queues = vec![c.task_queue.clone()];
    for id in waiting {
        finish_workflow(c, id).await?;
    }
    for id in waiting {
        wait_completed_cleanly(c, id).await?;
    }
    eventually("the adopted Deployment at zero", T, || async {
        if legacy_replicas(c).await? != Some(0) {
            return Ok(None);
        }
        // At zero only once nothing on the queue is unversioned, as the controller counted.
        ensure!(
            temporal.count_open_unversioned(&queues).await? == 0,
            "scaled down with unversioned workflows open"
        );
        Ok(Some(()))
    })
    .await?;
    let twd = c
        .wait_twd(
            "orders",
            "status: ScaledToZero after a zero count",
            T,
            |t| phase_is(t, AdoptionPhase::ScaledToZero),
        )
        .await?;
    ensure!(
        adoption(&twd).and_then(|a| a.open_unversioned_workflows) == Some(0),
        "{:?}",
        adoption(&twd)
    );
    let events = c.events_of("orders").await?;
    ensure!(
        events
            .iter()
            .any(|e| e.reason == "AdoptedDeploymentScaledDown"),
        "an AdoptedDeploymentScaledDown event: {events:?}"
    );

    Ok(())
}

/// A GitOps re-sync restoring `replicas: 1` is undone; `afterAdoption: Delete` deletes it.
async fn resync_then_delete(c: &Case) -> Result<()> {
    // A GitOps re-sync restoring `replicas: 1` is undone.
    apply_legacy(c).await?;
    eventually("scaled up again, then back to zero", T, || async {
        let twd = c.get_twd("orders").await?;
        let again = adoption(&twd).is_some_and(|a| a.message.contains("Scaled up again"))
            || c.events_of("orders")
                .await?
                .iter()
                .any(|e| e.note.contains("Scaled up again"));
        Ok((again && legacy_replicas(c).await? == Some(0)).then_some(()))
    })
    .await?;

    // `afterAdoption: Delete` deletes it.
    c.apply_twd("orders", "v1", json!({"strategy": "Progressive", "steps": [{"rampPercentage": 50, "pauseDuration": "8s"}]}),
        json!({"adopt": {"deploymentName": LEGACY, "afterAdoption": "Delete"}}))
        .await?;
    eventually("the adopted Deployment deleted", T, || async {
        Ok(c.deployments()
            .get_opt(LEGACY)
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    c.wait_twd("orders", "status: Deleted", T, |t| {
        phase_is(t, AdoptionPhase::Deleted)
    })
    .await
    .context("Deleted reported")?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unversioned_deployment_is_adopted_ramped_from_and_scaled_down_once_nothing_can_reach_it()
-> Result<()> {
    let c = case("adopt").await?;
    let waiting = legacy_with_workflows_in_flight(&c).await?;
    adopt_ramp_and_promote(&c).await?;
    finish_and_scale_down(&c, &waiting).await?;
    resync_then_delete(&c).await
}
