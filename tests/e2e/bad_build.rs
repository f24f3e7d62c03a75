//! A bad build fails fast, says why, and is not retried silently (issue 38): one case per cause
//! the kubelet stand-in reports as a real kubelet would (an unpullable image, a crash loop, a
//! Pod no Node fits, workers polling another task queue). Each WorkerDeployment has a short
//! `progressDeadlineSeconds`; past it the rollout is `Stalled=True/ProgressDeadlineExceeded`
//! with the cause in the message, kstatus reads Failed, and the Current version's routing (in
//! Temporal) and Pods (by UID) are untouched.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::TemporalWorkerDeployment;

use crate::support::*;

const T: Duration = Duration::from_secs(120);
/// The WorkerDeployments' progress deadline.
const DEADLINE_S: u64 = 15;
/// What a stall may take beyond the deadline (a reconcile, a status write, a slow machine).
const SLACK: Duration = Duration::from_secs(10);
const NAME: &str = "orders";

fn stalled(t: &TemporalWorkerDeployment) -> bool {
    condition_is(t, "Stalled", "True", "ProgressDeadlineExceeded")
        && condition_is(t, "Ready", "False", "ProgressDeadlineExceeded")
        && condition_is(t, "Progressing", "False", "ProgressDeadlineExceeded")
}

fn message(t: &TemporalWorkerDeployment) -> String {
    condition(t, "Stalled")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// UIDs of the Pods of one versioned Deployment.
async fn pod_uids(c: &Case, build: &str) -> Result<BTreeSet<String>> {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &c.ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("temporal.io/build-id={build}")))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect())
}

/// v1 rolled out and Ready; returns its build ID and its Pods' UIDs.
async fn rolled_out(c: &Case, rollout: &Value) -> Result<(String, BTreeSet<String>)> {
    c.apply_twd(
        NAME,
        "v1",
        rollout.clone(),
        json!({"progressDeadlineSeconds": DEADLINE_S}),
    )
    .await?;
    let twd = c.wait_twd(NAME, "v1 Ready", T, is_ready).await?;
    let v1 = current_build(&twd).context("Ready without a current version")?;
    let uids = pod_uids(c, &v1).await?;
    ensure!(!uids.is_empty(), "no Pods of {v1}");
    Ok((v1, uids))
}

/// Applies a bad v2 (`spec` merged into the usual one) and waits for the stall; checks the
/// timing, the cause in the message, kstatus, Temporal's routing and v1's Pods.
async fn stalls(
    c: &Case,
    v1: &str,
    v1_pods: &BTreeSet<String>,
    manifest: Value,
    cause: &[&str],
) -> Result<TemporalWorkerDeployment> {
    let applied = Instant::now();
    c.apply(manifest).await?;
    let twd = c
        .wait_twd(
            NAME,
            "Stalled=True/ProgressDeadlineExceeded",
            Duration::from_secs(DEADLINE_S) + SLACK + Duration::from_secs(20),
            stalled,
        )
        .await?;
    let took = applied.elapsed();
    let m = message(&twd);
    println!("stalled after {:.1}s: {m}", took.as_secs_f64());
    ensure!(
        took >= Duration::from_secs(DEADLINE_S - 1),
        "stalled before its deadline ({took:?}): {m}"
    );
    ensure!(
        took <= Duration::from_secs(DEADLINE_S) + SLACK,
        "stalled {took:?} after the apply, deadline {DEADLINE_S}s"
    );
    for word in cause {
        ensure!(m.contains(word), "the message does not say {word:?}: {m}");
    }
    let live = serde_json::to_value(&twd)?;
    let (k, kmsg) = test_harness::gitops::kstatus(&live);
    ensure!(
        k == test_harness::gitops::Status::Failed,
        "kstatus {k:?}: {kmsg}"
    );
    let (health, _) = test_harness::gitops::argocd_health(&live);
    ensure!(health == "Degraded", "Argo CD {health}");
    untouched(c, v1, v1_pods).await?;
    let events = c.events_of(NAME).await?;
    let warnings = events
        .iter()
        .filter(|e| e.type_ == "Warning" && e.reason == "ProgressDeadlineExceeded")
        .count();
    ensure!(warnings == 1, "{warnings} Warning events: {events:?}");
    Ok(twd)
}

/// v1 is still Current in Temporal with nothing ramping, and its Pods are the same ones.
async fn untouched(c: &Case, v1: &str, v1_pods: &BTreeSet<String>) -> Result<()> {
    let state = describe_soon(&c.temporal().await?, &c.temporal_deployment_name(NAME)).await?;
    ensure!(
        state.routing.current_build_id.as_deref() == Some(v1),
        "Temporal's Current is {:?}, not {v1}",
        state.routing.current_build_id
    );
    ensure!(
        state
            .routing
            .ramping_build_id
            .as_deref()
            .is_none_or(str::is_empty),
        "something ramps: {:?}",
        state.routing
    );
    let now = pod_uids(c, v1).await?;
    ensure!(&now == v1_pods, "v1's Pods changed: {v1_pods:?} -> {now:?}");
    Ok(())
}

fn twd(c: &Case, image: &str, rollout: Value, extra: Value) -> Value {
    test_harness::manifests::twd(NAME)
        .replicas(1)
        .pod_labels(json!({"app": NAME}))
        .image(image)
        .task_queue(&c.task_queue)
        .rollout(rollout)
        .sunset("2s", "2s")
        .temporal_namespace(&c.temporal_ns)
        .spec(json!({"progressDeadlineSeconds": DEADLINE_S}))
        .spec(extra)
        .build()
}

fn all_at_once() -> Value {
    json!({"strategy": "AllAtOnce"})
}

/// The unpullable image: stalls with the pull error; re-applied unchanged it stays Stalled with
/// the recorded failure (no new wait); `temporal.io/retry` starts a new wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpullable_image_stalls_is_remembered_and_retried_on_request() -> Result<()> {
    let c = case("badbuild-pull").await?;
    let (v1, v1_pods) = rolled_out(&c, &all_at_once()).await?;
    let bad = twd(
        &c,
        "registry.invalid/team/worker:v2",
        all_at_once(),
        json!({}),
    );
    let first = stalls(
        &c,
        &v1,
        &v1_pods,
        bad.clone(),
        &[
            "registry.invalid/team/worker:v2",
            "cannot be pulled",
            "Pod ",
        ],
    )
    .await?;
    let v2 = target_build(&first).context("no target")?;
    let record = first
        .status
        .as_ref()
        .and_then(|s| s.rollout_control.as_ref())
        .and_then(|r| r.aborted.clone())
        .context("no failure recorded")?;
    ensure!(record.build_id == v2 && record.reason == "ProgressDeadlineExceeded");
    // Hold (the default): the failed build's Pods are kept for inspection.
    let d = c.deployments().get(&deployment_of(NAME, &v2)).await?;
    ensure!(d.spec.replicas == Some(1), "v2 was scaled");

    // A GitOps re-sync of the same spec: no new wait, the recorded failure holds.
    c.apply(bad).await?;
    let hold_until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < hold_until {
        let t = c.get_twd(NAME).await?;
        ensure!(stalled(&t), "a re-apply started a new wait: {:?}", t.status);
        let r = t
            .status
            .as_ref()
            .and_then(|s| s.rollout_control.as_ref())
            .and_then(|r| r.aborted.clone());
        ensure!(r.as_ref() == Some(&record), "the record changed: {r:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // The documented clear: annotate temporal.io/retry=<build>.
    let patch = json!({"metadata": {"annotations": {"temporal.io/retry": v2}}});
    c.twds()
        .patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let again = c
        .wait_twd(NAME, "waiting again after the retry", T, |t| {
            condition_is(t, "Stalled", "False", "WaitingForPollers")
        })
        .await?;
    let control = again
        .status
        .and_then(|s| s.rollout_control)
        .context("no rollout control")?;
    ensure!(
        control.retried.as_deref() == Some(v2.as_str()),
        "{control:?}"
    );
    ensure!(control.aborted.is_none(), "{control:?}");
    let waiting = control.waiting.context("no clock")?;
    ensure!(waiting.since.0 > record.at.0, "the clock did not restart");
    // The image still cannot be pulled: it fails again at the new deadline.
    c.wait_twd(
        NAME,
        "Stalled again",
        Duration::from_secs(DEADLINE_S) + SLACK + Duration::from_secs(20),
        stalled,
    )
    .await?;
    untouched(&c, &v1, &v1_pods).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_worker_stalls_with_its_restarts_and_last_exit() -> Result<()> {
    let c = case("badbuild-crash").await?;
    let (v1, v1_pods) = rolled_out(&c, &all_at_once()).await?;
    // Without TEMPORAL_TASK_QUEUE the worker exits at once with an error, every time.
    let mut bad = twd(
        &c,
        &test_harness::manifests::worker_image("v2"),
        all_at_once(),
        json!({}),
    );
    bad["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "WORKER_FLAVOUR", "value": "broken"}]);
    stalls(
        &c,
        &v1,
        &v1_pods,
        bad,
        &["crash-looping", "restarts", "exit code 1", "Pod "],
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_node_fits_stalls_as_unschedulable() -> Result<()> {
    let c = case("badbuild-sched").await?;
    let (v1, v1_pods) = rolled_out(&c, &all_at_once()).await?;
    let bad = twd(
        &c,
        &test_harness::manifests::worker_image("v1"),
        all_at_once(),
        json!({"template": {"spec": {"nodeSelector": {"pool": "gpu"}}}}),
    );
    stalls(
        &c,
        &v1,
        &v1_pods,
        bad,
        &[
            "cannot be scheduled",
            "Unschedulable",
            "node affinity/selector",
        ],
    )
    .await?;
    Ok(())
}

/// Workers that poll another task queue register their version and their Pods are Ready, but
/// nothing is routed to them: the Current version's queue would lose its workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_on_another_task_queue_are_not_routed_and_stall() -> Result<()> {
    let c = case("badbuild-queue").await?;
    let (v1, v1_pods) = rolled_out(&c, &all_at_once()).await?;
    let mut bad = twd(
        &c,
        &test_harness::manifests::worker_image("v2"),
        all_at_once(),
        json!({}),
    );
    let other = format!("{}-typo", c.task_queue);
    bad["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "TEMPORAL_TASK_QUEUE", "value": other}]);
    stalls(&c, &v1, &v1_pods, bad, &[other.as_str(), &c.task_queue]).await?;
    Ok(())
}

/// `onFailure: Abort`: the failed build is scaled to zero and the previous version keeps
/// serving, as after `abort`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_on_failure_scales_the_failed_build_to_zero() -> Result<()> {
    let c = case("badbuild-abort").await?;
    let rollout = json!({"strategy": "AllAtOnce", "onFailure": "Abort"});
    let (v1, v1_pods) = rolled_out(&c, &rollout).await?;
    let bad = twd(&c, "registry.invalid/team/worker:v2", rollout, json!({}));
    let t = stalls(
        &c,
        &v1,
        &v1_pods,
        bad,
        &["cannot be pulled", "scaled to zero"],
    )
    .await?;
    let v2 = target_build(&t).context("no target")?;
    let dep = deployment_of(NAME, &v2);
    eventually("the failed build at zero", T, || async {
        let d = c.deployments().get(&dep).await?;
        let spec = d.spec.replicas;
        let pods = pod_uids(&c, &v2).await?;
        Ok((spec == Some(0) && pods.is_empty()).then_some(()))
    })
    .await?;
    ensure!(current_build(&c.get_twd(NAME).await?).as_deref() == Some(v1.as_str()));
    untouched(&c, &v1, &v1_pods).await
}

/// `helm upgrade --wait` (the real Helm 4 CLI, kstatus through Flux's fork) of a chart whose
/// WorkerDeployment gets an unpullable image returns an error before its own timeout: kstatus
/// reads Failed at the progress deadline, instead of InProgress until Helm gives up. The
/// version the install made Current keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_wait_to_an_unpullable_image_fails_before_its_timeout() -> Result<()> {
    const HELM_TIMEOUT_S: u64 = 150;
    let c = case("badbuild-helm").await?;
    let values = |image: &str| {
        json!({
            "hostPort": c.env.temporal_address,
            "temporalNamespace": c.temporal_ns,
            "image": image,
            "progressDeadlineSeconds": DEADLINE_S,
            "env": [{"name": "TEMPORAL_TASK_QUEUE", "value": c.task_queue}],
        })
    };
    let helm = |action: &'static str, values: Value| {
        let (kubeconfig, ns) = (c.env.kubeconfig.clone(), c.ns.clone());
        tokio::task::spawn_blocking(move || match action {
            "install" => {
                test_harness::gitops::helm_install(&kubeconfig, NAME, &ns, &values, HELM_TIMEOUT_S)
            }
            _ => {
                test_harness::gitops::helm_upgrade(&kubeconfig, NAME, &ns, &values, HELM_TIMEOUT_S)
            }
        })
    };
    let install = helm(
        "install",
        values("registry.example.com/payments/orders-worker:1.4.2"),
    )
    .await??;
    ensure!(
        install.ok,
        "helm install --wait of the good image: {install:?}"
    );
    let v1 =
        current_build(&c.get_twd(NAME).await?).context("no Current build after the install")?;
    let upgrade = helm(
        "upgrade",
        values("registry.invalid/payments/orders-worker:1.5.0"),
    )
    .await??;
    let took = upgrade.finished - upgrade.started;
    println!("helm upgrade --wait returned after {took:.1}s: {upgrade:?}");
    ensure!(!upgrade.ok, "helm upgrade --wait succeeded: {upgrade:?}");
    ensure!(
        took < (HELM_TIMEOUT_S / 2) as f64,
        "helm waited {took:.1}s of its {HELM_TIMEOUT_S}s timeout: {upgrade:?}"
    );
    ensure!(
        current_build(&c.get_twd(NAME).await?).as_deref() == Some(v1.as_str()),
        "the installed version is no longer Current"
    );
    let twd = c.get_twd(NAME).await?;
    ensure!(stalled(&twd), "{:?}", twd.status);
    ensure!(
        message(&twd).contains("cannot be pulled"),
        "{}",
        message(&twd)
    );
    Ok(())
}
