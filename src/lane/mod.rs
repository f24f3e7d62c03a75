//! The lane: passes that must not wait behind the fleet's bulk work, run beside
//! kube-runtime's queue with slots of their own.
//!
//! kube-runtime's `Controller` takes due reconciles in no particular order once its slots
//! are full, so at fleet size a step deadline's pass could wait behind thousands of due full
//! passes, and a new object's first status behind the full passes of those created before
//! it. Two kinds of pass go through the lane instead ([`order`] decides which runs next):
//!
//! - **Passes that keep a promise on the clock** (`crate::planner::promise`: a step's end
//!   or a promotion while the target ramps, a progress deadline, a sunset). A pass of either
//!   queue whose next look is one leaves it on the lane's timer and
//!   gives kube-runtime only a fallback look at the idle interval; when it is due the lane
//!   runs it. A lane pass whose next look is ordinary work (a poll, the idle look) hands it
//!   back to kube-runtime's queue at its time, through the controller's `reconcile_on`.
//! - **First looks of objects created while the controller runs**, offered by the
//!   controller's watch, in the order they arrive, once per object.
//!
//! This module is the pure part and the slots; the controller runs the lane
//! (`crate::controller`'s `lane.rs`: the handle, the runner, the wrapped reconcile).
//!
//! **Exclusion.** Every pass of a worker deployment, from kube-runtime's queue, the lane or
//! the leader's sweep, holds its object's slot ([`slots`]) and re-reads the object once it
//! holds it (`crate::worker_deployment::pass`). Two passes of one object never run at once, and the
//! second sees what the first wrote (the context's last write while the cache lags): the
//! object's own reconcile and the lane cannot both write a first look, and so cannot both
//! emit its events.
//!
//! **Fairness.** The lane never takes kube-runtime's slots: bulk work keeps all of
//! `--max-concurrent-reconciles`, and the lane has as many of its own. What the lane runs is
//! bounded by the objects: at most one timer and one waiting first look per object, a
//! promise's pass runs once per deadline, a first look once per object (a first look already
//! written is skipped without a request). Within the lane promises go first, but a waiting
//! first look goes after at most [`order::PROMISES_IN_A_ROW`] of them.

pub mod order;
pub mod slots;

use std::time::{Duration, Instant};

pub use order::{Order, Timed, Work};
pub use slots::{Slot, Slots};

/// The lane's slots: as many as kube-runtime's (`0`, unbounded there, is 16 here).
pub fn width(max_concurrent_reconciles: u16) -> usize {
    match max_concurrent_reconciles {
        0 => 16,
        n => usize::from(n),
    }
}

/// The timer a pass that ended at `now` leaves for its next look (`requeue`; `None`: at the
/// next change, no timer): in the lane if it keeps a promise on the clock, else handed back to
/// kube-runtime.
pub fn next(requeue: Option<Duration>, time_bound: bool, now: Instant) -> Option<(Instant, Timed)> {
    let timed = if time_bound {
        Timed::Promise
    } else {
        Timed::Handback
    };
    Some((now + requeue?, timed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_promise_stays_in_the_lane_and_ordinary_work_goes_back() {
        let now = Instant::now();
        let secs = |n| Some(Duration::from_secs(n));
        let at = |n| now + Duration::from_secs(n);
        assert_eq!(next(secs(5), true, now), Some((at(5), Timed::Promise)));
        assert_eq!(next(secs(30), false, now), Some((at(30), Timed::Handback)));
        assert_eq!(next(None, true, now), None, "waits for a change");
    }

    #[test]
    fn the_lane_has_as_many_slots_as_the_queue() {
        assert_eq!(width(16), 16);
        assert_eq!(width(1), 1);
        assert_eq!(width(0), 16, "unbounded there: bounded here");
    }
}
