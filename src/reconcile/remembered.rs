//! What the last reconcile of each TemporalWorkerDeployment saw of Temporal, so the next one
//! can skip describing it while nothing there can have changed (`polling::may_reuse` in
//! `src/planner/polling.rs` decides). In memory only: a restarted controller describes once.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::runtime::reflector::ObjectRef;

use crate::api::TemporalWorkerDeployment;
use crate::planner::polling::Remembered;

type Key = ObjectRef<TemporalWorkerDeployment>;

#[derive(Default)]
pub struct RememberedViews(Mutex<HashMap<Key, Remembered>>);

impl RememberedViews {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Remembered>> {
        // A poisoned map only means another reconcile panicked mid-insert; the data is usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, key: &Key) -> Option<Remembered> {
        self.map().get(key).cloned()
    }

    pub fn put(&self, key: Key, remembered: Remembered) {
        self.map().insert(key, remembered);
    }

    /// After our own routing write, or once the object is gone.
    pub fn forget(&self, key: &Key) {
        self.map().remove(key);
    }
}
