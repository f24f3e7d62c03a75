//! Creating the target's Deployment and keeping active versions at `spec.replicas`.
//!
//! With `replicas: None` an autoscaler owns active versions, so they are never re-scaled,
//! with one exception: a target sitting at 0 (sunset earlier, now rolled back to) goes to 1
//! so that it can register and serve. Draining versions are never scaled by this module.
//!
//! A version an HPA or KEDA ScaledObject targets (`ObservedDeployment::autoscaled`) is never
//! re-scaled here whatever `spec.replicas` says, with the same wake-from-zero exception: the
//! only other replicas write it ever gets is the scale to 0 at sunset (`sunset.rs`).

use crate::planner::model::{CreateDeployment, ScaleDeployment, ScaleReason};
use crate::planner::view::{Role, View};

/// The target's Deployment, when it has to be created. The version-limit guard is applied by
/// the caller.
pub fn create(view: &View) -> Option<CreateDeployment> {
    if view.target_deployment.is_some() || view.target_deleting.is_some() {
        return None;
    }
    Some(CreateDeployment {
        build_id: view.target.to_string(),
        replicas: view.input.desired.replicas,
    })
}

/// Scale target, current and a left-over ramping version to the desired replicas.
pub fn active(view: &View) -> Vec<ScaleDeployment> {
    let desired = view.input.desired.replicas;
    let mut out = Vec::new();
    for d in view.input.deployments.iter().filter(|d| !d.deleting) {
        let want = match (view.role(&d.build_id), desired) {
            // An autoscaler cannot wake a Deployment at 0 (an HPA switches itself off there),
            // so a target at 0 still goes to 1; the autoscaler takes over from there.
            (Role::Target, _) if d.autoscaled && d.replicas == Some(0) => 1,
            _ if d.autoscaled => continue,
            (Role::Target | Role::Current | Role::Ramping, Some(n)) if d.replicas != Some(n) => n,
            (Role::Target, None) if d.replicas == Some(0) => 1,
            _ => continue,
        };
        out.push(ScaleDeployment {
            name: d.name.clone(),
            build_id: d.build_id.clone(),
            replicas: want,
            reason: ScaleReason::Desired,
            record_scaled_down_at: None,
        });
    }
    out
}
