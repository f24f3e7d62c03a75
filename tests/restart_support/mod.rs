//! Shared by the integration tests that stop and start their own controller (not the e2e
//! suite's shared one): a namespace with a Connection to the shared Temporal dev server, the
//! controller, and waiting on a TWD.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::run::{self, RunOptions, Running};

pub const T: Duration = Duration::from_secs(120);

/// One test's world: its Kubernetes namespace (with a `temporal` Connection), its Temporal
/// namespace, the dev server's address, and a kubelet stand-in running the workers.
pub struct World {
    pub client: kube::Client,
    pub ns: String,
    pub temporal_ns: String,
    pub address: String,
    _kubelet: test_harness::kubelet::Kubelet,
}

impl World {
    pub async fn new(prefix: &str) -> Result<World> {
        let (_, client) = test_harness::control_plane::shared_with_crds().await?;
        let server = test_harness::temporal_server::shared().await?;
        let kubelet = test_harness::kubelet::Kubelet::start(client.clone()).await?;
        let ns = format!("{prefix}-{}", std::process::id() % 10000);
        let temporal_ns = format!("e2e-{ns}");
        server.create_namespace(&temporal_ns).await?;
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
            )
            .await?;
        Api::<temporal_worker_controller::api::TemporalConnection>::namespaced(client.clone(), &ns)
            .patch(
                "temporal",
                &PatchParams::apply(prefix).force(),
                &Patch::Apply(json!({
                    "apiVersion": "temporal.io/v1alpha1",
                    "kind": "TemporalConnection",
                    "metadata": {"name": "temporal"},
                    "spec": {"hostPort": server.address()},
                })),
            )
            .await?;
        Ok(World {
            client,
            ns,
            temporal_ns,
            address: server.address(),
            _kubelet: kubelet,
        })
    }

    /// A controller watching only this world's namespace, acting as `identity`.
    pub async fn controller(&self, identity: &str) -> Result<Running> {
        Ok(run::start(
            self.client.clone(),
            RunOptions {
                http_addr: "127.0.0.1:0".parse()?,
                watch_namespaces: vec![self.ns.clone()],
                identity: identity.into(),
                idle_interval: Duration::from_secs(10),
                fast_poll: Duration::from_millis(300),
                backlog_poll: None,
                ..Default::default()
            },
        )
        .await?)
    }

    pub fn twds(&self) -> Api<TemporalWorkerDeployment> {
        Api::namespaced(self.client.clone(), &self.ns)
    }
}

/// A one-replica TWD `name` whose workers poll `queue` through the world's `temporal`
/// Connection, with `image:<tag>` and the spec fields in `extra` (rollout, sunset, …).
pub fn twd(name: &str, tag: &str, queue: &str, temporal_ns: &str, extra: Value) -> Value {
    let mut spec = json!({
        "replicas": 1,
        "template": {"spec": {"containers": [{
            "name": "worker",
            "image": format!("registry.example/worker:{tag}"),
            "env": [{"name": "TEMPORAL_TASK_QUEUE", "value": queue}],
        }]}},
        "workerOptions": {"connectionRef": {"name": "temporal"}, "temporalNamespace": temporal_ns},
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    json!({
        "apiVersion": "temporal.io/v1alpha1",
        "kind": "TemporalWorkerDeployment",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// Polls TWD `name` until `pred` holds, for at most [`T`].
pub async fn wait(
    api: &Api<TemporalWorkerDeployment>,
    name: &str,
    what: &str,
    pred: impl Fn(&TemporalWorkerDeployment) -> bool,
) -> Result<TemporalWorkerDeployment> {
    let deadline = Instant::now() + T;
    loop {
        let t = api.get(name).await?;
        if pred(&t) {
            return Ok(t);
        }
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}: {:?}", t.status);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
