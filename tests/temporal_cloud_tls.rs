//! Temporal Cloud mTLS with a cert-manager Secret (issue 26 item 1): the Secret's `ca.crt` is
//! the issuer of the *client* certificate, and it must be added to the system roots, not
//! replace them.
//!
//! Three throw-away CAs:
//! - CA-1 plays the public web PKI: it signs the server certificate of the "cloud" TLS front
//!   end, and the test process trusts it as its only system root (`SSL_CERT_FILE`);
//! - CA-2 plays the cert-manager issuer: it signs the client certificate, the front ends
//!   require client certificates from it, and it is the Secret's `ca.crt`;
//! - CA-3 is unknown to everyone: it signs the server certificate of an "impostor" front end.
//!
//! The controller (in the child process, with the real control plane and a real Temporal dev
//! server behind the front ends) must reach Temporal through the cloud front end (the
//! versioned Deployment is created only after Temporal answered) and must still refuse the
//! impostor (`TemporalClientCreationFailed`, nothing forwarded).
//!
//! The versioned Pods run real workers (the kubelet stand-in, whose image trust store is CA-1,
//! the public web PKI of a real image): they must poll through the cloud front end (issue 50).
//! Their Pods get the client certificate but **not** the Secret's `ca.crt` as their server CA,
//! which would replace their roots (the SDKs' setting does) and refuse the cloud's certificate:
//! that is the opt-in `tls.workersTrustMutualTLSCA`, unset here. Mutation: default it to
//! `true` in `TemporalConnectionSpec::worker_server_ca` and the workers fail their handshake
//! (`UnknownIssuer`), the Pod never becomes Ready and the wait below fails.
//!
//! Then the Connections' own status (issue 26 item 3), on the same front end: the cloud
//! Connection is Ready (`Reachable`) and lists its worker deployment, the impostor's is
//! `TemporalClientCreationFailed`; a Secret without `tls.key` and an expired client certificate
//! are `AuthSecretInvalid`; a certificate within the 14-day warning window stays Ready, with
//! `expiringSoon`, a `CertificateExpiringSoon` Warning event and the metric.
//!
//! `harness = false`: `main` re-runs this binary as a child with `SSL_CERT_FILE` set, since the
//! process environment cannot be changed safely once threads exist (as tests/secret_hygiene.rs).

#[path = "common/controller.rs"]
mod controller;

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::connection::TemporalConnectionStatus;
use temporal_worker_controller::api::{TemporalConnection, TemporalWorkerDeployment};
use test_harness::certs::{Authority, Usage};
use test_harness::manifests;
use test_harness::tls_proxy::{GrpcTlsProxy, ProxyAuth, TestPki};

const T: Duration = Duration::from_secs(90);
const NS: &str = "cloud-tls";
const TEMPORAL_NS: &str = "cloud-tls";
const DIR_ENV: &str = "TWC_CLOUD_TLS_PKI_DIR";

/// The PEM files the parent writes for the child.
const FILES: [&str; 12] = [
    "ca1",
    "ca2",
    "cloud-server-cert",
    "cloud-server-key",
    "impostor-server-cert",
    "impostor-server-key",
    "client-cert",
    "client-key",
    "expiring-client-cert",
    "expiring-client-key",
    "expired-client-cert",
    "expired-client-key",
];

/// `(year, month, day)` of `now` moved by `days` (UTC).
fn ymd(days: i64) -> (i32, u8, u8) {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * days);
    let d = t.to_zoned(jiff::tz::TimeZone::UTC).date();
    (i32::from(d.year()), d.month() as u8, d.day() as u8)
}

fn main() -> ExitCode {
    match std::env::var_os(DIR_ENV) {
        None => parent(),
        Some(dir) => child(Path::new(&dir)),
    }
}

fn generate(dir: &Path) -> Result<()> {
    let ca1 = Authority::new("public-root-ca")?;
    let ca2 = Authority::new("cert-manager-issuer")?;
    let ca3 = Authority::new("unknown-ca")?;
    let sans = ["localhost", "127.0.0.1"];
    let cloud = ca1.issue("localhost", None, &sans, Usage::Server)?;
    let impostor = ca3.issue("localhost", None, &sans, Usage::Server)?;
    let client = ca2.issue("twc-client", None, &[], Usage::Client)?;
    // Within the default 14-day warning window, and long expired.
    let expiring = ca2.issue_valid(
        "twc-client-expiring",
        None,
        &[],
        Usage::Client,
        Some((ymd(-1), ymd(4))),
    )?;
    let expired = ca2.issue_valid(
        "twc-client-expired",
        None,
        &[],
        Usage::Client,
        Some(((2020, 1, 1), (2020, 6, 1))),
    )?;
    std::fs::create_dir_all(dir)?;
    let pems = [
        &ca1.ca_pem,
        &ca2.ca_pem,
        &cloud.cert_pem,
        &cloud.key_pem,
        &impostor.cert_pem,
        &impostor.key_pem,
        &client.cert_pem,
        &client.key_pem,
        &expiring.cert_pem,
        &expiring.key_pem,
        &expired.cert_pem,
        &expired.key_pem,
    ];
    for (name, pem) in FILES.iter().zip(pems) {
        std::fs::write(dir.join(name), pem)?;
    }
    Ok(())
}

fn parent() -> ExitCode {
    let dir = std::env::temp_dir().join(format!("twc-cloud-tls-{}", std::process::id()));
    if let Err(e) = generate(&dir) {
        eprintln!("writing the test PKI to {}: {e:#}", dir.display());
        return ExitCode::FAILURE;
    }
    let status = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(DIR_ENV, &dir)
            // CA-1 is the one and only system root of the child.
            .env("SSL_CERT_FILE", dir.join("ca1"))
            .env_remove("SSL_CERT_DIR")
            .status()
    });
    let _ = std::fs::remove_dir_all(&dir);
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("temporal_cloud_tls: the test process ended with {s}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("temporal_cloud_tls: starting the test process: {e}");
            ExitCode::FAILURE
        }
    }
}

fn child(dir: &Path) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
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
    match rt.block_on(run(dir)) {
        Ok(report) => {
            println!("temporal_cloud_tls: ok\n{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("temporal_cloud_tls: FAILED: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A front end's PKI: `server` presents its certificate, client certificates must come from
/// CA-2 (the proxy checks clients against `ca_pem`).
fn front_end_pki(dir: &Path, server: &str) -> Result<TestPki> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).with_context(|| format!("reading {name}"))
    };
    Ok(TestPki {
        ca_pem: read("ca2")?,
        server_cert_pem: read(&format!("{server}-server-cert"))?,
        server_key_pem: read(&format!("{server}-server-key"))?,
        client_cert_pem: read("client-cert")?,
        client_key_pem: read("client-key")?,
    })
}

async fn run(dir: &Path) -> Result<String> {
    let crd_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crds");
    let plane = test_harness::control_plane::ControlPlane::start().await?;
    let client = plane.client().await?;
    test_harness::control_plane::install_crds(&client, &crd_dir).await?;
    let temporal = test_harness::temporal_server::shared().await?;
    temporal.create_namespace(TEMPORAL_NS).await?;
    let upstream: SocketAddr = temporal.address().parse()?;

    let cloud_pki = front_end_pki(dir, "cloud")?;
    let cloud = GrpcTlsProxy::start(upstream, &cloud_pki, ProxyAuth::ClientCert).await?;
    let impostor = GrpcTlsProxy::start(
        upstream,
        &front_end_pki(dir, "impostor")?,
        ProxyAuth::ClientCert,
    )
    .await?;

    let controller = controller::start(
        client.clone(),
        &[
            String::from("--identity=twc-cloud-tls"),
            String::from("--fast-poll=300ms"),
        ],
    )
    .await?;

    // The worker image's trust store: the public roots (CA-1) only.
    let kubelet = test_harness::kubelet::Kubelet::start_with(
        client.clone(),
        test_harness::kubelet::KubeletOptions {
            trusted_ca_pem: Some(read_pem(dir, "ca1")?.into_bytes()),
            ..Default::default()
        },
    )
    .await?;

    create_world(&client, &cloud_pki, &cloud, &impostor).await?;

    // Through the cloud front end: Temporal answered, so the version's Deployment exists.
    let made = wait_deployment(&client, "on-cloud").await?;
    let polling = wait_workers(&client, &kubelet, &made).await?;
    ensure!(
        cloud.forwarded() > 0 && cloud.rejected() == 0,
        "cloud front end: forwarded {}, rejected {}",
        cloud.forwarded(),
        cloud.rejected()
    );
    // The impostor is refused at the handshake: nothing reaches Temporal through it.
    let refused = wait_twd(
        &client,
        "on-impostor",
        "TemporalClientCreationFailed",
        |t| progressing(t).is_some_and(|(reason, _)| reason == "TemporalClientCreationFailed"),
    )
    .await?;
    let (_, message) = progressing(&refused).unwrap_or_default();
    ensure!(
        impostor.forwarded() == 0,
        "the impostor front end forwarded {} calls",
        impostor.forwarded()
    );
    ensure!(
        message.contains("certificate") || message.contains("Unknown"),
        "refusal does not say why: {message}"
    );
    let mut report = format!(
        "  on-cloud: Deployment {made} created, {polling} worker(s) polling with the image's \
         roots; cloud front end forwarded {} calls, rejected {}\n  \
         on-impostor: {message}\n  impostor front end forwarded {}, rejected {} handshakes\n",
        cloud.forwarded(),
        cloud.rejected(),
        impostor.forwarded(),
        impostor.rejected()
    );
    report.push_str(&connection_status(&client, dir, &cloud, controller.http_addr).await?);
    controller.stop().await;
    kubelet.shutdown().await;
    drop(plane);
    Ok(report)
}

/// Waits until versioned Deployment `dep` has a Ready Pod (its worker polls Temporal) and
/// checks what its workers trust: the image's roots, not the Secret's `ca.crt`.
async fn wait_workers(
    client: &kube::Client,
    kubelet: &test_harness::kubelet::Kubelet,
    dep: &str,
) -> Result<usize> {
    let api = Api::<Deployment>::namespaced(client.clone(), NS);
    let deadline = Instant::now() + T;
    loop {
        let ready = api
            .get(dep)
            .await?
            .status
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        let configs = kubelet.worker_configs(NS, dep);
        if ready >= 1 && !configs.is_empty() {
            for cfg in &configs {
                ensure!(
                    cfg.server_ca_pem.is_none() && cfg.client_cert_pem.is_some(),
                    "the workers must keep the image's roots: {cfg:?}"
                );
            }
            return Ok(configs.len());
        }
        if Instant::now() > deadline {
            bail!(
                "{dep}: no Ready worker Pod after {T:?} (its worker cannot poll through the cloud \
                 front end); workers {configs:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The namespace, a cert-manager-shaped Secret, two Connections and a TWD on each.
async fn create_world(
    client: &kube::Client,
    pki: &TestPki,
    cloud: &GrpcTlsProxy,
    impostor: &GrpcTlsProxy,
) -> Result<()> {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await?;
    // What cert-manager writes for a Certificate: type kubernetes.io/tls, and ca.crt is the
    // issuer of tls.crt (CA-2), not of the server.
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "temporal-cloud-mtls",
                             "annotations": {"cert-manager.io/certificate-name": "temporal-cloud",
                                             "cert-manager.io/issuer-name": "cert-manager-issuer"}},
                "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": pki.client_cert_pem, "tls.key": pki.client_key_pem,
                               "ca.crt": pki.ca_pem}
            }))?,
        )
        .await?;
    for (name, proxy) in [("cloud", cloud), ("impostor", impostor)] {
        let mut conn = manifests::connection(name, &proxy.host_port());
        manifests::merge(
            &mut conn["spec"],
            json!({"tls": {"serverName": "localhost"},
                   "mutualTLSSecretRef": {"name": "temporal-cloud-mtls"}}),
        );
        apply(client, conn).await?;
        let twd = manifests::twd(&format!("on-{name}"))
            .replicas(1)
            .tag("v1")
            .task_queue(&format!("{name}-queue"))
            .rollout(json!({"strategy": "AllAtOnce"}))
            .connection(name)
            .temporal_namespace(TEMPORAL_NS)
            .build();
        apply(client, twd).await?;
    }
    Ok(())
}

async fn apply(client: &kube::Client, manifest: Value) -> Result<()> {
    test_harness::world::apply(client, NS, "cloud-tls-test", manifest).await
}

/// `Progressing`'s reason and message.
fn progressing(t: &TemporalWorkerDeployment) -> Option<(String, String)> {
    t.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .map(|c| (c.reason.clone(), c.message.clone()))
    })
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

/// The name of the first versioned Deployment of TWD `name`.
async fn wait_deployment(client: &kube::Client, name: &str) -> Result<String> {
    let api = Api::<Deployment>::namespaced(client.clone(), NS);
    let twds = TemporalWorkerDeployment::api(client.clone(), NS, KindSet::Seed);
    let deadline = Instant::now() + T;
    loop {
        let list = api.list(&ListParams::default()).await?;
        let found = list.items.iter().find(|d| {
            d.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name == name)
        });
        if let Some(d) = found {
            return Ok(d.metadata.name.clone().unwrap_or_default());
        }
        if Instant::now() > deadline {
            let twd = twds.get(name).await?;
            bail!(
                "{name}: no versioned Deployment after {T:?} (the controller did not reach \
                 Temporal); status {}",
                serde_json::to_string_pretty(&twd.status)?
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// --- The Connections' own status (issue 26 item 3). ---

/// The Connection cases; returns their lines of the report.
async fn connection_status(
    client: &kube::Client,
    dir: &Path,
    cloud: &GrpcTlsProxy,
    metrics: SocketAddr,
) -> Result<String> {
    let started = Instant::now();
    let mut out = reachability(client).await?;
    out.push_str(&missing_key(client, dir, cloud).await?);
    out.push_str(&expiry(client, dir, cloud, metrics).await?);
    out.push_str(&format!(
        "  Connection cases took {:?}\n",
        started.elapsed()
    ));
    Ok(out)
}

fn read_pem(dir: &Path, name: &str) -> Result<String> {
    std::fs::read_to_string(dir.join(name)).with_context(|| format!("reading {name}"))
}

/// The cloud Connection is Ready and lists its worker; the impostor's cannot connect.
async fn reachability(client: &kube::Client) -> Result<String> {
    let ok = wait_conn(
        client,
        "cloud",
        "Ready=True/Reachable listing on-cloud",
        |s| {
            ready(s).is_some_and(|(st, r, _)| st == "True" && r == "Reachable")
                && s.worker_deployments == ["on-cloud"]
                && s.worker_deployment_count == 1
        },
    )
    .await?;
    let cert = ok
        .client_certificate
        .clone()
        .context("no clientCertificate")?;
    ensure!(
        !cert.expiring_soon,
        "a certificate valid until {:?} expiring soon",
        cert.not_after
    );
    // A second user is listed through the worker-deployment watch, well before the Connection's
    // 60 s recheck would find it (the first user's finalizer write already woke it).
    let second = manifests::twd("on-cloud-2")
        .replicas(1)
        .tag("v1")
        .task_queue("cloud-queue-2")
        .rollout(json!({"strategy": "AllAtOnce"}))
        .connection("cloud")
        .temporal_namespace(TEMPORAL_NS)
        .build();
    apply(client, second).await?;
    let listed = Instant::now();
    wait_conn_within(client, "cloud", "both users listed", USERS_SEEN, |s| {
        s.worker_deployments == ["on-cloud", "on-cloud-2"] && s.worker_deployment_count == 2
    })
    .await?;
    let listed = listed.elapsed();
    wait_conn(client, "impostor", "TemporalClientCreationFailed", |s| {
        ready(s).is_some_and(|(st, r, _)| st == "False" && r == "TemporalClientCreationFailed")
            && s.worker_deployments == ["on-impostor"]
    })
    .await?;
    Ok(format!(
        "  Connection cloud: Ready, lists on-cloud, notAfter {}; a second user listed after \
         {listed:?}; impostor: TemporalClientCreationFailed\n",
        cert.not_after.0
    ))
}

/// A Secret without `tls.key` (a kubernetes.io/tls Secret must have one, so this one is
/// Opaque) is AuthSecretInvalid, naming the key.
async fn missing_key(client: &kube::Client, dir: &Path, cloud: &GrpcTlsProxy) -> Result<String> {
    let data = json!({"tls.crt": read_pem(dir, "client-cert")?});
    secret(client, "missing-key", "Opaque", data).await?;
    connection(client, "missing-key", cloud, "missing-key").await?;
    let missing = wait_conn(client, "missing-key", "AuthSecretInvalid", |s| {
        ready(s).is_some_and(|(st, r, _)| st == "False" && r == "AuthSecretInvalid")
    })
    .await?;
    let (_, _, why) = ready(&missing).unwrap_or_default();
    ensure!(
        why.contains("tls.key"),
        "the message does not name the key: {why}"
    );
    Ok(format!("  Connection missing-key: {why}\n"))
}

/// A certificate within the warning window stays Ready with a Warning and the metric; an
/// expired one is AuthSecretInvalid and still shows its notAfter.
async fn expiry(
    client: &kube::Client,
    dir: &Path,
    cloud: &GrpcTlsProxy,
    metrics: SocketAddr,
) -> Result<String> {
    let tls = |cert: &str, key: &str| -> Result<Value> {
        Ok(
            json!({"tls.crt": read_pem(dir, cert)?, "tls.key": read_pem(dir, key)?,
                  "ca.crt": read_pem(dir, "ca2")?}),
        )
    };
    let data = tls("expiring-client-cert", "expiring-client-key")?;
    secret(client, "expiring-mtls", "kubernetes.io/tls", data).await?;
    connection(client, "expiring", cloud, "expiring-mtls").await?;
    let expiring = wait_conn(client, "expiring", "Ready=True with expiringSoon", |s| {
        ready(s).is_some_and(|(st, r, _)| st == "True" && r == "Reachable")
            && s.client_certificate
                .as_ref()
                .is_some_and(|c| c.expiring_soon)
    })
    .await?;
    let (_, _, message) = ready(&expiring).unwrap_or_default();
    ensure!(
        message.contains("expires at"),
        "Ready does not say when: {message}"
    );
    let event = wait_event(client, "expiring", "CertificateExpiringSoon").await?;
    let family = "temporal_worker_controller_connection_certificate";
    let line = wait_metric(metrics, &format!("{family}_expiring_soon"), "expiring", "1").await?;
    wait_metric(
        metrics,
        &format!("{family}_expiry_timestamp_seconds"),
        "expiring",
        "",
    )
    .await?;

    let data = tls("expired-client-cert", "expired-client-key")?;
    secret(client, "expired-mtls", "kubernetes.io/tls", data).await?;
    connection(client, "expired", cloud, "expired-mtls").await?;
    let expired = wait_conn(
        client,
        "expired",
        "AuthSecretInvalid with its notAfter",
        |s| {
            ready(s).is_some_and(|(st, r, _)| st == "False" && r == "AuthSecretInvalid")
                && s.client_certificate.is_some()
        },
    )
    .await?;
    let (_, _, why) = ready(&expired).unwrap_or_default();
    ensure!(why.contains("expires at 2020-06-01"), "{why}");
    Ok(format!(
        "  Connection expiring: Ready; event {event:?}; {line}\n  Connection expired: {why}\n"
    ))
}

async fn secret(client: &kube::Client, name: &str, type_: &str, data: Value) -> Result<()> {
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": name}, "type": type_, "stringData": data
            }))?,
        )
        .await?;
    Ok(())
}

/// A Connection through the cloud front end with the mTLS Secret `secret`.
async fn connection(
    client: &kube::Client,
    name: &str,
    cloud: &GrpcTlsProxy,
    secret: &str,
) -> Result<()> {
    let mut conn = manifests::connection(name, &cloud.host_port());
    manifests::merge(
        &mut conn["spec"],
        json!({"tls": {"serverName": "localhost"}, "mutualTLSSecretRef": {"name": secret}}),
    );
    apply(client, conn).await
}

/// `Ready`'s status, reason and message.
fn ready(s: &TemporalConnectionStatus) -> Option<(String, String, String)> {
    s.conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn wait_conn(
    client: &kube::Client,
    name: &str,
    what: &str,
    pred: impl Fn(&TemporalConnectionStatus) -> bool,
) -> Result<TemporalConnectionStatus> {
    wait_conn_within(client, name, what, T, pred).await
}

/// Shorter than the Connection's 60 s recheck: only a watch can make it.
const USERS_SEEN: Duration = Duration::from_secs(30);

async fn wait_conn_within(
    client: &kube::Client,
    name: &str,
    what: &str,
    within: Duration,
    pred: impl Fn(&TemporalConnectionStatus) -> bool,
) -> Result<TemporalConnectionStatus> {
    let api = TemporalConnection::api(client.clone(), NS, KindSet::Seed);
    let deadline = Instant::now() + within;
    loop {
        let status = api.get(name).await?.status.unwrap_or_default();
        if pred(&status) {
            return Ok(status);
        }
        if Instant::now() > deadline {
            bail!(
                "Connection {name}: timed out after {within:?} waiting for {what}; status {}",
                serde_json::to_string_pretty(&status)?
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The note of the Warning `reason` about Connection `name`.
async fn wait_event(client: &kube::Client, name: &str, reason: &str) -> Result<String> {
    let api = Api::<Event>::namespaced(client.clone(), NS);
    let deadline = Instant::now() + T;
    loop {
        let found = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().is_some_and(|r| {
                        r.name.as_deref() == Some(name)
                            && r.kind.as_deref() == Some("TemporalConnection")
                    })
            });
        if let Some(e) = found {
            return Ok(e.note.unwrap_or_default());
        }
        if Instant::now() > deadline {
            bail!("no Warning {reason} about Connection {name} after {T:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The sample of `family` for Connection `name` (with `value`, unless empty).
async fn wait_metric(addr: SocketAddr, family: &str, name: &str, value: &str) -> Result<String> {
    let deadline = Instant::now() + T;
    let label = format!("name=\"{name}\"");
    loop {
        let (code, body) =
            test_harness::loopback_http::get(addr, "/metrics", "text/plain", None).await?;
        ensure!(code == 200, "/metrics answered {code}");
        let found = body.lines().find(|l| {
            l.starts_with(&format!("{family}{{"))
                && l.contains(&label)
                && (value.is_empty() || l.ends_with(&format!(" {value}")))
        });
        if let Some(line) = found {
            return Ok(line.to_string());
        }
        if Instant::now() > deadline {
            bail!("no {family} sample for {name} (= {value:?}) after {T:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
