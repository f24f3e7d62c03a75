//! Rollout control rules (`src/planner/control.rs`), one test per rule, through `plan()`.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::plan;
use crate::api::twd::{
    AnalysisRecord, AnalysisVerdict, GateWorkflowStatus, PausedStep, ResumedStep, RolloutControl,
};
use crate::fixtures::{NOW, ago, ts};
use crate::planner::model::*;
use crate::temporal::state::{GateObservation, TemporalVersionStatus as T};

fn secs(s: i64) -> jiff::SignedDuration {
    jiff::SignedDuration::from_secs(s)
}

/// v1 Current; v2 (target) ramping at 25 % (step 1 of 2, 10 min each) since `since_secs` ago.
fn ramping(since_secs: i64) -> PlanInput {
    let mut i = PlanInput::test().strategy(Strategy::Progressive(vec![
        Step {
            ramp_percentage: 25.0,
            pause: Duration::from_secs(600),
        },
        Step {
            ramp_percentage: 50.0,
            pause: Duration::from_secs(600),
        },
    ]));
    let r = &mut i.temporal.routing;
    r.ramping_build_id = Some("v2".into());
    r.ramp_percentage = 25.0;
    r.ramping_changed_at = Some(ago(since_secs));
    r.ramp_percentage_changed_at = Some(ago(since_secs));
    if let Some(v) = i.temporal.versions.iter_mut().find(|v| v.build_id == "v2") {
        v.status = T::Ramping;
    }
    i
}

fn paused_record(step: i32, remaining: i64, at_secs_ago: i64) -> PausedStep {
    PausedStep {
        build_id: "v2".into(),
        step: Some(step),
        remaining_seconds: Some(remaining),
        paused_at: Time(ago(at_secs_ago)),
    }
}

fn set_current(build: &str) -> Option<RoutingChange> {
    Some(RoutingChange::SetCurrent {
        build_id: build.into(),
    })
}

fn set_ramping(pct: f32) -> Option<RoutingChange> {
    Some(RoutingChange::SetRamping {
        build_id: "v2".into(),
        percentage: pct,
    })
}

#[test]
fn pause_holds_the_step_and_records_the_time_left() {
    let mut i = ramping(240);
    i.desired.control.paused = true;
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Paused);
    assert_eq!(p.control.paused, Some(paused_record(1, 360, 0)));
    let step = p.progress.step.expect("the held step is reported");
    assert_eq!((step.index, step.next_at), (0, None));
    assert!(
        p.progress.message.contains("360s"),
        "{}",
        p.progress.message
    );
    // No wake-up at the step's deadline: nothing happens until resumed.
    assert_ne!(p.requeue_after, Some(Duration::from_secs(360)));
}

#[test]
fn pause_holds_a_step_past_its_deadline() {
    let mut i = ramping(700);
    assert_eq!(
        plan(&i).routing,
        set_ramping(50.0),
        "unpaused, the next step is due"
    );
    i.desired.control.paused = true;
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.control.paused, Some(paused_record(1, 0, 0)));
}

#[test]
fn a_recorded_pause_keeps_its_time_left_across_reconciles_and_restarts() {
    let mut i = ramping(3000);
    i.desired.control.paused = true;
    i.desired.control.record.paused = Some(paused_record(1, 360, 2700));
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.control.paused, Some(paused_record(1, 360, 2700)));
}

#[test]
fn pause_before_the_first_step_holds_the_first_ramp() {
    let mut i = PlanInput::test().strategy(Strategy::Progressive(vec![Step {
        ramp_percentage: 25.0,
        pause: Duration::from_secs(60),
    }]));
    i.desired.control.paused = true;
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Paused);
    let rec = p.control.paused.expect("recorded");
    assert_eq!((rec.step, rec.remaining_seconds), (None, None));
    // AllAtOnce: the promotion is held.
    let mut i = PlanInput::test();
    i.desired.control.paused = true;
    assert_eq!(plan(&i).routing, None);
}

#[test]
fn resume_continues_with_the_time_left() {
    // Paused long ago with 120 s left; Temporal's step start says the step is long over.
    let mut i = ramping(3600);
    i.desired.control.record.paused = Some(paused_record(1, 120, 3000));
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Ramping);
    let due = ts(NOW) + secs(120);
    assert_eq!(p.progress.step.and_then(|s| s.next_at), Some(due));
    assert_eq!(p.requeue_after, Some(Duration::from_secs(120)));
    assert_eq!(
        p.control,
        RolloutControl {
            resumed: Some(ResumedStep {
                build_id: "v2".into(),
                step: 1,
                next_step_at: Time(due),
            }),
            ..Default::default()
        }
    );
}

#[test]
fn a_resumed_step_moves_on_at_its_resumed_deadline() {
    let mut i = ramping(3600);
    let resumed = ResumedStep {
        build_id: "v2".into(),
        step: 1,
        next_step_at: Time(ago(1)),
    };
    i.desired.control.record.resumed = Some(resumed.clone());
    let p = plan(&i);
    assert_eq!(p.routing, set_ramping(50.0));
    assert_eq!(
        p.control.resumed, None,
        "the next step has its own full pause"
    );
    // Still ahead: held, and kept.
    i.desired.control.record.resumed = Some(ResumedStep {
        next_step_at: Time(ts(NOW) + secs(30)),
        ..resumed
    });
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert!(p.control.resumed.is_some());
}

#[test]
fn abort_ramps_the_target_back_to_zero_and_keeps_current() {
    let mut i = ramping(60);
    i.desired.control.abort = true;
    i.desired.control.paused = true; // abort wins over pause
    let p = plan(&i);
    assert_eq!(p.routing, Some(RoutingChange::ClearRamp));
    assert_eq!(p.progress.phase, Phase::Aborted);
    assert!(
        p.progress.message.contains("v1 stays Current"),
        "{}",
        p.progress.message
    );
    assert_eq!(p.control.paused, None);
}

#[test]
fn an_abort_holds_until_cleared_then_the_rollout_starts_at_the_first_step() {
    // After the ramp was cleared: the target is not ramping.
    let mut i = PlanInput::test().strategy(Strategy::Progressive(vec![
        Step {
            ramp_percentage: 25.0,
            pause: Duration::from_secs(60),
        },
        Step {
            ramp_percentage: 50.0,
            pause: Duration::from_secs(60),
        },
    ]));
    i.desired.control.abort = true;
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Aborted);
    i.desired.control.abort = false;
    assert_eq!(plan(&i).routing, set_ramping(25.0));
    // AllAtOnce: an abort holds the promotion.
    let mut i = PlanInput::test();
    i.desired.control.abort = true;
    assert_eq!(plan(&i).routing, None);
    assert_eq!(plan(&i).progress.phase, Phase::Aborted);
}

#[test]
fn promote_annotation_skips_steps_and_gates_once() {
    let mut i = ramping(60);
    i.desired.gate = Some(Gate {
        workflow_type: "Check".into(),
    });
    i.gates = vec![GateObservation::test("q1", GateWorkflowStatus::Running)];
    i.desired.control.promote = Some("v2".into());
    let p = plan(&i);
    assert_eq!(p.routing, set_current("v2"));
    assert_eq!(p.progress.phase, Phase::Complete);
    assert_eq!(p.control.promoted.as_deref(), Some("v2"));
    // Acted on already: the annotation stays but does nothing again.
    i.desired.control.record.promoted = Some("v2".into());
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(
        p.control.promoted.as_deref(),
        Some("v2"),
        "the record is kept"
    );
}

#[test]
fn promote_annotation_for_another_build_or_without_ready_pollers_waits() {
    let mut i = ramping(60);
    i.desired.control.promote = Some("v1".into());
    assert_eq!(plan(&i).routing, None);
    i.desired.control.promote = Some("v2".into());
    for d in &mut i.deployments {
        if d.build_id == "v2" {
            d.ready_replicas = 0;
        }
    }
    let p = plan(&i);
    assert_eq!(
        p.routing, None,
        "never route to a version without ready pollers"
    );
    assert_eq!(p.control.promoted, None);
}

#[test]
fn promote_annotation_wins_over_a_pause() {
    let mut i = ramping(60);
    i.desired.control.paused = true;
    i.desired.control.promote = Some("v2".into());
    assert_eq!(plan(&i).routing, set_current("v2"));
}

#[test]
fn skip_step_moves_one_step_once() {
    let mut i = ramping(60);
    i.desired.control.skip_step = Some(SkipStep {
        build_id: "v2".into(),
        step: 0,
        value: "v2/1".into(),
    });
    let p = plan(&i);
    assert_eq!(p.routing, set_ramping(50.0));
    assert_eq!(p.control.skipped_step.as_deref(), Some("v2/1"));
    assert_eq!(p.progress.step.map(|s| s.index), Some(1));
    i.desired.control.record.skipped_step = Some("v2/1".into());
    assert_eq!(plan(&i).routing, None, "acted on already");
}

#[test]
fn skip_step_waits_for_its_step_and_promotes_after_the_last() {
    let mut i = ramping(60);
    i.desired.control.skip_step = Some(SkipStep {
        build_id: "v2".into(),
        step: 1,
        value: "v2/2".into(),
    });
    let p = plan(&i);
    assert_eq!(p.routing, None, "step 2 is not in effect yet");
    assert_eq!(p.control.skipped_step, None);
    i.temporal.routing.ramp_percentage = 50.0;
    let p = plan(&i);
    assert_eq!(p.routing, set_current("v2"));
    assert_eq!(p.control.skipped_step.as_deref(), Some("v2/2"));
}

#[test]
fn manual_and_a_current_target_ignore_control_but_keep_the_record() {
    let mut i = ramping(60).strategy(Strategy::Manual);
    i.desired.control.abort = true;
    i.desired.control.record.promoted = Some("v0".into());
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_ne!(p.progress.phase, Phase::Aborted);
    assert_eq!(p.control.promoted.as_deref(), Some("v0"));

    let mut i = PlanInput::test();
    i.temporal.routing.current_build_id = Some("v2".into());
    i.desired.control.paused = true;
    i.desired.control.abort = true;
    assert_eq!(plan(&i).progress.phase, Phase::Complete);
}

// ---------------------------------------------------------------------------------------
// Canary analysis (`src/planner/analysis.rs`)
// ---------------------------------------------------------------------------------------

fn analysed(since_secs: i64, target: Sample, current: Sample) -> PlanInput {
    let mut i = ramping(since_secs);
    i.desired.analysis = Some(Analysis::test());
    i.analysis = Some(AnalysisObservation {
        step: 0,
        target,
        current,
        at: ts(NOW),
    });
    i
}

fn sample(closed: u64, failed: u64) -> Sample {
    Sample { closed, failed }
}

#[test]
fn a_failing_target_is_aborted_with_the_rates_and_stays_aborted() {
    let i = analysed(60, sample(10, 6), sample(40, 0));
    let p = plan(&i);
    assert_eq!(p.routing, Some(RoutingChange::ClearRamp));
    assert_eq!(p.progress.phase, Phase::Aborted);
    assert!(
        p.progress.message.contains("target 60.0% failed (6 of 10)"),
        "{}",
        p.progress.message
    );
    let aborted = p.control.aborted.clone().expect("recorded");
    assert_eq!(aborted.reason, "AnalysisFailed");
    let steps = &p.control.analysis.as_ref().expect("recorded").steps;
    assert_eq!(steps[0].verdict, AnalysisVerdict::Fail);

    // Next reconciles: the ramp is gone; the recorded abort holds (no restart at step 1).
    let mut i = PlanInput::test().strategy(i.desired.strategy.clone());
    i.desired.control.record.aborted = Some(aborted.clone());
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Aborted);
    assert_eq!(p.control.aborted, Some(aborted.clone()));
    // A new build starts over; promote overrides.
    i.desired.build_id = "v3".into();
    assert_ne!(plan(&i).progress.phase, Phase::Aborted);
    i.desired.build_id = "v2".into();
    i.desired.control.promote = Some("v2".into());
    let p = plan(&i);
    assert_eq!(p.routing, set_current("v2"));
    assert_eq!(p.control.aborted, None);
}

#[test]
fn equal_failure_rates_pass_and_the_step_ends_on_time() {
    let i = analysed(700, sample(20, 4), sample(50, 10));
    let p = plan(&i);
    assert_eq!(p.routing, set_ramping(50.0));
    let steps = &p.control.analysis.as_ref().expect("recorded").steps;
    assert_eq!(steps[0].verdict, AnalysisVerdict::Pass);
}

#[test]
fn an_inconclusive_step_holds_past_its_pause_then_takes_the_default_verdict() {
    // Deadline passed 100 s ago, 5 of the 10 workflows needed.
    let i = analysed(700, sample(5, 0), sample(50, 0));
    let p = plan(&i);
    assert_eq!(p.routing, None, "held");
    assert_eq!(p.progress.phase, Phase::Ramping);
    assert!(
        p.progress.message.contains("analysis inconclusive"),
        "{}",
        p.progress.message
    );
    // Past pause + maxInconclusive: the default verdict (Pass) lets it move on ...
    let i = analysed(901, sample(5, 0), sample(50, 0));
    assert_eq!(plan(&i).routing, set_ramping(50.0));
    // ... and Fail aborts.
    let mut i = analysed(901, sample(5, 0), sample(50, 0));
    if let Some(a) = i.desired.analysis.as_mut() {
        a.inconclusive_passes = false;
    }
    let p = plan(&i);
    assert_eq!(p.routing, Some(RoutingChange::ClearRamp));
    assert_eq!(p.progress.phase, Phase::Aborted);
}

#[test]
fn dry_run_records_verdicts_and_does_not_act() {
    let mut i = analysed(60, sample(10, 9), sample(10, 0));
    if let Some(a) = i.desired.analysis.as_mut() {
        a.dry_run = true;
    }
    let p = plan(&i);
    assert_eq!(p.routing, None);
    assert_eq!(p.progress.phase, Phase::Ramping);
    assert_eq!(p.control.aborted, None);
    let steps = &p.control.analysis.as_ref().expect("recorded").steps;
    assert_eq!(steps[0].verdict, AnalysisVerdict::Fail);
    // The step still ends on time in dry run, whatever the verdict.
    let mut i = analysed(700, sample(10, 9), sample(10, 0));
    if let Some(a) = i.desired.analysis.as_mut() {
        a.dry_run = true;
    }
    assert_eq!(plan(&i).routing, set_ramping(50.0));
}

#[test]
fn analysis_is_due_every_interval_while_the_target_ramps_at_a_step() {
    use crate::planner::analysis::due;
    let mut i = analysed(60, sample(0, 0), sample(0, 0));
    i.analysis = None;
    assert_eq!(due(&i), Some((0, ago(60))), "never counted");
    i.desired.control.record.analysis = Some(AnalysisRecord {
        build_id: "v2".into(),
        last_at: Time(ago(10)),
        steps: vec![],
    });
    assert_eq!(due(&i), None, "counted 10 s ago, interval 30 s");
    i.desired.control.record.analysis = Some(AnalysisRecord {
        build_id: "v2".into(),
        last_at: Time(ago(30)),
        steps: vec![],
    });
    assert_eq!(due(&i), Some((0, ago(60))));
    // The plan wakes for the next count.
    let mut j = analysed(60, sample(1, 0), sample(1, 0));
    j.desired.control.record.analysis = None;
    assert_eq!(plan(&j).requeue_after, Some(Duration::from_secs(30)));
    i.desired.control.paused = true;
    assert_eq!(due(&i), None, "not while paused");
    i.desired.control.paused = false;
    i.temporal.routing.ramp_percentage = 30.0;
    assert_eq!(due(&i), None, "not between steps");
}

// ---------------------------------------------------------------------------------------
// Gates per step (`src/planner/step_gates.rs`)
// ---------------------------------------------------------------------------------------

/// Ramping at step 1 whose 10-minute pause ended 100 s ago; step 1 has gate `Smoke`.
fn step_gated(observed: &[GateWorkflowStatus]) -> PlanInput {
    let mut i = ramping(700);
    i.desired.step_gates = vec![
        Some(Gate {
            workflow_type: "Smoke".into(),
        }),
        None,
    ];
    i.target_task_queues = vec!["q1".into()];
    i.step_gates = observed
        .iter()
        .map(|s| GateObservation::test("q1", *s))
        .collect();
    i
}

#[test]
fn a_step_gate_starts_with_its_step_and_holds_it_until_it_completes() {
    let p = plan(&step_gated(&[]));
    assert_eq!(
        p.start_step_gates,
        Some(StepGateStart {
            step: 0,
            task_queues: vec!["q1".into()]
        })
    );
    assert_eq!(p.routing, None, "the step holds past its pause");
    let p = plan(&step_gated(&[GateWorkflowStatus::Running]));
    assert_eq!((p.start_step_gates, p.routing), (None, None));
    assert_eq!(
        plan(&step_gated(&[GateWorkflowStatus::Completed])).routing,
        set_ramping(50.0)
    );
    // A step without a gate is not held.
    let mut i = step_gated(&[]);
    i.desired.step_gates = vec![
        None,
        Some(Gate {
            workflow_type: "Smoke".into(),
        }),
    ];
    assert_eq!(plan(&i).routing, set_ramping(50.0));
}

#[test]
fn a_failed_step_gate_ramps_back_to_zero_and_stalls() {
    let p = plan(&step_gated(&[GateWorkflowStatus::Failed]));
    assert_eq!(p.routing, Some(RoutingChange::ClearRamp));
    assert_eq!(p.progress.phase, Phase::Aborted);
    assert!(
        p.progress.message.contains("Step 1 gate failed"),
        "{}",
        p.progress.message
    );
    assert_eq!(
        p.control.aborted.map(|a| a.reason).as_deref(),
        Some("StepGateFailed")
    );
}

/// One step numbering: at the second of two steps, every record and message a user reads says
/// step 2 (status and the CLI used to say 1 and 2 for the same step).
#[test]
fn the_second_step_is_step_2_in_every_record_and_message() {
    let mut i = ramping(60);
    i.temporal.routing.ramp_percentage = 50.0;
    i.desired.control.paused = true;
    let p = plan(&i);
    assert_eq!(p.progress.step.map(|s| s.index), Some(1), "steps[1]");
    assert_eq!(p.control.paused.as_ref().and_then(|r| r.step), Some(2));
    assert!(
        p.progress.message.contains("at step 2 of 2 (50%)"),
        "{}",
        p.progress.message
    );
    // Resumed: the record of the resumed step says 2 as well, and is read back as steps[1].
    i.desired.control.paused = false;
    i.desired.control.record.paused = p.control.paused.clone();
    let p = plan(&i);
    assert_eq!(p.control.resumed.as_ref().map(|r| r.step), Some(2));
    i.desired.control.record = p.control.clone();
    let p = plan(&i);
    assert_eq!(p.control.resumed.as_ref().map(|r| r.step), Some(2), "kept");
    assert_eq!(
        p.routing, None,
        "the resumed step runs for the time it had left"
    );
    assert_eq!(
        crate::temporal::client::TemporalClient::step_gate_workflow_id("shop/orders", "v2", 1, "q"),
        format!(
            "{}-step2",
            crate::temporal::client::TemporalClient::gate_workflow_id("shop/orders", "v2", "q")
        )
    );
}
