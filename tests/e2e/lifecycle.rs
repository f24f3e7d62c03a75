//! Version lifecycle end to end (issue 4): gate workflows, rollback, custom build IDs,
//! Connection drift, the routing manager identity and deletion.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::{TemporalConnection, TemporalWorkerDeployment};

use crate::support::*;

const T: Duration = Duration::from_secs(120);

async fn deploy_first(c: &Case, name: &str, extra: Value) -> Result<String> {
    c.apply_twd(name, "v1", json!({"strategy": "AllAtOnce"}), extra)
        .await?;
    let twd = c.wait_twd(name, "first version Ready", T, is_ready).await?;
    current_build(&twd).context("Ready without a current version")
}

fn gate_workflows(
    t: &TemporalWorkerDeployment,
) -> Vec<temporal_worker_controller::api::twd::GateWorkflow> {
    t.status
        .as_ref()
        .and_then(|s| s.target_version.as_ref())
        .map(|t| t.gate_workflows.clone())
        .unwrap_or_default()
}

/// Events (events.k8s.io/v1, as kube-rs' recorder writes them) with this reason in the case's namespace.
pub(crate) async fn events_with_reason(c: &Case, reason: &str) -> Result<Vec<Value>> {
    let ar = kube::api::ApiResource::erase::<k8s_openapi::api::events::v1::Event>(&());
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(c.client.clone(), &c.ns, &ar);
    let list = api.list(&Default::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .filter(|e| e["reason"] == reason)
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_from_a_secret_holds_promotion_until_the_workflow_completes() -> Result<()> {
    let c = case("gateok").await?;
    let v1 = deploy_first(&c, "pay", json!({})).await?;
    let secret_input =
        r#"{"waitForSignal": true, "outcome": "succeed", "token": "gate-secret-7f3a"}"#;
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), &c.ns);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "gate-input"}, "stringData": {"input.json": secret_input}}))?,
        )
        .await?;
    let gate = json!({"workflowType": "gate", "inputFrom": {"secretKeyRef": {"name": "gate-input", "key": "input.json"}}});
    c.apply_twd(
        "pay",
        "v2",
        json!({"strategy": "AllAtOnce", "gate": gate}),
        json!({}),
    )
    .await?;
    let twd = c
        .wait_twd("pay", "gate running", T, |t| {
            condition_is(t, "Progressing", "True", "WaitingForGate")
                && gate_workflows(t)
                    .iter()
                    .any(|g| format!("{:?}", g.status) == "Running")
        })
        .await?;
    let v2 = target_build(&twd).context("target")?;
    let gates = gate_workflows(&twd);
    ensure!(gates.len() == 1, "one gate per task queue, got {gates:?}");
    ensure!(gates[0].task_queue == c.task_queue);
    let temporal = c.temporal().await?;
    let dep_name = c.temporal_deployment_name("pay");
    let state = describe_soon(&temporal, &dep_name).await?;
    assert_eq!(
        state.routing.current_build_id.as_deref(),
        Some(v1.as_str()),
        "promoted before the gate completed"
    );

    // The gate completes: v2 is promoted.
    c.temporal_cli(&[
        "workflow",
        "signal",
        "--workflow-id",
        &gates[0].workflow_id,
        "--name",
        "finish",
    ])
    .await?;
    let twd = c
        .wait_twd("pay", "v2 Current after the gate", T, |t| {
            is_ready(t) && current_build(t).as_deref() == Some(v2.as_str())
        })
        .await?;
    let state = describe_soon(&temporal, &dep_name).await?;
    assert_eq!(state.routing.current_build_id.as_deref(), Some(v2.as_str()));

    // The Secret's content never shows up in status or events.
    let status = serde_json::to_string(&twd.status)?;
    ensure!(
        !status.contains("gate-secret-7f3a"),
        "secret gate input leaked into status"
    );
    let ar = kube::api::ApiResource::erase::<k8s_openapi::api::events::v1::Event>(&());
    let events: Api<kube::api::DynamicObject> = Api::namespaced_with(c.client.clone(), &c.ns, &ar);
    let all = serde_json::to_string(&events.list(&Default::default()).await?.items)?;
    ensure!(
        !all.contains("gate-secret-7f3a"),
        "secret gate input leaked into events"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_gate_stalls_the_rollout_and_a_new_build_starts_over() -> Result<()> {
    let c = case("gatefail").await?;
    let v1 = deploy_first(&c, "pay", json!({})).await?;
    let gate = |outcome: &str| json!({"workflowType": "gate", "input": {"outcome": outcome}});
    apply_v2_with_a_failing_gate_and_wait_for_stalled(&c).await?;
    check_no_promotion_and_one_warning(&c, &v1).await?;

    // A new build (spec change) starts over with a new gate that passes.
    c.apply_twd(
        "pay",
        "v3",
        json!({"strategy": "AllAtOnce", "gate": gate("succeed")}),
        json!({}),
    )
    .await?;
    let twd = c
        .wait_twd("pay", "v3 Current", T, |t| {
            is_ready(t) && current_build(t).is_some_and(|b| b != v1)
        })
        .await?;
    ensure!(condition(&twd, "Stalled").is_some_and(|c| c.status == "False"));
    Ok(())
}

/// v2's gate fails: the rollout is Stalled with a message naming the gate workflow, and GitOps
/// tools see a failure, not a rollout in progress.
async fn apply_v2_with_a_failing_gate_and_wait_for_stalled(c: &Case) -> Result<()> {
    // The failing gate reads its input from a ConfigMap (the other gate tests use a Secret and
    // inline input), so every input source runs under the chart's RBAC.
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(c.client.clone(), &c.ns);
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "gate-fail"}, "data": {"input.json": r#"{"outcome": "fail"}"#}}))?,
        )
        .await?;
    let failing = json!({"workflowType": "gate", "inputFrom": {"configMapKeyRef": {"name": "gate-fail", "key": "input.json"}}});
    c.apply_twd(
        "pay",
        "v2",
        json!({"strategy": "AllAtOnce", "gate": failing}),
        json!({}),
    )
    .await?;
    let twd = c
        .wait_twd("pay", "GateWorkflowFailed", T, |t| {
            condition_is(t, "Stalled", "True", "GateWorkflowFailed")
        })
        .await?;
    ensure!(
        condition_is(&twd, "Progressing", "False", "GateWorkflowFailed"),
        "{:?}",
        twd.status
    );
    let gates = gate_workflows(&twd);
    let id = &gates.first().context("gate listed in status")?.workflow_id;
    let msg = condition(&twd, "Stalled")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    ensure!(
        msg.contains(id.as_str()),
        "message does not name the workflow {id}: {msg}"
    );
    // GitOps tools see a failure, not a rollout in progress.
    let live = serde_json::to_value(&twd)?;
    let (k, kmsg) = test_harness::gitops::kstatus(&live);
    ensure!(
        k == test_harness::gitops::Status::Failed,
        "kstatus {k:?}: {kmsg}"
    );
    let (health, hmsg) = test_harness::gitops::argocd_health(&live);
    ensure!(
        health == "Degraded" && hmsg.contains(id.as_str()),
        "ArgoCD {health}: {hmsg}"
    );
    Ok(())
}

/// Exactly one Warning event, and no promotion, over several reconciles.
async fn check_no_promotion_and_one_warning(c: &Case, v1: &str) -> Result<()> {
    let temporal = c.temporal().await?;
    let dep_name = c.temporal_deployment_name("pay");
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let state = describe_soon(&temporal, &dep_name).await?;
        ensure!(
            state.routing.current_build_id.as_deref() == Some(v1),
            "a failed gate was promoted"
        );
        ensure!(
            state.routing.ramping_build_id.is_none(),
            "a failed gate was ramped"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let warnings = eventually("GateWorkflowFailed event", T, || async {
        let e = events_with_reason(c, "GateWorkflowFailed").await?;
        Ok((!e.is_empty()).then_some(e))
    })
    .await?;
    ensure!(
        warnings.len() == 1,
        "want one GateWorkflowFailed event, got {}",
        warnings.len()
    );
    ensure!(warnings[0]["type"] == "Warning");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reverting_within_the_window_rolls_back_without_a_ramp() -> Result<()> {
    let c = case("rollback").await?;
    let v1 = deploy_first(&c, "quotes", json!({})).await?;
    c.apply_twd("quotes", "v2", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    c.wait_twd("quotes", "v2 Current", T, |t| {
        is_ready(t) && current_build(t).is_some_and(|b| b != v1)
    })
    .await?;

    // Revert to v1 under a slow Progressive strategy: a rollback skips the ramp.
    let rec = c.record("quotes").await?;
    let slow = json!({"strategy": "Progressive", "steps": [{"rampPercentage": 10, "pauseDuration": "5m"}]});
    c.apply_twd("quotes", "v1", slow, json!({})).await?;
    c.wait_twd("quotes", "v1 Current again", T, |t| {
        is_ready(t) && current_build(t).as_deref() == Some(v1.as_str())
    })
    .await?;
    rec.catch_up().await?;
    let timed = rec.timed_history();
    let (samples, _) = rec.finish().await?;
    ensure!(
        samples
            .iter()
            .all(|s| s.temporal.routing.ramping_build_id.as_deref() != Some(v1.as_str())),
        "rollback ramped in Temporal"
    );
    let target_is_v1 = |v: &Value| {
        v.pointer("/status/targetVersion/buildID")
            .and_then(Value::as_str)
            == Some(v1.as_str())
    };
    ensure!(
        timed.iter().all(|(_, v)| !target_is_v1(v)
            || v.pointer("/status/targetVersion/rampPercentage")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                == 0.0),
        "rollback ramped in status"
    );
    // Current again within 2 s of v1's workers being ready.
    let healthy = timed
        .iter()
        .find(|(_, v)| {
            target_is_v1(v)
                && v.pointer("/status/targetVersion/readyReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    > 0
        })
        .map(|(t, _)| *t)
        .context("v1 never reported healthy")?;
    let current = timed
        .iter()
        .find(|(_, v)| {
            v.pointer("/status/currentVersion/buildID")
                .and_then(Value::as_str)
                == Some(v1.as_str())
        })
        .map(|(t, _)| *t)
        .context("v1 never reported Current")?;
    let took = current.saturating_duration_since(healthy);
    ensure!(
        took <= Duration::from_secs(2),
        "rollback took {took:?} after v1 was healthy"
    );
    eventually("RolledBack event", T, || async {
        Ok((!events_with_reason(&c, "RolledBack").await?.is_empty()).then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_build_id_turns_pod_changes_into_rolling_updates() -> Result<()> {
    let c = case("custom").await?;
    let release1 = json!({"workerOptions": {"customBuildID": "release-1"}});
    let v1 = deploy_first(&c, "ship", release1.clone()).await?;
    assert_eq!(v1, "release-1");
    let dep_name = deployment_of("ship", "release-1");
    let before = c.deployments().get(&dep_name).await?;

    // Image change under the same ID: the same Deployment gets the new template.
    c.apply_twd(
        "ship",
        "v1-patched",
        json!({"strategy": "AllAtOnce"}),
        release1,
    )
    .await?;
    let after = eventually("Deployment template updated in place", T, || async {
        let d = c.deployments().get(&dep_name).await?;
        let image = d
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|p| p.containers.first())
            .and_then(|c| c.image.clone());
        Ok((image.as_deref() == Some("registry.example/worker:v1-patched")).then_some(d))
    })
    .await?;
    assert_eq!(
        after.metadata.uid, before.metadata.uid,
        "a new Deployment was created instead of an update"
    );
    let temporal = c.temporal().await?;
    let state = describe_soon(&temporal, &c.temporal_deployment_name("ship")).await?;
    assert_eq!(
        state.versions.len(),
        1,
        "an in-place update must not create a Temporal version"
    );
    c.wait_twd("ship", "Ready after the rolling update", T, is_ready)
        .await?;

    // A new custom ID is a new version.
    c.apply_twd(
        "ship",
        "v1-patched",
        json!({"strategy": "AllAtOnce"}),
        json!({"workerOptions": {"customBuildID": "release-2"}}),
    )
    .await?;
    c.wait_twd("ship", "release-2 Current", T, |t| {
        is_ready(t) && current_build(t).as_deref() == Some("release-2")
    })
    .await?;
    ensure!(
        c.deployments()
            .get_opt(&deployment_of("ship", "release-2"))
            .await?
            .is_some()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_change_rolls_every_live_version() -> Result<()> {
    let c = case("conndrift").await?;
    let v1 = deploy_first(&c, "feed", json!({})).await?;
    // Keep two versions live: v2 waits for a human.
    c.apply_twd("feed", "v2", json!({"strategy": "Manual"}), json!({}))
        .await?;
    let twd = c
        .wait_twd("feed", "v2 waiting for promotion", T, |t| {
            condition_is(t, "Ready", "False", "WaitingForPromotion")
        })
        .await?;
    let v2 = target_build(&twd).context("target")?;
    let port = c
        .env
        .temporal_address
        .rsplit(':')
        .next()
        .context("port")?
        .to_string();
    let new_address = format!("localhost:{port}");
    c.apply_connection("temporal", &new_address).await?;
    for build in [&v1, &v2] {
        let dep = deployment_of("feed", build);
        eventually(&format!("{dep} rolled to the new address"), T, || async {
            let d = c.deployments().get(&dep).await?;
            Ok((env_of(&d).get("TEMPORAL_ADDRESS") == Some(&new_address)).then_some(()))
        })
        .await?;
    }
    // Workers restarted from the new env still serve: v1 stays Current and healthy.
    c.wait_twd("feed", "still healthy after the roll", T, |t| {
        current_build(t).as_deref() == Some(v1.as_str())
            && condition_is(t, "Ready", "False", "WaitingForPromotion")
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_routing_manager_pauses_the_rollout_until_released() -> Result<()> {
    let c = case("manager").await?;
    let v1 = deploy_first(&c, "risk", json!({})).await?;
    let dep_name = c.temporal_deployment_name("risk");
    c.apply_twd("risk", "v2", json!({"strategy": "Progressive", "steps": [{"rampPercentage": 20, "pauseDuration": "4s"}]}), json!({}))
        .await?;
    let twd = c
        .wait_twd("risk", "v2 ramping", T, |t| {
            condition_is(t, "Progressing", "True", "Ramping")
        })
        .await?;
    let v2 = target_build(&twd).context("target")?;
    c.temporal_cli(&[
        "worker",
        "deployment",
        "manager-identity",
        "set",
        "--deployment-name",
        &dep_name,
        "--manager-identity",
        "alice",
        "--yes",
    ])
    .await?;
    let twd = c
        .wait_twd("risk", "RoutingManagedElsewhere", T, |t| {
            condition_is(t, "Progressing", "False", "RoutingManagedElsewhere")
        })
        .await?;
    let msg = condition(&twd, "Progressing")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    ensure!(
        msg.contains("alice"),
        "message does not name the owner: {msg}"
    );
    let temporal = c.temporal().await?;
    let state = describe_soon(&temporal, &dep_name).await?;
    assert_eq!(
        state.routing.current_build_id.as_deref(),
        Some(v1.as_str()),
        "promoted while someone else manages routing"
    );

    c.temporal_cli(&[
        "worker",
        "deployment",
        "manager-identity",
        "unset",
        "--deployment-name",
        &dep_name,
        "--yes",
    ])
    .await?;
    c.wait_twd("risk", "v2 Current after release", T, |t| {
        is_ready(t) && current_build(t).as_deref() == Some(v2.as_str())
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_cleans_temporal_and_the_connection_waits_for_its_users() -> Result<()> {
    let c = case("delete").await?;
    deploy_first(&c, "gone", json!({})).await?;
    let conns: Api<TemporalConnection> =
        TemporalConnection::api(c.client.clone(), &c.ns, KindSet::Seed);
    let conn = conns.get("temporal").await?;
    ensure!(
        conn.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "temporal.io/delete-protection"),
        "Connection in use lacks the finalizer"
    );

    // The Connection is in use: deleting it only marks it.
    conns.delete("temporal", &DeleteParams::default()).await?;
    let conn = conns.get("temporal").await?;
    ensure!(conn.metadata.deletion_timestamp.is_some());

    c.twds().delete("gone", &DeleteParams::default()).await?;
    eventually("TWD gone", T, || async {
        Ok(c.twds().get_opt("gone").await?.is_none().then_some(()))
    })
    .await?;
    let temporal = c.temporal().await?;
    let state = describe_soon(&temporal, &c.temporal_deployment_name("gone")).await?;
    ensure!(
        !state.exists,
        "worker deployment still in Temporal: {state:?}"
    );
    eventually("Connection released and gone", T, || async {
        Ok(conns.get_opt("temporal").await?.is_none().then_some(()))
    })
    .await?;
    ensure!(
        c.deployments()
            .list(&Default::default())
            .await?
            .items
            .is_empty(),
        "versioned Deployments left behind"
    );
    Ok(())
}
