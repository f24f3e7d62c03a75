//! The Kubernetes autoscaling path of the test rig: a real Prometheus (Debian's `prometheus`)
//! scraping the controller, and the real prometheus-adapter (`tools/prometheus-adapter`, built
//! from the Go module proxy) serving `external.metrics.k8s.io` from it as an aggregated API
//! server of the local control plane, so that kube-controller-manager's HPA controller reads
//! a version's backlog exactly as in a cluster.
//!
//! How the API server reaches the adapter: the adapter listens on loopback, and its APIService
//! names a Service of `type: ExternalName` whose external name is `127.0.0.1`. With aggregator
//! routing off (the default, set explicitly in [`crate::control_plane`]), the aggregator resolves
//! an APIService's Service with `ResolveCluster` (k8s.io/apiserver `pkg/util/proxy`), which
//! returns `https://<externalName>:<APIService port>` for ExternalName Services; the
//! availability controller only checks Endpoints for ClusterIP Services. So no network
//! namespace, Endpoints (which refuse loopback) or routable Pod IP is needed. The API server
//! still verifies the adapter's serving certificate against `<service>.<namespace>.svc` and the
//! APIService's `caBundle`, and authenticates to it with its front-proxy client certificate.
//!
//! The adapter runs as its own ServiceAccount with the RBAC of its upstream manifests
//! (`deploy/manifests`: auth delegation, the authentication ConfigMap reader, and read access
//! to nodes, namespaces, pods and services), nothing more.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use crate::control_plane::ControlPlane;
use crate::supervise::{Supervised, free_port};

/// Where the adapter's ServiceAccount, Service and APIService live.
pub const NAMESPACE: &str = "twc-monitoring";
/// The adapter's ServiceAccount and Service name (as in its upstream manifests).
pub const NAME: &str = "prometheus-adapter";
/// The APIService the HPA controller's external-metric reads go through.
pub const API_SERVICE: &str = "v1beta1.external.metrics.k8s.io";
/// How long Prometheus or the adapter may take to come up on a loaded 2-core machine.
const START_DEADLINE: Duration = Duration::from_secs(90);
const FIELD_MANAGER: &str = "twc-test-harness";

/// A Prometheus server scraping one target every second; it stops with the test process.
pub struct Prometheus {
    pub addr: SocketAddr,
    _process: Supervised,
}

impl Prometheus {
    /// Starts `prometheus` with its data in `dir`, scraping `target` (`host:port`, `/metrics`)
    /// every second, and waits until it is ready.
    pub async fn start(dir: &Path, target: SocketAddr) -> Result<Prometheus> {
        std::fs::create_dir_all(dir.join("data"))
            .with_context(|| format!("creating {}", dir.display()))?;
        let config = json!({
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
            "scrape_configs": [{
                "job_name": "temporal-worker-controller",
                "static_configs": [{"targets": [target.to_string()]}]
            }]
        });
        // JSON is YAML.
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, serde_json::to_vec_pretty(&config)?)?;
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        let program = which("prometheus").context(
            "prometheus is not on PATH (Debian package `prometheus`; run .ci/setup-tests)",
        )?;
        let process = Supervised::spawn(
            "prometheus",
            &program,
            [
                format!("--config.file={}", config_path.display()),
                format!("--storage.tsdb.path={}", dir.join("data").display()),
                format!("--web.listen-address={addr}"),
                "--log.level=warn".into(),
            ],
            &dir.join("prometheus.log"),
        )?;
        let mut prom = Prometheus {
            addr,
            _process: process,
        };
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Some(err) = prom._process.died() {
                return Err(err);
            }
            if let Ok((200, _)) =
                crate::loopback_http::get(addr, "/-/ready", "text/plain", None).await
            {
                return Ok(prom);
            }
            if Instant::now() > deadline {
                bail!(
                    "Prometheus not ready after {START_DEADLINE:?}:\n{}",
                    prom._process.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `http://127.0.0.1:PORT/`, for the adapter.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

/// The running prometheus-adapter, registered as the cluster's external metrics API. Dropping
/// it deletes the APIService before the adapter stops: an APIService that does not answer makes
/// discovery fail, and with it every namespace deletion of the cluster.
pub struct MetricsAdapter {
    pub port: u16,
    admin_kubeconfig: PathBuf,
    process: Supervised,
}

impl Drop for MetricsAdapter {
    fn drop(&mut self) {
        // Synchronous (a drop cannot await) and bounded; the process stops after this.
        let deleted = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.admin_kubeconfig)
            .args([
                "delete",
                "apiservice",
                API_SERVICE,
                "--ignore-not-found",
                "--wait=false",
                "--request-timeout=10s",
            ])
            .output();
        match deleted {
            Ok(out) if out.status.success() => {}
            Ok(out) => tracing::warn!(
                stderr = %String::from_utf8_lossy(&out.stderr),
                "deleting the {API_SERVICE} APIService failed"
            ),
            Err(e) => tracing::warn!(error = %e, "running kubectl to delete {API_SERVICE}"),
        }
    }
}

impl MetricsAdapter {
    /// Starts the adapter in `dir` with `config` (its rule file, YAML) reading `prometheus`,
    /// re-listing the series every `relist`, registers it as [`API_SERVICE`] and waits until the
    /// API server reports it Available and serves the group's discovery through it.
    pub async fn start(
        plane: &ControlPlane,
        dir: &Path,
        prometheus: &str,
        config: &str,
        relist: Duration,
    ) -> Result<MetricsAdapter> {
        let binary =
            tokio::task::spawn_blocking(|| crate::cached_build("prometheus-adapter")).await??;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let client = plane.client().await?;
        grant_upstream_rbac(&client).await?;
        let kubeconfig = plane.service_account_kubeconfig(NAMESPACE, NAME).await?;
        let service_name = format!("{NAME}.{NAMESPACE}.svc");
        let serving = plane
            .pki()
            .serving_cert(NAME, &[service_name.as_str(), "127.0.0.1"])?;
        let files = AdapterFiles {
            cert: dir.join("serving.crt"),
            key: dir.join("serving.key"),
            config: dir.join("config.yaml"),
        };
        for (path, content) in [
            (&files.cert, serving.cert_pem.as_str()),
            (&files.key, serving.key_pem.as_str()),
            (&files.config, config),
        ] {
            std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))?;
        }
        let port = free_port()?;
        let kc = kubeconfig.display().to_string();
        let process = Supervised::spawn(
            "prometheus-adapter",
            &binary,
            [
                format!("--secure-port={port}"),
                "--bind-address=127.0.0.1".into(),
                format!("--tls-cert-file={}", files.cert.display()),
                format!("--tls-private-key-file={}", files.key.display()),
                format!("--cert-dir={}", dir.display()),
                format!("--lister-kubeconfig={kc}"),
                format!("--authentication-kubeconfig={kc}"),
                format!("--authorization-kubeconfig={kc}"),
                format!("--prometheus-url={prometheus}"),
                format!("--config={}", files.config.display()),
                format!("--metrics-relist-interval={}s", relist.as_secs().max(1)),
                // Series seen within this window are listed: wider than one scrape interval, so
                // a relist never misses a series between two scrapes.
                "--metrics-max-age=30s".into(),
                "--v=1".into(),
            ],
            &dir.join("prometheus-adapter.log"),
        )?;
        let mut adapter = MetricsAdapter {
            port,
            admin_kubeconfig: plane.kubeconfig_path().to_path_buf(),
            process,
        };
        register(&client, plane.ca_pem(), port).await?;
        adapter.wait_available(&client).await?;
        Ok(adapter)
    }

    /// The adapter's log so far (last lines), for error messages.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// Waits until the APIService is Available and the API server answers the group's discovery
    /// (both go through the aggregator to the adapter).
    async fn wait_available(&mut self, client: &kube::Client) -> Result<()> {
        let api = api_services(client);
        let deadline = Instant::now() + START_DEADLINE;
        let mut last = String::new();
        loop {
            if let Some(err) = self.process.died() {
                return Err(err);
            }
            let service = api.get(API_SERVICE).await?;
            let available = service.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Available");
            if let Some(c) = available {
                last = c.to_string();
                if c["status"] == "True" {
                    let discovery: Result<Value> = client
                        .request(
                            hyper::Request::get("/apis/external.metrics.k8s.io/v1beta1")
                                .body(Vec::new())?,
                        )
                        .await
                        .map_err(anyhow::Error::from);
                    match discovery {
                        Ok(v) if v["kind"] == "APIResourceList" => return Ok(()),
                        Ok(v) => last = format!("discovery answered {v}"),
                        Err(e) => last = format!("discovery failed: {e:#}"),
                    }
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "{API_SERVICE} not available after {START_DEADLINE:?} (last: {last}); adapter log:\n{}",
                    self.process.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

struct AdapterFiles {
    cert: PathBuf,
    key: PathBuf,
    config: PathBuf,
}

fn api_services(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "apiregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiregistration.k8s.io/v1".into(),
        kind: "APIService".into(),
        plural: "apiservices".into(),
    };
    Api::all_with(client.clone(), &ar)
}

/// The ExternalName Service and the APIService that make the API server proxy
/// `/apis/external.metrics.k8s.io/v1beta1` to `127.0.0.1:port` (see the module docs).
async fn register(client: &kube::Client, ca_pem: &str, port: u16) -> Result<()> {
    use base64::Engine as _;
    let port = i32::from(port);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {"type": "ExternalName", "externalName": "127.0.0.1",
                 "ports": [{"name": "https", "port": port}]}
    });
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), NAMESPACE)
        .patch(NAME, &pp, &Patch::Apply(&service))
        .await
        .context("applying the adapter's ExternalName Service")?;
    let api_service = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": API_SERVICE},
        "spec": {
            "group": "external.metrics.k8s.io", "version": "v1beta1",
            "groupPriorityMinimum": 100, "versionPriority": 100,
            "service": {"name": NAME, "namespace": NAMESPACE, "port": port},
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        }
    });
    api_services(client)
        .patch(API_SERVICE, &pp, &Patch::Apply(&api_service))
        .await
        .context("applying the external metrics APIService")?;
    Ok(())
}

/// The adapter's grants from its upstream manifests, bound to its ServiceAccount.
async fn grant_upstream_rbac(client: &kube::Client) -> Result<()> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let subject = json!([{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]);
    // Creates the namespace and the ServiceAccount.
    crate::control_plane::mint_token(client, NAMESPACE, NAME, Vec::new(), 600).await?;
    let reader = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": NAME},
        "rules": [{"apiGroups": [""], "resources": ["nodes", "namespaces", "pods", "services"],
                   "verbs": ["get", "list", "watch"]}]
    });
    Api::<ClusterRole>::all(client.clone())
        .patch(NAME, &pp, &Patch::Apply(&reader))
        .await?;
    for (name, role) in [
        (NAME.to_string(), NAME),
        (
            format!("{NAME}:system:auth-delegator"),
            "system:auth-delegator",
        ),
    ] {
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subject,
        });
        Api::<ClusterRoleBinding>::all(client.clone())
            .patch(&name, &pp, &Patch::Apply(&binding))
            .await?;
    }
    let auth_reader = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{NAME}-auth-reader"), "namespace": "kube-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "extension-apiserver-authentication-reader"},
        "subjects": subject,
    });
    Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
        .patch(
            &format!("{NAME}-auth-reader"),
            &pp,
            &Patch::Apply(&auth_reader),
        )
        .await?;
    Ok(())
}

/// The value the external metrics API serves for `metric` in `namespace` with `selector`
/// (`key=value,...`), read through the API server as the HPA controller reads it; `None` when
/// the adapter has no such metric yet.
pub async fn external_metric(
    client: &kube::Client,
    namespace: &str,
    metric: &str,
    selector: &str,
) -> Result<Option<f64>> {
    let mut uri = format!("/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}");
    if !selector.is_empty() {
        uri.push_str("?labelSelector=");
        uri.extend(form_urlencoded::byte_serialize(selector.as_bytes()));
    }
    let answer: Result<Value, kube::Error> = client
        .request(hyper::Request::get(&uri).body(Vec::new())?)
        .await;
    let list = match answer {
        Ok(list) => list,
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(None),
        Err(e) => return Err(anyhow::Error::from(e).context(format!("GET {uri}"))),
    };
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let mut total = 0.0;
    for item in &items {
        let text = item["value"]
            .as_str()
            .context("an external metric item without a value")?;
        total += parse_quantity(text)?;
    }
    Ok((!items.is_empty()).then_some(total))
}

/// A Kubernetes quantity as the external metrics API writes it (`12`, `1500m`, `2k`).
fn parse_quantity(text: &str) -> Result<f64> {
    let (digits, scale) = match text.char_indices().last() {
        Some((i, 'm')) => (&text[..i], 1e-3),
        Some((i, 'k')) => (&text[..i], 1e3),
        Some((i, 'M')) => (&text[..i], 1e6),
        _ => (text, 1.0),
    };
    let v: f64 = digits
        .parse()
        .with_context(|| format!("unreadable quantity {text:?}"))?;
    ensure!(v.is_finite(), "unreadable quantity {text:?}");
    Ok(v * scale)
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_as_the_external_metrics_api_writes_them() {
        assert_eq!(parse_quantity("12").unwrap(), 12.0);
        assert_eq!(parse_quantity("1500m").unwrap(), 1.5);
        assert_eq!(parse_quantity("2k").unwrap(), 2000.0);
        assert!(parse_quantity("x").is_err());
    }
}
