//! The read-only status API over real loopback HTTP: list/get/errors, `status` verbatim,
//! SSE watch, auth, metrics negotiation, shutdown with open streams, and no secret leaks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::http::{
    self, AppState, Readiness, ReviewFuture, ReviewOutcome, TokenAuth, TokenReviewer,
};
use temporal_worker_controller::metrics::Metrics;
use temporal_worker_controller::milestones::{Milestone, MilestoneKind, Milestones};
use temporal_worker_controller::workers::Workers;
use test_harness::manifests;
use tokio::sync::{broadcast, oneshot};

const ENV_SECRET: &str = "s3cr3t-env-literal-7f1c";
const GATE_SECRET: &str = "gate-input-token-91ab";
const ANNOTATION_SECRET: &str = "annotation-secret-55de";
const DEADLINE: Duration = Duration::from_secs(10);

fn twd(ns: &str, name: &str, strategy: &str, status: Value) -> TemporalWorkerDeployment {
    let twd = manifests::twd(name)
        .namespace(ns)
        .metadata(json!({"generation": 3, "resourceVersion": "100", "uid": format!("uid-{ns}-{name}"),
                         "creationTimestamp": "2024-05-01T10:00:00Z",
                         "annotations": {"example.com/token": ANNOTATION_SECRET}}))
        .replicas(2)
        .container(json!({
            "name": "worker", "image": "registry.example/orders:v2",
            "env": [{"name": "DB_PASSWORD", "value": ENV_SECRET},
                    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]
        }))
        .rollout(json!({"strategy": strategy,
                        "steps": [{"rampPercentage": 10, "pauseDuration": "30s"}, {"rampPercentage": 50, "pauseDuration": "1m"}],
                        "gate": {"workflowType": "SmokeTest", "input": {"token": GATE_SECRET}}}))
        .connection("prod")
        .temporal_namespace("orders")
        .status(status);
    serde_json::from_value(twd.build()).expect("fixture")
}

fn with_rv(mut twd: TemporalWorkerDeployment, rv: u64) -> TemporalWorkerDeployment {
    twd.metadata.resource_version = Some(rv.to_string());
    twd
}

fn ramping_status(pct: f32, step: i32) -> Value {
    json!({
        "observedGeneration": 3, "versionCount": 2,
        "targetVersion": {"buildID": "v2-abc", "status": "Ramping", "rampPercentage": pct, "currentStep": step,
                          "nextStepAt": "2024-05-01T12:01:00Z", "replicas": 2, "readyReplicas": 2},
        "currentVersion": {"buildID": "v1-def", "status": "Current", "replicas": 2, "readyReplicas": 2},
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "Ramping", "message": format!("ramping at {pct}%"),
             "lastTransitionTime": "2024-05-01T11:00:00Z"},
            {"type": "Progressing", "status": "True", "reason": "Ramping", "message": format!("ramping at {pct}%"),
             "lastTransitionTime": "2024-05-01T11:00:00Z"}]
    })
}

fn fixtures() -> Vec<TemporalWorkerDeployment> {
    vec![
        twd("shop", "orders", "Progressive", ramping_status(10.0, 1)),
        twd(
            "shop",
            "carts",
            "AllAtOnce",
            json!({
                "observedGeneration": 3, "versionCount": 1,
                "targetVersion": {"buildID": "c1", "status": "Current"},
                "currentVersion": {"buildID": "c1", "status": "Current"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "RolloutComplete", "message": "done",
                                "lastTransitionTime": "2024-05-01T11:00:00Z"}]
            }),
        ),
        twd(
            "billing",
            "invoices",
            "Manual",
            json!({"observedGeneration": 2, "versionCount": 0}),
        ),
    ]
}

struct Server {
    base: String,
    writer: Arc<Mutex<Writer<TemporalWorkerDeployment>>>,
    feed: broadcast::Sender<Arc<TemporalWorkerDeployment>>,
    readiness: Readiness,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start(auth: Option<TokenAuth>) -> Server {
    let mut writer = Writer::<TemporalWorkerDeployment>::new(KindSet::Seed);
    let listed = temporal_worker_controller::caches::Listed::done();
    let store = Workers::new(vec![(KindSet::Seed, (writer.as_reader(), listed))]);
    for o in fixtures() {
        writer.apply_watcher_event(&watcher::Event::Apply(o));
    }
    let milestones = Arc::new(Milestones::new());
    milestones.record(
        "shop",
        "orders",
        Milestone {
            time: "2024-05-01T11:00:00Z".parse().expect("ts"),
            kind: MilestoneKind::Normal,
            reason: "RampStepStarted".into(),
            message: "step 1: 10%".into(),
        },
    );
    let (feed, _) = broadcast::channel(16);
    let readiness = Readiness::default();
    readiness.set_caches_synced(true);
    readiness.set_leader_known(true);
    let state = AppState {
        store,
        metrics: Arc::new(Metrics::new()),
        milestones,
        feed: feed.clone(),
        readiness: readiness.clone(),
        auth,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(http::serve_listener(listener, state, async move {
        let _ = stop_rx.await;
    }));
    Server {
        base: format!("http://{addr}"),
        writer: Arc::new(Mutex::new(writer)),
        feed,
        readiness,
        stop: Some(stop),
        task,
    }
}

fn client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

struct Resp {
    status: StatusCode,
    content_type: String,
    www_authenticate: Option<String>,
    body: String,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

async fn get_with(base: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    let mut req = Request::get(format!("{base}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = tokio::time::timeout(
        DEADLINE,
        client().request(req.body(Empty::new()).expect("request")),
    )
    .await
    .expect("response within deadline")
    .expect("HTTP request");
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let www_authenticate = resp
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    Resp {
        status,
        content_type,
        www_authenticate,
        body: String::from_utf8(body.to_vec()).expect("utf8"),
    }
}

async fn get(base: &str, path: &str) -> Resp {
    get_with(base, path, &[]).await
}

/// An open SSE response, parsed into (event, data) pairs.
struct SseReader {
    body: axum::body::Body,
    buf: String,
}

impl SseReader {
    async fn open(base: &str, path: &str) -> (StatusCode, Option<SseReader>, String) {
        let req = Request::get(format!("{base}{path}"))
            .body(Empty::new())
            .expect("request");
        let resp = tokio::time::timeout(DEADLINE, client().request(req))
            .await
            .expect("deadline")
            .expect("request");
        let status = resp.status();
        if status != StatusCode::OK {
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            return (status, None, String::from_utf8_lossy(&body).to_string());
        }
        let ct = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (
            status,
            Some(SseReader {
                body: axum::body::Body::new(resp.into_body()),
                buf: String::new(),
            }),
            ct,
        )
    }

    /// Next named event (keep-alive comments skipped); `None` when the stream ends.
    async fn next(&mut self) -> Option<(String, String)> {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut event = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if !event.is_empty() || !data.is_empty() {
                    return Some((event, data));
                }
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .expect("SSE event within deadline");
            match frame {
                None => return None,
                Some(Err(e)) => panic!("SSE body error: {e}"),
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.buf.push_str(&String::from_utf8_lossy(&data));
                    }
                }
            }
        }
    }
}

fn assert_no_secrets(what: &str, text: &str) {
    for secret in [ENV_SECRET, GATE_SECRET, ANNOTATION_SECRET, "DB_PASSWORD"] {
        assert!(!text.contains(secret), "{what} leaks {secret:?}:\n{text}");
    }
}

#[tokio::test]
async fn list_get_and_errors() {
    let srv = start(None).await;
    let b = &srv.base;

    let health = get(b, "/healthz").await;
    assert_eq!(
        (health.status, health.body.as_str()),
        (StatusCode::OK, "ok")
    );
    assert_eq!(get(b, "/readyz").await.status, StatusCode::OK);
    check_list(b).await;
    check_get_one(b).await;
    check_errors(b).await;
    check_readiness_follows_sync_leader_and_webhook(&srv).await;
}

/// Every rollout, sorted, with its summary; and per namespace.
async fn check_list(b: &str) {
    let list = get(b, "/api/v1/rollouts").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(list.content_type.starts_with("application/json"));
    let items = list.json()["items"].as_array().expect("items").clone();
    let keys: Vec<String> = items
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["namespace"].as_str().unwrap(),
                i["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(keys, ["billing/invoices", "shop/carts", "shop/orders"]);
    let orders = &items[2];
    assert_eq!(orders["phase"], "Progressing");
    assert_eq!(orders["targetBuildID"], "v2-abc");
    assert_eq!(orders["currentBuildID"], "v1-def");
    assert_eq!(orders["targetTrafficRatio"], 0.1);
    assert_eq!(orders["step"], 1, "the first step, numbered from 1");
    assert_eq!(orders["steps"], 2);
    assert_eq!(orders["nextStepAt"], "2024-05-01T12:01:00Z");
    assert_eq!(items[1]["phase"], "Completed");
    assert_eq!(items[0]["phase"], "Pending");

    let shop = get(b, "/api/v1/namespaces/shop/rollouts").await.json();
    assert_eq!(shop["items"].as_array().expect("items").len(), 2);
    let empty = get(b, "/api/v1/namespaces/nobody/rollouts").await.json();
    assert_eq!(empty["items"].as_array().expect("items").len(), 0);
}

/// One rollout: its status verbatim and its spec summarised.
async fn check_get_one(b: &str) {
    let one = get(b, "/api/v1/namespaces/shop/rollouts/orders").await;
    assert_eq!(one.status, StatusCode::OK);
    let one = one.json();
    let original = fixtures()
        .into_iter()
        .find(|t| t.metadata.name.as_deref() == Some("orders"))
        .expect("fixture");
    assert_eq!(
        one["status"],
        serde_json::to_value(&original.status).expect("status json"),
        "status must be verbatim"
    );
    assert_eq!(one["generation"], 3);
    assert_eq!(one["spec"]["strategy"], "Progressive");
    assert_eq!(
        one["spec"]["steps"],
        json!([{"rampPercentage": 10, "pauseDuration": "30s"}, {"rampPercentage": 50, "pauseDuration": "1m"}])
    );
    assert_eq!(
        one["spec"]["gate"],
        json!({"workflowType": "SmokeTest", "hasInput": true, "inputFrom": null})
    );
    assert_eq!(
        one["spec"]["containers"],
        json!([{"name": "worker", "image": "registry.example/orders:v2"}])
    );
    assert_eq!(one["summary"]["rampPercentage"], 10.0);
    assert_eq!(one["summary"]["observedGeneration"], 3);
    assert_eq!(one["milestones"][0]["reason"], "RampStepStarted");
    assert_eq!(one["milestones"][0]["type"], "Normal");
}

/// A missing rollout, invalid names and unknown paths answer JSON errors.
async fn check_errors(b: &str) {
    let missing = get(b, "/api/v1/namespaces/shop/rollouts/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let err = missing.json();
    assert_eq!(err["error"]["code"], 404);
    assert!(
        err["error"]["message"]
            .as_str()
            .expect("message")
            .contains("shop/nope")
    );

    for path in [
        "/api/v1/namespaces/shop/rollouts/Bad_Name",
        "/api/v1/namespaces/UPPER/rollouts",
        "/api/v1/namespaces/a..b/rollouts/x",
    ] {
        let r = get(b, path).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(r.json()["error"]["code"], 400, "{path}");
    }
    let unknown = get(b, "/api/v2/whatever").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.json()["error"]["code"], 404);
}

/// Not synced yet: refuse rather than answer "no rollouts"; not ready without a known leader
/// or while the admission webhook waits for its certificate.
async fn check_readiness_follows_sync_leader_and_webhook(srv: &Server) {
    let b = &srv.base;
    srv.readiness.set_caches_synced(false);
    let r = get(b, "/api/v1/rollouts").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.json()["error"]["code"], 503);
    assert_eq!(
        get(b, "/readyz").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(get(b, "/healthz").await.status, StatusCode::OK);
    srv.readiness.set_caches_synced(true);
    srv.readiness.set_leader_known(false);
    let r = get(b, "/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.body.contains("leader"), "{}", r.body);
    // A replica whose admission webhook has no certificate yet takes no webhook traffic.
    srv.readiness.set_leader_known(true);
    srv.readiness.set_webhook_waiting(true);
    let r = get(b, "/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.body.contains("webhook"), "{}", r.body);
    srv.readiness.set_webhook_waiting(false);
    assert_eq!(get(b, "/readyz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn watch_streams_initial_state_changes_and_deletion() {
    let srv = start(None).await;
    let (status, missing, _) =
        SseReader::open(&srv.base, "/api/v1/namespaces/shop/rollouts/nope/watch").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(missing.is_none());

    let (status, sse, ct) =
        SseReader::open(&srv.base, "/api/v1/namespaces/shop/rollouts/orders/watch").await;
    assert_eq!(status, StatusCode::OK);
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    let mut sse = sse.expect("stream");
    let (event, data) = sse.next().await.expect("initial event");
    assert_eq!(event, "rollout");
    let first: Value = serde_json::from_str(&data).expect("json");
    assert_eq!(first["status"]["targetVersion"]["rampPercentage"], 10.0);
    assert_no_secrets("watch event", &data);
    skip_other_objects_and_unchanged_status(&srv, &mut sse).await;
    never_send_an_older_copy_after_a_newer_one(&srv, &mut sse).await;
    follow_the_store_to_the_deletion(&srv, &mut sse).await;
}

/// Another object's change is not ours; an unchanged status is not a change.
async fn skip_other_objects_and_unchanged_status(srv: &Server, sse: &mut SseReader) {
    let other = fixtures()
        .into_iter()
        .find(|t| t.metadata.name.as_deref() == Some("carts"))
        .expect("fixture");
    srv.feed.send(Arc::new(other)).expect("subscriber present");
    srv.feed
        .send(Arc::new(with_rv(
            twd("shop", "orders", "Progressive", ramping_status(10.0, 1)),
            101,
        )))
        .expect("send");
    let next = with_rv(
        twd("shop", "orders", "Progressive", ramping_status(50.0, 2)),
        102,
    );
    srv.feed.send(Arc::new(next.clone())).expect("send");
    let (event, data) = sse.next().await.expect("change event");
    assert_eq!(event, "rollout");
    let second: Value = serde_json::from_str(&data).expect("json");
    assert_eq!(
        second["status"],
        serde_json::to_value(&next.status).expect("json")
    );
    assert_eq!(second["summary"]["step"], 2);
}

/// An older copy (the store lags behind the feed) is never sent after a newer one.
async fn never_send_an_older_copy_after_a_newer_one(srv: &Server, sse: &mut SseReader) {
    let stale = with_rv(
        twd("shop", "orders", "Progressive", ramping_status(30.0, 1)),
        101,
    );
    srv.feed.send(Arc::new(stale)).expect("send");
    let newer = with_rv(
        twd("shop", "orders", "Progressive", ramping_status(60.0, 2)),
        103,
    );
    srv.feed.send(Arc::new(newer)).expect("send");
    let (_, data) = sse.next().await.expect("newer event");
    let third: Value = serde_json::from_str(&data).expect("json");
    assert_eq!(third["status"]["targetVersion"]["rampPercentage"], 60.0);
}

/// Status written by another replica reaches us only through the store, and so does the
/// deletion, which ends the stream.
async fn follow_the_store_to_the_deletion(srv: &Server, sse: &mut SseReader) {
    let from_store = with_rv(
        twd("shop", "orders", "Progressive", ramping_status(75.0, 2)),
        104,
    );
    srv.writer
        .lock()
        .expect("writer")
        .apply_watcher_event(&watcher::Event::Apply(from_store.clone()));
    let (_, data) = sse.next().await.expect("store change");
    let fourth: Value = serde_json::from_str(&data).expect("json");
    assert_eq!(fourth["status"]["targetVersion"]["rampPercentage"], 75.0);

    srv.writer
        .lock()
        .expect("writer")
        .apply_watcher_event(&watcher::Event::Delete(from_store));
    let (event, data) = sse.next().await.expect("deleted event");
    assert_eq!(event, "deleted");
    assert_eq!(
        serde_json::from_str::<Value>(&data).expect("json"),
        json!({"namespace": "shop", "name": "orders"})
    );
    assert!(sse.next().await.is_none(), "stream ends after deletion");
}

#[tokio::test]
async fn shutdown_ends_open_watches() {
    let mut srv = start(None).await;
    let (_, sse, _) =
        SseReader::open(&srv.base, "/api/v1/namespaces/shop/rollouts/carts/watch").await;
    let mut sse = sse.expect("stream");
    assert_eq!(sse.next().await.expect("initial").0, "rollout");
    let _ = srv.stop.take().expect("stop").send(());
    let served = tokio::time::timeout(DEADLINE, &mut srv.task)
        .await
        .expect("server stops despite an open watch");
    served.expect("join").expect("serve result");
    assert!(sse.next().await.is_none());
}

#[tokio::test]
async fn no_secret_in_any_response() {
    let srv = start(None).await;
    let mut texts = Vec::new();
    for path in [
        "/api/v1/rollouts",
        "/api/v1/namespaces/shop/rollouts",
        "/api/v1/namespaces/shop/rollouts/orders",
        "/api/v1/namespaces/shop/rollouts/carts",
        "/api/v1/namespaces/billing/rollouts/invoices",
        "/metrics",
    ] {
        let r = get(&srv.base, path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        texts.push((path, r.body));
    }
    // The planted values really are in the objects the API reads.
    let raw = serde_json::to_string(&fixtures()).expect("json");
    assert!(
        raw.contains(ENV_SECRET) && raw.contains(GATE_SECRET) && raw.contains(ANNOTATION_SECRET)
    );
    for (path, text) in texts {
        assert_no_secrets(path, &text);
    }
}

#[tokio::test]
async fn metrics_content_negotiation() {
    let srv = start(None).await;
    let om = get_with(
        &srv.base,
        "/metrics",
        &[(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )],
    )
    .await;
    assert_eq!(om.status, StatusCode::OK);
    assert!(
        om.content_type.starts_with("application/openmetrics-text"),
        "{}",
        om.content_type
    );
    assert!(om.body.ends_with("# EOF\n"));
    assert!(
        om.body.contains(
            r#"temporal_worker_controller_rollout_ramp_ratio{namespace="shop",name="orders"} 0.1"#
        ),
        "{}",
        om.body
    );
    let text = get(&srv.base, "/metrics").await;
    assert!(
        text.content_type.starts_with("text/plain; version=0.0.4"),
        "{}",
        text.content_type
    );
    assert!(
        text.body
            .contains("# TYPE temporal_worker_controller_reconcile_total counter")
    );
    assert!(!text.body.contains("# EOF"));
}

struct FakeReviewer;

impl TokenReviewer for FakeReviewer {
    fn review<'a>(&'a self, token: &'a str) -> ReviewFuture<'a> {
        Box::pin(async move {
            Ok(if token == "valid-token" {
                ReviewOutcome::Authenticated {
                    username: "system:serviceaccount:ops:viewer".into(),
                }
            } else {
                ReviewOutcome::Rejected
            })
        })
    }
}

#[tokio::test]
async fn token_auth_guards_the_api() {
    let srv = start(Some(TokenAuth::with_reviewer(Arc::new(FakeReviewer)))).await;
    let b = &srv.base;
    let anon = get(b, "/api/v1/rollouts").await;
    assert_eq!(anon.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anon.www_authenticate.as_deref(), Some("Bearer"));
    assert_eq!(anon.json()["error"]["code"], 401);
    let bad = get_with(
        b,
        "/api/v1/namespaces/shop/rollouts/orders",
        &[("authorization", "Bearer nope")],
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = SseReader::open(b, "/api/v1/namespaces/shop/rollouts/orders/watch").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let ok = get_with(
        b,
        "/api/v1/namespaces/shop/rollouts/orders",
        &[("authorization", "Bearer valid-token")],
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK);
    // Probes and (by default) metrics stay open.
    assert_eq!(get(b, "/healthz").await.status, StatusCode::OK);
    assert_eq!(get(b, "/readyz").await.status, StatusCode::OK);
    assert_eq!(get(b, "/metrics").await.status, StatusCode::OK);

    let guarded = start(Some(
        TokenAuth::with_reviewer(Arc::new(FakeReviewer)).protect_metrics(true),
    ))
    .await;
    assert_eq!(
        get(&guarded.base, "/metrics").await.status,
        StatusCode::UNAUTHORIZED
    );
    let m = get_with(
        &guarded.base,
        "/metrics",
        &[("authorization", "Bearer valid-token")],
    )
    .await;
    assert_eq!(m.status, StatusCode::OK);
}

/// docs/openapi.yaml declares every field the API actually returns (and nothing it doesn't).
#[tokio::test]
async fn openapi_document_matches_responses() {
    let path = format!("{}/docs/openapi.yaml", env!("CARGO_MANIFEST_DIR"));
    let doc: Value =
        serde_yaml::from_str(&std::fs::read_to_string(&path).expect("read openapi")).expect("yaml");
    let schemas = &doc["components"]["schemas"];
    let declared = |schema: &str| -> Vec<String> {
        let mut keys: Vec<String> = schemas[schema]["properties"]
            .as_object()
            .expect(schema)
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    let keys = |v: &Value| -> Vec<String> {
        let mut keys: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        keys
    };
    let srv = start(None).await;
    let one = get(&srv.base, "/api/v1/namespaces/shop/rollouts/orders")
        .await
        .json();
    assert_eq!(keys(&one), declared("Rollout"));
    assert_eq!(keys(&one["summary"]), declared("RolloutSummary"));
    assert_eq!(keys(&one["spec"]), declared("SpecView"));
    assert_eq!(keys(&one["milestones"][0]), declared("Milestone"));
    let list = get(&srv.base, "/api/v1/rollouts").await.json();
    assert_eq!(keys(&list), declared("RolloutList"));
    assert_eq!(keys(&list["items"][0]), declared("RolloutSummary"));
    for path in [
        "/api/v1/rollouts",
        "/api/v1/namespaces/{namespace}/rollouts/{name}/watch",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} undocumented");
    }
}

/// The pinned schemathesis (installed by .ci/setup-tests).
const SCHEMATHESIS_VERSION: &str = "4.32.5";

/// The status API against its own contract (issue 28): schemathesis generates requests from
/// docs/openapi.yaml (seeded, so every run sends the same ones; bounded per operation) and
/// checks every answer against the spec: status codes, content types, headers and bodies, and
/// that invalid paths are refused. Twice: the API open, and behind token auth (then requests
/// without the token, or with a bad one, must get the documented 401). The SSE watch never ends
/// by itself, so it is left out (its errors are in the bad-input table, its stream in the tests
/// above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_the_server_as_its_openapi_document_says() {
    let version = tokio::process::Command::new("schemathesis")
        .arg("--version")
        .output()
        .await
        .expect("schemathesis is not installed: run .ci/setup-tests");
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    assert!(
        version.contains(SCHEMATHESIS_VERSION),
        "schemathesis {SCHEMATHESIS_VERSION} expected (.ci/setup-tests), found {version}"
    );
    let open = start(None).await;
    schemathesis(&open.base, &[], "open").await;
    let guarded = start(Some(TokenAuth::with_reviewer(Arc::new(FakeReviewer)))).await;
    schemathesis(
        &guarded.base,
        &["-H", "Authorization: Bearer valid-token"],
        "token",
    )
    .await;
}

/// One bounded, seeded schemathesis run against `base`; fails with its report.
async fn schemathesis(base: &str, extra: &[&str], label: &str) {
    let spec = format!("{}/docs/openapi.yaml", env!("CARGO_MANIFEST_DIR"));
    let reports = tempfile_dir(&format!("schemathesis-{label}"));
    let run = tokio::process::Command::new("schemathesis")
        .args(["run", &spec, "--url", base])
        .args(["--seed", "28", "--max-examples", "100", "--workers", "1"])
        .args(["--phases", "examples,coverage,fuzzing", "--checks", "all"])
        .args(["--exclude-path-regex", "/watch$", "--request-timeout", "5"])
        .args(["--generation-database", "none"])
        .args(extra)
        .args(["--no-color", "--report-dir"])
        .arg(&reports)
        // Its caches (crashes found before, replayed first) go to a fresh directory, so that
        // every run sends the same requests and nothing lands in the repository.
        .current_dir(&reports)
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("schemathesis within 120 s")
        .expect("running schemathesis");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("schemathesis ({label}):\n{text}");
    assert!(
        out.status.success(),
        "schemathesis ({label}) failed:\n{text}"
    );
}

/// A fresh directory under the target dir's temporary space.
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a report directory");
    dir
}
