//! Kubernetes Events for rollout milestones and failures, mirrored into the in-memory
//! milestone log served by the status API. One event per transition: callers decide when a
//! transition happened; this module only publishes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::api::TemporalWorkerDeployment;
use crate::milestones::{Milestone, MilestoneKind, Milestones};

// Normal milestone reasons (stable strings).
pub const VERSION_CREATED: &str = "VersionCreated";
pub const VERSION_REGISTERED: &str = "VersionRegistered";
pub const RAMP_STEP_STARTED: &str = "RampStepStarted";
pub const PROMOTED: &str = "Promoted";
pub const ROLLED_BACK: &str = "RolledBack";
pub const SCALED_DOWN: &str = "ScaledDown";
pub const VERSION_DELETED: &str = "VersionDeleted";
pub const VERSION_UPDATED: &str = "VersionUpdated";
pub const GATE_STARTED: &str = "GateWorkflowStarted";
pub const RAMP_CLEARED: &str = "RampCleared";
// Warning reasons that are not condition reasons.
pub const CLEANUP_ABANDONED: &str = "TemporalCleanupAbandoned";

#[derive(Clone)]
pub struct EventSink {
    recorder: Recorder,
    milestones: Arc<Milestones>,
}

impl EventSink {
    pub fn new(
        client: kube::Client,
        instance: Option<String>,
        milestones: Arc<Milestones>,
    ) -> Self {
        let reporter = Reporter {
            controller: "temporal-worker-controller".into(),
            instance,
        };
        Self {
            recorder: Recorder::new(client, reporter),
            milestones,
        }
    }

    pub async fn normal(&self, twd: &TemporalWorkerDeployment, reason: &str, message: String) {
        self.publish(twd, EventType::Normal, reason, message).await;
    }

    pub async fn warning(&self, twd: &TemporalWorkerDeployment, reason: &str, message: String) {
        self.publish(twd, EventType::Warning, reason, message).await;
    }

    async fn publish(
        &self,
        twd: &TemporalWorkerDeployment,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        let reference: ObjectReference = twd.object_ref(&());
        let kind = match type_ {
            EventType::Normal => MilestoneKind::Normal,
            EventType::Warning => MilestoneKind::Warning,
        };
        self.milestones.record(
            reference.namespace.as_deref().unwrap_or_default(),
            reference.name.as_deref().unwrap_or_default(),
            Milestone {
                time: jiff::Timestamp::now(),
                kind,
                reason: reason.to_string(),
                message: message.clone(),
            },
        );
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(message),
            action: "Reconcile".into(),
            secondary: None,
        };
        // Events are best effort: a failed publish must never fail a rollout.
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, reason, "failed to publish event");
        }
    }
}
