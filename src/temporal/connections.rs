//! The pooled connections, shared by the pool (which fills the map) and each client (which
//! may evict its own entry): kept apart from both so that neither imports the other's file.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use temporalio_client::Connection;
use tokio::sync::OnceCell;

/// Called once per RPC (and once per connection attempt, as method `Connect`) with the gRPC
/// code label (see [`super::error::code_label`]) and the latency.
pub type RpcObserver = Arc<dyn Fn(&'static str, &'static str, Duration) + Send + Sync>;

pub(super) type MapKey = (String, String); // (key fingerprint, Temporal namespace)

pub(super) struct Entry {
    pub(super) id: u64,
    pub(super) cell: Arc<OnceCell<Connection>>,
    pub(super) last_used: Instant,
    pub(super) reuse_deadline: Option<Timestamp>,
}

#[derive(Default)]
pub(crate) struct PoolInner {
    entries: Mutex<HashMap<MapKey, Entry>>,
    pub(super) next_id: std::sync::atomic::AtomicU64,
}

impl PoolInner {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MapKey, Entry>> {
        // A poisoned map only means another thread panicked mid-update; the data is still usable.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Lets a [`super::TemporalClient`] drop its own pooled connection after an auth failure without
/// keeping the pool alive, and without evicting a newer connection for the same key.
#[derive(Clone)]
pub(crate) struct EvictHandle {
    pub(super) pool: Weak<PoolInner>,
    pub(super) key: MapKey,
    pub(super) id: u64,
}

impl EvictHandle {
    pub(crate) fn evict(&self) {
        if let Some(pool) = self.pool.upgrade() {
            let mut map = pool.lock();
            if map.get(&self.key).is_some_and(|e| e.id == self.id) {
                map.remove(&self.key);
            }
        }
    }
}
