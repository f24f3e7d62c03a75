//! The facts every rule asks about, derived once per reconcile from the plan input.

use crate::planner::model::{ObservedDeployment, PlanInput};
use crate::temporal::state::{TemporalVersionStatus, VersionState};

/// Ramp percentages are whole numbers in the spec but `f32` on the wire: compare loosely.
pub fn same_percentage(a: f32, b: f32) -> bool {
    (a - b).abs() < 0.01
}

/// What a Deployment is to the rollout. Routing (current/ramping) wins over Temporal's
/// per-version status, and the target wins over everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Target,
    /// Routing's current version (not the target).
    Current,
    /// Routing's ramping version (not the target): an older ramp left over after the spec changed.
    Ramping,
    /// Any other build, with Temporal's status (`None` = Temporal does not know it).
    Old(Option<TemporalVersionStatus>),
}

pub struct View<'a> {
    pub input: &'a PlanInput,
    pub target: &'a str,
    /// The target's Deployment, unless it is being deleted.
    pub target_deployment: Option<&'a ObservedDeployment>,
    /// A target Deployment that is being deleted (blocks re-creation until it is gone).
    pub target_deleting: Option<&'a ObservedDeployment>,
    /// Temporal's record of the target; `None` = not registered.
    pub target_version: Option<&'a VersionState>,
    pub current: Option<&'a str>,
    pub ramping: Option<&'a str>,
}

impl<'a> View<'a> {
    pub fn new(input: &'a PlanInput) -> Self {
        let target = input.desired.build_id.as_str();
        let mut target_deployment = None;
        let mut target_deleting = None;
        for d in input.deployments.iter().filter(|d| d.build_id == target) {
            if d.deleting {
                target_deleting = target_deleting.or(Some(d));
            } else {
                target_deployment = target_deployment.or(Some(d));
            }
        }
        let routing = &input.temporal.routing;
        Self {
            input,
            target,
            target_deployment,
            target_deleting,
            target_version: input.temporal.version(target),
            current: routing
                .current_build_id
                .as_deref()
                .filter(|b| !b.is_empty()),
            ramping: routing
                .ramping_build_id
                .as_deref()
                .filter(|b| !b.is_empty()),
        }
    }

    pub fn target_is_current(&self) -> bool {
        self.current == Some(self.target)
    }

    /// The target's ramp percentage when it is the ramping version.
    pub fn target_ramp(&self) -> Option<f32> {
        (self.ramping == Some(self.target)).then_some(self.input.temporal.routing.ramp_percentage)
    }

    /// Available and serving: a Deployment scaled to zero can still report Available, and
    /// routing traffic to it would send workflows to nobody.
    pub fn target_healthy(&self) -> bool {
        self.target_deployment
            .is_some_and(|d| d.healthy_since.is_some() && d.ready_replicas > 0)
    }

    /// Task queues of the Current version that the target does not poll (empty when either
    /// list is unknown): routing the target would leave them without a worker.
    pub fn missing_queues(&self) -> Vec<&'a str> {
        let i = self.input;
        if i.target_task_queues.is_empty() {
            return Vec::new();
        }
        i.current_task_queues
            .iter()
            .filter(|q| !i.target_task_queues.contains(q))
            .map(String::as_str)
            .collect()
    }

    /// Registered, Available with ready Pods, and polling every task queue of the Current
    /// version: work may be routed to it.
    pub fn target_routable(&self) -> bool {
        self.target_version.is_some() && self.target_healthy() && self.missing_queues().is_empty()
    }

    pub fn role(&self, build_id: &str) -> Role {
        if build_id == self.target {
            Role::Target
        } else if self.current == Some(build_id) {
            Role::Current
        } else if self.ramping == Some(build_id) {
            Role::Ramping
        } else {
            Role::Old(self.input.temporal.version(build_id).map(|v| v.status))
        }
    }

    /// `ready/desired` for messages.
    pub fn target_readiness(&self) -> String {
        match self.target_deployment {
            Some(d) => format!(
                "{}/{} replicas ready",
                d.ready_replicas,
                d.replicas.unwrap_or(d.status_replicas)
            ),
            None => "no Deployment yet".to_string(),
        }
    }
}
