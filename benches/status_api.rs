//! Status API and /metrics cost with 1,000 TemporalWorkerDeployments in the store.
//! Plain `main` (harness = false): prints p50/p99 per endpoint over loopback HTTP/1.1 with a
//! keep-alive client, and the time to encode /metrics.
//!
//! Run: `cargo bench --bench status_api` (add `--profile dev` to skip the optimised build;
//! numbers are then an upper bound).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde_json::json;
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::http::{self, AppState, Readiness};
use temporal_worker_controller::metrics::Metrics;
use temporal_worker_controller::milestones::{Milestone, MilestoneKind, Milestones};
use temporal_worker_controller::workers::Workers;
use tokio::sync::broadcast;

const OBJECTS: usize = 1_000;
const NAMESPACES: usize = 20;

fn twd(i: usize) -> Result<TemporalWorkerDeployment, serde_json::Error> {
    let ns = format!("team-{}", i % NAMESPACES);
    serde_json::from_value(json!({
        "apiVersion": "temporal.io/v1alpha1", "kind": "TemporalWorkerDeployment",
        "metadata": {"name": format!("worker-{i}"), "namespace": ns, "generation": 4, "uid": format!("uid-{i}"),
                     "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"template": {"spec": {"containers": [{"name": "w", "image": format!("img:{i}")}]}},
                 "rollout": {"strategy": "Progressive", "steps": [
                     {"rampPercentage": 5, "pauseDuration": "1m"}, {"rampPercentage": 25, "pauseDuration": "5m"},
                     {"rampPercentage": 50, "pauseDuration": "10m"}]},
                 "workerOptions": {"connectionRef": {"name": "prod"}, "temporalNamespace": "default"}},
        "status": {
            "observedGeneration": 4, "versionCount": 3,
            "targetVersion": {"buildID": format!("v2-{i}"), "status": "Ramping", "rampPercentage": 25.0,
                              "currentStep": 1, "nextStepAt": "2024-05-01T12:05:00Z", "replicas": 3, "readyReplicas": 3},
            "currentVersion": {"buildID": format!("v1-{i}"), "status": "Current", "replicas": 3, "readyReplicas": 3},
            "deprecatedVersions": [{"buildID": format!("v0-{i}"), "status": "Drained",
                                    "drainedSince": "2024-05-01T09:00:00Z", "scaledownAt": "2024-05-01T10:00:00Z",
                                    "deleteAt": "2024-05-02T09:00:00Z", "eligibleForDeletion": true}],
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "Ramping", "message": "ramping at 25%",
                 "lastTransitionTime": "2024-05-01T11:00:00Z"},
                {"type": "Progressing", "status": "True", "reason": "Ramping", "message": "ramping at 25%",
                 "lastTransitionTime": "2024-05-01T11:00:00Z"}]
        }
    }))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let total: Duration = samples.iter().sum();
    println!(
        "{what:<34} n={:<5} p50={:>9.3?} p99={:>9.3?} max={:>9.3?} mean={:>9.3?}",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.99),
        samples[samples.len() - 1],
        total / samples.len() as u32
    );
}

type BoxError = Box<dyn std::error::Error>;

/// The store filled with `OBJECTS` TWDs (five milestones each) and the HTTP state serving it.
fn filled_state() -> Result<(AppState, Workers, Arc<Metrics>), BoxError> {
    let mut writer = Writer::<TemporalWorkerDeployment>::new(KindSet::Seed);
    let listed = temporal_worker_controller::caches::Listed::done();
    let store = Workers::new(vec![(KindSet::Seed, (writer.as_reader(), listed))]);
    let milestones = Arc::new(Milestones::new());
    for i in 0..OBJECTS {
        let obj = twd(i)?;
        for step in 0..5 {
            milestones.record(
                &format!("team-{}", i % NAMESPACES),
                &format!("worker-{i}"),
                Milestone {
                    time: jiff::Timestamp::now(),
                    kind: MilestoneKind::Normal,
                    reason: "RampStepStarted".into(),
                    message: format!("step {step}"),
                },
            );
        }
        writer.apply_watcher_event(&watcher::Event::Apply(obj));
    }
    let metrics = Arc::new(Metrics::new());
    let readiness = Readiness::default();
    readiness.set_caches_synced(true);
    readiness.set_leader_known(true);
    let (feed, _) = broadcast::channel(16);
    let state = AppState {
        store: store.clone(),
        metrics: metrics.clone(),
        milestones,
        feed,
        readiness,
        auth: None,
    };
    Ok((state, store, metrics))
}

/// A keep-alive HTTP/1.1 client of the server at `addr`.
struct Fetcher {
    client: Client<HttpConnector, Empty<Bytes>>,
    addr: SocketAddr,
}

impl Fetcher {
    /// GETs `path`: the time it took and the size of the body; an error unless 200.
    async fn get(&self, path: String) -> Result<(Duration, usize), BoxError> {
        let addr = self.addr;
        let started = Instant::now();
        let resp = self
            .client
            .request(Request::get(format!("http://{addr}{path}")).body(Empty::new())?)
            .await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        if status != StatusCode::OK {
            return Err(format!("{path}: HTTP {status}").into());
        }
        Ok((started.elapsed(), body.len()))
    }
}

/// Times each endpoint of the status API and /metrics over HTTP.
async fn bench_endpoints(fetch: &Fetcher) -> Result<(), BoxError> {
    // Warm up the connection pool and allocator.
    for _ in 0..5 {
        fetch.get("/api/v1/rollouts".into()).await?;
    }
    let mut list = Vec::new();
    let mut list_bytes = 0;
    for _ in 0..200 {
        let (d, n) = fetch.get("/api/v1/rollouts".into()).await?;
        list.push(d);
        list_bytes = n;
    }
    report(
        &format!("GET /api/v1/rollouts ({} KiB)", list_bytes / 1024),
        list,
    );

    let mut ns_list = Vec::new();
    for i in 0..500 {
        let path = format!("/api/v1/namespaces/team-{}/rollouts", i % NAMESPACES);
        ns_list.push(fetch.get(path).await?.0);
    }
    report("GET namespaces/{ns}/rollouts (50)", ns_list);

    let mut one = Vec::new();
    for i in 0..2_000 {
        let n = (i * 7919) % OBJECTS;
        let path = format!(
            "/api/v1/namespaces/team-{}/rollouts/worker-{n}",
            n % NAMESPACES
        );
        one.push(fetch.get(path).await?.0);
    }
    report("GET namespaces/{ns}/rollouts/{name}", one);

    let mut scrape = Vec::new();
    for _ in 0..100 {
        scrape.push(fetch.get("/metrics".into()).await?.0);
    }
    report("GET /metrics (HTTP)", scrape);
    Ok(())
}

/// Times `Metrics::encode` alone, without HTTP.
fn bench_encode(metrics: &Metrics, store: &Workers) {
    let mut encode = Vec::new();
    let mut size = 0;
    for _ in 0..50 {
        let started = Instant::now();
        size = metrics.encode(store).len();
        encode.push(started.elapsed());
    }
    report(&format!("Metrics::encode ({} KiB)", size / 1024), encode);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let (state, store, metrics) = filled_state()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(http::serve_listener(listener, state, async move {
        let _ = stop_rx.await;
    }));
    let fetch = Fetcher {
        client: Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>(),
        addr,
    };

    println!("status API with {OBJECTS} TemporalWorkerDeployments in {NAMESPACES} namespaces");
    bench_endpoints(&fetch).await?;
    bench_encode(&metrics, &store);

    let _ = stop_tx.send(());
    server.await??;
    Ok(())
}
