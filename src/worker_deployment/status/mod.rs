//! Derives the whole `TemporalWorkerDeploymentStatus` once per reconcile: the GitOps contract.
//!
//! [`compute`] takes the previous status (only to keep condition transition times and, when
//! nothing could be observed, the last known versions), the object's generation, a
//! [`Report`] of what this reconcile saw and did, and the time. It always writes
//! `observedGeneration` together with all four conditions:
//!
//! | Situation | Ready | Progressing | Reconciling | Stalled |
//! |---|---|---|---|---|
//! | target Current | True / RolloutComplete | False / RolloutComplete | False | False |
//! | moving forward (WaitingForPollers, WaitingForPromotion, WaitingForGate, Ramping) | False | True | True | False |
//! | blocked, retried (connection, fetch, execution, TooManyVersions, managed elsewhere, deleting), or paused | False | False | True | False |
//! | live version without pollers (NoActivePollers), within the progress deadline | False | True | True | False |
//! | terminal (InvalidSpec, GateWorkflowFailed, ConnectionRolloutStalled, DuplicateInstall, RolloutAborted, ProgressDeadlineExceeded) | False | False | False | True |
//! | target Current, Temporal not askable about its pollers (PollerStatusUnknown) | Unknown | False | True | False |
//!
//! Poller health (`planner::poller_health`) reads over a complete or moving rollout: a live
//! version without live pollers is `NoActivePollers` (in progress), `ProgressDeadlineExceeded`
//! once the loss outlasts the progress deadline (`planner::deadline`); recovered, a complete
//! rollout reads `PollersHealthy` until the next rollout.
//!
//! All four carry the same reason and message, so every consumer (kubectl wait, kstatus,
//! Argo CD, the status API, metrics) reads the same truth. `lastTransitionTime` moves only
//! when that condition's status flips.

mod versions;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::api::conditions as reason;
use crate::api::twd::{RolloutControl, TemporalWorkerDeploymentStatus};
use crate::planner::deadline;
use crate::planner::model::{Phase, Plan, PlanInput, RoutingChange};
use crate::planner::poller_health::{self, Reading};
use versions::{Effective, versions};

/// What one reconcile has to report.
#[derive(Clone, Debug)]
pub enum Report<'a> {
    /// A plan was made and executed (fully, or up to the failure in `outcome`).
    Planned {
        input: &'a PlanInput,
        plan: &'a Plan,
        /// The routing change that Temporal accepted this reconcile, if any.
        routed: Option<&'a RoutingChange>,
        outcome: Result<(), Blocked>,
    },
    /// Nothing could be planned (invalid spec, connection or Temporal unreachable, deleting…).
    /// The previous version fields are kept: they are the last known truth.
    Blocked(Blocked),
}

/// Why the rollout cannot move forward right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// A reason constant from [`crate::api::conditions`].
    pub reason: &'static str,
    pub message: String,
    /// Terminal: needs a spec change or a human (`Stalled=True`). Otherwise it is retried.
    pub stalled: bool,
}

/// How the conditions should read.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Verdict {
    kind: Kind,
    reason: &'static str,
    message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Complete,
    Progressing,
    Blocked,
    Stalled,
    /// Complete, but whether its workers poll could not be asked: `Ready=Unknown`.
    Unknown,
}

/// The status to write. `generation` is the object's `metadata.generation`.
pub fn compute(
    previous: Option<&TemporalWorkerDeploymentStatus>,
    generation: i64,
    report: &Report,
    now: Timestamp,
) -> TemporalWorkerDeploymentStatus {
    let (mut status, verdict) = match report {
        Report::Blocked(b) => (previous.cloned().unwrap_or_default(), blocked_verdict(b)),
        Report::Planned {
            input,
            plan,
            routed,
            outcome,
        } => {
            let routing = Effective::new(input, *routed);
            let mut status = versions(input, plan, &routing, routed.is_some(), outcome.is_ok());
            status.rollout_control = control_record(previous, plan, routed.is_some());
            status.adoption = crate::planner::adoption::status(
                plan.adoption.as_ref(),
                previous.and_then(|p| p.adoption.as_ref()),
                outcome.is_ok(),
            );
            let verdict = match outcome {
                Err(b) => blocked_verdict(b),
                Ok(()) => delayed(
                    pollers(
                        planned_verdict(
                            plan,
                            routing.current.as_deref() == Some(input.desired.build_id.as_str()),
                        ),
                        poller_health::reading(
                            input.pollers.health.as_ref(),
                            ready_reason(previous),
                        ),
                        PollerClock {
                            words: deadline::pollers_lost_words(
                                plan.control.pollers_lost.as_ref(),
                                input.desired.progress_deadline,
                            ),
                            past: plan.pollers_lost_too_long,
                        },
                    ),
                    input.delayed_by_budget,
                ),
            };
            (status, verdict)
        }
    };
    status.observed_generation = Some(generation);
    let old = previous
        .map(|p| p.conditions.as_slice())
        .unwrap_or_default();
    status.conditions = conditions(old, generation, &verdict, now);
    status
}

/// The plan's rollout-control record, unless its routing change did not happen: then an
/// annotation it acts on is not recorded, so the next reconcile tries it again.
fn control_record(
    previous: Option<&TemporalWorkerDeploymentStatus>,
    plan: &Plan,
    routed: bool,
) -> Option<RolloutControl> {
    let record = if plan.routing.is_some() && !routed {
        previous.and_then(|p| p.rollout_control.clone())?
    } else {
        plan.control.clone()
    };
    (!record.is_empty()).then_some(record)
}

fn blocked_verdict(b: &Blocked) -> Verdict {
    Verdict {
        kind: if b.stalled {
            Kind::Stalled
        } else {
            Kind::Blocked
        },
        reason: b.reason,
        message: b.message.clone(),
    }
}

fn planned_verdict(plan: &Plan, target_current: bool) -> Verdict {
    let p = &plan.progress;
    let (kind, reason) = match p.phase {
        Phase::WaitingForPollers => (Kind::Progressing, reason::WAITING_FOR_POLLERS),
        Phase::WaitingForPromotion => (Kind::Progressing, reason::WAITING_FOR_PROMOTION),
        Phase::WaitingForGate => (Kind::Progressing, reason::WAITING_FOR_GATE),
        Phase::Ramping => (Kind::Progressing, reason::RAMPING),
        Phase::Complete => (Kind::Complete, reason::ROLLOUT_COMPLETE),
        Phase::GateFailed => (Kind::Stalled, reason::GATE_WORKFLOW_FAILED),
        Phase::TooManyVersions => (Kind::Blocked, reason::TOO_MANY_VERSIONS),
        Phase::ManagedElsewhere => (Kind::Blocked, reason::MANAGED_ELSEWHERE),
        Phase::ConnectionRolloutStalled => (Kind::Stalled, reason::CONNECTION_ROLLOUT_STALLED),
        Phase::DuplicateInstall => (Kind::Stalled, reason::DUPLICATE_INSTALL),
        Phase::Paused => (Kind::Blocked, reason::ROLLOUT_PAUSED),
        Phase::Aborted => (Kind::Stalled, reason::ROLLOUT_ABORTED),
        Phase::DeadlineExceeded => (Kind::Stalled, reason::PROGRESS_DEADLINE_EXCEEDED),
    };
    // Ready=True promises the target is Current in Temporal; never claim it otherwise.
    if kind == Kind::Complete && !target_current {
        return Verdict {
            kind: Kind::Progressing,
            reason: reason::WAITING_FOR_PROMOTION,
            message: p.message.clone(),
        };
    }
    Verdict {
        kind,
        reason,
        message: p.message.clone(),
    }
}

/// The reason `Ready` had in the last status; a loss of pollers that outlasted the progress
/// deadline reads as the loss it is (so that its end reads `PollersHealthy`).
fn ready_reason(previous: Option<&TemporalWorkerDeploymentStatus>) -> Option<&str> {
    let c = previous?
        .conditions
        .iter()
        .find(|c| c.type_ == reason::READY)?;
    if c.reason == reason::PROGRESS_DEADLINE_EXCEEDED
        && c.message.starts_with(reason::NO_ACTIVE_POLLERS)
    {
        return Some(reason::NO_ACTIVE_POLLERS);
    }
    Some(c.reason.as_str())
}

/// The loss-of-pollers clock ([`deadline::pollers_lost`]) in words, and whether it ran out.
struct PollerClock {
    words: String,
    past: bool,
}

/// Poller health over the planned verdict: missing pollers of a live version make a complete
/// or moving rollout in progress (`NoActivePollers`: it may heal), and `Stalled` with
/// `ProgressDeadlineExceeded` only once the loss outlasts the progress deadline; it clears
/// once they poll again. An unknown status or a recovery changes only a complete one.
fn pollers(v: Verdict, reading: Option<Reading>, clock: PollerClock) -> Verdict {
    let with_clock = |m: String| {
        if clock.words.is_empty() {
            m
        } else {
            format!("{m}; {}", clock.words)
        }
    };
    match (reading, v.kind) {
        (Some(Reading::NoActivePollers(m)), Kind::Complete | Kind::Progressing) => {
            let m = if v.kind == Kind::Progressing {
                format!("{}; rollout: {}", with_clock(m), v.message)
            } else {
                with_clock(m)
            };
            if clock.past {
                Verdict {
                    kind: Kind::Stalled,
                    reason: reason::PROGRESS_DEADLINE_EXCEEDED,
                    message: format!("{}: {m}", reason::NO_ACTIVE_POLLERS),
                }
            } else {
                Verdict {
                    kind: Kind::Progressing,
                    reason: reason::NO_ACTIVE_POLLERS,
                    message: m,
                }
            }
        }
        (Some(Reading::Unknown(m)), Kind::Complete) => Verdict {
            kind: Kind::Unknown,
            reason: reason::POLLER_STATUS_UNKNOWN,
            message: m,
        },
        (Some(Reading::Recovered(m)), Kind::Complete) => Verdict {
            kind: Kind::Complete,
            reason: reason::POLLERS_HEALTHY,
            message: format!("{}; {m}", v.message),
        },
        _ => v,
    }
}

/// A rollout still moving forward whose Temporal calls waited long for the client-side
/// budget says so, with what it is doing; finished or blocked rollouts keep their reason.
fn delayed(v: Verdict, waited: Option<std::time::Duration>) -> Verdict {
    match waited {
        Some(w) if v.kind == Kind::Progressing => Verdict {
            kind: Kind::Progressing,
            reason: reason::DELAYED_BY_TEMPORAL_BUDGET,
            message: format!(
                "{}; its Temporal calls waited {:.1} s for the controller's request budget of this Temporal namespace (--temporal-qps)",
                v.message,
                w.as_secs_f64()
            ),
        },
        _ => v,
    }
}

fn conditions(old: &[Condition], generation: i64, v: &Verdict, now: Timestamp) -> Vec<Condition> {
    const T: &str = "True";
    const F: &str = "False";
    let (ready, progressing, reconciling, stalled) = match v.kind {
        Kind::Complete => (T, F, F, F),
        Kind::Progressing => (F, T, T, F),
        Kind::Blocked => (F, F, T, F),
        Kind::Stalled => (F, F, F, T),
        Kind::Unknown => ("Unknown", F, T, F),
    };
    reason::with_transitions(
        old,
        &[
            (reason::READY, ready),
            (reason::PROGRESSING, progressing),
            (reason::RECONCILING, reconciling),
            (reason::STALLED, stalled),
        ],
        (v.reason, &v.message),
        generation,
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::twd::{GateWorkflowStatus, PinnedWorkflow, VersionStatus};
    use crate::fixtures::{ME, NOW, ago, hours, ts};
    use crate::planner::model::ObservedDeployment;
    use crate::planner::model::{DeleteDeployment, DeleteReason, Progress, StepProgress};
    use crate::temporal::state::{GateObservation, PinnedWorkflowRef, VersionState};
    use crate::temporal::state::{PinnedView, TemporalVersionStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn plan_with(phase: Phase, message: &str) -> Plan {
        Plan {
            progress: Progress {
                phase,
                message: message.into(),
                step: None,
                rollback: false,
            },
            ..Default::default()
        }
    }

    fn cond<'a>(s: &'a TemporalWorkerDeploymentStatus, type_: &str) -> &'a Condition {
        s.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    /// (status, reason) of Ready, Progressing, Reconciling, Stalled.
    fn summary(s: &TemporalWorkerDeploymentStatus) -> Vec<(&str, &str)> {
        [
            reason::READY,
            reason::PROGRESSING,
            reason::RECONCILING,
            reason::STALLED,
        ]
        .iter()
        .map(|t| {
            let c = cond(s, t);
            (c.status.as_str(), c.reason.as_str())
        })
        .collect()
    }

    fn planned(
        input: &PlanInput,
        plan: &Plan,
        routed: Option<&RoutingChange>,
    ) -> TemporalWorkerDeploymentStatus {
        let report = Report::Planned {
            input,
            plan,
            routed,
            outcome: Ok(()),
        };
        compute(None, 7, &report, ts(NOW))
    }

    #[test]
    fn every_phase_maps_to_the_documented_conditions() {
        let i = PlanInput::test();
        let cases = [
            (
                Phase::WaitingForPollers,
                ["False", "True", "True", "False"],
                reason::WAITING_FOR_POLLERS,
            ),
            (
                Phase::WaitingForPromotion,
                ["False", "True", "True", "False"],
                reason::WAITING_FOR_PROMOTION,
            ),
            (
                Phase::WaitingForGate,
                ["False", "True", "True", "False"],
                reason::WAITING_FOR_GATE,
            ),
            (
                Phase::Ramping,
                ["False", "True", "True", "False"],
                reason::RAMPING,
            ),
            (
                Phase::GateFailed,
                ["False", "False", "False", "True"],
                reason::GATE_WORKFLOW_FAILED,
            ),
            (
                Phase::TooManyVersions,
                ["False", "False", "True", "False"],
                reason::TOO_MANY_VERSIONS,
            ),
            (
                Phase::ManagedElsewhere,
                ["False", "False", "True", "False"],
                reason::MANAGED_ELSEWHERE,
            ),
            (
                Phase::ConnectionRolloutStalled,
                ["False", "False", "False", "True"],
                reason::CONNECTION_ROLLOUT_STALLED,
            ),
            (
                Phase::DuplicateInstall,
                ["False", "False", "False", "True"],
                reason::DUPLICATE_INSTALL,
            ),
            (
                Phase::Paused,
                ["False", "False", "True", "False"],
                reason::ROLLOUT_PAUSED,
            ),
            (
                Phase::Aborted,
                ["False", "False", "False", "True"],
                reason::ROLLOUT_ABORTED,
            ),
        ];
        for (phase, want, want_reason) in cases {
            let s = planned(&i, &plan_with(phase, "detail"), None);
            let got = summary(&s);
            for (k, (status, r)) in got.iter().enumerate() {
                assert_eq!(*status, want[k], "{phase:?} condition #{k}");
                assert_eq!(*r, want_reason, "{phase:?}");
            }
            assert!(s.conditions.iter().all(|c| c.message == "detail"));
        }
    }

    /// `plan` stopped by a failed write before its routing change.
    fn execution_failed<'a>(i: &'a PlanInput, plan: &'a Plan, message: &str) -> Report<'a> {
        Report::Planned {
            input: i,
            plan,
            routed: None,
            outcome: Err(Blocked {
                reason: reason::PLAN_EXECUTION_FAILED,
                message: message.into(),
                stalled: false,
            }),
        }
    }

    #[test]
    fn an_annotation_is_recorded_only_once_its_routing_change_happened() {
        let i = PlanInput::test();
        let mut plan = plan_with(Phase::Complete, "promoted");
        plan.routing = Some(RoutingChange::SetCurrent {
            build_id: "v2".into(),
        });
        plan.control.promoted = Some("v2".into());
        let before = TemporalWorkerDeploymentStatus {
            rollout_control: Some(RolloutControl {
                skipped_step: Some("v2/0".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = compute(Some(&before), 7, &execution_failed(&i, &plan, "m"), ts(NOW));
        assert_eq!(s.rollout_control, before.rollout_control, "kept, retried");
        let s = planned(&i, &plan, plan.routing.as_ref());
        assert_eq!(s.rollout_control, Some(plan.control.clone()));
        // Nothing to record: no field in status.
        let s = planned(&i, &plan_with(Phase::Ramping, "r"), None);
        assert_eq!(s.rollout_control, None);
    }

    #[test]
    fn complete_is_ready_only_when_the_target_is_current() {
        let mut i = PlanInput::test();
        i.temporal.routing.current_build_id = Some("v2".into());
        let s = planned(
            &i,
            &plan_with(Phase::Complete, "Rollout complete for build ID v2"),
            None,
        );
        assert_eq!(
            summary(&s),
            vec![
                ("True", reason::ROLLOUT_COMPLETE),
                ("False", reason::ROLLOUT_COMPLETE),
                ("False", reason::ROLLOUT_COMPLETE),
                ("False", reason::ROLLOUT_COMPLETE)
            ]
        );
        assert_eq!(
            cond(&s, reason::READY).message,
            "Rollout complete for build ID v2"
        );

        // A plan claiming completion for a target Temporal does not list as Current is not Ready.
        let s = planned(&PlanInput::test(), &plan_with(Phase::Complete, "x"), None);
        assert_eq!(cond(&s, reason::READY).status, "False");
        assert_eq!(
            cond(&s, reason::READY).reason,
            reason::WAITING_FOR_PROMOTION
        );
    }

    /// A complete rollout of v2 whose task queue `q` has no live poller of v2.
    fn pollers_lost_on_current_v2() -> (PlanInput, Plan) {
        use crate::planner::poller_health::{Health, Missing};
        let mut i = PlanInput::test();
        i.temporal.routing.current_build_id = Some("v2".into());
        i.pollers.health = Some(Health::NoActivePollers {
            missing: vec![Missing {
                build_id: "v2".into(),
                task_queue: "q".into(),
            }],
            live_within: std::time::Duration::from_secs(120),
        });
        (
            i,
            plan_with(Phase::Complete, "Rollout complete for build ID v2"),
        )
    }

    #[test]
    fn poller_health_reads_over_a_complete_or_moving_rollout() {
        use crate::planner::poller_health::Health;
        let (mut i, complete) = pollers_lost_on_current_v2();
        let gone = planned(&i, &complete, None);
        // In progress: lost pollers may come back, so not Stalled yet.
        assert_eq!(
            summary(&gone),
            vec![
                ("False", reason::NO_ACTIVE_POLLERS),
                ("True", reason::NO_ACTIVE_POLLERS),
                ("True", reason::NO_ACTIVE_POLLERS),
                ("False", reason::NO_ACTIVE_POLLERS),
            ]
        );
        // A moving rollout reads it too, and says what it was doing.
        let ramping = planned(
            &i,
            &plan_with(Phase::Ramping, "Ramping build ID v2 at 10%"),
            None,
        );
        let m = &cond(&ramping, reason::READY).message;
        assert!(m.ends_with("rollout: Ramping build ID v2 at 10%"), "{m}");
        assert_eq!(cond(&ramping, reason::STALLED).status, "False");
        // Back: PollersHealthy after NoActivePollers, and it stays until the next rollout.
        i.pollers.health = Some(Health::Healthy);
        let report = Report::Planned {
            input: &i,
            plan: &complete,
            routed: None,
            outcome: Ok(()),
        };
        let back = compute(Some(&gone), 7, &report, ts(NOW));
        assert_eq!(
            summary(&back),
            vec![
                ("True", reason::POLLERS_HEALTHY),
                ("False", reason::POLLERS_HEALTHY),
                ("False", reason::POLLERS_HEALTHY),
                ("False", reason::POLLERS_HEALTHY),
            ]
        );
        let later = compute(Some(&back), 7, &report, ts(NOW));
        assert_eq!(cond(&later, reason::READY).reason, reason::POLLERS_HEALTHY);
        // Healthy without trouble before reads as it did.
        let plain = planned(&i, &complete, None);
        assert_eq!(cond(&plain, reason::READY).reason, reason::ROLLOUT_COMPLETE);
        // Temporal could not be asked: Ready is Unknown, never Stalled; a moving rollout keeps
        // its own reason.
        i.pollers.health = Some(Health::Unknown {
            why: "timeout".into(),
        });
        let unknown = planned(&i, &complete, None);
        assert_eq!(
            summary(&unknown),
            vec![
                ("Unknown", reason::POLLER_STATUS_UNKNOWN),
                ("False", reason::POLLER_STATUS_UNKNOWN),
                ("True", reason::POLLER_STATUS_UNKNOWN),
                ("False", reason::POLLER_STATUS_UNKNOWN),
            ]
        );
        let moving = planned(&i, &plan_with(Phase::Ramping, "r"), None);
        assert_eq!(cond(&moving, reason::READY).reason, reason::RAMPING);
        // A blocked or paused rollout keeps its reason whatever the pollers say.
        i.pollers.health = Some(Health::NoActivePollers {
            missing: vec![],
            live_within: std::time::Duration::from_secs(120),
        });
        let paused = planned(&i, &plan_with(Phase::Paused, "p"), None);
        assert_eq!(cond(&paused, reason::READY).reason, reason::ROLLOUT_PAUSED);
    }

    #[test]
    fn a_loss_of_pollers_past_the_progress_deadline_stalls_and_recovers_as_healthy() {
        use crate::planner::poller_health::Health;
        let (i, complete) = pollers_lost_on_current_v2();
        // Past the progress deadline: Stalled, by the same clock, with the clock in words.
        let mut past = complete.clone();
        past.pollers_lost_too_long = true;
        past.control.pollers_lost = Some(crate::api::twd::WaitingSince {
            build_id: "v2".into(),
            since: Time(ago(600)),
            deadline: Time(ts(NOW)),
        });
        let too_long = planned(&i, &past, None);
        assert_eq!(
            summary(&too_long),
            vec![
                ("False", reason::PROGRESS_DEADLINE_EXCEEDED),
                ("False", reason::PROGRESS_DEADLINE_EXCEEDED),
                ("False", reason::PROGRESS_DEADLINE_EXCEEDED),
                ("True", reason::PROGRESS_DEADLINE_EXCEEDED),
            ]
        );
        let m = &cond(&too_long, reason::STALLED).message;
        assert!(m.starts_with("NoActivePollers: "), "{m}");
        assert!(m.contains("progress deadline 600s"), "{m}");
        // Back after the deadline: PollersHealthy too.
        let mut healthy = i.clone();
        healthy.pollers.health = Some(Health::Healthy);
        let report = Report::Planned {
            input: &healthy,
            plan: &complete,
            routed: None,
            outcome: Ok(()),
        };
        let back = compute(Some(&too_long), 7, &report, ts(NOW));
        assert_eq!(cond(&back, reason::READY).reason, reason::POLLERS_HEALTHY);
    }

    #[test]
    fn a_set_current_executed_this_reconcile_counts() {
        // Nobody holds the manager identity yet; someone else changed the routing last.
        let mut i = PlanInput::test();
        i.temporal.manager_identity.clear();
        i.temporal.last_modifier_identity = "someone".into();
        let change = RoutingChange::SetCurrent {
            build_id: "v2".into(),
        };
        let mut plan = plan_with(Phase::Complete, "Rollout complete for build ID v2");
        plan.routing = Some(change.clone());
        plan.claim_manager = true;
        let s = planned(&i, &plan, Some(&change));
        assert_eq!(cond(&s, reason::READY).status, "True");
        assert_eq!(
            s.target_version.as_ref().unwrap().version.status,
            VersionStatus::Current
        );
        assert_eq!(s.current_version.as_ref().unwrap().build_id, "v2");
        // The old current lost the slot: Temporal drains it at once.
        assert_eq!(s.deprecated_versions.len(), 1);
        assert_eq!(s.deprecated_versions[0].version.build_id, "v1");
        assert_eq!(
            s.deprecated_versions[0].version.status,
            VersionStatus::Draining
        );
        assert_eq!(s.manager_identity.as_deref(), Some(ME));
        assert_eq!(s.last_modifier_identity.as_deref(), Some(ME));

        // The same plan whose routing never ran (it failed earlier) is not Ready.
        let s = compute(
            None,
            7,
            &execution_failed(&i, &plan, "scale: boom"),
            ts(NOW),
        );
        assert_eq!(
            summary(&s),
            vec![
                ("False", reason::PLAN_EXECUTION_FAILED),
                ("False", reason::PLAN_EXECUTION_FAILED),
                ("True", reason::PLAN_EXECUTION_FAILED),
                ("False", reason::PLAN_EXECUTION_FAILED)
            ]
        );
        assert_eq!(
            s.target_version.as_ref().unwrap().version.status,
            VersionStatus::Inactive
        );
        assert_eq!(s.manager_identity, None);
        assert_eq!(s.last_modifier_identity.as_deref(), Some("someone"));
    }

    #[test]
    fn a_set_ramping_executed_this_reconcile_shows_the_step() {
        let i = PlanInput::test();
        let change = RoutingChange::SetRamping {
            build_id: "v2".into(),
            percentage: 25.0,
        };
        let next = ts("2026-03-02T12:10:00Z");
        let mut plan = plan_with(
            Phase::Ramping,
            "Ramping build ID v2 at 25% (step 1 of 2); next step at 2026-03-02T12:10:00Z",
        );
        plan.routing = Some(change.clone());
        plan.progress.step = Some(StepProgress {
            index: 0,
            ramp_percentage: 25.0,
            started_at: Some(ts(NOW)),
            next_at: Some(next),
        });
        let s = planned(&i, &plan, Some(&change));
        let t = s.target_version.as_ref().unwrap();
        assert_eq!(t.version.status, VersionStatus::Ramping);
        assert_eq!(t.ramp_percentage, Some(25.0));
        // The step's number, as its message says ("step 1 of 2"): steps[0] is step 1.
        assert_eq!(t.current_step, Some(1));
        assert_eq!(t.step_started_at, Some(Time(ts(NOW))));
        assert_eq!(t.next_step_at, Some(Time(next)));
        assert_eq!(t.ramping_since, Some(Time(ts(NOW))));
        assert_eq!(cond(&s, reason::READY).reason, reason::RAMPING);
        assert!(
            cond(&s, reason::PROGRESSING)
                .message
                .contains("step 1 of 2")
        );
        assert_eq!(s.current_version.as_ref().unwrap().build_id, "v1");

        // Without the routing having run, the target is not shown ramping.
        let s = planned(&i, &plan, None);
        let t = s.target_version.as_ref().unwrap();
        assert_eq!(t.version.status, VersionStatus::Inactive);
        assert_eq!((t.ramp_percentage, t.current_step), (None, None));
    }

    #[test]
    fn blocked_reports_keep_the_last_known_versions() {
        let i = PlanInput::test();
        let before = planned(&i, &plan_with(Phase::WaitingForPromotion, "w"), None);
        let b = Blocked {
            reason: reason::STATE_FETCH_FAILED,
            message: "describe: unavailable".into(),
            stalled: false,
        };
        let s = compute(Some(&before), 8, &Report::Blocked(b), ts(NOW));
        assert_eq!(s.target_version, before.target_version);
        assert_eq!(s.current_version, before.current_version);
        assert_eq!(s.observed_generation, Some(8));
        assert_eq!(
            summary(&s),
            vec![
                ("False", reason::STATE_FETCH_FAILED),
                ("False", reason::STATE_FETCH_FAILED),
                ("True", reason::STATE_FETCH_FAILED),
                ("False", reason::STATE_FETCH_FAILED)
            ]
        );
        assert_eq!(cond(&s, reason::READY).message, "describe: unavailable");
    }

    #[test]
    fn terminal_blocks_are_stalled_not_reconciling() {
        let b = Blocked {
            reason: reason::INVALID_SPEC,
            message: "spec.rollout.steps: bad".into(),
            stalled: true,
        };
        let s = compute(None, 2, &Report::Blocked(b), ts(NOW));
        assert_eq!(
            summary(&s),
            vec![
                ("False", reason::INVALID_SPEC),
                ("False", reason::INVALID_SPEC),
                ("False", reason::INVALID_SPEC),
                ("True", reason::INVALID_SPEC)
            ]
        );
    }

    #[test]
    fn reconciling_and_stalled_are_never_both_true() {
        let i = PlanInput::test();
        let mut reports: Vec<Report> = Vec::new();
        let plans: Vec<Plan> = [
            Phase::WaitingForPollers,
            Phase::WaitingForPromotion,
            Phase::WaitingForGate,
            Phase::Ramping,
            Phase::Complete,
            Phase::GateFailed,
            Phase::TooManyVersions,
            Phase::ManagedElsewhere,
            Phase::ConnectionRolloutStalled,
            Phase::DuplicateInstall,
            Phase::Paused,
            Phase::Aborted,
        ]
        .into_iter()
        .map(|p| plan_with(p, "m"))
        .collect();
        for p in &plans {
            reports.push(Report::Planned {
                input: &i,
                plan: p,
                routed: None,
                outcome: Ok(()),
            });
            for stalled in [false, true] {
                let b = Blocked {
                    reason: reason::PLAN_EXECUTION_FAILED,
                    message: "m".into(),
                    stalled,
                };
                reports.push(Report::Planned {
                    input: &i,
                    plan: p,
                    routed: None,
                    outcome: Err(b.clone()),
                });
                reports.push(Report::Blocked(b));
            }
        }
        for r in &reports {
            let s = compute(None, 1, r, ts(NOW));
            assert_eq!(s.conditions.len(), 4);
            let is_true = |t: &str| cond(&s, t).status == "True";
            assert!(
                !(is_true(reason::RECONCILING) && is_true(reason::STALLED)),
                "{r:?}"
            );
            assert!(
                !(is_true(reason::READY) && is_true(reason::RECONCILING)),
                "{r:?}"
            );
            assert!(
                s.conditions
                    .iter()
                    .all(|c| c.observed_generation == Some(1)),
                "every condition carries observedGeneration"
            );
        }
    }

    #[test]
    fn a_rollout_slowed_by_the_budget_says_so_and_keeps_what_it_does() {
        let mut i = PlanInput::test();
        i.delayed_by_budget = Some(std::time::Duration::from_millis(7400));
        let s = planned(
            &i,
            &plan_with(Phase::Ramping, "Ramping build ID v2 at 10%"),
            None,
        );
        assert_eq!(
            summary(&s),
            vec![
                ("False", reason::DELAYED_BY_TEMPORAL_BUDGET),
                ("True", reason::DELAYED_BY_TEMPORAL_BUDGET),
                ("True", reason::DELAYED_BY_TEMPORAL_BUDGET),
                ("False", reason::DELAYED_BY_TEMPORAL_BUDGET),
            ]
        );
        let message = &cond(&s, reason::READY).message;
        assert!(
            message.starts_with("Ramping build ID v2 at 10%;") && message.contains("waited 7.4 s"),
            "{message}"
        );
        // Finished or blocked rollouts keep their own reason; an undelayed one says Ramping.
        let done = planned(&i, &plan_with(Phase::TooManyVersions, "m"), None);
        assert_eq!(cond(&done, reason::READY).reason, reason::TOO_MANY_VERSIONS);
        i.delayed_by_budget = None;
        let s = planned(&i, &plan_with(Phase::Ramping, "r"), None);
        assert_eq!(cond(&s, reason::READY).reason, reason::RAMPING);
    }

    #[test]
    fn observed_generation_is_written_with_the_conditions() {
        let i = PlanInput::test();
        let p = plan_with(Phase::WaitingForPollers, "m");
        let s = compute(
            None,
            42,
            &Report::Planned {
                input: &i,
                plan: &p,
                routed: None,
                outcome: Ok(()),
            },
            ts(NOW),
        );
        assert_eq!(s.observed_generation, Some(42));
        assert!(
            s.conditions
                .iter()
                .all(|c| c.observed_generation == Some(42))
        );
    }

    #[test]
    fn last_transition_time_moves_only_when_the_status_flips() {
        let i = PlanInput::test();
        let waiting = plan_with(Phase::WaitingForPollers, "a");
        let ramping = plan_with(Phase::Ramping, "b");
        let first = compute(
            None,
            1,
            &Report::Planned {
                input: &i,
                plan: &waiting,
                routed: None,
                outcome: Ok(()),
            },
            ts(NOW),
        );
        assert!(
            first
                .conditions
                .iter()
                .all(|c| c.last_transition_time == Time(ts(NOW)))
        );

        // Reason and message change, statuses do not: times stay.
        let later = ts("2026-03-02T12:05:00Z");
        let second = compute(
            Some(&first),
            2,
            &Report::Planned {
                input: &i,
                plan: &ramping,
                routed: None,
                outcome: Ok(()),
            },
            later,
        );
        assert!(
            second
                .conditions
                .iter()
                .all(|c| c.last_transition_time == Time(ts(NOW)))
        );
        assert_eq!(cond(&second, reason::READY).reason, reason::RAMPING);

        // Blocked: Progressing flips (True → False), Reconciling stays True.
        let even_later = ts("2026-03-02T12:06:00Z");
        let b = Blocked {
            reason: reason::PLAN_EXECUTION_FAILED,
            message: "x".into(),
            stalled: false,
        };
        let third = compute(Some(&second), 2, &Report::Blocked(b), even_later);
        assert_eq!(
            cond(&third, reason::PROGRESSING).last_transition_time,
            Time(even_later)
        );
        assert_eq!(
            cond(&third, reason::RECONCILING).last_transition_time,
            Time(ts(NOW))
        );
        assert_eq!(
            cond(&third, reason::READY).last_transition_time,
            Time(ts(NOW))
        );
        assert_eq!(
            cond(&third, reason::STALLED).last_transition_time,
            Time(ts(NOW))
        );
    }

    #[test]
    fn case_56_deprecated_versions_are_sorted_by_build_id() {
        let mut i = PlanInput::test();
        i.temporal.routing.current_build_id = Some("v2".into());
        i.temporal.versions = vec![VersionState::test("v2", TemporalVersionStatus::Current)];
        i.deployments = vec![
            ObservedDeployment::test("c", 1),
            ObservedDeployment::test("v2", 3),
            ObservedDeployment::test("a", 1),
            ObservedDeployment::test("b", 1),
        ];
        let s1 = planned(&i, &plan_with(Phase::Complete, "m"), None);
        i.deployments.reverse();
        let s2 = planned(&i, &plan_with(Phase::Complete, "m"), None);
        let ids: Vec<_> = s1
            .deprecated_versions
            .iter()
            .map(|d| d.version.build_id.as_str())
            .collect();
        assert_eq!(ids, vec!["a", "b", "c"]);
        assert_eq!(s1, s2);
        assert!(
            s1.deprecated_versions
                .iter()
                .all(|d| d.version.status == VersionStatus::NotRegistered)
        );
    }

    #[test]
    fn drained_versions_show_their_sunset_schedule_and_eligibility() {
        let mut i = PlanInput::test();
        i.desired.delete_delay = hours(4);
        i.temporal.routing.current_build_id = Some("v2".into());
        let since = ts("2026-03-02T10:00:00Z");
        i.temporal.versions = vec![
            VersionState::drained("v1", since),
            VersionState::test("v2", TemporalVersionStatus::Current),
        ];
        let s = planned(&i, &plan_with(Phase::Complete, "m"), None);
        let d = &s.deprecated_versions[0];
        assert_eq!(d.version.status, VersionStatus::Drained);
        assert_eq!(d.drained_since, Some(Time(since)));
        assert_eq!(d.scaledown_at, Some(Time(ts("2026-03-02T11:00:00Z"))));
        assert_eq!(d.delete_at, Some(Time(ts("2026-03-02T15:00:00Z"))));
        assert!(!d.eligible_for_deletion, "pods still running");
        assert_eq!(s.version_count, 2);

        i.deployments[0] = ObservedDeployment::test("v1", 0);
        let s = planned(&i, &plan_with(Phase::Complete, "m"), None);
        assert!(s.deprecated_versions[0].eligible_for_deletion);

        // Once the plan's deletion ran, the version is gone from the list.
        let mut plan = plan_with(Phase::Complete, "m");
        plan.delete = vec![DeleteDeployment {
            name: "w-v1".into(),
            build_id: "v1".into(),
            reason: DeleteReason::Sunset,
        }];
        assert!(planned(&i, &plan, None).deprecated_versions.is_empty());
    }

    #[test]
    fn draining_versions_show_since_when_and_what_keeps_them() {
        let mut i = PlanInput::test();
        i.temporal.routing.current_build_id = Some("v2".into());
        let since = ts("2026-03-02T11:00:00Z");
        let mut v1 = VersionState::test("v1", TemporalVersionStatus::Draining);
        v1.drainage_changed_at = Some(since);
        v1.pinned = Some(PinnedView {
            count: 2,
            counted_at: ts(NOW),
            oldest: vec![PinnedWorkflowRef {
                workflow_type: "checkout".into(),
                workflow_id: "order-7".into(),
                start_time: Some(ts("2026-03-02T09:00:00Z")),
            }],
        });
        i.temporal.versions = vec![v1, VersionState::test("v2", TemporalVersionStatus::Current)];
        let s = planned(&i, &plan_with(Phase::Complete, "m"), None);
        let d = &s.deprecated_versions[0];
        assert_eq!(d.version.status, VersionStatus::Draining);
        assert_eq!(d.draining_since, Some(Time(since)));
        assert_eq!(d.drained_since, None);
        assert_eq!(d.open_pinned_workflows, Some(2));
        assert_eq!(
            d.oldest_pinned_workflows,
            [PinnedWorkflow {
                workflow_type: "checkout".into(),
                workflow_id: "order-7".into(),
                start_time: Some(Time(ts("2026-03-02T09:00:00Z"))),
            }]
        );
        assert_eq!(
            d.waiting_for.as_deref(),
            Some("2 open workflows pinned to it to finish, then Temporal to report it drained")
        );

        assert_eq!(
            d.pinned_workflows_end_at, None,
            "no deadline: the count is the news"
        );
        // With terminatePinnedAfter the end is knowable: drainingSince + terminatePinnedAfter.
        i.desired.terminate_pinned_after = Some(std::time::Duration::from_secs(86_400));
        let s = planned(&i, &plan_with(Phase::Complete, "m"), None);
        let d = &s.deprecated_versions[0];
        assert_eq!(
            d.pinned_workflows_end_at,
            Some(Time(ts("2026-03-03T11:00:00Z")))
        );
        assert!(
            d.waiting_for
                .as_deref()
                .is_some_and(|w| w.contains("terminated at 2026-03-03T11:00:00Z")),
            "{:?}",
            d.waiting_for
        );
        i.desired.terminate_pinned_after = None;
        // Not counted (yet): no count is claimed, and what it waits for is still said.
        i.temporal.versions[0].pinned = None;
        let s = planned(&i, &plan_with(Phase::Complete, "m"), None);
        let d = &s.deprecated_versions[0];
        assert_eq!(d.open_pinned_workflows, None);
        assert!(d.oldest_pinned_workflows.is_empty());
        assert!(
            d.waiting_for
                .as_deref()
                .is_some_and(|w| w.starts_with("Temporal to report"))
        );
    }

    #[test]
    fn target_lists_its_gate_workflows_until_current() {
        let mut i = PlanInput::test();
        i.gates = vec![
            GateObservation {
                workflow_id: "g-q2".into(),
                run_id: "r2".into(),
                task_queue: "q2".into(),
                status: GateWorkflowStatus::Running,
                started_at: None,
            },
            GateObservation {
                workflow_id: "g-q1".into(),
                run_id: "r1".into(),
                task_queue: "q1".into(),
                status: GateWorkflowStatus::Completed,
                started_at: None,
            },
        ];
        let s = planned(&i, &plan_with(Phase::WaitingForGate, "m"), None);
        let g = &s.target_version.as_ref().unwrap().gate_workflows;
        assert_eq!(
            g.iter().map(|g| g.task_queue.as_str()).collect::<Vec<_>>(),
            vec!["q1", "q2"]
        );
        assert_eq!(g[1].status, GateWorkflowStatus::Running);
        let t = &s.target_version.as_ref().unwrap().version;
        assert_eq!(
            (t.deployment_name.as_deref(), t.replicas, t.ready_replicas),
            (Some("w-v2"), Some(3), Some(3))
        );
        assert_eq!(t.healthy_since, Some(Time(ago(600))));
    }

    #[test]
    fn a_cleared_stale_ramp_is_shown_draining() {
        let mut i = PlanInput::test();
        i.temporal.routing.current_build_id = Some("v2".into());
        i.temporal.routing.ramping_build_id = Some("v3".into());
        i.temporal.routing.ramp_percentage = 10.0;
        i.temporal.versions = vec![
            VersionState::test("v2", TemporalVersionStatus::Current),
            VersionState::test("v3", TemporalVersionStatus::Ramping),
        ];
        i.deployments = vec![
            ObservedDeployment::test("v2", 3),
            ObservedDeployment::test("v3", 1),
        ];
        let before = planned(&i, &plan_with(Phase::Complete, "m"), None);
        assert_eq!(
            before.deprecated_versions[0].version.status,
            VersionStatus::Ramping
        );
        let mut plan = plan_with(Phase::Complete, "m");
        plan.routing = Some(RoutingChange::ClearRamp);
        let s = planned(&i, &plan, plan.routing.as_ref());
        assert_eq!(
            s.deprecated_versions[0].version.status,
            VersionStatus::Draining
        );
        assert_eq!(cond(&s, reason::READY).status, "True");
    }
}
