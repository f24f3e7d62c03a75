//! Recent rollout milestones per `TemporalWorkerDeployment`, kept in memory for the status
//! API. Kubernetes Events expire (1 h by default) and are awkward to query per object, so the
//! reconciler mirrors every event it emits here; the status API shows the last few.
//!
//! Bounded twice: a ring of [`PER_OBJECT`] entries per object, and at most [`MAX_OBJECTS`]
//! objects (the object updated least recently is forgotten first), so churn of short-lived
//! TWDs cannot grow memory without limit.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Milestones kept per object.
pub const PER_OBJECT: usize = 20;
/// Objects tracked at most.
pub const MAX_OBJECTS: usize = 10_000;

/// Mirrors the Kubernetes event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MilestoneKind {
    Normal,
    Warning,
}

/// One event the reconciler emitted for an object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Milestone {
    pub time: jiff::Timestamp,
    #[serde(rename = "type")]
    pub kind: MilestoneKind,
    pub reason: String,
    pub message: String,
}

#[derive(Default)]
struct Entry {
    items: VecDeque<Milestone>,
    /// Monotonic sequence of the last update, for eviction.
    touched: u64,
}

#[derive(Default)]
struct Inner {
    objects: HashMap<(String, String), Entry>,
    seq: u64,
}

/// Shared (behind an `Arc`) by the event sink and the HTTP server.
#[derive(Default)]
pub struct Milestones {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Milestones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Milestones")
            .field("objects", &self.object_count())
            .finish()
    }
}

impl Milestones {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a milestone for `namespace/name`, dropping the oldest beyond [`PER_OBJECT`].
    pub fn record(&self, namespace: &str, name: &str, milestone: Milestone) {
        let mut inner = self.lock();
        inner.seq += 1;
        let seq = inner.seq;
        let key = (namespace.to_string(), name.to_string());
        if !inner.objects.contains_key(&key) && inner.objects.len() >= MAX_OBJECTS {
            evict_oldest(&mut inner.objects);
        }
        let entry = inner.objects.entry(key).or_default();
        entry.touched = seq;
        if entry.items.len() >= PER_OBJECT {
            entry.items.pop_front();
        }
        entry.items.push_back(milestone);
    }

    /// Milestones of one object, oldest first.
    pub fn recent(&self, namespace: &str, name: &str) -> Vec<Milestone> {
        let inner = self.lock();
        inner
            .objects
            .get(&(namespace.to_string(), name.to_string()))
            .map(|e| e.items.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Drops an object's history (call once it is gone for good, e.g. after finalization).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.lock()
            .objects
            .remove(&(namespace.to_string(), name.to_string()));
    }

    pub fn object_count(&self) -> usize {
        self.lock().objects.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the ring half-updated in a way that
        // matters (worst case one milestone is lost), so keep serving after poisoning.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn evict_oldest(objects: &mut HashMap<(String, String), Entry>) {
    if let Some(key) = objects
        .iter()
        .min_by_key(|(_, e)| e.touched)
        .map(|(k, _)| k.clone())
    {
        objects.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(reason: &str) -> Milestone {
        Milestone {
            time: jiff::Timestamp::from_second(1_700_000_000).unwrap(),
            kind: MilestoneKind::Normal,
            reason: reason.into(),
            message: format!("{reason} happened"),
        }
    }

    #[test]
    fn keeps_last_entries_in_order() {
        let ms = Milestones::new();
        for i in 0..(PER_OBJECT + 5) {
            ms.record("ns", "a", m(&format!("R{i}")));
        }
        ms.record("ns", "b", m("Other"));
        let a = ms.recent("ns", "a");
        assert_eq!(a.len(), PER_OBJECT);
        assert_eq!(a.first().unwrap().reason, "R5");
        assert_eq!(a.last().unwrap().reason, format!("R{}", PER_OBJECT + 4));
        assert_eq!(ms.recent("ns", "b").len(), 1);
        assert!(ms.recent("other", "a").is_empty());
    }

    #[test]
    fn forget_and_eviction() {
        let ms = Milestones::new();
        ms.record("ns", "a", m("X"));
        ms.forget("ns", "a");
        assert!(ms.recent("ns", "a").is_empty());

        let mut objects = HashMap::new();
        objects.insert(
            ("n".to_string(), "old".to_string()),
            Entry {
                items: VecDeque::new(),
                touched: 1,
            },
        );
        objects.insert(
            ("n".to_string(), "new".to_string()),
            Entry {
                items: VecDeque::new(),
                touched: 2,
            },
        );
        evict_oldest(&mut objects);
        assert!(objects.contains_key(&("n".to_string(), "new".to_string())));
        assert_eq!(objects.len(), 1);
    }

    #[test]
    fn serializes_type_field() {
        let json = serde_json::to_value(m("VersionCreated")).unwrap();
        assert_eq!(json["type"], "Normal");
        assert_eq!(json["reason"], "VersionCreated");
        assert_eq!(json["time"], "2023-11-14T22:13:20Z");
    }
}
