//! What the last reconcile of each TemporalWorkerDeployment saw of Temporal, so the next one
//! can skip describing it while nothing there can have changed (`polling::may_reuse` in
//! `src/planner/polling.rs` decides). In memory only: a restarted controller describes once.

pub mod pinned;
pub mod pollers;

use std::collections::HashMap;
use std::sync::Mutex;

use jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;

use crate::api::TemporalWorkerDeployment;
use crate::planner::polling::Remembered;
use crate::temporal::state::WorkerDeploymentState;

type Key = ObjectRef<TemporalWorkerDeployment>;

#[derive(Default)]
pub struct RememberedViews {
    /// Boxed: a view is several hundred bytes, and a map sized for 1,000 objects holds room
    /// for nearly twice as many (issue 30: memory per object).
    views: Mutex<HashMap<Key, Box<Remembered>>>,
}

impl RememberedViews {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Box<Remembered>>> {
        // A poisoned map only means another reconcile panicked mid-insert; the data is usable.
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After our own write to the worker deployment: the view that write left
    /// (`polling::view_after_write`) stands in for a describe while Temporal is still busy with
    /// the write (`polling::AFTER_WRITE_SETTLE`); nothing waits for it.
    pub fn wrote(&self, key: &Key, generation: i64, view: WorkerDeploymentState, at: Timestamp) {
        self.put(
            key.clone(),
            Remembered {
                generation,
                at,
                state: view,
                gate_queues: None,
                written: true,
            },
        );
    }

    pub fn get(&self, key: &Key) -> Option<Remembered> {
        self.map().get(key).map(|r| (**r).clone())
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

    /// Once the object is gone.
    pub fn forget(&self, key: &Key) {
        self.map().remove(key);
    }
}
