//! Facts about a TWOR's versions that both the observe and the plan stage need (pure).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;

use crate::api::{LABEL_BUILD_ID, TemporalWorkerDeployment};

/// True for a version whose copies must go: its Deployment is at 0, or the TWD's status says
/// its scale-down is due.
pub fn retiring(d: &Deployment, twd: Option<&TemporalWorkerDeployment>, now: Timestamp) -> bool {
    if d.spec.replicas == Some(0) {
        return true;
    }
    let Some(build) = build_of(d) else {
        return false;
    };
    twd.and_then(|t| t.status.as_ref())
        .into_iter()
        .flat_map(|s| &s.deprecated_versions)
        .any(|v| v.version.build_id == build && v.scaledown_at.as_ref().is_some_and(|t| t.0 <= now))
}

/// Time until the earliest scale-down still ahead, to remove that version's copies on time.
pub fn next_scaledown(twd: Option<&TemporalWorkerDeployment>, now: Timestamp) -> Option<Duration> {
    twd?.status
        .as_ref()?
        .deprecated_versions
        .iter()
        .filter_map(|v| v.scaledown_at.as_ref())
        .filter_map(|t| Duration::try_from(t.0.duration_since(now)).ok())
        .filter(|d| !d.is_zero())
        .min()
}

pub fn build_of(d: &Deployment) -> Option<&str> {
    d.labels().get(LABEL_BUILD_ID).map(String::as_str)
}
