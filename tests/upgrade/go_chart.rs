//! The Go temporal-worker-controller v1.8.1 chart, read from its downloaded module at test time,
//! installed with our image in place of theirs (`image.repository`/`image.tag`: its template
//! takes no digest) and its Deployment's `command`/`args` untouched: it passes only
//! `--leader-elect --metrics-bind-address=127.0.0.1:<port> --health-probe-bind-address=:8081`
//! to the image's entrypoint, which takes a list starting with a flag as `run`.
//!
//! Supplied from outside, each because the Go chart's defaults need it and nothing else here
//! provides it:
//! - **Its cert-manager dependency** is left out of a copy of the chart (`dependencies` removed
//!   from `Chart.yaml`): it is conditional on `certmanager.install`, `false` by default, but
//!   Helm refuses to install a chart whose declared dependency was never fetched.
//! - **cert-manager's objects**: with `certmanager.enabled` (default `true`) the chart renders an
//!   `Issuer` and a `Certificate` even when its webhook is off (the default), which need
//!   cert-manager's CRDs; `certmanager.enabled: false`, as its values offer.
//! - **The webhook Secret** `webhook-server-cert`: the Deployment always mounts it (cert-manager's
//!   `Certificate` would write it); here a self-made certificate. Our binary serves no webhook
//!   under these args.
//! - **Our CRDs** (the CRD chart, from the rig's registry), which serve the Go kinds.
//! - **RBAC our controller needs beyond theirs**: [`EXTRA_GRANTS`], bound to the Go chart's
//!   ServiceAccount; the test checks that list against what our chart grants and theirs does
//!   not.
//! - **Rig-only values**: `replicas: 1` and `metrics.port` on a free port (the stand-in's process
//!   Pods share the machine's network; the chart's fixed `:8081` probe port is kept).

use super::*;

use test_harness::chart::{Grant, expand, rendered_grants};

/// The Go chart's release (its objects are named after it).
const GO_RELEASE: &str = "go";
/// The image tag the Go chart's Deployment pulls.
const GO_TAG: &str = "go-chart";

/// Grants (api group, resource, verbs) our controller has from our chart and not from the Go
/// v1.8.1 chart: our kinds beyond the Go controller's (ClusterConnection, the
/// TemporalWorkerOwnedResource alias, the status of Connections), the Pod list behind the
/// stalled-rollout messages, `deployments/scale` patches, events in `events.k8s.io`, and the
/// owned resources' default kinds (HPA list/watch, PodDisruptionBudgets) and their deletion.
const EXTRA_GRANTS: &[(&str, &str, &[&str])] = &[
    ("", "pods", &["list"]),
    ("apps", "deployments/scale", &["patch"]),
    (
        "autoscaling",
        "horizontalpodautoscalers",
        &["list", "watch"],
    ),
    ("events.k8s.io", "events", &["create", "patch"]),
    (
        "policy",
        "poddisruptionbudgets",
        &["create", "delete", "patch"],
    ),
    (
        "temporal.io",
        "clusterconnections",
        &["get", "list", "patch", "watch"],
    ),
    ("temporal.io", "clusterconnections/status", &["patch"]),
    ("temporal.io", "connections/status", &["patch"]),
    (
        "temporal.io",
        "temporalworkerownedresources",
        &["delete", "list", "patch", "watch"],
    ),
    (
        "temporal.io",
        "temporalworkerownedresources/status",
        &["patch"],
    ),
    ("temporal.io", "workerresourcetemplates", &["delete"]),
];

fn extra_grants() -> Vec<Grant> {
    let mut out: Vec<Grant> = EXTRA_GRANTS
        .iter()
        .flat_map(|(g, r, verbs)| {
            verbs.iter().map(|v| Grant {
                api_group: g.to_string(),
                resource: r.to_string(),
                verb: v.to_string(),
            })
        })
        .collect();
    out.sort();
    out
}

/// A copy of the Go chart without its (disabled) cert-manager dependency.
fn go_chart_copy(module_dir: &Path, scratch: &Path) -> Result<PathBuf> {
    let chart = scratch.join("temporal-worker-controller");
    let out = std::process::Command::new("cp")
        .arg("-r")
        .arg(module_dir.join("helm/temporal-worker-controller"))
        .arg(&chart)
        .output()?;
    ensure!(out.status.success(), "copying the Go chart failed");
    let path = chart.join("Chart.yaml");
    let mut meta: serde_yaml::Mapping = serde_yaml::from_str(&std::fs::read_to_string(&path)?)?;
    let removed = meta.remove("dependencies");
    ensure!(
        removed.is_some(),
        "the Go chart declares no dependencies any more"
    );
    std::fs::write(&path, serde_yaml::to_string(&meta)?)?;
    Ok(chart)
}

/// What the Go chart's own controller roles grant (not the editor/viewer roles for people).
fn go_grants(chart: &Path, ns: &str) -> Result<Vec<Grant>> {
    let text = test_harness::helm::run_checked(&[
        "template",
        GO_RELEASE,
        &chart.to_string_lossy(),
        "--namespace",
        ns,
    ])?;
    let mut grants = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let o = <Value as serde::Deserialize>::deserialize(doc)?;
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        if matches!(o["kind"].as_str(), Some("ClusterRole" | "Role"))
            && !name.contains("editor")
            && !name.contains("viewer")
        {
            grants.extend(expand(&o["rules"]));
        }
    }
    grants.sort();
    grants.dedup();
    Ok(grants)
}

/// The RBAC objects giving the Go chart's ServiceAccount [`EXTRA_GRANTS`].
fn extra_rbac(ns: &str) -> Vec<Value> {
    let rules: Vec<Value> = EXTRA_GRANTS
        .iter()
        .map(|(g, r, verbs)| json!({"apiGroups": [g], "resources": [r], "verbs": verbs}))
        .collect();
    let name = "go-chart-extra-for-temporal-worker-controller-rs";
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "namespace": ns,
                "name": format!("{GO_RELEASE}-service-account")}]}),
    ]
}

/// The Secret the Go chart's Deployment mounts, with a self-made certificate.
fn webhook_secret() -> Result<Value> {
    use base64::Engine as _;
    use test_harness::certs::{Authority, Usage};
    let ca = Authority::new("go-chart-test-ca")?;
    let pair = ca.issue("webhook-service", None, &["webhook-service"], Usage::Server)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    Ok(
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "webhook-server-cert"},
        "data": {"tls.crt": b64(&pair.cert_pem), "tls.key": b64(&pair.key_pem)}}),
    )
}

/// Our chart's controller grants that the Go chart's roles lack must be [`EXTRA_GRANTS`].
fn extra_grants_are_what_ours_adds(chart: &Path, ns: &str) -> Result<()> {
    let (_, ours) = rendered_grants(&json!({"webhook": {"enabled": false}}), ns)?;
    let rules: Vec<Value> = ours
        .iter()
        .flat_map(|r| r.as_array().cloned().unwrap_or_default())
        .collect();
    let theirs = go_grants(chart, ns)?;
    let beyond: Vec<Grant> = expand(&Value::Array(rules))
        .into_iter()
        .filter(|g| !theirs.contains(g))
        .collect();
    ensure!(
        beyond == extra_grants(),
        "our chart grants beyond the Go chart {beyond:#?}; the test supplies {:#?}",
        extra_grants()
    );
    Ok(())
}

/// Our CRD chart from the registry, the extra RBAC and the webhook Secret, then the Go chart
/// with our image, `helm install --wait`.
async fn install_go_chart(c: &Cluster, chart: &Path, image: &ImageRef, ns: &str) -> Result<()> {
    let (crd_chart, _) = push_charts().await?;
    c.helm
        .install_oci(CRD_RELEASE, &crd_chart, &json!({}))
        .await?
        .ensure_ok("helm install --wait of our CRD chart")?;
    world::ensure_namespace(&c.client, ns).await?;
    let objects = extra_rbac(ns).into_iter().chain([webhook_secret()?]);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects.collect::<Vec<_>>()});
    let applied = test_harness::kubectl::run(
        c.plane.kubeconfig_path(),
        &["apply", "--server-side", "-n", ns, "-f", "-"],
        Some(&list.to_string()),
    )?;
    ensure!(applied.success, "kubectl apply: {}", applied.text);
    let values = json!({
        "image": {"repository": image.repository, "tag": GO_TAG},
        "replicas": 1,
        "metrics": {"port": free_port()?},
        "certmanager": {"enabled": false},
    });
    let install = c
        .helm
        .install(GO_RELEASE, chart, &values)
        .await?
        .ensure_ok("helm install --wait of the Go v1.8.1 chart with our image")?;
    println!("Go chart installed (--wait) in {:?}", install.took());
    Ok(())
}

/// The Go chart's manager Pod runs our image with the chart's own `args` (no `command`), as
/// 65532, and the controller found the image's CA bundle.
async fn assert_manager_runs_our_image(c: &Cluster, image: &ImageRef, ns: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), ns);
    let pod = pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=manager"))
        .await?
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .context("no manager Pod of the Go chart")?;
    let manager = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .context("no container")?;
    let first_arg = manager.args.as_ref().and_then(|a| a.first());
    ensure!(
        manager.command.is_none() && first_arg.map(String::as_str) == Some("--leader-elect"),
        "the Go chart's Deployment is not as released: {:?} {:?}",
        manager.command,
        manager.args
    );
    let expected = format!("{}:{GO_TAG}", image.repository);
    ensure!(
        manager.image.as_deref() == Some(expected.as_str()),
        "the Go chart runs {:?}",
        manager.image
    );
    let name = pod.metadata.name.clone().unwrap_or_default();
    let process = ContainerProcess::of_pod(&name, "--leader-elect")?;
    ensure!(
        process.ids()? == (65532, 65532),
        "uid/gid {:?}",
        process.ids()?
    );
    let (logged, bundled) = (
        process.logged_trust_roots()?,
        process.certificates_in("/etc/ssl/certs/ca-certificates.crt")?,
    );
    ensure!(
        logged == bundled && bundled > 0,
        "trust roots {logged} of {bundled}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_charts_deployment_runs_our_image_and_rolls_out_v1() -> Result<()> {
    let ns = RELEASE_NS;
    let image = push_image(controller_binary(), GO_TAG).await?;
    let build = test_harness::go_controller::GoControllerBuild::locate_async().await?;
    let scratch = std::env::temp_dir().join(format!("twc-go-chart-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let chart = go_chart_copy(&build.module_dir, &scratch)?;
    extra_grants_are_what_ours_adds(&chart, ns)?;
    let c = cluster().await?;
    install_go_chart(&c, &chart, &image, ns).await?;
    assert_manager_runs_our_image(&c, &image, ns).await?;
    let temporal_ns = workload_namespace(&c.client, "go-shop").await?;
    let wd = worker_deployment(
        "orders",
        &temporal_ns,
        "v1",
        json!({"strategy": "AllAtOnce"}),
    );
    world::apply(&c.client, "go-shop", "upgrade-test", wd).await?;
    let done = wait_wd(
        &workers(&c.client, "go-shop"),
        "orders",
        "v1 Current",
        ready,
    )
    .await?;
    ensure!(
        done.status.and_then(|s| s.current_version).is_some(),
        "no current version once Ready"
    );
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
