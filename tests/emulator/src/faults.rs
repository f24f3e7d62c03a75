//! Fault injection: failing the next N requests of a verb/resource, added latency, and closing
//! every open watch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

#[derive(Default)]
struct Inner {
    /// (verb, resource) → (remaining count, http status)
    fail: HashMap<(String, String), (u32, u16)>,
    latency: Duration,
}

/// Clonable handle to the emulator's fault settings.
#[derive(Clone)]
pub struct Faults {
    inner: Arc<Mutex<Inner>>,
    drops: Arc<watch::Sender<u64>>,
}

impl Faults {
    pub(crate) fn new() -> Self {
        let (tx, _rx) = watch::channel(0);
        Faults {
            inner: Arc::default(),
            drops: Arc::new(tx),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next `count` requests with this verb (get|list|watch|create|update|patch|delete|
    /// deletecollection) on this resource (plural, or `plural/subresource`) fail with `http_status`.
    pub fn fail_next(&self, verb: &str, resource: &str, count: u32, http_status: u16) {
        self.lock().fail.insert(
            (verb.to_string(), resource.to_string()),
            (count, http_status),
        );
    }

    /// Delay added before every API request is served.
    pub fn set_latency(&self, d: Duration) {
        self.lock().latency = d;
    }

    /// Closes every open watch stream now (clients see the connection end and re-watch).
    pub fn drop_watches(&self) {
        self.drops.send_modify(|n| *n += 1);
    }

    pub(crate) fn latency(&self) -> Duration {
        self.lock().latency
    }

    /// Consumes one injected failure for this request, if any is armed.
    pub(crate) fn take(&self, verb: &str, resource: &str) -> Option<u16> {
        let mut g = self.lock();
        let key = (verb.to_string(), resource.to_string());
        let (left, code) = g.fail.get_mut(&key)?;
        if *left == 0 {
            return None;
        }
        *left -= 1;
        let code = *code;
        if *left == 0 {
            g.fail.remove(&key);
        }
        Some(code)
    }

    pub(crate) fn drop_signal(&self) -> watch::Receiver<u64> {
        self.drops.subscribe()
    }
}
