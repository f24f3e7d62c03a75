//! The GitOps contract on live objects: CRDs from `crds/` installed on the real control plane
//! (etcd + kube-apiserver + kube-controller-manager, `test_harness::control_plane`), objects read
//! back from the API server, and judged by the real engines (`test_harness::gitops::verdicts`: kstatus
//! and Flux's CEL `healthCheckExprs` reader in the Go checker, the shipped Argo CD Lua in mlua)
//! and by the real `helm install --wait` (the pinned Helm 4 CLI).
//!
//! No controller runs here. A TemporalWorkerDeployment nobody has written status for must still
//! read as "in progress" everywhere: the CRD's schema default for `status` (`Ready=Unknown`,
//! reason `WaitingForController`) is applied by the API server on every read.

#[path = "common/controller.rs"]
mod controller;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::twd::WAITING_FOR_CONTROLLER;
use test_harness::control_plane::{self, ControlPlane};
use test_harness::gitops::{
    Status, Verdicts, helm_install, load_yaml, repo_root, verdicts, yaml_files,
};
use test_harness::kubectl::kubectl;
use test_harness::names::unique;
use test_harness::wait::eventually;
use test_harness::{manifests, world};

const ANN: &str = "fixtures.temporal.io/";

/// The shared control plane with our CRDs installed, a client for this test's runtime, and a
/// fresh namespace.
async fn cluster(prefix: &str) -> Result<(&'static ControlPlane, kube::Client, String)> {
    let (plane, client) = control_plane::shared_with_crds().await?;
    let ns = unique(prefix);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    Ok((plane, client, ns))
}

fn twds(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &world::api_resource("TemporalWorkerDeployment"),
    )
}

fn connections(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &world::api_resource("TemporalConnection"),
    )
}

/// The object as the API server returns it, as JSON.
async fn read(api: &Api<DynamicObject>, name: &str) -> Result<Value> {
    Ok(serde_json::to_value(api.get(name).await?)?)
}

/// A manifest as a user would apply it: the fixture's kind, spec and finalizers under a new
/// name and namespace, without server-set metadata, annotations or status.
fn manifest(fixture: &Value, name: &str, ns: &str, finalizers: bool) -> Value {
    let mut metadata = json!({"name": name, "namespace": ns});
    if finalizers && let Some(f) = fixture.pointer("/metadata/finalizers") {
        metadata["finalizers"] = f.clone();
    }
    json!({
        "apiVersion": fixture["apiVersion"],
        "kind": fixture["kind"],
        "metadata": metadata,
        "spec": fixture["spec"],
    })
}

async fn create_connection(client: &kube::Client, ns: &str, name: &str) -> Result<()> {
    let conn: DynamicObject = serde_json::from_value(manifests::in_namespace(
        manifests::connection(name, "temporal-frontend.temporal.svc:7233"),
        ns,
    ))?;
    connections(client, ns)
        .create(&PostParams::default(), &conn)
        .await?;
    Ok(())
}

/// The `status` default the checked-in CRD declares.
fn crd_status_default() -> Value {
    crd_status_default_of("TemporalWorkerDeployment")
}

/// The status default of `kind`'s CRD (its message names the kind).
fn crd_status_default_of(kind: &str) -> Value {
    let file = format!("crds/{}s.temporal.io.yaml", kind.to_lowercase());
    let crd = load_yaml(&repo_root().join(&file));
    crd.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/status/default")
        .cloned()
        .unwrap_or_else(|| panic!("{file} declares no default for status"))
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Asserts the in-progress verdict of every engine on a TWD nobody wrote status for.
fn assert_waiting_for_controller(what: &str, obj: &Value) -> Verdicts {
    let v = verdicts(obj);
    assert_eq!(
        v.kstatus.status,
        Status::InProgress,
        "{what}: kstatus {v:?} on {obj}"
    );
    assert_eq!(
        v.kstatus.message, "Waiting for the controller to observe this TemporalWorkerDeployment",
        "{what}"
    );
    // Flux with the shipped healthCheckExprs: evaluated by its CEL reader, not ready, no error.
    assert_eq!(v.flux.status, Status::InProgress, "{what}: flux {v:?}");
    assert_eq!(v.flux.error, "", "{what}: flux {v:?}");
    assert_eq!(
        v.argocd,
        (
            "Progressing".to_string(),
            "Waiting for controller to observe generation 1".to_string()
        ),
        "{what}"
    );
    v
}

#[tokio::test]
async fn fresh_twd_reads_in_progress_everywhere_without_a_controller() -> Result<()> {
    let (plane, client, ns) = cluster("fresh").await?;
    let fixture = load_yaml(&repo_root().join("flux/fixtures/fresh.yaml"));
    let name = "orders-worker";
    create_connection(&client, &ns, "temporal-prod").await?;
    let api = twds(&client, &ns);
    let created = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(manifest(&fixture, name, &ns, false))?,
        )
        .await?;
    let created = serde_json::to_value(created)?;

    // GET, LIST and the create response all carry the schema default.
    let live = read(&api, name).await?;
    let listed = serde_json::to_value(
        api.list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|o| o.metadata.name.as_deref() == Some(name))
            .context("the TWD is listed")?,
    )?;
    let mut want_status = crd_status_default();
    want_status["versionCount"] = json!(0); // nested default of status.versionCount
    for (what, obj) in [("get", &live), ("list", &listed), ("create", &created)] {
        assert_eq!(obj["status"], want_status, "{what}: {obj}");
        assert_eq!(obj["metadata"]["generation"], json!(1), "{what}");
        assert_waiting_for_controller(what, obj);
    }
    assert_eq!(
        condition(&live, "Ready").map(|c| &c["reason"]),
        Some(&json!(WAITING_FOR_CONTROLLER))
    );
    // flux/fixtures/fresh.yaml records exactly what the API server returns.
    assert_eq!(
        live["status"], fixture["status"],
        "flux/fixtures/fresh.yaml status"
    );

    // The gap the default closes: the same object without status is Current to real kstatus.
    let mut bare = live.clone();
    bare.as_object_mut().map(|o| o.remove("status"));
    let v = verdicts(&bare);
    assert_eq!(
        v.kstatus.pair(),
        (Status::Current, "Resource is current".to_string())
    );

    // `kubectl wait --for=condition=Ready` does not pass either.
    let (ok, out) = kubectl(
        plane.kubeconfig_path(),
        &[
            "-n",
            &ns,
            "wait",
            &format!("twd/{name}"),
            "--for=condition=Ready",
            "--timeout=1s",
        ],
    )?;
    assert!(!ok && out.contains("timed out"), "{out}");
    Ok(())
}

/// What a fixture records: from the `fixtures.temporal.io/*` annotations (Flux fixtures), or the
/// Argo CD health from `health_test.yaml` (Argo CD testdata).
struct Recorded {
    kstatus: Option<(Status, String)>,
    flux: Option<Status>,
    argocd: (String, String),
}

fn flux_fixtures() -> Vec<(PathBuf, Value, Recorded)> {
    yaml_files(&repo_root().join("flux/fixtures"))
        .into_iter()
        .map(|p| {
            let obj = load_yaml(&p);
            let ann = |k: &str| -> String {
                obj["metadata"]["annotations"][format!("{ANN}{k}")]
                    .as_str()
                    .unwrap_or_else(|| panic!("{} lacks {ANN}{k}", p.display()))
                    .to_string()
            };
            let status = |k: &str| Status::parse(&ann(k)).expect("known status");
            let recorded = Recorded {
                kstatus: Some((status("kstatus"), ann("kstatus-message"))),
                flux: Some(status("health-check-exprs")),
                argocd: (ann("argocd-health"), ann("argocd-message")),
            };
            (p, obj, recorded)
        })
        .collect()
}

/// The Argo CD test data, written as `WorkerDeployment` (the canonical kind); the Flux fixtures
/// are `TemporalWorkerDeployment` (the alias kind), so the read-back covers both kinds.
fn argocd_testdata() -> Vec<(PathBuf, Value, Recorded)> {
    let dir = repo_root().join("argocd/resource_customizations/temporal.io/WorkerDeployment");
    let tests = load_yaml(&dir.join("health_test.yaml"));
    let by_input: BTreeMap<String, (String, String)> = tests["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .map(|t| {
            (
                t["inputPath"].as_str().unwrap_or_default().to_string(),
                (
                    t["healthStatus"]["status"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    t["healthStatus"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ),
            )
        })
        .collect();
    yaml_files(&dir.join("testdata"))
        .into_iter()
        .map(|p| {
            let input = format!(
                "testdata/{}",
                p.file_name().and_then(|f| f.to_str()).unwrap_or_default()
            );
            let argocd = by_input
                .get(&input)
                .unwrap_or_else(|| panic!("{input} is not in health_test.yaml"))
                .clone();
            let obj = load_yaml(&p);
            (
                p,
                obj,
                Recorded {
                    kstatus: None,
                    flux: None,
                    argocd,
                },
            )
        })
        .collect()
}

/// Recreates `fixture` on the API server: created from its spec, its generation reached with
/// real spec updates, its status written through the status subresource, deleted (finalizer
/// kept) when the fixture is being deleted. Returns the object as read back.
async fn recreate(
    api: &Api<DynamicObject>,
    fixture: &Value,
    name: &str,
    ns: &str,
) -> Result<Value> {
    let deleting = fixture.pointer("/metadata/deletionTimestamp").is_some();
    let generation = fixture["metadata"]["generation"]
        .as_i64()
        .context("fixture generation")?;
    // A graceful delete of an object with finalizers bumps the generation once more.
    let before_delete = if deleting { generation - 1 } else { generation };
    api.create(
        &PostParams::default(),
        &serde_json::from_value(manifest(fixture, name, ns, true))?,
    )
    .await?;
    // Distinct spec changes, then back to the fixture's own value: one generation each.
    let original = fixture["spec"]
        .get("minReadySeconds")
        .cloned()
        .unwrap_or(Value::Null);
    for step in 2..=before_delete {
        let value = if step == before_delete {
            original.clone()
        } else {
            json!(1000 + step)
        };
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minReadySeconds": value}})),
        )
        .await?;
    }
    if let Some(status) = fixture.get("status") {
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
    }
    if deleting {
        api.delete(name, &DeleteParams::default()).await?;
    }
    let live = read(api, name).await?;
    ensure!(
        live["metadata"]["generation"] == json!(generation),
        "{name}: reached generation {}, fixture has {generation}",
        live["metadata"]["generation"]
    );
    ensure!(
        live["spec"] == fixture["spec"],
        "{name}: spec read back differs from the fixture's:\n{}\n{}",
        live["spec"],
        fixture["spec"]
    );
    Ok(live)
}

#[tokio::test]
async fn every_fixture_read_back_from_the_api_server_gets_its_recorded_verdicts() -> Result<()> {
    let (_plane, client, ns) = cluster("fixtures").await?;
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut to_release = Vec::new();
    for (source, (path, fixture, recorded)) in flux_fixtures()
        .into_iter()
        .map(|f| ("flux", f))
        .chain(argocd_testdata().into_iter().map(|f| ("argocd", f)))
    {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let name = format!("{source}-{stem}");
        let file = path.display();
        let kind = fixture["kind"].as_str().context("fixture kind")?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &world::api_resource(kind));
        let live = recreate(&api, &fixture, &name, &ns)
            .await
            .with_context(|| format!("recreating {file}"))?;
        if fixture.pointer("/metadata/finalizers").is_some() {
            to_release.push((api.clone(), name.clone()));
        }
        checked += 1;
        failures.extend(read_back_failures(
            &file.to_string(),
            &fixture,
            &live,
            &recorded,
        ));
    }
    // Let the namespace go: drop the finalizers nobody (no controller) would remove.
    for (api, name) in to_release {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    }
    assert!(checked >= 20, "only {checked} fixtures");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// How the object read back (`live`) differs from its fixture and its recorded verdicts, and
/// where the engines disagree.
fn read_back_failures(
    file: &str,
    fixture: &Value,
    live: &Value,
    recorded: &Recorded,
) -> Vec<String> {
    let mut failures = Vec::new();
    // The API server keeps the fixture's status as written (nothing pruned), plus defaults.
    let mut want_status = fixture
        .get("status")
        .cloned()
        .unwrap_or_else(|| crd_status_default_of(fixture["kind"].as_str().unwrap_or_default()));
    if let Some(s) = want_status.as_object_mut() {
        s.entry("versionCount").or_insert(json!(0));
    }
    if live["status"] != want_status {
        failures.push(format!(
            "{file}: status read back differs: {}",
            differences(&live["status"], &want_status)
        ));
    }
    let v = verdicts(live);
    if let Some(want) = &recorded.kstatus
        && v.kstatus.pair() != *want
    {
        failures.push(format!(
            "{file}: kstatus {:?}, recorded {want:?}",
            v.kstatus
        ));
    }
    if let Some(want) = recorded.flux
        && v.flux.status != want
    {
        failures.push(format!("{file}: flux {:?}, recorded {want}", v.flux));
    }
    if v.argocd != recorded.argocd {
        failures.push(format!(
            "{file}: argocd {:?}, recorded {:?}",
            v.argocd, recorded.argocd
        ));
    }
    // Whatever is recorded: Argo CD is Healthy only when kstatus and Flux say Current, and
    // Degraded only when they say Failed (or the object is a terminal one kstatus cannot
    // see as such because Stalled is missing).
    let healthy = v.argocd.0 == "Healthy";
    if healthy != (v.kstatus.status == Status::Current)
        || healthy != (v.flux.status == Status::Current)
    {
        failures.push(format!(
            "{file}: argocd {} vs kstatus {} vs flux {}",
            v.argocd.0, v.kstatus.status, v.flux.status
        ));
    }
    if (v.kstatus.status == Status::Failed) != (v.flux.status == Status::Failed)
        || (v.kstatus.status == Status::Failed && v.argocd.0 != "Degraded")
    {
        failures.push(format!(
            "{file}: failed verdicts disagree: argocd {} kstatus {} flux {}",
            v.argocd.0, v.kstatus.status, v.flux.status
        ));
    }
    failures
}

/// The status keys whose values differ, with both values.
fn differences(got: &Value, want: &Value) -> String {
    let empty = serde_json::Map::new();
    let (g, w) = (
        got.as_object().unwrap_or(&empty),
        want.as_object().unwrap_or(&empty),
    );
    g.keys()
        .chain(w.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| g.get(*k) != w.get(*k))
        .map(|k| format!("{k}: got {:?}, want {:?}", g.get(k), w.get(k)))
        .collect::<Vec<_>>()
        .join("; ")
}

#[tokio::test]
async fn helm_install_wait_fails_while_no_controller_writes_status() -> Result<()> {
    let (plane, client, ns) = cluster("helm-fail").await?;
    let kubeconfig = plane.kubeconfig_path().to_path_buf();
    let release = "orders-worker";
    let started = Instant::now();
    let (install_ns, install_release) = (ns.clone(), release.to_string());
    let result = tokio::task::spawn_blocking(move || {
        helm_install(&kubeconfig, &install_release, &install_ns, &json!({}), 20)
    })
    .await??;
    let took = started.elapsed();
    println!("helm install --wait (no controller): {result:?} after {took:?}");
    assert_eq!(
        result.helm_version,
        test_harness::helm::pinned_version(),
        "not the pinned helm"
    );
    assert!(!result.ok, "helm install --wait passed: {result:?}");
    let error = result.error.clone().unwrap_or_default();
    // The watcher waited for the TWD (and only for it: the connection is Current) until the timeout.
    assert!(
        error.contains("context deadline exceeded") || error.contains("timed out"),
        "{error}"
    );
    assert!(
        result.finished - result.started >= 19.0,
        "gave up early: {result:?}"
    );
    assert!(took >= Duration::from_secs(19), "{took:?}");
    let live = read(&twds(&client, &ns), release).await?;
    assert_waiting_for_controller("after helm install", &live);
    Ok(())
}

/// The other half with a stand-in for the controller's status write (the real controller
/// needs workers that poll Temporal): Helm 4 returns only after the TWD's status says Ready.
#[tokio::test]
async fn helm_install_wait_returns_once_the_status_says_ready() -> Result<()> {
    let (plane, client, ns) = cluster("helm-ready").await?;
    let kubeconfig = plane.kubeconfig_path().to_path_buf();
    let release = "orders-worker";
    let (install_ns, install_release) = (ns.clone(), release.to_string());
    let install = tokio::task::spawn_blocking(move || {
        helm_install(&kubeconfig, &install_release, &install_ns, &json!({}), 60)
    });
    let api = twds(&client, &ns);
    // Created and read as waiting for the controller while helm waits.
    let live = eventually("the TWD to be created", Duration::from_secs(30), || {
        let api = api.clone();
        async move {
            match api.get_opt(release).await? {
                Some(o) => Ok(Some(serde_json::to_value(o)?)),
                None => Ok(None),
            }
        }
    })
    .await?;
    assert_waiting_for_controller("during helm install", &live);
    // Helm's kstatus watcher has started watching TWDs (the API server's audit log shows it), so
    // from here on Helm is waiting on the TWD's status, not still applying the chart.
    let watch = eventually("Helm to watch TWDs", Duration::from_secs(30), || {
        let ns = ns.clone();
        async move {
            Ok(plane.audit_events()?.into_iter().find(|e| {
                e.verb == "watch"
                    && e.request_uri.contains("temporalworkerdeployments")
                    && e.object_ref
                        .as_ref()
                        .is_some_and(|o| o.namespace.is_empty() || o.namespace == ns)
            }))
        }
    })
    .await?;
    println!("helm watches: {}", watch.request_uri);
    assert!(!install.is_finished(), "helm returned before Ready");

    let promoted = load_yaml(&repo_root().join("flux/fixtures/promoted.yaml"));
    let mut status = promoted["status"].clone();
    status["observedGeneration"] = live["metadata"]["generation"].clone();
    for c in status["conditions"]
        .as_array_mut()
        .context("conditions")?
        .iter_mut()
    {
        c["observedGeneration"] = live["metadata"]["generation"].clone();
    }
    let written_at = test_harness::gitops::unix_now();
    api.patch_status(
        release,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await?;
    let ready = read(&api, release).await?;
    let v = verdicts(&ready);
    assert_eq!(v.kstatus.status, Status::Current, "{v:?}");
    assert_eq!(v.flux.status, Status::Current, "{v:?}");
    assert_eq!(v.argocd.0, "Healthy", "{v:?}");

    let result = tokio::time::timeout(Duration::from_secs(60), install).await???;
    println!("helm install --wait (Ready written at {written_at}): {result:?}");
    assert!(result.ok, "helm install --wait failed: {result:?}");
    assert!(
        result.finished >= written_at,
        "helm returned at {} before the Ready status was written at {written_at}",
        result.finished
    );
    Ok(())
}

/// The real controller (in-process, watching only this test's namespace) replaces the placeholder
/// with its own status on its first write, even when it cannot get further: here the
/// TemporalConnection points at a closed port, so the rollout is blocked and retried. Nothing of
/// the placeholder survives (not its reason, not its 1970 `lastTransitionTime`), and every tool
/// still reads the TWD as in progress.
#[tokio::test]
async fn the_controllers_first_status_write_replaces_the_placeholder() -> Result<()> {
    let (_plane, client, ns) = cluster("controller").await?;
    let fixture = load_yaml(&repo_root().join("flux/fixtures/fresh.yaml"));
    let name = "orders-worker";
    let conn: DynamicObject = serde_json::from_value(manifests::in_namespace(
        manifests::connection("temporal-prod", "127.0.0.1:1"),
        &ns,
    ))?;
    connections(&client, &ns)
        .create(&PostParams::default(), &conn)
        .await?;
    let api = twds(&client, &ns);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(manifest(&fixture, name, &ns, false))?,
    )
    .await?;
    assert_waiting_for_controller("before the controller", &read(&api, name).await?);

    let controller =
        controller::start(client.clone(), &[format!("--watch-namespaces={ns}")]).await?;
    let written = eventually(
        "the controller's first status write",
        Duration::from_secs(60),
        || {
            let api = api.clone();
            async move {
                let live = read(&api, name).await?;
                Ok((live.pointer("/status/observedGeneration") == Some(&json!(1))).then_some(live))
            }
        },
    )
    .await;
    controller.stop().await;
    let live = written?;

    let conditions = live["status"]["conditions"]
        .as_array()
        .context("conditions")?;
    let types: Vec<&str> = conditions
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(
        types,
        ["Ready", "Progressing", "Reconciling", "Stalled"],
        "{live}"
    );
    for c in conditions {
        assert_ne!(c["reason"], json!(WAITING_FOR_CONTROLLER), "{live}");
        assert_ne!(
            c["lastTransitionTime"],
            json!("1970-01-01T00:00:00Z"),
            "{live}"
        );
        assert_eq!(c["observedGeneration"], json!(1), "{live}");
    }
    assert_eq!(
        condition(&live, "Reconciling").map(|c| &c["status"]),
        Some(&json!("True")),
        "{live}"
    );
    let v = verdicts(&live);
    println!("after the controller's first write: {v:?}");
    assert_eq!(v.kstatus.status, Status::InProgress, "{v:?}");
    assert_eq!(v.flux.status, Status::InProgress, "{v:?}");
    assert_eq!(v.argocd.0, "Progressing", "{v:?}");
    Ok(())
}

/// The documented install of the Argo CD checks: `kubectl patch --type merge --patch-file
/// argocd/argocd-cm.yaml` into an existing `argocd-cm` keeps its other keys and installs each
/// script under both of its kinds (the alias kinds' keys are YAML aliases in the file, which
/// kubectl must resolve to the script's text).
#[tokio::test]
async fn argocd_cm_patch_installs_every_script_under_each_of_its_kinds() -> Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let (plane, client) = control_plane::shared_with_crds().await?;
    world::ensure_namespace(&client, "argocd").await?;
    let kc = plane.kubeconfig_path();
    let (ok, out) = kubectl(
        kc,
        &[
            "-n",
            "argocd",
            "create",
            "configmap",
            "argocd-cm",
            "--from-literal=url=https://argocd.example.com",
        ],
    )?;
    ensure!(ok, "{out}");
    let patch = repo_root().join("argocd/argocd-cm.yaml");
    let (ok, out) = kubectl(
        kc,
        &[
            "-n",
            "argocd",
            "patch",
            "configmap",
            "argocd-cm",
            "--type",
            "merge",
            "--patch-file",
            &patch.display().to_string(),
        ],
    )?;
    ensure!(ok, "{out}");
    let cm = Api::<ConfigMap>::namespaced(client, "argocd")
        .get("argocd-cm")
        .await?;
    let data = cm.data.unwrap_or_default();
    ensure!(
        data.get("url").map(String::as_str) == Some("https://argocd.example.com"),
        "the patch dropped an existing key: {:?}",
        data.keys()
    );
    let scripts: [(&str, &[&str]); 3] = [
        (
            "temporalworkerdeployment",
            &["WorkerDeployment", "TemporalWorkerDeployment"],
        ),
        (
            "temporalworkerownedresource",
            &["WorkerResourceTemplate", "TemporalWorkerOwnedResource"],
        ),
        (
            "temporalconnection",
            &["Connection", "TemporalConnection", "ClusterConnection"],
        ),
    ];
    for (script, kinds) in scripts {
        let want = std::fs::read_to_string(repo_root().join(format!("lua/{script}-health.lua")))?;
        for kind in kinds {
            let key = format!("resource.customizations.health.temporal.io_{kind}");
            ensure!(
                data.get(&key) == Some(&want),
                "{key} in the live argocd-cm is not lua/{script}-health.lua"
            );
        }
    }
    // The resource actions, under both kind names, as the patch file carries them (its YAML
    // anchor expanded by kubectl).
    let file: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(&patch)?)?;
    for kind in ["WorkerDeployment", "TemporalWorkerDeployment"] {
        let key = format!("resource.customizations.actions.temporal.io_{kind}");
        let want = file["data"][key.as_str()].as_str();
        ensure!(
            want.is_some_and(|w| w.contains("discovery.lua"))
                && data.get(&key).map(String::as_str) == want,
            "{key} in the live argocd-cm is not the patch file's actions"
        );
    }
    // The seven health keys, the two actions keys and the ConfigMap's own `url`.
    ensure!(data.len() == 10, "unexpected keys: {:?}", data.keys());
    Ok(())
}

/// The owned-resource states read back from the real API server: the Argo CD test data as
/// `WorkerResourceTemplate` and the Flux fixtures as `TemporalWorkerOwnedResource`, each created
/// from its spec, brought to its generation, given its status through the status subresource
/// (deleted when it is being deleted). Nothing is pruned, and kstatus, the Flux expressions and
/// the owned-resource Argo CD check answer as recorded.
#[tokio::test]
async fn owned_resource_states_read_back_from_the_api_server_get_their_recorded_verdicts()
-> Result<()> {
    let (_plane, client, ns) = cluster("owned").await?;
    let script =
        std::fs::read_to_string(repo_root().join("lua/temporalworkerownedresource-health.lua"))?;
    let argo_dir =
        repo_root().join("argocd/resource_customizations/temporal.io/WorkerResourceTemplate");
    let argo_cases = argocd_cases(&argo_dir)?;
    let mut failures = Vec::new();
    let mut to_release = Vec::new();
    let flux = yaml_files(&repo_root().join("flux/fixtures/owned"));
    let argo = yaml_files(&argo_dir.join("testdata"));
    for path in flux.iter().chain(&argo) {
        let fixture = load_yaml(path);
        let kind = fixture["kind"].as_str().context("kind")?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &world::api_resource(kind));
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let name = format!("{}-{stem}", kind.to_lowercase());
        let live = recreate_owned(&api, &fixture, &name, &ns).await?;
        if fixture.pointer("/metadata/finalizers").is_some() {
            to_release.push((api.clone(), name.clone()));
        }
        let file = path.display();
        let want_status = fixture
            .get("status")
            .cloned()
            .unwrap_or_else(|| crd_status_default_of(kind));
        if live["status"] != want_status {
            failures.push(format!(
                "{file}: status read back differs: {}",
                differences(&live["status"], &want_status)
            ));
        }
        let argocd = test_harness::gitops::argocd_health_with(
            test_harness::gitops::Sandbox::ArgoCmDefault,
            &script,
            &live,
        );
        let (ks, exprs) = (
            test_harness::gitops::kstatus(&live),
            health_check_exprs_status(&live),
        );
        let recorded = recorded_owned(path, &fixture, &argo_cases)?;
        if argocd != recorded.1 {
            failures.push(format!(
                "{file}: argocd {argocd:?}, recorded {:?}",
                recorded.1
            ));
        }
        if let Some((want_ks, want_exprs)) = recorded.0
            && (ks != want_ks || exprs != want_exprs)
        {
            failures.push(format!(
                "{file}: kstatus {ks:?} exprs {exprs}, recorded {want_ks:?} {want_exprs}"
            ));
        }
    }
    for (api, name) in to_release {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// `inputPath -> (health, message)` of the `health_test.yaml` in `dir`.
fn argocd_cases(dir: &std::path::Path) -> Result<BTreeMap<String, (String, String)>> {
    let tests = load_yaml(&dir.join("health_test.yaml"));
    let cases = tests["tests"].as_array().context("tests")?;
    Ok(cases
        .iter()
        .map(|t| {
            let text = |p: &str| {
                t.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (
                text("/inputPath"),
                (text("/healthStatus/status"), text("/healthStatus/message")),
            )
        })
        .collect())
}

/// What an owned-resource object records: kstatus and Flux verdicts (Flux fixtures only) and
/// the Argo CD health (from the annotations, or the `health_test.yaml` case of Argo test data).
type OwnedRecord = (Option<((Status, String), Status)>, (String, String));

fn recorded_owned(
    path: &std::path::Path,
    fixture: &Value,
    argo_cases: &BTreeMap<String, (String, String)>,
) -> Result<OwnedRecord> {
    let input = format!(
        "testdata/{}",
        path.file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default()
    );
    if path.starts_with(repo_root().join("argocd")) {
        let argo = argo_cases
            .get(&input)
            .with_context(|| format!("{input} is not in health_test.yaml"))?;
        return Ok((None, argo.clone()));
    }
    let ann = |k: &str| {
        fixture["metadata"]["annotations"][format!("{ANN}{k}")]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let status = |k: &str| Status::parse(&ann(k)).context("recorded status");
    Ok((
        Some((
            (status("kstatus")?, ann("kstatus-message")),
            status("health-check-exprs")?,
        )),
        (ann("argocd-health"), ann("argocd-message")),
    ))
}

fn health_check_exprs_status(obj: &Value) -> Status {
    test_harness::gitops::health_check_exprs(obj).0
}

/// [`recreate`] for an owned resource: its generation is reached by changing the copied
/// object's `spec.maxReplicas` (under `template` or, for the seed kind, `object`), ending on
/// the fixture's own value.
async fn recreate_owned(
    api: &Api<DynamicObject>,
    fixture: &Value,
    name: &str,
    ns: &str,
) -> Result<Value> {
    let deleting = fixture.pointer("/metadata/deletionTimestamp").is_some();
    let generation = fixture["metadata"]["generation"]
        .as_i64()
        .context("fixture generation")?;
    let before_delete = if deleting { generation - 1 } else { generation };
    let field = if fixture["spec"].get("template").is_some() {
        "template"
    } else {
        "object"
    };
    // Created with another value when the fixture's generation needs a change back to its own.
    let mut first = manifest(fixture, name, ns, true);
    if before_delete > 1 {
        first["spec"][field]["spec"]["maxReplicas"] = json!(1001);
    }
    api.create(&PostParams::default(), &serde_json::from_value(first)?)
        .await?;
    let original = fixture["spec"][field]["spec"]["maxReplicas"].clone();
    for step in 2..=before_delete {
        let value = if step == before_delete {
            original.clone()
        } else {
            json!(1000 + step)
        };
        let patch = json!({"spec": {field: {"spec": {"maxReplicas": value}}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }
    if let Some(status) = fixture.get("status") {
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
    }
    if deleting {
        api.delete(name, &DeleteParams::default()).await?;
    }
    let live = read(api, name).await?;
    ensure!(
        live["metadata"]["generation"] == json!(generation),
        "{name}: reached generation {}, fixture has {generation}",
        live["metadata"]["generation"]
    );
    ensure!(
        live["spec"] == fixture["spec"],
        "{name}: spec read back differs:\n{}\n{}",
        live["spec"],
        fixture["spec"]
    );
    Ok(live)
}
