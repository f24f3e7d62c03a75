//! The Go controller's kinds (`WorkerDeployment`, `Connection`, `WorkerResourceTemplate`) run
//! through the same reconcile path as the seed kinds, and a seed object that shares a
//! WorkerDeployment's name stands down.

use std::time::Duration;
use test_harness::manifests::Kinds;

use anyhow::{Context as _, Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::{KindSet, TemporalWorkerOwnedResource};

use crate::support::*;

const T: Duration = Duration::from_secs(120);

/// A WorkerDeployment as the Go controller's users write it: `sunset` present, the custom
/// build ID under its Go name.
fn worker_deployment(c: &Case, name: &str, build_id: &str) -> Value {
    worker_deployment_in(c, Kinds::Canonical, name, build_id)
}

/// [`worker_deployment`] of kind set `kinds`.
fn worker_deployment_in(c: &Case, kinds: Kinds, name: &str, build_id: &str) -> Value {
    test_harness::manifests::twd(name)
        .kinds(kinds)
        .replicas(1)
        .pod_labels(json!({"app": name}))
        .tag("v1")
        .task_queue(&c.task_queue)
        .rollout(json!({"strategy": "AllAtOnce"}))
        .sunset("2s", "2s")
        .temporal_namespace(&c.temporal_ns)
        .connection("temporal-go")
        .spec(json!({"workerOptions": {"unsafeCustomBuildID": build_id}}))
        .build()
}

/// A PodDisruptionBudget per version of `orders`, in the Go controller's field names.
fn pdb_template() -> serde_json::Value {
    json!({"apiVersion": "temporal.io/v1alpha1", "kind": "WorkerResourceTemplate",
    "metadata": {"name": "pdb"},
    "spec": {"workerDeploymentRef": {"name": "orders"},
        "template": {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {}}}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_controller_kinds_roll_out_and_own_their_versions() -> Result<()> {
    let c = case("kinds").await?;
    // Created in the order a GitOps sync may apply them, the reverse of their references: a
    // template naming a WorkerDeployment not there yet, which names a Connection not there yet.
    // The caches do not have them at first, and the API server is asked by name.
    c.apply(pdb_template()).await?;
    c.apply(worker_deployment(&c, "orders", "release-1"))
        .await?;
    c.wait_wd("orders", "ConnectionNotFound", T, |wd| {
        condition_is(wd, "Ready", "False", "ConnectionNotFound")
    })
    .await?;
    c.apply(
        json!({"apiVersion": "temporal.io/v1alpha1", "kind": "Connection",
        "metadata": {"name": "temporal-go"},
        "spec": {"hostPort": c.env.temporal_address.clone()}}),
    )
    .await?;
    let wd = c
        .wait_wd("orders", "WorkerDeployment Ready", T, is_ready)
        .await?;
    ensure!(
        current_build(&wd).as_deref() == Some("release-1"),
        "{:?}",
        wd.status
    );

    // The versioned Deployment is owned by the WorkerDeployment (what Kubernetes' garbage
    // collector and the Go controller's take-over both rely on).
    let deployment = c
        .deployments()
        .get(&deployment_of("orders", "release-1"))
        .await?;
    let owner = deployment
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .find(|o| o.controller == Some(true))
        .context("no controller owner")?;
    ensure!(owner.kind == "WorkerDeployment", "owner {owner:?}");
    ensure!(Some(owner.uid) == wd.metadata.uid);

    // The WorkerResourceTemplate in the Go controller's field names gets a copy per version.
    let pdbs: Api<DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        &c.ns,
        &ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "policy",
            "v1",
            "PodDisruptionBudget",
        )),
    );
    eventually("a PodDisruptionBudget copy of release-1", T, || async {
        let list = pdbs
            .list(&ListParams::default().labels("temporal.io/owned-resource=pdb"))
            .await?;
        Ok((list.items.len() == 1).then_some(()))
    })
    .await?;
    let wrt = TemporalWorkerOwnedResource::api(c.client.clone(), &c.ns, KindSet::Canonical)
        .get("pdb")
        .await?;
    let ready = wrt
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    ensure!(ready.as_deref() == Some("True"), "{:?}", wrt.status);

    // A TemporalWorkerDeployment of the same name would drive the same Temporal worker
    // deployment: it is refused and does nothing, and the WorkerDeployment stays Ready.
    let mut seed = worker_deployment_in(&c, Kinds::Seed, "orders", "release-2");
    seed["spec"]["workerOptions"]["connectionRef"]["name"] = json!("temporal");
    c.apply(seed).await?;
    let refused = c
        .wait_twd("orders", "the seed object refused", T, |t| {
            condition_is(t, "Stalled", "True", "InvalidSpec")
        })
        .await?;
    let message = condition(&refused, "Stalled")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    ensure!(message.contains("WorkerDeployment"), "{message}");
    ensure!(
        c.deployments()
            .get_opt(&deployment_of("orders", "release-2"))
            .await?
            .is_none(),
        "the refused object created a Deployment"
    );
    ensure!(
        refused.metadata.finalizers.unwrap_or_default().is_empty(),
        "the refused object got our finalizer"
    );
    let wd = c.wds().get("orders").await?;
    ensure!(is_ready(&wd), "{:?}", wd.status);
    Ok(())
}

/// The Go controller v1.10's cluster-scoped `ClusterConnection` (its PR #549,
/// `api/v1alpha1/clusterconnection_types.go`): a WorkerDeployment naming it with
/// `connectionRef.kind: ClusterConnection` rolls out; the ClusterConnection is protected by our
/// finalizer while used, and its status (ours, as on a Connection) lists the user and reads
/// Ready; the status carries the Go-shaped fields; once the user is gone the ClusterConnection
/// can be deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_connection_is_used_protected_and_released() -> Result<()> {
    use kube::api::{DeleteParams, Patch, PatchParams};
    use temporal_worker_controller::api::ClusterConnection;

    let c = case("clusterconn").await?;
    let name = format!("cc-{}", c.ns);
    let ccs: Api<ClusterConnection> = Api::all(c.client.clone());
    ccs.patch(
        &name,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(
            json!({"apiVersion": "temporal.io/v1alpha1", "kind": "ClusterConnection",
            "metadata": {"name": name},
            "spec": {"hostPort": c.env.temporal_address.clone()}}),
        ),
    )
    .await?;
    let mut wd = worker_deployment(&c, "orders", "cluster-1");
    wd["spec"]["workerOptions"]["connectionRef"] =
        json!({"name": name, "kind": "ClusterConnection"});
    c.apply(wd).await?;
    let wd = c
        .wait_wd("orders", "WorkerDeployment Ready", T, is_ready)
        .await?;
    ensure!(
        current_build(&wd).as_deref() == Some("cluster-1"),
        "{:?}",
        wd.status
    );
    let status = serde_json::to_value(wd.status.as_ref().context("no status")?)?;
    ensure!(
        status["observedConnectionRef"] == json!({"name": name, "kind": "ClusterConnection"}),
        "{status}"
    );
    ensure!(
        status["currentVersion"]["deployment"]["name"]
            == json!(deployment_of("orders", "cluster-1"))
            && status["currentVersion"]["deployment"]["namespace"] == json!(c.ns)
            && status["currentVersion"]["deployment"]["uid"].is_string(),
        "{status}"
    );
    ensure!(status["versionConflictToken"].is_string(), "{status}");

    let user = format!("{}/orders", c.ns);
    let cc = eventually("ClusterConnection Ready, listing its user", T, || async {
        let cc = ccs.get(&name).await?;
        let s = cc.status.clone().unwrap_or_default();
        let ready = s
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        Ok((ready && s.worker_deployments == [user.clone()]).then_some(cc))
    })
    .await?;
    ensure!(
        cc.metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == temporal_worker_controller::api::FINALIZER),
        "the ClusterConnection in use has no finalizer"
    );

    // Deleting it while used waits (our finalizer holds it); deleting the user releases it.
    ccs.delete(&name, &DeleteParams::default()).await?;
    let held = ccs.get_opt(&name).await?;
    ensure!(
        held.is_some_and(|cc| cc.metadata.deletion_timestamp.is_some()),
        "the ClusterConnection went while a WorkerDeployment used it"
    );
    c.wds().delete("orders", &DeleteParams::default()).await?;
    eventually(
        "the WorkerDeployment and the ClusterConnection gone",
        T,
        || async {
            let gone =
                c.wds().get_opt("orders").await?.is_none() && ccs.get_opt(&name).await?.is_none();
            Ok(gone.then_some(()))
        },
    )
    .await
}
