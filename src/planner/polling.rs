//! When Temporal is worth asking: Temporal is a budget shared by every rollout on a namespace
//! (`src/temporal/budget.rs`), so a rollout only polls it while there is something to see.
//!
//! - While the target's Pods are not Ready, no worker of the target can have registered, and
//!   the Deployment's readiness is a watched fact: the remembered view of Temporal stands in
//!   for a describe ([`may_reuse`]) and nothing is polled; a readiness change wakes the
//!   rollout through the Deployment watch.
//! - Once some Pod is Ready, the pollers are looked for at `--fast-poll`, backing off with the
//!   time already waited (about doubling) up to [`POLLER_WAIT_CAP`] ([`backoff_since`]); a
//!   running gate workflow is looked at the same way, from its start.
//! - At rest, the remembered view stands in while it is younger than the rest cadence allows
//!   ([`crate::planner::rest::reuse_limit`]), so every rest look describes afresh.
//!
//! Pure; the remembered view lives in `src/worker_deployment/remembered.rs`.

use std::time::Duration;

use jiff::Timestamp;

use crate::planner::model::ObservedDeployment;
use crate::temporal::state::{TemporalVersionStatus, WorkerDeploymentState};

/// Longest interval between looks while a Ready target's pollers stay absent.
pub const POLLER_WAIT_CAP: Duration = Duration::from_secs(15);

/// What a reconcile remembers of Temporal for the next one.
#[derive(Clone, Debug, PartialEq)]
pub struct Remembered {
    /// `metadata.generation` of the spec it was observed for.
    pub generation: i64,
    pub at: Timestamp,
    pub state: WorkerDeploymentState,
    /// Set while the rollout waits for its gate workflows: the target's task queues (what
    /// the gate needs of the version), so only the gate workflows are asked.
    pub gate_queues: Option<Vec<String>>,
}

/// True when nothing in Temporal moves on its own schedule: no draining or ramping version,
/// no routing update still propagating.
pub fn settled(state: &WorkerDeploymentState) -> bool {
    !state.routing.update_in_progress
        && state.routing.ramping_build_id.is_none()
        && state
            .versions
            .iter()
            .all(|v| v.status != TemporalVersionStatus::Draining)
}

/// True when only a watched event or someone else's change in Temporal can move the rollout:
/// Temporal [`settled`], and either the target Current (at rest) or the target not registered
/// with none of its Pods Ready (none of its workers can register before a readiness change,
/// which the Deployment watch delivers).
pub fn quiet(
    state: &WorkerDeploymentState,
    target_build: &str,
    deployments: &[ObservedDeployment],
) -> bool {
    settled(state)
        && (waiting_for_pods(state, target_build, deployments) || at_rest(state, target_build))
}

fn waiting_for_pods(
    state: &WorkerDeploymentState,
    target_build: &str,
    deployments: &[ObservedDeployment],
) -> bool {
    let target_pods_unready = deployments
        .iter()
        .find(|d| d.build_id == target_build && !d.deleting)
        .is_some_and(|d| d.ready_replicas == 0);
    state.version(target_build).is_none() && target_pods_unready
}

fn at_rest(state: &WorkerDeploymentState, target_build: &str) -> bool {
    state.version(target_build).is_some()
        && state.routing.current_build_id.as_deref() == Some(target_build)
}

/// True when the remembered view can stand in for a describe of the worker deployment: same
/// spec, younger than `max_age`, and either [`quiet`] or the target registered and held by
/// its gate workflows (only they are asked). Then only a human's change in Temporal could
/// differ, and it is noticed at the first look once the view is `max_age` old (the idle cost
/// budget of issue 30: an idle worker deployment is described once per rest look, not once
/// per reconcile).
pub fn may_reuse(
    remembered: &Remembered,
    generation: i64,
    target_build: &str,
    deployments: &[ObservedDeployment],
    now: Timestamp,
    max_age: Duration,
) -> bool {
    let state = &remembered.state;
    let young = now
        .duration_since(remembered.at)
        .try_into()
        .is_ok_and(|age: Duration| age < max_age);
    let waiting_for_gate = remembered.gate_queues.is_some()
        && state.version(target_build).is_some()
        && state.routing.current_build_id.as_deref() != Some(target_build);
    remembered.generation == generation
        && young
        && (quiet(state, target_build, deployments) || (settled(state) && waiting_for_gate))
}

/// How long to wait before looking again for something that started at `since` (a Ready
/// target's pollers, a gate workflow's end): `fast_poll` at first, then the time already
/// waited (each look about doubles the wait), at most [`POLLER_WAIT_CAP`]. Derived from
/// Kubernetes' or Temporal's own timestamps, so a restarted controller continues the same
/// backoff.
pub fn backoff_since(
    fast_poll: Duration,
    ready_since: Option<Timestamp>,
    now: Timestamp,
) -> Duration {
    let waited = ready_since
        .and_then(|t| Duration::try_from(now.duration_since(t)).ok())
        .unwrap_or_default();
    waited.min(POLLER_WAIT_CAP).max(fast_poll)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::temporal::state::{RoutingState, VersionState};

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const NOW: &str = "2026-03-02T10:00:00Z";
    /// The reuse limit at the default rest interval.
    const AGE: Duration = Duration::from_secs(225);

    /// `w-<build>` with `ready` of 1 replica Ready (the shared fixture).
    fn deployment(build: &str, ready: i32) -> ObservedDeployment {
        ObservedDeployment {
            ready_replicas: ready,
            ..ObservedDeployment::test(build, 1)
        }
    }

    fn version(build: &str, status: TemporalVersionStatus) -> VersionState {
        VersionState::test(build, status)
    }

    /// v1 Current in Temporal, remembered 10 s ago for generation 2.
    fn remembered() -> Remembered {
        Remembered {
            generation: 2,
            at: ts("2026-03-02T09:59:50Z"),
            state: WorkerDeploymentState {
                exists: true,
                routing: RoutingState {
                    current_build_id: Some("v1".into()),
                    ..Default::default()
                },
                versions: vec![version("v1", TemporalVersionStatus::Current)],
                ..Default::default()
            },
            gate_queues: None,
        }
    }

    fn unready_target() -> Vec<ObservedDeployment> {
        vec![deployment("v1", 1), deployment("v2", 0)]
    }

    #[test]
    fn a_target_whose_pods_are_not_ready_reuses_the_remembered_view() {
        assert!(may_reuse(
            &remembered(),
            2,
            "v2",
            &unready_target(),
            ts(NOW),
            AGE
        ));
    }

    #[test]
    fn a_ready_pod_means_temporal_is_asked_again() {
        let ds = vec![deployment("v1", 1), deployment("v2", 1)];
        assert!(!may_reuse(&remembered(), 2, "v2", &ds, ts(NOW), AGE));
    }

    #[test]
    fn a_missing_target_deployment_is_no_reason_to_trust_memory() {
        let ds = vec![deployment("v1", 1)];
        assert!(!may_reuse(&remembered(), 2, "v2", &ds, ts(NOW), AGE));
        let mut deleting = deployment("v2", 0);
        deleting.deleting = true;
        assert!(!may_reuse(
            &remembered(),
            2,
            "v2",
            &[deployment("v1", 1), deleting],
            ts(NOW),
            AGE
        ));
    }

    #[test]
    fn a_new_spec_or_an_old_memory_is_described_afresh() {
        assert!(!may_reuse(
            &remembered(),
            3,
            "v2",
            &unready_target(),
            ts(NOW),
            AGE
        ));
        let later = ts("2026-03-02T10:05:00Z");
        assert!(!may_reuse(
            &remembered(),
            2,
            "v2",
            &unready_target(),
            later,
            AGE
        ));
    }

    #[test]
    fn a_rollout_at_rest_is_described_once_per_remembered_age() {
        let r = remembered();
        let ds = vec![deployment("v1", 1)];
        assert!(may_reuse(&r, 2, "v1", &ds, ts(NOW), AGE));
        let later = ts("2026-03-02T10:05:00Z");
        assert!(!may_reuse(&r, 2, "v1", &ds, later, AGE), "too old");
        // An old version still draining moves on Temporal's schedule: asked every time.
        let mut draining = r.clone();
        draining
            .state
            .versions
            .push(version("v0", TemporalVersionStatus::Draining));
        assert!(!may_reuse(&draining, 2, "v1", &ds, ts(NOW), AGE));
        // So does a ramp.
        let mut ramping = r;
        ramping.state.routing.ramping_build_id = Some("v2".into());
        assert!(!may_reuse(&ramping, 2, "v1", &ds, ts(NOW), AGE));
    }

    #[test]
    fn a_registered_target_is_described_afresh() {
        let mut r = remembered();
        r.state
            .versions
            .push(version("v2", TemporalVersionStatus::Inactive));
        assert!(!may_reuse(&r, 2, "v2", &unready_target(), ts(NOW), AGE));
    }

    #[test]
    fn a_target_held_by_its_gate_asks_only_the_gate() {
        let mut r = remembered();
        r.state
            .versions
            .push(version("v2", TemporalVersionStatus::Inactive));
        let ready = vec![deployment("v1", 1), deployment("v2", 1)];
        assert!(
            !may_reuse(&r, 2, "v2", &ready, ts(NOW), AGE),
            "no gate pending"
        );
        r.gate_queues = Some(vec!["q".into()]);
        assert!(may_reuse(&r, 2, "v2", &ready, ts(NOW), AGE));
        // Once the target is Current there is no gate to wait for, and the old Current drains
        // on Temporal's schedule.
        r.state.routing.current_build_id = Some("v2".into());
        r.state.versions[0].status = TemporalVersionStatus::Draining;
        assert!(!may_reuse(&r, 2, "v2", &ready, ts(NOW), AGE));
    }

    #[test]
    fn versions_that_move_on_temporals_schedule_are_described_afresh() {
        let mut draining = remembered();
        draining
            .state
            .versions
            .push(version("v0", TemporalVersionStatus::Draining));
        assert!(!may_reuse(
            &draining,
            2,
            "v2",
            &unready_target(),
            ts(NOW),
            AGE
        ));
        let mut ramping = remembered();
        ramping.state.routing.ramping_build_id = Some("v0".into());
        assert!(!may_reuse(
            &ramping,
            2,
            "v2",
            &unready_target(),
            ts(NOW),
            AGE
        ));
        let mut propagating = remembered();
        propagating.state.routing.update_in_progress = true;
        assert!(!may_reuse(
            &propagating,
            2,
            "v2",
            &unready_target(),
            ts(NOW),
            AGE
        ));
    }

    #[test]
    fn the_backoff_since_starts_at_fast_poll_and_doubles_up_to_the_cap() {
        let fast = Duration::from_millis(500);
        let now = ts(NOW);
        assert_eq!(backoff_since(fast, None, now), fast);
        assert_eq!(backoff_since(fast, Some(now), now), fast);
        let ready_2s_ago = ts("2026-03-02T09:59:58Z");
        assert_eq!(
            backoff_since(fast, Some(ready_2s_ago), now),
            Duration::from_secs(2)
        );
        let ready_long_ago = ts("2026-03-02T09:00:00Z");
        assert_eq!(
            backoff_since(fast, Some(ready_long_ago), now),
            POLLER_WAIT_CAP
        );
        // A clock skew that puts readiness in the future is no wait at all.
        assert_eq!(
            backoff_since(fast, Some(ts("2026-03-02T10:01:00Z")), now),
            fast
        );
        // Each look about doubles the time waited: 0.5, 1, 2, 4, 8, 15 s.
        let mut t = now;
        let mut looks = vec![];
        for _ in 0..6 {
            let w = backoff_since(fast, Some(now), t);
            looks.push(w.as_secs_f64());
            t += jiff::SignedDuration::try_from(w).unwrap();
        }
        assert_eq!(looks, vec![0.5, 0.5, 1.0, 2.0, 4.0, 8.0]);
    }
}
