//! `spec.rollout`: the strategy, its steps and gates, and canary analysis, checked and turned
//! into the planner's `Strategy` and `Analysis`.

use std::time::Duration;

use crate::api::duration;
use crate::api::twd::{
    AnalysisSpec, DefaultVerdict, GateSpec, RolloutStrategy, TemporalWorkerDeployment,
    TemporalWorkerDeploymentSpec,
};
use crate::planner::model::{Analysis, Step, Strategy};

use super::problems::InvalidSpec;
use super::problems::{Problems, parse};

/// `spec.rollout.strategy` with its steps' pauses parsed.
/// Most steps a Progressive rollout may have.
pub const MAX_STEPS: usize = 20;
/// Shortest pause a step may have.
pub const MIN_PAUSE: Duration = Duration::from_secs(1);

pub(super) fn strategy(spec: &TemporalWorkerDeploymentSpec) -> Result<Strategy, InvalidSpec> {
    Ok(match spec.rollout.strategy {
        RolloutStrategy::Manual => Strategy::Manual,
        RolloutStrategy::AllAtOnce => Strategy::AllAtOnce,
        RolloutStrategy::Progressive => {
            let mut steps = Vec::with_capacity(spec.rollout.steps.len());
            for (i, s) in spec.rollout.steps.iter().enumerate() {
                steps.push(Step {
                    ramp_percentage: s.ramp_percentage as f32,
                    pause: parse(
                        &format!("spec.rollout.steps[{i}].pauseDuration"),
                        &s.pause_duration,
                    )?,
                });
            }
            Strategy::Progressive(steps)
        }
    })
}

/// `spec.rollout.analysis` with its durations parsed.
pub(super) fn analysis(a: &AnalysisSpec) -> Result<Analysis, InvalidSpec> {
    Ok(Analysis {
        interval: parse("spec.rollout.analysis.interval", &a.interval)?,
        max_failure_rate: a.max_failure_rate,
        max_failure_rate_increase: a.max_failure_rate_increase,
        min_sample_size: u64::try_from(a.min_sample_size.max(1)).unwrap_or(1),
        workflow_types: a.workflow_types.clone(),
        max_inconclusive: parse("spec.rollout.analysis.maxInconclusive", &a.max_inconclusive)?,
        inconclusive_passes: a.inconclusive_verdict == DefaultVerdict::Pass,
        dry_run: a.dry_run,
    })
}

pub(super) fn check_analysis(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let Some(a) = &twd.spec.rollout.analysis else {
        return;
    };
    let path = "spec.rollout.analysis";
    if a.max_failure_rate.is_none() && a.max_failure_rate_increase.is_none() {
        p.add(
            path,
            "set maxFailureRate, maxFailureRateIncrease or both: without a threshold no analysis can fail",
        );
    }
    for (field, v) in [
        ("maxFailureRate", a.max_failure_rate),
        ("maxFailureRateIncrease", a.max_failure_rate_increase),
    ] {
        if let Some(v) = v
            && !(0.0..=100.0).contains(&v)
        {
            p.add(
                format!("{path}.{field}"),
                format!("must be between 0 and 100, got {v}"),
            );
        }
    }
    if a.min_sample_size < 1 {
        p.add(format!("{path}.minSampleSize"), "must be at least 1");
    }
    match duration::parse(&a.interval) {
        Ok(d) if d < MIN_PAUSE => p.add(format!("{path}.interval"), "must be at least 1s"),
        Ok(_) => {}
        Err(e) => p.add(format!("{path}.interval"), e),
    }
    if let Err(e) = duration::parse(&a.max_inconclusive) {
        p.add(format!("{path}.maxInconclusive"), e);
    }
    for (i, t) in a.workflow_types.iter().enumerate() {
        if t.is_empty() || t.contains(['\'', '"', '\\']) {
            p.add(
                format!("{path}.workflowTypes[{i}]"),
                "must be a workflow type name without quotes or backslashes",
            );
        }
    }
}

pub(super) fn check_rollout(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let rollout = &twd.spec.rollout;
    if rollout.strategy == RolloutStrategy::Progressive && rollout.steps.is_empty() {
        p.add(
            "spec.rollout.steps",
            "a Progressive rollout needs at least one step",
        );
    }
    if rollout.steps.len() > MAX_STEPS {
        p.add(
            "spec.rollout.steps",
            format!(
                "at most {MAX_STEPS} steps are allowed, got {}",
                rollout.steps.len()
            ),
        );
    }
    let mut previous: Option<i32> = None;
    for (i, step) in rollout.steps.iter().enumerate() {
        let pct = step.ramp_percentage;
        let path = format!("spec.rollout.steps[{i}].rampPercentage");
        if !(1..=99).contains(&pct) {
            p.add(&path, format!("must be between 1 and 99, got {pct}"));
        }
        if let Some(prev) = previous
            && pct <= prev
        {
            p.add(
                &path,
                format!("must be greater than the previous step ({prev}), got {pct}"),
            );
        }
        previous = Some(pct);
        let path = format!("spec.rollout.steps[{i}].pauseDuration");
        match duration::parse(&step.pause_duration) {
            Ok(d) if d < MIN_PAUSE => p.add(
                &path,
                format!("must be at least 1s, got {:?}", step.pause_duration),
            ),
            Ok(_) => {}
            Err(e) => p.add(&path, format!("{e} (examples: 30s, 5m, 1h30m)")),
        }
    }

    if let Some(gate) = &rollout.gate {
        check_gate("spec.rollout.gate", gate, p);
    }
    for (i, step) in rollout.steps.iter().enumerate() {
        if let Some(gate) = &step.gate {
            check_gate(&format!("spec.rollout.steps[{i}].gate"), gate, p);
        }
    }
}

pub(super) fn check_gate(path: &str, gate: &GateSpec, p: &mut Problems) {
    if gate.workflow_type.trim().is_empty() {
        p.add(format!("{path}.workflowType"), "must not be empty");
    }
    if gate.input.is_some() && gate.input_from.is_some() {
        p.add(path, "only one of input or inputFrom may be set");
    }
    if let Some(from) = &gate.input_from {
        let refs = [
            ("configMapKeyRef", from.config_map_key_ref.as_ref()),
            ("secretKeyRef", from.secret_key_ref.as_ref()),
        ];
        let set = refs.iter().filter(|(_, r)| r.is_some()).count();
        if set != 1 {
            p.add(
                format!("{path}.inputFrom"),
                format!("exactly one of configMapKeyRef or secretKeyRef must be set, got {set}"),
            );
        }
        for (field, r) in refs {
            let Some(r) = r else { continue };
            if r.name.is_empty() {
                p.add(
                    format!("{path}.inputFrom.{field}.name"),
                    "must not be empty",
                );
            }
            if r.key.is_empty() {
                p.add(format!("{path}.inputFrom.{field}.key"), "must not be empty");
            }
        }
    }
}
