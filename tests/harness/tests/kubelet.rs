//! The kubelet stand-in runs real workers for versioned Deployments in the emulator, reports
//! readiness through `/status`, rolls workers on a template change and stops them on scale-down,
//! pause and deletion.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube_emulator::{DeploymentMode, Emulator, EmulatorOptions};
use serde_json::json;
use test_harness::kubelet::Kubelet;
use test_harness::{observe, temporal_server};

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id() % 100_000,
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

const DEADLINE: Duration = Duration::from_secs(60);

fn deployment(
    name: &str,
    build_id: &str,
    replicas: i32,
    env: serde_json::Value,
) -> Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"temporal.io/build-id": build_id}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name, "temporal.io/build-id": build_id}},
            "template": {
                "metadata": {"labels": {"app": name, "temporal.io/build-id": build_id}},
                "spec": {"containers": [{"name": "worker", "image": "registry.example/worker:1", "env": env}]}
            }
        }
    }))?)
}

fn worker_env(
    address: &str,
    ns: &str,
    deployment: &str,
    build_id: &str,
    tq: &str,
) -> serde_json::Value {
    json!([
        {"name": "TEMPORAL_ADDRESS", "value": address},
        {"name": "TEMPORAL_NAMESPACE", "value": ns},
        {"name": "TEMPORAL_DEPLOYMENT_NAME", "value": deployment},
        {"name": "TEMPORAL_WORKER_BUILD_ID", "value": build_id},
        {"name": "TEMPORAL_TASK_QUEUE", "value": tq},
    ])
}

/// Polls until `pred` holds for the Deployment and the kubelet; the last object is in the error.
async fn wait_until(
    api: &Api<Deployment>,
    name: &str,
    what: &str,
    mut pred: impl FnMut(&Deployment) -> bool,
) -> Result<Deployment> {
    let start = Instant::now();
    loop {
        let d = api.get(name).await?;
        if pred(&d) {
            return Ok(d);
        }
        if start.elapsed() > DEADLINE {
            bail!("timed out waiting for {what}; status: {:?}", d.status);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ready(d: &Deployment) -> i32 {
    d.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

fn updated(d: &Deployment) -> i32 {
    d.status
        .as_ref()
        .and_then(|s| s.updated_replicas)
        .unwrap_or(0)
}

fn observed_current(d: &Deployment) -> bool {
    d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
}

fn available(d: &Deployment) -> Option<(String, String)> {
    let c = d
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Available")?;
    Some((
        c.status.clone(),
        c.last_transition_time
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_runs_reports_rolls_and_stops_workers() -> Result<()> {
    let server = temporal_server::shared().await?;
    let emu = Emulator::start(EmulatorOptions {
        crd_dir: None,
        deployment_mode: DeploymentMode::Manual,
    })
    .await?;
    let client = emu.client().await?;
    let kubelet = Kubelet::start(client.clone()).await?;

    let k8s_ns = unique("kubelet");
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": k8s_ns}}))?,
        )
        .await?;
    let temporal_ns = unique("harness-kubelet");
    server.create_namespace(&temporal_ns).await?;
    let conn = server.connect("harness-kubelet-test").await?;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &k8s_ns);

    // Two replicas become two real pollers, and the status says so.
    let name = "worker-b1";
    let temporal_deployment = format!("{k8s_ns}/worker");
    let tq1 = unique("tq");
    let t = Instant::now();
    api.create(
        &PostParams::default(),
        &deployment(
            name,
            "b1",
            2,
            worker_env(
                &server.address(),
                &temporal_ns,
                &temporal_deployment,
                "b1",
                &tq1,
            ),
        )?,
    )
    .await?;
    let d = wait_until(&api, name, "2 ready replicas", |d| {
        ready(d) == 2 && observed_current(d)
    })
    .await?;
    eprintln!("2 replicas ready in {:?}", t.elapsed());
    assert_eq!(kubelet.running_workers(&k8s_ns, name), 2);
    let status = d.status.clone().unwrap_or_default();
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.available_replicas
        ),
        (Some(2), Some(2), Some(2))
    );
    let (avail, first_transition) = available(&d).unwrap_or_default();
    assert_eq!(avail, "True");
    let configs = kubelet.worker_configs(&k8s_ns, name);
    assert_eq!(configs.len(), 2);
    assert_ne!(
        configs[0].identity, configs[1].identity,
        "each replica has its own identity"
    );
    for cfg in &configs {
        assert_eq!(
            (cfg.build_id.as_str(), cfg.task_queue.as_str()),
            ("b1", tq1.as_str())
        );
        observe::wait_poller(
            &conn,
            &temporal_ns,
            &tq1,
            &temporal_deployment,
            "b1",
            Some(&cfg.identity),
            DEADLINE,
        )
        .await?;
    }
    observe::wait_version_listed(&conn, &temporal_ns, &temporal_deployment, "b1", DEADLINE).await?;

    // A template change rolls both workers onto the new env without losing availability.
    let tq2 = unique("tq");
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "worker", "image": "registry.example/worker:1",
        "env": worker_env(&server.address(), &temporal_ns, &temporal_deployment, "b1", &tq2)}]}}}});
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    // The emulator's Deployment controller also reports counts for a new generation, so wait
    // on the kubelet's own view first, then on the status it writes.
    let start = Instant::now();
    let configs = loop {
        let configs = kubelet.worker_configs(&k8s_ns, name);
        if configs.len() == 2 && configs.iter().all(|c| c.task_queue == tq2) {
            break configs;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "workers not rolled to the new env: {configs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("rolled 2 workers in {:?}", start.elapsed());
    let d = wait_until(&api, name, "rolled status", |d| {
        observed_current(d)
            && updated(d) == 2
            && ready(d) == 2
            && d.status.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    assert_eq!(kubelet.running_workers(&k8s_ns, name), 2);
    for cfg in &configs {
        observe::wait_poller(
            &conn,
            &temporal_ns,
            &tq2,
            &temporal_deployment,
            "b1",
            Some(&cfg.identity),
            DEADLINE,
        )
        .await?;
    }
    assert_eq!(
        available(&d),
        Some(("True".to_string(), first_transition.clone())),
        "no flip, no new lastTransitionTime"
    );

    // Scale to zero stops every worker and reports zero ready.
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await?;
    let d = wait_until(&api, name, "scaled to zero", |d| {
        observed_current(d) && ready(d) == 0
    })
    .await?;
    assert_eq!(kubelet.running_workers(&k8s_ns, name), 0);
    assert_eq!(d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0), 0);

    // A paused Deployment gets no workers and no status until it is resumed.
    let paused = "worker-b2";
    kubelet.set_paused(&k8s_ns, paused, true);
    api.create(
        &PostParams::default(),
        &deployment(
            paused,
            "b2",
            1,
            worker_env(
                &server.address(),
                &temporal_ns,
                &temporal_deployment,
                "b2",
                &tq2,
            ),
        )?,
    )
    .await?;
    // The kubelet handles Deployments independently; once a later one is served, the paused one
    // has been seen too.
    let witness = "worker-b3";
    api.create(
        &PostParams::default(),
        &deployment(
            witness,
            "b3",
            1,
            worker_env(
                &server.address(),
                &temporal_ns,
                &temporal_deployment,
                "b3",
                &tq2,
            ),
        )?,
    )
    .await?;
    wait_until(&api, witness, "witness ready", |d| ready(d) == 1).await?;
    let d = api.get(paused).await?;
    assert_eq!(kubelet.running_workers(&k8s_ns, paused), 0);
    assert_eq!(
        ready(&d),
        0,
        "paused Deployment reported ready: {:?}",
        d.status
    );
    kubelet.set_paused(&k8s_ns, paused, false);
    wait_until(&api, paused, "resumed Deployment ready", |d| {
        ready(d) == 1 && observed_current(d)
    })
    .await?;
    assert_eq!(kubelet.running_workers(&k8s_ns, paused), 1);

    // Deleting a Deployment stops its workers.
    api.delete(witness, &DeleteParams::default()).await?;
    let start = Instant::now();
    while kubelet.running_workers(&k8s_ns, witness) != 0 {
        assert!(
            start.elapsed() < DEADLINE,
            "workers of a deleted Deployment still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    kubelet.shutdown().await;
    Ok(())
}
