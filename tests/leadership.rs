//! Leadership gates every write (issue 13 item 3): while another replica holds the Lease the
//! controller writes nothing — not its reconciler, not its Connection janitor — and when the
//! Lease is released it takes over and catches up with every object at once.
//!
//! Real control plane; the controller runs in-process with leader election; the Lease is held
//! by a foreign identity until the test releases it. No Temporal: the Connection points at a
//! closed port.

#[path = "common/controller.rs"]
mod controller;

use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::{FINALIZER, TemporalConnection, TemporalWorkerDeployment};
use test_harness::manifests;

const NS: &str = "leadership";
const LEASE: &str = "twc-leadership";

async fn run() -> Result<()> {
    let (_, admin) = test_harness::control_plane::shared_with_crds().await?;
    let leases = foreign_lease(&admin).await?;
    let conns: Api<TemporalConnection> = TemporalConnection::api(admin.clone(), NS, KindSet::Seed);
    let twds: Api<TemporalWorkerDeployment> =
        TemporalWorkerDeployment::api(admin.clone(), NS, KindSet::Seed);
    work_for_a_leader(&conns, &twds).await?;

    let controller = controller::start(
        admin.clone(),
        &[
            String::from("--leader-elect"),
            format!("--lease-name={LEASE}"),
            format!("--lease-namespace={NS}"),
            format!("--watch-namespaces={NS}"),
        ],
    )
    .await?;

    follower_writes_nothing(&conns, &twds).await?;
    // The other replica releases the Lease: this one takes over and does both jobs at once.
    leases
        .patch(
            LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": null, "renewTime": null}})),
        )
        .await?;
    leader_catches_up(&conns, &twds).await?;
    controller.stop().await;
    Ok(())
}

/// The namespace, and a Lease another replica holds for an hour.
async fn foreign_lease(admin: &kube::Client) -> Result<Api<Lease>> {
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await?;
    let leases: Api<Lease> = Api::namespaced(admin.clone(), NS);
    leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": LEASE},
                "spec": {
                    "holderIdentity": "another-replica",
                    "leaseDurationSeconds": 3600,
                    "acquireTime": jiff::Timestamp::now().to_string(),
                    "renewTime": jiff::Timestamp::now().to_string(),
                }
            }))?,
        )
        .await?;
    Ok(leases)
}

/// Work for a leader: a Connection nobody uses any more, being deleted (the janitor's job),
/// and a TWD with no status yet (the reconciler's).
async fn work_for_a_leader(
    conns: &Api<TemporalConnection>,
    twds: &Api<TemporalWorkerDeployment>,
) -> Result<()> {
    conns
        .create(
            &PostParams::default(),
            &serde_json::from_value({
                let mut unused = manifests::connection("unused", "127.0.0.1:1");
                unused["metadata"]["finalizers"] = json!([FINALIZER]);
                unused
            })?,
        )
        .await?;
    conns.delete("unused", &DeleteParams::default()).await?;
    conns
        .create(
            &PostParams::default(),
            &serde_json::from_value(manifests::connection("closed-port", "127.0.0.1:1"))?,
        )
        .await?;
    twds.create(
        &PostParams::default(),
        &serde_json::from_value(
            manifests::twd("orders")
                .replicas(1)
                .image("orders:v1")
                .rollout(json!({"strategy": "AllAtOnce"}))
                .connection("closed-port")
                .build(),
        )?,
    )
    .await?;
    Ok(())
}

/// For 6 s, a follower writes nothing: neither the janitor nor the reconciler.
async fn follower_writes_nothing(
    conns: &Api<TemporalConnection>,
    twds: &Api<TemporalWorkerDeployment>,
) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        let unused = conns.get_opt("unused").await?;
        ensure!(
            unused.is_some(),
            "a follower released the finalizer of Connection 'unused' (the janitor wrote)"
        );
        let twd = twds.get("orders").await?;
        ensure!(
            twd.metadata
                .finalizers
                .as_ref()
                .is_none_or(|f| f.is_empty())
                && twd
                    .status
                    .as_ref()
                    .is_none_or(|s| s.observed_generation.is_none()),
            "a follower wrote TWD 'orders': finalizers {:?}, status {:?}",
            twd.metadata.finalizers,
            twd.status
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}

/// Right after the Lease was released, the janitor and the reconciler both catch up within
/// 5 s (polled for at most 20 s).
async fn leader_catches_up(
    conns: &Api<TemporalConnection>,
    twds: &Api<TemporalWorkerDeployment>,
) -> Result<()> {
    let released = Instant::now();
    let mut janitor_done = None;
    let mut twd_done = None;
    while janitor_done.is_none() || twd_done.is_none() {
        if janitor_done.is_none() && conns.get_opt("unused").await?.is_none() {
            janitor_done = Some(released.elapsed());
        }
        let twd = twds.get("orders").await?;
        if twd_done.is_none()
            && twd
                .status
                .as_ref()
                .is_some_and(|s| s.observed_generation.is_some())
        {
            twd_done = Some(released.elapsed());
        }
        if released.elapsed() > Duration::from_secs(20) {
            bail!(
                "after the release: janitor {janitor_done:?}, reconciler {twd_done:?} within 20 s"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("after the release: janitor done in {janitor_done:?}, TWD status in {twd_done:?}");
    for (what, took) in [("janitor", janitor_done), ("reconciler", twd_done)] {
        let took = took.unwrap_or_default();
        ensure!(
            took < Duration::from_secs(5),
            "the {what} caught up {took:?} after the Lease was released"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_writes_nothing_and_a_new_leader_catches_up_at_once() {
    run().await.expect("leadership");
}

/// A leader that can no longer renew its Lease stops acting before the Lease could expire under
/// a write. kube-lease-manager alone keeps saying "leader" while its renewals fail; here the
/// controller runs as the chart's ServiceAccount and the test takes away its Lease RBAC (so
/// renewals and read-backs both fail), then expects the leader gauge to drop within the Lease's
/// duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_acting_before_its_lease_ends() {
    lost_renewals().await.expect("lost renewals");
}

async fn lost_renewals() -> Result<()> {
    const RELEASE_NS: &str = "leadership-renew";
    let (plane, admin) = test_harness::control_plane::shared_with_crds().await?;
    let id = test_harness::chart::install_identity(plane, &json!({}), RELEASE_NS).await?;
    let client = test_harness::control_plane::client_from(&id.kubeconfig).await?;
    let controller = controller::start(
        client,
        &[
            String::from("--leader-elect"),
            format!("--lease-namespace={RELEASE_NS}"),
            format!("--watch-namespaces={RELEASE_NS}"),
        ],
    )
    .await?;
    test_harness::wait::eventually("leadership", Duration::from_secs(30), || async {
        Ok(controller.metrics.is_leader().then_some(()))
    })
    .await?;

    // Renewals (and reads of the Lease) now fail with 403.
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(admin.clone(), RELEASE_NS);
    let name = bindings
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|b| b.metadata.name)
        .find(|n| n.ends_with("-leader-election"))
        .ok_or_else(|| anyhow::anyhow!("the chart rendered no leader-election RoleBinding"))?;
    bindings.delete(&name, &DeleteParams::default()).await?;
    let cut = Instant::now();
    test_harness::wait::eventually(
        "the leader to stop acting",
        Duration::from_secs(15),
        || async { Ok((!controller.metrics.is_leader()).then_some(())) },
    )
    .await?;
    println!(
        "stopped acting {:?} after its Lease RBAC was removed",
        cut.elapsed()
    );
    controller.stop().await;
    Ok(())
}

/// Issue 41: leader election costs at most 60 Lease requests a minute per install (client-go's
/// default is about 60; ours is designed for 45: a PATCH and the lease manager's GET per
/// renewal every 4 s, and one read-back per renewal). The standby watches the Lease instead of
/// polling it: a read every 15 s, and its lease manager's. Both replicas' clients count their
/// Lease requests over ten renewal intervals of the leader (about 40 s), from its first renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_and_its_standby_cost_at_most_60_lease_requests_a_minute() {
    lease_cost().await.expect("lease cost");
}

async fn lease_cost() -> Result<()> {
    const COST_NS: &str = "leadership-cost";
    const INTERVALS: usize = 10;
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<(Instant, String)>>>;
    let (plane, admin) = test_harness::control_plane::shared_with_crds().await?;
    test_harness::world::ensure_namespace(&admin, COST_NS).await?;
    let seen: Seen = Default::default();
    let log = seen.clone();
    let layer = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        if req
            .uri()
            .path()
            .contains(&format!("/namespaces/{COST_NS}/leases"))
        {
            log.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((Instant::now(), req.method().to_string()));
        }
        req
    });
    let config = test_harness::control_plane::config_from(plane.kubeconfig_path()).await?;
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build();
    let flags = [
        String::from("--leader-elect"),
        format!("--lease-namespace={COST_NS}"),
        format!("--watch-namespaces={COST_NS}"),
    ];
    let controller = controller::start(client.clone(), &flags).await?;
    test_harness::wait::eventually("leadership", Duration::from_secs(30), || async {
        Ok(controller.metrics.is_leader().then_some(()))
    })
    .await?;
    let standby = controller::start(client, &flags).await?;
    let patches = |seen: &Seen| -> Vec<Instant> {
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.iter()
            .filter(|(_, verb)| verb == "PATCH")
            .map(|(at, _)| *at)
            .collect()
    };
    // The acquisition is one or two PATCHes; count from the first renewal after it.
    let start = patches(&seen).len() + 1;
    let mut stopped_acting = 0;
    let renewals =
        test_harness::wait::eventually("ten renewal intervals", Duration::from_secs(120), || {
            stopped_acting += usize::from(!controller.metrics.is_leader());
            let p = patches(&seen);
            async move { Ok((p.len() > start + INTERVALS).then_some(p)) }
        })
        .await?;
    let (from, to) = (renewals[start], renewals[start + INTERVALS]);
    let counted: Vec<String> = seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|(at, _)| *at >= from && *at < to)
        .map(|(_, verb)| verb.clone())
        .collect();
    let minutes = (to - from).as_secs_f64() / 60.0;
    let per_minute = counted.len() as f64 / minutes;
    let gets = counted.iter().filter(|v| *v == "GET").count();
    println!(
        "{} Lease requests of a leader and its standby ({gets} GET, {} PATCH) in {:.1} s: \
         {per_minute:.1} a minute; looked {stopped_acting} times while not acting",
        counted.len(),
        counted.len() - gets,
        minutes * 60.0
    );
    ensure!(!standby.metrics.is_leader(), "two leaders");
    standby.stop().await;
    controller.stop().await;
    ensure!(
        per_minute <= 60.0,
        "leader election cost {per_minute:.1} Lease requests a minute: {counted:?}"
    );
    Ok(())
}
