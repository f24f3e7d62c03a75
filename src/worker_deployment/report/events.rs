//! The events of one reconcile, all emitted by the report stage: one Warning per transition
//! into a blocking reason, Normal events for milestones (including the deletion path's), the
//! analysis verdict count and its abort announcement.

use crate::api::conditions as reason;
use crate::api::twd::{AnalysisVerdict, TemporalWorkerDeploymentStatus, VersionStatus};
use crate::api::{ANNOTATION_RESTART, TemporalWorkerDeployment};
use crate::events;
use crate::metrics::RolloutOutcome;
use crate::planner::adoption::Action;
use crate::planner::analysis::ANALYSIS_FAILED;
use crate::planner::model::{
    PinnedAction, PinnedBatch, Plan, PlanInput, Restart, RoutingChange, ScaleReason,
};
use crate::planner::{images, scaling};
use crate::worker_deployment::act::Done;
use crate::worker_deployment::attempt::Planned;
use crate::worker_deployment::context::Context;

/// One Warning event per transition into any blocking reason: failures and planned blocks
/// alike (failed gate, too many versions, routing managed elsewhere). No storms on retries.
pub async fn warn_on_transition(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    status: &TemporalWorkerDeploymentStatus,
) {
    let progressing = |s: &TemporalWorkerDeploymentStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == reason::PROGRESSING)
            .cloned()
    };
    let Some(p) = progressing(status) else {
        return;
    };
    // Lost pollers read as in progress (they may come back), yet deserve one Warning: it is
    // the only trace a loss that heals before the progress deadline leaves.
    let lost = p.status == "True" && p.reason == reason::NO_ACTIVE_POLLERS;
    // A pause is a human's choice, not a failure: no Warning for it. Neither for poller
    // health that recovered or could not be asked (unknown is not unhealthy).
    if (p.status != "False" && !lost)
        || p.reason == reason::ROLLOUT_COMPLETE
        || p.reason == reason::ROLLOUT_PAUSED
        || p.reason == reason::POLLERS_HEALTHY
        || p.reason == reason::POLLER_STATUS_UNKNOWN
    {
        return;
    }
    let previous = twd.status.as_ref().and_then(progressing).map(|c| c.reason);
    if previous.as_deref() != Some(p.reason.as_str()) {
        ctx.services.events.warning(twd, &p.reason, p.message).await;
    }
}

/// One Normal event when the live versions' pollers are back (`Ready` turns `PollersHealthy`).
pub async fn pollers_recovered(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    status: &TemporalWorkerDeploymentStatus,
) {
    let ready = |s: &TemporalWorkerDeploymentStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == reason::READY)
            .cloned()
    };
    let Some(now) = ready(status).filter(|c| c.reason == reason::POLLERS_HEALTHY) else {
        return;
    };
    let before = twd.status.as_ref().and_then(ready).map(|c| c.reason);
    if before.as_deref() != Some(reason::POLLERS_HEALTHY) {
        ctx.services
            .events
            .normal(twd, reason::POLLERS_HEALTHY, now.message)
            .await;
    }
}

/// Normal events for what this reconcile achieved.
pub async fn milestones(ctx: &Context, twd: &TemporalWorkerDeployment, planned: &Planned) {
    let build = &planned.input.desired.build_id;
    let was_registered = twd
        .status
        .as_ref()
        .and_then(|s| s.target_version.as_ref())
        .is_some_and(|t| {
            &t.version.build_id == build && t.version.status != VersionStatus::NotRegistered
        });
    if !was_registered && planned.input.temporal.version(build).is_some() {
        let note = format!("Build ID {build} is polling Temporal");
        ctx.services
            .events
            .normal(twd, events::VERSION_REGISTERED, note)
            .await;
    }
    for done in &planned.done {
        if let Some((reason, note)) = milestone(done, planned.plan.progress.rollback) {
            ctx.services.events.normal(twd, reason, note).await;
        }
        if let Done::Unversioned {
            action, message, ..
        } = done
        {
            let reason = match action {
                Action::ScaleToZero => events::ADOPTED_SCALED_DOWN,
                Action::Delete => events::ADOPTED_DELETED,
            };
            ctx.services
                .events
                .normal(twd, reason, message.clone())
                .await;
        }
    }
    count_promotions(ctx, planned);
    restart_skipped(ctx, twd, &planned.plan).await;
    draining_at_zero(ctx, twd, planned).await;
    mutable_images(ctx, twd, planned).await;
    deprecated_fields(ctx, twd).await;
}

/// A routing write that made a build Current ends a rollout: `rolled_back` for a rollback,
/// else `completed`, with the time since the target's Deployment was created.
fn count_promotions(ctx: &Context, planned: &Planned) {
    for done in &planned.done {
        let Done::Routed(RoutingChange::SetCurrent { build_id }) = done else {
            continue;
        };
        if planned.plan.progress.rollback {
            ctx.services
                .metrics
                .rollout_outcome(RolloutOutcome::RolledBack);
            continue;
        }
        ctx.services
            .metrics
            .rollout_outcome(RolloutOutcome::Completed);
        if let Some(took) = rollout_took(&planned.input, build_id, jiff::Timestamp::now()) {
            ctx.services.metrics.rollout_duration(took);
        }
    }
}

/// How long the rollout of `build_id` took until `now`: since its versioned Deployment was
/// created (`None` when it is not observed, or its clock reads later than `now`).
fn rollout_took(
    input: &PlanInput,
    build_id: &str,
    now: jiff::Timestamp,
) -> Option<std::time::Duration> {
    let created = input
        .deployments
        .iter()
        .find(|d| d.build_id == build_id)?
        .created_at?;
    std::time::Duration::try_from(now.duration_since(created)).ok()
}

/// What a status write records when it turns `Stalled` True: [`RolloutOutcome::Aborted`] for
/// `RolloutAborted`, [`RolloutOutcome::Stalled`] for any other reason; `None` when `Stalled`
/// was True already or is not True now. Counted once the status is written, so a retried
/// write does not count twice.
pub fn stall_outcome(
    twd: &TemporalWorkerDeployment,
    status: &TemporalWorkerDeploymentStatus,
) -> Option<RolloutOutcome> {
    let stalled = |s: &TemporalWorkerDeploymentStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == reason::STALLED && c.status == "True")
            .map(|c| c.reason.clone())
    };
    let now = stalled(status)?;
    if twd.status.as_ref().and_then(stalled).is_some() {
        return None;
    }
    Some(if now == reason::ROLLOUT_ABORTED {
        RolloutOutcome::Aborted
    } else {
        RolloutOutcome::Stalled
    })
}

/// One Warning per spec generation that uses deprecated field aliases: the first reconcile
/// of a generation (the last status observed another one) reports it; a restart does not.
async fn deprecated_fields(ctx: &Context, twd: &TemporalWorkerDeployment) {
    if let Some(note) = deprecation_warning(twd) {
        ctx.services
            .events
            .warning(twd, events::DEPRECATED_FIELD, note)
            .await;
    }
}

/// The `DeprecatedField` note to emit now: only for a generation no status has observed yet.
fn deprecation_warning(twd: &TemporalWorkerDeployment) -> Option<String> {
    let observed = twd.status.as_ref().and_then(|s| s.observed_generation);
    if observed.is_some() && observed == twd.metadata.generation {
        return None;
    }
    crate::render::settings::deprecation_note(&twd.spec)
}

/// The Ready message of the last status written: what was already reported.
fn last_ready_message(twd: &TemporalWorkerDeployment) -> &str {
    twd.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == reason::READY))
        .map(|c| c.message.as_str())
        .unwrap_or_default()
}

/// One Warning per mutable image reference newly reported: the last status's Ready message
/// already naming it means it was.
async fn mutable_images(ctx: &Context, twd: &TemporalWorkerDeployment, planned: &Planned) {
    let reported = last_ready_message(twd);
    let desired = &planned.input.desired;
    for m in &desired.mutable_images {
        if !reported.contains(&images::marker(m)) {
            let note = images::warning(m, &desired.build_id);
            ctx.services
                .events
                .warning(twd, events::MUTABLE_IMAGE, note)
                .await;
        }
    }
}

/// A restart request naming a build without a live Deployment: recorded as acted on in this
/// status write, so the Warning is published once.
async fn restart_skipped(ctx: &Context, twd: &TemporalWorkerDeployment, plan: &Plan) {
    if let Some(Restart::NoDeployment { build_id, value }) = &plan.restart {
        let note = format!(
            "{ANNOTATION_RESTART}={value} names build ID {build_id}, which has no Deployment: \
             nothing was restarted (name a live version: kubectl get deploy -l \
             temporal.io/build-id)"
        );
        ctx.services
            .events
            .warning(twd, events::RESTART_SKIPPED, note)
            .await;
    }
}

/// Draining versions at 0 replicas with open pinned workflows: a Normal event for each one
/// scaled back up, and one Warning per episode for each one an autoscaler holds there (the
/// last status's Ready message already naming it means it was reported).
async fn draining_at_zero(ctx: &Context, twd: &TemporalWorkerDeployment, planned: &Planned) {
    let woken = planned
        .plan
        .scale
        .iter()
        .filter(|s| s.reason == ScaleReason::DrainingAtZero);
    for s in woken {
        let scaled = planned
            .done
            .iter()
            .any(|d| matches!(d, Done::Scaled { name, .. } if *name == s.name));
        if scaled {
            ctx.services.metrics.draining_at_zero("scaled_up");
            let note = format!(
                "Scaled Deployment {} of Draining build ID {} from 0 to {} replicas: workflows pinned to it were left without workers",
                s.name, s.build_id, s.replicas
            );
            ctx.services
                .events
                .normal(twd, events::DRAINING_SCALED_UP, note)
                .await;
        }
    }
    let reported = last_ready_message(twd);
    for h in &planned.plan.held_at_zero {
        if !reported.contains(&scaling::held_marker(&h.build_id)) {
            ctx.services.metrics.draining_at_zero("held_by_autoscaler");
            let note = scaling::held_message(std::slice::from_ref(h));
            ctx.services
                .events
                .warning(twd, events::DRAINING_AT_ZERO, note)
                .await;
        }
    }
}

/// The Normal event for one successful write, if it is a milestone.
fn milestone(done: &Done, rollback: bool) -> Option<(&'static str, String)> {
    Some(match done {
        Done::Created { .. }
        | Done::Updated { .. }
        | Done::Restarted { .. }
        | Done::Scaled { .. }
        | Done::Deleted { .. } => return deployment_milestone(done),
        Done::Unversioned { .. }
        | Done::ManagerClaimed
        | Done::ConflictToken(_)
        | Done::Stopped { .. }
        | Done::CleanupAbandoned { .. }
        | Done::Adopted { .. } => return None,
        Done::GateStarted {
            task_queue,
            workflow_id,
        } => (
            events::GATE_STARTED,
            format!("Started gate workflow {workflow_id} on task queue {task_queue}"),
        ),
        Done::Routed(change) => routing_milestone(change, rollback),
        Done::VersionForgotten { build_id } => (
            events::VERSION_RECORD_DELETED,
            format!(
                "Deleted the record of build ID {build_id} in Temporal (its Deployment is gone)"
            ),
        ),
        Done::PinnedBatch(batch) => pinned_milestone(batch),
    })
}

/// The Normal event for a write to a versioned Deployment, if it is a milestone (a scale to
/// zero is; any other scale is not).
fn deployment_milestone(done: &Done) -> Option<(&'static str, String)> {
    Some(match done {
        Done::Created { name, build_id } => (
            events::VERSION_CREATED,
            format!("Created Deployment {name} for build ID {build_id}"),
        ),
        Done::Updated { name, build_id } => (
            events::VERSION_UPDATED,
            format!("Updated Deployment {name} of build ID {build_id} in place"),
        ),
        Done::Restarted {
            name,
            build_id,
            value,
        } => (
            events::VERSION_RESTARTED,
            format!(
                "Restarting the Pods of build ID {build_id} in place (Deployment {name}, \
                 {ANNOTATION_RESTART}={value}), by the Deployment's rolling update; build ID \
                 and routing unchanged"
            ),
        ),
        Done::Scaled {
            name,
            build_id,
            replicas: 0,
        } => (
            events::SCALED_DOWN,
            format!("Scaled Deployment {name} of build ID {build_id} to 0"),
        ),
        Done::Deleted { name, build_id } => (
            events::VERSION_DELETED,
            format!("Deleted Deployment {name} of build ID {build_id}"),
        ),
        _ => return None,
    })
}

/// The Normal event for a routing write: a promotion (or a rollback), a ramp step, a cleared ramp.
fn routing_milestone(change: &RoutingChange, rollback: bool) -> (&'static str, String) {
    match change {
        RoutingChange::SetCurrent { build_id } if rollback => (
            events::ROLLED_BACK,
            format!("Rolled back: build ID {build_id} is Current again"),
        ),
        RoutingChange::SetCurrent { build_id } => (
            events::PROMOTED,
            format!("Build ID {build_id} is now Current"),
        ),
        RoutingChange::SetRamping {
            build_id,
            percentage,
        } => (
            events::RAMP_STEP_STARTED,
            format!("Ramping build ID {build_id} to {percentage}%"),
        ),
        RoutingChange::ClearRamp => (events::RAMP_CLEARED, "Cleared a stale ramp".to_string()),
    }
}

/// The Normal event for one batch of actions on pinned workflows.
fn pinned_milestone(PinnedBatch { build_id, action }: &PinnedBatch) -> (&'static str, String) {
    match action {
        PinnedAction::Signal { name, new_build_id } => (
            events::PINNED_SIGNALLED,
            format!(
                "Signalled {name} to the workflows pinned to build ID {build_id}, naming {new_build_id} (spec.sunset.upgradeSignal)"
            ),
        ),
        PinnedAction::Cancel => (
            events::PINNED_CANCELLED,
            format!(
                "Requested cancellation of the workflows still pinned to build ID {build_id} (spec.sunset.cancelPinnedAfter)"
            ),
        ),
        PinnedAction::Terminate => (
            events::PINNED_TERMINATED,
            format!(
                "Terminated the workflows still pinned to build ID {build_id} (spec.sunset.terminatePinnedAfter)"
            ),
        ),
    }
}

/// Events of the deletion path: a Normal event per stopped version, a Warning when Temporal
/// cleanup was given up.
pub async fn finalized(ctx: &Context, twd: &TemporalWorkerDeployment, done: &[Done]) {
    for d in done {
        match d {
            Done::Stopped { name, build_id } => {
                let note = format!(
                    "Deleted Deployment {name} of build ID {build_id} (TemporalWorkerDeployment deleted)"
                );
                ctx.services
                    .events
                    .normal(twd, events::VERSION_DELETED, note)
                    .await;
            }
            Done::CleanupAbandoned { message } => {
                ctx.services
                    .events
                    .warning(twd, events::CLEANUP_ABANDONED, message.clone())
                    .await;
            }
            _ => {}
        }
    }
}

/// After the act stage: a new verdict is counted, and a new analysis abort is announced.
pub async fn analysis(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    input: &PlanInput,
    plan: &Plan,
) {
    let Some(obs) = &input.analysis else { return };
    let verdict = plan.control.analysis.as_ref().and_then(|r| {
        r.steps
            .iter()
            .find(|s| crate::api::twd::step_index(s.step) == Some(obs.step) && s.at.0 == obs.at)
    });
    if let Some(v) = verdict {
        ctx.services.metrics.analysis_verdict(match v.verdict {
            AnalysisVerdict::Pass => "pass",
            AnalysisVerdict::Fail => "fail",
            AnalysisVerdict::Inconclusive => "inconclusive",
        });
    }
    let before = input.desired.control.record.aborted.as_ref();
    if let Some(a) = &plan.control.aborted
        && a.reason == ANALYSIS_FAILED
        && before != Some(a)
    {
        ctx.services
            .events
            .warning(twd, ANALYSIS_FAILED, a.message.clone())
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::twd::DeploymentSettings;

    fn with_stalled(reason: Option<&str>) -> TemporalWorkerDeploymentStatus {
        let conditions = reason.map_or(serde_json::json!([]), |r| {
            serde_json::json!([{"type": "Stalled", "status": "True", "reason": r, "message": "",
                                "lastTransitionTime": "2026-12-01T00:00:00Z"}])
        });
        serde_json::from_value(serde_json::json!({"conditions": conditions})).expect("status")
    }

    #[test]
    fn turning_stalled_counts_once_and_an_abort_apart() {
        let mut twd = TemporalWorkerDeployment::test();
        let deadline = with_stalled(Some(reason::PROGRESS_DEADLINE_EXCEEDED));
        assert_eq!(
            stall_outcome(&twd, &deadline),
            Some(RolloutOutcome::Stalled)
        );
        assert_eq!(
            stall_outcome(&twd, &with_stalled(Some(reason::ROLLOUT_ABORTED))),
            Some(RolloutOutcome::Aborted)
        );
        assert_eq!(stall_outcome(&twd, &with_stalled(None)), None);
        twd.status = Some(deadline.clone());
        assert_eq!(stall_outcome(&twd, &deadline), None, "already stalled");
    }

    #[test]
    fn a_rollout_takes_from_its_deployment_s_creation() {
        use crate::planner::model::ObservedDeployment;
        let t = |s: i64| jiff::Timestamp::from_second(s).expect("time");
        let mut input = PlanInput::test();
        let mut d = ObservedDeployment::test("v2", 1);
        d.created_at = Some(t(1_000));
        input.deployments = vec![d];
        let took = rollout_took(&input, "v2", t(1_090));
        assert_eq!(took, Some(std::time::Duration::from_secs(90)));
        assert_eq!(rollout_took(&input, "v3", t(1_090)), None, "not observed");
        assert_eq!(rollout_took(&input, "v2", t(900)), None, "a clock behind");
    }

    #[test]
    fn deprecated_aliases_are_warned_about_once_per_generation() {
        let mut twd = TemporalWorkerDeployment::test().generation(2);
        assert_eq!(
            deprecation_warning(&twd),
            None,
            "the current shape is not warned about"
        );
        twd.spec.deployment = Some(DeploymentSettings {
            labels: [("team".to_string(), "a".to_string())].into(),
            ..Default::default()
        });
        let note = deprecation_warning(&twd).expect("a first reconcile warns");
        assert!(note.contains("spec.deployment.labels"), "{note}");
        let seen = twd.clone().with_conditions(2, &[]);
        assert_eq!(
            deprecation_warning(&seen),
            None,
            "already reported for generation 2"
        );
        let changed = seen.generation(3);
        assert!(
            deprecation_warning(&changed).is_some(),
            "a new generation warns again"
        );
    }
}
