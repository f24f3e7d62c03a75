//! A changed `connectionRef` (issue 50, the Go controller v1.10's rule from its PR #525): the
//! target and the Current version move to the new Connection; a Draining version keeps the
//! Connection it was created with, so its Pods (and the pinned workflow they serve) stay where
//! they are until the version is gone. Two Connections to the same dev server, told apart by
//! their address (`127.0.0.1:<port>` and `localhost:<port>`).
//!
//! **Mutation** (run 2026-12-02): make `planner::drift::wanted` return the spec's Connection
//! for every role (the earlier "every live version follows"): v1's Deployment is rolled to the
//! new address and the test fails at "v1 kept on its Connection: … was rolled to
//! Some(\"localhost:…\")".

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::json;
use temporal_worker_controller::api::{ANNOTATION_CONNECTION_REF, LABEL_BUILD_ID};

use crate::old_versions::{finish_workflow, roll_and_wait_draining, start_waiting_workflow};
use crate::rollout::deploy_first;
use crate::support::*;

const T: Duration = Duration::from_secs(150);

fn connection_record(d: &Deployment) -> Option<String> {
    d.spec
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(ANNOTATION_CONNECTION_REF)
        .cloned()
}

/// `TEMPORAL_ADDRESS` of every container of every Pod of version `build`.
async fn pod_addresses(c: &Case, build: &str) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &c.ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("{LABEL_BUILD_ID}={build}")))
        .await?;
    let mut out = Vec::new();
    for p in list.items {
        for container in p.spec.iter().flat_map(|s| s.containers.iter()) {
            let env: BTreeMap<_, _> = container
                .env
                .iter()
                .flatten()
                .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
                .collect();
            out.push(env.get("TEMPORAL_ADDRESS").cloned().unwrap_or_default());
        }
    }
    Ok(out)
}

/// v1's Deployment and Pods carry the old Connection (checked on every look until it is gone).
async fn check_on_old(c: &Case, dep: &str, build: &str, old: &str) -> Result<bool> {
    let Some(d) = c.deployments().get_opt(dep).await? else {
        return Ok(false);
    };
    let address = env_of(&d).get("TEMPORAL_ADDRESS").cloned();
    ensure!(
        address.as_deref() == Some(old),
        "v1 kept on its Connection: {dep} was rolled to {address:?}"
    );
    ensure!(
        connection_record(&d).is_some_and(|r| r.ends_with("/temporal")),
        "v1 kept on its Connection: {dep} records {:?}",
        connection_record(&d)
    );
    for a in pod_addresses(c, build).await? {
        ensure!(
            a == old,
            "v1 kept on its Connection: a Pod of {dep} dials {a}"
        );
    }
    Ok(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_ref_change_moves_target_and_current_and_leaves_draining_versions()
-> Result<()> {
    let c = case("connref").await?;
    let old = c.env.temporal_address.clone();
    let port = old.rsplit(':').next().context("port")?;
    let new = format!("localhost:{port}");
    ensure!(new != old, "the two Connections must be told apart");
    c.apply_connection("moved", &new).await?;

    deploy_first(&c, "shift").await?;
    let wf = format!("pinned-{}", c.ns);
    start_waiting_workflow(&c, &wf).await?;
    let (v1, v2, _) = roll_and_wait_draining(&c, "shift", json!({})).await?;
    let v1_dep = deployment_of("shift", &v1);
    let v2_dep = deployment_of("shift", &v2);
    ensure!(
        check_on_old(&c, &v1_dep, &v1, &old).await?,
        "v1 Deployment missing"
    );

    // The spec now names the other Connection (same build: v2 stays the target).
    c.apply_twd(
        "shift",
        "v2",
        json!({"strategy": "AllAtOnce"}),
        json!({"workerOptions": {"connectionRef": {"name": "moved"}}}),
    )
    .await?;
    eventually(
        "v2 (target and Current) rolled to the new Connection",
        T,
        || async {
            let d = c.deployments().get(&v2_dep).await?;
            let moved = env_of(&d).get("TEMPORAL_ADDRESS") == Some(&new)
                && connection_record(&d).is_some_and(|r| r.ends_with("/moved"));
            let pods = pod_addresses(&c, &v2).await?;
            Ok((moved && !pods.is_empty() && pods.iter().all(|a| *a == new)).then_some(()))
        },
    )
    .await?;
    c.wait_twd("shift", "Ready on the new Connection", T, |t| {
        is_ready(t)
            && current_build(t).as_deref() == Some(v2.as_str())
            && t.status
                .as_ref()
                .and_then(|s| s.observed_connection_ref.as_ref())
                .is_some_and(|r| r.name == "moved")
    })
    .await?;
    ensure!(
        check_on_old(&c, &v1_dep, &v1, &old).await?,
        "v1 Deployment missing"
    );

    // v1's workers, still on the old Connection, finish the pinned workflow; v1 drains and
    // goes, never rolled on the way.
    finish_workflow(&c, &wf).await?;
    eventually("v1 gone, on its Connection until then", T, || async {
        Ok((!check_on_old(&c, &v1_dep, &v1, &old).await?).then_some(()))
    })
    .await?;
    let out = c
        .temporal_cli(&["workflow", "describe", "--workflow-id", &wf, "-o", "json"])
        .await?;
    ensure!(
        out.contains("WORKFLOW_EXECUTION_STATUS_COMPLETED"),
        "the pinned workflow did not complete on v1: {out}"
    );
    Ok(())
}
