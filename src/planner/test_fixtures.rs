//! Plan inputs and plan readers shared by the planner's per-rule test files.

use std::time::Duration;

use jiff::Timestamp;

use crate::planner::model::{
    DeleteReason, Gate, ObservedDeployment, Plan, PlanInput, RoutingChange, Step, Strategy,
};
use crate::temporal::state::{TemporalVersionStatus as T, VersionState};

pub(super) fn mins(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

pub(super) fn steps(spec: &[(f32, u64)]) -> Strategy {
    Strategy::Progressive(
        spec.iter()
            .map(|&(p, secs)| Step {
                ramp_percentage: p,
                pause: Duration::from_secs(secs),
            })
            .collect(),
    )
}

/// v1 is Current with 3 ready pods; v2 (the target) is registered, Inactive and healthy.
pub(super) fn rollout(strategy: Strategy) -> PlanInput {
    PlanInput::test().strategy(strategy)
}

/// The target is Current; nothing else exists.
pub(super) fn settled() -> PlanInput {
    let mut i = rollout(Strategy::AllAtOnce);
    i.deployments = vec![ObservedDeployment::test("v2", 3)];
    i.temporal.versions = vec![VersionState::test("v2", T::Current)];
    i.temporal.routing.current_build_id = Some("v2".into());
    i
}

pub(super) fn set_ramp(i: &mut PlanInput, build: &str, pct: f32, changed_at: Timestamp) {
    i.temporal.routing.ramping_build_id = Some(build.into());
    i.temporal.routing.ramp_percentage = pct;
    i.temporal.routing.ramping_changed_at = Some(changed_at);
    i.temporal.routing.ramp_percentage_changed_at = Some(changed_at);
    if let Some(v) = i.temporal.versions.iter_mut().find(|v| v.build_id == build) {
        v.status = T::Ramping;
    }
}

pub(super) fn set_current(build: &str) -> Option<RoutingChange> {
    Some(RoutingChange::SetCurrent {
        build_id: build.into(),
    })
}

pub(super) fn set_ramping(build: &str, pct: f32) -> Option<RoutingChange> {
    Some(RoutingChange::SetRamping {
        build_id: build.into(),
        percentage: pct,
    })
}

pub(super) fn scaled(p: &Plan) -> Vec<(&str, i32)> {
    p.scale
        .iter()
        .map(|s| (s.build_id.as_str(), s.replicas))
        .collect()
}

pub(super) fn deleted(p: &Plan) -> Vec<(&str, DeleteReason)> {
    p.delete
        .iter()
        .map(|d| (d.build_id.as_str(), d.reason))
        .collect()
}

/// v2 is Current; v1 is an old version in `v1` state with a Deployment at `replicas`.
pub(super) fn with_old(v1: VersionState, replicas: i32) -> PlanInput {
    let mut i = settled();
    i.deployments.push(ObservedDeployment::test("v1", replicas));
    i.temporal.versions.push(v1);
    i
}

pub(super) fn gated(strategy: Strategy, queues: &[&str]) -> PlanInput {
    let mut i = rollout(strategy);
    i.desired.gate = Some(Gate {
        workflow_type: "Smoke".into(),
    });
    i.target_task_queues = queues.iter().map(|q| q.to_string()).collect();
    i
}
