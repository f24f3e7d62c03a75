//! The rest cadence ([`crate::planner::rest`]): bounded, jittered, and fast whenever anything
//! is in motion.

use std::time::Duration;

use jiff::Timestamp;

use super::test_fixtures::{set_ramp, settled};
use crate::planner::model::{ObservedDeployment, PlanInput};
use crate::planner::polling::{self, Remembered};
use crate::planner::rest::{self, Cadence};
use crate::planner::{clock, plan};
use crate::temporal::state::{TemporalVersionStatus as T, VersionState};

const IDLE: Duration = Duration::from_secs(60);
const REST: Duration = Duration::from_secs(300);
const CADENCE: Cadence = Cadence {
    idle: IDLE,
    rest: REST,
};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The wait after planning `i`, Temporal read at `read_at`, for object `name`.
fn wait(i: &PlanInput, read_at: Option<Timestamp>, name: &str) -> Duration {
    rest::requeue(i, &plan(i), CADENCE, read_at, name)
}

/// A new target (v3) whose Pods are not Ready and which Temporal does not know yet.
fn waiting_for_pods() -> PlanInput {
    let mut i = settled();
    i.desired.build_id = "v3".into();
    i.deployments.push(ObservedDeployment {
        ready_replicas: 0,
        healthy_since: None,
        ..ObservedDeployment::test("v3", 3)
    });
    i
}

#[test]
fn a_rollout_at_rest_is_looked_at_within_the_rest_interval_and_jittered() {
    let i = settled();
    assert!(rest::at_rest(&i, &plan(&i)));
    let waits: Vec<Duration> = (0..200)
        .map(|n| wait(&i, None, &format!("shop/orders-{n}")))
        .collect();
    for w in &waits {
        assert!(*w <= REST, "bounded by the rest interval: {w:?}");
        assert!(*w >= REST * 4 / 5, "at most a fifth early: {w:?}");
        assert!(*w > IDLE, "slower than the idle look: {w:?}");
    }
    let (min, max) = (waits.iter().min(), waits.iter().max());
    assert!(
        max.zip(min).is_some_and(|(a, b)| *a - *b > secs(40)),
        "objects spread over the jitter window: {min:?}..{max:?}"
    );
    // The same object draws again at each look (the view's time is in the seed).
    let draws: std::collections::BTreeSet<Duration> = (0..20)
        .map(|n| {
            let mut at = i.clone();
            at.now = clock::add(i.now, secs(300 * n)).expect("time");
            wait(&at, None, "shop/orders-0")
        })
        .collect();
    assert!(draws.len() > 10, "{draws:?}");
}

#[test]
fn the_rest_look_counts_from_when_temporal_was_read() {
    let i = settled();
    let read = Some(i.now - jiff::SignedDuration::from_secs(100));
    for n in 0..50 {
        let w = wait(&i, read, &format!("o{n}"));
        assert!(w <= REST - secs(100), "{w:?}");
        assert!(w >= REST * 4 / 5 - secs(100), "{w:?}");
    }
    // A view already past its rest look falls back to the idle interval, never to a busy loop.
    let stale = Some(i.now - jiff::SignedDuration::from_secs(400));
    assert_eq!(wait(&i, stale, "o"), IDLE);
}

#[test]
fn every_rest_look_describes_temporal_afresh() {
    // The stated bound rests on this: the look comes when the view is too old to reuse.
    let i = settled();
    let remembered = Remembered {
        generation: 1,
        at: i.now,
        state: i.temporal.clone(),
        gate_queues: None,
    };
    for n in 0..500 {
        let w = wait(&i, Some(i.now), &format!("shop/o{n}"));
        let at = clock::add(i.now, w).expect("time");
        assert!(
            !polling::may_reuse(
                &remembered,
                1,
                "v2",
                &i.deployments,
                at,
                rest::reuse_limit(REST)
            ),
            "look {n} after {w:?} would reuse the view"
        );
    }
    // While younger, it stands in (an event-triggered look costs Temporal nothing).
    let soon = clock::add(i.now, secs(60)).expect("time");
    let limit = rest::reuse_limit(REST);
    assert!(polling::may_reuse(
        &remembered,
        1,
        "v2",
        &i.deployments,
        soon,
        limit
    ));
}

#[test]
fn a_target_waiting_for_its_pods_rests_but_keeps_its_deadlines() {
    let i = waiting_for_pods();
    let p = plan(&i);
    assert!(rest::at_rest(&i, &p), "{p:?}");
    let w = wait(&i, None, "shop/orders");
    assert!(w > IDLE && w <= REST, "{w:?}");
    // A planned deadline before the rest look is kept exactly.
    let mut p = p;
    p.requeue_after = Some(secs(42));
    assert_eq!(
        rest::requeue(&i, &p, CADENCE, None, "shop/orders"),
        secs(42)
    );
}

#[test]
fn anything_in_motion_keeps_the_fast_cadence() {
    let mut cases: Vec<(&str, PlanInput)> = Vec::new();
    let mut ramping = settled();
    ramping
        .temporal
        .versions
        .push(VersionState::test("v3", T::Inactive));
    let now = ramping.now;
    set_ramp(&mut ramping, "v3", 10.0, now);
    cases.push(("a ramp", ramping));
    let mut draining = settled();
    draining
        .temporal
        .versions
        .push(VersionState::test("v1", T::Draining));
    draining.deployments.push(ObservedDeployment::test("v1", 3));
    cases.push(("a draining version", draining));
    let mut propagating = settled();
    propagating.temporal.routing.update_in_progress = true;
    cases.push(("a routing update propagating", propagating));
    // The target registered and Ready: it is promoted (a write).
    cases.push(("a promotion", PlanInput::test()));
    let mut ready = waiting_for_pods();
    ready.deployments[1].ready_replicas = 1;
    cases.push(("a target whose Pods became Ready", ready));
    let mut scaled = settled();
    scaled.desired.replicas = Some(5);
    cases.push(("a scale", scaled));
    for (what, i) in cases {
        assert!(!rest::at_rest(&i, &plan(&i)), "{what}");
        let w = wait(&i, None, "shop/orders");
        assert!(w <= IDLE, "{what}: {w:?}");
    }
}

#[test]
fn a_rest_interval_below_the_idle_interval_is_kept() {
    let i = settled();
    let fast = Cadence {
        idle: IDLE,
        rest: secs(20),
    };
    let w = rest::requeue(&i, &plan(&i), fast, None, "o");
    assert!(w <= secs(20) && w >= secs(16), "{w:?}");
}
