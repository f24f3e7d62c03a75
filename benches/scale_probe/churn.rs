//! The churn scenario (issue 41; what the Go controller's issue #166 describes: thousands of
//! short-lived worker deployments a day): N objects a minute, each with a live worker
//! (AllAtOnce), created one every `60 s / N` and deleted [`LIFETIME`] after its creation, for
//! several minutes. Then the probe waits (at most [`CLEANUP_DEADLINE`] after the last
//! deletion) until nothing of them is left, and reports what is:
//! - in Kubernetes: `WorkerDeployment`s still present (a finalizer that was never removed) and
//!   Deployments in their namespaces (the scenario's namespaces hold nothing else);
//! - in Temporal: worker deployments of deleted objects that `ListWorkerDeployments` still
//!   lists, with the versions `DescribeWorkerDeployment` gives them.
//!
//! Per object: creation → its status shows its version Current, deletion → the object is gone
//! (both read by listing once a second, so to about a second).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, ListParams};
use temporalio_client::grpc::WorkflowService as _;
use temporalio_common::protos::temporal::api::workflowservice::v1::ListWorkerDeploymentsRequest;

use crate::ground::{
    LIFETIME, Scenario, kube_ns, manifest, now_ms, object_name, of_role, reached_state,
};
use crate::rig::Rig;

/// After the last deletion, everything must be gone within this.
const CLEANUP_DEADLINE: Duration = Duration::from_secs(300);
/// How often the objects' statuses are listed.
const LOOK: Duration = Duration::from_secs(1);

/// What the churn measured.
#[derive(Clone, Debug, Default)]
pub struct ChurnTimes {
    /// Objects created (and deleted) in all.
    pub created: usize,
    /// Creation → status shows its version Current (ms), per object that got there.
    pub create_to_current_ms: Vec<f64>,
    /// Deletion → the object is gone from the API server (ms).
    pub delete_to_gone_ms: Vec<f64>,
    /// Last deletion → nothing left in Kubernetes or Temporal (s); `None`: something was left.
    pub cleanup_s: Option<f64>,
    /// What was left at [`CLEANUP_DEADLINE`]: one line each.
    pub left_behind: Vec<String>,
}

/// Churns `per_minute` objects a minute for `minutes` minutes, then waits for the cleanup.
pub async fn run(rig: &mut Rig, per_minute: usize, minutes: u64) -> Result<ChurnTimes> {
    let total = per_minute * minutes as usize;
    let every = Duration::from_secs(60).div_f64(per_minute.max(1) as f64);
    let api = crate::ground::worker_deployments(&rig.client);
    let begin = Instant::now();
    let (mut created, mut deleted) = (BTreeMap::new(), BTreeMap::new());
    let (mut current, mut gone) = (BTreeMap::new(), BTreeMap::new());
    let mut next = 0usize;
    let mut last_look = Instant::now() - LOOK;
    while gone.len() < total {
        rig.controller.check_alive()?;
        let elapsed = begin.elapsed();
        while next < total && every * next as u32 <= elapsed {
            crate::ground::apply_all(
                &rig.client,
                std::iter::once(manifest(Scenario::Churn, next)),
            )
            .await?;
            created.insert(object_name(next), (now_ms(), next));
            next += 1;
        }
        for (name, (_, i)) in &created {
            if deleted.contains_key(name) || begin.elapsed() < every * *i as u32 + LIFETIME {
                continue;
            }
            let namespaced = kube::Api::<kube::api::DynamicObject>::namespaced_with(
                rig.client.clone(),
                &kube_ns(*i),
                &test_harness::go_controller::api_resource("WorkerDeployment"),
            );
            namespaced.delete(name, &DeleteParams::default()).await?;
            deleted.insert(name.clone(), now_ms());
        }
        if last_look.elapsed() >= LOOK {
            last_look = Instant::now();
            let listed = api.list(&of_role("churn")).await?.items;
            let now = now_ms();
            let present: BTreeSet<String> = listed
                .iter()
                .filter_map(|o| o.metadata.name.clone())
                .collect();
            for o in &listed {
                let name = o.metadata.name.clone().unwrap_or_default();
                if reached_state(Scenario::Churn, &o.data["status"])
                    && !current.contains_key(&name)
                    && let Some((at, _)) = created.get(&name)
                {
                    current.insert(name, now - at);
                }
            }
            for (name, at) in &deleted {
                if !present.contains(name) && !gone.contains_key(name) {
                    gone.insert(name.clone(), now - at);
                }
            }
        }
        if next >= total && deleted.len() >= total && gone.len() < total {
            let last = deleted.values().copied().fold(0.0, f64::max);
            if now_ms() - last > CLEANUP_DEADLINE.as_secs_f64() * 1e3 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last_delete = deleted.values().copied().fold(0.0, f64::max);
    let names: BTreeSet<String> = created.keys().cloned().collect();
    let mut left = left_behind(rig, &names, total).await?;
    while !left.is_empty() && now_ms() - last_delete < CLEANUP_DEADLINE.as_secs_f64() * 1e3 {
        tokio::time::sleep(LOOK).await;
        left = left_behind(rig, &names, total).await?;
    }
    Ok(ChurnTimes {
        created: total,
        create_to_current_ms: current.into_values().collect(),
        delete_to_gone_ms: gone.into_values().collect(),
        cleanup_s: left
            .is_empty()
            .then(|| (now_ms() - last_delete).max(0.0) / 1e3),
        left_behind: left,
    })
}

/// What is left of objects `names` (indices `0..total`) in Kubernetes and Temporal, one line
/// each.
async fn left_behind(rig: &Rig, names: &BTreeSet<String>, total: usize) -> Result<Vec<String>> {
    let mut left = Vec::new();
    let (kube_namespaces, temporal_namespaces) = crate::ground::namespaces(total);
    for o in crate::ground::worker_deployments(&rig.client)
        .list(&of_role("churn"))
        .await?
        .items
    {
        left.push(format!(
            "WorkerDeployment {}/{} (finalizers {:?}, deleting since {:?})",
            o.metadata.namespace.unwrap_or_default(),
            o.metadata.name.unwrap_or_default(),
            o.metadata.finalizers.unwrap_or_default(),
            o.metadata.deletion_timestamp.map(|t| t.0.to_string()),
        ));
    }
    for ns in &kube_namespaces {
        let deployments = kube::Api::<Deployment>::namespaced(rig.client.clone(), ns);
        for d in deployments.list(&ListParams::default()).await?.items {
            left.push(format!(
                "Deployment {ns}/{}",
                d.metadata.name.unwrap_or_default()
            ));
        }
    }
    let conn = rig.temporal.connect("scale-probe").await?;
    for ns in &temporal_namespaces {
        let mut token = Vec::new();
        loop {
            let req = ListWorkerDeploymentsRequest {
                namespace: ns.clone(),
                page_size: 1000,
                next_page_token: token,
            };
            let resp = conn
                .clone()
                .list_worker_deployments(temporalio_client::tonic::Request::new(req))
                .await?
                .into_inner();
            for d in resp.worker_deployments {
                let object = d.name.rsplit('/').next().unwrap_or_default();
                if !names.contains(object) {
                    continue;
                }
                let versions = test_harness::observe::describe_deployment(&conn, ns, &d.name)
                    .await?
                    .map(|r| test_harness::observe::listed_build_ids(&r))
                    .unwrap_or_default();
                left.push(format!(
                    "Temporal worker deployment {ns}:{} (versions {versions:?})",
                    d.name
                ));
            }
            if resp.next_page_token.is_empty() {
                break;
            }
            token = resp.next_page_token;
        }
    }
    Ok(left)
}
