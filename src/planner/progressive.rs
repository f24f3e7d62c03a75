//! The progressive step algorithm.
//!
//! Position and timing come only from Temporal: the step in effect is the last step whose
//! percentage does not exceed the target's current ramp, and it started when Temporal last
//! changed the ramp percentage (`ramp_percentage_changed_at`). A restarted controller, or a
//! second replica after a leader change, therefore continues exactly where the rollout is.
//! A ramp that matches no step (edited by hand, or the steps were edited) snaps down to the
//! highest step not above it, which restarts that step's pause.

use jiff::Timestamp;

use crate::planner::clock;
use crate::planner::model::Step;
use crate::planner::view::same_percentage;

#[derive(Clone, Debug, PartialEq)]
pub enum StepDecision {
    /// No steps configured: nothing to ramp through (validation normally prevents this).
    NoSteps,
    /// Set the target's ramp to step `index`: a fresh start, a snap, or the next step.
    Ramp { index: usize },
    /// The last step's pause is over.
    Promote,
    /// Stay on step `index` until `next_at` (`None`: Temporal gave no start time).
    Hold {
        index: usize,
        started_at: Option<Timestamp>,
        next_at: Option<Timestamp>,
    },
}

/// `ramp`: the target's current ramp (`None` when the target is not ramping).
pub fn decide(
    steps: &[Step],
    ramp: Option<f32>,
    changed_at: Option<Timestamp>,
    now: Timestamp,
) -> StepDecision {
    decide_with(steps, ramp, changed_at, now, None)
}

/// The Progressive step the target ramps at exactly, if any (analysis and step gates act
/// only then).
pub fn target_step(input: &crate::planner::model::PlanInput) -> Option<usize> {
    let crate::planner::model::Strategy::Progressive(steps) = &input.desired.strategy else {
        return None;
    };
    let r = &input.temporal.routing;
    if r.ramping_build_id.as_deref() != Some(input.desired.build_id.as_str()) {
        return None;
    }
    step_of(steps, r.ramp_percentage)
}

/// The step whose percentage is exactly `ramp`, if any.
pub fn step_of(steps: &[Step], ramp: f32) -> Option<usize> {
    steps
        .iter()
        .position(|s| same_percentage(s.ramp_percentage, ramp))
}

/// [`decide`], with `resumed`: step `index` ends at the given time instead of its pause after
/// `changed_at` (a step resumed after a pause keeps only the time it had left).
pub fn decide_with(
    steps: &[Step],
    ramp: Option<f32>,
    changed_at: Option<Timestamp>,
    now: Timestamp,
    resumed: Option<(usize, Timestamp)>,
) -> StepDecision {
    if steps.is_empty() {
        return StepDecision::NoSteps;
    }
    let Some(ramp) = ramp else {
        return StepDecision::Ramp { index: 0 };
    };
    let index = steps
        .iter()
        .rposition(|s| s.ramp_percentage <= ramp || same_percentage(s.ramp_percentage, ramp))
        .unwrap_or(0);
    if !same_percentage(steps[index].ramp_percentage, ramp) {
        return StepDecision::Ramp { index };
    }
    let resumed_at = resumed.filter(|(i, _)| *i == index).map(|(_, at)| at);
    if let Some(at) = resumed_at
        && at > now
    {
        return StepDecision::Hold {
            index,
            started_at: changed_at,
            next_at: Some(at),
        };
    }
    let Some(started_at) = changed_at else {
        return StepDecision::Hold {
            index,
            started_at: None,
            next_at: None,
        };
    };
    let next_at = resumed_at.or_else(|| clock::add(started_at, steps[index].pause));
    match next_at {
        Some(t) if t <= now => {
            if index + 1 < steps.len() {
                StepDecision::Ramp { index: index + 1 }
            } else {
                StepDecision::Promote
            }
        }
        _ => StepDecision::Hold {
            index,
            started_at: Some(started_at),
            next_at,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn steps(spec: &[(f32, u64)]) -> Vec<Step> {
        spec.iter()
            .map(|&(p, secs)| Step {
                ramp_percentage: p,
                pause: Duration::from_secs(secs),
            })
            .collect()
    }

    const NOW: &str = "2026-03-02T12:00:00Z";

    #[test]
    fn not_ramping_starts_at_the_first_step() {
        let s = steps(&[(25.0, 60), (50.0, 60)]);
        assert_eq!(
            decide(&s, None, None, ts(NOW)),
            StepDecision::Ramp { index: 0 }
        );
    }

    #[test]
    fn holds_until_the_pause_has_passed() {
        let s = steps(&[(25.0, 600), (50.0, 600)]);
        let started = ts("2026-03-02T11:55:00Z");
        assert_eq!(
            decide(&s, Some(25.0), Some(started), ts(NOW)),
            StepDecision::Hold {
                index: 0,
                started_at: Some(started),
                next_at: Some(ts("2026-03-02T12:05:00Z"))
            }
        );
    }

    #[test]
    fn case_14_exactly_one_pause_ago_advances() {
        let s = steps(&[(25.0, 300), (50.0, 300)]);
        assert_eq!(
            decide(&s, Some(25.0), Some(ts("2026-03-02T11:55:00Z")), ts(NOW)),
            StepDecision::Ramp { index: 1 }
        );
    }

    #[test]
    fn case_13_last_step_long_past_promotes() {
        let s = steps(&[(25.0, 3600), (75.0, 3600)]);
        assert_eq!(
            decide(&s, Some(75.0), Some(ts("2026-03-02T08:00:00Z")), ts(NOW)),
            StepDecision::Promote
        );
    }

    #[test]
    fn case_15_last_step_just_past_pause_promotes() {
        let s = steps(&[(25.0, 60), (50.0, 60)]);
        assert_eq!(
            decide(&s, Some(50.0), Some(ts("2026-03-02T11:58:59Z")), ts(NOW)),
            StepDecision::Promote
        );
    }

    #[test]
    fn case_16_unknown_change_time_holds() {
        let s = steps(&[(25.0, 60), (50.0, 60)]);
        assert_eq!(
            decide(&s, Some(25.0), None, ts(NOW)),
            StepDecision::Hold {
                index: 0,
                started_at: None,
                next_at: None
            }
        );
    }

    #[test]
    fn case_17_manual_ramp_between_steps_snaps_down() {
        let s = steps(&[(5.0, 60), (10.0, 60), (25.0, 60), (50.0, 60)]);
        let long_ago = Some(ts("2026-03-01T00:00:00Z"));
        assert_eq!(
            decide(&s, Some(20.0), long_ago, ts(NOW)),
            StepDecision::Ramp { index: 1 }
        );
    }

    #[test]
    fn case_18_manual_ramp_below_every_step_goes_to_the_first() {
        let s = steps(&[(10.0, 60), (25.0, 60), (50.0, 60)]);
        assert_eq!(
            decide(&s, Some(1.0), Some(ts(NOW)), ts(NOW)),
            StepDecision::Ramp { index: 0 }
        );
    }

    #[test]
    fn ramp_above_every_step_snaps_to_the_last() {
        let s = steps(&[(10.0, 60), (25.0, 60)]);
        assert_eq!(
            decide(&s, Some(80.0), Some(ts(NOW)), ts(NOW)),
            StepDecision::Ramp { index: 1 }
        );
    }

    #[test]
    fn case_19_no_steps_never_routes() {
        assert_eq!(
            decide(&[], Some(10.0), Some(ts(NOW)), ts(NOW)),
            StepDecision::NoSteps
        );
        assert_eq!(decide(&[], None, None, ts(NOW)), StepDecision::NoSteps);
    }

    #[test]
    fn case_20_target_ramping_with_unknown_percentage_restarts() {
        // A target Temporal lists as Ramping but whose ramp we cannot see behaves as not ramping.
        let s = steps(&[(25.0, 60)]);
        assert_eq!(
            decide(&s, None, Some(ts(NOW)), ts(NOW)),
            StepDecision::Ramp { index: 0 }
        );
    }

    #[test]
    fn a_resumed_step_ends_at_its_resumed_deadline() {
        let s = steps(&[(25.0, 60), (50.0, 60)]);
        // Temporal says the step started long ago; resumed with 30 s left, it holds.
        let long_ago = Some(ts("2026-03-02T11:00:00Z"));
        let resumed_until = ts("2026-03-02T12:00:30Z");
        assert_eq!(
            decide_with(&s, Some(25.0), long_ago, ts(NOW), Some((0, resumed_until))),
            StepDecision::Hold {
                index: 0,
                started_at: long_ago,
                next_at: Some(resumed_until)
            }
        );
        // Once that deadline passes, the next step follows.
        assert_eq!(
            decide_with(
                &s,
                Some(25.0),
                long_ago,
                resumed_until,
                Some((0, resumed_until))
            ),
            StepDecision::Ramp { index: 1 }
        );
        // A resumed deadline for another step does not apply.
        let just_now = Some(ts("2026-03-02T11:59:50Z"));
        assert!(matches!(
            decide_with(&s, Some(50.0), just_now, ts(NOW), Some((0, resumed_until))),
            StepDecision::Hold { index: 1, next_at: Some(t), .. } if t == ts("2026-03-02T12:00:50Z")
        ));
        // A resumed deadline is later than the full pause would be: it still wins.
        let recent = Some(ts("2026-03-02T11:59:30Z"));
        let later = ts("2026-03-02T12:05:00Z");
        assert!(matches!(
            decide_with(&s, Some(25.0), recent, ts("2026-03-02T12:01:00Z"), Some((0, later))),
            StepDecision::Hold { index: 0, next_at: Some(t), .. } if t == later
        ));
    }

    #[test]
    fn step_of_finds_exact_steps_only() {
        let s = steps(&[(25.0, 60), (50.0, 60)]);
        assert_eq!(step_of(&s, 50.000_004), Some(1));
        assert_eq!(step_of(&s, 30.0), None);
    }

    #[test]
    fn wire_percentages_compare_loosely() {
        let s = steps(&[(33.0, 60), (66.0, 60)]);
        let started = ts("2026-03-02T11:59:30Z");
        assert!(matches!(
            decide(&s, Some(33.000_004), Some(started), ts(NOW)),
            StepDecision::Hold { index: 0, .. }
        ));
    }
}
