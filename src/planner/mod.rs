//! The pure rollout planner: (desired, observed Kubernetes, observed Temporal, now) → plan.
//!
//! No I/O and no clock reads: `PlanInput::now` is the only time source, and every timer is
//! derived from Temporal's own timestamps, so the same input always yields the same plan and
//! a restarted controller picks up exactly where the rollout is.
//!
//! Where each rule lives:
//! - [`scaling`]: creating the target, keeping active versions at `spec.replicas`, waking a
//!   Draining version left at 0 replicas;
//! - [`sunset`]: scaling down and deleting old versions, the version-limit guard;
//! - [`records`]: which Temporal version records are this controller's (the ledger), and
//!   deleting those whose Deployment is gone;
//! - [`drift`]: in-place updates (custom build ID template drift, connection drift), and
//!   which of those rolls stalled; Pods carrying a predecessor's hash of the current
//!   Connection are adopted instead;
//! - [`takeover`]: starting where a predecessor controller ran (adopted build IDs and spec
//!   hashes, predecessor identities);
//! - [`routing`]: the one routing change per reconcile (rollback, gates, strategies, manager
//!   identity), using [`gates`] and [`progressive`];
//! - [`drain`]: what the status shows about old versions' pinned workflows, when they are
//!   counted again, and when they are cancelled or terminated;
//! - [`analysis`]: canary analysis verdicts and what they hold back;
//! - [`step_gates`]: gate workflows attached to Progressive steps;
//! - [`control`]: pause/resume, abort, and the promote / skip-step annotations;
//! - [`restart`]: the `temporal.io/restart` request (one version's Pods rolled in place);
//! - [`adoption`]: `spec.adopt`, the unversioned workers' Deployment scaled down once Temporal
//!   can no longer send it work;
//! - [`deadline`]: the progress deadline of a waiting target and of lost pollers, the cause
//!   of a failed build, and its record;
//! - [`clock`]: deadlines and the requeue interval;
//! - [`rest`]: how soon an object at rest is looked at again (the rest cadence);
//! - [`polling`]: when Temporal is worth asking (the remembered view, the poller backoff);
//! - [`poller_health`]: whether the live versions' workers still poll, and when to look.

pub mod adoption;
pub mod analysis;
pub mod analysis_input;
pub mod clock;
mod control;
pub mod deadline;
pub mod deletion;
pub mod drain;
mod drift;
pub mod first_look;
pub mod gates;
pub mod images;
pub mod model;
pub mod pod_trouble;
pub mod poller_health;
pub mod polling;
pub mod progressive;
pub mod promise;
pub mod punctual;
pub mod records;
pub mod rest;
pub mod restart;
mod routing;
pub mod scaling;
pub mod step_gates;
pub mod sunset;
pub mod takeover;
mod view;

// Plan-level tests, one file per rule file, sharing `test_fixtures`.
#[cfg(test)]
mod adoption_tests;
#[cfg(test)]
mod control_tests;
#[cfg(test)]
mod deadline_tests;
#[cfg(test)]
mod drift_tests;
#[cfg(test)]
mod gates_tests;
#[cfg(test)]
mod polling_tests;
#[cfg(test)]
mod progressive_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod records_tests;
#[cfg(test)]
mod rest_tests;
#[cfg(test)]
mod routing_tests;
#[cfg(test)]
mod scaling_tests;
#[cfg(test)]
mod sunset_tests;
#[cfg(test)]
mod test_fixtures;

pub use sunset::{deadlines as sunset_deadlines, eligible_for_deletion};

use crate::planner::clock::Wake;
use crate::planner::model::{
    CreateDeployment, Decision, HeldAtZero, Phase, Plan, PlanInput, Progress, ScaleDeployment,
    ScaleReason,
};
use crate::planner::view::View;

/// `spec.rollout.onFailure: Abort`: the failed target is scaled to zero (an autoscaler's
/// version is left to it) instead of being kept at its replicas.
fn scale_failed_to_zero(view: &View, scale: &mut Vec<ScaleDeployment>) {
    scale.retain(|s| s.build_id != view.target);
    if let Some(d) = view
        .target_deployment
        .filter(|d| !d.autoscaled && d.replicas != Some(0))
    {
        scale.push(ScaleDeployment {
            name: d.name.clone(),
            build_id: d.build_id.clone(),
            replicas: 0,
            reason: ScaleReason::Failed,
            record_scaled_down_at: None,
        });
    }
}

/// Decides everything one reconcile should do. See the module docs for where each rule lives.
pub fn plan(input: &PlanInput) -> Plan {
    let view = View::new(input);
    let mut wake = Wake::default();

    let retirement = sunset::retire(&view, &mut wake);

    let (mut create, held_back) = creation(&view, retirement.ineligible);

    let stalled = drift::stalled(&view);
    let mut decision = routing::decide(&view, held_back, &stalled, &mut wake);
    hold_for_pollers(input, &mut decision);
    if input.temporal.routing.update_in_progress {
        wake.after(input.fast_poll);
    }
    poller_health::wake(&input.pollers, input.now, &mut wake);
    let (pollers_lost, pollers_lost_too_long) = deadline::pollers_lost(input, &mut wake);
    decision.control.pollers_lost = pollers_lost;

    let mut scale = scaling::active(&view);
    if decision.progress.phase == Phase::DeadlineExceeded && input.desired.abort_on_failure {
        // The failed build is not re-created.
        create = None;
        scale_failed_to_zero(&view, &mut scale);
    }
    scale.extend(retirement.scale);
    let (rewoken, held_at_zero) = scaling::draining_at_zero(&view);
    scale.extend(rewoken);
    let progress = with_notes(decision.progress, &held_at_zero, input);
    let pinned_batches = drain::pinned_batches(input, decision.change.as_ref(), &mut wake);
    let forget_versions = records::forget(&view, &mut wake);
    let retired = records::ledger(&view);
    let (adopt, update) = drift::updates(&view, &retirement.delete);
    let (restart, restarted) = restart::decide(&view);
    decision.control.restarted = restarted;
    let adoption = adoption::decide(adoption_facts(input), &mut wake);
    Plan {
        adopt,
        create,
        update,
        scale,
        start_gates: decision.start_gates,
        claim_manager: decision.claim_manager,
        routing: decision.change,
        delete: retirement.delete,
        pinned_batches,
        progress,
        requeue_after: wake.get(),
        control: decision.control,
        start_step_gates: decision.start_step_gates,
        held_at_zero,
        forget_versions,
        retired,
        pollers_lost_too_long,
        restart,
        adoption,
    }
}

/// The parts of the input the adoption decides from ([`adoption`]).
pub fn adoption_facts(input: &PlanInput) -> adoption::Facts<'_> {
    adoption::Facts {
        adopt: input.desired.adopt.as_ref(),
        observed: input.adopted.as_ref(),
        routing: &input.temporal.routing,
        fast_poll: input.fast_poll,
    }
}

/// The target's Deployment to create, unless too many versions are still ineligible for
/// deletion (then `None`, and the message saying so). The limit protects Temporal's
/// per-deployment version cap, so it only holds back a build Temporal does not know yet
/// (re-creating a known version's Deployment adds none).
fn creation(view: &View, ineligible: usize) -> (Option<CreateDeployment>, Option<String>) {
    let desired = &view.input.desired;
    let create = scaling::create(view);
    let held_back = (create.is_some()
        && view.target_version.is_none()
        && ineligible >= desired.max_versions_ineligible_for_deletion)
        .then(|| sunset::too_many_versions_message(ineligible, desired));
    match held_back {
        Some(message) => (None, Some(message)),
        None => (create, None),
    }
}

/// Holds a routing change to a version without ready pollers. A one-shot annotation acted on
/// by the held change is not done yet: it is acted on again once the pollers are back.
fn hold_for_pollers(input: &PlanInput, decision: &mut Decision) {
    if poller_health::hold(
        &mut decision.change,
        &input.pollers,
        &input.temporal.routing,
    ) {
        let before = &input.desired.control.record;
        decision.control.promoted = before.promoted.clone();
        decision.control.skipped_step = before.skipped_step.clone();
    }
}

/// The progress message with what else the user should know: Draining versions an
/// autoscaler holds at zero, and notes on the images.
fn with_notes(mut progress: Progress, held_at_zero: &[HeldAtZero], input: &PlanInput) -> Progress {
    if !held_at_zero.is_empty() {
        progress.message = format!(
            "{}; {}",
            progress.message,
            scaling::held_message(held_at_zero)
        );
    }
    if let Some(note) = images::note(&input.desired) {
        progress.message = format!("{}; {note}", progress.message);
    }
    progress
}
