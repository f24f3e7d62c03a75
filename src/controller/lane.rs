//! The lane's runner (`crate::lane` says what it is for): its handle for the controller's
//! watch and reconcile, and the task that runs its passes beside kube-runtime's queue.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, StreamExt as _};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;

use crate::api::TemporalWorkerDeployment as Twd;
use crate::error::Error;
use crate::lane::{Order, Timed, Work};
use crate::worker_deployment::{Context, Pass};

type Key = ObjectRef<Twd>;

/// What the lane is told.
#[derive(Debug)]
enum Command {
    Offer(Key),
    Schedule(Key, Instant, Timed),
}

/// The lane's handle, for the controller's watch and reconciler.
#[derive(Clone, Debug)]
pub(super) struct Lane(mpsc::UnboundedSender<Command>);

/// Where the lane hands ordinary work back to kube-runtime's queue.
pub(super) type Handback = futures::channel::mpsc::UnboundedSender<Key>;

/// The lane of one kind set's controller: its handle, and the future that runs it until
/// every handle is dropped (when the controller stops). `store` is the controller's cache.
pub(super) fn lane(
    ctx: Arc<Context>,
    store: Store<Twd>,
    handback: Handback,
) -> (Lane, impl Future<Output = ()> + Send) {
    let (commands, received) = mpsc::unbounded_channel();
    let runner = Runner {
        width: crate::lane::width(ctx.settings.max_concurrent_reconciles),
        ctx,
        store,
        handback,
    };
    (Lane(commands), runner.run(received))
}

/// The timer `pass` of `key` leaves, ended now.
fn next(key: Key, pass: Pass) -> Option<(Key, Instant, Timed)> {
    crate::lane::next(pass.requeue, pass.time_bound, Instant::now()).map(|(at, t)| (key, at, t))
}

impl Lane {
    /// Offers `twd`'s first look, if nobody has reported on it and it is not being deleted.
    pub(super) fn offer(&self, twd: &Twd) {
        let reported = twd.status.as_ref().is_some_and(|s| s.reported());
        if !reported && twd.metadata.deletion_timestamp.is_none() {
            // A stopped lane has nothing to do with it.
            let _ = self.0.send(Command::Offer(twd.key()));
        }
    }

    /// kube-runtime's reconcile: one pass; a next look that keeps a promise on the clock goes
    /// on the lane's timer, and kube-runtime keeps only a fallback look at the idle interval.
    pub(super) fn reconciler(
        self,
    ) -> impl FnMut(Arc<Twd>, Arc<Context>) -> BoxFuture<'static, Result<Action, Error>> {
        move |twd, ctx| {
            let lane = self.clone();
            async move {
                let key = twd.key();
                let pass = crate::worker_deployment::pass(twd, ctx.clone()).await?;
                Ok(match next(key, pass) {
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

/// What runs the lane's passes.
struct Runner {
    ctx: Arc<Context>,
    store: Store<Twd>,
    handback: Handback,
    width: usize,
}

impl Runner {
    /// Until the commands end: ripe timers out, passes started up to the width, then wait
    /// for a command, a pass's end or the next timer. Once they end (the controller stopped),
    /// the passes under way finish, as the controller's own do at a graceful shutdown.
    async fn run(self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut order = Order::default();
        let mut running = FuturesUnordered::new();
        loop {
            for key in order.ripe(Instant::now()) {
                let _ = self.handback.unbounded_send(key);
            }
            while running.len() < self.width
                && let Some(work) = order.next_pass()
            {
                running.push(self.pass(work));
            }
            let wake = order.next_wake().map(tokio::time::Instant::from_std);
            let timer = tokio::time::sleep_until(wake.unwrap_or_else(far_future));
            tokio::select! {
                command = commands.recv() => match command {
                    Some(Command::Offer(key)) => order.offer(key),
                    Some(Command::Schedule(key, at, timed)) => order.schedule(key, at, timed),
                    None => {
                        while running.next().await.is_some() {}
                        break;
                    }
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
                    crate::worker_deployment::offered_first_look(&ctx, store.get(&key)?).await;
                    None
                }
                Work::Promise(key) => {
                    let pass = crate::worker_deployment::pass(store.get(&key)?, ctx)
                        .await
                        .ok()?;
                    next(key, pass)
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

/// The lane of a worker-deployment controller, wired: the controller's watch with every
/// object offered to the lane, the references the lane hands back, the lane's handle (for the
/// reconcile, [`Lane::reconciler`]) and its own future.
pub(super) fn wire<S>(
    ctx: Arc<Context>,
    store: Store<Twd>,
    twds: S,
) -> (
    impl futures::Stream<Item = S::Item> + Send + 'static,
    futures::channel::mpsc::UnboundedReceiver<Key>,
    Lane,
    impl Future<Output = ()> + Send,
)
where
    S: futures::Stream<Item = Result<Twd, kube::runtime::watcher::Error>> + Send + 'static,
{
    let (handback, handbacks) = futures::channel::mpsc::unbounded();
    let (lane, runs) = lane(ctx, store, handback);
    let offers = lane.clone();
    let twds = twds.inspect(move |t| {
        if let Ok(t) = t {
            offers.offer(t);
        }
    });
    (twds, handbacks, lane, runs)
}
