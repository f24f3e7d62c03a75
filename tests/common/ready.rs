//! The `Ready` condition's reason of a worker deployment, as tests wait on it.

use temporal_worker_controller::api::TemporalWorkerDeployment;

/// The reason of `Ready`, or "" before the controller wrote one.
pub fn reason(t: &TemporalWorkerDeployment) -> String {
    t.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}
