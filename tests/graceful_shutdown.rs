//! SIGTERM while reconciling: the controller binary stops taking work, finishes in-flight
//! reconciles, releases its Lease and exits 0; a second replica takes over. Runs the real
//! binary against the local control plane (no Temporal: the Connection points at a closed
//! port, so reconciles keep running and failing while the signal arrives).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use test_harness::{manifests, world};

const NS: &str = "graceful-shutdown";
const LEASE: &str = "twc-graceful-shutdown";

struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(kubeconfig: &Path, pod_name: &str) -> Controller {
    let child = Command::new(env!("CARGO_BIN_EXE_temporal-worker-controller"))
        .args([
            "run",
            "--leader-elect",
            "--lease-name",
            LEASE,
            "--lease-namespace",
            NS,
            "--watch-namespaces",
            NS,
            "--http-addr",
            "127.0.0.1:0",
            "--pod-name",
            pod_name,
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the controller binary");
    Controller(child)
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

async fn wait_for_holder(leases: &Api<Lease>, want: &str, within: Duration) -> Duration {
    let start = Instant::now();
    while start.elapsed() < within {
        if holder(leases).await.as_deref() == Some(want) {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{want} did not hold the lease within {within:?} (holder: {:?})",
        holder(leases).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_releases_the_lease_and_exits_zero() {
    let (plane, client) = test_harness::control_plane::shared_with_crds()
        .await
        .expect("control plane with CRDs");
    create_a_rollout_whose_temporal_is_unreachable(&client).await;

    let kubeconfig = plane.kubeconfig_path().to_path_buf();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let mut first = spawn(&kubeconfig, "replica-a");
    wait_for_holder(&leases, "replica-a", Duration::from_secs(30)).await;
    let second = spawn(&kubeconfig, "replica-b");
    // Let the leader reconcile (and the follower settle) before the signal.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-a"));

    let signalled = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &first.0.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let exit = loop {
        if let Some(exit) = first.0.try_wait().expect("wait") {
            break exit;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(28),
            "still running {:?} after SIGTERM",
            signalled.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stopped_in = signalled.elapsed();
    assert!(exit.success(), "exit after SIGTERM: {exit:?}");
    let after_exit = holder(&leases).await;
    assert_ne!(
        after_exit.as_deref(),
        Some("replica-a"),
        "lease still held by the stopped replica"
    );
    let handover =
        wait_for_holder(&leases, "replica-b", Duration::from_secs(30)).await + stopped_in;
    eprintln!(
        "SIGTERM → exit 0 in {stopped_in:?}; holder after exit {after_exit:?}; replica-b leads {handover:?} after the signal"
    );
    // Released: the follower re-reads the Lease every second while following, so it takes
    // over within a few seconds of the exit instead of when the old lease would have expired
    // (15 s after its last renewal).
    let after_release = handover.saturating_sub(stopped_in);
    assert!(
        after_release < Duration::from_secs(4),
        "hand-over took {after_release:?} after replica-a exited ({handover:?} after the signal)"
    );
    drop(second);
}

/// Work to be in the middle of: a rollout whose Temporal is unreachable.
async fn create_a_rollout_whose_temporal_is_unreachable(client: &kube::Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NS}})).expect("namespace");
    let _ = namespaces.create(&PostParams::default(), &ns).await;
    let conns: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &world::api_resource("TemporalConnection"),
    );
    let twds: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &world::api_resource("TemporalWorkerDeployment"),
    );
    let conn: DynamicObject =
        serde_json::from_value(manifests::connection("closed-port", "127.0.0.1:1"))
            .expect("connection");
    let twd: DynamicObject = serde_json::from_value(
        manifests::twd("orders")
            .replicas(1)
            .image("orders:v1")
            .rollout(serde_json::json!({"strategy": "AllAtOnce"}))
            .connection("closed-port")
            .build(),
    )
    .expect("twd");
    let _ = conns.create(&PostParams::default(), &conn).await;
    let _ = twds.create(&PostParams::default(), &twd).await;
}
