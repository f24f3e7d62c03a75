//! Rollout control: `spec.rollout.paused` / `abort` and the one-shot annotations
//! `temporal.io/promote` and `temporal.io/skip-step`, applied to the routing decision.
//!
//! Rules, in order (each ends the rule list when it applies):
//! 1. Manual strategy, or the target already Current: nothing to steer; the annotation record
//!    is kept so an old annotation never acts later.
//! 2. Abort: the target's ramp goes back to 0 % (the ramp is cleared), the current version stays
//!    Current, nothing else is routed; `RolloutAborted` until the abort is cleared, after which
//!    the target is not ramping and the step algorithm starts again at the first step.
//! 3. Promote (`temporal.io/promote: <target>`, not acted on yet): promote now, skipping steps
//!    and gates, once the target has ready pollers (the routing rules' health check).
//! 4. Skip (`temporal.io/skip-step: <target>/<step>`, not acted on yet): when that step is in
//!    effect, move to the next step (or promote after the last).
//! 5. Pause: no routing change that moves forward; the step in effect and its remaining time
//!    are recorded once, so a restart or a fail-over keeps them; `RolloutPaused`.
//! 6. Otherwise the step's gate ([`super::step_gates`]) and the canary analysis
//!    ([`super::analysis`]) may abort the target or hold its step. Their abort is recorded for
//!    the build and holds like rule 2 (promote overrides it). A missed progress deadline is
//!    held by [`super::deadline`] instead (promote does not override it; a retry or a spec
//!    change does).
//!
//! Resume is the pause record meeting an unpaused spec: the step in effect then ends after the
//! time it had left ([`resumed_deadline`], fed to [`super::progressive::decide_with`]).
//!
//! An annotation is recorded as acted on only once its routing change succeeded (see
//! `compute()` in `src/worker_deployment/status/mod.rs`), so a failed write is retried and a done one never repeats.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions::PROGRESS_DEADLINE_EXCEEDED;
use crate::api::twd::{PausedStep, ResumedStep, RolloutControl, step_index, step_number};
use crate::api::{ANNOTATION_PROMOTE, ANNOTATION_SKIP_STEP};
use crate::planner::analysis;
use crate::planner::clock::{self, Wake};
use crate::planner::deadline;
use crate::planner::model::{
    Decision, Phase, Progress, RoutingChange, Step, StepProgress, Strategy,
};
use crate::planner::view::View;
use crate::planner::{progressive, step_gates};

/// When the step resumed after a pause ends, if one is in effect: resumed this reconcile (a
/// pause record, spec no longer paused: now + the time it had left) or earlier.
pub fn resumed_deadline(view: &View) -> Option<(usize, Timestamp)> {
    let c = &view.input.desired.control;
    if c.paused {
        return None;
    }
    let record = &c.record;
    if let Some(p) = record.paused.as_ref().filter(|p| p.build_id == view.target) {
        let step = step_index(p.step?)?;
        let left = std::time::Duration::from_secs(u64::try_from(p.remaining_seconds?).ok()?);
        // The status keeps whole seconds: round up, so the step never ends early.
        let at = clock::add(view.input.now, left)?;
        let whole = at
            .round(
                jiff::TimestampRound::new()
                    .smallest(jiff::Unit::Second)
                    .mode(jiff::RoundMode::Ceil),
            )
            .unwrap_or(at);
        return Some((step, whole));
    }
    let r = record
        .resumed
        .as_ref()
        .filter(|r| r.build_id == view.target)?;
    Some((step_index(r.step)?, r.next_step_at.0))
}

/// Applies pause, abort, promote and skip to `d` and sets the record to keep in status.
pub fn apply(view: &View, d: &mut Decision, wake: &mut Wake) {
    let c = &view.input.desired.control;
    let mut record = RolloutControl {
        promoted: c.record.promoted.clone(),
        skipped_step: c.record.skipped_step.clone(),
        analysis: c
            .record
            .analysis
            .clone()
            .filter(|a| a.build_id == view.target),
        aborted: analysis::aborted_for(&c.record, view.target).cloned(),
        retried: c.record.retried.clone(),
        restarted: c.record.restarted.clone(),
        ..Default::default()
    };
    let steps = match &view.input.desired.strategy {
        Strategy::Manual => {
            d.control = record;
            return;
        }
        Strategy::AllAtOnce => &[][..],
        Strategy::Progressive(steps) => steps.as_slice(),
    };
    if view.target_is_current() {
        d.control = record;
        return;
    }
    // A build that missed its progress deadline is not promoted until the failure is cleared
    // (`deadline::apply` holds it).
    let deadline_failed = deadline::held_failure(view).is_some();
    let promote_value = promote_now(view).filter(|_| !deadline_failed);
    if c.abort {
        abort(view, d, wake);
    } else if deadline_failed {
        // `deadline::apply` reports it.
    } else if let Some(held) = record
        .aborted
        .clone()
        .filter(|a| a.reason != PROGRESS_DEADLINE_EXCEEDED && promote_value.is_none())
    {
        analysis::hold_aborted(view, d, held.message, wake);
    } else if let Some(value) = promote_value {
        promote(view, d, wake);
        record.promoted = Some(value);
        record.aborted = None;
    } else if let Some((value, next)) = skip_now(view, d, steps) {
        skip(view, d, steps, next, wake);
        record.skipped_step = Some(value);
    } else if c.paused {
        record.paused = pause(view, d, steps);
    } else {
        record.resumed = still_resumed(view, d);
        step_gates::apply(view, d, &mut record, wake);
        if d.progress.phase != Phase::Aborted {
            analysis::apply(view, d, &mut record, wake);
        }
    }
    d.control = record;
}

/// The resumed deadline stays recorded while its step is still the one in effect.
fn still_resumed(view: &View, d: &Decision) -> Option<ResumedStep> {
    let (step, at) = resumed_deadline(view)?;
    let holding = d.change.is_none() && d.progress.step.is_some_and(|s| s.index == step);
    holding.then(|| ResumedStep {
        build_id: view.target.to_string(),
        step: step_number(step),
        next_step_at: Time(at),
    })
}

fn abort(view: &View, d: &mut Decision, wake: &mut Wake) {
    let target = view.target;
    d.change = view.target_ramp().map(|_| RoutingChange::ClearRamp);
    if d.change.is_some() {
        wake.after(view.input.fast_poll);
    }
    d.start_gates.clear();
    let current = match view.current {
        Some(b) => format!("build ID {b} stays Current"),
        None => "unversioned workers keep new workflows".to_string(),
    };
    d.progress = Progress {
        phase: Phase::Aborted,
        message: format!(
            "Rollout of build ID {target} aborted (spec.rollout.abort): its ramp is back to 0% and \
             {current}. Set spec.rollout.abort to false (temporal-worker-controller abort --clear) \
             to start again from the first step"
        ),
        step: None,
        rollback: false,
    };
}

/// The promote annotation's value when it names the target, was not acted on yet, and the
/// target is registered with ready pollers.
fn promote_now(view: &View) -> Option<String> {
    let c = &view.input.desired.control;
    let value = c.promote.as_ref().filter(|b| *b == view.target)?;
    if c.record.promoted.as_ref() == Some(value) {
        return None;
    }
    (view.target_version.is_some() && view.target_healthy()).then(|| value.clone())
}

fn promote(view: &View, d: &mut Decision, wake: &mut Wake) {
    let target = view.target;
    wake.after(view.input.fast_poll);
    d.change = Some(RoutingChange::SetCurrent {
        build_id: target.to_string(),
    });
    d.progress = Progress {
        phase: Phase::Complete,
        message: format!(
            "Rollout complete for build ID {target} (promoted by {ANNOTATION_PROMOTE}, skipping \
             the remaining steps and gates)"
        ),
        step: None,
        rollback: false,
    };
}

/// The skip annotation's value and the step to go to, when it names the target and the step
/// in effect (held, no change planned) and was not acted on yet.
fn skip_now(view: &View, d: &Decision, steps: &[Step]) -> Option<(String, usize)> {
    let c = &view.input.desired.control;
    let skip = c.skip_step.as_ref().filter(|s| s.build_id == view.target)?;
    if c.record.skipped_step.as_ref() == Some(&skip.value) || d.change.is_some() {
        return None;
    }
    let held = d
        .progress
        .step
        .filter(|_| d.progress.phase == Phase::Ramping)?;
    (held.index == skip.step && skip.step < steps.len())
        .then(|| (skip.value.clone(), skip.step + 1))
}

fn skip(view: &View, d: &mut Decision, steps: &[Step], next: usize, wake: &mut Wake) {
    let target = view.target;
    wake.after(view.input.fast_poll);
    let skipped = format!(
        "step {next} of {} skipped by {ANNOTATION_SKIP_STEP}",
        steps.len()
    );
    let Some(step) = steps.get(next) else {
        d.change = Some(RoutingChange::SetCurrent {
            build_id: target.to_string(),
        });
        d.progress = Progress {
            phase: Phase::Complete,
            message: format!("Rollout complete for build ID {target} ({skipped})"),
            step: None,
            rollback: false,
        };
        return;
    };
    d.change = Some(RoutingChange::SetRamping {
        build_id: target.to_string(),
        percentage: step.ramp_percentage,
    });
    let now = view.input.now;
    let next_at = clock::add(now, step.pause);
    d.progress = Progress {
        phase: Phase::Ramping,
        message: format!(
            "Ramping build ID {target} at {}% (step {} of {}; {skipped})",
            step.ramp_percentage,
            next + 1,
            steps.len()
        ),
        step: Some(StepProgress {
            index: next,
            ramp_percentage: step.ramp_percentage,
            started_at: Some(now),
            next_at,
        }),
        rollback: false,
    };
}

/// Holds the rollout: drops a forward routing change and records the step held with the time
/// it has left (kept from an earlier record of the same pause). Phases that report a problem
/// keep their report; the forward change is dropped all the same.
fn pause(view: &View, d: &mut Decision, steps: &[Step]) -> Option<PausedStep> {
    let forward = matches!(
        d.change,
        Some(RoutingChange::SetCurrent { .. } | RoutingChange::SetRamping { .. })
    );
    if forward {
        d.change = None;
    }
    let pausable = matches!(
        d.progress.phase,
        Phase::WaitingForPollers
            | Phase::WaitingForPromotion
            | Phase::WaitingForGate
            | Phase::Ramping
            | Phase::Complete
    );
    let held = held_step(view, steps);
    let remaining = match (held, d.progress.step) {
        // Holding the step in effect: its deadline, resumed or not, is in the plan.
        (Some(i), Some(s)) if !forward && s.index == i => s.next_at.map(|t| {
            clock::until(view.input.now, t).map_or(0, |left| left.as_millis().div_ceil(1000))
        }),
        // Its deadline has passed (the next step was due): nothing left.
        (Some(_), _) => Some(0),
        (None, _) => None,
    };
    let previous = view.input.desired.control.record.paused.as_ref();
    let record = match previous {
        Some(p) if p.build_id == view.target && p.step == held.map(step_number) => p.clone(),
        _ => PausedStep {
            build_id: view.target.to_string(),
            step: held.map(step_number),
            remaining_seconds: remaining.map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
            paused_at: Time(view.input.now),
        },
    };
    if pausable {
        d.progress = paused_progress(view, steps, held, &record);
    }
    Some(record)
}

/// The step the target's ramp is exactly at, if it ramps.
fn held_step(view: &View, steps: &[Step]) -> Option<usize> {
    progressive::step_of(steps, view.target_ramp()?)
}

fn paused_progress(
    view: &View,
    steps: &[Step],
    held: Option<usize>,
    record: &PausedStep,
) -> Progress {
    let target = view.target;
    let left = match record.remaining_seconds {
        Some(s) => format!("{s}s of its pause left"),
        None => "its remaining pause unknown".to_string(),
    };
    let (where_, step) = match held {
        Some(i) => (
            format!(
                "at step {} of {} ({}%), {left}",
                i + 1,
                steps.len(),
                steps[i].ramp_percentage
            ),
            Some(StepProgress {
                index: i,
                ramp_percentage: steps[i].ramp_percentage,
                started_at: view.input.temporal.routing.ramp_percentage_changed_at,
                next_at: None,
            }),
        ),
        None => ("before its next routing change".to_string(), None),
    };
    Progress {
        phase: Phase::Paused,
        message: format!(
            "Rollout of build ID {target} paused (spec.rollout.paused) {where_}; set \
             spec.rollout.paused to false (temporal-worker-controller resume) to continue"
        ),
        step,
        rollback: false,
    }
}
