//! Creating the target's Deployment and keeping active versions at `spec.replicas`.
//!
//! With `replicas: None` an autoscaler owns active versions, so they are never re-scaled,
//! with one exception: a target sitting at 0 (sunset earlier, now rolled back to) goes to 1
//! so that it can register and serve. Draining versions are never scaled by this module.
//!
//! A version an HPA or KEDA ScaledObject targets (`ObservedDeployment::autoscaled`) is never
//! re-scaled here whatever `spec.replicas` says, with the same wake-from-zero exception: the
//! only other replicas write it ever gets is the scale to 0 at sunset (`sunset.rs`).
//!
//! A Draining version with open pinned workflows at 0 replicas can never drain (inherited
//! from the Go controller v1.8.x, which scales versions to 0 while Temporal's drainage status
//! is still unspecified, or scaled by hand): without an autoscaler it goes back to
//! `spec.replicas` (1 when unset); with one, the controller does not fight it and reports it
//! ([`draining_at_zero`]).

use crate::planner::model::{CreateDeployment, HeldAtZero, ScaleDeployment, ScaleReason};
use crate::planner::view::{Role, View};
use crate::temporal::state::TemporalVersionStatus;

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

/// Draining versions with open pinned workflows and no replicas: scaled back up when no
/// autoscaler owns them, reported when one does. A version whose open workflows were not
/// counted yet is left alone (nothing is guessed).
pub fn draining_at_zero(view: &View) -> (Vec<ScaleDeployment>, Vec<HeldAtZero>) {
    let (mut scale, mut held) = (Vec::new(), Vec::new());
    for d in view.input.deployments.iter().filter(|d| !d.deleting) {
        let Role::Old(Some(TemporalVersionStatus::Draining)) = view.role(&d.build_id) else {
            continue;
        };
        let open = view.input.temporal.version(&d.build_id).and_then(|v| {
            v.pinned
                .as_ref()
                .map(|p| p.count)
                .or(v.open_pinned_workflows)
        });
        let Some(open) = open.filter(|n| *n > 0) else {
            continue;
        };
        if d.replicas != Some(0) {
            continue;
        }
        if d.autoscaled {
            held.push(HeldAtZero {
                build_id: d.build_id.clone(),
                open,
            });
        } else {
            scale.push(ScaleDeployment {
                name: d.name.clone(),
                build_id: d.build_id.clone(),
                replicas: view.input.desired.replicas.unwrap_or(1),
                reason: ScaleReason::DrainingAtZero,
                record_scaled_down_at: None,
            });
        }
    }
    (scale, held)
}

/// The condition message part for versions an autoscaler holds at zero while they drain.
pub fn held_message(held: &[HeldAtZero]) -> String {
    held.iter()
        .map(|h| {
            format!(
                "{} with {} open pinned workflow(s); its autoscaler keeps it there, so they cannot finish: \
                 scale it up or let the autoscaler wake it",
                held_marker(&h.build_id),
                h.open
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The start of a version's part of [`held_message`] (the report stage finds it in the last
/// status to warn once per episode).
pub fn held_marker(build_id: &str) -> String {
    format!("build ID {build_id} is Draining at 0 replicas")
}
