//! Canary analysis of a ramping target (`spec.rollout.analysis`).
//!
//! Every `interval` while the target ramps at a step, the reconciler counts closed workflows
//! of the target and of the current version since the step started ([`due`] says when and
//! over which window). [`verdict`] turns the counts into pass / fail / inconclusive; [`apply`]
//! acts on it:
//! - fail → the target's ramp goes back to 0 % and the rollout stalls (`RolloutAborted`,
//!   recorded in `status.rolloutControl.aborted` for this build, so it holds);
//! - the step may end only on a pass; inconclusive (too few workflows) holds the step past its
//!   pause for at most `maxInconclusive`, then `inconclusiveVerdict` applies;
//! - `dryRun` records verdicts and never acts.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::twd::{
    AbortRecord, AnalysisRecord, AnalysisVerdict, RolloutControl, StepVerdict, step_number,
};
use crate::planner::clock::{self, Wake};
use crate::planner::model::{
    Analysis, Decision, Phase, PlanInput, Progress, RoutingChange, Sample, Strategy,
};
use crate::planner::progressive;
use crate::planner::view::View;

/// Reason recorded for an abort decided by the analysis (and the Warning event's reason).
pub const ANALYSIS_FAILED: &str = "AnalysisFailed";

/// Failure rate in percent (0 for an empty sample).
pub fn rate(s: Sample) -> f64 {
    if s.closed == 0 {
        0.0
    } else {
        s.failed as f64 * 100.0 / s.closed as f64
    }
}

/// Pass, fail or inconclusive for one window, with a message that gives the rates.
pub fn verdict(target: Sample, current: Sample, a: &Analysis) -> (AnalysisVerdict, String) {
    let (t, c) = (rate(target), rate(current));
    let rates = format!(
        "target {t:.1}% failed ({} of {}), current {c:.1}% ({} of {})",
        target.failed, target.closed, current.failed, current.closed
    );
    if target.closed < a.min_sample_size {
        return (
            AnalysisVerdict::Inconclusive,
            format!(
                "{rates}: fewer than {} closed target workflows",
                a.min_sample_size
            ),
        );
    }
    if let Some(max) = a.max_failure_rate
        && t > max
    {
        return (
            AnalysisVerdict::Fail,
            format!("{rates}: above maxFailureRate {max}%"),
        );
    }
    if let Some(inc) = a.max_failure_rate_increase {
        if current.closed < a.min_sample_size {
            return (
                AnalysisVerdict::Inconclusive,
                format!(
                    "{rates}: fewer than {} closed workflows of the current version to compare with",
                    a.min_sample_size
                ),
            );
        }
        if t > c + inc {
            return (
                AnalysisVerdict::Fail,
                format!("{rates}: more than maxFailureRateIncrease {inc} points above current"),
            );
        }
    }
    (AnalysisVerdict::Pass, format!("{rates}: within thresholds"))
}

/// The analysis window due now, if any: `(step, since)` for a target ramping exactly at a step
/// whose last count is at least `interval` old. Nothing while paused, aborted or for Manual.
pub fn due(input: &PlanInput) -> Option<(usize, Timestamp)> {
    let a = input.desired.analysis.as_ref()?;
    let (step, since) = window(input)?;
    let c = &input.desired.control;
    if c.paused || c.abort || aborted_for(&c.record, &input.desired.build_id).is_some() {
        return None;
    }
    let last = c
        .record
        .analysis
        .as_ref()
        .filter(|r| r.build_id == input.desired.build_id)
        .map(|r| r.last_at.0);
    match last.and_then(|t| clock::add(t, a.interval)) {
        Some(next) if next > input.now => None,
        _ => Some((step, since)),
    }
}

/// The step the target ramps at exactly, and when Temporal says it started.
fn window(input: &PlanInput) -> Option<(usize, Timestamp)> {
    let step = progressive::target_step(input)?;
    Some((step, input.temporal.routing.ramp_percentage_changed_at?))
}

/// The recorded self-decided abort of `build`, if any.
pub fn aborted_for<'a>(record: &'a RolloutControl, build: &str) -> Option<&'a AbortRecord> {
    record.aborted.as_ref().filter(|a| a.build_id == build)
}

/// Records this reconcile's verdict and acts on it (see the module docs). `record` is the
/// rollout-control record being built; its `analysis` and `aborted` fields are set here.
pub fn apply(view: &View, d: &mut Decision, record: &mut RolloutControl, wake: &mut Wake) {
    let input = view.input;
    let Some(a) = input.desired.analysis.as_ref() else {
        return;
    };
    let mut rec = input
        .desired
        .control
        .record
        .analysis
        .clone()
        .filter(|r| r.build_id == view.target);
    let Some((step, since)) = window(input) else {
        record.analysis = rec;
        return;
    };
    if let Some(obs) = input.analysis.as_ref().filter(|o| o.step == step) {
        let (v, message) = verdict(obs.target, obs.current, a);
        let r = rec.get_or_insert_with(|| AnalysisRecord {
            build_id: view.target.to_string(),
            last_at: Time(obs.at),
            steps: Vec::new(),
        });
        r.last_at = Time(obs.at);
        set_step(r, step, v, obs, &message);
    }
    if let Some(r) = &rec
        && let Some(next) = clock::add(r.last_at.0, a.interval)
    {
        wake.at(input.now, next);
    } else {
        wake.after(a.interval);
    }
    record.analysis = rec.clone();
    if a.dry_run {
        return;
    }
    let latest = rec
        .as_ref()
        .and_then(|r| r.steps.iter().find(|s| s.step == step_number(step)));
    match latest.map(|s| s.verdict) {
        Some(AnalysisVerdict::Fail) => {
            let message = latest.map(|s| s.message.clone()).unwrap_or_default();
            abort(view, d, record, step, &message, wake);
        }
        Some(AnalysisVerdict::Pass) => {}
        verdict => hold_unless_due(view, d, record, a, (step, since), verdict.is_none(), wake),
    }
}

/// The step would end (a forward change) without a passing verdict: hold it until its pause
/// plus `maxInconclusive`, then apply the default verdict.
fn hold_unless_due(
    view: &View,
    d: &mut Decision,
    record: &mut RolloutControl,
    a: &Analysis,
    (step, since): (usize, Timestamp),
    never_counted: bool,
    wake: &mut Wake,
) {
    let forward = matches!(
        d.change,
        Some(RoutingChange::SetCurrent { .. } | RoutingChange::SetRamping { .. })
    );
    if !forward {
        return;
    }
    let Strategy::Progressive(steps) = &view.input.desired.strategy else {
        return;
    };
    let pause = steps.get(step).map(|s| s.pause).unwrap_or_default();
    let limit = clock::add(since, pause).and_then(|t| clock::add(t, a.max_inconclusive));
    let now = view.input.now;
    if limit.is_some_and(|t| t <= now) {
        if !a.inconclusive_passes {
            let message = format!(
                "analysis of step {} stayed inconclusive for maxInconclusive past the step's pause; \
                 inconclusiveVerdict is Fail",
                step + 1
            );
            abort(view, d, record, step, &message, wake);
        }
        return;
    }
    d.change = None;
    if let Some(t) = limit {
        wake.at(now, t);
    }
    let why = if never_counted {
        "not analysed yet".to_string()
    } else {
        "analysis inconclusive".to_string()
    };
    d.progress.message = format!(
        "Holding build ID {} at step {} of {}: {why}; the step ends on a passing analysis, or \
         with inconclusiveVerdict {} at {}",
        view.target,
        step + 1,
        steps.len(),
        if a.inconclusive_passes {
            "Pass"
        } else {
            "Fail"
        },
        limit.map_or_else(
            || "never".to_string(),
            |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
        ),
    );
}

fn abort(
    view: &View,
    d: &mut Decision,
    record: &mut RolloutControl,
    step: usize,
    why: &str,
    wake: &mut Wake,
) {
    let target = view.target;
    let current = view
        .current
        .map_or("unversioned workers keep new workflows".to_string(), |b| {
            format!("build ID {b} stays Current")
        });
    let message = format!(
        "Canary analysis failed for build ID {target} at step {}: {why}. Its ramp is back to 0% \
         and {current}; a new build ID starts over, or {} overrides",
        step + 1,
        crate::api::ANNOTATION_PROMOTE
    );
    record.aborted = Some(AbortRecord {
        build_id: target.to_string(),
        reason: ANALYSIS_FAILED.to_string(),
        message: message.clone(),
        at: Time(view.input.now),
        generation: None,
    });
    hold_aborted(view, d, message, wake);
}

/// The target stays at 0 %: clear its ramp if it still ramps, route nothing else.
pub fn hold_aborted(view: &View, d: &mut Decision, message: String, wake: &mut Wake) {
    d.change = view.target_ramp().map(|_| RoutingChange::ClearRamp);
    if d.change.is_some() {
        wake.after(view.input.fast_poll);
    }
    d.start_gates.clear();
    d.progress = Progress {
        phase: Phase::Aborted,
        message,
        step: None,
        rollback: false,
    };
}

fn set_step(
    r: &mut AnalysisRecord,
    step: usize,
    v: AnalysisVerdict,
    obs: &crate::planner::model::AnalysisObservation,
    message: &str,
) {
    let entry = StepVerdict {
        step: step_number(step),
        verdict: v,
        target_closed: to_i64(obs.target.closed),
        target_failed: to_i64(obs.target.failed),
        current_closed: to_i64(obs.current.closed),
        current_failed: to_i64(obs.current.failed),
        message: message.to_string(),
        at: Time(obs.at),
    };
    match r.steps.iter_mut().find(|s| s.step == entry.step) {
        Some(s) => *s = entry,
        None => {
            r.steps.push(entry);
            r.steps.sort_by_key(|s| s.step);
        }
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analysis() -> Analysis {
        Analysis::test()
    }

    fn s(closed: u64, failed: u64) -> Sample {
        Sample { closed, failed }
    }

    #[test]
    fn below_the_minimum_sample_is_inconclusive() {
        let (v, m) = verdict(s(9, 9), s(100, 0), &analysis());
        assert_eq!(v, AnalysisVerdict::Inconclusive);
        assert!(m.contains("fewer than 10"), "{m}");
    }

    #[test]
    fn absolute_threshold_fails_with_the_rates() {
        let (v, m) = verdict(s(10, 3), s(100, 30), &analysis());
        assert_eq!(v, AnalysisVerdict::Fail);
        assert!(m.contains("target 30.0% failed (3 of 10)"), "{m}");
        assert!(m.contains("maxFailureRate 20%"), "{m}");
    }

    #[test]
    fn relative_threshold_compares_with_current() {
        let mut a = analysis();
        a.max_failure_rate = None;
        // 15% vs 5%: 10 points above, more than 5.
        let (v, m) = verdict(s(20, 3), s(20, 1), &a);
        assert_eq!(v, AnalysisVerdict::Fail, "{m}");
        // Equal non-zero rates pass.
        assert_eq!(verdict(s(20, 3), s(40, 6), &a).0, AnalysisVerdict::Pass);
        // Exactly at the limit passes.
        assert_eq!(verdict(s(20, 2), s(20, 1), &a).0, AnalysisVerdict::Pass);
        // Too little of the current version to compare with.
        assert_eq!(
            verdict(s(20, 3), s(5, 0), &a).0,
            AnalysisVerdict::Inconclusive
        );
    }

    #[test]
    fn healthy_target_passes_and_an_absolute_only_check_needs_no_current() {
        assert_eq!(
            verdict(s(50, 1), s(50, 1), &analysis()).0,
            AnalysisVerdict::Pass
        );
        let mut a = analysis();
        a.max_failure_rate_increase = None;
        assert_eq!(verdict(s(50, 1), s(0, 0), &a).0, AnalysisVerdict::Pass);
    }

    #[test]
    fn rates_of_empty_samples_are_zero() {
        assert_eq!(rate(s(0, 0)), 0.0);
        assert_eq!(rate(s(4, 1)), 25.0);
    }
}
