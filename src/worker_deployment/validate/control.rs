//! Rollout control: `spec.rollout.paused`/`abort` and the promote, skip-step, retry and
//! restart annotations, checked and turned into the planner's `Control`.

use crate::api::twd::{RolloutStrategy, TemporalWorkerDeployment};
use crate::api::{ANNOTATION_PROMOTE, ANNOTATION_SKIP_STEP};
use crate::planner::model::{Control, SkipStep};

use super::problems::Problems;

/// Rollout control as the planner sees it (annotations already checked by [`validate`]).
pub(super) fn control(twd: &TemporalWorkerDeployment) -> Control {
    let annotation = |key: &str| {
        twd.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    Control {
        paused: twd.spec.rollout.paused,
        abort: twd.spec.rollout.abort,
        promote: annotation(ANNOTATION_PROMOTE),
        skip_step: annotation(ANNOTATION_SKIP_STEP).and_then(|v| parse_skip_step(&v).ok()),
        retry: annotation(crate::api::ANNOTATION_RETRY),
        restart: annotation(crate::api::ANNOTATION_RESTART),
        record: twd
            .status
            .as_ref()
            .and_then(|s| s.rollout_control.clone())
            .unwrap_or_default(),
    }
}

/// `<buildID>/<step>`; build IDs never contain `/` (they are label values).
pub fn parse_skip_step(value: &str) -> Result<SkipStep, String> {
    let problem = || {
        format!(
            "{value:?} must be <buildID>/<step>, the build ID of the target and the number of \
             the step to end, from 1 (as in status.targetVersion.currentStep), e.g. v2-abc123/1"
        )
    };
    let (build, step) = value.rsplit_once('/').ok_or_else(problem)?;
    let step: i32 = step.parse().map_err(|_| problem())?;
    let step = crate::api::twd::step_index(step).ok_or_else(problem)?;
    if build.is_empty() {
        return Err(problem());
    }
    Ok(SkipStep {
        build_id: build.to_string(),
        step,
        value: value.to_string(),
    })
}

pub(super) fn check_control(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let rollout = &twd.spec.rollout;
    if rollout.strategy == RolloutStrategy::Manual && (rollout.paused || rollout.abort) {
        p.add(
            "spec.rollout",
            "paused and abort steer the controller's own routing changes, and with the Manual \
             strategy it makes none: promote or ramp in Temporal instead",
        );
    }
    let skip = twd
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_SKIP_STEP))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty());
    if let Some(value) = skip
        && let Err(e) = parse_skip_step(value)
    {
        p.add(format!("metadata.annotations[{ANNOTATION_SKIP_STEP}]"), e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::twd::{DefaultVerdict, RolloutStrategy};
    use crate::planner::model::Gate;
    use crate::worker_deployment::validate::{ControllerSettings, desired, validate};
    use std::time::Duration;

    #[test]
    fn skip_step_annotation_must_name_a_build_and_a_step() {
        assert_eq!(
            parse_skip_step("v2-abc/1"),
            Ok(SkipStep {
                build_id: "v2-abc".into(),
                step: 0,
                value: "v2-abc/1".into()
            }),
            "steps are numbered from 1: step 1 is steps[0]"
        );
        for bad in ["v2", "v2/", "/1", "v2/one", "v2/-1", "v2/0"] {
            assert!(parse_skip_step(bad).is_err(), "{bad}");
        }
        let mut twd = TemporalWorkerDeployment::test();
        twd.metadata.annotations =
            Some([(ANNOTATION_SKIP_STEP.to_string(), "v2".to_string())].into());
        let e = validate(&twd).expect_err("refused");
        assert!(
            e.message
                .contains("metadata.annotations[temporal.io/skip-step]"),
            "{e}"
        );
    }

    #[test]
    fn control_comes_from_spec_annotations_and_the_status_record() {
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.paused = true;
        twd.metadata.annotations = Some(
            [
                (ANNOTATION_PROMOTE.to_string(), " v9 ".to_string()),
                (ANNOTATION_SKIP_STEP.to_string(), "v9/1".to_string()),
            ]
            .into(),
        );
        twd.status = Some(crate::api::TemporalWorkerDeploymentStatus {
            rollout_control: Some(crate::api::twd::RolloutControl {
                promoted: Some("v8".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let c = desired(&twd, &ControllerSettings::default())
            .expect("valid")
            .control;
        assert!(c.paused && !c.abort);
        assert_eq!(c.promote.as_deref(), Some("v9"));
        assert_eq!(c.skip_step.map(|s| s.step), Some(0));
        assert_eq!(c.record.promoted.as_deref(), Some("v8"));
    }

    #[test]
    fn analysis_and_step_gates_are_checked() {
        use crate::api::twd::{AnalysisSpec, GateSpec};
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.analysis = Some(AnalysisSpec {
            interval: "500ms".into(),
            max_failure_rate: None,
            max_failure_rate_increase: None,
            min_sample_size: 0,
            workflow_types: vec!["it's".into()],
            max_inconclusive: "soon".into(),
            inconclusive_verdict: DefaultVerdict::Fail,
            dry_run: false,
        });
        let e = validate(&twd).expect_err("refused").message;
        for want in [
            "spec.rollout.analysis: set maxFailureRate",
            "spec.rollout.analysis.interval: must be at least 1s",
            "spec.rollout.analysis.minSampleSize",
            "spec.rollout.analysis.workflowTypes[0]",
            "spec.rollout.analysis.maxInconclusive",
        ] {
            assert!(e.contains(want), "{want} missing from {e}");
        }
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.strategy = RolloutStrategy::Progressive;
        twd.spec.rollout.steps = vec![crate::api::twd::RolloutStep {
            ramp_percentage: 10,
            pause_duration: "1m".into(),
            gate: Some(GateSpec {
                workflow_type: " ".into(),
                input: None,
                input_from: None,
            }),
        }];
        let e = validate(&twd).expect_err("refused").message;
        assert!(e.contains("spec.rollout.steps[0].gate.workflowType"), "{e}");
        // Valid settings convert.
        twd.spec.rollout.steps[0].gate = Some(GateSpec {
            workflow_type: "Smoke".into(),
            input: None,
            input_from: None,
        });
        twd.spec.rollout.analysis = Some(AnalysisSpec {
            interval: "10s".into(),
            max_failure_rate: Some(5.0),
            max_failure_rate_increase: None,
            min_sample_size: 20,
            workflow_types: vec![],
            max_inconclusive: "1m".into(),
            inconclusive_verdict: DefaultVerdict::Fail,
            dry_run: true,
        });
        let d = desired(&twd, &ControllerSettings::default()).expect("valid");
        let a = d.analysis.expect("analysis");
        assert_eq!(
            (
                a.interval,
                a.min_sample_size,
                a.inconclusive_passes,
                a.dry_run
            ),
            (Duration::from_secs(10), 20, false, true)
        );
        assert_eq!(
            d.step_gates,
            vec![Some(Gate {
                workflow_type: "Smoke".into()
            })]
        );
    }

    #[test]
    fn manual_cannot_be_paused_or_aborted() {
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.strategy = RolloutStrategy::Manual;
        twd.spec.rollout.abort = true;
        let e = validate(&twd).expect_err("refused");
        assert!(e.message.contains("Manual"), "{e}");
    }
}
