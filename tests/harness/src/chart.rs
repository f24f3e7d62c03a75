//! The Helm chart's identity for the controller, on a live cluster: render the chart with the
//! real `helm` CLI (Helm 4 at the pinned version, [`crate::helm`]), apply its ServiceAccount and RBAC with
//! `kubectl apply --server-side`, and hand back a kubeconfig for that ServiceAccount, so tests
//! run the controller with exactly the rights the chart grants.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail, ensure};
use serde::Deserialize as _;
use serde_json::{Value, json};

pub const CHART: &str = "charts/temporal-worker-controller";
/// Where the e2e suite "installs" the chart (its ServiceAccount, RBAC and Lease).
pub const E2E_NAMESPACE: &str = "twc-system";
/// Identity for Temporal writes in the e2e suite.
pub const E2E_IDENTITY: &str = "twc-e2e";
/// The only token audience the e2e status API accepts.
pub const E2E_API_AUDIENCE: &str = "twc-e2e-status";

/// The values the e2e suite installs the chart with.
/// The kinds the e2e suite copies without the webhook's access check (its opt-out).
pub const E2E_UNCHECKED_KINDS: [&str; 3] = [
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "ScaledObject",
];

pub fn e2e_values() -> Value {
    json!({
        // The suite's controller serves no webhook: the documented opt-out.
        "webhook": {"enabled": false, "kindsWithoutAccessCheck": E2E_UNCHECKED_KINDS},
        "controller": {"identity": E2E_IDENTITY},
        "statusApi": {"auth": {"mode": "token-review", "audiences": [E2E_API_AUDIENCE]}},
        // The chart's default kinds plus KEDA's ScaledObject (tests/e2e/owned_resources.rs).
        "ownedResourceKinds": [
            {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"]},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"]},
            {"apiGroups": ["keda.sh"], "resources": ["scaledobjects"]}
        ],
    })
}

/// Every NetworkPolicy option of the chart set at once: `tests/helm_chart.rs` pins what it
/// renders and `tests/upgrade.rs` dry-runs the same policy on a real API server.
pub fn network_policy_values() -> Value {
    json!({"networkPolicy": {
        "enabled": true,
        "httpFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                      "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}],
        "webhookFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
        "apiServer": {"cidrs": ["172.20.0.10/32", "fd00::1/128"]},
        "extraEgress": [{"to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}], "ports": [{"port": 3128}]}]
    }})
}

/// The audit log of the whole e2e suite. It outlives the test process so that
/// `tests/rbac_grants.rs` (run after the suite) can compare the chart's grants with what the
/// controller used. `target_tmpdir` is the caller's `CARGO_TARGET_TMPDIR`, which Cargo sets
/// only for integration tests, not for this library.
pub fn e2e_audit_log(target_tmpdir: &str) -> PathBuf {
    Path::new(target_tmpdir).join("e2e-audit.log")
}

/// The chart's RBAC rules for `values` (every Role and ClusterRole) and its ServiceAccount.
pub fn rendered_grants(values: &Value, namespace: &str) -> Result<(String, Vec<Value>)> {
    let objects = render(values, namespace)?;
    let sa = objects
        .iter()
        .find(|o| o["kind"] == "ServiceAccount")
        .and_then(|o| o["metadata"]["name"].as_str())
        .context("the chart renders no ServiceAccount")?
        .to_string();
    let rules = objects
        .iter()
        .filter(|o| is_controller_role(o))
        .map(|o| o["rules"].clone())
        .collect();
    Ok((format!("system:serviceaccount:{namespace}:{sa}"), rules))
}
pub const RELEASE: &str = "twc";

/// The kinds of the chart that make up the controller's identity and grants.
const IDENTITY_KINDS: [&str; 5] = [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// A Role or ClusterRole for the controller's ServiceAccount, not one of the end users' roles
/// the chart renders for people to bind (`app.kubernetes.io/component: rbac`: the Go chart's
/// editor/viewer roles and the ones aggregated into `admin`/`edit`/`view`).
pub fn is_controller_role(o: &Value) -> bool {
    matches!(o["kind"].as_str(), Some("ClusterRole" | "Role"))
        && o["metadata"]["labels"]["app.kubernetes.io/component"] != "rbac"
}

/// Runs a Helm action with the real `helm` CLI ([`crate::helm`]): `"helm_chart.py"` lints and
/// renders a chart for several value sets ([`crate::helm::helm_chart`]), `"helm_release.py"`
/// runs one release action ([`crate::helm::helm_release`]). The names are those of the Python
/// drivers these replaced, kept so callers need not change.
pub fn helm_driver(script: &str, request: &Value) -> Result<Value> {
    match script {
        "helm_chart.py" => crate::helm::helm_chart(request),
        "helm_release.py" => crate::helm::helm_release(request),
        other => bail!("no Helm driver {other}"),
    }
}

/// The value of `--<flag>=` among the controller arguments the chart renders (`render`).
pub fn chart_arg(objects: &[Value], flag: &str) -> Result<String> {
    let prefix = format!("--{flag}=");
    objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find_map(|a| a.as_str()?.strip_prefix(&prefix).map(str::to_string))
        .with_context(|| format!("the chart passes no --{flag}"))
}

/// Every Kubernetes object the chart renders for `values`, in release `RELEASE` of `namespace`.
pub fn render(values: &Value, namespace: &str) -> Result<Vec<Value>> {
    let root = crate::repo_root();
    let request = json!({
        "chart": root.join(CHART),
        "cases": [{"name": "e2e", "values": values, "release": RELEASE, "namespace": namespace}],
    });
    let doc = helm_driver("helm_chart.py", &request)?;
    let result = &doc["results"][0];
    if let Some(err) = result["error"].as_str() {
        bail!("the chart did not render: {err}");
    }
    let mut objects = Vec::new();
    for (template, text) in result["manifests"].as_object().into_iter().flatten() {
        if !template.ends_with(".yaml") {
            continue;
        }
        for part in serde_yaml::Deserializer::from_str(text.as_str().unwrap_or_default()) {
            let v = Value::deserialize(part)?;
            if v.is_object() {
                objects.push(v);
            }
        }
    }
    Ok(objects)
}

/// The controller's identity from the chart.
pub struct ChartIdentity {
    pub namespace: String,
    pub service_account: String,
    /// The ServiceAccount's kubeconfig (TokenRequest).
    pub kubeconfig: PathBuf,
    /// The rules the chart grants it, per object (`Kind/name` → rules).
    pub grants: Vec<(String, Value)>,
}

/// Renders the chart for `values`, creates `namespace`, applies the chart's ServiceAccount and
/// RBAC objects as the admin and returns a kubeconfig for the ServiceAccount.
pub async fn install_identity(
    plane: &crate::control_plane::ControlPlane,
    values: &Value,
    namespace: &str,
) -> Result<ChartIdentity> {
    let objects = render(values, namespace)?;
    let identity: Vec<&Value> = objects
        .iter()
        .filter(|o| IDENTITY_KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
        .collect();
    let sa = identity
        .iter()
        .find(|o| o["kind"] == "ServiceAccount")
        .and_then(|o| o["metadata"]["name"].as_str())
        .context("the chart renders no ServiceAccount")?
        .to_string();
    let mut yaml = String::new();
    for obj in &identity {
        yaml.push_str("---\n");
        yaml.push_str(&serde_yaml::to_string(obj)?);
    }
    kubectl(
        plane.kubeconfig_path(),
        &["create", "namespace", namespace],
        None,
    )
    .ok();
    kubectl(
        plane.kubeconfig_path(),
        &["apply", "--server-side", "--field-manager=helm", "-f", "-"],
        Some(&yaml),
    )?;
    let grants = identity
        .iter()
        .filter(|o| is_controller_role(o))
        .map(|o| {
            let ns = o["metadata"]["namespace"]
                .as_str()
                .map(|n| format!("{n}/"))
                .unwrap_or_default();
            (
                format!(
                    "{}/{ns}{}",
                    o["kind"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                ),
                o["rules"].clone(),
            )
        })
        .collect();
    let kubeconfig = plane.service_account_kubeconfig(namespace, &sa).await?;
    Ok(ChartIdentity {
        namespace: namespace.to_string(),
        service_account: sa,
        kubeconfig,
        grants,
    })
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let out = crate::kubectl::run(kubeconfig, args, stdin)?;
    ensure!(out.success, "kubectl {args:?} failed: {}", out.text);
    Ok(out.stdout)
}

/// One (apiGroup, resource[/subresource], verb) the chart grants.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    pub api_group: String,
    pub resource: String,
    pub verb: String,
}

/// Every (group, resource, verb) triple of a list of RBAC rules.
pub fn expand(rules: &Value) -> Vec<Grant> {
    let mut out = Vec::new();
    for rule in rules.as_array().into_iter().flatten() {
        let strs = |k: &str| -> Vec<String> {
            rule[k]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        };
        for g in strs("apiGroups") {
            for r in strs("resources") {
                for v in strs("verbs") {
                    out.push(Grant {
                        api_group: g.clone(),
                        resource: r.clone(),
                        verb: v,
                    });
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The grants no audit event of `user` used.
pub fn unused_grants(
    grants: &[Grant],
    events: &[crate::control_plane::AuditEvent],
    user: &str,
) -> Vec<Grant> {
    grants
        .iter()
        .filter(|g| {
            !events.iter().any(|e| {
                e.acting_user() == user
                    && e.verb == g.verb
                    && e.resource() == g.resource
                    && e.object_ref
                        .as_ref()
                        .is_some_and(|o| o.api_group == g.api_group)
            })
        })
        .cloned()
        .collect()
}

/// The CRD chart (`helm.sh/resource-policy: keep` on every CRD), installed before [`CHART`].
pub const CRD_CHART: &str = "charts/temporal-worker-controller-crds";

/// What one Helm 4 release action did ([`crate::helm::helm_release`]).
#[derive(Clone, Debug, serde::Deserialize)]
pub struct HelmRun {
    pub helm_version: String,
    pub ok: bool,
    pub error: Option<String>,
    pub status: Option<String>,
    pub revision: Option<i64>,
    pub started: f64,
    pub finished: f64,
}

impl HelmRun {
    /// `Err` with Helm's message unless the action succeeded.
    pub fn ensure_ok(self, what: &str) -> Result<HelmRun> {
        ensure!(
            self.ok,
            "{what} failed after {:.1} s: {}",
            self.finished - self.started,
            self.error.as_deref().unwrap_or("(no message)")
        );
        Ok(self)
    }

    pub fn took(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64((self.finished - self.started).max(0.0))
    }
}

/// The real `helm` CLI acting on releases of one namespace of a cluster: `helm
/// install|upgrade|rollback|uninstall --wait=watcher` (the kstatus watcher).
#[derive(Clone, Debug)]
pub struct Helm {
    pub kubeconfig: PathBuf,
    pub namespace: String,
    /// `--timeout` of every action, seconds.
    pub timeout_seconds: u64,
}

impl Helm {
    /// `helm install --wait --create-namespace`.
    pub async fn install(&self, release: &str, chart: &Path, values: &Value) -> Result<HelmRun> {
        self.run(
            json!({"action": "install", "release": release, "chart": chart,
                        "values": values, "create_namespace": true}),
        )
        .await
    }

    /// `helm install --wait --create-namespace oci://… --version … --plain-http`: a chart
    /// pushed to the rig's registry ([`crate::registry::Registry::push_chart`]).
    pub async fn install_oci(
        &self,
        release: &str,
        chart: &crate::registry::ChartRef,
        values: &Value,
    ) -> Result<HelmRun> {
        self.run(
            json!({"action": "install", "release": release, "chart": chart.reference,
            "chart_version": chart.version, "plain_http": true,
            "values": values, "create_namespace": true}),
        )
        .await
    }

    /// `helm upgrade --wait --reset-values oci://… --version … --plain-http`.
    pub async fn upgrade_oci(
        &self,
        release: &str,
        chart: &crate::registry::ChartRef,
        values: &Value,
    ) -> Result<HelmRun> {
        self.run(
            json!({"action": "upgrade", "release": release, "chart": chart.reference,
            "chart_version": chart.version, "plain_http": true, "values": values}),
        )
        .await
    }

    /// `helm upgrade --wait --reset-values`.
    pub async fn upgrade(&self, release: &str, chart: &Path, values: &Value) -> Result<HelmRun> {
        self.run(json!({"action": "upgrade", "release": release, "chart": chart, "values": values}))
            .await
    }

    /// `helm upgrade --install --wait --reset-values`.
    pub async fn upgrade_install(
        &self,
        release: &str,
        chart: &Path,
        values: &Value,
    ) -> Result<HelmRun> {
        self.run(
            json!({"action": "upgrade", "install": true, "release": release,
                        "chart": chart, "values": values}),
        )
        .await
    }

    /// `helm uninstall --wait --cascade=foreground` (Helm's advice for objects with finalizers).
    pub async fn uninstall(&self, release: &str) -> Result<HelmRun> {
        self.run(json!({"action": "uninstall", "release": release}))
            .await
    }

    /// `helm test`: runs the release's test hooks and fails when one of them fails.
    pub async fn test(&self, release: &str) -> Result<HelmRun> {
        self.run(json!({"action": "test", "release": release}))
            .await
    }

    /// `helm install` without `--wait` (for a release that is not meant to become ready).
    pub async fn install_no_wait(
        &self,
        release: &str,
        chart: &Path,
        values: &Value,
    ) -> Result<HelmRun> {
        let mut request = json!({"action": "install", "release": release, "chart": chart,
                        "values": values, "create_namespace": true});
        request["no_wait"] = json!(true);
        self.run(request).await
    }

    /// `helm rollback --wait` to `revision` (the previous one when `None`).
    pub async fn rollback(&self, release: &str, revision: Option<i64>) -> Result<HelmRun> {
        self.run(json!({"action": "rollback", "release": release, "version": revision}))
            .await
    }

    async fn run(&self, mut request: Value) -> Result<HelmRun> {
        request["kubeconfig"] = json!(self.kubeconfig);
        request["namespace"] = json!(self.namespace);
        if request["no_wait"] != true {
            request["wait"] = json!("watcher");
        }
        request["timeout"] = json!(self.timeout_seconds);
        tokio::task::spawn_blocking(move || {
            Ok(serde_json::from_value(helm_driver(
                "helm_release.py",
                &request,
            )?)?)
        })
        .await?
    }
}
