//! The loops users run, against the running controller: the real `helm` CLI (pinned Helm 4,
//! `tools/helm/`) with `--wait` on a chart holding a Connection and a WorkerDeployment
//! (`tests/fixtures/helm-live-chart`, both kind sets across the cases), and Flux's wait loop
//! (`fluxcd/pkg/ssa` `WaitForSet`, the checker's `wait-for-set`). Every ordering is asserted
//! against Temporal's own timestamps (`currentVersionChangedTime` of the worker deployment).

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use kube::api::Api;
use serde_json::{Value, json};
use temporal_worker_controller::api::{KindSet, TemporalWorkerDeployment};
use test_harness::chart::{Helm, HelmRun};
use test_harness::manifests::worker_image;

use crate::support::*;

const T: Duration = Duration::from_secs(150);
const CHART: &str = "tests/fixtures/helm-live-chart";

/// The chart's values for this case: `kind_set` ("current" or "seed"), the worker `tag`, and
/// the rollout.
fn values(c: &Case, kind_set: &str, tag: &str, rollout: Value) -> Value {
    json!({
        "kindSet": kind_set,
        "image": worker_image(tag),
        "hostPort": c.env.temporal_address,
        "temporalNamespace": c.temporal_ns,
        "rollout": rollout,
        "sunset": {"scaledownDelay": "2s", "deleteDelay": "2s"},
        "env": [{"name": "TEMPORAL_TASK_QUEUE", "value": c.task_queue}],
    })
}

fn helm_for(c: &Case) -> Helm {
    Helm {
        kubeconfig: c.env.kubeconfig.clone(),
        namespace: c.ns.clone(),
        timeout_seconds: T.as_secs(),
    }
}

fn workers(c: &Case, set: KindSet) -> Api<TemporalWorkerDeployment> {
    TemporalWorkerDeployment::api(c.client.clone(), &c.ns, set)
}

/// Unix seconds of a Temporal timestamp.
fn unix(ts: jiff::Timestamp) -> f64 {
    ts.as_millisecond() as f64 / 1000.0
}

/// After `helm ... --wait` returned (`run`): the object's status says its spec's build is
/// Current, Temporal routes to that build, and Temporal made it Current at or before Helm
/// returned and, when `after` is given, after that moment (so Helm waited for *this* rollout).
/// Returns the build.
async fn assert_current_when_helm_returned(
    c: &Case,
    set: KindSet,
    name: &str,
    run: &HelmRun,
    after: Option<f64>,
) -> Result<String> {
    let twd = workers(c, set).get(name).await?;
    ensure!(
        is_ready(&twd),
        "helm returned before Ready on generation {:?}: {:?}",
        twd.metadata.generation,
        twd.status
    );
    let build = current_build(&twd).context("no current version in status")?;
    ensure!(
        target_build(&twd).as_deref() == Some(build.as_str()),
        "status: target {:?}, current {build}",
        target_build(&twd)
    );
    let state = describe_soon(&c.temporal().await?, &c.temporal_deployment_name(name)).await?;
    ensure!(
        state.routing.current_build_id.as_deref() == Some(build.as_str()),
        "Temporal routes to {:?}, the status says {build}",
        state.routing.current_build_id
    );
    let since = unix(
        state
            .routing
            .current_changed_at
            .context("Temporal gives no currentVersionChangedTime")?,
    );
    ensure!(
        since <= run.finished,
        "helm returned at {:.3}, before Temporal made {build} Current at {since:.3}",
        run.finished
    );
    if let Some(after) = after {
        ensure!(
            since > after,
            "{build} was Current at {since:.3}, before the upgrade started at {after:.3}"
        );
    }
    Ok(build)
}

/// `helm upgrade --install --wait` of v1 returns only once v1 is Current in Temporal;
/// `helm upgrade --wait` to v2 (Progressive, short steps) returns only after v2 is Current,
/// never on the old generation's Ready; `helm uninstall --wait` returns only once the
/// finalizer has removed the worker deployment from Temporal. The Go controller's kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_wait_follows_the_rollout_on_the_running_controller() -> Result<()> {
    let c = case("helmlive").await?;
    let helm = helm_for(&c);
    let chart = test_harness::repo_root().join(CHART);
    let name = "payments";
    let all_at_once = json!({"strategy": "AllAtOnce"});

    let v1_run = helm
        .upgrade_install(name, &chart, &values(&c, "current", "v1", all_at_once))
        .await?
        .ensure_ok("helm upgrade --install --wait (v1)")?;
    ensure!(
        v1_run.helm_version == test_harness::helm::pinned_version(),
        "not the pinned helm: {}",
        v1_run.helm_version
    );
    let v1 = assert_current_when_helm_returned(
        &c,
        KindSet::Canonical,
        name,
        &v1_run,
        Some(v1_run.started),
    )
    .await?;
    println!(
        "helm upgrade --install --wait (v1) took {:?}",
        v1_run.took()
    );

    // The old generation is Ready when the upgrade starts; Helm must wait for the new one.
    let before = workers(&c, KindSet::Canonical).get(name).await?;
    ensure!(is_ready(&before), "v1 not Ready before the upgrade");
    let progressive = json!({"strategy": "Progressive", "steps": [
        {"rampPercentage": 25, "pauseDuration": "3s"},
        {"rampPercentage": 75, "pauseDuration": "3s"},
    ]});
    let v2_run = helm
        .upgrade(name, &chart, &values(&c, "current", "v2", progressive))
        .await?
        .ensure_ok("helm upgrade --wait (v2)")?;
    let v2 = assert_current_when_helm_returned(
        &c,
        KindSet::Canonical,
        name,
        &v2_run,
        Some(v2_run.started),
    )
    .await?;
    ensure!(v2 != v1, "the upgrade kept build {v1}");
    // Two 3 s steps lie between the start and the promotion: a return on the old Ready would
    // have come at once.
    ensure!(
        v2_run.took() >= Duration::from_secs(6),
        "helm upgrade --wait returned after {:?}, within the steps' pauses",
        v2_run.took()
    );
    println!("helm upgrade --wait (v2) took {:?}", v2_run.took());

    let temporal = c.temporal().await?;
    let deployment = c.temporal_deployment_name(name);
    ensure!(
        describe_soon(&temporal, &deployment).await?.exists,
        "the worker deployment is not in Temporal before the uninstall"
    );
    let gone = helm
        .uninstall(name)
        .await?
        .ensure_ok("helm uninstall --wait")?;
    let state = describe_soon(&temporal, &deployment).await?;
    ensure!(
        !state.exists,
        "helm uninstall --wait returned after {:?} while Temporal still has {deployment}: {state:?}",
        gone.took()
    );
    ensure!(
        workers(&c, KindSet::Canonical)
            .get_opt(name)
            .await?
            .is_none(),
        "the WorkerDeployment outlived helm uninstall --wait"
    );
    println!("helm uninstall --wait took {:?}", gone.took());
    Ok(())
}

/// A rollout that stalls (its gate workflow fails: `Stalled=True/GateWorkflowFailed`) ends
/// `helm upgrade --wait` long before its `--timeout`, with the condition's message in Helm's
/// error. The seed kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_wait_fails_fast_on_a_stalled_rollout() -> Result<()> {
    let c = case("helmstall").await?;
    let helm = helm_for(&c);
    let chart = test_harness::repo_root().join(CHART);
    let name = "ledger";
    let v1_run = helm
        .upgrade_install(
            name,
            &chart,
            &values(&c, "seed", "v1", json!({"strategy": "AllAtOnce"})),
        )
        .await?
        .ensure_ok("helm upgrade --install --wait (v1)")?;
    assert_current_when_helm_returned(&c, KindSet::Seed, name, &v1_run, None).await?;

    let failing = json!({"strategy": "AllAtOnce",
        "gate": {"workflowType": "gate", "input": {"outcome": "fail"}}});
    let run = helm
        .upgrade(name, &chart, &values(&c, "seed", "v2", failing))
        .await?;
    ensure!(
        !run.ok,
        "helm upgrade --wait passed a failing gate: {run:?}"
    );
    let error = run.error.clone().unwrap_or_default();
    ensure!(
        run.took() < T / 2,
        "helm upgrade --wait ran {:?} of its {T:?} timeout: {error}",
        run.took()
    );
    let twd = workers(&c, KindSet::Seed).get(name).await?;
    let stalled = condition(&twd, "Stalled").context("no Stalled condition")?;
    ensure!(
        stalled.status == "True" && stalled.reason == "GateWorkflowFailed",
        "Stalled {}/{}",
        stalled.status,
        stalled.reason
    );
    ensure!(
        error.contains(&stalled.message),
        "helm's error does not carry the Stalled message {:?}: {error}",
        stalled.message
    );
    println!("helm upgrade --wait failed after {:?}: {error}", run.took());
    Ok(())
}

/// Flux's wait loop (`fluxcd/pkg/ssa` `WaitForSet`, fail-fast on as in kustomize-controller)
/// on a set holding our WorkerDeployment waits through a progressive rollout until the new build
/// is Current in Temporal, and stops early, well before its timeout, on a Stalled one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_wait_for_set_waits_through_a_rollout_and_fails_fast_on_a_stalled_one() -> Result<()> {
    let c = case("fluxwait").await?;
    let name = "shipping";
    let set = vec![format!(
        "temporal.io/TemporalWorkerDeployment/{}/{name}",
        c.ns
    )];
    let wait = |set: Vec<String>, kubeconfig: std::path::PathBuf| async move {
        tokio::task::spawn_blocking(move || {
            let started = unix_now();
            let r = test_harness::gitops::flux_wait_for_set(
                &kubeconfig,
                &set,
                Duration::from_secs(1),
                T,
            );
            (started, r, unix_now())
        })
        .await
    };

    c.apply_twd(name, "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let (_, r, _) = wait(set.clone(), c.env.kubeconfig.clone()).await?;
    let r = r?;
    ensure!(r.ok, "WaitForSet on v1: {}", r.error);
    let v1 = current_build(&c.get_twd(name).await?).context("v1 not Current")?;

    let progressive = json!({"strategy": "Progressive", "steps": [
        {"rampPercentage": 50, "pauseDuration": "4s"},
    ]});
    c.apply_twd(name, "v2", progressive, json!({})).await?;
    let (started, r, finished) = wait(set.clone(), c.env.kubeconfig.clone()).await?;
    let r = r?;
    ensure!(r.ok, "WaitForSet through the v2 rollout: {}", r.error);
    let twd = c.get_twd(name).await?;
    ensure!(
        is_ready(&twd),
        "WaitForSet returned before Ready: {:?}",
        twd.status
    );
    let v2 = current_build(&twd).context("no current build")?;
    ensure!(v2 != v1, "still on {v1}");
    let state = describe_soon(&c.temporal().await?, &c.temporal_deployment_name(name)).await?;
    ensure!(state.routing.current_build_id.as_deref() == Some(v2.as_str()));
    let since = unix(
        state
            .routing
            .current_changed_at
            .context("no currentVersionChangedTime")?,
    );
    ensure!(
        started < since && since <= finished,
        "WaitForSet ran {started:.3}..{finished:.3}, v2 Current at {since:.3}"
    );

    let failing = json!({"strategy": "AllAtOnce",
        "gate": {"workflowType": "gate", "input": {"outcome": "fail"}}});
    c.apply_twd(name, "v3", failing, json!({})).await?;
    let (_, r, _) = wait(set, c.env.kubeconfig.clone()).await?;
    let r = r?;
    ensure!(!r.ok, "WaitForSet passed a failing gate");
    ensure!(
        Duration::from_millis(r.elapsed_ms) < T / 2,
        "WaitForSet ran {} ms of its {T:?} timeout: {}",
        r.elapsed_ms,
        r.error
    );
    let twd = c.get_twd(name).await?;
    ensure!(
        condition_is(&twd, "Stalled", "True", "GateWorkflowFailed"),
        "not Stalled: {:?}",
        twd.status
    );
    println!(
        "WaitForSet on the stalled rollout: {} after {} ms",
        r.error, r.elapsed_ms
    );
    Ok(())
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}
