//! Draining versions left at 0 replicas (issue 26 item 5): a version Temporal reports Draining,
//! with a pinned workflow open, scaled to 0 by hand (as the Go controller v1.8.x can leave it)
//! goes back to its replicas when no autoscaler owns it; when an HPA targets it, the controller
//! leaves it at 0 and says so (Ready message, Warning event, metric).

use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::lifecycle::events_with_reason;
use crate::old_versions::{roll_and_wait_draining, start_waiting_workflow};
use crate::rollout::deploy_first;
use crate::support::*;

const T: Duration = Duration::from_secs(120);

async fn scale_to_zero(c: &Case, deployment: &str) -> Result<()> {
    c.deployments()
        .patch_scale(
            deployment,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await?;
    Ok(())
}

async fn replicas(c: &Case, deployment: &str) -> Result<Option<i32>> {
    Ok(c.deployments().get(deployment).await?.spec.replicas)
}

/// The value of `temporal_worker_controller_draining_versions_at_zero_total{action}`.
async fn counted(c: &Case, action: &str) -> Result<f64> {
    let (_, text) =
        test_harness::loopback_http::get(c.env.http_addr, "/metrics", "text/plain", None).await?;
    let series = format!(
        "temporal_worker_controller_draining_versions_at_zero_total{{action=\"{action}\"}} "
    );
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_version_at_zero_is_woken_or_reported_under_an_autoscaler() -> Result<()> {
    let c = case("drain-zero").await?;
    deploy_first(&c, "ledger").await?;
    start_waiting_workflow(&c, &format!("pinned-{}", c.ns)).await?;
    let (v1, _v2, _) = roll_and_wait_draining(&c, "ledger", json!({})).await?;
    let v1_dep = deployment_of("ledger", &v1);
    c.wait_twd("ledger", "v1's pinned workflow counted", T, |t| {
        t.status.as_ref().is_some_and(|s| {
            s.deprecated_versions
                .iter()
                .any(|d| d.version.build_id == v1 && d.open_pinned_workflows == Some(1))
        })
    })
    .await?;

    // No autoscaler: scaled to 0 by hand, it comes back to spec.replicas (1).
    let woken_before = counted(&c, "scaled_up").await?;
    scale_to_zero(&c, &v1_dep).await?;
    eventually("v1 back to 1 replica", T, || async {
        Ok((replicas(&c, &v1_dep).await? == Some(1)).then_some(()))
    })
    .await?;
    eventually("a DrainingVersionScaledUp event", T, || async {
        Ok((!events_with_reason(&c, "DrainingVersionScaledUp")
            .await?
            .is_empty())
        .then_some(()))
    })
    .await?;
    ensure!(counted(&c, "scaled_up").await? > woken_before);

    // An HPA targets it: the controller does not fight it; it reports instead.
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "metadata": {"name": "ledger-v1"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": v1_dep},
            "minReplicas": 1, "maxReplicas": 2,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]
        }
    }))?;
    Api::<HorizontalPodAutoscaler>::namespaced(c.client.clone(), &c.ns)
        .create(&PostParams::default(), &hpa)
        .await?;
    let held_before = counted(&c, "held_by_autoscaler").await?;
    scale_to_zero(&c, &v1_dep).await?;
    let marker = format!("build ID {v1} is Draining at 0 replicas");
    c.wait_twd("ledger", "Ready names v1 held at 0", T, |t| {
        condition(t, "Ready").is_some_and(|r| r.message.contains(&marker))
    })
    .await?;
    let warnings = events_with_reason(&c, "DrainingVersionAtZero").await?;
    ensure!(warnings.len() == 1, "one Warning: {warnings:?}");
    ensure!(warnings[0]["type"] == "Warning", "{:?}", warnings[0]);
    ensure!(counted(&c, "held_by_autoscaler").await? > held_before);
    ensure!(
        replicas(&c, &v1_dep).await? == Some(0),
        "the controller scaled a version its autoscaler holds"
    );
    Ok(())
}
