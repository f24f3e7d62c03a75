//! The progress deadline (`spec.progressDeadlineSeconds`, default `--default-progress-deadline`):
//! a rollout that cannot progress ends, says why, and is not retried silently.
//!
//! Rules:
//! 1. **The target's clock.** While the target is not Current, not ramping, not paused or
//!    aborted, and not routable ([`View::target_routable`]: registered, Available with ready
//!    Pods, polling every task queue of the Current version), it waits against a deadline
//!    counted from when the wait began (the first reconcile that saw this build wait, i.e. its
//!    Deployment's creation, or a retry or spec change after a failure). The start is kept in
//!    `status.rolloutControl.waiting`, so a restarted controller keeps the clock. The planner
//!    wakes exactly at the deadline.
//! 2. **The cause, as early as certain.** What Kubernetes reports about the target's Pods
//!    (image pull, crash loop, unschedulable, a container that cannot start), the Deployment's
//!    own `ProgressDeadlineExceeded`, or task queues of the Current version the target does not
//!    poll, is added to the waiting message at once, and is the failure's message.
//! 3. **Past the deadline** the build has failed: `Stalled=True/ProgressDeadlineExceeded`, no
//!    routing change ever sends work to it, the Current version keeps serving. The failure is
//!    recorded in `status.rolloutControl.aborted` (reason `ProgressDeadlineExceeded`, with the
//!    object's generation). With `spec.rollout.onFailure: Abort` the build is also scaled to
//!    zero (in [`super::plan`]).
//! 4. **Remembered.** While the record names the target and the generation it was recorded
//!    for, the rollout stays Stalled with the recorded message: a re-apply of the same spec
//!    does not start a new wait. A spec change (new generation) or the annotation
//!    `temporal.io/retry: <buildID>` (acted on once per value) clears it and starts the clock
//!    again. An explicit `spec.rollout.abort` wins over all of this.
//! 5. **Lost pollers by the same clock** ([`pollers_lost`]): a routed version without live
//!    pollers is in progress (`NoActivePollers`) and becomes `ProgressDeadlineExceeded` only
//!    when the loss outlasts the deadline (start kept in `status.rolloutControl.pollersLost`).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::ANNOTATION_RETRY;
use crate::api::conditions::PROGRESS_DEADLINE_EXCEEDED;
use crate::api::twd::{AbortRecord, WaitingSince};
use crate::planner::clock::{self, Wake};
use crate::planner::model::{
    Decision, Health, Phase, PlanInput, PodCause, PodTrouble, Progress, RoutingChange,
};
use crate::planner::view::View;

/// The recorded deadline failure of the target that still holds: same build, same generation,
/// no retry annotation not yet acted on.
pub fn held_failure<'a>(view: &View<'a>) -> Option<&'a AbortRecord> {
    let c = &view.input.desired.control;
    let r = c
        .record
        .aborted
        .as_ref()
        .filter(|a| a.build_id == view.target && a.reason == PROGRESS_DEADLINE_EXCEEDED)?;
    if r.generation
        .is_some_and(|g| g != view.input.desired.generation)
    {
        return None;
    }
    if retry_now(view).is_some() {
        return None;
    }
    Some(r)
}

/// The retry annotation's value when it names the target and was not acted on yet.
fn retry_now(view: &View) -> Option<String> {
    let c = &view.input.desired.control;
    let value = c.retry.as_ref()?;
    let build = value.split_once('/').map_or(value.as_str(), |(b, _)| b);
    (build == view.target && c.record.retried.as_ref() != Some(value)).then(|| value.clone())
}

/// Whether the target's Pods are worth reading: it waits on them (not Current nor ramping, its
/// Deployment there and not all its Pods Ready, no failure already held) and its recorded
/// deadline has come, so this reconcile writes the failure whose message names their trouble.
/// Only then: the Pods are not cached, and a fleet of waiting rollouts must cost the API server
/// nothing between events (tests/temporal_budget.rs). Causes the caches and Temporal show (the
/// Deployment's own deadline, task queues nobody polls) are in the waiting message earlier.
pub fn wants_pods(input: &PlanInput) -> bool {
    let view = View::new(input);
    let due = input
        .desired
        .control
        .record
        .waiting
        .as_ref()
        .is_some_and(|w| w.build_id == view.target && input.now >= w.deadline.0);
    due && waits(&view)
        && view.target_deployment.is_some_and(|d| {
            d.healthy_since.is_none() || d.ready_replicas < d.replicas.unwrap_or(d.status_replicas)
        })
}

/// Whether the Current version's task queues are worth reading: the target is registered and
/// Available, waits to be routed, and a version is Current.
pub fn wants_queues(input: &PlanInput) -> bool {
    let view = View::new(input);
    waits(&view) && view.current.is_some() && view.target_version.is_some() && view.target_healthy()
}

fn waits(view: &View) -> bool {
    let c = &view.input.desired.control;
    !view.target_is_current()
        && view.target_ramp().is_none()
        && !c.abort
        && !c.paused
        && held_failure(view).is_none()
}

/// Applies rules 1–4 to `d`, after rollout control set `d.control`.
pub fn apply(view: &View, d: &mut Decision, wake: &mut Wake) {
    let input = view.input;
    let c = &input.desired.control;
    if view.target_is_current() || c.abort {
        return;
    }
    if let Some(failed) = held_failure(view) {
        hold(view, d, failed.message.clone(), wake);
        d.control.aborted = Some(failed.clone());
        d.control.waiting = None;
        return;
    }
    let restart = restarted(view, d);
    if c.paused || view.target_ramp().is_some() || view.target_routable() {
        return;
    }
    if !matches!(
        d.progress.phase,
        Phase::WaitingForPollers | Phase::WaitingForPromotion | Phase::WaitingForGate
    ) {
        return;
    }
    let since = c
        .record
        .waiting
        .as_ref()
        .filter(|w| w.build_id == view.target && !restart)
        .map_or(input.now, |w| w.since.0);
    if let Some(deadline) = clock::add(since, input.desired.progress_deadline) {
        fail_or_wait(view, d, wake, since, deadline);
    }
}

/// Whether the target's deadline starts afresh: a failure of this build recorded earlier
/// (cleared, as a spec change or a retry brought the build back), or a retry asked for now.
fn restarted(view: &View, d: &mut Decision) -> bool {
    let c = &view.input.desired.control;
    let recorded = c
        .record
        .aborted
        .as_ref()
        .is_some_and(|a| a.build_id == view.target && a.reason == PROGRESS_DEADLINE_EXCEEDED);
    let mut restart = false;
    if recorded {
        restart = true;
        if d.control
            .aborted
            .as_ref()
            .is_some_and(|a| a.reason == PROGRESS_DEADLINE_EXCEEDED)
        {
            d.control.aborted = None;
        }
    }
    if let Some(value) = retry_now(view) {
        d.control.retried = Some(value);
        restart = true;
    }
    restart
}

/// Past `deadline`: the build failed (recorded and held out of routing). Before it: the wait
/// is recorded, the pass woken at the deadline, and the message says when it falls.
fn fail_or_wait(
    view: &View,
    d: &mut Decision,
    wake: &mut Wake,
    since: Timestamp,
    deadline: Timestamp,
) {
    let input = view.input;
    let cause = cause(view);
    if input.now >= deadline {
        let message = failure_message(view, since, cause.as_deref());
        d.control.aborted = Some(AbortRecord {
            build_id: view.target.to_string(),
            reason: PROGRESS_DEADLINE_EXCEEDED.to_string(),
            message: message.clone(),
            at: Time(input.now),
            generation: Some(input.desired.generation),
        });
        d.control.waiting = None;
        hold(view, d, message, wake);
        return;
    }
    d.control.waiting = Some(WaitingSince {
        build_id: view.target.to_string(),
        since: Time(since),
        deadline: Time(deadline),
    });
    wake.at(input.now, deadline);
    let cause = cause.map_or(String::new(), |c| format!("; {c}"));
    d.progress.message = format!(
        "{}{cause}; progress deadline at {} ({}s)",
        d.progress.message,
        stamp(deadline),
        input.desired.progress_deadline.as_secs()
    );
}

/// The failed build stays out of routing: a change that would send it work is dropped, a ramp
/// it still has is cleared; nothing else changes (the Current version keeps serving).
fn hold(view: &View, d: &mut Decision, message: String, wake: &mut Wake) {
    let to_target = matches!(
        &d.change,
        Some(RoutingChange::SetCurrent { build_id } | RoutingChange::SetRamping { build_id, .. })
            if build_id == view.target
    );
    if to_target {
        d.change = None;
    }
    if view.target_ramp().is_some() {
        d.change = Some(RoutingChange::ClearRamp);
        wake.after(view.input.fast_poll);
    }
    d.start_gates.clear();
    d.start_step_gates = None;
    d.progress = Progress {
        phase: Phase::DeadlineExceeded,
        message,
        step: None,
        rollback: false,
    };
}

fn stamp(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn failure_message(view: &View, since: Timestamp, cause: Option<&str>) -> String {
    let input = view.input;
    let target = view.target;
    let secs = input.desired.progress_deadline.as_secs();
    let why = cause.map_or_else(
        || {
            format!(
                "its workers never polled Temporal ({})",
                view.target_readiness()
            )
        },
        str::to_string,
    );
    let current = match view.current {
        Some(b) => format!("build ID {b} stays Current"),
        None => "unversioned workers keep new workflows".to_string(),
    };
    let pods = if input.desired.abort_on_failure {
        "it is scaled to zero (spec.rollout.onFailure: Abort)"
    } else {
        "its Pods are kept for inspection"
    };
    format!(
        "Build ID {target} did not become routable within its progress deadline of {secs}s \
         (waiting since {}): {why}. Nothing was routed to it and {current}; {pods}. Change the \
         spec, or annotate {ANNOTATION_RETRY}={target} to wait again",
        stamp(since)
    )
}

/// What is known about why the target is not routable, in words naming the Pod; `None` when
/// nothing is certain yet.
pub fn cause(view: &View) -> Option<String> {
    let input = view.input;
    if let Some(t) = &input.target_pods {
        return Some(pod_words(t));
    }
    if let Some(d) = view.target_deployment
        && d.progress_deadline_exceeded
    {
        return Some(format!(
            "its Deployment {} reports ProgressDeadlineExceeded ({})",
            d.name,
            view.target_readiness()
        ));
    }
    let missing = view.missing_queues();
    if view.target_healthy() && !missing.is_empty() {
        return Some(format!(
            "its workers poll task queue(s) {} but not {}, which the Current version polls (a \
             worker configured for another task queue?)",
            input.target_task_queues.join(", "),
            missing.join(", ")
        ));
    }
    if view.target_healthy() && view.target_version.is_none() {
        return Some(format!(
            "its Pods are Ready but no worker of build ID {} polls Temporal (a worker configured \
             for another worker deployment or task queue?)",
            view.target
        ));
    }
    None
}

/// One Pod's trouble in words: the cause first, then the Pod.
pub fn pod_words(t: &PodTrouble) -> String {
    let pod = &t.pod;
    match &t.cause {
        PodCause::ImagePull {
            container,
            image,
            reason,
            message,
        } => format!(
            "image {image:?} cannot be pulled ({reason}{}) for container {container} of Pod {pod}",
            detail(message)
        ),
        PodCause::CrashLoop {
            container,
            restarts,
            exit_code,
            reason,
            message,
        } => {
            let exit = match (exit_code, reason) {
                (Some(c), Some(r)) => format!("last exit code {c} ({r})"),
                (Some(c), None) => format!("last exit code {c}"),
                (None, Some(r)) => format!("last exit {r}"),
                (None, None) => "last exit unknown".to_string(),
            };
            let m = message.as_deref().map_or(String::new(), detail);
            format!(
                "container {container} of Pod {pod} is crash-looping (CrashLoopBackOff, {restarts} \
                 restarts, {exit}{m})"
            )
        }
        PodCause::Unschedulable { reason, message } => {
            format!(
                "Pod {pod} cannot be scheduled (PodScheduled=False, {reason}{})",
                detail(message)
            )
        }
        PodCause::Waiting {
            container,
            reason,
            message,
        } => format!(
            "container {container} of Pod {pod} cannot start ({reason}{})",
            detail(message)
        ),
    }
}

fn detail(message: &str) -> String {
    let m = message.trim();
    if m.is_empty() {
        String::new()
    } else {
        // Kubelet messages can be long; the condition message stays readable.
        let cut: String = m.chars().take(200).collect();
        format!(": {cut}")
    }
}

/// Rule 5: the loss-of-pollers clock. Returns the record to keep and whether the loss has
/// outlasted the deadline; wakes at the deadline while it runs.
pub fn pollers_lost(input: &PlanInput, wake: &mut Wake) -> (Option<WaitingSince>, bool) {
    let previous = input.desired.control.record.pollers_lost.as_ref();
    let missing_build = match input.pollers.health.as_ref() {
        Some(Health::NoActivePollers { missing, .. }) => missing
            .first()
            .map_or_else(String::new, |m| m.build_id.clone()),
        // Recovered: the clock stops.
        Some(Health::Healthy) => return (None, false),
        // Nothing new is known (not asked, or Temporal could not say): the clock keeps running.
        Some(Health::Unknown { .. }) | None => {
            let Some(p) = previous else {
                return (None, false);
            };
            return (Some(p.clone()), expired(input, p.deadline.0, wake));
        }
    };
    let since = previous.map_or(input.now, |p| p.since.0);
    let Some(deadline) = clock::add(since, input.desired.progress_deadline) else {
        return (None, false);
    };
    let record = WaitingSince {
        build_id: missing_build,
        since: Time(since),
        deadline: Time(deadline),
    };
    let past = expired(input, deadline, wake);
    (Some(record), past)
}

fn expired(input: &PlanInput, deadline: Timestamp, wake: &mut Wake) -> bool {
    if input.now >= deadline {
        return true;
    }
    wake.at(input.now, deadline);
    false
}

/// The words `status.rs` adds to a `NoActivePollers` message while the clock runs or once
/// it ran out.
pub fn pollers_lost_words(record: Option<&WaitingSince>, progress_deadline: Duration) -> String {
    match record {
        Some(r) => format!(
            "without live pollers since {}; progress deadline {}s, at {}",
            stamp(r.since.0),
            progress_deadline.as_secs(),
            stamp(r.deadline.0)
        ),
        None => String::new(),
    }
}
