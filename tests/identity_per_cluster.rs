//! Identity per cluster (issue 26 item 7): two clusters with the controller installed the same
//! way (same `--identity`, same namespace) act as different identities in one Temporal
//! namespace, because each appends the UID of its own namespace (`--identity-namespace-uid`,
//! the chart's default); and an install upgraded to it keeps managing the routing it managed
//! under its plain identity.
//!
//! Two real control planes (each with our CRDs and its own kubelet stand-in) and one Temporal
//! dev server.

#[path = "common/controller.rs"]
mod controller;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use serde_json::json;
use temporal_worker_controller::api::{KindSet, TemporalWorkerDeployment};
use temporal_worker_controller::run::Running;
use test_harness::control_plane::{self, ControlPlane};
use test_harness::kubelet::Kubelet;
use test_harness::observe::describe_deployment;
use test_harness::world::{apply, create_namespace, wait};
use test_harness::{manifests, names, temporal_server};

/// Both installs: the same identity, the same namespace, as one Helm values file would give.
const IDENTITY: &str = "twc";
const CONTROLLER_NS: &str = "temporal-system";
const NAME: &str = "orders";
const QUEUE: &str = "identity-tq";

/// One cluster: a control plane with our CRDs, a stand-in, the controller's namespace and a
/// workload namespace with a Connection to the shared dev server.
struct Cluster {
    _plane: ControlPlane,
    client: kube::Client,
    _kubelet: Kubelet,
    /// The workload namespace (distinct per cluster: one Temporal worker deployment each).
    ns: String,
    /// UID of [`CONTROLLER_NS`] in this cluster.
    uid: String,
}

impl Cluster {
    async fn start(prefix: &str, temporal_address: &str) -> Result<Cluster> {
        let plane = ControlPlane::start().await?;
        let client = plane.client().await?;
        control_plane::install_crds(&client, &control_plane::repo_crds_dir()).await?;
        create_namespace(&client, CONTROLLER_NS).await?;
        let ns = names::unique(prefix);
        create_namespace(&client, &ns).await?;
        apply(
            &client,
            &ns,
            "identity-test",
            manifests::connection("temporal", temporal_address),
        )
        .await?;
        let uid = Api::<Namespace>::all(client.clone())
            .get(CONTROLLER_NS)
            .await?
            .metadata
            .uid
            .context("namespace without a UID")?;
        let kubelet = Kubelet::start(client.clone()).await?;
        Ok(Cluster {
            _plane: plane,
            client,
            _kubelet: kubelet,
            ns,
            uid,
        })
    }

    /// The controller as the chart runs it (`--identity twc`, POD_NAMESPACE), with or without
    /// `--identity-namespace-uid`.
    async fn controller(&self, namespace_uid: bool) -> Result<Running> {
        controller::start(self.client.clone(), &{
            let mut flags = controller::watching(&self.ns, IDENTITY);
            flags.push(format!("--lease-namespace={CONTROLLER_NS}"));
            if namespace_uid {
                flags.push(String::from("--identity-namespace-uid"));
            }
            flags
        })
        .await
    }

    /// Applies the TWD at `tag` and waits until the status shows it Current.
    async fn roll_out(&self, tag: &str, temporal_ns: &str) -> Result<String> {
        let twd = manifests::twd(NAME)
            .replicas(1)
            .tag(tag)
            .task_queue(QUEUE)
            .temporal_namespace(temporal_ns)
            .rollout(json!({"strategy": "AllAtOnce"}))
            .sunset("2s", "2s")
            .build();
        apply(&self.client, &self.ns, "identity-test", twd).await?;
        let api: Api<TemporalWorkerDeployment> =
            Api::namespaced_with(self.client.clone(), &self.ns, &KindSet::Seed);
        let done = wait(&api, NAME, &format!("{tag} Current"), |t| {
            let Some(s) = t.status.as_ref() else {
                return false;
            };
            let current = s.current_version.as_ref().map(|c| c.build_id.as_str());
            let target = s
                .target_version
                .as_ref()
                .map(|t| t.version.build_id.as_str());
            current.is_some() && current == target && current.is_some_and(|b| b.starts_with(tag))
        })
        .await?;
        done.status
            .and_then(|s| s.current_version)
            .map(|c| c.build_id)
            .context("no current version")
    }

    fn temporal_deployment(&self) -> String {
        format!("{}/{NAME}", self.ns)
    }
}

/// Temporal's routing manager identity of a worker deployment.
async fn manager(
    conn: &temporalio_client::Connection,
    temporal_ns: &str,
    deployment: &str,
) -> Result<String> {
    let resp = describe_deployment(conn, temporal_ns, deployment)
        .await?
        .with_context(|| format!("{deployment} unknown to Temporal"))?;
    Ok(resp
        .worker_deployment_info
        .map(|i| i.manager_identity)
        .unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_installed_alike_get_different_identities_in_one_temporal_namespace()
-> Result<()> {
    controller::init_tracing("warn");
    let temporal = temporal_server::shared().await?;
    let temporal_ns = names::unique("identity");
    temporal.create_namespace(&temporal_ns).await?;
    let conn = temporal.connect("identity-observer").await?;
    let address = temporal.address();
    let (a, b) = tokio::join!(
        Cluster::start("shop-a", &address),
        Cluster::start("shop-b", &address)
    );
    let (a, b) = (a?, b?);
    ensure!(a.uid != b.uid, "two clusters, one namespace UID?");

    // Cluster A, an existing install under the plain identity (the old default).
    let old = a.controller(false).await?;
    ensure!(old.identity == IDENTITY, "{}", old.identity);
    a.roll_out("v1", &temporal_ns).await?;
    let m = manager(&conn, &temporal_ns, &a.temporal_deployment()).await?;
    ensure!(m == IDENTITY, "manager {m:?} after the plain install");
    old.stop().await;

    // Upgraded to the cluster-unique identity: it takes over the routing its plain identity
    // managed (no RoutingManagedElsewhere) and claims it as `twc/<uid>`.
    let ctrl_a = a.controller(true).await?;
    ensure!(
        ctrl_a.identity == format!("{IDENTITY}/{}", a.uid),
        "cluster A acts as {:?}",
        ctrl_a.identity
    );
    a.roll_out("v2", &temporal_ns).await?;
    let manager_a = manager(&conn, &temporal_ns, &a.temporal_deployment()).await?;
    ensure!(manager_a == ctrl_a.identity, "A's manager is {manager_a:?}");

    // Cluster B, installed the same way, on the same Temporal namespace.
    let ctrl_b = b.controller(true).await?;
    ensure!(
        ctrl_b.identity == format!("{IDENTITY}/{}", b.uid),
        "cluster B acts as {:?}",
        ctrl_b.identity
    );
    b.roll_out("v1", &temporal_ns).await?;
    let manager_b = manager(&conn, &temporal_ns, &b.temporal_deployment()).await?;
    ensure!(manager_b == ctrl_b.identity, "B's manager is {manager_b:?}");

    println!("cluster A acts as {manager_a}, cluster B as {manager_b}");
    ensure!(
        manager_a != manager_b,
        "two clusters installed alike share the identity {manager_a:?} in Temporal"
    );
    ctrl_a.stop().await;
    ctrl_b.stop().await;
    Ok(())
}
