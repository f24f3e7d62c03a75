//! A cold start's first looks come first (issue 41): the controller binary, started after 40
//! worker deployments nobody has reported on were created, writes every one's first status
//! (its target build) before it makes the full pass of any. Without the leader's first sweep,
//! kube-runtime takes due reconciles in no particular order once its slots are full, and the
//! full passes the first looks requeue overtake the remaining first looks.
//!
//! Real control plane; no Temporal: the Connection points at a closed port, so a full pass is
//! told apart by its `TemporalClientCreationFailed` condition. The order is read from a watch,
//! which delivers every status write in the API server's order.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;
use test_harness::{manifests, world};

const NS: &str = "cold-start";
const N: usize = 40;

struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What one status write was: a first look (target build, no Temporal answer yet) or a full
/// pass (Temporal asked, and unreachable).
#[derive(Debug, PartialEq)]
enum Write {
    FirstLook,
    FullPass,
    Other,
}

fn classify(obj: &Value) -> Write {
    let status = &obj["status"];
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    if conditions
        .iter()
        .any(|c| c["reason"] == "TemporalClientCreationFailed")
    {
        Write::FullPass
    } else if status["targetVersion"]["buildID"].is_string() {
        Write::FirstLook
    } else {
        Write::Other
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_first_look_is_written_before_any_full_pass() {
    let (plane, client) = test_harness::control_plane::shared_with_crds()
        .await
        .expect("control plane with CRDs");
    let twds = create_unreported_worker_deployments(&client).await;
    let listed = twds
        .list(&ListParams::default())
        .await
        .expect("list the worker deployments");
    assert_eq!(listed.items.len(), N);
    let from = listed
        .metadata
        .resource_version
        .expect("list resourceVersion");
    let mut events = twds
        .watch(&WatchParams::default().timeout(290), &from)
        .await
        .expect("watch")
        .boxed();

    let _controller = Controller(
        Command::new(env!("CARGO_BIN_EXE_temporal-worker-controller"))
            .args([
                "run",
                "--watch-namespaces",
                NS,
                "--http-addr",
                "127.0.0.1:0",
            ])
            .env("KUBECONFIG", plane.kubeconfig_path())
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the controller binary"),
    );

    let mut order: Vec<(String, Write)> = Vec::new();
    let mut failed = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    while failed.len() < N {
        let next = tokio::time::timeout_at(deadline, events.try_next())
            .await
            .unwrap_or_else(|_| panic!("only {} of {N} full passes seen: {order:?}", failed.len()))
            .expect("watch event")
            .expect("watch ended");
        let WatchEvent::Modified(obj) = next else {
            continue;
        };
        let name = obj.metadata.name.clone().unwrap_or_default();
        let seen = classify(&serde_json::to_value(&obj).expect("json"));
        if seen == Write::FullPass {
            failed.insert(name.clone());
        }
        order.push((name, seen));
    }
    let looked: std::collections::BTreeSet<_> = order
        .iter()
        .filter(|(_, w)| *w == Write::FirstLook)
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(looked.len(), N, "a first look for every object: {order:?}");
    let last_look = order.iter().rposition(|(_, w)| *w == Write::FirstLook);
    let first_pass = order.iter().position(|(_, w)| *w == Write::FullPass);
    assert!(
        last_look < first_pass,
        "a full pass ({first_pass:?}) before the last first look ({last_look:?}): {order:?}"
    );
}

/// The namespace, a Connection to a closed port and `N` worker deployments.
async fn create_unreported_worker_deployments(client: &kube::Client) -> Api<DynamicObject> {
    world::ensure_namespace(client, NS)
        .await
        .expect("the namespace");
    let conn = manifests::connection("closed-port", "127.0.0.1:1");
    world::apply(client, NS, "test", conn)
        .await
        .expect("the Connection");
    futures::stream::iter(0..N)
        .map(|i| {
            let twd = manifests::twd(&format!("w-{i:02}"))
                .replicas(1)
                .image("orders:v1")
                .rollout(serde_json::json!({"strategy": "AllAtOnce"}))
                .connection("closed-port")
                .build();
            world::apply(client, NS, "test", twd)
        })
        .buffer_unordered(8)
        .try_collect::<Vec<_>>()
        .await
        .expect("create the worker deployments");
    Api::namespaced_with(
        client.clone(),
        NS,
        &world::api_resource("TemporalWorkerDeployment"),
    )
}
