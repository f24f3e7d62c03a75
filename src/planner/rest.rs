//! The rest cadence: how soon an object is looked at again when nothing is in motion.
//!
//! An object is **at rest** when its plan writes nothing and [`polling::quiet`] holds: nothing
//! in Temporal moves on its own schedule (no ramp, no draining version, no routing update
//! propagating) and the target is Current, or not registered with none of its Pods Ready.
//! What can still change it is then either an event a watch delivers (its spec, its
//! Deployments' readiness, its Connection), which wakes it at once, or a change only Temporal
//! sees: someone else's routing change, a version registered by workers outside this
//! controller. So a resting object is looked at once per `--rest-interval` instead of once per
//! `--idle-interval`, and that look describes Temporal afresh:
//!
//! - the look is due when the Temporal view the plan used is `--rest-interval` old, up to a
//!   fifth earlier by a jitter drawn from the object and that view's time ([`rest_wake`]), so
//!   a fleet described together does not come back together;
//! - the remembered view stands in for a describe only while younger than [`reuse_limit`]
//!   (three quarters of the interval, below the earliest jittered look), so the rest look
//!   always describes;
//! - hence a change made only in Temporal is in the status at most `--rest-interval` (plus
//!   the time one reconcile waits for a slot and runs) after it was made.
//!
//! Anything in motion keeps the plan's own wake, at the latest the idle interval, as before.
//! Planned deadlines (a sunset timer, a progress deadline) still wake exactly at rest.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use jiff::Timestamp;

use crate::planner::clock;
use crate::planner::model::{Plan, PlanInput};
use crate::planner::polling;

/// Default `--rest-interval`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);

/// How much earlier than the interval a rest look may come: up to `interval / JITTER`.
const JITTER: u32 = 5;

/// The two looks-again bounds (the flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cadence {
    /// `--idle-interval`: the latest look while anything is in motion.
    pub idle: Duration,
    /// `--rest-interval`: the latest look at rest, and the bound on seeing a change made
    /// only in Temporal.
    pub rest: Duration,
}

impl Default for Cadence {
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(60),
            rest: DEFAULT_INTERVAL,
        }
    }
}

/// How long a remembered view of Temporal may stand in for a describe: below the earliest
/// jittered rest look, so that every rest look describes.
pub fn reuse_limit(rest: Duration) -> Duration {
    rest * 3 / 4
}

/// True when the plan writes nothing and only a watched event or a change made in Temporal
/// by someone else can move the object.
pub fn at_rest(input: &PlanInput, plan: &Plan) -> bool {
    writes_nothing(plan)
        && polling::quiet(&input.temporal, &input.desired.build_id, &input.deployments)
}

fn writes_nothing(plan: &Plan) -> bool {
    plan.create.is_none()
        && plan.adopt.is_empty()
        && plan.update.is_empty()
        && plan.scale.is_empty()
        && plan.start_gates.is_empty()
        && !plan.claim_manager
        && plan.routing.is_none()
        && plan.delete.is_empty()
        && plan.pinned_batches.is_empty()
        && plan.start_step_gates.is_none()
        && plan.forget_versions.is_empty()
        && plan.restart.is_none()
}

/// When to look again after `plan`, counted from `input.now`: the plan's own wake, at the
/// latest the rest look when [`at_rest`], else the idle interval. `read_at` is when the
/// Temporal view the plan used was described (`None`: now); `object` names the object (the
/// jitter's seed).
pub fn requeue(
    input: &PlanInput,
    plan: &Plan,
    cadence: Cadence,
    read_at: Option<Timestamp>,
    object: &str,
) -> Duration {
    let latest = if at_rest(input, plan) {
        let read_at = read_at.unwrap_or(input.now);
        rest_wake(cadence, read_at, input.now, seed(object, read_at))
    } else {
        cadence.idle
    };
    plan.requeue_after.map_or(latest, |d| d.min(latest))
}

/// The rest look: when the view read at `read_at` is `rest` old, up to a fifth earlier by
/// `seed`. A view already past that (it should have been described afresh) gets the idle
/// interval, as before the rest cadence.
pub fn rest_wake(cadence: Cadence, read_at: Timestamp, now: Timestamp, seed: u64) -> Duration {
    let due = clock::add(
        read_at,
        cadence.rest.saturating_sub(early(cadence.rest, seed)),
    );
    due.and_then(|due| clock::until(now, due))
        .unwrap_or(cadence.idle)
}

/// How much earlier than `rest` this look comes: `[0, rest / JITTER)`, from `seed`.
fn early(rest: Duration, seed: u64) -> Duration {
    const STEPS: u64 = 1024;
    (rest / JITTER).mul_f64((seed % STEPS) as f64 / STEPS as f64)
}

/// The jitter's seed: the object and the time of the view, so the same object draws again
/// at each look, and objects described at the same moment draw apart.
fn seed(object: &str, read_at: Timestamp) -> u64 {
    let mut h = DefaultHasher::new();
    (object, read_at.as_millisecond()).hash(&mut h);
    h.finish()
}
