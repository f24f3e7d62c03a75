//! The Progressive rollout scenario (issue 27 items 1 and 2): N objects rolled out at v1, then
//! changed to v2 one after another, [`STAGGER`] apart (so that each step deadline is a
//! rollout's own, not one burst of N), with two steps (25 %, 50 %) of [`pause`](crate::ground::pause) each (the Go
//! controller's CRD refuses pauses under 30 s). Each step change and the promotion are read
//! from Temporal's own timestamps (`routingChangedTime`, `currentSinceTime` of the v2 version),
//! so lateness = step change − (previous change + pause), and overhead = promotion − apply −
//! the sum of pauses.
//!
//! A step's time is read [`SETTLED`] after the object's status showed the change: a read right
//! after a routing write meets Temporal's busy deployment workflow, and a step lasts far longer.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use temporalio_client::Connection;
use temporalio_client::grpc::WorkflowService as _;
use temporalio_common::protos::temporal::api::deployment::v1::worker_deployment_info::WorkerDeploymentVersionSummary;
use temporalio_common::protos::temporal::api::deployment::v1::{
    WorkerDeploymentInfo, WorkerDeploymentVersion, WorkerDeploymentVersionInfo,
};
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeWorkerDeploymentVersionRequest;

use crate::ground::{now_ms, of_role, pause, temporal_of, ts_ms};
use crate::rig::Rig;

/// Between two objects' changes to v2 (this scenario and the promotion one).
pub const STAGGER: Duration = Duration::from_millis(1500);
const SETTLED: Duration = Duration::from_secs(3);
/// Every rollout must finish within this (two pauses plus a generous margin).
const ROLLOUT_DEADLINE: Duration = Duration::from_secs(600);

/// One object's v2 routing, as Temporal timestamped it (ms since the epoch).
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// Ramp percentage → when Temporal set it.
    pub steps: BTreeMap<u32, f64>,
    pub promoted: Option<f64>,
}

/// What the rollout measured, per object.
#[derive(Clone, Debug, Default)]
pub struct RolloutTimes {
    /// Step 2 (50 %) after step 1's deadline (ms).
    pub step_late_ms: Vec<f64>,
    /// Promotion after step 2's deadline (ms).
    pub promote_late_ms: Vec<f64>,
    /// Apply → promoted, minus both pauses (s).
    pub overhead_s: Vec<f64>,
}

impl RolloutTimes {
    /// `applied_ms`: when each object was changed to v2, by name.
    pub fn from_timelines(
        applied_ms: &BTreeMap<String, f64>,
        timelines: &BTreeMap<String, Timeline>,
    ) -> Self {
        let pause = pause().as_secs_f64() * 1e3;
        let mut out = RolloutTimes::default();
        for (name, t) in timelines {
            let (Some(s25), Some(s50), Some(done), Some(applied_ms)) = (
                t.steps.get(&25),
                t.steps.get(&50),
                t.promoted,
                applied_ms.get(name),
            ) else {
                continue;
            };
            out.step_late_ms.push(s50 - (s25 + pause));
            out.promote_late_ms.push(done - (s50 + pause));
            out.overhead_s.push((done - applied_ms - 2.0 * pause) / 1e3);
        }
        out
    }
}

/// The Current build of a worker deployment as Temporal described it.
pub fn current_build(info: &WorkerDeploymentInfo) -> Option<&str> {
    let current = info
        .routing_config
        .as_ref()?
        .current_deployment_version
        .as_ref()?;
    Some(current.build_id.as_str())
}

/// The summary of `build` among the described worker deployment's versions.
pub fn summary_of<'a>(
    info: &'a WorkerDeploymentInfo,
    build: &str,
) -> Option<&'a WorkerDeploymentVersionSummary> {
    info.version_summaries.iter().find(|s| {
        s.deployment_version
            .as_ref()
            .is_some_and(|v| v.build_id == build)
    })
}

/// Changes each object of `indices` to v2, one every [`STAGGER`]; returns when each was
/// applied (ms).
pub async fn apply_staggered(
    client: &kube::Client,
    indices: std::ops::Range<usize>,
    at_tag: impl Fn(usize, &str) -> Value,
) -> Result<BTreeMap<String, f64>> {
    let mut applied = BTreeMap::new();
    for i in indices {
        let wd = at_tag(i, "v2");
        let name = wd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        applied.insert(name, now_ms());
        crate::ground::apply_all(client, std::iter::once(wd)).await?;
        tokio::time::sleep(STAGGER).await;
    }
    Ok(applied)
}

/// Follows the status of every object of `role` until each promoted its v2 (not one of
/// `v1_builds`), reading Temporal once per routing change; returns the timelines and how many
/// reads that took.
pub async fn record(
    rig: &mut Rig,
    v1_builds: &BTreeMap<String, String>,
    role: &str,
) -> Result<(BTreeMap<String, Timeline>, u64)> {
    // The probe's own reads, taken out of the controller's Temporal count afterwards.
    let mut reads = 0u64;
    let conn = rig.temporal.connect("scale-probe").await?;
    let api = crate::ground::worker_deployments(&rig.client);
    let mut timelines: BTreeMap<String, Timeline> = v1_builds
        .keys()
        .map(|n| (n.clone(), Timeline::default()))
        .collect();
    // Per object: the routing its status shows, since when, and whether Temporal was read.
    let mut seen: BTreeMap<String, (String, Instant, bool)> = BTreeMap::new();
    let begin = Instant::now();
    loop {
        rig.controller.check_alive()?;
        for obj in api.list(&of_role(role)).await?.items {
            let name = obj.metadata.name.clone().unwrap_or_default();
            if !v1_builds.contains_key(&name) {
                continue;
            }
            let Some((build, routing)) = v2_routing(&obj.data["status"], v1_builds.get(&name))
            else {
                continue;
            };
            let entry = seen
                .entry(name.clone())
                .or_insert_with(|| (routing.clone(), Instant::now(), false));
            if entry.0 != routing {
                *entry = (routing, Instant::now(), false);
            }
            if entry.2 || entry.1.elapsed() < SETTLED {
                continue;
            }
            reads += 1;
            let (namespace, deployment) = temporal_of(&name);
            let Some(info) = version_info(&conn, &namespace, &deployment, &build).await else {
                continue;
            };
            entry.2 = true;
            note(timelines.get_mut(&name).context("timeline")?, &info);
        }
        if timelines.values().all(|t| t.promoted.is_some()) {
            return Ok((timelines, reads));
        }
        if begin.elapsed() > ROLLOUT_DEADLINE {
            let done = timelines.values().filter(|t| t.promoted.is_some()).count();
            bail!(
                "{done} of {} rollouts promoted v2 within {ROLLOUT_DEADLINE:?}",
                timelines.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn note(t: &mut Timeline, info: &WorkerDeploymentVersionInfo) {
    if let Some(since) = info.current_since_time.as_ref() {
        t.promoted = Some(ts_ms(since));
    } else if info.ramp_percentage > 0.0
        && let Some(changed) = info.routing_changed_time.as_ref()
    {
        t.steps
            .entry(info.ramp_percentage.round() as u32)
            .or_insert(ts_ms(changed));
    }
}

/// The target build and a signature of the routing the status shows, once the target is not
/// the object's v1 build.
fn v2_routing(status: &Value, v1: Option<&String>) -> Option<(String, String)> {
    let target = status["targetVersion"]["buildID"]
        .as_str()
        .filter(|b| !b.is_empty())?;
    if Some(target) == v1.map(String::as_str) {
        return None;
    }
    let routing = format!(
        "{} {}",
        status["currentVersion"]["buildID"].as_str().unwrap_or(""),
        status["targetVersion"]["rampPercentage"]
    );
    Some((target.to_string(), routing))
}

/// `DescribeWorkerDeploymentVersion`, or `None` while Temporal does not know it (or is busy).
pub async fn version_info(
    conn: &Connection,
    namespace: &str,
    deployment: &str,
    build: &str,
) -> Option<WorkerDeploymentVersionInfo> {
    #[allow(deprecated)]
    let req = DescribeWorkerDeploymentVersionRequest {
        namespace: namespace.into(),
        deployment_version: Some(WorkerDeploymentVersion {
            deployment_name: deployment.into(),
            build_id: build.into(),
        }),
        ..Default::default()
    };
    conn.clone()
        .describe_worker_deployment_version(temporalio_client::tonic::Request::new(req))
        .await
        .ok()?
        .into_inner()
        .worker_deployment_version_info
}

/// The current build (its v1) of every object of `role`, by name.
pub async fn current_builds(client: &kube::Client, role: &str) -> Result<BTreeMap<String, String>> {
    let api = crate::ground::worker_deployments(client);
    Ok(api
        .list(&of_role(role))
        .await?
        .items
        .into_iter()
        .filter_map(|o| {
            let build = o.data["status"]["currentVersion"]["buildID"]
                .as_str()?
                .to_string();
            Some((o.metadata.name?, build))
        })
        .collect())
}

/// `k` Progressive rollouts beside a fleet (issue 41): objects `first..first + k`, labelled
/// `beside`, rolled out at v1 (live workers), then changed to v2 [`STAGGER`] apart and followed
/// as in the rollout scenario. Returns their times and the probe's own Temporal reads.
///
/// They start once kube-controller-manager has caught up with the fleet (a Pod for every
/// Deployment): at its default client rate (20 requests/s per controller) the rig's
/// kube-controller-manager needs about 10 minutes for the ReplicaSets, statuses and Pods of
/// 5,000 Deployments, and a rollout created before that waits in its queue for its first Pod.
pub async fn beside(rig: &mut Rig, first: usize, k: usize) -> Result<(RolloutTimes, u64)> {
    let waited = kube_controller_manager_caught_up(&rig.client).await?;
    println!(
        "beside: kube-controller-manager caught up with the fleet after {:.0} s more",
        waited.as_secs_f64()
    );
    let indices = first..first + k;
    let at = |i: usize, tag: &str| {
        crate::ground::with_role(crate::ground::progressive(i, tag), "beside")
    };
    crate::ground::apply_all(&rig.client, indices.clone().map(|i| at(i, "v1"))).await?;
    let api = crate::ground::worker_deployments(&rig.client);
    let begin = Instant::now();
    loop {
        rig.controller.check_alive()?;
        let items = api.list(&of_role("beside")).await?.items;
        let current = items
            .iter()
            .filter(|o| {
                crate::ground::reached_state(crate::ground::Scenario::Rollout, &o.data["status"])
            })
            .count();
        if current >= k {
            break;
        }
        if begin.elapsed() > ROLLOUT_DEADLINE {
            bail!(
                "{current} of {k} rollouts beside the fleet reached v1 within {ROLLOUT_DEADLINE:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let v1 = current_builds(&rig.client, "beside").await?;
    let applied = apply_staggered(&rig.client, indices, at).await?;
    let (timelines, reads) = record(rig, &v1, "beside").await?;
    Ok((RolloutTimes::from_timelines(&applied, &timelines), reads))
}

/// Waits until there are as many Pods as Deployments (each object of a fleet has one replica):
/// kube-controller-manager has worked through the fleet. Returns how long that took.
async fn kube_controller_manager_caught_up(client: &kube::Client) -> Result<Duration> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;
    const DEADLINE: Duration = Duration::from_secs(1800);
    // One item and the server's count of the rest: no list of thousands.
    let count = |meta: &kube::api::ListMeta, items: usize| {
        items as i64 + meta.remaining_item_count.unwrap_or_default()
    };
    let one = kube::api::ListParams::default().limit(1);
    let begin = Instant::now();
    loop {
        let deployments = kube::Api::<Deployment>::all(client.clone())
            .list(&one)
            .await?;
        let pods = kube::Api::<Pod>::all(client.clone()).list(&one).await?;
        let (d, p) = (
            count(&deployments.metadata, deployments.items.len()),
            count(&pods.metadata, pods.items.len()),
        );
        if p >= d {
            return Ok(begin.elapsed());
        }
        if begin.elapsed() > DEADLINE {
            bail!("kube-controller-manager made {p} Pods for {d} Deployments within {DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}
