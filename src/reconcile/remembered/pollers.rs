//! The last poller check of every object and its versions' task-queue lists
//! (`crate::reconcile::observe`'s poller health), kept in memory between reconciles.

use std::collections::HashMap;
use std::sync::Mutex;

use jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;

use crate::api::TemporalWorkerDeployment;
use crate::planner::poller_health::Check;
use crate::temporal::client::QueueKind;

type Key = ObjectRef<TemporalWorkerDeployment>;

/// A version's task queues, each with the type it is asked with, as read at `at`.
#[derive(Clone, Debug)]
pub(crate) struct Queues {
    pub(crate) at: Timestamp,
    pub(crate) queues: Vec<(String, QueueKind)>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Memo {
    pub(crate) check: Option<Check>,
    pub(crate) queues: HashMap<String, Queues>,
}

/// The last check of every object, and its versions' queue lists.
#[derive(Default)]
pub struct PollerChecks {
    memos: Mutex<HashMap<Key, Memo>>,
}

impl PollerChecks {
    pub(crate) fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Memo>> {
        // A poisoned map only means another reconcile panicked mid-insert; the data is usable.
        self.memos.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn get(&self, key: &Key) -> Memo {
        self.map().get(key).cloned().unwrap_or_default()
    }

    /// The workflow task queues of `build` as the last poller check read them (a live
    /// version's), for the Go-shaped `taskQueues` of the status (`crate::reconcile::report::go_status`).
    pub fn workflow_queues(&self, key: &Key, build: &str) -> Vec<String> {
        let memo = self.get(key);
        memo.queues
            .get(build)
            .map(|q| {
                q.queues
                    .iter()
                    .filter(|(_, kind)| *kind == QueueKind::Workflow)
                    .map(|(name, _)| name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Once the object is gone.
    pub fn forget(&self, key: &Key) {
        self.map().remove(key);
    }
}
