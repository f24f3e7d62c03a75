//! Kubernetes Events (events.k8s.io/v1) for rollout milestones and failures, mirrored into the
//! in-memory milestone log served by the status API. One event per transition: callers decide
//! when a transition happened; this module only publishes.
//!
//! Publishing is our own rather than kube-runtime's `Recorder`, which folds events with the
//! same reason into one series whatever their note: "VersionCreated v2" would show up as a
//! second occurrence of "VersionCreated v1". Here only an identical event (same object, type,
//! reason and note) repeated within [`SERIES_WINDOW`] is a repeat. A repeated Warning becomes
//! a series, as client-go does; a repeated Normal milestone is dropped, because a milestone
//! happens once and a second announcement within minutes only means two reconciles saw the
//! same transition (at-least-once reconciling against a cache).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::api::TemporalWorkerDeployment;
use crate::metrics::Metrics;
use crate::milestones::{Milestone, MilestoneKind, Milestones};

// Normal milestone reasons (stable strings).
pub const VERSION_CREATED: &str = "VersionCreated";
pub const VERSION_REGISTERED: &str = "VersionRegistered";
pub const RAMP_STEP_STARTED: &str = "RampStepStarted";
pub const PROMOTED: &str = "Promoted";
pub const ROLLED_BACK: &str = "RolledBack";
pub const SCALED_DOWN: &str = "ScaledDown";
pub const VERSION_DELETED: &str = "VersionDeleted";
pub const VERSION_RECORD_DELETED: &str = "VersionRecordDeleted";
pub const VERSION_UPDATED: &str = "VersionUpdated";
pub const VERSION_RESTARTED: &str = "VersionRestarted";
pub const GATE_STARTED: &str = "GateWorkflowStarted";
pub const RAMP_CLEARED: &str = "RampCleared";
pub const PINNED_SIGNALLED: &str = "PinnedWorkflowsSignalled";
pub const PINNED_CANCELLED: &str = "PinnedWorkflowsCancelled";
pub const PINNED_TERMINATED: &str = "PinnedWorkflowsTerminated";
pub const DRAINING_SCALED_UP: &str = "DrainingVersionScaledUp";
/// `spec.adopt`: the unversioned workers' Deployment was scaled to zero or deleted.
pub const ADOPTED_SCALED_DOWN: &str = "AdoptedDeploymentScaledDown";
pub const ADOPTED_DELETED: &str = "AdoptedDeploymentDeleted";
// Warning reasons that are not condition reasons.
pub const CLEANUP_ABANDONED: &str = "TemporalCleanupAbandoned";
pub const DRAINING_AT_ZERO: &str = "DrainingVersionAtZero";
/// `temporal.io/restart` names a build with no live Deployment: nothing was restarted.
pub const RESTART_SKIPPED: &str = "RestartSkipped";
/// The pod template names an image by a mutable reference (`:latest`, no tag, no digest).
pub const MUTABLE_IMAGE: &str = "MutableImageReference";
/// The spec uses a deprecated field alias (`spec.deployment.labels`, …) that is still read.
pub const DEPRECATED_FIELD: &str = "DeprecatedField";

const CONTROLLER: &str = "temporal-worker-controller";
/// An identical event repeated within this window updates the first one's series.
pub const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);
/// The API server refuses longer notes.
pub const MAX_NOTE_BYTES: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What makes two events the same occurrence.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SeriesKey {
    namespace: String,
    name: String,
    uid: String,
    type_: EventType,
    reason: String,
    note: String,
}

#[derive(Clone, Debug)]
struct SeriesEntry {
    event_name: String,
    count: i32,
    last: Timestamp,
}

/// Decides whether an event is new or a repeat; pure, so it is unit-tested.
#[derive(Debug, Default)]
struct SeriesCache {
    entries: HashMap<SeriesKey, SeriesEntry>,
}

#[derive(Debug, PartialEq)]
enum Occurrence {
    New,
    Repeat { event_name: String, count: i32 },
}

impl SeriesCache {
    fn observe(&mut self, key: &SeriesKey, now: Timestamp) -> Occurrence {
        self.entries
            .retain(|_, e| now.duration_since(e.last) < SERIES_WINDOW);
        match self.entries.get_mut(key) {
            Some(e) => {
                e.count += 1;
                e.last = now;
                Occurrence::Repeat {
                    event_name: e.event_name.clone(),
                    count: e.count,
                }
            }
            None => Occurrence::New,
        }
    }

    fn created(&mut self, key: SeriesKey, event_name: String, now: Timestamp) {
        self.entries.insert(
            key,
            SeriesEntry {
                event_name,
                count: 1,
                last: now,
            },
        );
    }

    /// Whether the identical event was published within the window (without counting it).
    fn is_recent(&self, key: &SeriesKey, now: Timestamp) -> bool {
        self.entries
            .get(key)
            .is_some_and(|e| now.duration_since(e.last) < SERIES_WINDOW)
    }

    fn forget(&mut self, key: &SeriesKey) {
        self.entries.remove(key);
    }
}

/// Cuts `note` to the API server's limit on a character boundary.
fn truncate_note(note: String) -> String {
    if note.len() <= MAX_NOTE_BYTES {
        return note;
    }
    let mut end = MAX_NOTE_BYTES - '…'.len_utf8();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &note[..end])
}

#[derive(Clone)]
pub struct EventSink {
    client: kube::Client,
    instance: String,
    milestones: Arc<Milestones>,
    metrics: Arc<Metrics>,
    series: Arc<Mutex<SeriesCache>>,
}

impl EventSink {
    pub fn new(
        client: kube::Client,
        instance: Option<String>,
        milestones: Arc<Milestones>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            client,
            instance: instance.unwrap_or_else(|| CONTROLLER.to_string()),
            milestones,
            metrics,
            series: Arc::new(Mutex::new(SeriesCache::default())),
        }
    }

    pub async fn normal(&self, twd: &TemporalWorkerDeployment, reason: &str, message: String) {
        self.publish(twd.reference(), true, EventType::Normal, reason, message)
            .await;
    }

    pub async fn warning(&self, twd: &TemporalWorkerDeployment, reason: &str, message: String) {
        self.publish(twd.reference(), true, EventType::Warning, reason, message)
            .await;
    }

    /// A Warning about another object (a Connection): not a rollout milestone, so it stays out
    /// of the milestone log the status API serves per worker deployment.
    pub async fn warning_about(&self, regarding: ObjectReference, reason: &str, message: String) {
        self.publish(regarding, false, EventType::Warning, reason, message)
            .await;
    }

    async fn publish(
        &self,
        reference: ObjectReference,
        milestone: bool,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        let namespace = reference.namespace.clone().unwrap_or_default();
        let name = reference.name.clone().unwrap_or_default();
        let note = truncate_note(message);
        let key = SeriesKey {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: reference.uid.clone().unwrap_or_default(),
            type_,
            reason: reason.to_string(),
            note: note.clone(),
        };
        let duplicate_milestone = type_ == EventType::Normal
            && self
                .series
                .lock()
                .is_ok_and(|c| c.is_recent(&key, Timestamp::now()));
        if duplicate_milestone {
            tracing::debug!(reason, "milestone already announced");
            return;
        }
        if milestone {
            self.milestones.record(
                &namespace,
                &name,
                Milestone {
                    time: Timestamp::now(),
                    kind: match type_ {
                        EventType::Normal => MilestoneKind::Normal,
                        EventType::Warning => MilestoneKind::Warning,
                    },
                    reason: reason.to_string(),
                    message: note,
                },
            );
        }
        // Events are best effort: a failed publish must never fail a rollout.
        if let Err(e) = self.write(&key, reference).await {
            tracing::debug!(error = %e, reason, "failed to publish event");
        }
    }

    async fn write(&self, key: &SeriesKey, regarding: ObjectReference) -> kube::Result<()> {
        let now = Timestamp::now();
        let occurrence = match self.series.lock() {
            Ok(mut cache) => cache.observe(key, now),
            Err(_) => Occurrence::New,
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &key.namespace);
        if let Occurrence::Repeat { event_name, count } = occurrence {
            let patch = serde_json::json!({"series": EventSeries {
                count,
                last_observed_time: MicroTime(now),
            }});
            let res = api
                .patch(&event_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            self.metrics.kube_write("patch", "events", res.is_ok());
            match res {
                Ok(_) => return Ok(()),
                // Expired or deleted meanwhile: start over with a new event.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let event_name = format!("{}.{:x}", key.name, now.as_nanosecond());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(event_name.clone()),
                namespace: Some(key.namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some("Reconcile".into()),
            reason: Some(key.reason.clone()),
            note: Some(key.note.clone()),
            type_: Some(key.type_.as_str().into()),
            regarding: Some(regarding),
            reporting_controller: Some(CONTROLLER.into()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        let res = api.create(&PostParams::default(), &event).await;
        self.metrics.kube_write("create", "events", res.is_ok());
        match res {
            Ok(_) => {
                if let Ok(mut cache) = self.series.lock() {
                    cache.created(key.clone(), event_name, now);
                }
                Ok(())
            }
            Err(e) => {
                if let Ok(mut cache) = self.series.lock() {
                    cache.forget(key);
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(reason: &str, note: &str) -> SeriesKey {
        SeriesKey {
            namespace: "ns".into(),
            name: "web".into(),
            uid: "u1".into(),
            type_: EventType::Normal,
            reason: reason.into(),
            note: note.into(),
        }
    }

    #[test]
    fn only_identical_events_form_a_series() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut c = SeriesCache::default();
        let v1 = key("VersionCreated", "Created Deployment web-v1");
        let v2 = key("VersionCreated", "Created Deployment web-v2");
        assert_eq!(c.observe(&v1, t0), Occurrence::New);
        c.created(v1.clone(), "web.1".into(), t0);
        // Same reason, different note: a new event, not a repeat of v1's.
        assert_eq!(c.observe(&v2, t0), Occurrence::New);
        c.created(v2.clone(), "web.2".into(), t0);
        // The identical event again: the first one's series counts it.
        let t1 = t0 + SignedDuration::from_secs(30);
        assert_eq!(
            c.observe(&v1, t1),
            Occurrence::Repeat {
                event_name: "web.1".into(),
                count: 2
            }
        );
        assert_eq!(
            c.observe(&v1, t1 + SignedDuration::from_secs(1)),
            Occurrence::Repeat {
                event_name: "web.1".into(),
                count: 3
            }
        );
        assert!(c.is_recent(&v2, t1));
        assert!(!c.is_recent(&v2, t1 + SERIES_WINDOW));
        // Another object with the same name (recreated: new uid) starts fresh.
        let mut other = v1.clone();
        other.uid = "u2".into();
        assert_eq!(c.observe(&other, t1), Occurrence::New);
        // After the window, the same event is new again.
        let later = t1 + SERIES_WINDOW + SignedDuration::from_secs(2);
        assert_eq!(c.observe(&v1, later), Occurrence::New);
        // A failed create is forgotten, so the next attempt creates again.
        c.created(v1.clone(), "web.3".into(), later);
        c.forget(&v1);
        assert_eq!(c.observe(&v1, later), Occurrence::New);
    }

    #[test]
    fn notes_are_cut_to_the_api_limit_on_a_char_boundary() {
        assert_eq!(truncate_note("short".into()), "short");
        let long = "é".repeat(MAX_NOTE_BYTES);
        let cut = truncate_note(long);
        assert!(cut.len() <= MAX_NOTE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        let exact = "a".repeat(MAX_NOTE_BYTES);
        assert_eq!(truncate_note(exact.clone()), exact);
    }
}
