//! Drain visibility: which old versions' pinned workflows the status shows, when visibility is
//! asked again, and what a version's retirement waits for, in words. Pure.
//!
//! Counting every old version on every reconcile would spend the Temporal budget on facts that
//! change slowly, so a count is reused from the last status until it is [`DRAIN_POLL`] old.

use jiff::Timestamp;

use super::clock::{self, DRAIN_POLL};
use super::model::PlanInput;
use crate::temporal::state::{PinnedView, TemporalVersionStatus};

/// How many of the oldest pinned workflows the status names.
pub const SAMPLE: usize = 3;

/// Versions whose pinned workflows the status shows: every Draining version, and every Drained
/// one whose Deployment is still there (kept by pinned workflows or by the sunset delays).
pub fn shown(input: &PlanInput) -> Vec<String> {
    input
        .temporal
        .versions
        .iter()
        .filter(|v| match v.status {
            TemporalVersionStatus::Draining => true,
            TemporalVersionStatus::Drained => {
                input.deployments.iter().any(|d| d.build_id == v.build_id)
            }
            _ => false,
        })
        .map(|v| v.build_id.clone())
        .collect()
}

/// True when the last count (from the previous status) is missing or at least a drain poll
/// old, or from the future (a clock step): ask visibility again.
pub fn due(prior: Option<&PinnedView>, now: Timestamp) -> bool {
    prior.is_none_or(|p| {
        let next = clock::add(p.counted_at, DRAIN_POLL);
        next.is_none_or(|next| now >= next) || p.counted_at > now
    })
}

/// What an old version's retirement waits for; `None` when nothing (or it is not old).
pub fn waiting_for(
    status: TemporalVersionStatus,
    pinned: Option<&PinnedView>,
    scaledown_at: Option<Timestamp>,
    delete_at: Option<Timestamp>,
    now: Timestamp,
) -> Option<String> {
    let open = pinned.map_or(0, |p| p.count);
    let workflows = |n: u64| match n {
        1 => "1 open workflow".to_string(),
        n => format!("{n} open workflows"),
    };
    match status {
        TemporalVersionStatus::Draining if open > 0 => Some(format!(
            "{} pinned to it to finish, then Temporal to report it drained",
            workflows(open)
        )),
        TemporalVersionStatus::Draining => {
            Some("Temporal to report it drained (it re-checks drainage on its own interval)".into())
        }
        TemporalVersionStatus::Drained if open > 0 => {
            Some(format!("{} pinned to it to finish", workflows(open)))
        }
        TemporalVersionStatus::Drained => match (scaledown_at, delete_at) {
            (Some(at), _) if at > now => Some(format!("scale-down at {at} (scaledownDelay)")),
            (_, Some(at)) if at > now => Some(format!("deletion at {at} (deleteDelay)")),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{NOW, ago, ts};
    use crate::planner::model::ObservedDeployment;
    use crate::temporal::state::VersionState;

    fn view(count: u64, counted_secs_ago: i64) -> PinnedView {
        PinnedView {
            count,
            counted_at: ago(counted_secs_ago),
            oldest: Vec::new(),
        }
    }

    #[test]
    fn draining_versions_and_drained_ones_with_a_deployment_are_shown() {
        let mut input = PlanInput::test();
        input.temporal.versions.extend([
            VersionState::test("v0", TemporalVersionStatus::Draining),
            VersionState::drained("vx", ago(60)),
            VersionState::drained("vy", ago(60)),
        ]);
        // vx still has its Deployment; vy's is gone; v1 is Current and v2 Inactive.
        input.deployments.push(ObservedDeployment::test("vx", 0));
        assert_eq!(shown(&input), ["v0", "vx"]);
        assert!(shown(&PlanInput::test()).is_empty());
    }

    #[test]
    fn a_count_is_reused_until_it_is_a_drain_poll_old() {
        let now = ts(NOW);
        let poll = DRAIN_POLL.as_secs() as i64;
        assert!(due(None, now), "never counted");
        assert!(!due(Some(&view(2, 1)), now));
        assert!(!due(Some(&view(2, poll - 1)), now));
        assert!(due(Some(&view(2, poll)), now));
        assert!(
            due(Some(&view(2, -5)), now),
            "counted in the future: clock stepped"
        );
    }

    #[test]
    fn what_retirement_waits_for() {
        use TemporalVersionStatus::*;
        let now = ts(NOW);
        let later = |s: i64| Some(ago(-s));
        let w = |status, pinned: Option<&PinnedView>, down, del| {
            waiting_for(status, pinned, down, del, now)
        };
        assert_eq!(
            w(Draining, Some(&view(1, 0)), None, None).as_deref(),
            Some("1 open workflow pinned to it to finish, then Temporal to report it drained")
        );
        assert!(w(Draining, None, None, None).is_some_and(|s| s.starts_with("Temporal to report")));
        assert!(
            w(Draining, Some(&view(0, 0)), None, None)
                .is_some_and(|s| s.starts_with("Temporal to report"))
        );
        assert_eq!(
            w(Drained, Some(&view(4, 0)), later(10), later(20)).as_deref(),
            Some("4 open workflows pinned to it to finish")
        );
        assert!(
            w(Drained, Some(&view(0, 0)), later(10), later(20))
                .is_some_and(|s| s.starts_with("scale-down at") && s.ends_with("(scaledownDelay)"))
        );
        assert!(
            w(Drained, None, Some(ago(1)), later(20))
                .is_some_and(|s| s.starts_with("deletion at") && s.ends_with("(deleteDelay)"))
        );
        assert_eq!(w(Drained, None, Some(ago(2)), Some(ago(1))), None);
        assert_eq!(w(Current, Some(&view(3, 0)), None, None), None);
        assert_eq!(w(Ramping, None, None, None), None);
        assert_eq!(w(Inactive, None, None, None), None);
    }
}
