//! TemporalWorkerOwnedResource cost on the real control plane: 50 TWORs × 10 live versions.
//! Prints the pure render time of the 500 copies, the wall time of a first pass (render +
//! server-side apply of every copy + metadata and status writes), the time of a second,
//! unchanged pass, and the API writes that second pass made, read from the API server's audit
//! log (goal: 0).
//!
//! Run: `cargo bench --bench owned_resources` (add `--profile dev` to skip the optimised build).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::{TemporalWorkerDeployment, TemporalWorkerOwnedResource};
use temporal_worker_controller::owned::{self, OwnedContext, OwnedSettings, render, validate};
use temporal_worker_controller::reconciler::services::Services;
use test_harness::control_plane::{self, AuditEvent, ControlPlane};

const TWORS: usize = 50;
const VERSIONS: usize = 10;
const NS: &str = "bench-owned";
const WORKER: &str = "worker";

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn twor_object(i: usize) -> Value {
    if i.is_multiple_of(2) {
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"annotations": {"build": "{{ .BuildID }}"}},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": null}}})
    } else {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "spec": {"scaleTargetRef": {}, "minReplicas": 1, "maxReplicas": 3}})
    }
}

async fn setup(client: &kube::Client) -> Res<()> {
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
    )
    .await?;
    let twds: Api<TemporalWorkerDeployment> =
        TemporalWorkerDeployment::api(client.clone(), NS, KindSet::Seed);
    twds.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": WORKER},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "w", "image": "img"}]}},
                 "rollout": {"strategy": "AllAtOnce"},
                 "workerOptions": {"connectionRef": {"name": "prod"}, "temporalNamespace": "default"}}
    }))?)
    .await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    for v in 0..VERSIONS {
        let labels =
            json!({"temporal.io/deployment-name": WORKER, "temporal.io/build-id": format!("b{v}")});
        deployments.create(&PostParams::default(), &serde_json::from_value(json!({
            "metadata": {"name": format!("{WORKER}-b{v}"), "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "w", "image": "img"}]}}}
        }))?)
        .await?;
    }
    let twors: Api<TemporalWorkerOwnedResource> =
        TemporalWorkerOwnedResource::api(client.clone(), NS, KindSet::Seed);
    for i in 0..TWORS {
        twors
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": format!("r{i}")},
                    "spec": {"workerRef": {"name": WORKER}, "object": twor_object(i)}
                }))?,
            )
            .await?;
    }
    Ok(())
}

/// One pass of the TWOR controller over every TWOR, as fresh from the API server.
async fn pass(client: &kube::Client, ctx: &Arc<OwnedContext>) -> Res<Duration> {
    let twors: Api<TemporalWorkerOwnedResource> =
        TemporalWorkerOwnedResource::api(client.clone(), NS, KindSet::Seed);
    let list = twors.list(&Default::default()).await?.items;
    let start = Instant::now();
    for t in list {
        owned::reconcile(Arc::new(t), ctx.clone()).await?;
    }
    Ok(start.elapsed())
}

fn render_only() -> Res<Duration> {
    let selector: BTreeMap<String, String> = BTreeMap::from([("a".into(), "b".into())]);
    let start = Instant::now();
    for i in 0..TWORS {
        let object = twor_object(i);
        for v in 0..VERSIONS {
            let build = format!("b{v}");
            let name = format!("{WORKER}-{build}");
            let version = render::Version {
                twd_name: WORKER,
                namespace: NS,
                deployment_name: &name,
                deployment_uid: "uid",
                build_id: &build,
                selector_labels: &selector,
                temporal_namespace: "default",
                task_queue: None,
            };
            render::render(
                &format!("r{i}"),
                &object,
                &version,
                validate::DEFAULT_ALLOWED_KINDS,
            )?;
        }
    }
    Ok(start.elapsed())
}

/// Creates ConfigMap `name` and waits until the audit log shows it: every request completed
/// before it is in the log by then.
async fn marker(plane: &ControlPlane, client: &kube::Client, name: &str) -> Res<usize> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}}))?,
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = plane.audit_events()?;
        if let Some(i) = events.iter().position(|e| is_marker(e, name)) {
            return Ok(i);
        }
        if Instant::now() > deadline {
            return Err(format!("marker {name} not in the audit log").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn is_marker(e: &AuditEvent, name: &str) -> bool {
    e.verb == "create" && e.object_ref.as_ref().is_some_and(|o| o.name == name)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let (plane, client) = control_plane::shared_with_crds().await?;
    setup(&client).await?;
    let (_leader_tx, leader) = tokio::sync::watch::channel(true);
    let pool = Arc::new(temporal_worker_controller::temporal::ClientPool::default());
    let metrics = Arc::new(temporal_worker_controller::metrics::Metrics::new());
    let events = temporal_worker_controller::events::EventSink::new(
        client.clone(),
        None,
        Arc::default(),
        metrics.clone(),
    );
    let services = Services::new(
        client.clone(),
        leader,
        metrics,
        events,
        pool,
        "bench".into(),
    );
    let ctx = Arc::new(OwnedContext::new(
        Arc::new(services),
        OwnedSettings::default(),
    ));
    println!(
        "render only: {} copies in {:?}",
        TWORS * VERSIONS,
        render_only()?
    );
    let first = pass(&client, &ctx).await?;
    println!(
        "first pass (render + apply of {} copies, metadata + status writes): {first:?}",
        TWORS * VERSIONS
    );
    let twors: Api<TemporalWorkerOwnedResource> =
        TemporalWorkerOwnedResource::api(client.clone(), NS, KindSet::Seed);
    let ready = twors
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|t| {
            t.status.as_ref().is_some_and(|s| {
                s.versions.iter().filter(|v| v.applied).count() == VERSIONS
                    && s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .count();
    println!("TWORs Ready with all {VERSIONS} versions applied: {ready}/{TWORS}");
    if ready != TWORS {
        return Err("the first pass did not apply every copy".into());
    }
    let before = marker(plane, &client, "marker-before").await?;
    let second = pass(&client, &ctx).await?;
    let after = marker(plane, &client, "marker-after").await?;
    let events = plane.audit_events()?;
    let user = events[before].acting_user().to_string();
    let writes: Vec<String> = events[before + 1..after]
        .iter()
        .filter(|e| e.acting_user() == user && e.is_write())
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect();
    println!(
        "second, unchanged pass: {second:?}; API writes: {}",
        writes.len()
    );
    for w in writes.iter().take(10) {
        println!("  {w}");
    }
    plane.stop();
    if writes.is_empty() {
        Ok(())
    } else {
        Err("the unchanged pass wrote to the API".into())
    }
}
