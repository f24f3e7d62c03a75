//! The TLS proxy makes the plaintext dev server look like an mTLS or API-key Temporal endpoint,
//! and real SDK clients and workers (built from controller-style env and mounted files, also
//! through the kubelet stand-in) connect through it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;
use temporalio_client::errors::ClientConnectError;
use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::{Code, Request};
use temporalio_client::{ClientTlsOptions, Connection, ConnectionOptions, TlsOptions, Url};
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeNamespaceRequest;
use test_harness::kubelet::{Kubelet, KubeletOptions};
use test_harness::names::unique;
use test_harness::tls_proxy::{GrpcTlsProxy, ProxyAuth, TestPki};
use test_harness::worker::{self, WorkerConfig};
use test_harness::{observe, temporal_server};

const DEADLINE: Duration = Duration::from_secs(60);
const CERT_PATH: &str = "/etc/temporal/tls/tls.crt";
const KEY_PATH: &str = "/etc/temporal/tls/tls.key";

fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn base_env(address: &str, ns: &str, deployment: &str, tq: &str) -> BTreeMap<String, String> {
    strings(&[
        ("TEMPORAL_ADDRESS", address),
        ("TEMPORAL_NAMESPACE", ns),
        ("TEMPORAL_DEPLOYMENT_NAME", deployment),
        ("TEMPORAL_WORKER_BUILD_ID", "v1"),
        ("TEMPORAL_TASK_QUEUE", tq),
    ])
}

/// [`test_harness::wait::eventually`] with this file's [`DEADLINE`].
async fn eventually<T, F, Fut>(what: &str, check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    test_harness::wait::eventually(what, DEADLINE, check).await
}

async fn dev_server_addr() -> Result<(&'static temporal_server::DevServer, SocketAddr)> {
    let server = temporal_server::shared().await?;
    let addr: SocketAddr = server.address().parse()?;
    Ok((server, addr))
}

/// What a TLS client of the proxy sends: always trusting the test CA and verifying `localhost`.
struct Creds<'a> {
    pki: &'a TestPki,
    client_cert: Option<(&'a str, &'a str)>,
    api_key: Option<&'a str>,
}

async fn connect(proxy: &GrpcTlsProxy, creds: Creds<'_>) -> Result<Connection, ClientConnectError> {
    let url = Url::parse(&format!("https://{}", proxy.host_port())).map_err(|e| {
        ClientConnectError::InvalidConfig(format!("bad proxy url {}: {e}", proxy.host_port()))
    })?;
    let client = creds.client_cert.map(|(cert, key)| {
        ClientTlsOptions::builder()
            .client_cert(cert.as_bytes().to_vec())
            .client_private_key(key.as_bytes().to_vec())
            .build()
    });
    let tls = TlsOptions::builder()
        .server_root_ca_cert(creds.pki.ca_pem.as_bytes().to_vec())
        .domain("localhost".to_string())
        .maybe_client_tls_options(client)
        .build();
    let opts = ConnectionOptions::new(url)
        .identity("tls-proxy-test".to_string())
        .tls_options(tls)
        .maybe_api_key(creds.api_key.map(str::to_string))
        .connect_timeout(Duration::from_secs(5))
        .build();
    match tokio::time::timeout(Duration::from_secs(30), Connection::connect(opts)).await {
        Ok(r) => r,
        Err(_) => Err(ClientConnectError::InvalidConfig(
            "test: connect timed out".into(),
        )),
    }
}

async fn describe_namespace(conn: &Connection, ns: &str) -> Result<()> {
    let mut svc = conn.clone();
    svc.describe_namespace(Request::new(DescribeNamespaceRequest {
        namespace: ns.to_string(),
        ..Default::default()
    }))
    .await
    .with_context(|| format!("DescribeNamespace {ns}"))?;
    Ok(())
}

#[test]
fn worker_config_from_pod_reads_tls_env_and_mounted_files() -> Result<()> {
    let pki = TestPki::generate()?;
    let mut env = base_env("proxy.example:7233", "ns", "k8s-ns/twd", "tq");
    env.extend(strings(&[
        ("TEMPORAL_TLS", "true"),
        ("TEMPORAL_TLS_SERVER_NAME", "localhost"),
        ("TEMPORAL_TLS_CLIENT_CERT_PATH", CERT_PATH),
        ("TEMPORAL_TLS_CLIENT_KEY_PATH", KEY_PATH),
    ]));
    let files: BTreeMap<String, Vec<u8>> = [
        (CERT_PATH, &pki.client_cert_pem),
        (KEY_PATH, &pki.client_key_pem),
        ("/etc/temporal/tls/ca.crt", &pki.ca_pem),
    ]
    .into_iter()
    .map(|(p, v)| (p.to_string(), v.as_bytes().to_vec()))
    .collect();

    assert_mtls_config_from_the_mounted_files(&pki, &env, &files)?;
    assert_missing_tls_material_is_a_clear_error(&env, &files);
    assert_an_api_key_alone_implies_tls()?;
    assert_plain_env_stays_plaintext()
}

/// The server CA as the SDK's envconfig reads it: a mounted file (`_PATH`) or the PEM itself
/// (`_DATA`), not both; either turns TLS on and replaces the image's trust store.
#[test]
fn worker_config_reads_the_server_ca_as_envconfig_does() -> Result<()> {
    let pki = TestPki::generate()?;
    let ca_path = "/etc/temporal/tls-ca/ca.crt";
    let files: BTreeMap<String, Vec<u8>> =
        BTreeMap::from([(ca_path.to_string(), pki.ca_pem.clone().into_bytes())]);
    let mut env = base_env("127.0.0.1:7233", "ns", "k8s-ns/twd", "tq");
    env.insert("TEMPORAL_TLS_SERVER_CA_CERT_PATH".into(), ca_path.into());
    let mut cfg = WorkerConfig::from_pod(&env, &files)?;
    assert_eq!(cfg.server_ca_pem.as_deref(), Some(pki.ca_pem.as_bytes()));
    assert!(cfg.uses_tls(), "a server CA alone means TLS");
    // The image's trust store is replaced, not added to.
    cfg.trusted_ca_pem = Some(b"image roots".to_vec());
    let tls = cfg
        .connection_options()?
        .tls_options
        .context("TLS options")?;
    assert_eq!(
        tls.server_root_ca_cert.as_deref(),
        Some(pki.ca_pem.as_bytes())
    );
    // Not mounted: a clear error naming the variable.
    let err = WorkerConfig::from_pod(&env, &BTreeMap::new()).expect_err("CA file missing");
    assert!(
        format!("{err:#}").contains("TEMPORAL_TLS_SERVER_CA_CERT_PATH"),
        "{err:#}"
    );
    // The PEM itself.
    let mut data = base_env("127.0.0.1:7233", "ns", "k8s-ns/twd", "tq");
    data.insert(
        "TEMPORAL_TLS_SERVER_CA_CERT_DATA".into(),
        pki.ca_pem.clone(),
    );
    let cfg = WorkerConfig::from_env(&data)?;
    assert_eq!(
        cfg.server_ca_pem.as_deref(),
        Some(pki.ca_pem.trim().as_bytes())
    );
    // Both: envconfig's refusal.
    let mut both = env.clone();
    both.insert(
        "TEMPORAL_TLS_SERVER_CA_CERT_DATA".into(),
        pki.ca_pem.clone(),
    );
    let err = WorkerConfig::from_pod(&both, &files).expect_err("both");
    assert!(
        format!("{err:#}").contains("Cannot specify both"),
        "{err:#}"
    );
    Ok(())
}

fn assert_mtls_config_from_the_mounted_files(
    pki: &TestPki,
    env: &BTreeMap<String, String>,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<()> {
    let cfg = WorkerConfig::from_pod(env, files)?;
    assert!(cfg.tls && cfg.uses_tls());
    assert_eq!(cfg.tls_server_name.as_deref(), Some("localhost"));
    assert_eq!(
        cfg.client_cert_pem.as_deref(),
        Some(pki.client_cert_pem.as_bytes())
    );
    assert_eq!(
        cfg.client_key_pem.as_deref(),
        Some(pki.client_key_pem.as_bytes())
    );
    assert_eq!(
        (cfg.api_key.as_deref(), cfg.trusted_ca_pem.as_deref()),
        (None, None)
    );
    let shown = format!("{cfg:?}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    assert!(!shown.contains("BEGIN"), "{shown}");
    assert!(shown.contains("client_key_pem: \"<present>\""), "{shown}");
    let opts = cfg.connection_options()?;
    assert_eq!(opts.target.scheme(), "https");
    let tls = opts.tls_options.context("TLS options")?;
    assert_eq!(tls.domain.as_deref(), Some("localhost"));
    assert!(tls.client_tls_options.is_some());
    Ok(())
}

/// The key file is not mounted: a clear error naming the path and the variable; and other
/// incomplete or malformed TLS settings are errors too.
fn assert_missing_tls_material_is_a_clear_error(
    env: &BTreeMap<String, String>,
    files: &BTreeMap<String, Vec<u8>>,
) {
    let mut only_cert = files.clone();
    only_cert.remove(KEY_PATH);
    let err = WorkerConfig::from_pod(env, &only_cert).expect_err("key file missing");
    let text = format!("{err:#}");
    assert!(
        text.contains(KEY_PATH) && text.contains("TEMPORAL_TLS_CLIENT_KEY_PATH"),
        "{text}"
    );
    // from_env is from_pod without files.
    assert!(WorkerConfig::from_env(env).is_err());
    // A certificate without a key is a configuration error.
    let mut half = env.clone();
    half.remove("TEMPORAL_TLS_CLIENT_KEY_PATH");
    let err = WorkerConfig::from_pod(&half, files).expect_err("key path missing");
    assert!(
        format!("{err:#}").contains("TEMPORAL_TLS_CLIENT_KEY_PATH"),
        "{err:#}"
    );
    let mut bad = env.clone();
    bad.insert("TEMPORAL_TLS".into(), "sometimes".into());
    assert!(WorkerConfig::from_pod(&bad, files).is_err());
}

/// API key only: TLS is implied, the key never shows.
fn assert_an_api_key_alone_implies_tls() -> Result<()> {
    let mut api = base_env("127.0.0.1:7233", "ns", "k8s-ns/twd", "tq");
    api.insert("TEMPORAL_API_KEY".into(), " s3cr3t-api-key\n".into());
    let cfg = WorkerConfig::from_env(&api)?;
    assert_eq!(cfg.api_key.as_deref(), Some("s3cr3t-api-key"));
    assert!(cfg.uses_tls());
    assert_eq!(cfg.connection_options()?.target.scheme(), "https");
    let shown = format!("{cfg:?}");
    assert!(!shown.contains("s3cr3t"), "{shown}");
    Ok(())
}

/// Plain env stays plaintext, as the dev server needs.
fn assert_plain_env_stays_plaintext() -> Result<()> {
    let mut plain = base_env("127.0.0.1:7233", "ns", "k8s-ns/twd", "tq");
    plain.insert("TEMPORAL_TLS".into(), "false".into());
    let cfg = WorkerConfig::from_env(&plain)?;
    assert!(!cfg.uses_tls());
    let opts = cfg.connection_options()?;
    assert_eq!(opts.target.scheme(), "http");
    assert!(opts.tls_options.is_none() && opts.api_key.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_proxy_requires_a_client_certificate_from_the_ca() -> Result<()> {
    let (server, upstream) = dev_server_addr().await?;
    let ns = unique("tls-mtls");
    server.create_namespace(&ns).await?;
    let pki = TestPki::generate()?;
    let proxy = GrpcTlsProxy::start(upstream, &pki, ProxyAuth::ClientCert).await?;

    let conn = connect(
        &proxy,
        Creds {
            pki: &pki,
            client_cert: Some((&pki.client_cert_pem, &pki.client_key_pem)),
            api_key: None,
        },
    )
    .await
    .context("mTLS connect with the client certificate")?;
    let before = proxy.forwarded();
    describe_namespace(&conn, &ns).await?;
    assert!(proxy.forwarded() > before, "{proxy:?}");
    assert_eq!(proxy.rejected(), 0, "{proxy:?}");

    // No client certificate: the handshake is refused.
    let err = connect(
        &proxy,
        Creds {
            pki: &pki,
            client_cert: None,
            api_key: None,
        },
    )
    .await
    .err()
    .context("connecting without a client certificate must fail")?;
    eprintln!("without a client certificate: {err}");
    eventually("a rejected handshake", || async {
        Ok((proxy.rejected() >= 1).then_some(()))
    })
    .await?;

    // A certificate from another CA is refused as well.
    let other = TestPki::generate()?;
    let rejected = proxy.rejected();
    let err = connect(
        &proxy,
        Creds {
            pki: &pki,
            client_cert: Some((&other.client_cert_pem, &other.client_key_pem)),
            api_key: None,
        },
    )
    .await
    .err()
    .context("connecting with a foreign client certificate must fail")?;
    eprintln!("with a foreign client certificate: {err}");
    eventually("a second rejected handshake", || async {
        Ok((proxy.rejected() > rejected).then_some(()))
    })
    .await?;

    // The good connection still works.
    describe_namespace(&conn, &ns).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_proxy_checks_the_bearer_token() -> Result<()> {
    let (server, upstream) = dev_server_addr().await?;
    let ns = unique("tls-apikey");
    server.create_namespace(&ns).await?;
    let pki = TestPki::generate()?;
    let key = "twc-test-api-key";
    let proxy = GrpcTlsProxy::start(upstream, &pki, ProxyAuth::ApiKey(key.into())).await?;

    let conn = connect(
        &proxy,
        Creds {
            pki: &pki,
            client_cert: None,
            api_key: Some(key),
        },
    )
    .await
    .context("connecting with the right API key")?;
    let before = proxy.forwarded();
    describe_namespace(&conn, &ns).await?;
    assert!(proxy.forwarded() > before, "{proxy:?}");
    assert_eq!(proxy.rejected(), 0, "{proxy:?}");

    for wrong in [Some("not-the-key"), None] {
        let rejected = proxy.rejected();
        let forwarded = proxy.forwarded();
        let err = connect(
            &proxy,
            Creds {
                pki: &pki,
                client_cert: None,
                api_key: wrong,
            },
        )
        .await
        .err()
        .with_context(|| format!("API key {wrong:?} must be refused"))?;
        match &err {
            ClientConnectError::SystemInfoCallError(status) => {
                assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
                assert!(status.message().contains("API key"), "{status:?}");
            }
            other => bail!("expected Unauthenticated from GetSystemInfo, got {other:?}"),
        }
        assert_eq!(proxy.rejected(), rejected + 1, "{proxy:?}");
        assert_eq!(proxy.forwarded(), forwarded, "{proxy:?}");
    }

    // The server itself is still reachable with the right key.
    describe_namespace(&conn, &ns).await?;
    Ok(())
}

/// Runs a real versioned worker built by `from_pod` through `proxy` and checks that its polls
/// go through the proxy and it shows up as a poller of the dev server.
async fn run_worker_through(
    server: &temporal_server::DevServer,
    proxy: &GrpcTlsProxy,
    cfg: WorkerConfig,
) -> Result<()> {
    let before = proxy.forwarded();
    let identity = cfg.identity.clone();
    let (ns, tq, deployment) = (
        cfg.namespace.clone(),
        cfg.task_queue.clone(),
        cfg.deployment_name.clone(),
    );
    let handle = worker::spawn(cfg)?;
    handle.wait_running(DEADLINE).await?;
    let direct = server.connect("tls-proxy-test").await?;
    observe::wait_poller(
        &direct,
        &ns,
        &tq,
        &deployment,
        "v1",
        Some(&identity),
        DEADLINE,
    )
    .await?;
    // Connect + a few polls at the very least.
    eventually("the worker's polls through the proxy", || async {
        Ok((proxy.forwarded() >= before + 3).then_some(()))
    })
    .await?;
    handle.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_from_pod_runs_through_mtls_and_api_key_proxies() -> Result<()> {
    let (server, upstream) = dev_server_addr().await?;
    let ns = unique("tls-worker");
    server.create_namespace(&ns).await?;
    let pki = TestPki::generate()?;

    // mTLS: the env the controller injects plus the files of the mounted Secret volume.
    let proxy = GrpcTlsProxy::start(upstream, &pki, ProxyAuth::ClientCert).await?;
    let mut env = base_env(
        &proxy.host_port(),
        &ns,
        &format!("{}/mtls", unique("k8s-ns")),
        &unique("tq"),
    );
    env.extend(strings(&[
        ("TEMPORAL_TLS", "true"),
        ("TEMPORAL_TLS_SERVER_NAME", "localhost"),
        ("TEMPORAL_TLS_CLIENT_CERT_PATH", CERT_PATH),
        ("TEMPORAL_TLS_CLIENT_KEY_PATH", KEY_PATH),
    ]));
    let files = BTreeMap::from([
        (
            CERT_PATH.to_string(),
            pki.client_cert_pem.clone().into_bytes(),
        ),
        (
            KEY_PATH.to_string(),
            pki.client_key_pem.clone().into_bytes(),
        ),
    ]);
    let mut cfg = WorkerConfig::from_pod(&env, &files)?;
    cfg.trusted_ca_pem = Some(pki.ca_pem.clone().into_bytes());
    let t = Instant::now();
    run_worker_through(server, &proxy, cfg)
        .await
        .context("worker through the mTLS proxy")?;
    eprintln!("mTLS worker verified in {:?}: {proxy:?}", t.elapsed());
    assert_eq!(proxy.rejected(), 0, "{proxy:?}");

    // API key: no server name, so the certificate's IP SAN 127.0.0.1 is what gets verified.
    let key = "worker-api-key";
    let proxy = GrpcTlsProxy::start(upstream, &pki, ProxyAuth::ApiKey(key.into())).await?;
    let mut env = base_env(
        &proxy.host_port(),
        &ns,
        &format!("{}/apikey", unique("k8s-ns")),
        &unique("tq"),
    );
    env.extend(strings(&[
        ("TEMPORAL_TLS", "true"),
        ("TEMPORAL_API_KEY", key),
    ]));
    let mut cfg = WorkerConfig::from_env(&env)?;
    cfg.trusted_ca_pem = Some(pki.ca_pem.clone().into_bytes());
    let t = Instant::now();
    run_worker_through(server, &proxy, cfg)
        .await
        .context("worker through the API-key proxy")?;
    eprintln!("API-key worker verified in {:?}: {proxy:?}", t.elapsed());
    assert_eq!(proxy.rejected(), 0, "{proxy:?}");
    Ok(())
}

fn deployment(
    name: &str,
    env: serde_json::Value,
    volumes: serde_json::Value,
) -> Result<Deployment> {
    let mounts: Vec<serde_json::Value> = volumes
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| json!({"name": v["name"], "mountPath": "/etc/temporal/tls", "readOnly": true}))
        .collect();
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"temporal.io/build-id": "v1"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name, "temporal.io/build-id": "v1"}},
            "template": {
                "metadata": {"labels": {"app": name, "temporal.io/build-id": "v1"}},
                "spec": {
                    "containers": [{
                        "name": "worker",
                        "image": "registry.example/worker:1",
                        "env": env,
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                }
            }
        }
    }))?)
}

/// Waits until kube-controller-manager has reported on the current generation and
/// `pred(ready, Available)` holds.
async fn wait_status(
    api: &Api<Deployment>,
    name: &str,
    what: &str,
    pred: impl Fn(i32, &str) -> bool,
) -> Result<()> {
    let started = Instant::now();
    loop {
        let d = api.get(name).await?;
        let status = d.status.clone().unwrap_or_default();
        let current = status.observed_generation == d.metadata.generation;
        let available = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_.as_deref() == Some("Available"))
            .and_then(|c| c.status.clone())
            .unwrap_or_default();
        if current && pred(status.ready_replicas.unwrap_or(0), &available) {
            return Ok(());
        }
        if started.elapsed() > DEADLINE {
            bail!("timed out waiting for {what} of {name}; status: {status:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One namespace of the real control plane with the kubelet stand-in, and a plaintext connection to the
/// dev server to see pollers from Temporal's side.
struct KubeletWorld<'a> {
    kubelet: &'a Kubelet,
    deployments: Api<Deployment>,
    secrets: Api<Secret>,
    k8s_ns: String,
    temporal_ns: String,
    direct: Connection,
}

impl KubeletWorld<'_> {
    /// Deployment `<name>-v1` dialling `proxy` with the base env plus `extra_env` and
    /// `volumes`, whose credentials come from `secret`: while the Secret is missing the pod
    /// cannot start (ContainerCreating) and nothing reaches the proxy; once it exists the
    /// replica becomes ready and its worker polls Temporal through the proxy. Returns the
    /// running worker's config.
    async fn pod_waits_for_its_secret(
        &self,
        name: &str,
        proxy: &GrpcTlsProxy,
        extra_env: serde_json::Value,
        volumes: serde_json::Value,
        secret: serde_json::Value,
    ) -> Result<WorkerConfig> {
        let tq = unique("tq");
        let temporal_deployment = format!("{}/{name}", self.k8s_ns);
        let dep = format!("{name}-v1");
        let mut env = json!([
            {"name": "TEMPORAL_ADDRESS", "value": proxy.host_port()},
            {"name": "TEMPORAL_NAMESPACE", "value": self.temporal_ns},
            {"name": "TEMPORAL_DEPLOYMENT_NAME", "value": temporal_deployment},
            {"name": "TEMPORAL_WORKER_BUILD_ID", "value": "v1"},
            {"name": "TEMPORAL_TLS", "value": "true"},
            {"name": "TEMPORAL_TASK_QUEUE", "value": tq},
        ]);
        if let (Some(all), Some(extra)) = (env.as_array_mut(), extra_env.as_array()) {
            all.extend(extra.iter().cloned());
        }
        self.deployments
            .create(&PostParams::default(), &deployment(&dep, env, volumes)?)
            .await?;
        wait_status(
            &self.deployments,
            &dep,
            "a not-available status",
            |ready, available| ready == 0 && available == "False",
        )
        .await?;
        assert_eq!(self.kubelet.running_workers(&self.k8s_ns, &dep), 0);
        assert_eq!(proxy.forwarded() + proxy.rejected(), 0, "{proxy:?}");

        self.secrets
            .create(&PostParams::default(), &serde_json::from_value(secret)?)
            .await?;
        let t = Instant::now();
        wait_status(
            &self.deployments,
            &dep,
            "1 ready replica",
            |ready, available| ready == 1 && available == "True",
        )
        .await?;
        eprintln!("{dep} ready {:?} after its Secret appeared", t.elapsed());
        // The Deployment's status comes from kube-controller-manager; poll the kubelet anyway.
        let cfg = eventually(&format!("a running {dep} worker"), || async {
            Ok(self
                .kubelet
                .worker_configs(&self.k8s_ns, &dep)
                .into_iter()
                .next())
        })
        .await?;
        observe::wait_poller(
            &self.direct,
            &self.temporal_ns,
            &tq,
            &temporal_deployment,
            "v1",
            Some(&cfg.identity),
            DEADLINE,
        )
        .await?;
        assert!(proxy.forwarded() > 0, "{proxy:?}");
        Ok(cfg)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_mounts_secret_volumes_and_trusts_the_image_ca() -> Result<()> {
    let (server, upstream) = dev_server_addr().await?;
    let temporal_ns = unique("tls-kubelet");
    server.create_namespace(&temporal_ns).await?;
    let pki = TestPki::generate()?;
    let mtls = GrpcTlsProxy::start(upstream, &pki, ProxyAuth::ClientCert).await?;
    let api_key = "kubelet-api-key";
    let keyed = GrpcTlsProxy::start(upstream, &pki, ProxyAuth::ApiKey(api_key.into())).await?;

    let client = test_harness::control_plane::shared()
        .await?
        .client()
        .await?;
    let kubelet = Kubelet::start_with(
        client.clone(),
        KubeletOptions {
            trusted_ca_pem: Some(pki.ca_pem.clone().into_bytes()),
            ..Default::default()
        },
    )
    .await?;
    let k8s_ns = unique("kubelet-tls");
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": k8s_ns}}))?,
        )
        .await?;
    let world = KubeletWorld {
        kubelet: &kubelet,
        deployments: Api::namespaced(client.clone(), &k8s_ns),
        secrets: Api::namespaced(client.clone(), &k8s_ns),
        k8s_ns: k8s_ns.clone(),
        temporal_ns: temporal_ns.clone(),
        direct: server.connect("tls-kubelet-test").await?,
    };

    // mTLS exactly as the controller injects it: env paths plus the `temporal-tls` volume.
    let cfg = world
        .pod_waits_for_its_secret(
            "mtls",
            &mtls,
            json!([
                {"name": "TEMPORAL_TLS_SERVER_NAME", "value": "localhost"},
                {"name": "TEMPORAL_TLS_CLIENT_CERT_PATH", "value": CERT_PATH},
                {"name": "TEMPORAL_TLS_CLIENT_KEY_PATH", "value": KEY_PATH},
            ]),
            json!([{"name": "temporal-tls", "secret": {"secretName": "worker-mtls"}}]),
            json!({
                "metadata": {"name": "worker-mtls"},
                "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": pki.client_cert_pem, "tls.key": pki.client_key_pem},
            }),
        )
        .await?;
    assert_eq!(
        cfg.client_cert_pem.as_deref(),
        Some(pki.client_cert_pem.as_bytes())
    );
    assert_eq!(cfg.trusted_ca_pem.as_deref(), Some(pki.ca_pem.as_bytes()));

    // API key from a `secretKeyRef`; again the Secret is missing at first.
    let cfg = world
        .pod_waits_for_its_secret(
            "keyed",
            &keyed,
            json!([{"name": "TEMPORAL_API_KEY",
                    "valueFrom": {"secretKeyRef": {"name": "worker-key", "key": "api-key"}}}]),
            json!([]),
            json!({"metadata": {"name": "worker-key"}, "stringData": {"api-key": api_key}}),
        )
        .await?;
    assert_eq!(cfg.api_key.as_deref(), Some(api_key));
    assert_eq!(keyed.rejected(), 0, "{keyed:?}");

    kubelet.shutdown().await;
    Ok(())
}
