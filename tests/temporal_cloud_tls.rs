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
//! `harness = false`: `main` re-runs this binary as a child with `SSL_CERT_FILE` set, since the
//! process environment cannot be changed safely once threads exist (as tests/secret_hygiene.rs).

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use test_harness::certs::{Authority, Usage};
use test_harness::manifests;
use test_harness::tls_proxy::{GrpcTlsProxy, ProxyAuth, TestPki};

const T: Duration = Duration::from_secs(90);
const NS: &str = "cloud-tls";
const TEMPORAL_NS: &str = "cloud-tls";
const DIR_ENV: &str = "TWC_CLOUD_TLS_PKI_DIR";

/// The PEM files the parent writes for the child.
const FILES: [&str; 8] = [
    "ca1",
    "ca2",
    "cloud-server-cert",
    "cloud-server-key",
    "impostor-server-cert",
    "impostor-server-key",
    "client-cert",
    "client-key",
];

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

    let controller = temporal_worker_controller::run::start(
        client.clone(),
        temporal_worker_controller::run::RunOptions {
            http_addr: "127.0.0.1:0".parse()?,
            identity: "twc-cloud-tls".into(),
            fast_poll: Duration::from_millis(300),
            ..Default::default()
        },
    )
    .await?;

    create_world(&client, &cloud_pki, &cloud, &impostor).await?;

    // Through the cloud front end: Temporal answered, so the version's Deployment exists.
    let made = wait_deployment(&client, "on-cloud").await?;
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
    let report = format!(
        "  on-cloud: Deployment {made} created; cloud front end forwarded {} calls, rejected {}\n  \
         on-impostor: {message}\n  impostor front end forwarded {}, rejected {} handshakes\n",
        cloud.forwarded(),
        cloud.rejected(),
        impostor.forwarded(),
        impostor.rejected()
    );
    controller.stop().await;
    drop(plane);
    Ok(report)
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
