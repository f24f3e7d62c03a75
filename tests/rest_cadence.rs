//! The rest cadence (issue 52), on the real control plane, the real Temporal dev server and a
//! real worker: a rollout at rest is looked at once per `--rest-interval`, not once per
//! `--idle-interval`, and a routing change someone else makes directly in Temporal (no watch
//! event tells the controller) is still in the status within the stated bound,
//! `--rest-interval` plus one reconcile.
//!
//! The controller runs in-process with its own flags (idle 5 s, rest 40 s), watching only this
//! test's namespace, so its reconcile counter counts this one object.

#[path = "common/controller.rs"]
mod controller;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use temporal_worker_controller::api::{KindSet, TemporalWorkerDeployment};
use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_client::{Connection, ConnectionOptions, Url};
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    SetWorkerDeploymentCurrentVersionRequest, SetWorkerDeploymentManagerRequest,
    set_worker_deployment_manager_request::NewManagerIdentity,
};
use test_harness::manifests;
use test_harness::world::World;

const IDLE: Duration = Duration::from_secs(5);
/// The stated bound under test (`--rest-interval`).
const REST: Duration = Duration::from_secs(40);
/// One reconcile on a loaded 2-core machine: waiting for a slot, a describe, a status write.
const ONE_RECONCILE: Duration = Duration::from_secs(10);
/// A stretch without a reconcile that the idle cadence could not leave (more than two idle
/// intervals), shorter than the earliest rest look.
const QUIET: Duration = Duration::from_secs(15);
const RECONCILES: &str = "temporal_worker_controller_reconcile_total";
const SOMEONE_ELSE: &str = "ops-oncall";
const NAME: &str = "resting";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routing_change_made_in_temporal_is_seen_within_the_rest_interval() -> Result<()> {
    let world = World::new("rest").await?;
    let running = controller::start(
        world.client.clone(),
        &[
            format!("--watch-namespaces={}", world.ns),
            "--identity=rest-cadence-test".into(),
            format!("--idle-interval={}s", IDLE.as_secs()),
            format!("--rest-interval={}s", REST.as_secs()),
            "--fast-poll=300ms".into(),
            "--backlog-poll-interval=0s".into(),
        ],
    )
    .await?;
    let api = TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed);
    let twd = manifests::twd(NAME)
        .replicas(1)
        .tag("v1")
        .task_queue("resting")
        .temporal_namespace(&world.temporal_ns)
        .spec(json!({"rollout": {"strategy": "AllAtOnce"}}))
        .build();
    api.patch(
        NAME,
        &PatchParams::apply("rest-test").force(),
        &Patch::Apply(twd),
    )
    .await?;
    let done = wait_for(&api, "v1 Current", Duration::from_secs(300), |t| {
        ready_reason(t) == Some("RolloutComplete")
    })
    .await?;
    let v1 = current_build(&done).context("no current version in status")?;
    let deployment = done.temporal_deployment_name();

    // In its rest cadence: a stretch longer than two idle intervals without a look.
    let quiet = quiet_stretch(running.http_addr, Duration::from_secs(120)).await?;
    println!("no reconcile for {QUIET:?} (found after {quiet:.1?}): the rest cadence");

    let made = Instant::now();
    someone_else_routes_to_unversioned(&world, &deployment).await?;
    let seen = wait_for(&api, "the change made in Temporal", REST * 3, |t| {
        ready_reason(t).is_some()
            && current_build(t).as_deref() != Some(v1.as_str())
            && progressing_reason(t) == Some("RoutingManagedElsewhere")
    })
    .await?;
    let took = made.elapsed();
    println!(
        "seen after {:.1} s (bound {} s + one reconcile): {:?}",
        took.as_secs_f64(),
        REST.as_secs(),
        progressing_reason(&seen)
    );
    ensure!(
        took <= REST + ONE_RECONCILE,
        "a routing change made in Temporal took {took:?} to reach the status; the stated bound is \
         --rest-interval ({REST:?}) plus one reconcile"
    );
    Ok(())
}

/// Polls object [`NAME`] until `pred` holds, for at most `deadline`.
async fn wait_for(
    api: &kube::Api<TemporalWorkerDeployment>,
    what: &str,
    deadline: Duration,
    pred: impl Fn(&TemporalWorkerDeployment) -> bool,
) -> Result<TemporalWorkerDeployment> {
    let begin = Instant::now();
    loop {
        let obj = api.get(NAME).await?;
        if pred(&obj) {
            return Ok(obj);
        }
        if begin.elapsed() > deadline {
            bail!(
                "timed out after {deadline:?} waiting for {what}: {}",
                serde_json::to_value(&obj)?["status"]
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits (at most `deadline`) for a stretch of [`QUIET`] in which the controller starts no
/// reconcile; returns how long that took.
async fn quiet_stretch(addr: SocketAddr, deadline: Duration) -> Result<Duration> {
    let begin = Instant::now();
    loop {
        let before = reconciles(addr).await?;
        let window = Instant::now();
        while window.elapsed() < QUIET {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if reconciles(addr).await? != before {
                break;
            }
        }
        if reconciles(addr).await? == before && window.elapsed() >= QUIET {
            return Ok(begin.elapsed());
        }
        if begin.elapsed() > deadline {
            bail!("the resting object was reconciled at least every {QUIET:?} for {deadline:?}");
        }
    }
}

/// The controller's reconciles of worker deployments so far, all outcomes.
async fn reconciles(addr: SocketAddr) -> Result<f64> {
    let (code, body) =
        test_harness::loopback_http::get(addr, "/metrics", "text/plain", None).await?;
    ensure!(code == 200, "GET /metrics on {addr}: {code}");
    // `+ 0.0`: an empty sum is -0.0.
    Ok(body
        .lines()
        .filter(|l| l.starts_with(RECONCILES))
        .filter(|l| l.contains("controller=\"temporalworkerdeployment\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        + 0.0)
}

/// What an operator does with the Temporal CLI or UI: takes the routing manager role and
/// sends every new workflow to unversioned workers.
async fn someone_else_routes_to_unversioned(world: &World, deployment: &str) -> Result<()> {
    let url = Url::parse(&format!("http://{}", world.address))?;
    let opts = ConnectionOptions::new(url)
        .identity(SOMEONE_ELSE.to_string())
        .build();
    let mut svc = Connection::connect(opts).await?;
    svc.set_worker_deployment_manager(Request::new(SetWorkerDeploymentManagerRequest {
        namespace: world.temporal_ns.clone(),
        deployment_name: deployment.into(),
        new_manager_identity: Some(NewManagerIdentity::Self_(true)),
        identity: SOMEONE_ELSE.into(),
        ..Default::default()
    }))
    .await
    .context("SetWorkerDeploymentManager")?;
    svc.set_worker_deployment_current_version(Request::new(
        SetWorkerDeploymentCurrentVersionRequest {
            namespace: world.temporal_ns.clone(),
            deployment_name: deployment.into(),
            // Empty: unversioned.
            build_id: String::new(),
            identity: SOMEONE_ELSE.into(),
            ignore_missing_task_queues: true,
            ..Default::default()
        },
    ))
    .await
    .context("SetWorkerDeploymentCurrentVersion (unversioned)")?;
    Ok(())
}

fn condition_reason<'a>(t: &'a TemporalWorkerDeployment, type_: &str) -> Option<&'a str> {
    let s = t.status.as_ref()?;
    (s.observed_generation == t.metadata.generation).then_some(())?;
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.reason.as_str())
}

fn ready_reason(t: &TemporalWorkerDeployment) -> Option<&str> {
    condition_reason(t, "Ready")
}

fn progressing_reason(t: &TemporalWorkerDeployment) -> Option<&str> {
    condition_reason(t, "Progressing")
}

fn current_build(t: &TemporalWorkerDeployment) -> Option<String> {
    t.status
        .as_ref()?
        .current_version
        .as_ref()
        .map(|v| v.build_id.clone())
}
