//! Releases users can install and upgrade (issue 29 items 3 and 4, issue 48), with Helm 4
//! `--wait` on the real control plane, the controller running **as the chart's own Pod from its
//! image**: the test build's binary is packaged by `tools/image/package.sh` and pushed to the
//! rig's registry (`tests/harness/src/registry.rs`), both charts are `helm push`ed there and
//! installed from `oci://127.0.0.1:<port>/charts/…`, the image pinned by digest; the kubelet
//! stand-in pulls it and runs the Pod from the image's own root file system (`tests/harness/
//! src/kubelet/{image,container_root,controller_pod}.rs`: its entrypoint with the chart's args,
//! env, downward API, a TokenRequest token for its ServiceAccount with the API server's CA, its
//! mounts, as 65532 with a read-only root, Ready from its readiness probe). Each install checks
//! that the controller process runs as 65532:65532 on a read-only root that is the image's and
//! loaded as many system trust roots as the image's CA bundle holds (its start log line).
//!
//! - `helm_install_wait_runs_the_controller_as_its_pod`: the CRD chart, then the controller
//!   chart, each `helm install --wait`; the controller's Pod is Ready, holds the Lease under its
//!   downward-API name, keeps its webhook certificate in the Secret `webhook.certSecretName`
//!   names, passes `helm test` (its test Pod asks `/readyz` through the Service) and reconciles
//!   a WorkerDeployment to v1 Current. Then, on the same cluster: `/metrics` (behind a
//!   TokenReview) refuses no token and takes the one the chart arranges for its ServiceMonitor;
//!   `helm test` fails for a release
//!   whose `/readyz` answers 503; a user bound only to the built-in `edit` ClusterRole in a
//!   namespace creates a WorkerDeployment and one bound to `view` reads but cannot create one
//!   (kube-controller-manager's clusterrole-aggregation controller fills `edit` and `view` from
//!   the chart's aggregated roles); a `replicas: 2` release gets a PodDisruptionBudget that the
//!   disruption controller finds both Pods under; the chart's NetworkPolicy passes a
//!   server-side dry run.
//! - `helm_install_wait_with_the_go_charts_default_values`: the same install with the Go
//!   temporal-worker-controller v1.8.1 chart's own default `values.yaml` (read from its
//!   downloaded module), as a Go user hands it over, plus the Go chart's later `extraEnv`,
//!   `extraVolumes` and `extraVolumeMounts`: the Pod waits for the extra volume's ConfigMap,
//!   and the controller process sees the variable and the mounted file.
//! - `helm_upgrade_from_an_earlier_commit_keeps_a_rollout_going`: the chart and binary of commit
//!   `tools/old-controller/versions.env` (CRDs in the chart's `crds/`, as before the CRD chart),
//!   a Progressive rollout in flight, then the documented migration to the CRD chart and
//!   `helm upgrade --wait` to the working tree, then `helm rollback --wait`.
//!
//! Each test has a control plane of its own (CRDs are cluster-wide); Temporal is shared.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::{KindSet, TemporalWorkerDeployment};
use test_harness::chart::{CHART, CRD_CHART, Helm};
use test_harness::container::ContainerProcess;
use test_harness::control_plane::ControlPlane;
use test_harness::kubelet::{Kubelet, KubeletOptions};
use test_harness::registry::{CHART_PATH, ChartRef, Registry};
use test_harness::{manifests, repo_root, temporal_server, world};

const RELEASE_NS: &str = "twc-system";
const RELEASE: &str = "twc";
/// The Go controller's CRD release name, which ours shares (chart README).
const CRD_RELEASE: &str = "temporal-worker-controller-crds";
const T: Duration = Duration::from_secs(120);

#[path = "upgrade/go_chart.rs"]
mod go_chart;

/// The controller binary this test build made: packaged into the image under test.
fn controller_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_temporal-worker-controller"))
}

/// A controller image in the rig's registry, pinned by digest in the chart's values.
#[derive(Clone, Debug)]
struct ImageRef {
    repository: String,
    digest: String,
}

impl ImageRef {
    /// What the Pod spec says: `<registry>/<repository>@sha256:…`.
    fn reference(&self) -> String {
        format!("{}@{}", self.repository, self.digest)
    }
}

/// `binary` packaged by `tools/image/package.sh` (the test build's own binary: no second
/// build) and pushed to the rig's registry under `tag`.
async fn push_image(binary: PathBuf, tag: &'static str) -> Result<ImageRef> {
    let begin = Instant::now();
    let reference =
        tokio::task::spawn_blocking(move || Registry::shared()?.push_controller(&binary, tag))
            .await??;
    let (repository, digest) = reference.split_once('@').context("a reference by digest")?;
    println!(
        "image {tag} packaged and pushed in {:?}: {reference}",
        begin.elapsed()
    );
    Ok(ImageRef {
        repository: repository.into(),
        digest: digest.into(),
    })
}

/// Both charts of the working tree pushed to the rig's registry (`helm push`).
async fn push_charts() -> Result<(ChartRef, ChartRef)> {
    tokio::task::spawn_blocking(|| {
        let registry = Registry::shared()?;
        let root = repo_root();
        Ok((
            registry.push_chart(&root.join(CRD_CHART), CHART_PATH)?,
            registry.push_chart(&root.join(CHART), CHART_PATH)?,
        ))
    })
    .await?
}

/// A control plane of the test's own, with the kubelet stand-in pulling controller images
/// from the rig's registry and running them as process Pods from their own root file systems,
/// and Helm for the release namespace.
struct Cluster {
    // Dropped first: the controller processes stop before the API server does.
    _kubelet: Kubelet,
    plane: ControlPlane,
    client: kube::Client,
    helm: Helm,
}

async fn cluster() -> Result<Cluster> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .with_test_writer()
        .try_init();
    let plane = ControlPlane::start().await?;
    let client = plane.client().await?;

    let kubelet = Kubelet::start_with(
        client.clone(),
        KubeletOptions {
            registry: Some(Registry::shared()?.host().to_string()),
            api_server: Some(plane.host_port()?),
            ..Default::default()
        },
    )
    .await?;
    let helm = Helm {
        kubeconfig: plane.kubeconfig_path().to_path_buf(),
        namespace: RELEASE_NS.into(),
        timeout_seconds: 120,
    };
    Ok(Cluster {
        _kubelet: kubelet,
        plane,
        client,
        helm,
    })
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The controller chart's values: the image `tag`, and ports of its own (process Pods share the
/// machine's network, so the old and the new Pod of a rolling update need different ports).
/// The webhook is reached by URL on loopback: nothing routes a Service's ClusterIP here. The
/// Service's port is the container's, so that a Pod calling the Service by name (the `helm
/// test` Pod) reaches the process listening on it (the stand-in resolves Service names to
/// loopback).
/// One replica, not the chart's two: the kubelet stand-in runs process Pods on the machine's
/// network (`tests/harness/src/kubelet/controller_pod.rs`), so two Pods of one ReplicaSet,
/// rendered with the same ports, would conflict on them; Lease hand-over between replicas is
/// tested in-process (`tests/leadership.rs`).
fn controller_values(image: &ImageRef) -> Result<Value> {
    let (http, webhook) = (free_port()?, free_port()?);
    Ok(json!({
        "replicas": 1,
        "image": {"repository": image.repository, "digest": image.digest},
        "http": {"port": http},
        "service": {"port": http},
        "webhook": {"port": webhook, "url": format!("https://127.0.0.1:{webhook}")},
        "readinessProbe": {"initialDelaySeconds": 1, "periodSeconds": 2, "failureThreshold": 3},
    }))
}

/// The controller's Pods (the chart's selector labels), with their image and readiness.
async fn controller_pods(client: &kube::Client) -> Result<Vec<(String, String, bool)>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), RELEASE_NS);
    let lp = ListParams::default().labels("app.kubernetes.io/component=controller");
    Ok(pods
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            (p.metadata.name.unwrap_or_default(), image, ready)
        })
        .collect())
}

/// The one controller Pod runs `image` and is Ready (as `helm --wait` returned), and it holds the
/// Lease under its own name: `POD_NAME` came from the downward API and its client
/// authenticated with the projected ServiceAccount token.
async fn assert_controller_pod(client: &kube::Client, image: &ImageRef) -> Result<String> {
    let deadline = Instant::now() + T;
    loop {
        let pods = controller_pods(client).await?;
        let leases: Api<Lease> = Api::namespaced(client.clone(), RELEASE_NS);
        let holders: Vec<String> = leases
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|l| l.spec?.holder_identity)
            .collect();
        if let [(name, img, true)] = pods.as_slice()
            && *img == image.reference()
            && holders.iter().any(|h| h.contains(name.as_str()))
        {
            return Ok(name.clone());
        }
        if Instant::now() > deadline {
            bail!(
                "controller Pod of {} not Ready and leading: pods {pods:?}, lease holders {holders:?}",
                image.reference()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn workers(client: &kube::Client, ns: &str) -> Api<TemporalWorkerDeployment> {
    TemporalWorkerDeployment::api(client.clone(), ns, KindSet::Canonical)
}

fn condition(wd: &TemporalWorkerDeployment, type_: &str) -> Option<(String, String)> {
    wd.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

fn ready(wd: &TemporalWorkerDeployment) -> bool {
    wd.status
        .as_ref()
        .is_some_and(|s| s.observed_generation == wd.metadata.generation)
        && condition(wd, "Ready") == Some(("True".into(), "RolloutComplete".into()))
}

async fn wait_wd(
    api: &Api<TemporalWorkerDeployment>,
    name: &str,
    what: &str,
    pred: impl Fn(&TemporalWorkerDeployment) -> bool,
) -> Result<TemporalWorkerDeployment> {
    let deadline = Instant::now() + T;
    loop {
        let wd = api.get(name).await?;
        if pred(&wd) {
            return Ok(wd);
        }
        if Instant::now() > deadline {
            bail!(
                "timed out waiting for {name}: {what}; status {:?}",
                wd.status
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A namespace with a Temporal namespace and a `Connection` named `temporal` (canonical kinds).
async fn workload_namespace(client: &kube::Client, ns: &str) -> Result<String> {
    let temporal = temporal_server::shared().await?;
    let temporal_ns = format!("upgrade-{ns}-{}", std::process::id() % 10000);
    temporal.create_namespace(&temporal_ns).await?;
    world::ensure_namespace(client, ns).await?;
    let conn =
        manifests::connection_in(manifests::Kinds::Canonical, "temporal", &temporal.address());
    world::apply(client, ns, "upgrade-test", conn).await?;
    Ok(temporal_ns)
}

/// A WorkerDeployment (the Go controller's kind) of image tag `tag`, with a long sunset so
/// that no version's Pods go away during the test.
fn worker_deployment(name: &str, temporal_ns: &str, tag: &str, rollout: Value) -> Value {
    manifests::twd(name)
        .replicas(1)
        .pod_labels(json!({"app": name}))
        .tag(tag)
        .task_queue(&format!("tq-{name}"))
        .rollout(rollout)
        .sunset("1h", "1h")
        .temporal_namespace(temporal_ns)
        .kinds(manifests::Kinds::Canonical)
        .build()
}

/// The Secret the dev install keeps its webhook certificate in (the Go chart's key).
const CERT_SECRET: &str = "twc-webhook-serving-cert";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_wait_runs_the_controller_as_its_pod() -> Result<()> {
    let image = push_image(controller_binary(), "dev").await?;
    let mut values = controller_values(&image)?;
    values["webhook"]["certSecretName"] = json!(CERT_SECRET);
    // /metrics behind a TokenReview, as with the chart's ServiceMonitor.
    values["statusApi"] = json!({"auth": {"mode": "token-review", "protectMetrics": true}});
    let c = install_wait_and_roll_out(&image, values.clone(), None).await?;
    let cert: Api<Secret> = Api::namespaced(c.client.clone(), RELEASE_NS);
    let cert = cert.get(CERT_SECRET).await?;
    ensure!(
        cert.data.is_some_and(|d| d.contains_key("tls.crt")),
        "{CERT_SECRET} holds no certificate"
    );
    the_charts_metrics_token_is_accepted(&c, &values).await?;
    helm_test_fails_when_readyz_fails(&c, &image).await?;
    edit_and_view_users_get_worker_deployments(&c).await?;
    two_replicas_get_a_disruption_budget(&c).await?;
    network_policy_passes_a_server_side_dry_run(&c).await
}

/// A Go temporal-worker-controller user's values file, unchanged: the Go v1.8.1 chart's own
/// default `values.yaml` (read from the downloaded module) installs our chart with `--wait`.
/// Only what this rig needs is laid over it: the image under test, loopback ports, and one
/// replica (the Go default is 2: process Pods share the machine's network, so two controller
/// Pods would fight over the same ports; a real cluster runs both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_wait_with_the_go_charts_default_values() -> Result<()> {
    let build = test_harness::go_controller::GoControllerBuild::locate_async().await?;
    let path = build
        .module_dir
        .join("helm/temporal-worker-controller/values.yaml");
    let mut values: Value = serde_yaml::from_str(&std::fs::read_to_string(&path)?)
        .with_context(|| path.display().to_string())?;
    let Some(map) = values.as_object_mut() else {
        bail!("{} is not a map", path.display());
    };
    let image = push_image(controller_binary(), "dev").await?;
    let ours = controller_values(&image)?;
    for (k, v) in ours.as_object().into_iter().flatten() {
        match (map.get_mut(k), v) {
            (Some(Value::Object(theirs)), Value::Object(v)) => {
                theirs.extend(v.clone());
            }
            _ => {
                map.insert(k.clone(), v.clone());
            }
        }
    }
    map.insert("replicas".into(), json!(1));
    // The Go chart's keys after v1.8.1 (its PR #532), top level, with its meaning: a private CA
    // bundle mounted from a ConfigMap and the variable that points at it.
    map.insert(
        "extraEnv".into(),
        json!([{"name": "SSL_CERT_FILE", "value": format!("{CA_DIR}/ca.crt")}]),
    );
    map.insert(
        "extraVolumes".into(),
        json!([{"name": "private-ca", "configMap": {"name": CA_CONFIG_MAP}}]),
    );
    map.insert(
        "extraVolumeMounts".into(),
        json!([{"name": "private-ca", "mountPath": CA_DIR, "readOnly": true}]),
    );
    let c = install_wait_and_roll_out(&image, values, Some(private_ca)).await?;
    let pod = assert_controller_pod(&c.client, &image).await?;
    let process = ContainerProcess::of_pod(&pod, "run")?;
    // SSL_CERT_FILE replaces the image's bundle: the controller loaded the one CA it names.
    process.assert_runs_from_image(&format!("{CA_DIR}/ca.crt"))?;
    let (env, root) = (process.env.clone(), process.root());
    ensure!(
        env.get("SSL_CERT_FILE").map(String::as_str) == Some(format!("{CA_DIR}/ca.crt").as_str()),
        "the controller process lacks extraEnv: {env:?}"
    );
    let mounted = std::fs::read_to_string(root.join(CA_DIR.trim_start_matches('/')).join("ca.crt"))
        .context("the extra volume is not mounted in the controller's mount namespace")?;
    ensure!(
        mounted == c.plane.ca_pem(),
        "the mounted CA is not the ConfigMap's"
    );
    Ok(())
}

const CA_DIR: &str = "/etc/twc-private-ca";
const CA_CONFIG_MAP: &str = "corp-ca-bundle";

fn private_ca(c: &Cluster) -> futures::future::BoxFuture<'_, Result<()>> {
    Box::pin(create_private_ca_once_awaited(c))
}

/// Creates the extra volume's ConfigMap once the controller Pod waits for it in
/// ContainerCreating (a kubelet names the missing volume in an Event, not in the status; the
/// mounted file is checked in the process afterwards).
async fn create_private_ca_once_awaited(c: &Cluster) -> Result<()> {
    let deadline = Instant::now() + T;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), RELEASE_NS);
    loop {
        let waiting = pods
            .list(&ListParams::default().labels("app.kubernetes.io/component=controller"))
            .await?
            .items
            .into_iter()
            .filter_map(|p| {
                p.status?
                    .container_statuses?
                    .into_iter()
                    .next()?
                    .state?
                    .waiting
            })
            .find(|w| w.reason.as_deref() == Some("ContainerCreating"));
        if waiting.is_some() {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the controller Pod never waited for {CA_CONFIG_MAP}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": CA_CONFIG_MAP},
        "data": {"ca.crt": c.plane.ca_pem()},
    }))?;
    Api::<ConfigMap>::namespaced(c.client.clone(), RELEASE_NS)
        .create(&PostParams::default(), &cm)
        .await?;
    Ok(())
}

/// The token the chart arranges for its ServiceMonitor (a ServiceAccount and its long-lived
/// token Secret, rendered with `serviceMonitor.enabled`; applied here as they are, since this
/// cluster has no Prometheus Operator CRDs for the ServiceMonitor itself): Kubernetes fills the
/// Secret, and the controller's TokenReview accepts it on /metrics, which refuses no token.
async fn the_charts_metrics_token_is_accepted(c: &Cluster, values: &Value) -> Result<()> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let mut with_monitor = values.clone();
    with_monitor["serviceMonitor"] = json!({"enabled": true});
    let objects = test_harness::chart::render(&with_monitor, RELEASE_NS)?;
    let metrics = |kind: &str| {
        objects
            .iter()
            .find(|o| {
                o["kind"] == kind
                    && o["metadata"]["labels"]["app.kubernetes.io/component"] == "metrics"
            })
            .cloned()
            .with_context(|| format!("no {kind} for the ServiceMonitor"))
    };
    let sa: ServiceAccount = serde_json::from_value(metrics("ServiceAccount")?)?;
    let secret: Secret = serde_json::from_value(metrics("Secret")?)?;
    let sm = objects
        .iter()
        .find(|o| o["kind"] == "ServiceMonitor")
        .context("no ServiceMonitor")?;
    ensure!(
        sm["spec"]["endpoints"][0]["authorization"]["credentials"]["name"]
            == json!(secret.metadata.name),
        "the ServiceMonitor does not use the token Secret: {sm}"
    );
    let pp = PostParams::default();
    Api::<ServiceAccount>::namespaced(c.client.clone(), RELEASE_NS)
        .create(&pp, &sa)
        .await?;
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), RELEASE_NS);
    secrets.create(&pp, &secret).await?;
    let name = secret.metadata.name.clone().unwrap_or_default();
    let deadline = Instant::now() + T;
    let token = loop {
        let token = secrets
            .get(&name)
            .await?
            .data
            .and_then(|mut d| d.remove("token"))
            .map(|t| String::from_utf8_lossy(&t.0).into_owned());
        if let Some(token) = token.filter(|t| !t.is_empty()) {
            break token;
        }
        ensure!(Instant::now() < deadline, "Kubernetes never filled {name}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let port = values["http"]["port"].as_u64().context("http.port")?;
    let without = http_status(port, "/metrics", None).await?;
    ensure!(without == 401, "/metrics without a token: HTTP {without}");
    let with = http_status(port, "/metrics", Some(&token)).await?;
    ensure!(with == 200, "/metrics with the chart's token: HTTP {with}");
    Ok(())
}

/// The status code of `GET path` on the loopback port (HTTP/1.1, optionally with a token).
async fn http_status(port: u64, path: &str, token: Option<&str>) -> Result<u16> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", u16::try_from(port)?)).await?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await?;
    let mut head = vec![0; 64];
    let n = tokio::time::timeout(Duration::from_secs(30), conn.read(&mut head)).await??;
    let line = String::from_utf8_lossy(&head[..n]).into_owned();
    line.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("not an HTTP answer: {line:?}"))
}

/// `helm test` of the installed release: its test Pod asks the controller's `/readyz` through
/// the Service and ends Succeeded.
async fn helm_test_passes(c: &Cluster) -> Result<()> {
    let run = c.helm.test(RELEASE).await?.ensure_ok("helm test")?;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), RELEASE_NS);
    let test_pod = pods
        .get(&format!("{RELEASE}-temporal-worker-controller-test-readyz"))
        .await?;
    let phase = test_pod.status.and_then(|s| s.phase);
    ensure!(phase.as_deref() == Some("Succeeded"), "test Pod {phase:?}");
    println!("helm test passed in {:?}", run.took());
    Ok(())
}

/// A release whose controller cannot sync its caches (no RBAC): `/readyz` answers 503, and
/// `helm test` fails with the test Pod Failed, its message the probe's.
async fn helm_test_fails_when_readyz_fails(c: &Cluster, image: &ImageRef) -> Result<()> {
    const NS: &str = "twc-unready";
    let http = free_port()?;
    let values = json!({
        "replicas": 1,
        "image": {"repository": image.repository, "digest": image.digest},
        "http": {"port": http},
        "service": {"port": http},
        "leaderElection": {"enabled": false},
        "rbac": {"create": false},
        "controller": {"identityNamespaceUID": false, "identity": "unready"},
        "webhook": {"enabled": false},
    });
    let helm = Helm {
        namespace: NS.into(),
        ..c.helm.clone()
    };
    helm.install_no_wait("unready", &repo_root().join(CHART), &values)
        .await?
        .ensure_ok("helm install of the unready release")?;
    let url = format!("http://127.0.0.1:{http}/readyz");
    let deadline = Instant::now() + T;
    loop {
        match temporal_worker_controller::cli::probe::run(&url).await {
            Err(temporal_worker_controller::cli::status::CliError::Api { code: 503, .. }) => break,
            other => ensure!(
                Instant::now() < deadline,
                "the unready controller's /readyz never answered 503: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let run = helm.test("unready").await?;
    ensure!(!run.ok, "helm test passed although /readyz answers 503");
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let test_pod = pods
        .get("unready-temporal-worker-controller-test-readyz")
        .await?;
    let status = test_pod.status.unwrap_or_default();
    let message = status
        .container_statuses
        .into_iter()
        .flatten()
        .find_map(|s| s.state?.terminated?.message)
        .unwrap_or_default();
    ensure!(
        status.phase.as_deref() == Some("Failed") && message.contains("503"),
        "test Pod {:?}: {message}",
        status.phase
    );
    helm.uninstall("unready")
        .await?
        .ensure_ok("helm uninstall of the unready release")?;
    Ok(())
}

/// A user bound only to the built-in `edit` ClusterRole in a namespace creates a
/// WorkerDeployment; one bound to `view` reads it and may not create one. Nothing but the
/// chart's aggregated ClusterRoles gives either of them our kinds.
async fn edit_and_view_users_get_worker_deployments(c: &Cluster) -> Result<()> {
    const NS: &str = "team-x";
    world::ensure_namespace(&c.client, NS).await?;
    for (user, role) in [("alice", "edit"), ("bob", "view")] {
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("{user}-{role}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }))?;
        Api::<RoleBinding>::namespaced(c.client.clone(), NS)
            .create(&PostParams::default(), &binding)
            .await?;
    }
    // The aggregation controller fills the built-in roles from labelled ClusterRoles.
    let roles: Api<ClusterRole> = Api::all(c.client.clone());
    let deadline = Instant::now() + T;
    for role in ["edit", "view"] {
        loop {
            let rules = roles.get(role).await?.rules.unwrap_or_default();
            if rules.iter().any(|r| {
                r.resources
                    .iter()
                    .flatten()
                    .any(|res| res == "workerdeployments")
            }) {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "{role} never aggregated the chart's rules"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let as_user = |user: &str| -> Result<PathBuf> { c.plane.user_kubeconfig(user, None) };
    let alice = test_harness::control_plane::client_from(&as_user("alice")?).await?;
    let bob = test_harness::control_plane::client_from(&as_user("bob")?).await?;
    let wd = |name: &str| {
        manifests::twd(name)
            .replicas(1)
            .task_queue("tq")
            .rollout(json!({"strategy": "AllAtOnce"}))
            .kinds(manifests::Kinds::Canonical)
            .build()
    };
    world::apply(&alice, NS, "alice", wd("by-alice"))
        .await
        .context("an edit user creates a WorkerDeployment")?;
    let read = workers(&bob, NS).get("by-alice").await;
    ensure!(read.is_ok(), "a view user cannot read: {read:?}");
    ensure!(
        workers(&bob, NS).list(&ListParams::default()).await.is_ok(),
        "a view user cannot list"
    );
    match world::apply(&bob, NS, "bob", wd("by-bob")).await {
        Err(e) if format!("{e:#}").contains("forbidden") => {}
        other => bail!("a view user's create was not forbidden: {other:?}"),
    }
    Ok(())
}

/// `replicas: 2` renders a PodDisruptionBudget; installed, the disruption controller finds both
/// controller Pods under it and allows one disruption. The image is not mapped to a binary, so
/// the stand-in runs the Pods as plain workloads (two controller processes would share ports).
async fn two_replicas_get_a_disruption_budget(c: &Cluster) -> Result<()> {
    const NS: &str = "twc-ha";
    let values = json!({
        "replicas": 2,
        "image": {"repository": "twc-not-run", "tag": "dev"},
        "webhook": {"enabled": false},
        "rbac": {"aggregateToDefaultRoles": false},
    });
    let helm = Helm {
        namespace: NS.into(),
        ..c.helm.clone()
    };
    helm.install("ha", &repo_root().join(CHART), &values)
        .await?
        .ensure_ok("helm install --wait with replicas: 2")?;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.client.clone(), NS);
    let deadline = Instant::now() + T;
    loop {
        let pdb = pdbs.get("ha-temporal-worker-controller").await?;
        let status = pdb.status.clone().unwrap_or_default();
        if status.expected_pods == Some(2)
            && status.current_healthy == Some(2)
            && status.disruptions_allowed == Some(1)
        {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "the PodDisruptionBudget does not cover both Pods: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The NetworkPolicy with every option set (as `tests/helm_chart.rs` pins it) is valid to the
/// API server: a server-side dry-run create. Nothing here enforces NetworkPolicies.
async fn network_policy_passes_a_server_side_dry_run(c: &Cluster) -> Result<()> {
    let values = test_harness::chart::network_policy_values();
    let objects = test_harness::chart::render(&values, RELEASE_NS)?;
    let policy = objects
        .into_iter()
        .find(|o| o["kind"] == "NetworkPolicy")
        .context("no NetworkPolicy rendered")?;
    let policy: NetworkPolicy = serde_json::from_value(policy)?;
    let api: Api<NetworkPolicy> = Api::namespaced(c.client.clone(), RELEASE_NS);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    api.create(&dry, &policy)
        .await
        .context("the API server refuses the chart's NetworkPolicy")?;
    // Dry run: nothing was stored.
    ensure!(
        api.get_opt(&policy.metadata.name.clone().unwrap_or_default())
            .await?
            .is_none()
    );
    Ok(())
}

/// What must happen while `helm install --wait` waits (e.g. create what the Pod waits for).
type DuringInstall = for<'a> fn(&'a Cluster) -> futures::future::BoxFuture<'a, Result<()>>;

/// The CRD chart, then the controller chart with `values`, each pushed to the rig's registry
/// and `helm install --wait` from `oci://` (while `during` runs beside the controller chart's);
/// the controller's Pod, pulled by digest (`image`), must be Ready and leading, pass `helm
/// test` and roll a WorkerDeployment out to v1 Current.
async fn install_wait_and_roll_out(
    image: &ImageRef,
    values: Value,
    during: Option<DuringInstall>,
) -> Result<Cluster> {
    let c = cluster().await?;
    let (crd_chart, chart) = push_charts().await?;
    let crds = c
        .helm
        .install_oci(CRD_RELEASE, &crd_chart, &json!({}))
        .await?
        .ensure_ok("helm install --wait of the CRD chart")?;
    ensure!(
        crds.helm_version == test_harness::helm::pinned_version(),
        "not the pinned helm: {}",
        crds.helm_version
    );
    let installing = c.helm.install_oci(RELEASE, &chart, &values);
    let install = match during {
        Some(during) => {
            let (install, during) = tokio::join!(installing, during(&c));
            during?;
            install?
        }
        None => installing.await?,
    }
    .ensure_ok("helm install --wait of the controller chart")?;
    println!(
        "helm install --wait from {}: CRD chart {:?}, controller chart {:?} (Helm {})",
        chart.reference,
        crds.took(),
        install.took(),
        install.helm_version
    );
    let pod = assert_controller_pod(&c.client, image).await?;
    if values["extraEnv"].is_null() {
        // The image's own CA bundle, found where the distribution keeps it.
        ContainerProcess::of_pod(&pod, "run")?
            .assert_runs_from_image("/etc/ssl/certs/ca-certificates.crt")?;
    }
    println!("controller Pod {pod} Ready and leading");
    helm_test_passes(&c).await?;

    let temporal_ns = workload_namespace(&c.client, "shop").await?;
    let wd = worker_deployment(
        "orders",
        &temporal_ns,
        "v1",
        json!({"strategy": "AllAtOnce"}),
    );
    world::apply(&c.client, "shop", "upgrade-test", wd).await?;
    let done = wait_wd(&workers(&c.client, "shop"), "orders", "v1 Current", ready).await?;
    let current = done.status.and_then(|s| s.current_version);
    ensure!(current.is_some(), "no current version once Ready");
    Ok(c)
}

// ---------------------------------------------------------------------------------------------
// The upgrade from an earlier commit

/// The earlier commit's binary, charts and CRDs (`tools/old-controller/build.sh`, cached by
/// commit outside the repository; `.ci/setup-tests` builds it).
fn old_build() -> Result<PathBuf> {
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("tools/old-controller/build.sh"))
        .output()
        .context("running tools/old-controller/build.sh")?;
    ensure!(
        out.status.success(),
        "tools/old-controller/build.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().context("build.sh printed no path")?;
    Ok(PathBuf::from(dir))
}

/// The working tree's CRD chart with one more field, `spec.upgradeTestMarker`, in the
/// WorkerDeployment schema: a CRD change Helm must roll out whether or not the working tree
/// changed a CRD since the old commit.
fn new_crd_chart(dir: &Path) -> Result<PathBuf> {
    let chart = dir.join("temporal-worker-controller-crds");
    let src = repo_root().join(CRD_CHART);
    std::fs::create_dir_all(chart.join("templates"))?;
    std::fs::copy(src.join("Chart.yaml"), chart.join("Chart.yaml"))?;
    for entry in std::fs::read_dir(src.join("templates"))? {
        let entry = entry?;
        let mut text = std::fs::read_to_string(entry.path())?;
        if entry.file_name() == "workerdeployments.temporal.io.yaml" {
            let mut crd: Value = serde_yaml::from_str(&text)?;
            crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                ["upgradeTestMarker"] = json!({"type": "string"});
            text = serde_yaml::to_string(&crd)?;
        }
        std::fs::write(chart.join("templates").join(entry.file_name()), text)?;
    }
    Ok(chart)
}

fn has_marker(crd: &CustomResourceDefinition) -> bool {
    let v = serde_json::to_value(crd).unwrap_or_default();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        .get("upgradeTestMarker")
        .is_some()
}

/// The documented one-time migration (chart README): CRDs that the old chart's `crds/`
/// installed belong to no release; mark them as the CRD release's.
async fn adopt_crds(client: &kube::Client) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api.list(&ListParams::default()).await?.items {
        let name = crd.metadata.name.unwrap_or_default();
        if !name.ends_with(".temporal.io") {
            continue;
        }
        let patch = json!({"metadata": {
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": CRD_RELEASE,
                            "meta.helm.sh/release-namespace": RELEASE_NS},
        }});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// What identifies a running worker container: Pod UID → (name, restarts, container start).
async fn worker_pods(client: &kube::Client, ns: &str) -> Result<BTreeMap<String, String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut out = BTreeMap::new();
    for p in pods.list(&ListParams::default()).await?.items {
        let status = p.status.clone().unwrap_or_default();
        let c = status.container_statuses.unwrap_or_default();
        let started = c
            .first()
            .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone())
            .map(|t| t.0.to_string())
            .unwrap_or_default();
        let restarts = c.first().map_or(0, |c| c.restart_count);
        out.insert(
            p.metadata.uid.unwrap_or_default(),
            format!(
                "{} restarts={restarts} started={started}",
                p.metadata.name.unwrap_or_default()
            ),
        );
    }
    Ok(out)
}

/// Samples both WorkerDeployments every 200 ms and records every status that breaks the
/// contract while the controller is upgraded and rolled back: `steady` (v1 Current) must stay
/// `Ready=True`; `ramping` must never be `Stalled`, never lose its status (no
/// `WaitingForController`) and only ever be Ramping or, at the end, RolloutComplete.
fn watch_statuses(
    api: Api<TemporalWorkerDeployment>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<usize>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    let task = tokio::spawn(async move {
        let mut samples = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            for name in ["steady", "ramping"] {
                let Ok(wd) = api.get(name).await else {
                    continue;
                };
                samples += 1;
                let ready = condition(&wd, "Ready");
                let stalled = condition(&wd, "Stalled").is_some_and(|(s, _)| s == "True");
                let ok = match name {
                    "steady" => ready == Some(("True".into(), "RolloutComplete".into())),
                    _ => {
                        !stalled
                            && matches!(
                                ready.as_ref().map(|(s, r)| (s.as_str(), r.as_str())),
                                Some(("False", "Ramping")) | Some(("True", "RolloutComplete"))
                            )
                    }
                };
                if !ok && let Ok(mut v) = out.lock() {
                    v.push(format!("{name}: Ready {ready:?}, Stalled {stalled}"));
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        samples
    });
    (seen, task)
}

/// What the working tree adds to the old commit's step numbers (steps count from 1 since the
/// old commit; `OLD_CONTROLLER_COMMIT` in `tools/old-controller/versions.env`).
const STEP_NUMBERING_OFFSET: i32 = 1;

/// The ramping rollout's step, and when it started.
fn step_of(wd: &TemporalWorkerDeployment) -> (Option<i32>, Option<String>) {
    let target = wd.status.as_ref().and_then(|s| s.target_version.as_ref());
    (
        target.and_then(|t| t.current_step),
        target
            .and_then(|t| t.step_started_at.as_ref())
            .map(|t| t.0.to_string()),
    )
}

/// How long the ramping rollout's one step pauses: long enough for the upgrade to happen
/// inside it, so the step is in flight before and after.
/// The upgrade test's workload namespace.
const UPGRADE_NS: &str = "store";

const STEP_PAUSE: Duration = Duration::from_secs(75);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_from_an_earlier_commit_keeps_a_rollout_going() -> Result<()> {
    let old = old_build()?;
    let old_image = push_image(old.join("bin/temporal-worker-controller"), "old").await?;
    let new_image = push_image(controller_binary(), "new").await?;
    let c = cluster().await?;
    let old_values = controller_values(&old_image)?;
    let install = c
        .helm
        .install(
            RELEASE,
            &old.join("charts/temporal-worker-controller"),
            &old_values,
        )
        .await?
        .ensure_ok("helm install --wait of the old chart")?;
    println!("old chart installed (--wait) in {:?}", install.took());
    assert_controller_pod(&c.client, &old_image).await?;

    // Two WorkerDeployments written while the old controller runs: one steady, one with a
    // Progressive rollout in flight.
    let ns = UPGRADE_NS;
    let temporal_ns = workload_namespace(&c.client, ns).await?;
    let api = workers(&c.client, ns);
    let all_at_once = json!({"strategy": "AllAtOnce"});
    for name in ["steady", "ramping"] {
        let wd = worker_deployment(name, &temporal_ns, "v1", all_at_once.clone());
        world::apply(&c.client, ns, "upgrade-test", wd).await?;
    }
    for name in ["steady", "ramping"] {
        wait_wd(&api, name, "v1 Current (old controller)", ready).await?;
    }
    let progressive = json!({"strategy": "Progressive", "steps": [
        {"rampPercentage": 10, "pauseDuration": format!("{}s", STEP_PAUSE.as_secs())}]});
    let wd = worker_deployment("ramping", &temporal_ns, "v2", progressive);
    world::apply(&c.client, ns, "upgrade-test", wd).await?;
    let ramping = wait_wd(&api, "ramping", "v2 ramping at its step", |wd| {
        condition(wd, "Ready").is_some_and(|(_, r)| r == "Ramping") && step_of(wd).1.is_some()
    })
    .await?;
    let step_before = step_of(&ramping);
    let pods_before = worker_pods(&c.client, ns).await?;
    println!("rollout in flight at {step_before:?}; worker pods {pods_before:?}");

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (violations, sampler) = watch_statuses(api.clone(), stop.clone());
    let scratch = std::env::temp_dir().join(format!("twc-upgrade-{}", std::process::id()));
    let upgraded_at = upgrade(&c, &new_crd_chart(&scratch)?, &new_image).await?;

    // The rollout continues from its step under the new controller, with the same start. The
    // old commit numbered steps from 0, the working tree from 1 (CHANGELOG, "Changed"): the
    // status shows the old controller's last write or the new one's renumbering of it.
    let after = api.get("ramping").await?;
    let (step, started) = step_of(&after);
    let renumbered = step_before.0.map(|s| s + STEP_NUMBERING_OFFSET);
    ensure!(
        started == step_before.1 && (step == step_before.0 || step == renumbered),
        "the rollout's step changed across the upgrade: {step_before:?} → {:?}",
        step_of(&after)
    );
    // An object written by the old version, read and extended under the new CRD.
    let dynamic: Api<DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        ns,
        &world::api_resource("WorkerDeployment"),
    );
    let marker = json!({"spec": {"upgradeTestMarker": "written-after-upgrade"}});
    dynamic
        .patch("steady", &PatchParams::default(), &Patch::Merge(&marker))
        .await?;
    // The new controller observes that generation (an object the old version wrote, with a
    // field only the new CRD has) and keeps it Ready.
    wait_wd(&api, "steady", "the marker's generation observed", ready).await?;
    let done = wait_wd(&api, "ramping", "v2 Current after its step", ready).await?;
    let promoted_after = Instant::now();
    ensure!(
        promoted_after >= upgraded_at,
        "the rollout finished before the upgrade"
    );
    ensure!(
        done.status
            .as_ref()
            .and_then(|s| s.current_version.as_ref())
            .is_some(),
        "no current version"
    );

    rollback(&c, &old_image).await?;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let samples = sampler.await?;
    let steady = dynamic.get("steady").await?;
    ensure!(
        steady.data["spec"]["upgradeTestMarker"] == "written-after-upgrade",
        "the new field was lost after the rollback: {}",
        steady.data["spec"]
    );
    let pods_after = worker_pods(&c.client, ns).await?;
    ensure!(
        pods_after == pods_before,
        "a worker Pod restarted or went away:\nbefore {pods_before:#?}\nafter {pods_after:#?}"
    );
    let violations = violations.lock().map(|v| v.clone()).unwrap_or_default();
    ensure!(
        violations.is_empty(),
        "the status contract broke during the upgrade ({} of {samples} samples): {violations:#?}",
        violations.len()
    );
    println!("status sampled {samples} times through upgrade and rollback: contract held");
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// The migration to the CRD chart and `helm upgrade --wait` to the working tree, both charts
/// from the rig's registry (the CRD chart with the marker under a path of its own); checks the
/// CRDs were upgraded by Helm and the new controller runs from its image. Returns when the
/// upgrade finished.
async fn upgrade(c: &Cluster, new_crd_chart: &Path, image: &ImageRef) -> Result<Instant> {
    let crds: Api<CustomResourceDefinition> = Api::all(c.client.clone());
    let before = crds.get("workerdeployments.temporal.io").await?;
    ensure!(!has_marker(&before), "the old CRD already has the marker");
    adopt_crds(&c.client).await?;
    let crd_dir = new_crd_chart.to_path_buf();
    let (crd_chart, chart) = tokio::task::spawn_blocking(move || -> Result<_> {
        let registry = Registry::shared()?;
        Ok((
            registry.push_chart(&crd_dir, "upgrade-test-charts")?,
            registry.push_chart(&repo_root().join(CHART), CHART_PATH)?,
        ))
    })
    .await??;
    let crd_run = c
        .helm
        .install_oci(CRD_RELEASE, &crd_chart, &json!({}))
        .await?
        .ensure_ok("helm install --wait of the CRD chart over the old CRDs")?;
    let after = crds.get("workerdeployments.temporal.io").await?;
    ensure!(
        has_marker(&after),
        "helm did not upgrade the WorkerDeployment CRD"
    );
    let keep = after
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("helm.sh/resource-policy"))
        .cloned();
    ensure!(keep.as_deref() == Some("keep"), "CRD not kept: {keep:?}");
    let run = c
        .helm
        .upgrade_oci(RELEASE, &chart, &controller_values(image)?)
        .await?
        .ensure_ok("helm upgrade --wait to the working tree")?;
    println!(
        "CRD chart installed over the old CRDs in {:?}; helm upgrade --wait in {:?}",
        crd_run.took(),
        run.took()
    );
    let pod = assert_controller_pod(&c.client, image).await?;
    ContainerProcess::of_pod(&pod, "run")?
        .assert_runs_from_image("/etc/ssl/certs/ca-certificates.crt")?;
    Ok(Instant::now())
}

/// `helm rollback --wait` of the controller: the old binary runs again, the CRDs (another
/// release) stay new.
async fn rollback(c: &Cluster, old_image: &ImageRef) -> Result<()> {
    let run = c
        .helm
        .rollback(RELEASE, None)
        .await?
        .ensure_ok("helm rollback --wait")?;
    println!("helm rollback --wait in {:?}", run.took());
    assert_controller_pod(&c.client, old_image).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(c.client.clone());
    ensure!(
        has_marker(&crds.get("workerdeployments.temporal.io").await?),
        "the rollback of the controller rolled the CRDs back"
    );
    let steady = workers(&c.client, UPGRADE_NS).get("steady").await?;
    ensure!(
        ready(&steady),
        "steady not Ready under the old controller again"
    );
    Ok(())
}
