//! Namespaced installs (issue 12 item 2): with `watchNamespaces` set to one and to two
//! namespaces, the controller runs with exactly the Roles the chart renders for it (as its
//! ServiceAccount, leader election on, Lease in the release namespace), completes an AllAtOnce
//! rollout in every watched namespace, is never refused (no 403 in its log nor in the API
//! server's audit log), and leaves a TWD in an unwatched namespace alone: no status, no
//! finalizer, no Deployment, not a single request of the controller in that namespace.
//!
//! Real control plane, real Temporal dev server, real workers run by the kubelet stand-in (one
//! per test binary, shared by both cases).

#[path = "common/controller.rs"]
mod controller;

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use serde_json::json;
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::{TemporalConnection, TemporalWorkerDeployment};
use test_harness::manifests;
use test_harness::world::{self, Infra};
use tokio::sync::OnceCell;

static INFRA: OnceCell<Arc<Infra>> = OnceCell::const_new();

/// Everything the controllers of this binary log (they run in-process), to look for 403s.
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Tee;

impl std::io::Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut log) = LOG.lock() {
            log.extend_from_slice(buf);
        }
        std::io::stderr().write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn log_text() -> String {
    String::from_utf8_lossy(&LOG.lock().map(|l| l.clone()).unwrap_or_default()).into_owned()
}

async fn infra() -> Result<Arc<Infra>> {
    INFRA
        .get_or_try_init(|| async {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| {
                    // The controller's stream errors (a refused watch among them) are debug.
                    "warn,temporal_worker_controller=info,temporal_worker_controller::controller=debug"
                        .into()
                }))
                .with_ansi(false)
                .with_writer(|| Tee)
                .try_init();
            Ok(Arc::new(Infra::shared().await?))
        })
        .await
        .cloned()
}

/// A Connection `temporal` and a TWD `name` (AllAtOnce, one replica, image tag `v1`) in `ns`.
async fn apply_rollout(
    client: &kube::Client,
    infra: &Infra,
    ns: &str,
    name: &str,
    temporal_ns: &str,
) -> Result<()> {
    let apply = |manifest| world::apply(client, ns, "namespaced-install-test", manifest);
    apply(manifests::connection("temporal", &infra.temporal_address)).await?;
    apply(
        manifests::twd(name)
            .replicas(1)
            .pod_labels(json!({"app": name}))
            .tag("v1")
            .task_queue(&format!("tq-{ns}"))
            .rollout(json!({"strategy": "AllAtOnce"}))
            .sunset("2s", "2s")
            .temporal_namespace(temporal_ns)
            .build(),
    )
    .await
}

fn ready(twd: &TemporalWorkerDeployment) -> bool {
    let status = twd.status.as_ref();
    status.is_some_and(|s| {
        s.observed_generation == twd.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True" && c.reason == "RolloutComplete")
    })
}

/// The requests of `user` the API server refused, and those that touched namespace `outside`.
fn audit_findings(
    plane: &test_harness::control_plane::ControlPlane,
    user: &str,
    outside: &[&str],
) -> Result<(Vec<String>, Vec<String>)> {
    let events = plane.audit_events()?;
    let mine = events.iter().filter(|e| e.acting_user() == user);
    let describe = |e: &test_harness::control_plane::AuditEvent| {
        format!("{} {} → {}", e.verb, e.request_uri, e.code())
    };
    let denied = mine
        .clone()
        .filter(|e| e.code() == 403)
        .map(describe)
        .collect();
    let touched = mine
        .filter(|e| {
            e.object_ref
                .as_ref()
                .is_some_and(|o| outside.contains(&o.namespace.as_str()))
        })
        .map(describe)
        .collect();
    Ok((denied, touched))
}

fn forbidden_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            has_word(&l, "403") || l.contains("forbidden")
        })
        .collect()
}

/// `word` standing on its own: not inside a longer run of letters or digits (a timestamp such
/// as `00:26:53.876403Z` holds "403" but is no refusal).
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

#[test]
fn a_refusal_is_found_and_a_timestamp_is_not() {
    let log = "2026-11-24T00:26:53.876403Z INFO leader lease is free\n\
               2026-11-24T00:26:54.1Z WARN ApiError: pods is Forbidden (403)\n\
               2026-11-24T00:26:55.2Z WARN status 403 from the API server";
    let found = forbidden_lines(log);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(!found.iter().any(|l| l.contains("leader lease")));
}

/// The names of one namespaced install, shared by its steps.
struct Install<'a> {
    tag: &'a str,
    plane: &'static test_harness::control_plane::ControlPlane,
    admin: kube::Client,
    release_ns: String,
    watched: Vec<String>,
    outside: String,
    /// The controller's ServiceAccount, as the API server's audit log names it.
    user: String,
}

/// One namespaced install: `tag` names its release namespace and watched namespaces.
async fn namespaced_install(tag: &str, watched: usize) -> Result<()> {
    let infra = infra().await?;
    let plane = infra.plane.context("no local control plane")?;
    let admin = plane.client().await?;
    let watched: Vec<String> = (0..watched).map(|i| format!("{tag}-team-{i}")).collect();
    let outside = format!("{tag}-unwatched");
    for ns in watched.iter().chain([&outside]) {
        world::ensure_namespace(&admin, ns).await?;
    }
    let mut install = Install {
        tag,
        plane,
        admin,
        release_ns: format!("twc-{tag}"),
        watched,
        outside,
        user: String::new(),
    };
    let controller = start_with_charts_roles(&mut install).await?;
    apply_rollouts(&install, &infra).await?;
    wait_for_rollouts(&install).await?;
    check_cluster_connection_refused(&install, &infra).await?;
    check_unwatched_left_alone(&install).await?;
    check_lease_held(&install).await?;
    controller.stop().await;
    check_no_refusal_nor_trespass(&install).await
}

/// Renders the chart's identity for this install (its Roles live in the watched namespaces) and
/// starts the controller as its ServiceAccount; sets `install.user`.
async fn start_with_charts_roles(
    install: &mut Install<'_>,
) -> Result<temporal_worker_controller::run::Running> {
    let tag = install.tag;
    let values = json!({
        "controller": {"identity": format!("twc-{tag}")},
        "watchNamespaces": install.watched,
    });
    let id =
        test_harness::chart::install_identity(install.plane, &values, &install.release_ns).await?;
    let kinds: Vec<&str> = id.grants.iter().map(|(k, _)| k.as_str()).collect();
    ensure!(
        kinds
            .iter()
            .all(|k| !k.contains("-manager") || k.starts_with("Role/")),
        "a namespaced install must grant its manager rules with Roles only: {kinds:?}"
    );
    install.user = format!(
        "system:serviceaccount:{}:{}",
        install.release_ns, id.service_account
    );
    let controller_client = test_harness::control_plane::client_from(&id.kubeconfig).await?;
    let controller = controller::start(
        controller_client,
        &[
            String::from("--leader-elect"),
            format!("--lease-namespace={}", install.release_ns),
            format!("--watch-namespaces={}", install.watched.join(",")),
            format!("--identity=twc-{tag}"),
            String::from("--idle-interval=10s"),
            String::from("--fast-poll=300ms"),
        ],
    )
    .await?;
    Ok(controller)
}

/// A rollout in every watched namespace, and one TWD nobody should touch.
async fn apply_rollouts(install: &Install<'_>, infra: &Infra) -> Result<()> {
    let server = test_harness::temporal_server::shared().await?;
    for ns in &install.watched {
        let temporal_ns = format!("ns-install-{ns}");
        server.create_namespace(&temporal_ns).await?;
        apply_rollout(&install.admin, infra, ns, "orders", &temporal_ns).await?;
    }
    apply_rollout(
        &install.admin,
        infra,
        &install.outside,
        "orders",
        "ns-install-unwatched",
    )
    .await
}

/// Every watched rollout reaches Ready=True/RolloutComplete within 120 s, and the API server
/// refuses the controller nothing meanwhile.
async fn wait_for_rollouts(install: &Install<'_>) -> Result<()> {
    let user = &install.user;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    let mut pending: Vec<String> = install.watched.clone();
    while !pending.is_empty() {
        let (denied, _) = audit_findings(install.plane, user, &[])?;
        ensure!(
            denied.is_empty(),
            "the API server refused {user}: {denied:#?}"
        );
        let mut still = Vec::new();
        for ns in &pending {
            let twd = TemporalWorkerDeployment::api(install.admin.clone(), ns, KindSet::Seed)
                .get("orders")
                .await?;
            if !ready(&twd) {
                if Instant::now() > deadline {
                    bail!(
                        "{ns}/orders not Ready=True/RolloutComplete after {:?}; status: {}",
                        started.elapsed(),
                        serde_json::to_string_pretty(&twd.status)?
                    );
                }
                still.push(ns.clone());
            }
        }
        pending = still;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "[{}] rollouts complete in {:?} after {:?}",
        install.tag,
        install.watched,
        started.elapsed()
    );
    Ok(())
}

/// A WorkerDeployment naming a ClusterConnection (the Go controller v1.10's
/// `connectionRef.kind`, its PR #549) in a watched namespace: a namespaced install neither
/// watches nor may read ClusterConnections, so it reports `Stalled=True` with reason
/// `ClusterConnectionUnsupported` and a message saying why, and creates nothing (no
/// Deployment, no finalizer on the object or on the ClusterConnection). The chart grants it no
/// ClusterConnection access, and the audit check after this finds no refusal: it never asks.
async fn check_cluster_connection_refused(install: &Install<'_>, infra: &Infra) -> Result<()> {
    use kube::api::{Patch, PatchParams};
    use temporal_worker_controller::api::ClusterConnection;

    let ns = &install.watched[0];
    let cc_name = format!("{}-shared", install.tag);
    let ccs: Api<ClusterConnection> = Api::all(install.admin.clone());
    ccs.patch(
        &cc_name,
        &PatchParams::apply("namespaced-install-test").force(),
        &Patch::Apply(
            json!({"apiVersion": "temporal.io/v1alpha1", "kind": "ClusterConnection",
            "metadata": {"name": cc_name}, "spec": {"hostPort": infra.temporal_address}}),
        ),
    )
    .await?;
    let mut wd = manifests::twd("via-cluster")
        .replicas(1)
        .tag("v1")
        .task_queue(&format!("tq-cc-{ns}"))
        .rollout(json!({"strategy": "AllAtOnce"}))
        .temporal_namespace("ns-install-cc")
        .kinds(manifests::Kinds::Canonical)
        .build();
    wd["spec"]["workerOptions"]["connectionRef"] =
        json!({"name": cc_name, "kind": "ClusterConnection"});
    world::apply(&install.admin, ns, "namespaced-install-test", wd).await?;
    let wds = TemporalWorkerDeployment::api(install.admin.clone(), ns, KindSet::Canonical);
    let deadline = Instant::now() + Duration::from_secs(60);
    let stalled = loop {
        let wd = wds.get("via-cluster").await?;
        let cond = wd.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Stalled" && c.status == "True")
                .cloned()
        });
        match cond {
            Some(c)
                if wd.status.as_ref().and_then(|s| s.observed_generation)
                    == wd.metadata.generation =>
            {
                break (wd, c);
            }
            _ if Instant::now() > deadline => bail!(
                "{ns}/via-cluster not Stalled after 60 s: {}",
                serde_json::to_string_pretty(&wd.status)?
            ),
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    };
    let (wd, cond) = stalled;
    ensure!(cond.reason == "ClusterConnectionUnsupported", "{cond:?}");
    ensure!(
        cond.message.contains(&cc_name) && cond.message.contains("namespace-scoped"),
        "{cond:?}"
    );
    ensure!(
        wd.metadata.finalizers.unwrap_or_default().is_empty(),
        "the refused WorkerDeployment got a finalizer"
    );
    let created = Api::<Deployment>::namespaced(install.admin.clone(), ns)
        .list(&ListParams::default().labels("temporal.io/deployment-name=via-cluster"))
        .await?;
    ensure!(created.items.is_empty(), "Deployments were created");
    let cc = ccs.get(&cc_name).await?;
    ensure!(
        cc.metadata.finalizers.unwrap_or_default().is_empty() && cc.status.is_none(),
        "the namespaced install touched the ClusterConnection"
    );
    ccs.delete(&cc_name, &Default::default()).await?;
    eprintln!("[{}] {ns}/via-cluster: {}", install.tag, cond.message);
    Ok(())
}

/// The unwatched TWD stays as the admin applied it, for a while after the others finished, and
/// its Connection gets no finalizer.
async fn check_unwatched_left_alone(install: &Install<'_>) -> Result<()> {
    let outside = &install.outside;
    let outside_twds = TemporalWorkerDeployment::api(install.admin.clone(), outside, KindSet::Seed);
    let outside_deps = Api::<Deployment>::namespaced(install.admin.clone(), outside);
    let watch_until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < watch_until {
        let twd = outside_twds.get("orders").await?;
        // The CRD's default status (Ready=Unknown/WaitingForController) is all it may have.
        let observed = twd.status.as_ref().is_some_and(|s| {
            s.observed_generation.is_some()
                || s.conditions
                    .iter()
                    .any(|c| c.reason != "WaitingForController")
        });
        ensure!(!observed, "unwatched TWD got a status: {:?}", twd.status);
        ensure!(
            twd.metadata
                .finalizers
                .as_ref()
                .is_none_or(|f| f.is_empty()),
            "unwatched TWD got finalizers {:?}",
            twd.metadata.finalizers
        );
        let deps = outside_deps.list(&ListParams::default()).await?;
        ensure!(
            deps.items.is_empty(),
            "Deployments in the unwatched namespace: {:?}",
            deps.items
                .iter()
                .map(|d| d.metadata.name.clone())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let conn = TemporalConnection::api(install.admin.clone(), outside, KindSet::Seed)
        .get("temporal")
        .await?;
    ensure!(
        conn.metadata
            .finalizers
            .as_ref()
            .is_none_or(|f| f.is_empty()),
        "unwatched Connection got finalizers {:?}",
        conn.metadata.finalizers
    );
    Ok(())
}

/// The lease of this install is held by it, in its release namespace.
async fn check_lease_held(install: &Install<'_>) -> Result<()> {
    let release_ns = &install.release_ns;
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        install.admin.clone(),
        release_ns,
    )
    .get(temporal_worker_controller::run::defaults::LEASE_NAME)
    .await?;
    ensure!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| h.starts_with(&format!("twc-{}", install.tag))),
        "the Lease in {release_ns} is not held by this install"
    );
    Ok(())
}

/// After the controller stopped: no request of it was refused or went into the unwatched
/// namespace, and its log mentions no refusal.
async fn check_no_refusal_nor_trespass(install: &Install<'_>) -> Result<()> {
    let (tag, user, outside) = (install.tag, &install.user, &install.outside);
    // The audit event of a request is written as it completes: give the last ones a moment.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (denied, touched) = audit_findings(install.plane, user, &[outside.as_str()])?;
    ensure!(
        denied.is_empty(),
        "the API server refused {user}: {denied:#?}"
    );
    ensure!(
        touched.is_empty(),
        "{user} sent requests into the unwatched namespace {outside}: {touched:#?}"
    );
    let log = log_text();
    let forbidden = forbidden_lines(&log);
    ensure!(
        forbidden.is_empty(),
        "the controller's log mentions a refusal:\n{}",
        forbidden.join("\n")
    );
    let mine = install
        .plane
        .audit_events()?
        .iter()
        .filter(|e| e.acting_user() == user)
        .count();
    eprintln!("[{tag}] {mine} requests of {user} audited, none refused, none in {outside}");
    let _ = std::io::stderr().flush();
    Ok(())
}

#[test]
fn one_watched_namespace_runs_with_the_charts_roles() {
    test_harness::runtime::block_on(test_harness::runtime::on_infra(namespaced_install(
        "nsone", 1,
    )))
    .expect("namespaced install with one namespace");
}

#[test]
fn two_watched_namespaces_run_with_the_charts_roles() {
    test_harness::runtime::block_on(test_harness::runtime::on_infra(namespaced_install(
        "nstwo", 2,
    )))
    .expect("namespaced install with two namespaces");
}
