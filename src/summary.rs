//! JSON views of a `TemporalWorkerDeployment` for the status API (`http`), the metrics
//! collector (`metrics`) and the `status` CLI. One derivation of "phase" serves all three so
//! they never disagree; it lives here, outside `http` and `metrics`, so neither depends on
//! the other.
//!
//! The views are built from an explicit allow-list of fields: the pod template (whose env may
//! hold literal secrets) and the gate `input` (may be sensitive) are never copied.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};

use crate::api::TemporalWorkerDeployment;
use crate::api::conditions as cond;
use crate::api::twd::{
    RolloutStep, RolloutStrategy, SunsetSpec, TemporalWorkerDeploymentStatus, VersionStatus,
};
use crate::milestones::Milestone;

/// Coarse lifecycle of a rollout, derived from the conditions (the status contract).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    /// Not reconciled yet (no conditions).
    Pending,
    /// Moving forward: waiting for pollers, ramping, waiting for a gate.
    Progressing,
    /// Waiting for a human: a Manual target to promote, or a rollout paused with
    /// `spec.rollout.paused` (`RolloutPaused`).
    Paused,
    /// Target is Current in Temporal (`Ready=True`).
    Completed,
    /// Cannot move forward for a reason that may clear by itself (retried).
    Blocked,
    /// Needs a spec change or a human (`Stalled=True`).
    Stalled,
    /// Deletion in progress (finalizer cleanup).
    Deleting,
}

impl Phase {
    pub const ALL: [Phase; 7] = [
        Phase::Pending,
        Phase::Progressing,
        Phase::Paused,
        Phase::Completed,
        Phase::Blocked,
        Phase::Stalled,
        Phase::Deleting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Progressing => "Progressing",
            Phase::Paused => "Paused",
            Phase::Completed => "Completed",
            Phase::Blocked => "Blocked",
            Phase::Stalled => "Stalled",
            Phase::Deleting => "Deleting",
        }
    }
}

pub fn strategy_str(s: RolloutStrategy) -> &'static str {
    match s {
        RolloutStrategy::Manual => "Manual",
        RolloutStrategy::AllAtOnce => "AllAtOnce",
        RolloutStrategy::Progressive => "Progressive",
    }
}

pub const VERSION_STATUSES: [VersionStatus; 6] = [
    VersionStatus::NotRegistered,
    VersionStatus::Inactive,
    VersionStatus::Ramping,
    VersionStatus::Current,
    VersionStatus::Draining,
    VersionStatus::Drained,
];

pub fn version_status_str(s: VersionStatus) -> &'static str {
    match s {
        VersionStatus::NotRegistered => "NotRegistered",
        VersionStatus::Inactive => "Inactive",
        VersionStatus::Ramping => "Ramping",
        VersionStatus::Current => "Current",
        VersionStatus::Draining => "Draining",
        VersionStatus::Drained => "Drained",
    }
}

/// One line of `GET /api/v1/rollouts`; also the `summary` of a full rollout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSummary {
    pub namespace: String,
    pub name: String,
    /// `WorkerDeployment` or `TemporalWorkerDeployment`.
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub generation: Option<i64>,
    #[serde(default)]
    pub observed_generation: Option<i64>,
    pub strategy: RolloutStrategy,
    pub phase: Phase,
    /// Reason of the condition that decided the phase.
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// When the rollout entered its phase (latest Ready/Progressing/Stalled transition).
    #[serde(default)]
    pub phase_since: Option<jiff::Timestamp>,
    pub ready: bool,
    pub stalled: bool,
    #[serde(default, rename = "targetBuildID")]
    pub target_build_id: Option<String>,
    #[serde(default)]
    pub target_status: Option<VersionStatus>,
    #[serde(default, rename = "currentBuildID")]
    pub current_build_id: Option<String>,
    /// Ramp percentage of the target as reported in status (while Ramping).
    #[serde(default)]
    pub ramp_percentage: Option<f32>,
    /// Share (0–1) of new workflows routed to the target: 1 once Current.
    pub target_traffic_ratio: f64,
    /// Progressive only: the number of the step in effect, from 1.
    #[serde(default)]
    pub step: Option<i32>,
    /// Number of configured progressive steps.
    pub steps: usize,
    /// When the next step (or promotion) is due.
    #[serde(default)]
    pub next_step_at: Option<jiff::Timestamp>,
    /// Versions in status by Temporal status (deduplicated by build ID).
    #[serde(default)]
    pub versions: Vec<VersionCount>,
    /// Old versions still draining or kept by pinned workflows (drain visibility).
    #[serde(default)]
    pub draining: Vec<DrainingVersion>,
}

/// One old version that is not gone yet, and what keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainingVersion {
    #[serde(rename = "buildID")]
    pub build_id: String,
    pub status: VersionStatus,
    #[serde(default)]
    pub draining_since: Option<jiff::Timestamp>,
    /// Open workflows pinned to it; `None` when not counted.
    #[serde(default)]
    pub open_pinned_workflows: Option<i64>,
    /// When they are terminated (or asked to cancel) by `spec.sunset`'s deadline; `None`
    /// without one.
    #[serde(default)]
    pub pinned_workflows_end_at: Option<jiff::Timestamp>,
    #[serde(default)]
    pub waiting_for: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionCount {
    pub status: VersionStatus,
    pub count: usize,
}

/// `GET /api/v1/rollouts` and the namespaced list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutList {
    pub items: Vec<RolloutSummary>,
}

/// `GET /api/v1/namespaces/{ns}/rollouts/{name}` and each SSE event of the watch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutView {
    pub namespace: String,
    pub name: String,
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub generation: Option<i64>,
    #[serde(default)]
    pub creation_timestamp: Option<jiff::Timestamp>,
    #[serde(default)]
    pub deletion_timestamp: Option<jiff::Timestamp>,
    pub spec: SpecView,
    /// The object's `.status`, verbatim.
    #[serde(default)]
    pub status: Option<TemporalWorkerDeploymentStatus>,
    pub summary: RolloutSummary,
    /// Recent events emitted for this object, oldest first.
    #[serde(default)]
    pub milestones: Vec<Milestone>,
}

/// The safe subset of the spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecView {
    #[serde(default)]
    pub replicas: Option<i32>,
    pub strategy: RolloutStrategy,
    #[serde(default)]
    pub steps: Vec<RolloutStep>,
    #[serde(default)]
    pub gate: Option<GateView>,
    pub sunset: SunsetSpec,
    pub connection_ref: String,
    pub temporal_namespace: String,
    #[serde(default, rename = "customBuildID")]
    pub custom_build_id: Option<String>,
    /// Container names and images (nothing else from the pod template).
    #[serde(default)]
    pub containers: Vec<ContainerView>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateView {
    pub workflow_type: String,
    /// Whether an inline input is configured; the value itself is never shown.
    pub has_input: bool,
    /// Where the input is read from (a reference, not the value).
    #[serde(default)]
    pub input_from: Option<InputRefView>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputRefView {
    /// `ConfigMap` or `Secret`.
    pub kind: String,
    pub name: String,
    pub key: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContainerView {
    pub name: String,
    #[serde(default)]
    pub image: Option<String>,
}

fn find<'a>(
    status: Option<&'a TemporalWorkerDeploymentStatus>,
    type_: &str,
) -> Option<&'a Condition> {
    status.and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
}

fn is_true(c: Option<&Condition>) -> bool {
    c.is_some_and(|c| c.status == "True")
}

/// Phase, deciding condition (if any).
fn derive_phase(twd: &TemporalWorkerDeployment) -> (Phase, Option<&Condition>) {
    let status = twd.status.as_ref();
    let ready = find(status, cond::READY);
    let progressing = find(status, cond::PROGRESSING);
    let stalled = find(status, cond::STALLED);
    let decider = progressing.or(ready);
    if twd.metadata.deletion_timestamp.is_some() {
        return (Phase::Deleting, decider);
    }
    if is_true(stalled) {
        return (Phase::Stalled, stalled);
    }
    if is_true(ready) {
        return (Phase::Completed, ready);
    }
    let Some(decider) = decider else {
        return (Phase::Pending, None);
    };
    let manual_wait = decider.reason == cond::WAITING_FOR_PROMOTION
        && twd.spec.rollout.strategy == RolloutStrategy::Manual;
    if manual_wait || decider.reason == cond::ROLLOUT_PAUSED {
        return (Phase::Paused, Some(decider));
    }
    match progressing {
        Some(p) if p.status == "False" && p.reason != cond::ROLLOUT_COMPLETE => {
            (Phase::Blocked, Some(p))
        }
        _ => (Phase::Progressing, Some(decider)),
    }
}

fn version_counts(status: Option<&TemporalWorkerDeploymentStatus>) -> Vec<VersionCount> {
    let Some(status) = status else {
        return Vec::new();
    };
    let all = status
        .target_version
        .iter()
        .map(|t| &t.version)
        .chain(status.current_version.iter())
        .chain(status.deprecated_versions.iter().map(|d| &d.version));
    // Target and current are the same version once a rollout completes: count it once.
    let mut seen: Vec<(&str, VersionStatus)> = Vec::new();
    for v in all {
        if !seen.iter().any(|(b, _)| *b == v.build_id) {
            seen.push((&v.build_id, v.status));
        }
    }
    VERSION_STATUSES
        .iter()
        .map(|s| VersionCount {
            status: *s,
            count: seen.iter().filter(|(_, v)| v == s).count(),
        })
        .filter(|vc| vc.count > 0)
        .collect()
}

fn draining(status: Option<&TemporalWorkerDeploymentStatus>) -> Vec<DrainingVersion> {
    let Some(status) = status else {
        return Vec::new();
    };
    status
        .deprecated_versions
        .iter()
        .filter(|d| {
            matches!(
                d.version.status,
                VersionStatus::Draining | VersionStatus::Drained
            )
        })
        .map(|d| DrainingVersion {
            build_id: d.version.build_id.clone(),
            status: d.version.status,
            draining_since: d.draining_since.as_ref().map(|t| t.0),
            open_pinned_workflows: d.open_pinned_workflows,
            pinned_workflows_end_at: d.pinned_workflows_end_at.as_ref().map(|t| t.0),
            waiting_for: d.waiting_for.clone(),
        })
        .collect()
}

impl RolloutSummary {
    /// The poller health of the live versions as the status reads it (the
    /// `rollout_poller_health` metric): `no_active_pollers`, `unknown`, or `ok` when no problem
    /// was found; `None` while no version is Current.
    pub fn poller_health(&self) -> Option<&'static str> {
        self.current_build_id.as_ref()?;
        // A loss that outlasted the progress deadline is still a loss of pollers.
        let lost_too_long = self.reason.as_deref() == Some(cond::PROGRESS_DEADLINE_EXCEEDED)
            && self
                .message
                .as_deref()
                .is_some_and(|m| m.starts_with(cond::NO_ACTIVE_POLLERS));
        if lost_too_long {
            return Some("no_active_pollers");
        }
        Some(match self.reason.as_deref() {
            Some(cond::NO_ACTIVE_POLLERS) => "no_active_pollers",
            Some(cond::POLLER_STATUS_UNKNOWN) => "unknown",
            _ => "ok",
        })
    }

    pub fn from_twd(twd: &TemporalWorkerDeployment) -> Self {
        let status = twd.status.as_ref();
        let (phase, decider) = derive_phase(twd);
        let phase_since = match phase {
            Phase::Deleting => twd.metadata.deletion_timestamp.as_ref().map(|t| t.0),
            Phase::Pending => twd.metadata.creation_timestamp.as_ref().map(|t| t.0),
            _ => [cond::READY, cond::PROGRESSING, cond::STALLED]
                .iter()
                .filter_map(|t| find(status, t))
                .filter(|c| c.type_ != cond::STALLED || c.status == "True")
                .map(|c| c.last_transition_time.0)
                .max(),
        };
        let target = status.and_then(|s| s.target_version.as_ref());
        let target_status = target.map(|t| t.version.status);
        let ramp_percentage = target.and_then(|t| t.ramp_percentage);
        let target_traffic_ratio = match target_status {
            Some(VersionStatus::Current) => 1.0,
            Some(VersionStatus::Ramping) => {
                (f64::from(ramp_percentage.unwrap_or(0.0)) / 100.0).clamp(0.0, 1.0)
            }
            _ => 0.0,
        };
        RolloutSummary {
            namespace: twd.namespace().unwrap_or_default(),
            name: twd.name_any(),
            kind: twd.kind_name().to_string(),
            generation: twd.metadata.generation,
            observed_generation: status.and_then(|s| s.observed_generation),
            strategy: twd.spec.rollout.strategy,
            phase,
            reason: decider.map(|c| c.reason.clone()),
            message: decider.map(|c| c.message.clone()).filter(|m| !m.is_empty()),
            phase_since,
            ready: is_true(find(status, cond::READY)),
            stalled: is_true(find(status, cond::STALLED)),
            target_build_id: target.map(|t| t.version.build_id.clone()),
            target_status,
            current_build_id: status
                .and_then(|s| s.current_version.as_ref())
                .map(|c| c.build_id.clone()),
            ramp_percentage,
            target_traffic_ratio,
            step: target.and_then(|t| t.current_step),
            steps: twd.spec.rollout.steps.len(),
            next_step_at: target.and_then(|t| t.next_step_at.as_ref()).map(|t| t.0),
            versions: version_counts(status),
            draining: draining(status),
        }
    }

    /// `generation - observedGeneration`: how far the controller is behind the spec.
    pub fn generation_lag(&self) -> i64 {
        match (self.generation, self.observed_generation) {
            (Some(g), Some(o)) => (g - o).max(0),
            (Some(g), None) => g,
            _ => 0,
        }
    }
}

impl SpecView {
    pub fn from_twd(twd: &TemporalWorkerDeployment) -> Self {
        let spec = &twd.spec;
        let gate = spec.rollout.gate.as_ref().map(|g| GateView {
            workflow_type: g.workflow_type.clone(),
            has_input: g.input.is_some(),
            input_from: g.input_from.as_ref().and_then(|src| {
                let (kind, r) = match (&src.config_map_key_ref, &src.secret_key_ref) {
                    (Some(r), _) => ("ConfigMap", r),
                    (None, Some(r)) => ("Secret", r),
                    (None, None) => return None,
                };
                Some(InputRefView {
                    kind: kind.into(),
                    name: r.name.clone(),
                    key: r.key.clone(),
                })
            }),
        });
        let containers = spec
            .template
            .spec
            .as_ref()
            .map(|p| {
                p.containers
                    .iter()
                    .map(|c| ContainerView {
                        name: c.name.clone(),
                        image: c.image.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        SpecView {
            replicas: spec.replicas,
            strategy: spec.rollout.strategy,
            steps: spec.rollout.steps.clone(),
            gate,
            sunset: spec.sunset.clone(),
            connection_ref: spec.worker_options.connection_ref.name.clone(),
            temporal_namespace: spec.worker_options.temporal_namespace.clone(),
            custom_build_id: spec.worker_options.build_id_pin().map(str::to_string),
            containers,
        }
    }
}

impl RolloutView {
    pub fn from_twd(twd: &TemporalWorkerDeployment, milestones: Vec<Milestone>) -> Self {
        RolloutView {
            namespace: twd.namespace().unwrap_or_default(),
            name: twd.name_any(),
            uid: twd.metadata.uid.clone(),
            generation: twd.metadata.generation,
            creation_timestamp: twd.metadata.creation_timestamp.as_ref().map(|t| t.0),
            deletion_timestamp: twd.metadata.deletion_timestamp.as_ref().map(|t| t.0),
            spec: SpecView::from_twd(twd),
            status: twd.status.clone(),
            summary: RolloutSummary::from_twd(twd),
            milestones,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_conditions() {
        let cases = [
            (RolloutStrategy::AllAtOnce, vec![], Phase::Pending),
            (
                RolloutStrategy::AllAtOnce,
                vec![
                    ("Ready", "True", "RolloutComplete"),
                    ("Progressing", "False", "RolloutComplete"),
                ],
                Phase::Completed,
            ),
            (
                RolloutStrategy::Progressive,
                vec![
                    ("Ready", "False", "Ramping"),
                    ("Progressing", "True", "Ramping"),
                ],
                Phase::Progressing,
            ),
            (
                RolloutStrategy::AllAtOnce,
                vec![
                    ("Ready", "False", "TemporalStateFetchFailed"),
                    ("Progressing", "False", "TemporalStateFetchFailed"),
                ],
                Phase::Blocked,
            ),
            (
                RolloutStrategy::AllAtOnce,
                vec![
                    ("Ready", "False", "InvalidSpec"),
                    ("Progressing", "False", "InvalidSpec"),
                    ("Stalled", "True", "InvalidSpec"),
                ],
                Phase::Stalled,
            ),
            (
                RolloutStrategy::Manual,
                vec![
                    ("Ready", "False", "WaitingForPromotion"),
                    ("Progressing", "False", "WaitingForPromotion"),
                ],
                Phase::Paused,
            ),
            (
                RolloutStrategy::AllAtOnce,
                vec![
                    ("Ready", "False", "WaitingForPromotion"),
                    ("Progressing", "True", "WaitingForPromotion"),
                ],
                Phase::Progressing,
            ),
            (
                RolloutStrategy::Progressive,
                vec![
                    ("Ready", "False", "RolloutPaused"),
                    ("Progressing", "False", "RolloutPaused"),
                    ("Reconciling", "True", "RolloutPaused"),
                ],
                Phase::Paused,
            ),
            (
                RolloutStrategy::Progressive,
                vec![
                    ("Ready", "False", "RolloutAborted"),
                    ("Progressing", "False", "RolloutAborted"),
                    ("Stalled", "True", "RolloutAborted"),
                ],
                Phase::Stalled,
            ),
        ];
        // Generation 3, conditions observed at generation 2.
        for (strategy, conds, want) in cases {
            let twd = TemporalWorkerDeployment::test()
                .strategy(strategy)
                .generation(3)
                .with_conditions(2, &conds);
            let s = RolloutSummary::from_twd(&twd);
            assert_eq!(s.phase, want, "{strategy:?} {conds:?}");
        }
        let deleting = TemporalWorkerDeployment::test()
            .generation(3)
            .with_conditions(2, &[("Ready", "True", "RolloutComplete")])
            .deleting();
        assert_eq!(RolloutSummary::from_twd(&deleting).phase, Phase::Deleting);
    }

    #[test]
    fn lag_and_reason() {
        let twd = TemporalWorkerDeployment::test()
            .generation(3)
            .with_conditions(2, &[("Progressing", "False", "InvalidSpec")]);
        let s = RolloutSummary::from_twd(&twd);
        assert_eq!(s.generation_lag(), 1);
        assert_eq!(s.reason.as_deref(), Some("InvalidSpec"));
        assert_eq!(s.phase_since, Some("2024-01-01T00:00:00Z".parse().unwrap()));
    }
}
