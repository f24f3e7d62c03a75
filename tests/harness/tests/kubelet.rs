//! The pod-level kubelet stand-in on the real control plane: kube-controller-manager turns
//! Deployments into ReplicaSets and Pods, the stand-in binds the Pods to its Node, runs one real
//! Temporal worker per Pod and reports the Pods Ready only once their workers poll; Deployment
//! status (availability, rollouts) comes from kube-controller-manager.
//!
//! One control plane, one dev server and one stand-in (on a background runtime, so it outlives
//! each test's runtime) per test binary; each test uses its own Kubernetes namespace.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use test_harness::kubelet::{Kubelet, KubeletOptions};
use test_harness::names::unique;
use test_harness::tls_proxy::{GrpcTlsProxy, ProxyAuth, TestPki};
use test_harness::{control_plane, observe, temporal_server};
use tokio::sync::OnceCell;

mod common;
use common::pods_of;

/// Generous: every test of this binary runs at once on a 2-core machine.
const DEADLINE: Duration = Duration::from_secs(120);

struct World {
    kubelet: Kubelet,
    /// The image of [`process_image`]'s process Pods and the directory holding its binary.
    image_dir: std::path::PathBuf,
    temporal_ns: String,
    temporal_address: String,
    pki: TestPki,
    mtls: GrpcTlsProxy,
}

static WORLD: OnceCell<World> = OnceCell::const_new();

async fn world() -> &'static World {
    WORLD
        .get_or_init(|| async {
            test_harness::runtime::on_infra(start_world())
                .await
                .expect("start the control plane, dev server and kubelet stand-in")
        })
        .await
}

async fn start_world() -> Result<World> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .with_test_writer()
        .try_init();
    let t = Instant::now();
    let (plane, server) = tokio::join!(control_plane::shared(), temporal_server::shared());
    let (plane, server) = (plane?, server?);
    eprintln!("control plane and dev server up after {:?}", t.elapsed());
    let temporal_ns = unique("kubelet");
    server.create_namespace(&temporal_ns).await?;
    let pki = TestPki::generate()?;
    let upstream: SocketAddr = server.address().parse()?;
    let mtls = GrpcTlsProxy::start(upstream, &pki, ProxyAuth::ClientCert).await?;
    let image_dir = process_image()?;
    let kubelet = Kubelet::start_with(
        plane.client().await?,
        KubeletOptions {
            trusted_ca_pem: Some(pki.ca_pem.clone().into_bytes()),
            images: [(PROCESS_IMAGE.to_string(), image_dir.join("entrypoint"))].into(),
            api_server: Some(plane.host_port()?),
            ..Default::default()
        },
    )
    .await?;
    eprintln!("world ready after {:?}", t.elapsed());
    Ok(World {
        kubelet,
        image_dir,
        temporal_ns,
        temporal_address: server.address(),
        pki,
        mtls,
    })
}

/// The image the stand-in maps to a local binary (a process Pod).
const PROCESS_IMAGE: &str = "registry.example/entrypoint:1";
/// What that binary prints and its exit code: a container that ran it exits with them.
const PROCESS_GREETING: &str = "ran from the image root";
const PROCESS_EXIT: i32 = 42;

/// A directory under the system temp dir (`/tmp`, where a checkout under `/tmp` puts its Cargo
/// target dir) holding the process image's binary, `entrypoint`: a script that prints
/// [`PROCESS_GREETING`] and exits with [`PROCESS_EXIT`].
fn process_image() -> Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = std::env::temp_dir().join(unique("kubelet-image"));
    std::fs::create_dir_all(&dir)?;
    let bin = dir.join("entrypoint");
    std::fs::write(
        &bin,
        format!("#!/bin/sh\necho '{PROCESS_GREETING}'\nexit {PROCESS_EXIT}\n"),
    )?;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// A fresh namespace and a client on the calling test's runtime.
async fn namespace(prefix: &str) -> Result<(kube::Client, String)> {
    let client = control_plane::shared().await?.client().await?;
    let ns = unique(prefix);
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    Ok((client, ns))
}

fn worker_env(w: &World, address: &str, deployment: &str, build: &str, tq: &str) -> Value {
    json!([
        {"name": "TEMPORAL_ADDRESS", "value": address},
        {"name": "TEMPORAL_NAMESPACE", "value": w.temporal_ns},
        {"name": "TEMPORAL_DEPLOYMENT_NAME", "value": deployment},
        {"name": "TEMPORAL_WORKER_BUILD_ID", "value": build},
        {"name": "TEMPORAL_TASK_QUEUE", "value": tq},
    ])
}

/// Deployment `name` (label `app=name`) whose one container has `container` merged in.
fn deployment(name: &str, replicas: i32, container: Value, pod_spec: Value) -> Result<Deployment> {
    let mut c = json!({"name": "worker", "image": "registry.example/worker:1"});
    merge(&mut c, container);
    let mut spec = json!({"containers": [c], "terminationGracePeriodSeconds": 5});
    merge(&mut spec, pod_spec);
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        }
    }))?)
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), from) {
        a.extend(b);
    }
}

/// [`test_harness::wait::eventually`] with this file's [`DEADLINE`].
async fn eventually<T, F, Fut>(what: &str, check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    test_harness::wait::eventually(what, DEADLINE, check).await
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn condition<'a>(p: &'a Pod, type_: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn is_ready(p: &Pod) -> bool {
    condition(p, "Ready").is_some_and(|c| c.status == "True")
}

fn main_status(p: &Pod) -> Option<&k8s_openapi::api::core::v1::ContainerStatus> {
    p.status.as_ref()?.container_statuses.as_ref()?.first()
}

fn waiting_reason(p: &Pod) -> Option<String> {
    main_status(p)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

fn phase(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

fn available(d: &Deployment) -> i32 {
    d.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// kube-controller-manager reports `replicas` available, all updated, for the current spec.
async fn wait_available(deployments: &Api<Deployment>, name: &str, replicas: i32) -> Result<()> {
    eventually(&format!("{name}: {replicas} available"), || async {
        let d = deployments.get(name).await?;
        let s = d.status.clone().unwrap_or_default();
        let done = s.observed_generation == d.metadata.generation
            && s.replicas.unwrap_or(0) == replicas
            && s.updated_replicas.unwrap_or(0) == replicas
            && s.available_replicas.unwrap_or(0) == replicas;
        Ok(done.then_some(()))
    })
    .await
}

/// Pods of `app` that Temporal lists as pollers right when they are first seen Ready: a Pod is
/// never Ready before its worker has polled.
async fn check_ready_pods_poll(
    w: &World,
    pods: &[Pod],
    seen: &mut BTreeSet<String>,
    tq: &str,
    deployment: &str,
    build: &str,
) -> Result<()> {
    let fresh: Vec<&Pod> = pods
        .iter()
        .filter(|p| is_ready(p) && !seen.contains(&name(p)))
        .collect();
    if fresh.is_empty() {
        return Ok(());
    }
    let conn = temporal_server::shared()
        .await?
        .connect("kubelet-test")
        .await?;
    let pollers = observe::workflow_pollers(&conn, &w.temporal_ns, tq).await?;
    for p in fresh {
        let identity = format!("1@{}", name(p));
        let started: SystemTime = main_status(p)
            .and_then(|s| s.state.as_ref()?.running.as_ref()?.started_at.clone())
            .map(|t| SystemTime::UNIX_EPOCH + Duration::from_secs(t.0.as_second().unsigned_abs()))
            .context("a Ready pod has a running container")?;
        let polled = pollers.iter().any(|q| {
            q.identity == identity
                && q.deployment_options
                    .as_ref()
                    .is_some_and(|o| o.deployment_name == deployment && o.build_id == build)
                && q.last_access_time.as_ref().is_some_and(|t| {
                    SystemTime::UNIX_EPOCH + Duration::from_secs(t.seconds.unsigned_abs())
                        >= started
                })
        });
        ensure!(
            polled,
            "pod {} is Ready but Temporal lists no poll of {identity}: {pollers:?}",
            name(p)
        );
        seen.insert(name(p));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_pods_are_bound_and_ready_only_once_their_workers_poll() -> Result<()> {
    let w = world().await;
    let (client, ns) = namespace("kubelet-ready").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let tq = unique("tq");
    let temporal_deployment = format!("{ns}/alpha");
    let t = Instant::now();
    deployments
        .create(
            &PostParams::default(),
            &deployment(
                "alpha",
                2,
                json!({"env": worker_env(w, &w.temporal_address, &temporal_deployment, "v1", &tq)}),
                json!({}),
            )?,
        )
        .await?;

    // Every Ready pod is checked against Temporal's poller list as soon as it is seen Ready.
    let checked = tokio::sync::Mutex::new(BTreeSet::new());
    let ready = eventually("2 Ready pods and 2 available replicas", || {
        let (deployments, pods, checked, tq, td) =
            (&deployments, &pods, &checked, &tq, &temporal_deployment);
        async move {
            let list = pods_of(pods, "alpha").await?;
            check_ready_pods_poll(w, &list, &mut *checked.lock().await, tq, td, "v1").await?;
            let d = deployments.get("alpha").await?;
            let done = list.len() == 2 && list.iter().all(is_ready) && available(&d) == 2;
            Ok(done.then_some(list))
        }
    })
    .await?;
    eprintln!("2 pods Ready, Deployment available after {:?}", t.elapsed());
    wait_available(&deployments, "alpha", 2).await?;

    check_pods_bound_owned_and_running(w, &client, &ns, &ready).await?;
    let identities: Vec<String> = w
        .kubelet
        .worker_configs(&ns, "alpha")
        .into_iter()
        .map(|c| c.identity)
        .collect();
    let expected: Vec<String> = ready.iter().map(|p| format!("1@{}", name(p))).collect();
    assert_eq!(identities, expected);
    assert_eq!(w.kubelet.running_workers(&ns, "alpha"), 2);
    assert_eq!(checked.lock().await.len(), 2);
    check_the_node_is_ready_untainted_and_leased(w, &client).await
}

/// Every Ready Pod is bound to the stand-in's Node, owned by the one ReplicaSet, Running with
/// every condition True and its container started once.
async fn check_pods_bound_owned_and_running(
    w: &World,
    client: &kube::Client,
    ns: &str,
    ready: &[Pod],
) -> Result<()> {
    let rs: Vec<ReplicaSet> = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items;
    ensure!(
        rs.len() == 1,
        "one ReplicaSet from kube-controller-manager: {rs:?}"
    );
    let rs_name = rs[0].metadata.name.clone().unwrap_or_default();
    for p in ready {
        let spec = p.spec.as_ref().context("spec")?;
        assert_eq!(spec.node_name.as_deref(), Some(w.kubelet.node_name()));
        let owner = p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .context("controller ref")?;
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("ReplicaSet", rs_name.as_str())
        );
        let status = p.status.as_ref().context("status")?;
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(
            status.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty()),
            "{status:?}"
        );
        assert!(status.start_time.is_some());
        for type_ in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
            let c = condition(p, type_).with_context(|| format!("{type_} on {}", name(p)))?;
            assert_eq!(c.status, "True", "{type_}: {c:?}");
            assert!(c.last_transition_time.is_some(), "{type_}: {c:?}");
        }
        let cs = main_status(p).context("container status")?;
        assert!(cs.ready && cs.started == Some(true), "{cs:?}");
        assert!(
            cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some(),
            "{cs:?}"
        );
        assert_eq!(cs.restart_count, 0);
    }
    Ok(())
}

/// The Node is registered, Ready, untainted, and holds its Lease.
async fn check_the_node_is_ready_untainted_and_leased(
    w: &World,
    client: &kube::Client,
) -> Result<()> {
    let node = Api::<Node>::all(client.clone())
        .get(w.kubelet.node_name())
        .await?;
    let node_ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .context("node Ready condition")?;
    assert_eq!(node_ready.status, "True");
    assert!(
        node.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_none_or(Vec::is_empty)
    );
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .get(w.kubelet.node_name())
        .await?;
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(w.kubelet.node_name())
    );
    Ok(())
}

/// A real kubelet runs the image's binary from the container's root filesystem, which no volume
/// covers: a volume mounted over the directory that holds the binary on this machine (as the
/// chart's `/tmp` emptyDir covers a Cargo target dir under `/tmp`) must not hide it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_over_the_binarys_directory_does_not_hide_it() -> Result<()> {
    let w = world().await;
    let (client, ns) = namespace("kubelet-image-root").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let covered = w.image_dir.to_str().context("image dir")?;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "covered"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "main",
                "image": PROCESS_IMAGE,
                "volumeMounts": [{"name": "scratch", "mountPath": covered}],
            }],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let terminated = eventually("the process Pod's container to exit", || async {
        let p = pods.get("covered").await?;
        Ok(main_status(&p)
            .and_then(|c| c.state.as_ref()?.terminated.clone())
            .map(|t| (t, phase(&p))))
    })
    .await?;
    let (t, phase) = terminated;
    let message = t.message.unwrap_or_default();
    ensure!(
        t.exit_code == PROCESS_EXIT && message.contains(PROCESS_GREETING),
        "the binary under the volume did not run: exit {} ({message:?}), phase {phase}",
        t.exit_code
    );
    ensure!(
        phase == "Failed",
        "restartPolicy Never, exit {PROCESS_EXIT}: phase {phase}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_deployment_pods_run_without_a_worker() -> Result<()> {
    let w = world().await;
    let (client, ns) = namespace("kubelet-plain").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    deployments
        .create(
            &PostParams::default(),
            &deployment(
                "web",
                2,
                json!({"env": [{"name": "GREETING", "value": "hi"}]}),
                json!({}),
            )?,
        )
        .await?;
    wait_available(&deployments, "web", 2).await?;
    assert_eq!(w.kubelet.running_workers(&ns, "web"), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_whose_worker_cannot_poll_stay_not_ready() -> Result<()> {
    let w = world().await;
    let (client, ns) = namespace("kubelet-broken").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_healthy_unreachable_and_ghost_workers(w, &deployments, &ns).await?;

    wait_available(&deployments, "healthy", 1).await?;
    let t = Instant::now();
    // The unreachable worker crashes: restarted with a back-off, never Ready.
    let crashed = eventually("the unreachable pod to crash and restart", || async {
        let list = pods_of(&pods, "unreachable").await?;
        ensure!(
            !list.iter().any(is_ready),
            "unreachable pod Ready: {list:?}"
        );
        Ok(list.into_iter().find(|p| {
            main_status(p).is_some_and(|s| {
                s.restart_count >= 1
                    && s.last_state
                        .as_ref()
                        .and_then(|l| l.terminated.as_ref())
                        .is_some_and(|t| t.exit_code == 1)
            })
        }))
    })
    .await?;
    eprintln!(
        "unreachable pod restarted after {:?}: {:?}",
        t.elapsed(),
        main_status(&crashed)
    );
    assert_eq!(phase(&crashed), "Running");
    watch_the_broken_pods_stay_not_ready(&pods, t).await?;
    for app in ["unreachable", "ghost"] {
        let d = deployments.get(app).await?;
        assert_eq!(available(&d), 0, "{app}: {:?}", d.status);
    }
    assert_eq!(w.kubelet.running_workers(&ns, "unreachable"), 0);
    Ok(())
}

/// Three one-replica Deployments: `healthy`; `unreachable`, whose worker dials a loopback
/// port nobody listens on; and `ghost`, which reaches Temporal but polls a namespace Temporal
/// does not know.
async fn create_healthy_unreachable_and_ghost_workers(
    w: &World,
    deployments: &Api<Deployment>,
    ns: &str,
) -> Result<()> {
    // A loopback port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.to_string()
    };
    let tq = unique("tq");
    let create = |name: &str, address: &str| {
        let env = worker_env(w, address, &format!("{ns}/{name}"), "v1", &tq);
        deployment(name, 1, json!({"env": env}), json!({}))
    };
    let pp = PostParams::default();
    deployments
        .create(&pp, &create("healthy", &w.temporal_address)?)
        .await?;
    deployments
        .create(&pp, &create("unreachable", &closed)?)
        .await?;
    // Reaches Temporal, but polls a namespace Temporal does not know.
    let mut ghost = create("ghost", &w.temporal_address)?;
    if let Some(c) = ghost
        .spec
        .template
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
        && let Some(env) = c.env.as_mut()
    {
        for e in env.iter_mut().filter(|e| e.name == "TEMPORAL_NAMESPACE") {
            e.value = Some(unique("no-such-namespace"));
        }
    }
    deployments.create(&pp, &ghost).await?;
    Ok(())
}

/// Several seconds more: neither broken pod becomes Ready, the healthy one stays Ready, and at
/// some point the crash loop shows.
async fn watch_the_broken_pods_stay_not_ready(pods: &Api<Pod>, t: Instant) -> Result<()> {
    let watch_until = Instant::now() + Duration::from_secs(6);
    let mut saw_backoff = false;
    while Instant::now() < watch_until || !saw_backoff {
        for app in ["unreachable", "ghost"] {
            let list = pods_of(pods, app).await?;
            ensure!(list.len() == 1, "{app}: {list:?}");
            ensure!(!is_ready(&list[0]), "{app} Ready: {:?}", list[0].status);
            if app == "unreachable" {
                saw_backoff |= waiting_reason(&list[0]).as_deref() == Some("CrashLoopBackOff");
            }
        }
        let healthy = pods_of(pods, "healthy").await?;
        ensure!(healthy.iter().all(is_ready), "healthy pod lost Ready");
        ensure!(t.elapsed() < DEADLINE, "no CrashLoopBackOff seen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_and_deletion_stop_workers_and_remove_pods() -> Result<()> {
    let w = world().await;
    let (client, ns) = namespace("kubelet-scale").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let tq = unique("tq");
    let env = worker_env(w, &w.temporal_address, &format!("{ns}/scale"), "v1", &tq);
    deployments
        .create(
            &PostParams::default(),
            &deployment("scale", 3, json!({"env": env}), json!({}))?,
        )
        .await?;
    wait_available(&deployments, "scale", 3).await?;
    assert_eq!(w.kubelet.running_workers(&ns, "scale"), 3);
    let before: BTreeSet<String> = pods_of(&pods, "scale").await?.iter().map(name).collect();

    let t = Instant::now();
    deployments
        .patch(
            "scale",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 1}})),
        )
        .await?;
    let left = eventually("1 pod and 1 worker left", || async {
        let list = pods_of(&pods, "scale").await?;
        let done = list.len() == 1 && w.kubelet.running_workers(&ns, "scale") == 1;
        Ok(done.then_some(list))
    })
    .await?;
    eprintln!(
        "scaled 3 → 1 (pods gone, workers stopped) in {:?}",
        t.elapsed()
    );
    wait_available(&deployments, "scale", 1).await?;
    let survivor = name(&left[0]);
    assert!(before.contains(&survivor));
    for gone in before.iter().filter(|n| **n != survivor) {
        assert!(pods.get_opt(gone).await?.is_none(), "{gone} still exists");
    }
    let identities: Vec<String> = w
        .kubelet
        .worker_configs(&ns, "scale")
        .into_iter()
        .map(|c| c.identity)
        .collect();
    assert_eq!(identities, vec![format!("1@{survivor}")]);

    let t = Instant::now();
    deployments
        .delete("scale", &DeleteParams::background())
        .await?;
    eventually("no pods and no workers", || async {
        let list = pods_of(&pods, "scale").await?;
        Ok((list.is_empty() && w.kubelet.running_workers(&ns, "scale") == 0).then_some(()))
    })
    .await?;
    eprintln!(
        "Deployment deleted: pods gone, workers stopped in {:?}",
        t.elapsed()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_replaces_pods_with_workers_of_the_new_config() -> Result<()> {
    let w = world().await;
    let (client, ns) = namespace("kubelet-roll").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let tq = unique("tq");
    let temporal_deployment = format!("{ns}/roll");
    let env = worker_env(w, &w.temporal_address, &temporal_deployment, "v1", &tq);
    deployments
        .create(
            &PostParams::default(),
            &deployment("roll", 2, json!({"env": env}), json!({}))?,
        )
        .await?;
    wait_available(&deployments, "roll", 2).await?;
    let old: BTreeSet<String> = pods_of(&pods, "roll").await?.iter().map(name).collect();
    assert!(
        w.kubelet
            .worker_configs(&ns, "roll")
            .iter()
            .all(|c| c.build_id == "v1")
    );

    let t = Instant::now();
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "worker", "env": [{"name": "TEMPORAL_WORKER_BUILD_ID", "value": "v2"}]}
    ]}}}});
    deployments
        .patch("roll", &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let new = wait_for_two_new_pods_with_v2_workers(w, &deployments, &pods, &old, &tq, &ns).await?;
    eprintln!("rolled 2 pods to v2 in {:?}", t.elapsed());
    let identities: Vec<String> = w
        .kubelet
        .worker_configs(&ns, "roll")
        .into_iter()
        .map(|c| c.identity)
        .collect();
    let expected: Vec<String> = new.iter().map(|p| format!("1@{}", name(p))).collect();
    assert_eq!(identities, expected);
    let hashes: BTreeSet<String> = new
        .iter()
        .filter_map(|p| {
            p.metadata
                .labels
                .as_ref()?
                .get("pod-template-hash")
                .cloned()
        })
        .collect();
    assert_eq!(hashes.len(), 1);
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    assert_eq!(rs.len(), 2, "old and new ReplicaSet");
    Ok(())
}

/// maxUnavailable 25% of 2 rounds down to 0: kube-controller-manager keeps 2 available, which
/// only holds if new pods become Ready (their workers poll) before old ones go. Returns the new
/// Pods.
async fn wait_for_two_new_pods_with_v2_workers(
    w: &World,
    deployments: &Api<Deployment>,
    pods: &Api<Pod>,
    old: &BTreeSet<String>,
    tq: &str,
    ns: &str,
) -> Result<Vec<Pod>> {
    let temporal_deployment = format!("{ns}/roll");
    let checked = tokio::sync::Mutex::new(BTreeSet::new());
    eventually("2 new pods with v2 workers, old pods gone", || {
        let (checked, td) = (&checked, &temporal_deployment);
        async move {
            let d = deployments.get("roll").await?;
            let s = d.status.clone().unwrap_or_default();
            ensure!(
                available(&d) >= 2,
                "availability dropped during the rollout: {s:?}"
            );
            let list = pods_of(pods, "roll").await?;
            let fresh_owned: Vec<Pod> = list
                .iter()
                .filter(|p| !old.contains(&name(p)))
                .cloned()
                .collect();
            check_ready_pods_poll(w, &fresh_owned, &mut *checked.lock().await, tq, td, "v2")
                .await?;
            let configs = w.kubelet.worker_configs(ns, "roll");
            let done = s.observed_generation == d.metadata.generation
                && s.updated_replicas == Some(2)
                && s.replicas == Some(2)
                && list.len() == 2
                && fresh_owned.len() == 2
                && configs.len() == 2
                && configs.iter().all(|c| c.build_id == "v2");
            Ok(done.then_some(fresh_owned))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_volumes_and_key_refs_resolve_and_missing_secrets_block_the_start() -> Result<()> {
    let w = world().await;
    let (client, ns) = namespace("kubelet-secrets").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let tq = unique("tq");
    let pp = PostParams::default();
    // TEMPORAL_NAMESPACE comes through envFrom.
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(
            &pp,
            &serde_json::from_value(json!({
                "metadata": {"name": "worker-common"},
                "data": {"TEMPORAL_NAMESPACE": w.temporal_ns},
            }))?,
        )
        .await?;
    let container = json!({
        "envFrom": [{"configMapRef": {"name": "worker-common"}}],
        "env": [
            {"name": "TEMPORAL_ADDRESS", "value": w.mtls.host_port()},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "TEMPORAL_DEPLOYMENT_NAME", "value": "$(POD_NAMESPACE)/mtls"},
            {"name": "TEMPORAL_WORKER_BUILD_ID", "value": "v1"},
            {"name": "TEMPORAL_TASK_QUEUE",
             "valueFrom": {"secretKeyRef": {"name": "worker-settings", "key": "task-queue"}}},
            {"name": "TEMPORAL_TLS_SERVER_NAME", "value": "localhost"},
            {"name": "TEMPORAL_TLS_CLIENT_CERT_PATH", "value": "/etc/temporal/tls/tls.crt"},
            {"name": "TEMPORAL_TLS_CLIENT_KEY_PATH", "value": "/etc/temporal/tls/tls.key"},
        ],
        "volumeMounts": [{"name": "temporal-tls", "mountPath": "/etc/temporal/tls", "readOnly": true}],
    });
    let volumes =
        json!({"volumes": [{"name": "temporal-tls", "secret": {"secretName": "worker-mtls"}}]});
    deployments
        .create(&pp, &deployment("mtls", 1, container, volumes)?)
        .await?;
    let forwarded = check_a_missing_volume_secret_blocks_the_sandbox(w, &pods, &ns).await?;

    secrets
        .create(
            &pp,
            &serde_json::from_value(json!({
                "metadata": {"name": "worker-mtls"},
                "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": w.pki.client_cert_pem, "tls.key": w.pki.client_key_pem},
            }))?,
        )
        .await?;
    check_a_missing_key_ref_secret_blocks_the_container(w, &pods, &ns, forwarded).await?;

    let t = Instant::now();
    secrets
        .create(
            &pp,
            &serde_json::from_value(json!({
                "metadata": {"name": "worker-settings"},
                "stringData": {"task-queue": tq},
            }))?,
        )
        .await?;
    wait_available(&deployments, "mtls", 1).await?;
    eprintln!(
        "mTLS pod Ready {:?} after its last Secret appeared",
        t.elapsed()
    );
    check_the_worker_got_every_source_and_polls(w, &ns, &tq, forwarded).await
}

/// No volume Secret: the sandbox cannot be set up. Returns what the mTLS proxy forwarded so
/// far.
async fn check_a_missing_volume_secret_blocks_the_sandbox(
    w: &World,
    pods: &Api<Pod>,
    ns: &str,
) -> Result<u64> {
    let pending = eventually("the pod waiting in ContainerCreating", || async {
        let list = pods_of(pods, "mtls").await?;
        Ok(list
            .into_iter()
            .find(|p| waiting_reason(p).as_deref() == Some("ContainerCreating")))
    })
    .await?;
    assert_eq!(phase(&pending), "Pending");
    assert!(!is_ready(&pending));
    assert_eq!(w.kubelet.running_workers(ns, "mtls"), 0);
    Ok(w.mtls.forwarded())
}

/// The volume mounts; the env's secretKeyRef still names a missing Secret.
async fn check_a_missing_key_ref_secret_blocks_the_container(
    w: &World,
    pods: &Api<Pod>,
    ns: &str,
    forwarded: u64,
) -> Result<()> {
    let config_error = eventually("CreateContainerConfigError", || async {
        let list = pods_of(pods, "mtls").await?;
        Ok(list
            .into_iter()
            .find(|p| waiting_reason(p).as_deref() == Some("CreateContainerConfigError")))
    })
    .await?;
    let message = main_status(&config_error)
        .and_then(|s| s.state.as_ref()?.waiting.as_ref()?.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("secret \"worker-settings\" not found"),
        "{message}"
    );
    assert_eq!(phase(&config_error), "Pending");
    assert_eq!(w.kubelet.running_workers(ns, "mtls"), 0);
    assert_eq!(w.mtls.forwarded(), forwarded, "no worker dialled yet");
    Ok(())
}

/// The worker got its namespace from the ConfigMap, its task queue from the Secret key and its
/// client certificate from the Secret volume, dialled through the mTLS proxy, and polls.
async fn check_the_worker_got_every_source_and_polls(
    w: &World,
    ns: &str,
    tq: &str,
    forwarded: u64,
) -> Result<()> {
    let configs = w.kubelet.worker_configs(ns, "mtls");
    let cfg = configs.first().context("a running worker")?;
    assert_eq!(cfg.task_queue, tq);
    assert_eq!(cfg.namespace, w.temporal_ns);
    assert_eq!(cfg.deployment_name, format!("{ns}/mtls"));
    assert_eq!(
        cfg.client_cert_pem.as_deref(),
        Some(w.pki.client_cert_pem.as_bytes())
    );
    assert_eq!(cfg.trusted_ca_pem.as_deref(), Some(w.pki.ca_pem.as_bytes()));
    assert!(w.mtls.forwarded() > forwarded, "{:?}", w.mtls);
    let conn = temporal_server::shared()
        .await?
        .connect("kubelet-test")
        .await?;
    observe::wait_poller(
        &conn,
        &w.temporal_ns,
        tq,
        &format!("{ns}/mtls"),
        "v1",
        Some(&cfg.identity),
        Duration::from_secs(10),
    )
    .await?;
    Ok(())
}

/// Many Pods share the test process (one worker thread each) and one readiness prober:
/// `TWC_KUBELET_SCALE_PODS` replicas (default 40) become available, then go away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_pods_become_ready_and_go_away() -> Result<()> {
    let replicas: i32 = std::env::var("TWC_KUBELET_SCALE_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let w = world().await;
    let (client, ns) = namespace("kubelet-many").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let tq = unique("tq");
    let env = worker_env(w, &w.temporal_address, &format!("{ns}/many"), "v1", &tq);
    let t = Instant::now();
    deployments
        .create(
            &PostParams::default(),
            &deployment("many", replicas, json!({"env": env}), json!({}))?,
        )
        .await?;
    wait_available(&deployments, "many", replicas).await?;
    eprintln!("{replicas} pods available after {:?}", t.elapsed());
    assert_eq!(
        w.kubelet.running_workers(&ns, "many"),
        usize::try_from(replicas)?
    );
    let t = Instant::now();
    deployments
        .delete("many", &DeleteParams::background())
        .await?;
    eventually("no pods and no workers", || async {
        let list = pods_of(&pods, "many").await?;
        Ok((list.is_empty() && w.kubelet.running_workers(&ns, "many") == 0).then_some(()))
    })
    .await?;
    eprintln!("{replicas} pods gone after {:?}", t.elapsed());
    Ok(())
}
