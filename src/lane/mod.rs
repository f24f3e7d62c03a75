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
//!   queue whose next look is one leaves it on the lane's timer ([`Lane::reconciler`]) and
//!   gives kube-runtime only a fallback look at the idle interval; when it is due the lane
//!   runs it. A lane pass whose next look is ordinary work (a poll, the idle look) hands it
//!   back to kube-runtime's queue at its time, through the controller's `reconcile_on`.
//! - **First looks of objects created while the controller runs**, offered by the
//!   controller's watch ([`Lane::offer`]), in the order they arrive, once per object.
//!
//! **Exclusion.** Every pass of a worker deployment, from kube-runtime's queue, the lane or
//! the leader's sweep, holds its object's slot ([`slots`]) and re-reads the object once it
//! holds it (`crate::reconcile::pass`). Two passes of one object never run at once, and the
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

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, StreamExt as _};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;

pub use order::{Order, Timed, Work};
pub use slots::{Slot, Slots};

use crate::api::TemporalWorkerDeployment as Twd;
use crate::error::Error;
use crate::reconcile::{Context, Pass};

type Key = ObjectRef<Twd>;

/// What the lane is told.
#[derive(Debug)]
enum Command {
    Offer(Key),
    Schedule(Key, Instant, Timed),
}

/// The lane's handle, for the controller's watch and reconciler.
#[derive(Clone, Debug)]
pub struct Lane(mpsc::UnboundedSender<Command>);

/// Where the lane hands ordinary work back to kube-runtime's queue.
pub type Handback = futures::channel::mpsc::UnboundedSender<Key>;

/// The lane of one kind set's controller: its handle, and the future that runs it until
/// every handle is dropped (when the controller stops). `store` is the controller's cache.
pub fn lane(
    ctx: Arc<Context>,
    store: Store<Twd>,
    handback: Handback,
) -> (Lane, impl Future<Output = ()> + Send) {
    let (commands, received) = mpsc::unbounded_channel();
    let runner = Runner {
        width: width(ctx.settings.max_concurrent_reconciles),
        ctx,
        store,
        handback,
    };
    (Lane(commands), runner.run(received))
}

/// The lane's slots: as many as kube-runtime's (`0`, unbounded there, is 16 here).
pub fn width(max_concurrent_reconciles: u16) -> usize {
    match max_concurrent_reconciles {
        0 => 16,
        n => usize::from(n),
    }
}

impl Lane {
    /// Offers `twd`'s first look, if nobody has reported on it and it is not being deleted.
    pub fn offer(&self, twd: &Twd) {
        let reported = twd.status.as_ref().is_some_and(|s| s.reported());
        if !reported && twd.metadata.deletion_timestamp.is_none() {
            // A stopped lane has nothing to do with it.
            let _ = self.0.send(Command::Offer(twd.key()));
        }
    }

    /// kube-runtime's reconcile: one pass; a next look that keeps a promise on the clock goes
    /// on the lane's timer, and kube-runtime keeps only a fallback look at the idle interval.
    pub fn reconciler(
        self,
    ) -> impl FnMut(Arc<Twd>, Arc<Context>) -> BoxFuture<'static, Result<Action, Error>> {
        move |twd, ctx| {
            let lane = self.clone();
            async move {
                let key = twd.key();
                let pass = crate::reconcile::pass(twd, ctx.clone()).await?;
                Ok(match next(key, pass, Instant::now()) {
                    Some((key, at, Timed::Promise)) => {
                        let _ = lane.0.send(Command::Schedule(key, at, Timed::Promise));
                        Action::requeue(ctx.settings.idle_interval)
                    }
                    _ => pass.action(),
                })
            }
            .boxed()
        }
    }
}

/// The timer a pass that ended at `now` leaves: its next look, in the lane if it keeps a
/// promise, else handed back to kube-runtime.
pub fn next(key: Key, pass: Pass, now: Instant) -> Option<(Key, Instant, Timed)> {
    let after = pass.requeue?;
    let timed = if pass.time_bound {
        Timed::Promise
    } else {
        Timed::Handback
    };
    Some((key, now + after, timed))
}

/// What runs the lane's passes.
struct Runner {
    ctx: Arc<Context>,
    store: Store<Twd>,
    handback: Handback,
    width: usize,
}

impl Runner {
    /// Until the commands end: ripe timers out, passes started up to the width, then wait
    /// for a command, a pass's end or the next timer.
    async fn run(self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut order = Order::default();
        let mut running = FuturesUnordered::new();
        loop {
            for key in order.ripe(Instant::now()) {
                let _ = self.handback.unbounded_send(key);
            }
            while running.len() < self.width
                && let Some(work) = order.next()
            {
                running.push(self.pass(work));
            }
            let wake = order.next_wake().map(tokio::time::Instant::from_std);
            let timer = tokio::time::sleep_until(wake.unwrap_or_else(far_future));
            tokio::select! {
                command = commands.recv() => match command {
                    Some(Command::Offer(key)) => order.offer(key),
                    Some(Command::Schedule(key, at, timed)) => order.schedule(key, at, timed),
                    None => break,
                },
                Some(done) = running.next(), if !running.is_empty() => {
                    if let Some((key, at, timed)) = done {
                        order.schedule(key, at, timed);
                    }
                }
                () = timer, if wake.is_some() => {}
            }
        }
    }

    /// One lane pass, on the cache's copy of its object (none: it is gone, nothing to do).
    fn pass(&self, work: Work<Key>) -> BoxFuture<'static, Option<(Key, Instant, Timed)>> {
        let (ctx, store) = (self.ctx.clone(), self.store.clone());
        async move {
            match work {
                Work::FirstLook(key) => {
                    crate::reconcile::offered_first_look(&ctx, store.get(&key)?).await;
                    None
                }
                Work::Promise(key) => {
                    let pass = crate::reconcile::pass(store.get(&key)?, ctx).await.ok()?;
                    next(key, pass, Instant::now())
                }
            }
        }
        .boxed()
    }
}

/// A wake-up that never comes (the timer branch is off without a timer).
fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(86_400)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::KindSet;

    fn key() -> Key {
        ObjectRef::new_with("w", KindSet::Canonical).within("ns")
    }

    #[test]
    fn a_promise_stays_in_the_lane_and_ordinary_work_goes_back() {
        let now = Instant::now();
        let secs = |n| Some(Duration::from_secs(n));
        let promise = Pass {
            requeue: secs(5),
            time_bound: true,
        };
        let poll = Pass {
            requeue: secs(30),
            time_bound: false,
        };
        let at = |n| now + Duration::from_secs(n);
        assert_eq!(
            next(key(), promise, now),
            Some((key(), at(5), Timed::Promise))
        );
        assert_eq!(
            next(key(), poll, now),
            Some((key(), at(30), Timed::Handback))
        );
        assert_eq!(
            next(key(), Pass::default(), now),
            None,
            "waits for a change"
        );
    }

    #[test]
    fn the_lane_has_as_many_slots_as_the_queue() {
        assert_eq!(width(16), 16);
        assert_eq!(width(1), 1);
        assert_eq!(width(0), 16, "unbounded there: bounded here");
    }
}
