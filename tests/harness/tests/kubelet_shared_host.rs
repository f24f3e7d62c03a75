//! The kubelet stand-in with its shared worker host (`KubeletOptions::shared_worker_host`,
//! issue 52): many worker Pods on one host thread, one runtime and a few shared connections,
//! each Ready only once Temporal lists its own identity as a poller of its own version, and one
//! stopping leaves the others running and polling.
//!
//! A binary of its own: one stand-in per cluster, and this one's options differ from
//! tests/kubelet.rs's.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use temporalio_client::{WorkflowGetResultOptions, WorkflowStartOptions};
use temporalio_common::data_converters::{PayloadConverter, RawValue};
use test_harness::kubelet::{Kubelet, KubeletOptions};
use test_harness::names::unique;
use test_harness::worker::HelloWorkflow;
use test_harness::{control_plane, observe, temporal_server};

mod common;

/// Generous: a 2-core machine, and other test binaries may run beside this one.
const DEADLINE: Duration = Duration::from_secs(180);
/// Versions (Deployments), each with its own task queue, and replicas of each: 20 worker Pods,
/// two per version so that replicas of one version (which the SDK will not put on one
/// connection) are covered too.
const VERSIONS: usize = 10;
const REPLICAS: i32 = 2;

/// One Deployment of worker Pods: its app label, task queue and Temporal deployment.
struct Version {
    app: String,
    task_queue: String,
    deployment: String,
}

/// The test's Kubernetes namespace, its Pods and its versions.
struct Fleet {
    ns: String,
    temporal_ns: String,
    pods: Api<Pod>,
    versions: Vec<Version>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_pods_on_the_shared_host_poll_each_as_itself() -> Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .with_test_writer()
        .try_init();
    let (plane, server) = tokio::join!(control_plane::shared(), temporal_server::shared());
    let (plane, server) = (plane?, server?);
    let client = plane.client().await?;
    let temporal_ns = unique("shared-host");
    server.create_namespace(&temporal_ns).await?;
    let threads_before = threads();
    let kubelet = Kubelet::start_with(
        client.clone(),
        KubeletOptions {
            shared_worker_host: true,
            ..Default::default()
        },
    )
    .await?;
    let t = Instant::now();
    let fleet = create_fleet(&client, &server.address(), temporal_ns).await?;
    let pods_total = VERSIONS * usize::try_from(REPLICAS)?;
    let checked = fleet.wait_every_pod_ready(pods_total).await?;
    eprintln!(
        "{pods_total} worker Pods Ready after {:?}; the process has {} threads more than before \
         the stand-in started",
        t.elapsed(),
        threads().saturating_sub(threads_before)
    );

    // Each Pod's worker polls as itself: `1@<pod name>`, one per Pod.
    let before = fleet.identities(&kubelet);
    let expected: BTreeSet<String> = checked.iter().map(|p| format!("1@{p}")).collect();
    assert_eq!(before, expected);

    // One Pod goes: its worker stops, a replacement starts on the host, nobody else stops.
    let conn = server.connect("shared-host-test").await?;
    let gone = fleet.replace_one_pod(&kubelet, &conn, &checked).await?;
    let after = fleet.identities(&kubelet);
    let kept: BTreeSet<String> = before
        .iter()
        .filter(|i| **i != format!("1@{gone}"))
        .cloned()
        .collect();
    ensure!(
        after.is_superset(&kept) && after.len() == pods_total,
        "workers of other Pods stopped: before {before:?}, after {after:?}"
    );

    // The others still take work: a workflow on the version that lost a Pod and on another.
    for v in [&fleet.versions[0], &fleet.versions[VERSIONS - 1]] {
        run_hello(server, &conn, &fleet.temporal_ns, v).await?;
    }
    eprintln!(
        "one Pod replaced; the other {} kept polling",
        pods_total - 1
    );
    kubelet.shutdown().await;
    Ok(())
}

/// A namespace with [`VERSIONS`] Deployments of [`REPLICAS`] worker Pods each.
async fn create_fleet(client: &kube::Client, address: &str, temporal_ns: String) -> Result<Fleet> {
    let ns = unique("shared-host");
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let versions: Vec<Version> = (0..VERSIONS)
        .map(|i| Version {
            app: format!("w{i}"),
            task_queue: unique("tq"),
            deployment: format!("{ns}/w{i}"),
        })
        .collect();
    for v in &versions {
        deployments
            .create(
                &PostParams::default(),
                &deployment(v, address, &temporal_ns)?,
            )
            .await?;
    }
    Ok(Fleet {
        pods: Api::namespaced(client.clone(), &ns),
        ns,
        temporal_ns,
        versions,
    })
}

impl Fleet {
    /// Waits until `total` Pods are Ready, checking each against Temporal's poller list as soon
    /// as it is seen Ready. Returns their names.
    async fn wait_every_pod_ready(&self, total: usize) -> Result<BTreeSet<String>> {
        let checked = tokio::sync::Mutex::new(BTreeSet::new());
        wait_until("every worker Pod Ready", || {
            let checked = &checked;
            async move {
                let mut checked = checked.lock().await;
                let conn = temporal_server::shared()
                    .await?
                    .connect("shared-host-test")
                    .await?;
                let mut ready = 0;
                for v in &self.versions {
                    let list = pods_of(&self.pods, &v.app).await?;
                    for p in list.iter().filter(|p| is_ready(p)) {
                        if checked.insert(name(p)) {
                            check_polled_before_ready(&conn, &self.temporal_ns, v, p).await?;
                        }
                        ready += 1;
                    }
                }
                Ok((ready == total).then_some(()))
            }
        })
        .await?;
        Ok(checked.into_inner())
    }

    /// Identities of the running workers of every version.
    fn identities(&self, kubelet: &Kubelet) -> BTreeSet<String> {
        self.versions
            .iter()
            .flat_map(|v| kubelet.worker_configs(&self.ns, &v.app))
            .map(|c| c.identity)
            .collect()
    }

    /// Deletes a Pod of the first version and waits until its worker is gone and a replacement
    /// (not in `known`) is Ready, having polled. Returns the deleted Pod's name.
    async fn replace_one_pod(
        &self,
        kubelet: &Kubelet,
        conn: &temporalio_client::Connection,
        known: &BTreeSet<String>,
    ) -> Result<String> {
        let first = &self.versions[0];
        let gone = pods_of(&self.pods, &first.app)
            .await?
            .first()
            .map(name)
            .context("a Pod of the first version")?;
        self.pods.delete(&gone, &DeleteParams::default()).await?;
        let replacement = wait_until("the deleted Pod replaced by a Ready one", || async {
            let list = pods_of(&self.pods, &first.app).await?;
            let fresh: Vec<Pod> = list
                .into_iter()
                .filter(|p| !known.contains(&name(p)))
                .collect();
            let gone_left = kubelet
                .worker_configs(&self.ns, &first.app)
                .iter()
                .any(|c| c.identity == format!("1@{gone}"));
            Ok(match fresh.as_slice() {
                [p] if is_ready(p) && !gone_left => Some(p.clone()),
                _ => None,
            })
        })
        .await?;
        check_polled_before_ready(conn, &self.temporal_ns, first, &replacement).await?;
        Ok(gone)
    }
}

/// Temporal lists `p`'s identity as a poller of its version with a poll no older than its
/// container: a Ready Pod has polled.
async fn check_polled_before_ready(
    conn: &temporalio_client::Connection,
    temporal_ns: &str,
    v: &Version,
    p: &Pod,
) -> Result<()> {
    let identity = format!("1@{}", name(p));
    let started: SystemTime = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref()?.first()?.state.as_ref())
        .and_then(|s| s.running.as_ref()?.started_at.clone())
        .map(|t| SystemTime::UNIX_EPOCH + Duration::from_secs(t.0.as_second().unsigned_abs()))
        .context("a Ready Pod has a running container")?;
    let pollers = observe::workflow_pollers(conn, temporal_ns, &v.task_queue).await?;
    let polled = pollers.iter().any(|q| {
        q.identity == identity
            && q.deployment_options
                .as_ref()
                .is_some_and(|o| o.deployment_name == v.deployment && o.build_id == "v1")
            && q.last_access_time.as_ref().is_some_and(|t| {
                SystemTime::UNIX_EPOCH + Duration::from_secs(t.seconds.unsigned_abs()) >= started
            })
    });
    ensure!(
        polled,
        "Pod {} is Ready but Temporal lists no poll of {identity}: {pollers:?}",
        name(p)
    );
    Ok(())
}

/// `hello` on version `v` (made Current) completes.
async fn run_hello(
    server: &temporal_server::DevServer,
    conn: &temporalio_client::Connection,
    temporal_ns: &str,
    v: &Version,
) -> Result<()> {
    observe::set_current(conn, temporal_ns, &v.deployment, "v1", "shared-host-test").await?;
    let client = server.client(temporal_ns, "shared-host-test").await?;
    let run = client
        .start_workflow(
            HelloWorkflow::run,
            RawValue::from_value(&json!(v.app), &PayloadConverter::default()),
            WorkflowStartOptions::new(v.task_queue.clone(), unique("hello")).build(),
        )
        .await?;
    let greeting = tokio::time::timeout(
        Duration::from_secs(60),
        run.get_result(WorkflowGetResultOptions::default()),
    )
    .await??;
    ensure!(greeting == format!("hello {}", v.app), "{greeting}");
    Ok(())
}

fn deployment(v: &Version, address: &str, temporal_ns: &str) -> Result<Deployment> {
    let env = json!([
        {"name": "TEMPORAL_ADDRESS", "value": address},
        {"name": "TEMPORAL_NAMESPACE", "value": temporal_ns},
        {"name": "TEMPORAL_DEPLOYMENT_NAME", "value": v.deployment},
        {"name": "TEMPORAL_WORKER_BUILD_ID", "value": "v1"},
        {"name": "TEMPORAL_TASK_QUEUE", "value": v.task_queue},
    ]);
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": v.app},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": v.app}},
            "template": {
                "metadata": {"labels": {"app": v.app}},
                "spec": {
                    "containers": [{"name": "worker", "image": "registry.example/worker:1", "env": env}],
                    "terminationGracePeriodSeconds": 5,
                },
            },
        }
    }))?)
}

async fn wait_until<T, F, Fut>(what: &str, check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    test_harness::wait::eventually(what, DEADLINE, check).await
}

/// [`common::pods_of`] without the terminating ones: a deleted Pod is on its way out, not one of
/// the Deployment's.
async fn pods_of(pods: &Api<Pod>, app: &str) -> Result<Vec<Pod>> {
    let mut list = common::pods_of(pods, app).await?;
    list.retain(|p| p.metadata.deletion_timestamp.is_none());
    Ok(list)
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// This process's thread count (`/proc/self/status`), 0 if unknown.
fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}
