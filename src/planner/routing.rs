//! Which routing change (at most one) to make, and where that leaves the rollout.
//!
//! Decisions, in order:
//! 1. The version limit holds back the target's Deployment → `TooManyVersions`.
//! 2. Target already Current → done; a stale ramp on another build is cleared.
//! 3. Target unknown to Temporal → wait for its pollers.
//! 4. Rollback: the target was Current within the rollback window (not Manual) → promote at
//!    once once healthy, skipping gate and ramp.
//! 5. Gate: started on every task queue lacking one (Manual too); a failure is terminal,
//!    anything else waits.
//! 6. Manual → never route; wait for a human.
//! 7. Target not healthy (Available with ready pods) → wait: never send traffic to a version
//!    without live workers (Temporal keeps listing a dead worker's pollers).
//! 8. First version (nothing Current, unversioned workers not on every queue) → promote.
//! 9. AllAtOnce → promote; Progressive → step algorithm.
//!
//! A target is routable (rule 7) only when it also polls every task queue of the Current
//! version. Then rollout control ([`super::control`]: abort, promote and skip annotations, pause)
//! adjusts the change, and the progress deadline ([`super::deadline`]) ends a target that
//! does not become routable in time. Then a Connection roll that stalled (new Pods never Ready, see [`super::drift::stalled`])
//! holds any change that would send more work to a stalled version and is what the rollout
//! reports. Finally, a routing change is dropped while another identity manages routing in
//! Temporal, and the manager identity is claimed first when nobody holds it or a predecessor
//! controller does ([`super::takeover::manager_role`]).

use jiff::{SignedDuration, Timestamp};

use crate::planner::clock::{self, MANAGER_POLL, Wake};
use crate::planner::control;
use crate::planner::deadline;
use crate::planner::gates::{self, GateState};
use crate::planner::model::{
    Decision, ObservedDeployment, Phase, Progress, RoutingChange, Step, StepProgress, Strategy,
};
use crate::planner::polling;
use crate::planner::progressive::{self, StepDecision};
use crate::planner::takeover::{self, ManagerRole};
use crate::planner::view::{Role, View};
use crate::temporal::state::TemporalVersionStatus;

/// `held_back`: set when the version limit prevents creating the target (the message).
/// `stalled`: Deployments whose Connection roll stalled ([`super::drift::stalled`]).
pub fn decide(
    view: &View,
    held_back: Option<String>,
    stalled: &[&ObservedDeployment],
    wake: &mut Wake,
) -> Decision {
    let mut decision = route(view, held_back, wake);
    control::apply(view, &mut decision, wake);
    deadline::apply(view, &mut decision, wake);
    apply_stall(view, stalled, &mut decision);
    apply_manager(view, &mut decision, wake);
    apply_duplicate_install(view, &mut decision);
    decision
}

/// Another install of the controller made the last routing change with this controller's
/// identity (it recorded its install ID on the version it routed to): both would keep
/// changing the same worker deployment's routing. No routing write (nor manager claim) until
/// a human gives each install its own identity; reported above everything else, since every
/// other rule reasons about routing the two installs fight over.
fn apply_duplicate_install(view: &View, d: &mut Decision) {
    let input = view.input;
    let t = &input.temporal;
    let Some(record) = &t.last_routing_install else {
        return;
    };
    if input.install_id.is_empty()
        || t.last_modifier_identity != input.controller_identity
        || record.install_id == input.install_id
    {
        return;
    }
    d.change = None;
    d.claim_manager = false;
    d.start_gates.clear();
    d.progress = progress(
        Phase::DuplicateInstall,
        format!(
            "Another install of the controller, {other:?}, changed routing with this controller's \
             identity {identity:?} (it recorded itself on build ID {build}); this install is \
             {mine:?}. Two installs with one identity fight over the same worker deployments, so \
             this one changes no routing. Give each install a distinct identity (--identity, Helm \
             value controller.identity); if install {other:?} is gone for good, remove the \
             version metadata entry {key} of build ID {build} in Temporal",
            other = record.install_id,
            identity = input.controller_identity,
            build = record.build_id,
            mine = input.install_id,
            key = crate::temporal::state::METADATA_INSTALL_ID,
        ),
    );
}

/// A stalled Connection roll: no routing change may send more work to a stalled version (the
/// new build for SetCurrent/SetRamping, the current one when a ramp is cleared), and the
/// rollout reports the stall, which needs the Connection or the cluster fixed. A failed gate
/// keeps its own report: it needs a new build whatever happens to the Connection.
fn apply_stall(view: &View, stalled: &[&ObservedDeployment], d: &mut Decision) {
    if stalled.is_empty() || d.progress.phase == Phase::GateFailed {
        return;
    }
    let is_stalled = |build: &str| stalled.iter().any(|s| s.build_id == build);
    let receives = match &d.change {
        Some(
            RoutingChange::SetCurrent { build_id } | RoutingChange::SetRamping { build_id, .. },
        ) => Some(build_id.as_str()),
        Some(RoutingChange::ClearRamp) => view.current,
        None => None,
    };
    if receives.is_some_and(is_stalled) {
        d.change = None;
    }
    let names: Vec<String> = stalled
        .iter()
        .map(|s| {
            format!(
                "{} (build ID {}, {})",
                s.name,
                s.build_id,
                role_word(view.role(&s.build_id))
            )
        })
        .collect();
    let held = if d.change.is_none() {
        "; routing to these versions is held until they are Ready"
    } else {
        ""
    };
    d.progress = Progress {
        phase: Phase::ConnectionRolloutStalled,
        message: format!(
            "New Pods of {} did not become Ready within the Deployment's progressDeadlineSeconds \
             after the TemporalConnection changed (ProgressDeadlineExceeded); the old Pods keep \
             serving with the previous settings{held}. Check the new Pods' events and logs \
             (kubectl describe pod -l temporal.io/build-id=<build ID>) and the Connection's \
             hostPort, TLS and API key Secret; the rollout resumes once the Pods are Ready or \
             the fixed Connection has rolled them again",
            names.join(", ")
        ),
        step: d.progress.step,
        rollback: d.progress.rollback,
    };
}

fn role_word(role: Role) -> &'static str {
    match role {
        Role::Target => "target",
        Role::Current => "Current",
        Role::Ramping => "Ramping",
        Role::Old(Some(s)) => s.as_str(),
        Role::Old(None) => "not registered",
    }
}

fn progress(phase: Phase, message: String) -> Progress {
    Progress {
        phase,
        message,
        step: None,
        rollback: false,
    }
}

fn complete(build: &str) -> Progress {
    progress(
        Phase::Complete,
        format!("Rollout complete for build ID {build}"),
    )
}

fn promote(view: &View, wake: &mut Wake) -> Decision {
    wake.after(view.input.fast_poll);
    Decision {
        change: Some(RoutingChange::SetCurrent {
            build_id: view.target.to_string(),
        }),
        progress: complete(view.target),
        ..Default::default()
    }
}

fn route(view: &View, held_back: Option<String>, wake: &mut Wake) -> Decision {
    let input = view.input;
    let desired = &input.desired;
    let target = view.target;
    let now = input.now;

    if let Some(message) = held_back {
        wake.after(clock::DRAIN_POLL);
        return Decision {
            progress: progress(Phase::TooManyVersions, message),
            ..Default::default()
        };
    }

    if view.target_is_current() {
        return settled(view, wake);
    }

    let Some(version) = view.target_version else {
        wait_for_pollers(view, wake);
        let message = waiting_for_pollers(view);
        return Decision {
            progress: progress(Phase::WaitingForPollers, message),
            ..Default::default()
        };
    };

    let manual = matches!(desired.strategy, Strategy::Manual);
    let rollback = !manual
        && version
            .last_current_at
            .is_some_and(|t| within(now, t, desired.rollback_window));

    let gate = gates::evaluate(
        desired.gate.as_ref(),
        target,
        &input.target_task_queues,
        &input.gates,
    );
    let start_gates = match &gate {
        GateState::Pending { start, .. } => start.clone(),
        _ => Vec::new(),
    };
    // A rollback skips gates.
    if !rollback && let Some(held) = held_by_gate(gate, &start_gates, view, wake) {
        return held;
    }
    Decision {
        start_gates,
        ..past_gates(view, version.status, manual, rollback, wake)
    }
}

/// The decision once the gates let the target through (their workflows are started by the
/// caller either way): a manual wait, a wait for pollers, a rollback promoted at once, or the
/// strategy's next step.
fn past_gates(
    view: &View,
    status: TemporalVersionStatus,
    manual: bool,
    rollback: bool,
    wake: &mut Wake,
) -> Decision {
    if manual {
        return manual_wait(view, status, wake);
    }
    if let Some(message) = not_yet_routable(view) {
        return Decision {
            progress: progress(Phase::WaitingForPromotion, message),
            ..Default::default()
        };
    }
    if rollback {
        let mut d = promote(view, wake);
        d.progress.rollback = true;
        d.progress.message = format!(
            "Rollout complete for build ID {} (rolled back: it was Current recently)",
            view.target
        );
        return d;
    }
    by_strategy(view, wake)
}

/// A routable target's next routing change by the strategy: the first version of a worker
/// deployment (nothing Current, no unversioned pollers, no ramp yet) is promoted at once.
fn by_strategy(view: &View, wake: &mut Wake) -> Decision {
    let input = view.input;
    let first_version = view.current.is_none()
        && !input.unversioned_pollers_on_all_queues
        && view.target_ramp().is_none();
    match &input.desired.strategy {
        _ if first_version => promote(view, wake),
        Strategy::AllAtOnce => promote(view, wake),
        Strategy::Manual => Decision::default(), // the caller waits for a human
        Strategy::Progressive(steps) => progressive_step(view, steps, wake),
    }
}

/// Why nothing may be routed to the registered target yet: its Deployment is not Available, or
/// its workers do not poll every task queue the Current version polls. `None` once it may be.
fn not_yet_routable(view: &View) -> Option<String> {
    let target = view.target;
    if !view.target_healthy() {
        return Some(format!(
            "Build ID {target} is registered; waiting for its Deployment to become Available ({})",
            view.target_readiness()
        ));
    }
    let missing = view.missing_queues();
    if missing.is_empty() {
        return None;
    }
    Some(format!(
        "Build ID {target} is registered, but its workers do not poll task queue(s) {} that the \
         Current version polls (they poll {}); nothing is routed to it until they do",
        missing.join(", "),
        view.input.target_task_queues.join(", ")
    ))
}

/// A failed gate stops the target; a pending one holds it and is looked at again with a
/// backoff from its start (`polling::backoff_since`), at once after starting it.
fn held_by_gate(
    gate: GateState,
    start_gates: &[String],
    view: &View,
    wake: &mut Wake,
) -> Option<Decision> {
    let (phase, message) = match gate {
        GateState::Failed { message } => (Phase::GateFailed, message),
        GateState::Pending { message, .. } => {
            let input = view.input;
            let started = input.gates.iter().filter_map(|g| g.started_at).min();
            let since = if start_gates.is_empty() {
                started
            } else {
                None
            };
            wake.after(polling::backoff_since(input.fast_poll, since, input.now));
            (Phase::WaitingForGate, message)
        }
        GateState::Open | GateState::Passed => return None,
    };
    Some(Decision {
        start_gates: start_gates.to_vec(),
        progress: progress(phase, message),
        ..Default::default()
    })
}

/// The next step of a Progressive rollout whose target is registered, healthy and gated.
fn progressive_step(view: &View, steps: &[Step], wake: &mut Wake) -> Decision {
    let target = view.target;
    let now = view.input.now;
    let routing = &view.input.temporal.routing;
    match progressive::decide_with(
        steps,
        view.target_ramp(),
        routing.ramp_percentage_changed_at,
        now,
        control::resumed_deadline(view),
    ) {
        StepDecision::NoSteps => Decision {
            progress: progress(
                Phase::WaitingForPromotion,
                format!("Progressive strategy has no steps; build ID {target} is not ramped"),
            ),
            ..Default::default()
        },
        StepDecision::Promote => promote(view, wake),
        StepDecision::Ramp { index } => {
            let step = steps[index];
            wake.after(step.pause);
            let next_at = clock::add(now, step.pause);
            let sp = StepProgress {
                index,
                ramp_percentage: step.ramp_percentage,
                started_at: Some(now),
                next_at,
            };
            Decision {
                change: Some(RoutingChange::SetRamping {
                    build_id: target.to_string(),
                    percentage: step.ramp_percentage,
                }),
                progress: ramping(target, sp, steps.len()),
                ..Default::default()
            }
        }
        StepDecision::Hold {
            index,
            started_at,
            next_at,
        } => {
            // A paused step has no deadline ([`control`]): nothing to wake up for.
            match next_at {
                _ if view.input.desired.control.paused => {}
                Some(t) => wake.at(now, t),
                None => wake.after(view.input.fast_poll),
            }
            let sp = StepProgress {
                index,
                ramp_percentage: steps[index].ramp_percentage,
                started_at,
                next_at,
            };
            Decision {
                progress: ramping(target, sp, steps.len()),
                ..Default::default()
            }
        }
    }
}

/// A Manual target waits for a human to promote (or ramp) it in Temporal.
fn manual_wait(view: &View, status: TemporalVersionStatus, wake: &mut Wake) -> Decision {
    let target = view.target;
    let message = match view.target_ramp() {
        Some(pct) => {
            format!("Build ID {target} is ramping at {pct}% (set in Temporal); strategy is Manual")
        }
        None => format!(
            "Build ID {target} is registered and {}; strategy is Manual, promote it in Temporal",
            status.as_str()
        ),
    };
    let phase = if view.target_ramp().is_some() {
        Phase::Ramping
    } else {
        Phase::WaitingForPromotion
    };
    wake.after(clock::MANUAL_POLL);
    Decision {
        progress: progress(phase, message),
        ..Default::default()
    }
}

/// The target is Current: only a stale ramp may be left to clear (Manual leaves it alone).
fn settled(view: &View, wake: &mut Wake) -> Decision {
    let manual = matches!(view.input.desired.strategy, Strategy::Manual);
    let change = (view.ramping.is_some() && !manual).then_some(RoutingChange::ClearRamp);
    if change.is_some() {
        wake.after(view.input.fast_poll);
    }
    Decision {
        change,
        progress: complete(view.target),
        ..Default::default()
    }
}

/// Why an unregistered target is not polling yet.
/// Temporal is looked at again only once some Pod of the target is Ready: before that no
/// worker of it can register, and the Deployment watch reports the readiness change (as it
/// reports the creation or deletion of the Deployment). Then with a backoff from
/// `--fast-poll` (`polling::backoff_since`).
fn wait_for_pollers(view: &View, wake: &mut Wake) {
    if let Some(d) = view.target_deployment
        && d.ready_replicas > 0
    {
        let input = view.input;
        // Not yet Available (more replicas to come): back off from its creation instead.
        let since = d.healthy_since.or(d.created_at);
        wake.after(polling::backoff_since(input.fast_poll, since, input.now));
    }
}

fn waiting_for_pollers(view: &View) -> String {
    let target = view.target;
    match (view.target_deployment, view.target_deleting) {
        (None, Some(d)) => format!(
            "Waiting for the old Deployment {} of build ID {target} to finish deleting before re-creating it",
            d.name
        ),
        (None, None) => format!("Creating the Deployment for build ID {target}"),
        (Some(_), _) => format!(
            "Waiting for build ID {target} to register its pollers with Temporal ({})",
            view.target_readiness()
        ),
    }
}

/// Ramping progress with a message that says where the rollout is and what comes next.
fn ramping(target: &str, step: StepProgress, total: usize) -> Progress {
    let what_next = if step.index + 1 < total {
        "next step"
    } else {
        "promotion"
    };
    let when = match step.next_at {
        Some(t) => format!("{what_next} at {}", t.strftime("%Y-%m-%dT%H:%M:%SZ")),
        None => format!("{what_next} once Temporal reports when this step started"),
    };
    Progress {
        phase: Phase::Ramping,
        message: format!(
            "Ramping build ID {target} at {}% (step {} of {total}); {when}",
            step.ramp_percentage,
            step.index + 1
        ),
        step: Some(step),
        rollback: false,
    }
}

fn apply_manager(view: &View, d: &mut Decision, wake: &mut Wake) {
    let Some(change) = &d.change else { return };
    let input = view.input;
    let owner = input.temporal.manager_identity.as_str();
    match takeover::manager_role(
        owner,
        &input.controller_identity,
        &input.install_id,
        &input.succession,
        &input.temporal.last_modifier_identity,
        input.temporal.last_routing_install.as_ref(),
    ) {
        // A predecessor's (or our earlier identity's) routing is ours to continue: claimed
        // like unmanaged routing, with this controller's identity.
        ManagerRole::Unclaimed | ManagerRole::Predecessor => {
            d.claim_manager = true;
            return;
        }
        ManagerRole::Us => return,
        ManagerRole::Elsewhere => {}
    }
    if matches!(change, RoutingChange::ClearRamp) {
        // The target is Current: the rollout is done; a ramp set by the routing owner is theirs.
        d.change = None;
        return;
    }
    let wanted = match change {
        RoutingChange::SetCurrent { .. } => "promote".to_string(),
        RoutingChange::SetRamping { percentage, .. } => format!("ramp to {percentage}%"),
        RoutingChange::ClearRamp => "clear the ramp of".to_string(),
    };
    d.change = None;
    wake.after(MANAGER_POLL);
    d.progress = progress(
        Phase::ManagedElsewhere,
        format!(
            "Routing is managed by {owner:?} in Temporal, so the controller will not {wanted} build ID {}; \
             unset it (temporal worker deployment manager-identity unset) or use the Manual strategy",
            view.target
        ),
    );
}

/// Whether `then` is within `window` before `now` (a `then` in the future counts: clock skew).
fn within(now: Timestamp, then: Timestamp, window: std::time::Duration) -> bool {
    match SignedDuration::try_from(window) {
        Ok(w) => now.duration_since(then) <= w,
        Err(_) => true,
    }
}
