//! Secure by default (issue 26 item 6), on the real API server with the real binary:
//!
//! - the chart, rendered with its defaults (only the address of a controller outside the
//!   cluster and free ports set), turns the validating webhook on with self-managed
//!   certificates and sends TemporalWorkerOwnedResource deletions to it;
//! - its ValidatingWebhookConfiguration is applied as Helm would, the controller binary is
//!   started as a process with exactly the arguments the chart gives it, as the chart's
//!   ServiceAccount; it creates its certificate Secret, and the API server's admission calls
//!   reach it: a bad TWOR is refused, and a user allowed to delete TWORs but not the kind a
//!   TWOR copies cannot delete it (the controller would delete the copies for them);
//! - the documented opt-out (`webhook.enabled: false`): the binary, started with the chart's
//!   arguments for it, refuses a TWOR whose kind needs an access check (Stalled, ApplyFailed,
//!   saying the webhook is off) instead of copying it unchecked.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerOwnedResource;
use test_harness::manifests;

const CONTROLLER_NS: &str = "twc-default-system";
const TWOR_WEBHOOK: &str = "temporalworkerownedresources.webhook.temporal.io";
const T: Duration = Duration::from_secs(60);

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The chart's defaults, but for what a controller outside the cluster needs: the webhook is
/// called by URL on a free port, and the HTTP port is free too.
fn default_values(webhook_port: u16, http_port: u16) -> Value {
    json!({
        "controller": {"identity": "twc-default-e2e"},
        "http": {"port": http_port},
        "webhook": {"url": format!("https://127.0.0.1:{webhook_port}"), "port": webhook_port},
    })
}

/// The controller's arguments in the rendered Deployment.
fn chart_args(objects: &[Value]) -> Result<Vec<String>> {
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .context("the chart renders no Deployment")?;
    Ok(
        deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .context("no args")?
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect(),
    )
}

fn arg(args: &[String], flag: &str) -> Result<String> {
    let prefix = format!("--{flag}=");
    args.iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_string))
        .with_context(|| format!("the chart passes no --{flag}"))
}

/// The controller binary, run as a process with `args`, as the chart's ServiceAccount.
struct Controller {
    child: tokio::process::Child,
    log: PathBuf,
}

impl Controller {
    fn start(args: &[String], kubeconfig: &Path, name: &str) -> Result<Controller> {
        let log = std::env::temp_dir().join(format!(
            "twc-webhook-default-{name}-{}.log",
            std::process::id()
        ));
        let out = std::fs::File::create(&log)?;
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_temporal-worker-controller"))
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAMESPACE", CONTROLLER_NS)
            .env("POD_NAME", format!("{name}-0"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out))
            .kill_on_drop(true)
            .spawn()
            .context("starting the controller binary")?;
        Ok(Controller { child, log })
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
        let _ = std::fs::remove_file(&self.log);
    }
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Result<(bool, String)> {
    let out = test_harness::kubectl::run(kubeconfig, args, stdin)?;
    Ok((out.success, out.text))
}

fn kubectl_ok(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let (ok, text) = kubectl(kubeconfig, args, stdin)?;
    ensure!(ok, "kubectl {args:?} failed: {text}");
    Ok(text)
}

/// Runs blocking work (a child process) off the runtime's workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await?
}

fn hpa_twor(name: &str, min_replicas: i32) -> Value {
    manifests::owned_resource(
        name,
        "worker",
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "spec": {"scaleTargetRef": {}, "minReplicas": min_replicas, "maxReplicas": 3}}),
    )
}

#[test]
fn the_default_chart_serves_admission_and_the_opt_out_refuses_unchecked_kinds() -> Result<()> {
    test_harness::runtime::block_on(async {
        let (plane, _) = test_harness::control_plane::shared_with_crds().await?;
        let admin = plane.kubeconfig_path().to_path_buf();
        let values = default_values(free_port()?, free_port()?);
        let objects = test_harness::chart::render(&values, CONTROLLER_NS)?;
        let vwc = check_rendered_defaults(&objects)?;
        let id = test_harness::chart::install_identity(plane, &values, CONTROLLER_NS).await?;
        let args = chart_args(&objects)?;
        let secret_name = arg(&args, "webhook-secret-name")?;

        let (path, body) = (admin.clone(), vwc.to_string());
        blocking(move || {
            kubectl_ok(
                &path,
                &["apply", "--server-side", "--field-manager=helm", "-f", "-"],
                Some(&body),
            )
        })
        .await?;
        let controller = Controller::start(&args, &id.kubeconfig, "webhook-on")?;
        let served = async {
            wait_for_secret(&admin, &secret_name).await?;
            wait_for_admission(&admin).await?;
            check_delete_needs_rights_on_the_kind(plane, &admin).await
        }
        .await;
        if let Err(e) = served {
            bail!("{e:#}\n--- controller log ---\n{}", controller.log_tail());
        }
        controller.stop().await;
        let name = vwc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let path = admin.clone();
        blocking(move || {
            kubectl_ok(
                &path,
                &["delete", "validatingwebhookconfiguration", &name],
                None,
            )
        })
        .await?;
        check_the_opt_out_refuses_unchecked_kinds(&admin, &values, &id.kubeconfig).await
    })
}

/// With its defaults the chart turns the webhook on, self-managed, and sends TWOR deletions
/// to it. Returns the ValidatingWebhookConfiguration.
fn check_rendered_defaults(objects: &[Value]) -> Result<Value> {
    let vwc = objects
        .iter()
        .find(|o| o["kind"] == "ValidatingWebhookConfiguration")
        .context("the chart's defaults render no ValidatingWebhookConfiguration")?
        .clone();
    let args = chart_args(objects)?;
    ensure!(
        args.iter().any(|a| a.starts_with("--webhook-port="))
            && args.contains(&"--webhook-cert-mode=self-managed".to_string()),
        "the default args do not serve a self-managed webhook: {args:?}"
    );
    let twor_ops: Vec<String> = vwc["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| w["name"] == TWOR_WEBHOOK)
        .flat_map(|w| {
            w["rules"][0]["operations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|o| o.as_str().map(str::to_string))
        .collect();
    ensure!(
        twor_ops == ["CREATE", "UPDATE", "DELETE"],
        "TWOR operations: {twor_ops:?}"
    );
    Ok(vwc)
}

/// The Lease holder creates the certificate Secret the chart names.
async fn wait_for_secret(admin: &Path, name: &str) -> Result<()> {
    let client = test_harness::control_plane::client_from(admin).await?;
    let secrets: Api<Secret> = Api::namespaced(client, CONTROLLER_NS);
    let deadline = Instant::now() + T;
    loop {
        if let Some(s) = secrets.get_opt(name).await? {
            let data = s.data.unwrap_or_default();
            if ["tls.crt", "tls.key", "ca.crt"]
                .iter()
                .all(|k| data.contains_key(*k))
            {
                return Ok(());
            }
        }
        ensure!(
            Instant::now() < deadline,
            "no certificate Secret {name} after {T:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The API server's admission call reaches the process: a bad TWOR is refused by it.
async fn wait_for_admission(admin: &Path) -> Result<()> {
    let probe = hpa_twor("probe", 0).to_string();
    let deadline = Instant::now() + T;
    loop {
        let (path, body) = (admin.to_path_buf(), probe.clone());
        let (_, out) = blocking(move || {
            kubectl(
                &path,
                &["apply", "--dry-run=server", "-n", CONTROLLER_NS, "-f", "-"],
                Some(&body),
            )
        })
        .await?;
        if out.contains(TWOR_WEBHOOK)
            && out.contains("denied the request")
            && out.contains("minReplicas")
        {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "the webhook did not answer within {T:?}; last kubectl output: {out}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Carol may delete TWORs but not HPAs: deleting a TWOR holding an HPA is refused (the
/// controller would delete the HPA copies for her); the admin may.
async fn check_delete_needs_rights_on_the_kind(
    plane: &test_harness::control_plane::ControlPlane,
    admin: &Path,
) -> Result<()> {
    let ns = format!("twor-delete-{}", std::process::id());
    let carol = plane.user_kubeconfig("carol", None)?;
    let grant = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "carol", "namespace": ns},
            "rules": [{"apiGroups": ["temporal.io"], "resources": ["temporalworkerownedresources"],
                       "verbs": ["get", "list", "create", "update", "patch", "delete"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "carol", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "carol"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}]}
    ]})
    .to_string();
    let scaler = hpa_twor("scaler", 1).to_string();
    let (admin, ns2) = (admin.to_path_buf(), ns.clone());
    blocking(move || {
        kubectl_ok(&admin, &["create", "namespace", &ns2], None)?;
        kubectl_ok(&admin, &["apply", "-f", "-"], Some(&grant))?;
        kubectl_ok(&admin, &["apply", "-n", &ns2, "-f", "-"], Some(&scaler))?;
        let (ok, out) = kubectl(
            &carol,
            &["delete", "temporalworkerownedresource", "scaler", "-n", &ns2, "--wait=false"],
            None,
        )?;
        ensure!(!ok, "carol deleted a TWOR holding an HPA: {out}");
        let want = format!(
            "user \"carol\" may not delete autoscaling/horizontalpodautoscalers in namespace \"{ns2}\""
        );
        ensure!(
            out.contains(TWOR_WEBHOOK) && out.contains(&want),
            "the refusal should come from the webhook and say why: {out}"
        );
        kubectl_ok(
            &admin,
            &["get", "temporalworkerownedresource", "scaler", "-n", &ns2],
            None,
        )?;
        kubectl_ok(
            &admin,
            &["delete", "temporalworkerownedresource", "scaler", "-n", &ns2, "--wait=false"],
            None,
        )?;
        Ok(())
    })
    .await
}

/// `webhook.enabled: false`: the binary with the chart's arguments for it refuses a TWOR of
/// a kind not declared unchecked, and says why.
async fn check_the_opt_out_refuses_unchecked_kinds(
    admin: &Path,
    values: &Value,
    kubeconfig: &Path,
) -> Result<()> {
    let mut off = values.clone();
    manifests::merge(
        &mut off,
        json!({"webhook": {"enabled": false}, "leaderElection": {"leaseName": "twc-webhook-off"}}),
    );
    let objects = test_harness::chart::render(&off, CONTROLLER_NS)?;
    ensure!(
        !objects
            .iter()
            .any(|o| o["kind"] == "ValidatingWebhookConfiguration"),
        "webhook.enabled=false still renders a webhook"
    );
    let controller = Controller::start(&chart_args(&objects)?, kubeconfig, "webhook-off")?;
    let ns = format!("twor-unchecked-{}", std::process::id());
    let (path, ns2, body) = (
        admin.to_path_buf(),
        ns.clone(),
        hpa_twor("scaler", 1).to_string(),
    );
    blocking(move || {
        kubectl_ok(&path, &["create", "namespace", &ns2], None)?;
        kubectl_ok(&path, &["apply", "-n", &ns2, "-f", "-"], Some(&body))
    })
    .await?;
    let client = test_harness::control_plane::client_from(admin).await?;
    let twors: Api<TemporalWorkerOwnedResource> =
        TemporalWorkerOwnedResource::api(client, &ns, KindSet::Seed);
    let deadline = Instant::now() + T;
    let result = loop {
        let twor = twors.get("scaler").await?;
        let conditions = twor.status.map(|s| s.conditions).unwrap_or_default();
        let stalled = conditions
            .iter()
            .find(|c| c.type_ == "Stalled" && c.status == "True");
        if let Some(c) = stalled {
            break if c.reason == "ApplyFailed" && c.message.contains("the admission webhook is off")
            {
                Ok(())
            } else {
                Err(anyhow::anyhow!("stalled for another reason: {c:?}"))
            };
        }
        if Instant::now() > deadline {
            break Err(anyhow::anyhow!(
                "the TWOR was not refused within {T:?}: {conditions:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let tail = controller.log_tail();
    controller.stop().await;
    result.map_err(|e| anyhow::anyhow!("{e:#}\n--- controller log ---\n{tail}"))
}
