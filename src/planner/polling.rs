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
//!
//! - Right after our own write to the worker deployment, the view that write left
//!   ([`view_after_write`]) stands in for a describe for [`AFTER_WRITE_SETTLE`]: Temporal is
//!   still propagating the write, and a describe then stalls or is refused.
//!
//! Pure; the remembered view lives in `src/reconcile/remembered/mod.rs`.

use std::time::Duration;

use jiff::Timestamp;

use crate::planner::model::{ObservedDeployment, RoutingChange};
use crate::temporal::state::{RoutingInstall, TemporalVersionStatus, WorkerDeploymentState};

/// Longest interval between looks while a Ready target's pollers stay absent.
pub const POLLER_WAIT_CAP: Duration = Duration::from_secs(15);

/// Longest a remembered view may stand in for a describe: a human's change in Temporal (or a
/// lost watch event) is noticed within this.
pub const REMEMBERED_MAX_AGE: Duration = Duration::from_secs(300);

/// How long after our own write to a worker deployment the view that write left stands in for
/// a describe. Temporal 1.32 answers a describe of the deployment issued in the first second
/// after a routing write only at about 1 s after the write (at 1 s, only at about 2 s): its
/// deployment workflow is busy propagating the write, and under load it refuses instead
/// (`ResourceExhausted`, cause `BusyWorkflow`). Measured on the dev server
/// (`a_describe_right_after_a_routing_write` in `tests/rollout_control_restart.rs`): a describe
/// sent 0, 0.25, 0.5 and 1 s after the write took about 1000, 760, 520 and 1000 ms; at 1.5 s
/// 8 or 511 ms; from 2 s on 8-13 ms. Nothing waits out this window: the passes inside it use
/// [`view_after_write`].
pub const AFTER_WRITE_SETTLE: Duration = Duration::from_secs(2);

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
    /// The view our own write left ([`view_after_write`]) rather than a describe.
    pub written: bool,
}

/// What our own write to the worker deployment did, from its answers.
#[derive(Clone, Debug, Default)]
pub struct OwnWrite<'a> {
    pub routed: Option<&'a RoutingChange>,
    /// Versions whose Temporal record we deleted.
    pub forgotten: Vec<&'a str>,
    pub claimed_manager: bool,
    /// The conflict token the last write answered with: what a describe would now return.
    pub conflict_token: Option<&'a [u8]>,
    pub identity: &'a str,
    /// This install's ID, recorded on the version the write routed to (empty: unknown).
    pub install_id: &'a str,
}

/// Temporal's view as our own write left it, on `before`. Temporal timed the change between
/// `sent` (before our writes) and `answered`: the routing change gets `sent`, so a wake for the
/// step it starts comes early, never late (the decision then describes afresh), and a demoted
/// version's draining gets `answered`, so no pinned workflow is cancelled or terminated early
/// while this view stands in.
///
/// Otherwise: what a describe returns
/// once the write has propagated (Temporal's answer to a Set call is the new conflict token,
/// and its routing is the one we asked for). Versions that lose the current or ramping slot
/// are Draining at once, as Temporal marks them inside the Set call. Not "in progress": that
/// would poll the rollout at `--fast-poll` through the settle only to reuse this view, and
/// the propagation it stands for is not ours to wait for (routing is in effect when the Set
/// call returns); the next describe after the settle confirms the write.
pub fn view_after_write(
    before: &WorkerDeploymentState,
    write: &OwnWrite<'_>,
    (sent, answered): (Timestamp, Timestamp),
) -> WorkerDeploymentState {
    let mut view = before.clone();
    if let Some(token) = write.conflict_token {
        view.conflict_token = token.to_vec();
    }
    if write.claimed_manager {
        view.manager_identity = write.identity.to_string();
    }
    view.versions
        .retain(|v| !write.forgotten.contains(&v.build_id.as_str()));
    let Some(change) = write.routed else {
        return view;
    };
    view.last_modifier_identity = write.identity.to_string();
    let (routed_to, demoted) = route(&mut view, change, sent);
    view.last_routing_install = routed_to
        .clone()
        .filter(|_| !write.install_id.is_empty())
        .map(|build_id| RoutingInstall {
            build_id,
            install_id: write.install_id.to_string(),
        });
    for v in &mut view.versions {
        if demoted.as_ref() == Some(&v.build_id) {
            v.status = TemporalVersionStatus::Draining;
            v.drainage_changed_at = Some(answered);
        }
    }
    view
}

/// Applies `change` to the routing; the build routed to (its version Current or Ramping) and
/// the one that lost its slot.
fn route(
    view: &mut WorkerDeploymentState,
    change: &RoutingChange,
    now: Timestamp,
) -> (Option<String>, Option<String>) {
    let r = &mut view.routing;
    let clear_ramp = |r: &mut crate::temporal::state::RoutingState| {
        r.ramping_build_id = None;
        r.ramp_percentage = 0.0;
        r.ramping_changed_at = Some(now);
        r.ramp_percentage_changed_at = Some(now);
    };
    let (to, status, demoted) = match change {
        RoutingChange::SetCurrent { build_id } => {
            let old = r.current_build_id.replace(build_id.clone());
            r.current_changed_at = Some(now);
            if r.ramping_build_id.as_ref() == Some(build_id) {
                clear_ramp(r);
            }
            let demoted = old.filter(|o| o != build_id);
            (build_id, TemporalVersionStatus::Current, demoted)
        }
        RoutingChange::SetRamping {
            build_id,
            percentage,
        } => {
            let old = r.ramping_build_id.replace(build_id.clone());
            if old.as_ref() != Some(build_id) {
                r.ramping_changed_at = Some(now);
            }
            r.ramp_percentage = *percentage;
            r.ramp_percentage_changed_at = Some(now);
            let demoted = old.filter(|o| o != build_id);
            (build_id, TemporalVersionStatus::Ramping, demoted)
        }
        RoutingChange::ClearRamp => {
            let old = r.ramping_build_id.clone();
            clear_ramp(r);
            return (None, old);
        }
    };
    for v in &mut view.versions {
        if &v.build_id == to {
            v.status = status;
        } else if status == TemporalVersionStatus::Current && demoted.as_ref() == Some(&v.build_id)
        {
            v.last_current_at = Some(now);
        }
    }
    (Some(to.clone()), demoted)
}

/// True when the remembered view can stand in for a describe of the worker deployment: the
/// view our own write left, for [`AFTER_WRITE_SETTLE`]; otherwise same spec, young enough, nothing in Temporal that moves on its own schedule (a draining or
/// ramping version, a routing update still propagating), and either the target not
/// registered with none of its Pods Ready (so none of its workers can have registered since),
/// or the target registered and held by its gate workflows (only they are asked), or the
/// rollout at rest (the target Current): then only a human's change in Temporal could differ,
/// and it is noticed within [`REMEMBERED_MAX_AGE`] (the idle cost budget of issue 30: an idle
/// worker deployment is described once per that age, not once per idle reconcile).
pub fn may_reuse(
    remembered: &Remembered,
    generation: i64,
    target_build: &str,
    deployments: &[ObservedDeployment],
    now: Timestamp,
) -> bool {
    let state = &remembered.state;
    let younger_than = |max: Duration| {
        now.duration_since(remembered.at)
            .try_into()
            .is_ok_and(|age: Duration| age < max)
    };
    if remembered.written {
        // Our own write's view, whatever the spec: a describe now would stall or be refused.
        return younger_than(AFTER_WRITE_SETTLE);
    }
    let young = younger_than(REMEMBERED_MAX_AGE);
    let target_pods_unready = deployments
        .iter()
        .find(|d| d.build_id == target_build && !d.deleting)
        .is_some_and(|d| d.ready_replicas == 0);
    let settled = !state.routing.update_in_progress
        && state.routing.ramping_build_id.is_none()
        && state
            .versions
            .iter()
            .all(|v| v.status != TemporalVersionStatus::Draining);
    let waiting_for_pods = state.version(target_build).is_none() && target_pods_unready;
    let waiting_for_gate = remembered.gate_queues.is_some()
        && state.version(target_build).is_some()
        && state.routing.current_build_id.as_deref() != Some(target_build);
    let at_rest = state.version(target_build).is_some()
        && state.routing.current_build_id.as_deref() == Some(target_build);
    remembered.generation == generation
        && young
        && settled
        && (waiting_for_pods || waiting_for_gate || at_rest)
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
            written: false,
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
            ts(NOW)
        ));
    }

    #[test]
    fn a_ready_pod_means_temporal_is_asked_again() {
        let ds = vec![deployment("v1", 1), deployment("v2", 1)];
        assert!(!may_reuse(&remembered(), 2, "v2", &ds, ts(NOW)));
    }

    #[test]
    fn a_missing_target_deployment_is_no_reason_to_trust_memory() {
        let ds = vec![deployment("v1", 1)];
        assert!(!may_reuse(&remembered(), 2, "v2", &ds, ts(NOW)));
        let mut deleting = deployment("v2", 0);
        deleting.deleting = true;
        assert!(!may_reuse(
            &remembered(),
            2,
            "v2",
            &[deployment("v1", 1), deleting],
            ts(NOW)
        ));
    }

    #[test]
    fn a_new_spec_or_an_old_memory_is_described_afresh() {
        assert!(!may_reuse(
            &remembered(),
            3,
            "v2",
            &unready_target(),
            ts(NOW)
        ));
        let later = ts("2026-03-02T10:05:00Z");
        assert!(!may_reuse(&remembered(), 2, "v2", &unready_target(), later));
    }

    #[test]
    fn a_rollout_at_rest_is_described_once_per_remembered_age() {
        let r = remembered();
        let ds = vec![deployment("v1", 1)];
        assert!(may_reuse(&r, 2, "v1", &ds, ts(NOW)));
        let later = ts("2026-03-02T10:05:00Z");
        assert!(!may_reuse(&r, 2, "v1", &ds, later), "too old");
        // An old version still draining moves on Temporal's schedule: asked every time.
        let mut draining = r.clone();
        draining
            .state
            .versions
            .push(version("v0", TemporalVersionStatus::Draining));
        assert!(!may_reuse(&draining, 2, "v1", &ds, ts(NOW)));
        // So does a ramp.
        let mut ramping = r;
        ramping.state.routing.ramping_build_id = Some("v2".into());
        assert!(!may_reuse(&ramping, 2, "v1", &ds, ts(NOW)));
    }

    #[test]
    fn a_registered_target_is_described_afresh() {
        let mut r = remembered();
        r.state
            .versions
            .push(version("v2", TemporalVersionStatus::Inactive));
        assert!(!may_reuse(&r, 2, "v2", &unready_target(), ts(NOW)));
    }

    #[test]
    fn a_target_held_by_its_gate_asks_only_the_gate() {
        let mut r = remembered();
        r.state
            .versions
            .push(version("v2", TemporalVersionStatus::Inactive));
        let ready = vec![deployment("v1", 1), deployment("v2", 1)];
        assert!(!may_reuse(&r, 2, "v2", &ready, ts(NOW)), "no gate pending");
        r.gate_queues = Some(vec!["q".into()]);
        assert!(may_reuse(&r, 2, "v2", &ready, ts(NOW)));
        // Once the target is Current there is no gate to wait for, and the old Current drains
        // on Temporal's schedule.
        r.state.routing.current_build_id = Some("v2".into());
        r.state.versions[0].status = TemporalVersionStatus::Draining;
        assert!(!may_reuse(&r, 2, "v2", &ready, ts(NOW)));
    }

    #[test]
    fn versions_that_move_on_temporals_schedule_are_described_afresh() {
        let mut draining = remembered();
        draining
            .state
            .versions
            .push(version("v0", TemporalVersionStatus::Draining));
        assert!(!may_reuse(&draining, 2, "v2", &unready_target(), ts(NOW)));
        let mut ramping = remembered();
        ramping.state.routing.ramping_build_id = Some("v0".into());
        assert!(!may_reuse(&ramping, 2, "v2", &unready_target(), ts(NOW)));
        let mut propagating = remembered();
        propagating.state.routing.update_in_progress = true;
        assert!(!may_reuse(
            &propagating,
            2,
            "v2",
            &unready_target(),
            ts(NOW)
        ));
    }

    /// v1 Current, v2 registered, as our write left it 1 s ago.
    fn written(change: &RoutingChange) -> Remembered {
        let mut before = remembered().state;
        before
            .versions
            .push(version("v2", TemporalVersionStatus::Inactive));
        let write = OwnWrite {
            routed: Some(change),
            conflict_token: Some(b"t2"),
            identity: "twc",
            install_id: "install-a",
            ..Default::default()
        };
        Remembered {
            generation: 2,
            at: ts("2026-03-02T09:59:59Z"),
            state: view_after_write(
                &before,
                &write,
                (ts("2026-03-02T09:59:59Z"), ts("2026-03-02T09:59:59Z")),
            ),
            gate_queues: None,
            written: true,
        }
    }

    #[test]
    fn our_own_writes_view_stands_in_for_a_describe_until_temporal_has_settled() {
        let promote = RoutingChange::SetCurrent {
            build_id: "v2".into(),
        };
        let r = written(&promote);
        let ready = vec![deployment("v1", 1), deployment("v2", 1)];
        // 1 s after the write: no describe, whatever the spec or the Pods say.
        assert!(may_reuse(&r, 2, "v2", &ready, ts(NOW)));
        assert!(may_reuse(&r, 3, "v3", &ready, ts(NOW)), "a new spec too");
        // Once Temporal has settled, a describe confirms the write.
        let settled = ts("2026-03-02T09:59:59Z") + jiff::SignedDuration::from_secs(2);
        assert!(!may_reuse(&r, 2, "v2", &ready, settled));
    }

    #[test]
    fn the_view_after_a_promotion_is_what_temporal_then_describes() {
        let at = ts("2026-03-02T09:59:59Z");
        let promote = RoutingChange::SetCurrent {
            build_id: "v2".into(),
        };
        let s = written(&promote).state;
        assert_eq!(s.conflict_token, b"t2");
        assert_eq!(s.routing.current_build_id.as_deref(), Some("v2"));
        assert_eq!(s.routing.current_changed_at, Some(at));
        assert!(
            !s.routing.update_in_progress,
            "no fast polls through the settle"
        );
        assert_eq!(
            s.version("v2").map(|v| v.status),
            Some(TemporalVersionStatus::Current)
        );
        let old = s.version("v1").expect("v1");
        assert_eq!(old.status, TemporalVersionStatus::Draining);
        assert_eq!(
            (old.drainage_changed_at, old.last_current_at),
            (Some(at), Some(at))
        );
        assert_eq!(s.last_modifier_identity, "twc");
        assert_eq!(
            s.last_routing_install,
            Some(RoutingInstall {
                build_id: "v2".into(),
                install_id: "install-a".into()
            })
        );
        assert_eq!(s.last_routed_build(), Some("v2"));
    }

    /// Temporal timed a routing change between our sending and its answer: the step it starts
    /// counts from the send (a wake never late), a demoted version drains from the answer (no
    /// pinned workflow cancelled early).
    #[test]
    fn a_routing_change_counts_from_the_send_and_a_drain_from_the_answer() {
        let ramped = written(&RoutingChange::SetRamping {
            build_id: "v2".into(),
            percentage: 25.0,
        });
        let (sent, answered) = (ts("2026-03-02T10:00:00Z"), ts("2026-03-02T10:00:03Z"));
        let promote = RoutingChange::SetCurrent {
            build_id: "v2".into(),
        };
        let write = OwnWrite {
            routed: Some(&promote),
            identity: "twc",
            ..Default::default()
        };
        let s = view_after_write(&ramped.state, &write, (sent, answered));
        assert_eq!(s.routing.current_changed_at, Some(sent));
        let v1 = s.version("v1").expect("v1");
        assert_eq!(v1.status, TemporalVersionStatus::Draining);
        assert_eq!(v1.drainage_changed_at, Some(answered));
    }

    #[test]
    fn the_view_after_a_ramp_and_after_its_promotion() {
        let at = ts("2026-03-02T09:59:59Z");
        let ramp = RoutingChange::SetRamping {
            build_id: "v2".into(),
            percentage: 25.0,
        };
        let mut r = written(&ramp);
        let s = &r.state;
        assert_eq!(s.routing.current_build_id.as_deref(), Some("v1"));
        assert_eq!(s.routing.ramping_build_id.as_deref(), Some("v2"));
        assert_eq!(s.routing.ramp_percentage, 25.0);
        assert_eq!(s.routing.ramping_changed_at, Some(at));
        assert_eq!(s.routing.ramp_percentage_changed_at, Some(at));
        assert_eq!(
            s.version("v1").map(|v| v.status),
            Some(TemporalVersionStatus::Current)
        );
        assert_eq!(
            s.version("v2").map(|v| v.status),
            Some(TemporalVersionStatus::Ramping)
        );
        assert_eq!(s.last_routed_build(), Some("v2"));
        // The next step changes only the percentage; promoting the ramping build ends the ramp.
        let later = ts(NOW);
        let step = RoutingChange::SetRamping {
            build_id: "v2".into(),
            percentage: 50.0,
        };
        let write = |change| OwnWrite {
            routed: Some(change),
            identity: "twc",
            ..Default::default()
        };
        r.state = view_after_write(&r.state, &write(&step), (later, later));
        assert_eq!(
            r.state.routing.ramping_changed_at,
            Some(at),
            "same build ramping"
        );
        assert_eq!(r.state.routing.ramp_percentage_changed_at, Some(later));
        assert_eq!(r.state.last_routing_install, None, "install unknown");
        let promote = RoutingChange::SetCurrent {
            build_id: "v2".into(),
        };
        let s = view_after_write(&r.state, &write(&promote), (later, later));
        assert_eq!(s.routing.ramping_build_id, None);
        assert_eq!(s.routing.ramp_percentage, 0.0);
        assert_eq!(
            s.version("v2").map(|v| v.status),
            Some(TemporalVersionStatus::Current)
        );
        assert_eq!(
            s.version("v1").map(|v| v.status),
            Some(TemporalVersionStatus::Draining)
        );
        // Clearing a ramp drains the build that ramped.
        let s = view_after_write(&r.state, &write(&RoutingChange::ClearRamp), (later, later));
        assert_eq!(s.routing.ramping_build_id, None);
        assert_eq!(
            s.version("v2").map(|v| v.status),
            Some(TemporalVersionStatus::Draining)
        );
        assert_eq!(
            s.version("v1").map(|v| v.status),
            Some(TemporalVersionStatus::Current)
        );
    }

    #[test]
    fn a_manager_claim_alone_changes_the_token_and_the_manager() {
        let before = remembered().state;
        let write = OwnWrite {
            claimed_manager: true,
            conflict_token: Some(b"t3"),
            identity: "twc",
            ..Default::default()
        };
        let s = view_after_write(&before, &write, (ts(NOW), ts(NOW)));
        assert_eq!(
            (s.manager_identity.as_str(), &s.conflict_token[..]),
            ("twc", &b"t3"[..])
        );
        assert_eq!(s.routing, before.routing);
        assert!(!s.routing.update_in_progress);
        // A deleted version's record is gone from the view.
        let mut with_old = before.clone();
        with_old
            .versions
            .push(version("v0", TemporalVersionStatus::Drained));
        let write = OwnWrite {
            forgotten: vec!["v0"],
            ..Default::default()
        };
        assert_eq!(
            view_after_write(&with_old, &write, (ts(NOW), ts(NOW))),
            before
        );
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
