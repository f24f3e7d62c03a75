//! What the last reconcile of each TemporalWorkerDeployment saw of Temporal, so the next one
//! can skip describing it while nothing there can have changed (`polling::may_reuse` in
//! `src/planner/polling.rs` decides). In memory only: a restarted controller describes once.

pub mod pinned;
pub mod pollers;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;

use crate::api::TemporalWorkerDeployment;
use crate::planner::polling::Remembered;

type Key = ObjectRef<TemporalWorkerDeployment>;

/// How long the worker deployment's system workflow stays busy after one of our writes:
/// Temporal 1.32 stalls a describe issued sooner for about 1 s and may refuse it with
/// `ResourceExhausted` (cause `BusyWorkflow`).
pub const AFTER_WRITE_SETTLE: Duration = Duration::from_millis(1500);

#[derive(Default)]
pub struct RememberedViews {
    /// Boxed: a view is several hundred bytes, and a map sized for 1,000 objects holds room
    /// for nearly twice as many (issue 30: memory per object).
    views: Mutex<HashMap<Key, Box<Remembered>>>,
    written: Mutex<HashMap<Key, Instant>>,
}

impl RememberedViews {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Box<Remembered>>> {
        // A poisoned map only means another reconcile panicked mid-insert; the data is usable.
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn written(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Instant>> {
        self.written.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After our own write to the worker deployment: the view is stale, and the next
    /// describe waits until [`AFTER_WRITE_SETTLE`] has passed.
    pub fn wrote(&self, key: &Key) {
        self.forget(key);
        self.written().insert(key.clone(), Instant::now());
    }

    /// How long a describe should still wait after our last write, if at all.
    pub fn settle_left(&self, key: &Key) -> Option<Duration> {
        let mut written = self.written();
        let left = written
            .get(key)
            .and_then(|at| AFTER_WRITE_SETTLE.checked_sub(at.elapsed()))
            .filter(|d| !d.is_zero());
        if left.is_none() {
            written.remove(key);
        }
        left
    }

    pub fn get(&self, key: &Key) -> Option<Remembered> {
        self.map().get(key).map(|r| (**r).clone())
    }

    /// When the remembered view was described (the rest cadence counts from it).
    pub fn read_at(&self, key: &Key) -> Option<jiff::Timestamp> {
        self.map().get(key).map(|r| r.at)
    }

    pub fn put(&self, key: Key, remembered: Remembered) {
        self.map().insert(key, Box::new(remembered));
    }

    /// Keeps the target's task queues with the view while the rollout waits for its gate
    /// workflows (`None` once it does not), so the next look asks only the gates.
    pub fn note_gate(&self, key: &Key, gate_queues: Option<Vec<String>>) {
        if let Some(r) = self.map().get_mut(key) {
            r.gate_queues = gate_queues;
        }
    }

    /// After our own routing write, or once the object is gone.
    pub fn forget(&self, key: &Key) {
        self.map().remove(key);
    }
}
