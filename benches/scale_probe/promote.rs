//! The promotion-and-drain scenario (issue 27 item 1, first and third latency): N objects
//! rolled out at v1 (AllAtOnce, `scaledownDelay` [`scaledown_delay`](crate::ground::scaledown_delay)), then changed to v2 one
//! after another, [`rollout::STAGGER`] apart, so that each is a rollout of its own
//! rather than one burst. For each object:
//!
//! - **pollers → SetCurrent**: v2's `currentSinceTime` (Temporal's clock) minus the moment the
//!   kubelet stand-in saw v2's worker polling and reported its Pod Ready (the stand-in's
//!   clock; both are this machine's clock);
//! - **Drained → scaled down**: the audit log's stage timestamp of the controller's write that
//!   set v1's Deployment to 0 replicas, minus (v1's drainage `lastChangedTime`, when Temporal
//!   reported it Drained, + the delay).
//!
//! The delay is longer than our controller's re-check of a Draining version (30 s, the
//! server-side drainage refresh is minutes in production) so that the row measures the wake-up
//! at the deadline, not how soon Drained was noticed.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use kube::api::ListParams;
use serde_json::Value;
use temporalio_common::protos::temporal::api::enums::v1::VersionDrainageStatus;
use test_harness::control_plane::AuditEvent;

use crate::ground::{manifest_at, scaledown_delay, temporal_of};
use crate::measure::AuditMark;
use crate::rig::Rig;
use crate::rollout;

/// Every object must be promoted and its v1 scaled down within this.
const DEADLINE: Duration = Duration::from_secs(600);

/// What the scenario measured, per object.
#[derive(Clone, Debug, Default)]
pub struct PromoteTimes {
    /// v2's Pod Ready (kubelet stand-in) → v2 Current in Temporal (ms).
    pub ready_to_current_ms: Vec<f64>,
    /// v2's Pod Ready → kube-controller-manager's first status write showing v2's Deployment
    /// ready (audit log): the part of the chain both controllers wait for alike (ms).
    pub ready_to_deployment_ms: Vec<f64>,
    /// v1 Drained + delay → v1's Deployment scaled to 0 (audit log) (ms).
    pub drained_to_scaled_ms: Vec<f64>,
}

/// What [`run`] saw, for [`times`].
#[derive(Clone, Debug)]
pub struct Promoted {
    /// v1 builds by object name.
    v1: BTreeMap<String, String>,
    /// v1's scale-down by object name (ms since the epoch, audit clock).
    scaled: BTreeMap<String, f64>,
    /// Where the audit log stood when the first object changed.
    mark: AuditMark,
}

/// Changes every object to v2, one every [`rollout::STAGGER`], and follows them until each
/// promoted v2 and scaled v1 down.
pub async fn run(rig: &mut Rig) -> Result<Promoted> {
    let v1 = rollout::current_builds(&rig.client, "fleet").await?;
    let audit = rig.plane.audit_log_path().to_path_buf();
    let mark = crate::measure::audit_mark(&audit)?;
    rollout::apply_staggered(&rig.client, 0..v1.len(), manifest_at).await?;
    let api = crate::ground::worker_deployments(&rig.client);
    let begin = Instant::now();
    let (mut scaled, mut read_to) = (BTreeMap::new(), mark);
    loop {
        rig.controller.check_alive()?;
        read_to = note_scale_downs(&audit, read_to, &v1, &mut scaled)?;
        let promoted = api
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|o| {
                promoted_past(
                    &o.data["status"],
                    v1.get(o.metadata.name.as_deref().unwrap_or("")),
                )
            })
            .count();
        if promoted >= v1.len() && scaled.len() >= v1.len() {
            return Ok(Promoted { v1, scaled, mark });
        }
        if begin.elapsed() > DEADLINE {
            bail!(
                "within {DEADLINE:?}: {promoted} of {} objects promoted v2, {} scaled v1 down",
                v1.len(),
                scaled.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The status shows a Current build other than `v1`.
pub fn promoted_past(status: &Value, v1: Option<&String>) -> bool {
    let current = status["currentVersion"]["buildID"].as_str().unwrap_or("");
    !current.is_empty() && Some(current) != v1.map(String::as_str)
}

/// Adds to `scaled` the first write of the controller that set a Deployment of each object
/// to 0 replicas, logged after `from`, by object name (audit stage timestamps, ms since the
/// epoch); returns where the log was read to. Only v1's Deployments are scaled to zero in this
/// scenario.
fn note_scale_downs(
    audit: &Path,
    from: AuditMark,
    v1: &BTreeMap<String, String>,
    scaled: &mut BTreeMap<String, f64>,
) -> Result<AuditMark> {
    let (events, read_to) = crate::measure::audit_events_since(audit, from)?;
    for event in events.iter().filter(|e| is_scale_to_zero(e)) {
        let Some(name) = event.object_ref.as_ref().map(|o| o.name.as_str()) else {
            continue;
        };
        let owner = v1.keys().find(|wd| of_object(name, wd));
        if let (Some(owner), Some(at)) = (owner, event.stage_ms()) {
            scaled.entry(owner.clone()).or_insert(at);
        }
    }
    Ok(read_to)
}

/// Whether Deployment `deployment` is one of object `wd`'s versions (`<wd>-<build>`; the
/// objects are `wd-0000`…, so no name is a prefix of another's versions).
fn of_object(deployment: &str, wd: &str) -> bool {
    deployment
        .strip_prefix(wd)
        .is_some_and(|rest| rest.starts_with('-'))
}

/// The first status write showing a v2 Deployment with a ready replica, by Deployment name
/// (audit stage timestamps, ms since the epoch). Only kube-controller-manager writes
/// Deployment status.
fn v2_deployments_ready(audit: &Path, mark: AuditMark) -> Result<BTreeMap<String, f64>> {
    let v2_image = test_harness::manifests::worker_image("v2");
    let mut out = BTreeMap::new();
    for event in crate::measure::audit_events_since(audit, mark)?.0 {
        let Some(body) = event.request_object.as_ref() else {
            continue;
        };
        let status_write = event.resource() == "deployments/status" && event.is_write();
        let ready = body["status"]["readyReplicas"].as_i64().unwrap_or(0) > 0;
        let v2 = body["spec"]["template"]["spec"]["containers"][0]["image"] == v2_image.as_str();
        let name = event.object_ref.as_ref().map(|o| o.name.clone());
        if let (true, true, true, Some(name), Some(at)) =
            (status_write, ready, v2, name, event.stage_ms())
        {
            out.entry(name).or_insert(at);
        }
    }
    Ok(out)
}

fn is_scale_to_zero(event: &AuditEvent) -> bool {
    crate::measure::controller_wrote(event)
        && event
            .object_ref
            .as_ref()
            .is_some_and(|o| o.resource == "deployments")
        && event.requested_replicas() == Some(0)
}

/// Reads Temporal (after the measured window, so the reads count for nobody) and the kubelet
/// stand-in's readiness log, and computes both latencies per object.
pub async fn times(rig: &Rig, promoted: &Promoted) -> Result<PromoteTimes> {
    let Promoted { v1, scaled, mark } = promoted;
    let conn = rig.temporal.connect("scale-probe").await?;
    let ready = rig.kubelet.readiness();
    let deployment_ready = v2_deployments_ready(rig.plane.audit_log_path(), *mark)?;
    let delay = scaledown_delay().as_secs_f64() * 1e3;
    let mut out = PromoteTimes::default();
    for (name, v1_build) in v1 {
        let (namespace, deployment) = temporal_of(name);
        let described =
            test_harness::observe::describe_deployment(&conn, &namespace, &deployment).await?;
        let Some(info) = described.and_then(|d| d.worker_deployment_info) else {
            continue;
        };
        let current = rollout::current_build(&info).unwrap_or_default();
        let v2_ready = ready
            .iter()
            .filter(|r| r.deployment_name == deployment && r.build_id == current)
            .map(|r| crate::ground::system_ms(r.at))
            .reduce(f64::max);
        let current_since = rollout::summary_of(&info, current)
            .and_then(|s| s.current_since_time.as_ref())
            .map(crate::ground::ts_ms);
        if let (Some(ready), Some(since)) = (v2_ready, current_since) {
            out.ready_to_current_ms.push(since - ready);
        }
        let kcm = deployment_ready
            .iter()
            .filter(|(deployment, _)| of_object(deployment, name))
            .map(|(_, at)| *at)
            .reduce(f64::min);
        if let (Some(ready), Some(kcm)) = (v2_ready, kcm) {
            out.ready_to_deployment_ms.push(kcm - ready);
        }
        let drained = rollout::version_info(&conn, &namespace, &deployment, v1_build)
            .await
            .and_then(|i| i.drainage_info)
            .filter(|d| d.status == VersionDrainageStatus::Drained as i32)
            .and_then(|d| d.last_changed_time)
            .map(|t| crate::ground::ts_ms(&t));
        if let (Some(drained), Some(at)) = (drained, scaled.get(name)) {
            out.drained_to_scaled_ms.push(at - (drained + delay));
        }
    }
    Ok(out)
}
