//! The upgrade nudge is sent once even when the controller restarts after sending it and the
//! record of it was lost (issue 17 item 3): a new controller asks again with the same batch job
//! ID, Temporal refuses the duplicate, and the workflow's history holds one signal. Real control
//! plane, real Temporal, real workers (kubelet stand-in); this binary runs its own controllers
//! (stopped and started), not the e2e suite's shared one.

#[path = "common/controller.rs"]
mod controller;

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::api::twd::DeprecatedVersion;

use temporal_worker_controller::run::Running;
use test_harness::manifests;
use test_harness::world::{T, World, wait};

const NAME: &str = "ledger";
const QUEUE: &str = "nudge";
const IDENTITY: &str = "twc-nudge-restart-test";

fn twd(tag: &str, temporal_ns: &str) -> Value {
    manifests::twd(NAME)
        .replicas(1)
        .tag(tag)
        .task_queue(QUEUE)
        .temporal_namespace(temporal_ns)
        .rollout(json!({"strategy": "AllAtOnce"}))
        .spec(json!({"sunset": {"upgradeSignal": "upgrade"}}))
        .build()
}

/// A controller watching only the world's namespace, acting as [`IDENTITY`].
async fn controller(world: &World) -> Result<Running> {
    controller::start(
        world.client.clone(),
        &controller::watching(&world.ns, IDENTITY),
    )
    .await
}

fn current(t: &TemporalWorkerDeployment) -> Option<String> {
    Some(
        t.status
            .as_ref()?
            .current_version
            .as_ref()?
            .build_id
            .clone(),
    )
}

fn old(t: &TemporalWorkerDeployment, build: &str) -> Option<DeprecatedVersion> {
    t.status
        .as_ref()?
        .deprecated_versions
        .iter()
        .find(|d| d.version.build_id == build)
        .cloned()
}

async fn cli(address: &str, ns: &str, args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::new("temporal")
        .args(args)
        .args(["--address", address, "--namespace", ns])
        .output()
        .await?;
    ensure!(out.status.success(), "temporal {args:?}: {out:?}");
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `WorkflowExecutionSignaled` events in the workflow's history.
async fn signals(address: &str, ns: &str, wf: &str) -> Result<usize> {
    let out = cli(
        address,
        ns,
        &["workflow", "show", "--workflow-id", wf, "-o", "json"],
    )
    .await?;
    let history: Value = serde_json::from_str(&out)?;
    Ok(history["events"].as_array().map_or(0, |events| {
        events
            .iter()
            .filter(|e| {
                e["eventType"]
                    .as_str()
                    .is_some_and(|t| t.contains("SIGNALED"))
            })
            .count()
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_nudge_is_sent_once_across_a_restart_that_lost_its_record() -> Result<()> {
    let world = World::new("nudge").await?;
    let (ns, temporal_ns, address) = (
        world.ns.clone(),
        world.temporal_ns.clone(),
        world.address.clone(),
    );
    let ssa = PatchParams::apply("nudge-test").force();
    let api = TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed);
    let first = controller(&world).await?;
    api.patch(NAME, &ssa, &Patch::Apply(twd("v1", &temporal_ns)))
        .await?;
    let v1 =
        current(&wait(&api, NAME, "v1 Current", |t| current(t).is_some()).await?).context("v1")?;

    // A `wait` workflow ignores the nudge, so v1 keeps draining across the restart.
    let wf = format!("nudged-{ns}");
    start_a_wait_workflow_on(&address, &temporal_ns, &wf, &v1).await?;
    api.patch(NAME, &ssa, &Patch::Apply(twd("v2", &temporal_ns)))
        .await?;
    let signalled = wait(&api, NAME, "v1's pinned workflows signalled", |t| {
        old(t, &v1).is_some_and(|d| d.upgrade_signalled_at.is_some())
    })
    .await?;
    ensure!(signals(&address, &temporal_ns, &wf).await? == 1);

    // The controller goes away, and the record of the signal with it (as if the status write
    // after the batch had failed).
    first.stop().await;
    lose_the_signal_record(&api, signalled).await?;

    // A new controller sees v1 draining, unsignalled: it asks again with the same job ID,
    // Temporal refuses the duplicate, and it records the signal as sent.
    let second = controller(&world).await?;
    wait(&api, NAME, "the new controller recorded the signal", |t| {
        old(t, &v1).is_some_and(|d| d.upgrade_signalled_at.is_some())
    })
    .await?;
    let n = signals(&address, &temporal_ns, &wf).await?;
    println!("signals in the pinned workflow's history after the restart: {n}");
    ensure!(n == 1, "the pinned workflow was signalled {n} times");
    second.stop().await;
    Ok(())
}

/// Starts `wait` workflow `wf` and waits until it runs on build `v1`.
async fn start_a_wait_workflow_on(
    address: &str,
    temporal_ns: &str,
    wf: &str,
    v1: &str,
) -> Result<()> {
    cli(
        address,
        temporal_ns,
        &[
            "workflow",
            "start",
            "--type",
            "wait",
            "--task-queue",
            QUEUE,
            "--workflow-id",
            wf,
        ],
    )
    .await?;
    let deadline = Instant::now() + T;
    loop {
        let out = cli(
            address,
            temporal_ns,
            &["workflow", "describe", "--workflow-id", wf, "-o", "json"],
        )
        .await?;
        let d: Value = serde_json::from_str(&out)?;
        let build = d.pointer("/workflowExecutionInfo/versioningInfo/deploymentVersion/buildId");
        if build.and_then(Value::as_str) == Some(v1) {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the workflow never ran on v1: {d}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Clears the controller's record that it signalled v1's pinned workflows.
async fn lose_the_signal_record(
    api: &kube::Api<TemporalWorkerDeployment>,
    signalled: TemporalWorkerDeployment,
) -> Result<()> {
    let mut lost = signalled;
    if let Some(status) = lost.status.as_mut() {
        for d in &mut status.deprecated_versions {
            d.upgrade_signalled_at = None;
        }
    }
    api.replace_status(NAME, &PostParams::default(), &lost)
        .await?;
    Ok(())
}
