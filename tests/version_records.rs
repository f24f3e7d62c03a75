//! Temporal caps versions per worker deployment (`matching.maxVersionsInDeployment`, lowered
//! to 3 here); the controller deletes the Temporal record of an old version once its Deployment
//! is gone (issue 26 item 4). More rollouts than the cap: every one completes, and Temporal ends
//! up listing only the versions that still have a Deployment, with a `VersionRecordDeleted`
//! event and the `version_record_deletions_total{outcome="deleted"}` counter for each. Without
//! the deletion, Temporal keeps the records up to its cap (3). Own dev server (the cap is
//! global), real control plane, real workers.

#[path = "common/controller.rs"]
mod controller;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use test_harness::world::{World, wait};
use test_harness::{manifests, temporal_server};

const CAP: &[&str] = &["matching.maxVersionsInDeployment=3"];
const ROLLOUTS: usize = 6;
const NAME: &str = "ledger";

fn twd(tag: &str, temporal_ns: &str) -> Value {
    manifests::twd(NAME)
        .replicas(1)
        .tag(tag)
        .task_queue("records")
        .temporal_namespace(temporal_ns)
        .rollout(json!({"strategy": "AllAtOnce"}))
        .sunset("1s", "1s")
        .build()
}

fn current(t: &TemporalWorkerDeployment) -> Option<String> {
    let s = t.status.as_ref()?;
    let current = s.current_version.as_ref()?.build_id.clone();
    (s.target_version.as_ref()?.version.build_id == current).then_some(current)
}

fn version_count(t: &TemporalWorkerDeployment) -> i32 {
    t.status.as_ref().map_or(0, |s| s.version_count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_rollouts_than_the_version_cap_all_complete_and_old_records_go() -> Result<()> {
    temporal_server::shared_with(CAP).await?;
    let world = World::new("vcap").await?;
    let running = controller::start(world.client.clone(), &{
        let mut flags = controller::watching(&world.ns, "twc-version-records-test");
        // A version Current within the rollback window keeps its record (going back to it
        // is a rollback); the test's rollouts are seconds apart.
        flags.push("--rollback-window=5s".into());
        flags
    })
    .await?;
    let api = TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed);
    let mut seen: Vec<String> = Vec::new();
    for k in 1..=ROLLOUTS {
        let tag = format!("v{k}");
        test_harness::world::apply(
            &world.client,
            &world.ns,
            "records-test",
            twd(&tag, &world.temporal_ns),
        )
        .await?;
        let t = wait(&api, NAME, &format!("rollout {k} Current"), |t| {
            current(t).is_some_and(|c| !seen.contains(&c))
        })
        .await?;
        let build = current(&t).context("current")?;
        println!(
            "rollout {k}: {build} Current; Temporal lists {} versions",
            version_count(&t)
        );
        seen.push(build);
    }
    // Old versions' Deployments go after the sunset delays, then their records.
    let t = wait(&api, NAME, "only live versions left in Temporal", |t| {
        version_count(t) <= 1
    })
    .await?;
    let events: Api<Event> = Api::namespaced(world.client.clone(), &world.ns);
    let deleted = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("VersionRecordDeleted"))
        .count();
    let (_, metrics) =
        test_harness::loopback_http::get(running.http_addr, "/metrics", "text/plain", None).await?;
    let counted: f64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "temporal_worker_controller_version_record_deletions_total{outcome=\"deleted\"} ",
            )
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0);
    println!(
        "after {ROLLOUTS} rollouts (cap 3): Temporal lists {} version(s); {deleted} VersionRecordDeleted event(s); counter {counted}",
        version_count(&t)
    );
    // The server deletes a version itself when a new one arrives at its cap, so only the
    // versions beyond the cap are certainly the controller's.
    ensure!(
        deleted >= ROLLOUTS - 3,
        "{deleted} VersionRecordDeleted events"
    );
    ensure!(
        counted >= deleted as f64,
        "counter {counted}, events {deleted}"
    );
    running.stop().await;
    Ok(())
}
