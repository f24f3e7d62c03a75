//! `kubectl delete namespace` overlapping a controller restart leaves nothing in Temporal
//! (issue 26 item 8). Every TWD of the namespace is deleted at once; the first to finish its
//! cleanup must not take the Connection from the others (nor may the Connection janitor, from a
//! cache that has not listed the few hundred unrelated TWDs beside them), and a TWD whose
//! Connection is gone keeps its finalizer instead of skipping its Temporal cleanup. Real control
//! plane (its namespace controller), real Temporal, real workers; this binary runs its own
//! controllers (stopped and started).
//!
//! Which TWD finishes first is made certain: `idle` has nothing in Temporal and finishes at
//! once, while a stray worker outside Kubernetes keeps polling `orders`' version (Temporal
//! refuses to delete a version it sees pollers for) until `idle` is gone.

#[path = "common/controller.rs"]
mod controller;

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::run::Running;
use test_harness::manifests;
use test_harness::worker::{self, WorkerConfig};
use test_harness::world::{self, World, wait};

const IDENTITY: &str = "twc-cleanup-restart-test";
/// Unrelated TWDs in another namespace: they make the first list slow enough that a decision
/// taken before it (the bug) sees an empty cache.
const CROWD: usize = 300;
/// Namespace deletion: stopping the workers, Temporal forgetting their pollers (5 s here) and
/// the cleanup retries (5 s apart).
const DELETION_DEADLINE: Duration = Duration::from_secs(240);

async fn controller(client: &kube::Client, namespaces: &[&str]) -> Result<Running> {
    controller::start(
        client.clone(),
        &controller::watching(&namespaces.join(","), IDENTITY),
    )
    .await
}

fn serving(name: &str, temporal_ns: &str) -> Value {
    manifests::twd(name)
        .replicas(1)
        .task_queue(name)
        .temporal_namespace(temporal_ns)
        .rollout(json!({"strategy": "AllAtOnce"}))
        .build()
}

/// A TWD whose worker never starts (its env names a Secret that does not exist): it has our
/// finalizer and a Deployment but nothing in Temporal, so its cleanup is done at once, while
/// the serving ones still wait for Temporal to forget their pollers.
fn never_polls(temporal_ns: &str) -> Value {
    manifests::twd("idle")
        .replicas(1)
        .rollout(json!({"strategy": "AllAtOnce"}))
        .temporal_namespace(temporal_ns)
        .container(json!({
            "name": "worker",
            "image": manifests::worker_image("v1"),
            "env": [{"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "token"}}}],
        }))
        .build()
}

async fn crowd(client: &kube::Client, ns: &str) -> Result<()> {
    world::ensure_namespace(client, ns).await?;
    for i in 0..CROWD {
        let twd = manifests::twd(&format!("bystander-{i}"))
            .replicas(1)
            .connection("elsewhere")
            .rollout(json!({"strategy": "AllAtOnce"}))
            .build();
        world::apply(client, ns, "cleanup-restart-test", twd).await?;
    }
    Ok(())
}

/// The worker deployments Temporal lists in `temporal_ns` whose name is in namespace `ns`.
async fn left_in_temporal(address: &str, temporal_ns: &str, ns: &str) -> Result<Vec<String>> {
    let out = tokio::process::Command::new("temporal")
        .args(["worker", "deployment", "list", "-o", "json"])
        .args(["--address", address, "--namespace", temporal_ns])
        .output()
        .await?;
    ensure!(
        out.status.success(),
        "temporal worker deployment list: {out:?}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let listed: Value = if text.trim().is_empty() {
        json!([])
    } else {
        serde_json::from_str(&text).with_context(|| format!("parse {text}"))?
    };
    // Whatever the listing's shape: every string naming a worker deployment of `ns`.
    let mut names = Vec::new();
    strings_under(&listed, &format!("{ns}/"), &mut names);
    names.sort();
    names.dedup();
    Ok(names)
}

fn strings_under(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.starts_with(prefix) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| strings_under(i, prefix, out)),
        Value::Object(m) => m.values().for_each(|i| strings_under(i, prefix, out)),
        _ => {}
    }
}

/// A worker outside Kubernetes polling `build` of worker deployment `<ns>/<name>`.
async fn stray_worker(world: &World, name: &str, build: &str) -> Result<worker::WorkerHandle> {
    let env = [
        (worker::ENV_ADDRESS, world.address.clone()),
        (worker::ENV_NAMESPACE, world.temporal_ns.clone()),
        (worker::ENV_DEPLOYMENT_NAME, format!("{}/{name}", world.ns)),
        (worker::ENV_BUILD_ID, build.to_string()),
        (worker::ENV_TASK_QUEUE, name.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut cfg = WorkerConfig::from_env(&env)?;
    cfg.identity = format!("stray@{name}");
    let handle = worker::spawn(cfg)?;
    handle.wait_running(Duration::from_secs(60)).await?;
    Ok(handle)
}

async fn wait_deleted(api: &Api<TemporalWorkerDeployment>, name: &str) -> Result<()> {
    let start = Instant::now();
    while api.get_opt(name).await?.is_some() {
        ensure!(
            start.elapsed() < DELETION_DEADLINE,
            "TWD {name} still there after {DELETION_DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

async fn wait_gone(namespaces: &Api<Namespace>, ns: &str) -> Result<Duration> {
    let start = Instant::now();
    loop {
        match namespaces.get_opt(ns).await? {
            None => return Ok(start.elapsed()),
            Some(n) if start.elapsed() > DELETION_DEADLINE => bail!(
                "namespace {ns} still there after {DELETION_DEADLINE:?}: {:?}",
                n.status
            ),
            Some(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_during_namespace_deletion_leaves_nothing_in_temporal() -> Result<()> {
    let world = World::new("nsdel").await?;
    let (ns, temporal_ns) = (world.ns.clone(), world.temporal_ns.clone());
    let bystanders = format!("{ns}-crowd");
    crowd(&world.client, &bystanders).await?;
    let watched = [ns.as_str(), bystanders.as_str()];

    let first = controller(&world.client, &watched).await?;
    let api = TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed);
    for name in ["orders", "billing"] {
        world::apply(
            &world.client,
            &ns,
            "cleanup-restart-test",
            serving(name, &temporal_ns),
        )
        .await?;
    }
    world::apply(
        &world.client,
        &ns,
        "cleanup-restart-test",
        never_polls(&temporal_ns),
    )
    .await?;
    let mut builds = Vec::new();
    for name in ["orders", "billing"] {
        let t = wait(&api, name, "Current", |t| {
            t.status
                .as_ref()
                .is_some_and(|s| s.current_version.is_some())
        })
        .await?;
        let current = t
            .status
            .and_then(|s| s.current_version)
            .context("current")?;
        builds.push(current.build_id);
    }
    let stray = stray_worker(&world, "orders", &builds[0]).await?;
    wait(&api, "idle", "our finalizer", |t| {
        t.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty())
    })
    .await?;
    let before = left_in_temporal(&world.address, &temporal_ns, &ns).await?;
    ensure!(before.len() == 2, "in Temporal before deletion: {before:?}");

    // The restart overlaps the deletion: the old controller goes, the namespace is deleted,
    // and a new controller starts while the namespace controller is deleting its objects.
    first.stop().await;
    let namespaces: Api<Namespace> = Api::all(world.client.clone());
    namespaces.delete(&ns, &DeleteParams::default()).await?;
    let second = controller(&world.client, &watched).await?;
    // `idle` is done with its cleanup while `orders` still has to wait for Temporal.
    wait_deleted(&api, "idle").await?;
    stray.stop().await?;
    let took = wait_gone(&namespaces, &ns).await?;
    let left = left_in_temporal(&world.address, &temporal_ns, &ns).await?;
    println!(
        "namespace {ns} gone {took:?} after its deletion; {CROWD} bystanders; left in Temporal: {left:?}"
    );
    second.stop().await;
    let _ = namespaces
        .delete(&bystanders, &DeleteParams::default())
        .await;
    ensure!(left.is_empty(), "left in Temporal: {left:?}");
    Ok(())
}
