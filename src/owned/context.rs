//! What every pass of the owned-resource reconciler shares: the services of every reconciler,
//! its settings and the memories kept between passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::ObjectRef;

use crate::api::TemporalWorkerOwnedResource;
use crate::owned::apply::Resources;
use crate::owned::settings::OwnedSettings;
use crate::reconciler::Streaks;
use crate::reconciler::services::Services;

/// Shared state of the TWOR controller.
pub struct OwnedContext {
    /// What the three reconcilers share: clients, leadership, metrics, the Temporal pool (for
    /// task-queue lookups), the shard and its claims (a template follows its worker
    /// deployment's shard), the caches.
    pub services: Arc<Services>,
    pub settings: OwnedSettings,
    pub(crate) resources: Resources,
    pub(crate) task_queues: Known,
    pub(crate) streaks: Streaks<ObjectRef<TemporalWorkerOwnedResource>>,
}

impl OwnedContext {
    pub fn new(services: Arc<Services>, settings: OwnedSettings) -> Self {
        Self {
            services,
            settings,
            task_queues: Known::default(),
            resources: Resources::default(),
            streaks: Streaks::default(),
        }
    }
}

/// Found task queues by (TWD uid, build ID).
#[derive(Default)]
pub struct Known(Mutex<HashMap<(String, String), String>>);

impl Known {
    pub(crate) fn get(&self, key: &(String, String)) -> Option<String> {
        // A poisoned lock only means another reconcile panicked mid-insert; the map is intact.
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    pub(crate) fn insert(&self, key: (String, String), queue: String) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, queue);
    }
}
