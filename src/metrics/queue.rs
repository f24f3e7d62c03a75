//! The work-queue families: how many reconcile requests wait, per controller, and how long the
//! oldest of them has waited.
//!
//! kube-runtime's `Controller` keeps its scheduler to itself, so the queue is mirrored from
//! what the controller is told and what it does, at the same points kube-runtime sees them:
//!
//! - a **trigger** (an object from the controller's own watch, a mapped watch of another
//!   kind, a Deployment change, `reconcile_all_on` when the Lease is won) is due at once;
//! - a reconcile that ends asking to be **requeued** after `d` is due `d` after it ended;
//! - a reconcile that **starts** takes its object out of the queue;
//! - a request for an object that is gone (kube-runtime's `ObjectNotFound`) leaves it.
//!
//! An object has one entry, due at the earliest of its requests, as kube-runtime merges them.
//! A request that arrives while the object is being reconciled is held by kube-runtime until
//! that reconcile ends: it waits, and counts. So `workqueue_depth` counts the objects with a
//! request that is due and not yet started (requeues not yet due are timers, not work), and
//! `workqueue_oldest_age_seconds` is how long ago the oldest of those became due (0 when none
//! is). A controller that keeps up shows a depth near its concurrency and an age under a
//! reconcile's duration; one that falls behind shows both growing.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::core::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{Lookup, ObjectRef};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::ControllerKind;
use super::labels::ControllerLabels;

/// A gauge of a fractional value.
type GaugeF = Gauge<f64, AtomicU64>;

/// One object's place in a queue: `kind/namespace/name`, the same for a typed object, its
/// reference and kube-runtime's erased reference.
type Key = String;

/// The mirrored queues of every controller, shared by the controllers and the scrape.
#[derive(Debug, Default)]
pub struct WorkQueues(Mutex<HashMap<ControllerKind, HashMap<Key, Instant>>>);

/// What one controller's queue holds at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueSnapshot {
    /// Objects with a due request not yet started.
    pub depth: u64,
    /// How long ago the oldest due request became due (zero when none is).
    pub oldest: Duration,
}

fn key_of(r: &ObjectRef<DynamicObject>) -> Key {
    format!(
        "{}/{}/{}",
        r.dyntype.kind,
        r.namespace.as_deref().unwrap_or_default(),
        r.name
    )
}

fn key<K: Lookup>(r: &ObjectRef<K>) -> Key
where
    K::DynamicType: Clone,
{
    key_of(&r.clone().erase())
}

impl WorkQueues {
    /// The queue of `controller`, for its wiring.
    pub fn of(self: &Arc<Self>, controller: ControllerKind) -> QueueTracker {
        QueueTracker {
            queues: self.clone(),
            controller,
        }
    }

    fn with<T>(
        &self,
        controller: ControllerKind,
        f: impl FnOnce(&mut HashMap<Key, Instant>) -> T,
    ) -> T {
        // A poisoned lock only means a panic while updating a map that stays whole.
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(all.entry(controller).or_default())
    }

    /// A request for `key` due at `due`; an earlier request for it stays (kube-runtime keeps
    /// the earliest).
    fn due(&self, controller: ControllerKind, key: Key, due: Instant) {
        self.with(controller, |q| {
            q.entry(key)
                .and_modify(|d| *d = (*d).min(due))
                .or_insert(due);
        });
    }

    fn remove(&self, controller: ControllerKind, key: &str) {
        self.with(controller, |q| q.remove(key));
    }

    /// Every controller's queue at `now`, each controller present (empty ones too).
    pub fn snapshot(&self, now: Instant) -> Vec<(ControllerKind, QueueSnapshot)> {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        ControllerKind::ALL
            .into_iter()
            .map(|kind| {
                let due = all
                    .get(&kind)
                    .into_iter()
                    .flat_map(|q| q.values())
                    .filter(|d| **d <= now);
                let (depth, earliest) = due.fold((0u64, None::<Instant>), |(n, e), d| {
                    (n + 1, Some(e.map_or(*d, |e| e.min(*d))))
                });
                let oldest = earliest.map_or(Duration::ZERO, |e| now.duration_since(e));
                (kind, QueueSnapshot { depth, oldest })
            })
            .collect()
    }
}

/// One controller's queue, as its wiring reports to it (cheap to clone).
#[derive(Clone, Debug)]
pub struct QueueTracker {
    queues: Arc<WorkQueues>,
    controller: ControllerKind,
}

impl QueueTracker {
    /// A trigger for `r`: due now.
    pub fn triggered<K: Lookup>(&self, r: &ObjectRef<K>)
    where
        K::DynamicType: Clone,
    {
        self.queues.due(self.controller, key(r), Instant::now());
    }

    /// A reconcile of `r` starts: its request leaves the queue.
    pub fn started<K: Lookup>(&self, r: &ObjectRef<K>)
    where
        K::DynamicType: Clone,
    {
        self.queues.remove(self.controller, &key(r));
    }

    /// A reconcile of `r` ended with `action`: a requeue is due after its delay.
    pub fn ended<K: Lookup>(&self, r: &ObjectRef<K>, action: &Action)
    where
        K::DynamicType: Clone,
    {
        if let Some(after) = requeue_after(action) {
            self.queues
                .due(self.controller, key(r), Instant::now() + after);
        }
    }

    /// kube-runtime found no object for a request (it was deleted): the request is dropped.
    pub fn not_found(&self, r: &ObjectRef<DynamicObject>) {
        self.queues.remove(self.controller, &key_of(r));
    }
}

/// The delay of a requeue `action` (`None` for `await_change`). kube-runtime keeps the delay
/// private; its derived `Debug` (`Action { requeue_after: Some(1.5s) }`) is the one reading of
/// it, and a unit test pins that form, so a kube upgrade that changes it fails the build's
/// tests instead of silently emptying the queue.
pub fn requeue_after(action: &Action) -> Option<Duration> {
    let text = format!("{action:?}");
    let inner = text
        .split_once("requeue_after: Some(")?
        .1
        .strip_suffix(") }")?;
    parse_debug_duration(inner)
}

/// Parses `Duration`'s `Debug` form: a decimal number with `s`, `ms`, `µs` or `ns`.
fn parse_debug_duration(text: &str) -> Option<Duration> {
    let (number, scale) = [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .into_iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, scale)))?;
    let value: f64 = number.parse().ok()?;
    Duration::try_from_secs_f64(value * scale).ok()
}

/// Registers the work-queue families of `snapshot` into `reg` (already prefixed).
pub(super) fn register(reg: &mut Registry, snapshot: &[(ControllerKind, QueueSnapshot)]) {
    let depth = Family::<ControllerLabels, Gauge>::default();
    let oldest = Family::<ControllerLabels, GaugeF>::default();
    for (kind, s) in snapshot {
        let labels = ControllerLabels {
            controller: kind.as_str(),
        };
        depth
            .get_or_create(&labels)
            .set(i64::try_from(s.depth).unwrap_or(i64::MAX));
        oldest.get_or_create(&labels).set(s.oldest.as_secs_f64());
    }
    reg.register(
        "workqueue_depth",
        "Objects with a reconcile request that is due and not yet started (triggered, or requeued and due), by controller",
        depth,
    );
    reg.register_with_unit(
        "workqueue_oldest_age",
        "How long the oldest due reconcile request of a controller has waited to start (0 when none waits)",
        Unit::Seconds,
        oldest,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{KindSet, TemporalWorkerDeployment};

    fn r(name: &str) -> ObjectRef<TemporalWorkerDeployment> {
        ObjectRef::new_with(name, KindSet::Canonical).within("shop")
    }

    fn twd_queue(q: &WorkQueues, now: Instant) -> QueueSnapshot {
        q.snapshot(now)
            .into_iter()
            .find(|(k, _)| *k == ControllerKind::WorkerDeployment)
            .map(|(_, s)| s)
            .expect("every controller is in the snapshot")
    }

    #[test]
    fn the_delay_of_a_requeue_is_read_from_the_action() {
        for d in [
            Duration::from_secs(60),
            Duration::from_millis(300),
            Duration::from_secs_f64(1.5),
            Duration::from_micros(7),
            Duration::from_nanos(3),
        ] {
            let got = requeue_after(&Action::requeue(d)).expect("a requeue");
            let diff = got.as_secs_f64() - d.as_secs_f64();
            assert!(diff.abs() < 1e-9, "{d:?} read as {got:?}");
        }
        assert_eq!(requeue_after(&Action::await_change()), None);
    }

    #[test]
    fn triggered_objects_wait_until_they_start_and_the_oldest_sets_the_age() {
        let q = Arc::new(WorkQueues::default());
        let t = q.of(ControllerKind::WorkerDeployment);
        let before = Instant::now();
        t.triggered(&r("a"));
        t.triggered(&r("b"));
        // A second trigger of a waiting object is the same request.
        t.triggered(&r("a"));
        let later = Instant::now() + Duration::from_secs(5);
        let s = twd_queue(&q, later);
        assert_eq!(s.depth, 2);
        assert!(s.oldest >= Duration::from_secs(5), "{s:?}");
        assert!(s.oldest <= later.duration_since(before), "{s:?}");
        t.started(&r("a"));
        assert_eq!(twd_queue(&q, later).depth, 1);
        t.not_found(&r("b").erase());
        assert_eq!(
            twd_queue(&q, later),
            QueueSnapshot {
                depth: 0,
                oldest: Duration::ZERO
            }
        );
        // Other controllers' queues are apart.
        let others = q.snapshot(later);
        assert_eq!(others.len(), ControllerKind::ALL.len());
        assert!(others.iter().all(|(_, s)| s.depth == 0), "{others:?}");
    }

    #[test]
    fn a_requeue_counts_once_it_is_due_and_an_earlier_trigger_wins() {
        let q = Arc::new(WorkQueues::default());
        let t = q.of(ControllerKind::WorkerDeployment);
        t.started(&r("a"));
        t.ended(&r("a"), &Action::requeue(Duration::from_secs(60)));
        let now = Instant::now();
        assert_eq!(twd_queue(&q, now).depth, 0, "not due yet");
        let due = twd_queue(&q, now + Duration::from_secs(90));
        assert_eq!(due.depth, 1);
        assert!(due.oldest >= Duration::from_secs(29), "{due:?}");
        // A watch event before the requeue's time makes it due now.
        t.triggered(&r("a"));
        assert_eq!(twd_queue(&q, Instant::now()).depth, 1);
        // A reconcile that asks for nothing leaves nothing behind.
        t.started(&r("a"));
        t.ended(&r("a"), &Action::await_change());
        assert_eq!(twd_queue(&q, now + Duration::from_secs(3600)).depth, 0);
    }

    #[test]
    fn a_request_held_during_a_reconcile_survives_that_reconcile_s_requeue() {
        let q = Arc::new(WorkQueues::default());
        let t = q.of(ControllerKind::WorkerDeployment);
        t.started(&r("a"));
        // A change while it runs: kube-runtime runs it again right after.
        t.triggered(&r("a"));
        t.ended(&r("a"), &Action::requeue(Duration::from_secs(60)));
        assert_eq!(twd_queue(&q, Instant::now()).depth, 1);
    }

    #[test]
    fn the_families_are_exported_for_every_controller() {
        let q = Arc::new(WorkQueues::default());
        q.of(ControllerKind::Connection).triggered(&r("a"));
        let mut reg = Registry::default();
        register(
            &mut reg,
            &q.snapshot(Instant::now() + Duration::from_secs(2)),
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).expect("encode");
        assert!(
            text.contains("workqueue_depth{controller=\"temporalconnection\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_depth{controller=\"temporalworkerdeployment\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("# UNIT workqueue_oldest_age_seconds seconds"),
            "{text}"
        );
        let age = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("workqueue_oldest_age_seconds{controller=\"temporalconnection\"} ")
            })
            .and_then(|v| v.parse::<f64>().ok())
            .expect("the Connection queue's age");
        assert!(age >= 2.0, "{text}");
    }
}
