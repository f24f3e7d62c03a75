//! The chaos suite's seeded fault (issue 28): the invariant checker must catch a breach. Mid
//! rollout the test itself is a rogue writer: it scales the Ramping version's Deployment to
//! zero through the Kubernetes API, then routes the worker deployment through Temporal to a
//! version no Pod polls for; the checker must report exactly those two violations, and
//! nothing before them. The controller is the real binary, unweakened.

#[path = "chaos/support.rs"]
mod support;

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    SetWorkerDeploymentCurrentVersionRequest, SetWorkerDeploymentManagerRequest,
    set_worker_deployment_manager_request::NewManagerIdentity,
};
use test_harness::invariants::Violation;
use test_harness::names;
use test_harness::observe::describe_deployment;
use test_harness::world;

use support::{Controller, Rig};

const T: Duration = Duration::from_secs(180);
const ROGUE: &str = "rogue-writer";
/// A build ID no Pod runs.
const GHOST: &str = "ghost-build";

/// Waits until `pred` holds for the checker's violations (polled), for at most 60 s.
async fn wait_violations(rig: &Rig, what: &str, pred: impl Fn(&[Violation]) -> bool) -> Result<()> {
    let begin = Instant::now();
    loop {
        let found = rig.checker.violations();
        if pred(&found) {
            return Ok(());
        }
        if begin.elapsed() > Duration::from_secs(60) {
            bail!("the checker did not report {what} within 60 s; it reported {found:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sets `build` Current through Temporal as the rogue, taking the manager role first if the
/// controller holds it.
async fn rogue_set_current(
    rig: &Rig,
    temporal_ns: &str,
    deployment: &str,
    build: &str,
) -> Result<()> {
    let conn = rig.temporal.connect(ROGUE).await?;
    let mut svc = conn.clone();
    svc.set_worker_deployment_manager(Request::new(SetWorkerDeploymentManagerRequest {
        namespace: temporal_ns.into(),
        deployment_name: deployment.into(),
        new_manager_identity: Some(NewManagerIdentity::Self_(true)),
        identity: ROGUE.into(),
        ..Default::default()
    }))
    .await
    .context("rogue SetWorkerDeploymentManager")?;
    svc.set_worker_deployment_current_version(Request::new(
        SetWorkerDeploymentCurrentVersionRequest {
            namespace: temporal_ns.into(),
            deployment_name: deployment.into(),
            build_id: build.into(),
            identity: ROGUE.into(),
            allow_no_pollers: true,
            ignore_missing_task_queues: true,
            ..Default::default()
        },
    ))
    .await
    .context("rogue SetWorkerDeploymentCurrentVersion")?;
    Ok(())
}

/// v1 Current, then v2 Ramping at 30 % for ten minutes; returns the worker deployment.
async fn ramp(
    rig: &Rig,
    ns: &str,
    temporal_ns: &str,
    name: &str,
) -> Result<TemporalWorkerDeployment> {
    let api = support::twds(&rig.admin, ns);
    world::apply(
        &rig.admin,
        ns,
        "chaos-test",
        support::twd(name, "v1", temporal_ns, json!({"strategy": "AllAtOnce"})),
    )
    .await?;
    world::wait(&api, name, "v1 Current", |t| support::complete(t, None)).await?;
    world::apply(
        &rig.admin,
        ns,
        "chaos-test",
        support::twd(
            name,
            "v2",
            temporal_ns,
            support::progressive(&[(30, "10m")], false),
        ),
    )
    .await?;
    world::wait(&api, name, "v2 Ramping at 30%", |t| {
        t.status
            .as_ref()
            .and_then(|s| s.target_version.as_ref())
            .and_then(|v| v.ramp_percentage)
            == Some(30.0)
    })
    .await
}

/// Scales version `v2`'s Deployment to zero as the rogue; returns the violation expected.
async fn rogue_scale_to_zero(rig: &Rig, ns: &str, v2: &str) -> Result<Violation> {
    let deployments: Api<Deployment> = Api::namespaced(rig.admin.clone(), ns);
    let listed = deployments
        .list(&ListParams::default().labels(&format!("temporal.io/build-id={v2}")))
        .await?;
    let v2_deployment = listed
        .items
        .first()
        .and_then(|d| d.metadata.name.clone())
        .context("no v2 Deployment")?;
    deployments
        .patch(
            &v2_deployment,
            &PatchParams::apply(ROGUE).force(),
            &Patch::Apply(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 0}})),
        )
        .await?;
    Ok(Violation::LiveVersionScaledDown {
        deployment: format!("{ns}/{v2_deployment}"),
        build_id: v2.to_string(),
        status: "WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING".into(),
        action: "scaled to 0".into(),
    })
}

async fn run() -> Result<()> {
    let rig = Rig::start().await?;
    let ns = names::unique("seeded");
    let temporal_ns = format!("chaos-{ns}");
    rig.namespace(&ns, &temporal_ns, &rig.temporal.address())
        .await?;
    let kubeconfig = rig.controller_kubeconfig("twc-chaos-seeded", None)?;
    let mut controller = Controller::start("seeded-a", "twc-chaos-seeded", &kubeconfig, &ns)?;
    controller.wait_serving().await?;
    let name = "orders";
    let deployment = format!("{ns}/{name}");

    let ramping = ramp(&rig, &ns, &temporal_ns, name).await?;
    controller.check_alive()?;
    let v2 = support::target_build(&ramping).context("no target")?;
    // The checker has seen the ramp (at least two polls since) and found nothing wrong.
    let polls = rig.checker.counts().temporal_polls;
    test_harness::wait::eventually("two more polls", T, || async {
        Ok((rig.checker.counts().temporal_polls >= polls + 2).then_some(()))
    })
    .await?;
    let before = rig.checker.violations();
    ensure!(
        before.is_empty(),
        "violations before the rogue wrote: {before:?}"
    );

    // Rogue 1: the Ramping version's Deployment to zero.
    let scaled = rogue_scale_to_zero(&rig, &ns, &v2).await?;
    wait_violations(&rig, "the Ramping version scaled to 0", |v| {
        v.contains(&scaled)
    })
    .await?;

    // Rogue 2: route to a version no Pod polls for.
    rogue_set_current(&rig, &temporal_ns, &deployment, GHOST).await?;
    let routed = Violation::RoutedWithoutPollers {
        worker_deployment: deployment.clone(),
        build_id: GHOST.into(),
        role: "Current".into(),
        modifier: ROGUE.into(),
    };
    wait_violations(&rig, "routing to a version without pollers", |v| {
        v.contains(&routed)
    })
    .await?;
    let found = rig.checker.violations();
    let counts = rig.checker.counts();
    let described = describe_deployment(
        &rig.temporal.connect("seeded-test").await?,
        &temporal_ns,
        &deployment,
    )
    .await?;
    println!(
        "seeded faults caught: {} violations after {} checks ({} polls, {} Deployment events); violations:",
        found.len(),
        counts.total_checks(),
        counts.temporal_polls,
        counts.deployment_events
    );
    for v in &found {
        println!("  {v}");
    }
    ensure!(
        found == vec![scaled.clone(), routed.clone()],
        "the checker reported {found:?}, expected exactly [{scaled}, {routed}]; Temporal: {:?}",
        described
            .and_then(|d| d.worker_deployment_info)
            .map(|i| i.routing_config)
    );
    controller.kill();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_reports_exactly_the_rogue_writers_violations() {
    run().await.expect("seeded fault");
}
