//! `spec.adopt`: taking over the plain Deployment that runs a worker's unversioned workers
//! (docs/adopting.md).
//!
//! What decides when Temporal can no longer send the unversioned workers work:
//! - A workflow started on an unversioned worker has no versioning behaviour
//!   (`VERSIONING_BEHAVIOR_UNSPECIFIED`: "an unversioned workflow's task may go to any
//!   unversioned worker polling the task queue", temporalio/api#496). Once its task queue has a
//!   Current version, its next workflow task is sent to that version and the workflow moves
//!   there as an AutoUpgrade workflow does, at the next task (temporalio/api#491,
//!   temporalio/temporal#7796; Temporal's guide "Migrating from Unversioned to Versioned
//!   Workers": keep unversioned workers running during the transition, signal idle workflows to
//!   wake them up and move them). A Pinned workflow never starts on an unversioned worker.
//! - Until that next task completes on a versioned worker the workflow is still unversioned:
//!   an activity or workflow task it already has on an unversioned worker runs there. So the
//!   check is a visibility count, as the sunset's (`super::sunset`): running workflows on the
//!   Current version's workflow task queues with no `TemporalWorkerDeploymentVersion`. At zero
//!   nothing on those queues can still be sent to, or be running on, the unversioned workers.
//!
//! Rules:
//! 1. Nothing is touched while no versioned build is Current (`Waiting`), while a routing change
//!    still propagates, or before a count (`Draining`, looked at again at the drain pace).
//! 2. At a count of zero the Deployment is scaled to 0 replicas; with `afterAdoption: Delete`
//!    it is deleted once its Pods are gone. Scaled up again later (a GitOps re-sync): counted
//!    and scaled to zero again, and reported; a Deployment left at zero is looked at every
//!    [`AT_ZERO_POLL`] for that.
//! 3. An HPA on it is not fought: Kubernetes does not autoscale a Deployment at 0 replicas
//!    (`ScalingActive=False/ScalingDisabled`), so the controller scales it to zero as any
//!    other and names the HPA in the status for the user to remove.
//! 4. A Deployment of this controller's (a versioned one) is refused; a missing one is
//!    reported (`NotFound`), or `Deleted` once this controller deleted it.

use std::time::Duration;

use crate::api::adopt::{AdoptionPhase, AdoptionStatus};
use crate::planner::clock::{DRAIN_POLL, Wake};
use crate::temporal::state::RoutingState;

/// How soon to look again while the Pods of a Deployment to delete terminate.
const TERMINATING_POLL: Duration = Duration::from_secs(2);

/// How often a Deployment left at zero is looked at again while it exists: a GitOps sync that
/// scales it back up is undone within this (the controller does not watch it).
pub const AT_ZERO_POLL: Duration = Duration::from_secs(60);

/// What the adoption decides from: `spec.adopt`, the observed Deployment and count, and
/// Temporal's routing (the planner input's parts, so that this module needs no other).
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub adopt: Option<&'a Adopt>,
    pub observed: Option<&'a Observed>,
    pub routing: &'a RoutingState,
    /// How soon to look again while a routing change propagates (`--fast-poll`).
    pub fast_poll: Duration,
}

/// `spec.adopt`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adopt {
    pub deployment_name: String,
    /// `afterAdoption: Delete`.
    pub delete: bool,
}

/// What the observe stage saw of the adopted Deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// `None`: no Deployment of that name.
    pub deployment: Option<PlainDeployment>,
    /// The Current version's workflow task queues the count was made on.
    pub queues: Vec<String>,
    /// Running unversioned workflows on `queues`; `None`: not counted ([`count_due`] said no,
    /// or the count failed).
    pub open_unversioned: Option<u64>,
    /// The phase the last reconcile recorded (`status.adoption.phase`).
    pub recorded: Option<AdoptionPhase>,
    /// Why the Deployment could not be read (then nothing is decided about it).
    pub unreadable: Option<String>,
}

/// The adopted Deployment as Kubernetes reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlainDeployment {
    pub replicas: Option<i32>,
    /// Pods that still exist (`status.replicas`).
    pub status_replicas: i32,
    /// Labelled as one of this controller's versioned Deployments.
    pub ours: bool,
    pub deleting: bool,
    /// HorizontalPodAutoscalers whose `scaleTargetRef` names it.
    pub autoscalers: Vec<String>,
}

/// The write an adoption wants this reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    ScaleToZero,
    Delete,
}

/// The adoption's state for `status.adoption`, and its write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub deployment_name: String,
    pub phase: AdoptionPhase,
    pub open_unversioned: Option<u64>,
    pub message: String,
    pub action: Option<Action>,
}

/// Whether the observe stage must count unversioned workflows before this plan: a live
/// Deployment of someone else's, not yet done with, while a versioned build is Current and
/// routing has propagated.
pub fn count_due(facts: Facts<'_>) -> bool {
    let (
        Some(adopt),
        Some(Observed {
            deployment: Some(d),
            unreadable: None,
            ..
        }),
    ) = (facts.adopt, facts.observed)
    else {
        return false;
    };
    let done = d.replicas == Some(0) && !adopt.delete;
    !d.ours && !d.deleting && !done && routed(facts.routing)
}

/// A versioned build is Current and the change has reached the task queues.
fn routed(routing: &RoutingState) -> bool {
    routing.current_build_id.is_some() && !routing.update_in_progress
}

/// The adoption's decision (`None` without `spec.adopt`).
pub fn decide(facts: Facts<'_>, wake: &mut Wake) -> Option<Decision> {
    let adopt = facts.adopt?;
    let observed = facts.observed.cloned().unwrap_or_default();
    let decision = |phase, action, message: String| Decision {
        deployment_name: adopt.deployment_name.clone(),
        phase,
        open_unversioned: observed.open_unversioned,
        message,
        action,
    };
    let name = &adopt.deployment_name;
    if let Some(why) = &observed.unreadable {
        wake.after(DRAIN_POLL);
        let phase = observed.recorded.unwrap_or(AdoptionPhase::Waiting);
        let message = format!("Deployment {name} could not be read, left as it is: {why}");
        return Some(decision(phase, None, message));
    }
    let Some(d) = &observed.deployment else {
        return Some(match observed.recorded {
            Some(AdoptionPhase::Deleted) => {
                decision(AdoptionPhase::Deleted, None, deleted_message(name))
            }
            _ => decision(
                AdoptionPhase::NotFound,
                None,
                format!(
                    "No Deployment {name} in this namespace: nothing to adopt (check spec.adopt.deploymentName)"
                ),
            ),
        });
    };
    if d.ours {
        let message = format!(
            "Deployment {name} is a versioned Deployment of this controller, not the unversioned workers: not adopted"
        );
        return Some(decision(AdoptionPhase::Refused, None, message));
    }
    if d.deleting {
        return Some(decision(
            AdoptionPhase::Deleted,
            None,
            deleted_message(name),
        ));
    }
    let (phase, action, mut message) = step(adopt, d, &observed, facts, wake);
    if action == Some(Action::ScaleToZero) && observed.recorded == Some(AdoptionPhase::ScaledToZero)
    {
        // Rule 2: someone scaled it up again (a GitOps sync restoring `replicas`).
        message = format!(
            "Scaled up again after adoption (a GitOps sync?), scaled to zero again: {message}"
        );
    }
    Some(decision(phase, action, with_autoscalers(message, d)))
}

/// Rules 1 and 2 for a live Deployment of someone else's.
fn step(
    adopt: &Adopt,
    d: &PlainDeployment,
    observed: &Observed,
    facts: Facts<'_>,
    wake: &mut Wake,
) -> (AdoptionPhase, Option<Action>, String) {
    let name = &adopt.deployment_name;
    if d.replicas == Some(0) && !adopt.delete {
        wake.after(AT_ZERO_POLL);
        return (AdoptionPhase::ScaledToZero, None, scaled_message(name));
    }
    if !routed(facts.routing) {
        if facts.routing.current_build_id.is_some() {
            wake.after(facts.fast_poll);
        }
        let message = format!(
            "Deployment {name} keeps its unversioned workers: no versioned build is Current yet; the first one ramps from them"
        );
        return (AdoptionPhase::Waiting, None, message);
    }
    let queues = observed.queues.join(", ");
    match observed.open_unversioned {
        None => {
            wake.after(DRAIN_POLL);
            let message = format!(
                "Deployment {name} kept: unversioned workflows on the Current version's task queues not counted yet"
            );
            (AdoptionPhase::Draining, None, message)
        }
        Some(n) if n > 0 => {
            wake.after(DRAIN_POLL);
            let message = format!(
                "Deployment {name} kept: {n} workflows started on unversioned workers are still running unversioned on task queues [{queues}]; each moves to the Current version at its next workflow task (signal idle ones to wake them)"
            );
            (AdoptionPhase::Draining, None, message)
        }
        Some(_) if d.replicas != Some(0) => (
            AdoptionPhase::ScaledToZero,
            Some(Action::ScaleToZero),
            scaled_message(name),
        ),
        Some(_) if d.status_replicas > 0 => {
            wake.after(TERMINATING_POLL);
            (AdoptionPhase::ScaledToZero, None, scaled_message(name))
        }
        Some(_) => (
            AdoptionPhase::Deleted,
            Some(Action::Delete),
            deleted_message(name),
        ),
    }
}

/// `status.adoption`: the decision, unless its write did not happen (a failed act stage):
/// then what the last status said, so that a phase is only reported once it is true. A pass
/// that did not count keeps the last count of the same Deployment.
pub fn status(
    decision: Option<&Decision>,
    previous: Option<&AdoptionStatus>,
    executed: bool,
) -> Option<AdoptionStatus> {
    let d = decision?;
    if d.action.is_some() && !executed {
        return previous.cloned();
    }
    Some(AdoptionStatus {
        deployment_name: d.deployment_name.clone(),
        phase: d.phase,
        open_unversioned_workflows: d
            .open_unversioned
            .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
            .or_else(|| {
                previous
                    .filter(|p| p.deployment_name == d.deployment_name)
                    .and_then(|p| p.open_unversioned_workflows)
            }),
        message: d.message.clone(),
    })
}

fn scaled_message(name: &str) -> String {
    format!(
        "Deployment {name} is at 0 replicas: no running workflow on the Current version's task queues is unversioned, so Temporal can no longer send its workers work"
    )
}

fn deleted_message(name: &str) -> String {
    format!(
        "Deployment {name} deleted: no running workflow on the Current version's task queues was unversioned, so Temporal could no longer send its workers work"
    )
}

/// Rule 3: names the HPAs that target the Deployment.
fn with_autoscalers(message: String, d: &PlainDeployment) -> String {
    if d.autoscalers.is_empty() {
        return message;
    }
    format!(
        "{message}; HorizontalPodAutoscaler {} targets it: Kubernetes does not autoscale a Deployment at 0 replicas, remove the HPA with the Deployment",
        d.autoscalers.join(", ")
    )
}
