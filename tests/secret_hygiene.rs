//! Secret hygiene (issue 6): two real rollouts, one on a `TemporalConnection` with an mTLS
//! Secret and one with an API-key Secret, through TLS front ends to a real Temporal dev server
//! (which itself speaks only plaintext): the mTLS one requires a client certificate, the
//! API-key one checks the `authorization` header of every gRPC call. Afterwards every place a
//! user or a log pipeline can read is searched for the secret values: status API responses
//! (list, detail, event stream), `/metrics`, the health endpoints, the `status` CLI output,
//! Kubernetes Events, the TWD/Connection/Deployment objects and the controller's own logs at
//! trace level. None may contain them.
//!
//! `harness = false`: `main` runs the test as a child process started with `SSL_CERT_FILE` set,
//! which is how the controller process here trusts the test CA for the API-key connection (API
//! keys use the system roots, like the Go controller). The workers trust it through the kubelet stand-in's
//! image trust store.

#[path = "common/controller.rs"]
mod controller;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use base64::Engine as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::{TemporalConnection, TemporalWorkerDeployment};
use test_harness::kubelet::{Kubelet, KubeletOptions};
use test_harness::manifests;
use test_harness::tls_proxy::{GrpcTlsProxy, ProxyAuth, TestPki};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

const T: Duration = Duration::from_secs(120);
const NS: &str = "hygiene";
const TEMPORAL_NS: &str = "hygiene";

/// Where the parent process left the test PKI for the child it re-runs itself as.
const PKI_DIR_ENV: &str = "TWC_HYGIENE_PKI_DIR";
const PKI_FILES: [&str; 5] = [
    "ca",
    "server-cert",
    "server-key",
    "client-cert",
    "client-key",
];

fn main() -> ExitCode {
    // The process environment cannot be changed safely once threads may exist (the crate
    // forbids `unsafe`), so the test runs in a child process started with `SSL_CERT_FILE` set.
    match std::env::var_os(PKI_DIR_ENV) {
        None => parent(),
        Some(dir) => child(std::path::Path::new(&dir)),
    }
}

/// Generates the PKI, then runs the test as a child process that trusts its CA.
fn parent() -> ExitCode {
    let dir = std::env::temp_dir().join(format!("twc-hygiene-pki-{}", std::process::id()));
    let written = TestPki::generate().and_then(|pki| {
        std::fs::create_dir_all(&dir)?;
        let pems = [
            &pki.ca_pem,
            &pki.server_cert_pem,
            &pki.server_key_pem,
            &pki.client_cert_pem,
            &pki.client_key_pem,
        ];
        for (name, pem) in PKI_FILES.iter().zip(pems) {
            std::fs::write(dir.join(name), pem)?;
        }
        Ok(())
    });
    if let Err(e) = written {
        eprintln!("writing the test PKI to {}: {e:#}", dir.display());
        return ExitCode::FAILURE;
    }
    let status = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(PKI_DIR_ENV, &dir)
            .env("SSL_CERT_FILE", dir.join("ca"))
            .env_remove("SSL_CERT_DIR")
            .status()
    });
    let _ = std::fs::remove_dir_all(&dir);
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("secret_hygiene: the test process ended with {s}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("secret_hygiene: starting the test process: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load_pki(dir: &std::path::Path) -> Result<TestPki> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).with_context(|| format!("reading PKI file {name}"))
    };
    Ok(TestPki {
        ca_pem: read(PKI_FILES[0])?,
        server_cert_pem: read(PKI_FILES[1])?,
        server_key_pem: read(PKI_FILES[2])?,
        client_cert_pem: read(PKI_FILES[3])?,
        client_key_pem: read(PKI_FILES[4])?,
    })
}

/// The test itself, in a process whose environment already trusts the test CA.
fn child(dir: &std::path::Path) -> ExitCode {
    let pki = match load_pki(dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e:#}");
            return ExitCode::FAILURE;
        }
    };
    let logs = LogBuffer::default();
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(logs.clone())
                .with_filter(tracing_subscriber::EnvFilter::new(
                    "debug,temporal_worker_controller=trace,h2=info,hyper=info,hyper_util=info,\
                     tower=info,rustls=info,tonic=info",
                )),
        )
        .try_init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(run(&pki, &logs));
    match result {
        Ok(report) => {
            println!("secret_hygiene: ok\n{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let text = logs.text();
            let tail: String = text
                .lines()
                .rev()
                .take(80)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            eprintln!("secret_hygiene: FAILED: {e:#}\n--- last controller log lines ---\n{tail}");
            ExitCode::FAILURE
        }
    }
}

/// Everything the process logs, kept in memory to be searched.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl LogBuffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().map(|b| b.clone()).unwrap_or_default()).into_owned()
    }
}

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
    type Writer = LogBuffer;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The secret values, in every form they could leak in.
struct Needles(Vec<(String, String)>);

impl Needles {
    fn new(api_key: &str, pki: &TestPki) -> Needles {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        let mut v = vec![
            ("API key".to_string(), api_key.to_string()),
            ("API key, base64".to_string(), b64(api_key)),
        ];
        // The private key: each line of its PEM body, the body in one piece, and the PEM as
        // Kubernetes stores it (base64 of the whole file), in chunks.
        let body: Vec<&str> = pki
            .client_key_pem
            .lines()
            .filter(|l| !l.starts_with("-----") && l.len() >= 16)
            .collect();
        for (i, line) in body.iter().enumerate() {
            v.push((format!("client key PEM line {i}"), line.to_string()));
        }
        v.push(("client key PEM body".into(), body.concat()));
        let stored = b64(&pki.client_key_pem);
        for (i, chunk) in stored.as_bytes().chunks(24).enumerate().take(6) {
            v.push((
                format!("client key as stored in the Secret, chunk {i}"),
                String::from_utf8_lossy(chunk).into_owned(),
            ));
        }
        Needles(v)
    }

    /// What each haystack contains, by needle description.
    fn found_in(&self, haystack: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(_, n)| haystack.contains(n.as_str()))
            .map(|(d, _)| d.as_str())
            .collect()
    }
}

/// An open event stream: what it received so far, and the task reading it.
type EventStream = (Arc<Mutex<Vec<u8>>>, tokio::task::JoinHandle<()>);

/// Everything a reader can see, by description.
type Haystacks = Vec<(String, String)>;

async fn run(pki: &TestPki, logs: &LogBuffer) -> Result<String> {
    let crd_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crds");
    let plane = test_harness::control_plane::ControlPlane::start().await?;
    let client = plane.client().await?;
    test_harness::control_plane::install_crds(&client, &crd_dir).await?;

    let temporal = test_harness::temporal_server::shared().await?;
    temporal.create_namespace(TEMPORAL_NS).await?;
    let upstream: SocketAddr = temporal.address().parse()?;
    let api_key = format!("twc-key-{}", random_hex());
    let mtls_proxy = GrpcTlsProxy::start(upstream, pki, ProxyAuth::ClientCert).await?;
    let key_proxy = GrpcTlsProxy::start(upstream, pki, ProxyAuth::ApiKey(api_key.clone())).await?;

    let kubelet = Kubelet::start_with(
        client.clone(),
        KubeletOptions {
            trusted_ca_pem: Some(pki.ca_pem.clone().into_bytes()),
            ..Default::default()
        },
    )
    .await?;
    let controller = controller::start(
        client.clone(),
        &[
            String::from("--identity=twc-hygiene"),
            String::from("--idle-interval=10s"),
            String::from("--fast-poll=300ms"),
        ],
    )
    .await?;
    let http = controller.http_addr;

    // The world: two Secrets, two Connections, one rollout on each.
    create_secrets(&client, pki, &api_key).await?;
    create_connections(&client, &mtls_proxy, &key_proxy).await?;
    let sse = roll_out_two_versions(&client, http).await?;
    check_front_ends(&mtls_proxy, &key_proxy)?;

    let mut haystacks = served_haystacks(http, sse).await?;
    let deployments = stored_haystacks(&client, &mut haystacks).await?;
    let log_text = logs.text();
    ensure!(
        log_text.contains("on-mtls") && log_text.contains("on-apikey"),
        "the captured logs do not mention the rollouts; capture is broken"
    );
    haystacks.push(("controller and harness logs (trace)".into(), log_text));

    let needles = Needles::new(&api_key, pki);
    check_needles_match_secrets(&client, &needles).await?;
    let scanned = scan_for_leaks(&haystacks, &needles)?;
    check_api_key_by_reference(&deployments)?;

    let mut report = String::new();
    for (what, text) in &haystacks {
        report.push_str(&format!("  searched {what}: {} bytes\n", text.len()));
    }
    report.push_str(&format!(
        "  {} needles, {scanned} bytes, no secret found; gRPC calls through the mTLS front end: {}, through the API-key front end: {}\n",
        needles.0.len(),
        mtls_proxy.forwarded(),
        key_proxy.forwarded()
    ));
    controller.stop().await;
    kubelet.shutdown().await;
    drop(plane);
    Ok(report)
}

/// The namespace, the mTLS Secret and the API-key Secret.
async fn create_secrets(client: &kube::Client, pki: &TestPki, api_key: &str) -> Result<()> {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "temporal-mtls"},
                "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": pki.client_cert_pem, "tls.key": pki.client_key_pem,
                               "ca.crt": pki.ca_pem}
            }))?,
        )
        .await?;
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "temporal-api-key"},
                "stringData": {"key": api_key}
            }))?,
        )
        .await?;
    Ok(())
}

/// Connection `mtls` through the client-certificate front end, `apikey` through the API-key one.
async fn create_connections(
    client: &kube::Client,
    mtls_proxy: &GrpcTlsProxy,
    key_proxy: &GrpcTlsProxy,
) -> Result<()> {
    let mut mtls = manifests::connection("mtls", &mtls_proxy.host_port());
    manifests::merge(
        &mut mtls["spec"],
        json!({"tls": {"serverName": "localhost"}, "mutualTLSSecretRef": {"name": "temporal-mtls"}}),
    );
    apply(client, mtls).await?;
    let mut apikey = manifests::connection("apikey", &key_proxy.host_port());
    manifests::merge(
        &mut apikey["spec"],
        json!({"tls": {"serverName": "localhost"},
               "apiKeySecretRef": {"name": "temporal-api-key", "key": "key"}}),
    );
    apply(client, apikey).await
}

/// v1 on each Connection, then (with an event stream open on each rollout) a second version
/// through one ramp step, so routing writes, ramping and sunset all go through the secured
/// connections. Returns the event streams.
async fn roll_out_two_versions(
    client: &kube::Client,
    http: SocketAddr,
) -> Result<Vec<EventStream>> {
    for (name, conn) in [("on-mtls", "mtls"), ("on-apikey", "apikey")] {
        apply_twd(client, name, conn, "v1", json!({"strategy": "AllAtOnce"})).await?;
    }
    let mut v1 = BTreeMap::new();
    for name in ["on-mtls", "on-apikey"] {
        let twd = wait_twd(client, name, "v1 Ready", ready).await?;
        v1.insert(name, current_build(&twd).context("v1 build")?);
    }
    let sse: Vec<_> = ["on-mtls", "on-apikey"]
        .iter()
        .map(|name| {
            test_harness::loopback_http::stream_into_buffer(
                http,
                format!("/api/v1/namespaces/{NS}/rollouts/{name}/watch"),
                None,
            )
        })
        .collect();
    for (name, conn) in [("on-mtls", "mtls"), ("on-apikey", "apikey")] {
        apply_twd(
            client,
            name,
            conn,
            "v2",
            json!({"strategy": "Progressive", "steps": [{"rampPercentage": 50, "pauseDuration": "2s"}]}),
        )
        .await?;
    }
    for name in ["on-mtls", "on-apikey"] {
        let old = v1.get(name).cloned().unwrap_or_default();
        wait_twd(client, name, "v2 Current", |t| {
            ready(t) && current_build(t).is_some_and(|b| b != old)
        })
        .await?;
    }
    Ok(sse)
}

/// Both front ends carried traffic, and neither saw an unauthenticated call.
fn check_front_ends(mtls_proxy: &GrpcTlsProxy, key_proxy: &GrpcTlsProxy) -> Result<()> {
    ensure!(
        mtls_proxy.forwarded() > 0 && key_proxy.forwarded() > 0,
        "traffic did not go through the TLS front ends (mTLS {}, API key {})",
        mtls_proxy.forwarded(),
        key_proxy.forwarded()
    );
    ensure!(
        key_proxy.rejected() == 0 && mtls_proxy.rejected() == 0,
        "unauthenticated calls: API key front end rejected {}, mTLS front end {}",
        key_proxy.rejected(),
        mtls_proxy.rejected()
    );
    Ok(())
}

/// What the controller serves: status API, probes, /metrics, the event streams (closed here)
/// and the status CLI's rendering.
async fn served_haystacks(http: SocketAddr, sse: Vec<EventStream>) -> Result<Haystacks> {
    let mut haystacks: Haystacks = Vec::new();
    for path in [
        "/api/v1/rollouts".to_string(),
        format!("/api/v1/namespaces/{NS}/rollouts/on-mtls"),
        format!("/api/v1/namespaces/{NS}/rollouts/on-apikey"),
        "/healthz".into(),
        "/readyz".into(),
    ] {
        let (code, body) =
            test_harness::loopback_http::get(http, &path, "application/json", None).await?;
        ensure!(code == 200, "{path} answered {code}: {body}");
        haystacks.push((format!("GET {path}"), body));
    }
    for accept in ["application/openmetrics-text; version=1.0.0", "text/plain"] {
        let (code, body) = test_harness::loopback_http::get(http, "/metrics", accept, None).await?;
        ensure!(code == 200, "/metrics answered {code}");
        haystacks.push((format!("GET /metrics ({accept})"), body));
    }
    for (i, (stream, task)) in sse.into_iter().enumerate() {
        task.abort();
        let text = String::from_utf8_lossy(&stream.lock().map(|b| b.clone()).unwrap_or_default())
            .into_owned();
        ensure!(text.contains("data:"), "event stream {i} received nothing");
        haystacks.push((format!("event stream {i}"), text));
    }
    let view = temporal_worker_controller::cli_status::fetch(
        &temporal_worker_controller::cli_status::StatusArgs {
            namespace: Some(NS.into()),
            name: None,
            api_url: Some(format!("http://{http}")),
            ..Default::default()
        },
    )
    .await?;
    haystacks.push((
        "status CLI".into(),
        temporal_worker_controller::cli_status::render(&view, jiff::Timestamp::now()),
    ));
    Ok(haystacks)
}

/// What the API server stores: both kinds of Events, TWDs, Connections and Deployments (at
/// least one). Returns the Deployments.
async fn stored_haystacks(
    client: &kube::Client,
    haystacks: &mut Haystacks,
) -> Result<Vec<Deployment>> {
    for (what, ar) in [
        (
            "core/v1 Events",
            ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("", "v1", "Event")),
        ),
        (
            "events.k8s.io/v1 Events",
            ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
                "events.k8s.io",
                "v1",
                "Event",
            )),
        ),
    ] {
        let list = Api::<DynamicObject>::namespaced_with(client.clone(), NS, &ar)
            .list(&ListParams::default())
            .await?;
        haystacks.push((
            format!("{what} ({})", list.items.len()),
            serde_json::to_string(&list.items)?,
        ));
    }
    let twds = TemporalWorkerDeployment::api(client.clone(), NS, KindSet::Seed)
        .list(&ListParams::default())
        .await?;
    haystacks.push((
        "TemporalWorkerDeployments".into(),
        serde_json::to_string(&twds.items)?,
    ));
    let conns = TemporalConnection::api(client.clone(), NS, KindSet::Seed)
        .list(&ListParams::default())
        .await?;
    haystacks.push((
        "TemporalConnections".into(),
        serde_json::to_string(&conns.items)?,
    ));
    let deployments = Api::<Deployment>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await?;
    ensure!(!deployments.items.is_empty(), "no versioned Deployments");
    haystacks.push((
        "Deployments".into(),
        serde_json::to_string(&deployments.items)?,
    ));
    Ok(deployments.items)
}

/// The search can fail: the Secrets themselves contain every needle family.
async fn check_needles_match_secrets(client: &kube::Client, needles: &Needles) -> Result<()> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let stored = serde_json::to_string(&secrets.list(&ListParams::default()).await?.items)?;
    let in_secrets = needles.found_in(&stored);
    ensure!(
        in_secrets.iter().any(|d| d.starts_with("API key, base64"))
            && in_secrets
                .iter()
                .any(|d| d.starts_with("client key as stored")),
        "needles do not match the Secrets as Kubernetes serves them: {in_secrets:?}"
    );
    Ok(())
}

/// Fails listing every haystack holding a needle; else the number of bytes searched.
fn scan_for_leaks(haystacks: &Haystacks, needles: &Needles) -> Result<usize> {
    let mut leaks = Vec::new();
    let mut scanned = 0usize;
    for (what, text) in haystacks {
        scanned += text.len();
        let found = needles.found_in(text);
        if !found.is_empty() {
            leaks.push(format!("{what}: {}", found.join(", ")));
        }
    }
    if !leaks.is_empty() {
        bail!("secret values found:\n{}", leaks.join("\n"));
    }
    Ok(scanned)
}

/// The API key reaches pods only by reference.
fn check_api_key_by_reference(deployments: &[Deployment]) -> Result<()> {
    for d in deployments {
        let containers = d
            .spec
            .template
            .spec
            .as_ref()
            .map(|p| p.containers.clone())
            .unwrap_or_default();
        for c in containers {
            for var in c.env.unwrap_or_default() {
                if var.name == "TEMPORAL_API_KEY" {
                    ensure!(
                        var.value.is_none()
                            && var
                                .value_from
                                .and_then(|f| f.secret_key_ref)
                                .is_some_and(|r| r.name == "temporal-api-key"),
                        "TEMPORAL_API_KEY must be a secretKeyRef"
                    );
                }
            }
        }
    }
    Ok(())
}

fn random_hex() -> String {
    let mut h = Sha256::new();
    h.update(std::process::id().to_be_bytes());
    h.update(format!("{:?}", Instant::now()).as_bytes());
    h.update(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
            .to_be_bytes(),
    );
    hex::encode(&h.finalize()[..16])
}

async fn apply(client: &kube::Client, manifest: Value) -> Result<()> {
    test_harness::world::apply(client, NS, "hygiene-test", manifest).await
}

async fn apply_twd(
    client: &kube::Client,
    name: &str,
    connection: &str,
    tag: &str,
    rollout: Value,
) -> Result<()> {
    let twd = manifests::twd(name)
        .replicas(1)
        .pod_labels(json!({"app": name}))
        .tag(tag)
        .task_queue(&format!("{name}-queue"))
        .rollout(rollout)
        .sunset("1s", "1s")
        .connection(connection)
        .temporal_namespace(TEMPORAL_NS)
        .build();
    apply(client, twd).await
}

fn ready(t: &TemporalWorkerDeployment) -> bool {
    t.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            && s.observed_generation == t.metadata.generation
    })
}

fn current_build(t: &TemporalWorkerDeployment) -> Option<String> {
    t.status
        .as_ref()
        .and_then(|s| s.current_version.as_ref())
        .map(|v| v.build_id.clone())
}

async fn wait_twd(
    client: &kube::Client,
    name: &str,
    what: &str,
    pred: impl Fn(&TemporalWorkerDeployment) -> bool,
) -> Result<TemporalWorkerDeployment> {
    let api = TemporalWorkerDeployment::api(client.clone(), NS, KindSet::Seed);
    let deadline = Instant::now() + T;
    loop {
        let twd = api.get(name).await?;
        if pred(&twd) {
            return Ok(twd);
        }
        if Instant::now() > deadline {
            bail!(
                "{name}: timed out after {T:?} waiting for {what}; status {}",
                serde_json::to_string_pretty(&twd.status)?
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
