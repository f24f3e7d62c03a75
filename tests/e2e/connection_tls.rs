//! A Temporal frontend behind a private CA, and workers with credentials of their own (issue 50
//! items 1 and 2), on the real control plane with real workers in the kubelet stand-in, which
//! trusts no test CA of its own (its workers trust only what their Pod gives them).
//!
//! - **Private CA** (`tls.caCertSecretRef`, the Go controller v1.10's field): a TLS front end
//!   with a server certificate from a private CA, asking for an API key. The controller
//!   connects (system roots plus the CA), and the workers verify the frontend with the CA
//!   mounted into their Pods (`TEMPORAL_TLS_SERVER_CA_CERT_PATH`), poll, and the rollout
//!   completes; pointing `caCertSecretRef` at another Secret rolls the workers onto it. The
//!   control inside the test: the same worker config without that CA fails its handshake.
//!   **Mutation** (run): make `TemporalConnectionSpec::worker_server_ca`
//!   (`src/api/connection.rs`) return `None` (or drop the CA env var in
//!   `src/render/inject.rs`): the Pods get no CA, their workers trust the system roots only,
//!   the handshake fails (`UnknownIssuer`), no Pod becomes Ready and the wait for
//!   `Ready=True/RolloutComplete` fails.
//! - **Worker credentials** (`workerCredentials`): the controller uses its client certificate,
//!   the workers another one from their own Secret (with the opt-in
//!   `tls.workersTrustMutualTLSCA`, as the stand-in trusts no CA). The Pods (spec and the
//!   stand-in's worker environment) hold only the worker Secret, the workers poll and the
//!   rollout completes.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::{KindSet, TemporalConnection};
use test_harness::certs::{Authority, CertPair, Usage};
use test_harness::tls_proxy::{GrpcTlsProxy, ProxyAuth, TestPki};

use crate::support::*;

const T: Duration = Duration::from_secs(150);
/// A worker that cannot verify the server fails within the SDK's connect retries.
const T_REFUSED: Duration = Duration::from_secs(60);

/// A CA, its server certificate for `localhost` / `127.0.0.1`, and `clients` client
/// certificates.
fn pki(ca_name: &str, clients: &[&str]) -> Result<(TestPki, Vec<CertPair>)> {
    let ca = Authority::new(ca_name)?;
    let server = ca.issue(
        "localhost",
        None,
        &["localhost", "127.0.0.1"],
        Usage::Server,
    )?;
    let clients = clients
        .iter()
        .map(|cn| ca.issue(cn, None, &[], Usage::Client))
        .collect::<Result<Vec<_>>>()?;
    let first = clients.first().cloned().unwrap_or(CertPair {
        cert_pem: String::new(),
        key_pem: String::new(),
    });
    let pki = TestPki {
        ca_pem: ca.ca_pem.clone(),
        server_cert_pem: server.cert_pem,
        server_key_pem: server.key_pem,
        client_cert_pem: first.cert_pem,
        client_key_pem: first.key_pem,
    };
    Ok((pki, clients))
}

fn upstream(c: &Case) -> Result<SocketAddr> {
    c.env
        .temporal_address
        .parse()
        .context("the dev server's address")
}

async fn secret(c: &Case, name: &str, type_: &str, data: Value) -> Result<()> {
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(c.client.clone(), &c.ns);
    api.create(
        &Default::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": name}, "type": type_, "stringData": data
        }))?,
    )
    .await?;
    Ok(())
}

/// A WorkerDeployment-shaped TWD on Connection `connection`, one replica.
async fn apply_twd(c: &Case, name: &str, connection: &str) -> Result<()> {
    let twd = test_harness::manifests::twd(name)
        .replicas(1)
        .tag("v1")
        .task_queue(&c.task_queue)
        .rollout(json!({"strategy": "AllAtOnce"}))
        .connection(connection)
        .temporal_namespace(&c.temporal_ns)
        .build();
    c.apply(twd).await
}

/// The Pods of versioned Deployment `dep`, as JSON.
async fn pods_of(c: &Case, name: &str, build: &str) -> Result<Vec<Value>> {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &c.ns);
    let selector = format!("temporal.io/build-id={build}");
    let list = pods.list(&ListParams::default().labels(&selector)).await?;
    let values: Vec<Value> = list
        .items
        .iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("temporal.io/deployment-name"))
                .is_some_and(|v| *v == temporal_worker_controller::render::label_value(name))
        })
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    ensure!(!values.is_empty(), "no Pods of {name} {build}");
    Ok(values)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_verify_a_private_ca_frontend_with_the_ca_their_pods_are_given() -> Result<()> {
    let c = case("private-ca").await?;
    let Some(kubelet) = c.env.kubelet.as_ref() else {
        eprintln!("skipped: needs the kubelet stand-in (its workers' trust store)");
        return Ok(());
    };
    let (pki, _) = pki("private-ca", &[])?;
    let key = "e2e-private-ca-key";
    let proxy = GrpcTlsProxy::start(upstream(&c)?, &pki, ProxyAuth::ApiKey(key.into())).await?;
    secret(&c, "private-ca", "Opaque", json!({"ca.crt": pki.ca_pem})).await?;
    secret(&c, "api-key", "Opaque", json!({"apiKey": key})).await?;
    let mut conn = test_harness::manifests::connection("private", &proxy.host_port());
    test_harness::manifests::merge(
        &mut conn["spec"],
        json!({"apiKeySecretRef": {"name": "api-key", "key": "apiKey"},
               "tls": {"serverName": "localhost", "caCertSecretRef": {"name": "private-ca"}}}),
    );
    c.apply(conn).await?;
    apply_twd(&c, "orders", "private").await?;

    let twd = c
        .wait_twd("orders", "Ready=True/RolloutComplete", T, is_ready)
        .await?;
    let build = current_build(&twd).context("Ready without a current version")?;
    let dep = deployment_of("orders", &build);
    ensure!(proxy.forwarded() > 0, "nothing went through the front end");
    // The Connection's own check, through the same pool: Ready, Reachable.
    let conns = TemporalConnection::api(c.client.clone(), &c.ns, KindSet::Seed);
    eventually("Connection private Ready=True/Reachable", T, || async {
        let conn = conns.get("private").await?;
        let ready = conn
            .status
            .iter()
            .flat_map(|s| s.conditions.iter())
            .any(|c| c.type_ == "Ready" && c.status == "True" && c.reason == "Reachable");
        Ok(ready.then_some(()))
    })
    .await?;

    // The Pod as rendered: the CA Secret's ca.crt alone, and the SDK's variable naming it.
    let pods = pods_of(&c, "orders", &build).await?;
    for pod in &pods {
        let spec = &pod["spec"];
        let ca_volume = spec["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["secret"]["secretName"] == "private-ca")
            .context("no volume of the CA Secret")?;
        ensure!(
            ca_volume["secret"]["items"] == json!([{"key": "ca.crt", "path": "ca.crt"}]),
            "{ca_volume}"
        );
        let env = &spec["containers"][0]["env"];
        ensure!(
            env.as_array()
                .into_iter()
                .flatten()
                .any(|e| e["name"] == "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
                    && e["value"] == "/etc/temporal/tls-ca/ca.crt"),
            "{env}"
        );
    }
    // The stand-in's worker read it from the mounted file, and trusts nothing else.
    let configs = kubelet.worker_configs(&c.ns, &dep);
    ensure!(!configs.is_empty(), "no running worker of {dep}");
    for cfg in &configs {
        ensure!(
            cfg.server_ca_pem.as_deref() == Some(pki.ca_pem.as_bytes())
                && cfg.trusted_ca_pem.is_none(),
            "{cfg:?}"
        );
    }

    ca_change_rolls_the_workers(&c, &proxy, &pki, &build).await?;

    // The control: the same worker without the CA cannot verify the frontend.
    let mut without = configs[0].clone();
    without.server_ca_pem = None;
    without.identity = format!("no-ca@{build}");
    let refused = test_harness::worker::spawn(without)?;
    let outcome = refused.wait_running(T_REFUSED).await;
    ensure!(
        outcome.is_err(),
        "a worker without the CA connected to the private-CA frontend"
    );
    drop(refused);
    check_not_denied()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_with_their_own_credentials_hold_only_their_secret_and_roll_out() -> Result<()> {
    let c = case("worker-creds").await?;
    let Some(kubelet) = c.env.kubelet.as_ref() else {
        eprintln!("skipped: needs the kubelet stand-in");
        return Ok(());
    };
    let (pki, clients) = pki("worker-creds-ca", &["twc-controller", "twc-workers"])?;
    let (controller_cert, worker_cert) = (&clients[0], &clients[1]);
    let proxy = GrpcTlsProxy::start(upstream(&c)?, &pki, ProxyAuth::ClientCert).await?;
    for (name, pair) in [
        ("controller-mtls", controller_cert),
        ("worker-mtls", worker_cert),
    ] {
        let data = json!({"tls.crt": pair.cert_pem, "tls.key": pair.key_pem, "ca.crt": pki.ca_pem});
        secret(&c, name, "kubernetes.io/tls", data).await?;
    }
    let mut conn = test_harness::manifests::connection("split", &proxy.host_port());
    test_harness::manifests::merge(
        &mut conn["spec"],
        json!({"mutualTLSSecretRef": {"name": "controller-mtls"},
               "workerCredentials": {"mutualTLSSecretRef": {"name": "worker-mtls"}},
               "tls": {"serverName": "localhost", "workersTrustMutualTLSCA": true}}),
    );
    c.apply(conn).await?;
    apply_twd(&c, "billing", "split").await?;

    let twd = c
        .wait_twd("billing", "Ready=True/RolloutComplete", T, is_ready)
        .await?;
    let build = current_build(&twd).context("Ready without a current version")?;
    let dep = deployment_of("billing", &build);
    ensure!(
        proxy.forwarded() > 0 && proxy.rejected() == 0,
        "front end: forwarded {}, rejected {}",
        proxy.forwarded(),
        proxy.rejected()
    );

    // The controller's Secret is nowhere in the Deployment or its Pods.
    let deployment = serde_json::to_value(c.deployments().get(&dep).await?)?;
    let pods = pods_of(&c, "billing", &build).await?;
    for (what, obj) in std::iter::once(("Deployment", &deployment["spec"]["template"]))
        .chain(pods.iter().map(|p| ("Pod", &p["spec"])))
    {
        let text = obj.to_string();
        ensure!(
            !text.contains("controller-mtls") && text.contains("worker-mtls"),
            "{what}: {text}"
        );
    }
    // The stand-in's workers hold the worker certificate, never the controller's.
    let configs = kubelet.worker_configs(&c.ns, &dep);
    ensure!(!configs.is_empty(), "no running worker of {dep}");
    for cfg in &configs {
        ensure!(
            cfg.client_cert_pem.as_deref() == Some(worker_cert.cert_pem.as_bytes())
                && cfg.client_key_pem.as_deref() == Some(worker_cert.key_pem.as_bytes())
                && cfg.server_ca_pem.as_deref() == Some(pki.ca_pem.as_bytes()),
            "{cfg:?}"
        );
    }
    check_not_denied()
}

/// A CA change rolls the workers, as a credential change does: the same version's Deployment
/// gets a template naming the new Secret, and its new Pods become Ready.
async fn ca_change_rolls_the_workers(
    c: &Case,
    proxy: &GrpcTlsProxy,
    pki: &TestPki,
    build: &str,
) -> Result<()> {
    let dep = deployment_of("orders", build);
    secret(c, "private-ca-2", "Opaque", json!({"ca.crt": pki.ca_pem})).await?;
    let mut moved = test_harness::manifests::connection("private", &proxy.host_port());
    test_harness::manifests::merge(
        &mut moved["spec"],
        json!({"apiKeySecretRef": {"name": "api-key", "key": "apiKey"},
               "tls": {"serverName": "localhost", "caCertSecretRef": {"name": "private-ca-2"}}}),
    );
    c.apply(moved).await?;
    eventually("the workers rolled onto private-ca-2", T, || async {
        let d = c.deployments().get(&dep).await?;
        let text = serde_json::to_string(&d.spec)?;
        let status = d.status.unwrap_or_default();
        let rolled = text.contains("\"private-ca-2\"")
            && status.observed_generation == d.metadata.generation
            && status.updated_replicas == Some(1)
            && status.ready_replicas == Some(1)
            && status.replicas == Some(1);
        Ok(rolled.then_some(()))
    })
    .await?;
    // The Deployment counts only Pods not being deleted: the old one may still be terminating
    // (the kubelet stops its worker within the grace period), so wait for it to be gone.
    eventually("no Pod of the old template is left", T, || async {
        let pods = pods_of(c, "orders", build).await?;
        let moved = pods
            .iter()
            .all(|p| p["spec"].to_string().contains("\"private-ca-2\""));
        Ok(moved.then_some(()))
    })
    .await
}
