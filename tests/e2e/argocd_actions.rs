//! Argo CD resource actions end to end: each action run on the live object in Argo CD's engine
//! (gopher-lua at its pins, `tools/gitops-checker`), its output applied to the real API server
//! as Argo CD applies it (a JSON merge patch of the difference, status through the status
//! subresource), and the controller doing what the action says: restart → new Pods of the same
//! build with routing unchanged; abort → the ramp back to 0 %; clear-abort → ramping again;
//! promote → Current; retry → the build that missed its progress deadline rolls out once its
//! cause is gone. Each applied change then survives a re-apply of the manifest (the GitOps
//! sync's server-side apply with its own field manager).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::generate::lua::{ACTION_DISCOVERY, ACTIONS};
use test_harness::argocd_actions::{gopher_action, gopher_discovery, merge_patch, split_status};

use crate::rollout::deploy_first;
use crate::rollout_control::{ramp, ready_reason};
use crate::support::*;

const T: Duration = Duration::from_secs(120);
/// The field manager of Argo CD's server, which applies action patches.
const ARGOCD: &str = "argocd-server";

fn script(name: &str) -> &'static str {
    ACTIONS
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.text)
        .unwrap_or_default()
}

/// Runs `action` on the live object as Argo CD does and applies its output; returns the patch.
async fn run_action(c: &Case, name: &str, action: &str) -> Result<Value> {
    let live = serde_json::to_value(c.twds().get(name).await?)?;
    let offered = gopher_discovery(ACTION_DISCOVERY, &live, false).map_err(anyhow::Error::msg)?;
    let entry = offered
        .iter()
        .find(|d| d.name == action)
        .with_context(|| format!("{action} not discovered"))?;
    ensure!(!entry.disabled, "{action} is disabled on {live}");
    let out = gopher_action(script(action), &live, false).map_err(anyhow::Error::msg)?;
    let (patch, status) = split_status(&merge_patch(&live, &out));
    ensure!(status.is_none(), "{action} writes status: {status:?}");
    c.twds()
        .patch(name, &PatchParams::apply(ARGOCD), &Patch::Merge(&patch))
        .await?;
    Ok(patch)
}

async fn pods_of(c: &Case, build: &str) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &c.ns);
    let lp = ListParams::default().labels(&format!("temporal.io/build-id={build}"));
    Ok(pods.list(&lp).await?.items)
}

fn uids(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter().filter_map(|p| p.metadata.uid.clone()).collect()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn restarted(t: &TemporalWorkerDeployment) -> Option<String> {
    t.status
        .as_ref()?
        .rollout_control
        .as_ref()?
        .restarted
        .clone()
}

/// The Current version's Pods are all replaced, its build ID, Deployment and routing stay,
/// the status records the request and an event reports it; a re-apply of the manifest keeps
/// the annotation and restarts nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_action_replaces_the_pods_of_the_same_build_and_keeps_routing() -> Result<()> {
    let c = case("actrestart").await?;
    let v1 = deploy_first(&c, "orders").await?;
    let dep = deployment_of("orders", &v1);
    let before = uids(&pods_of(&c, &v1).await?);
    ensure!(!before.is_empty(), "no Pods of {v1}");
    let patch = run_action(&c, "orders", "restart").await?;
    let value = patch["metadata"]["annotations"]["temporal.io/restart"]
        .as_str()
        .context("restart writes the annotation")?
        .to_string();
    ensure!(value.starts_with(&format!("{v1}/")), "{value}");
    let twd = c
        .wait_twd("orders", "restart recorded", T, |t| {
            restarted(t).as_deref() == Some(&value)
        })
        .await?;
    eventually("all Pods replaced and Ready", T, || async {
        let now = pods_of(&c, &v1).await?;
        let fresh = now
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none());
        let fresh: Vec<&Pod> = fresh.collect();
        let replaced = !fresh.is_empty()
            && fresh.iter().all(|p| {
                !before.contains(p.metadata.uid.as_deref().unwrap_or_default()) && ready(p)
            });
        Ok(replaced.then_some(()))
    })
    .await?;
    let d = c.deployments().get(&dep).await?;
    let carried = d
        .spec
        .template
        .metadata
        .and_then(|m| m.annotations)
        .and_then(|a| a.get("temporal.io/restart").cloned());
    ensure!(carried.as_deref() == Some(value.as_str()), "{carried:?}");
    ensure!(
        current_build(&twd).as_deref() == Some(v1.as_str()),
        "build ID changed"
    );
    let state = describe_soon(&c.temporal().await?, &c.temporal_deployment_name("orders")).await?;
    ensure!(
        state.routing.current_build_id.as_deref() == Some(v1.as_str())
            && state
                .routing
                .ramping_build_id
                .as_deref()
                .unwrap_or_default()
                .is_empty(),
        "routing changed: {:?}",
        state.routing
    );
    let twd = c
        .wait_twd("orders", "Ready after the restart", T, is_ready)
        .await?;
    ensure!(current_build(&twd).as_deref() == Some(v1.as_str()));
    let events = c.events_of("orders").await?;
    ensure!(
        events
            .iter()
            .any(|e| e.reason == "VersionRestarted" && e.note.contains(&value)),
        "no VersionRestarted event: {events:?}"
    );
    reapply_keeps_the_request(&c, &dep, &value, &v1).await?;
    restart_and_retry_from_the_cli(&c, &dep, &value, &v1).await
}

/// The CLI's `restart --build` makes a new request the controller acts on; `retry` refuses
/// when no build failed, with a non-zero exit and the reason.
async fn restart_and_retry_from_the_cli(c: &Case, dep: &str, before: &str, v1: &str) -> Result<()> {
    let out = cli(c, &["restart", "orders", "--build", v1]).await?;
    ensure!(
        out.status.success(),
        "restart: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let twd = c.twds().get("orders").await?;
    let value = twd
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("temporal.io/restart").cloned())
        .context("the CLI sets the annotation")?;
    ensure!(
        value != before && value.starts_with(&format!("{v1}/")),
        "{value}"
    );
    c.wait_twd("orders", "CLI restart recorded", T, |t| {
        restarted(t).as_deref() == Some(value.as_str())
    })
    .await?;
    let d = c.deployments().get(dep).await?;
    let carried = d.spec.template.metadata.and_then(|m| m.annotations);
    ensure!(
        carried
            .and_then(|a| a.get("temporal.io/restart").cloned())
            .as_deref()
            == Some(&value),
        "the Deployment does not carry {value}"
    );
    let out = cli(c, &["retry", "orders"]).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        !out.status.success() && stderr.contains("progress deadline"),
        "retry: {stderr}"
    );
    Ok(())
}

/// Runs the real CLI binary with the case's kubeconfig.
async fn cli(c: &Case, args: &[&str]) -> Result<std::process::Output> {
    Ok(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_temporal-worker-controller"))
            .args(args)
            .args(["-n", &c.ns])
            .env("KUBECONFIG", &c.env.kubeconfig)
            .output()
            .await?,
    )
}

/// A GitOps sync re-applies the manifest (server-side apply, its own field manager): the
/// annotation stays, and the Deployment is not rolled again.
async fn reapply_keeps_the_request(c: &Case, dep: &str, value: &str, v1: &str) -> Result<()> {
    let generation = c.deployments().get(dep).await?.metadata.generation;
    c.apply_twd("orders", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let twd = c.twds().get("orders").await?;
    let kept = twd
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("temporal.io/restart"));
    ensure!(kept.map(String::as_str) == Some(value), "{kept:?}");
    ensure!(
        target_build(&twd).as_deref() == Some(v1),
        "a re-apply made a new build"
    );
    // A restart a second time would show as a new Deployment generation.
    c.wait_twd("orders", "Ready", T, is_ready).await?;
    let after = c.deployments().get(dep).await?.metadata.generation;
    ensure!(
        after == generation,
        "rolled again: generation {generation:?} → {after:?}"
    );
    Ok(())
}

/// abort → the target's ramp back to 0 % with v1 Current (RolloutAborted); clear-abort →
/// ramping again from the first step; promote → the target Current at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_clear_abort_and_promote_actions_steer_the_rollout() -> Result<()> {
    let c = case("actsteer").await?;
    let v1 = deploy_first(&c, "billing").await?;
    let rollout = json!({"strategy": "Progressive", "steps": [
        {"rampPercentage": 10, "pauseDuration": "600s"},
        {"rampPercentage": 50, "pauseDuration": "600s"}]});
    c.apply_twd("billing", "v2", rollout.clone(), json!({}))
        .await?;
    let twd = c
        .wait_twd("billing", "10% step", T, |t| ramp(t) == Some(10.0))
        .await?;
    let v2 = target_build(&twd).context("target")?;

    run_action(&c, "billing", "abort").await?;
    c.wait_twd("billing", "aborted", T, |t| {
        ready_reason(t) == "RolloutAborted" && ramp(t).is_none_or(|r| r == 0.0)
    })
    .await?;
    let state = describe_soon(&c.temporal().await?, &c.temporal_deployment_name("billing")).await?;
    ensure!(state.routing.current_build_id.as_deref() == Some(v1.as_str()));
    if state
        .routing
        .ramping_build_id
        .as_deref()
        .is_some_and(|b| !b.is_empty())
    {
        bail!("still ramping after abort: {:?}", state.routing);
    }
    // The sync re-applies the manifest: the abort stays.
    c.apply_twd("billing", "v2", rollout, json!({})).await?;
    ensure!(
        c.twds().get("billing").await?.spec.rollout.abort,
        "abort reverted"
    );

    run_action(&c, "billing", "clear-abort").await?;
    c.wait_twd("billing", "ramping again", T, |t| ramp(t) == Some(10.0))
        .await?;

    run_action(&c, "billing", "promote").await?;
    let twd = c
        .wait_twd("billing", "promoted", T, |t| {
            is_ready(t) && current_build(t).as_deref() == Some(v2.as_str())
        })
        .await?;
    let recorded = twd
        .status
        .as_ref()
        .and_then(|s| s.rollout_control.as_ref())
        .and_then(|r| r.promoted.clone());
    ensure!(recorded.as_deref() == Some(v2.as_str()), "{recorded:?}");
    Ok(())
}

/// retry → the failed build rolls out: v2's worker needs a Secret that does not exist yet, so
/// its Pods wait (`CreateContainerConfigError`) and it misses its 15 s progress deadline
/// (`Stalled=True/ProgressDeadlineExceeded`, the failure recorded). The Secret appears: the
/// Pods start, but the recorded failure holds until the retry action's annotation, after which
/// v2 becomes Current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_action_rolls_out_the_build_that_missed_its_deadline() -> Result<()> {
    let c = case("actretry").await?;
    let v1 = deploy_first(&c, "payments").await?;
    let worker = json!({"name": "worker", "image": test_harness::manifests::worker_image("v2"),
        "env": [{"name": "TEMPORAL_TASK_QUEUE", "value": c.task_queue},
                {"name": "RETRY_TOKEN",
                 "valueFrom": {"secretKeyRef": {"name": "payments-token", "key": "token"}}}]});
    let extra = json!({"progressDeadlineSeconds": 15,
        "template": {"spec": {"containers": [worker]}}});
    c.apply_twd("payments", "v2", json!({"strategy": "AllAtOnce"}), extra)
        .await?;
    let failed = c
        .wait_twd("payments", "v2 past its deadline", T, |t| {
            condition_is(t, "Stalled", "True", "ProgressDeadlineExceeded")
        })
        .await?;
    let v2 = target_build(&failed).context("target")?;
    ensure!(v2 != v1, "no new build");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(c.client.clone(), &c.ns);
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "payments-token"}, "stringData": {"token": "t"}});
    secrets
        .patch(
            "payments-token",
            &PatchParams::apply("e2e-test"),
            &Patch::Apply(secret),
        )
        .await?;
    let patch = run_action(&c, "payments", "retry").await?;
    let value = patch["metadata"]["annotations"]["temporal.io/retry"]
        .as_str()
        .context("retry writes the annotation")?;
    ensure!(value.starts_with(&format!("{v2}/")), "{value}");
    c.wait_twd("payments", "the retried build Current", T, |t| {
        is_ready(t) && current_build(t).as_deref() == Some(v2.as_str())
    })
    .await?;
    Ok(())
}
