//! The version rows of the status (`targetVersion`, `currentVersion`, `deprecatedVersions`,
//! with their Deployments, gate workflows and pinned workflows), built from what this reconcile
//! saw and the routing change it made. The conditions are decided next door (`compute()`).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::twd::{
    DeprecatedVersion, GateWorkflow, PinnedWorkflow, TargetVersion, TemporalWorkerDeploymentStatus,
    VersionInfo, VersionStatus,
};
use crate::planner::model::{ObservedDeployment, Phase, Plan, PlanInput, RoutingChange};
use crate::planner::{drain, eligible_for_deletion, sunset_deadlines};
use crate::temporal::state::{PinnedView, TemporalVersionStatus};

/// Routing as it stands after this reconcile: Temporal's view plus the change it just accepted.
pub(super) struct Effective {
    pub(super) current: Option<String>,
    ramping: Option<String>,
    percentage: f32,
    ramping_since: Option<Timestamp>,
    ramp_changed_at: Option<Timestamp>,
    /// Builds that just lost the current or ramping slot: Temporal marks them Draining at once.
    demoted: Vec<String>,
}

impl Effective {
    pub(super) fn new(input: &PlanInput, routed: Option<&RoutingChange>) -> Self {
        let r = &input.temporal.routing;
        let nonempty = |b: &Option<String>| b.clone().filter(|b| !b.is_empty());
        let mut e = Self {
            current: nonempty(&r.current_build_id),
            ramping: nonempty(&r.ramping_build_id),
            percentage: r.ramp_percentage,
            ramping_since: r.ramping_changed_at,
            ramp_changed_at: r.ramp_percentage_changed_at,
            demoted: Vec::new(),
        };
        let now = input.now;
        match routed {
            None => {}
            Some(RoutingChange::SetCurrent { build_id }) => {
                if let Some(old) = e
                    .current
                    .replace(build_id.clone())
                    .filter(|o| o != build_id)
                {
                    e.demoted.push(old);
                }
                // Promoting the ramping build clears the ramp; another build keeps ramping.
                if e.ramping.as_deref() == Some(build_id.as_str()) {
                    e.clear_ramp(now);
                }
            }
            Some(RoutingChange::SetRamping {
                build_id,
                percentage,
            }) => {
                if e.ramping.as_deref() != Some(build_id.as_str()) {
                    if let Some(old) = e.ramping.replace(build_id.clone()) {
                        e.demoted.push(old);
                    }
                    e.ramping_since = Some(now);
                }
                e.percentage = *percentage;
                e.ramp_changed_at = Some(now);
            }
            Some(RoutingChange::ClearRamp) => {
                if let Some(old) = e.ramping.take() {
                    e.demoted.push(old);
                }
                e.clear_ramp(now);
            }
        }
        e
    }

    fn clear_ramp(&mut self, now: Timestamp) {
        self.ramping = None;
        self.percentage = 0.0;
        self.ramping_since = Some(now);
        self.ramp_changed_at = Some(now);
    }

    fn status_of(&self, input: &PlanInput, build: &str) -> VersionStatus {
        if self.current.as_deref() == Some(build) {
            VersionStatus::Current
        } else if self.ramping.as_deref() == Some(build) {
            VersionStatus::Ramping
        } else if self.demoted.iter().any(|b| b == build) {
            VersionStatus::Draining
        } else {
            input
                .temporal
                .version(build)
                .map_or(VersionStatus::NotRegistered, |v| convert(v.status))
        }
    }
}

fn convert(s: TemporalVersionStatus) -> VersionStatus {
    match s {
        TemporalVersionStatus::Inactive => VersionStatus::Inactive,
        TemporalVersionStatus::Current => VersionStatus::Current,
        TemporalVersionStatus::Ramping => VersionStatus::Ramping,
        TemporalVersionStatus::Draining => VersionStatus::Draining,
        TemporalVersionStatus::Drained => VersionStatus::Drained,
    }
}

/// The Deployment that represents a build: a live one if any, else one being deleted.
fn deployment_of<'a>(input: &'a PlanInput, build: &str) -> Option<&'a ObservedDeployment> {
    let mut all = input.deployments.iter().filter(|d| d.build_id == build);
    let first = all.clone().next();
    all.find(|d| !d.deleting).or(first)
}

fn info(build: &str, status: VersionStatus, d: Option<&ObservedDeployment>) -> VersionInfo {
    VersionInfo {
        build_id: build.to_string(),
        status,
        deployment_name: d.map(|d| d.name.clone()),
        // The Go-shaped fields are added by `crate::reconcile::report::go_status` in the report stage.
        deployment: None,
        task_queues: Vec::new(),
        managed_by: None,
        healthy_since: d.and_then(|d| d.healthy_since).map(Time),
        replicas: d.map(|d| d.replicas.unwrap_or(d.status_replicas)),
        ready_replicas: d.map(|d| d.ready_replicas),
    }
}

/// Version fields, rebuilt from scratch. `routed`: Temporal accepted our routing change (after
/// claiming the manager identity if the plan said so). `executed`: every step of the plan ran
/// (so planned deletions are gone).
/// The target's gate workflows as observed, in a stable order (no status churn).
fn gate_workflows(input: &PlanInput) -> Vec<GateWorkflow> {
    let mut gates: Vec<GateWorkflow> = input
        .gates
        .iter()
        .map(|g| GateWorkflow {
            workflow_id: g.workflow_id.clone(),
            run_id: g.run_id.clone(),
            task_queue: g.task_queue.clone(),
            status: g.status,
        })
        .collect();
    gates.sort_by(|a, b| {
        a.task_queue
            .cmp(&b.task_queue)
            .then_with(|| a.workflow_id.cmp(&b.workflow_id))
    });
    gates
}

pub(super) fn versions(
    input: &PlanInput,
    plan: &Plan,
    e: &Effective,
    routed: bool,
    executed: bool,
) -> TemporalWorkerDeploymentStatus {
    let current_version = e
        .current
        .as_deref()
        .map(|b| info(b, VersionStatus::Current, deployment_of(input, b)));
    let t = &input.temporal;
    let me = || Some(input.controller_identity.clone());
    let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    TemporalWorkerDeploymentStatus {
        observed_generation: None,
        target_version: Some(target_version(input, plan, e)),
        current_version,
        deprecated_versions: deprecated_versions(input, plan, e, executed),
        manager_identity: if routed && plan.claim_manager {
            me()
        } else {
            nonempty(&t.manager_identity)
        },
        last_modifier_identity: if routed {
            me()
        } else {
            nonempty(&t.last_modifier_identity)
        },
        version_count: i32::try_from(t.versions.len()).unwrap_or(i32::MAX),
        conditions: Vec::new(),
        rollout_control: None,
        version_conflict_token: None,
        observed_connection_ref: None,
        retired_versions: plan.retired.clone(),
    }
}

/// The target's entry: its routing, its ramp step while it ramps, its gate workflows until it
/// is Current.
fn target_version(input: &PlanInput, plan: &Plan, e: &Effective) -> TargetVersion {
    let target = input.desired.build_id.as_str();
    let target_status = e.status_of(input, target);
    let ramping = target_status == VersionStatus::Ramping;
    let step = plan
        .progress
        .step
        .filter(|_| ramping && matches!(plan.progress.phase, Phase::Ramping | Phase::Paused));
    let gate_workflows = if target_status == VersionStatus::Current {
        Vec::new()
    } else {
        gate_workflows(input)
    };
    TargetVersion {
        version: info(target, target_status, deployment_of(input, target)),
        ramp_percentage: ramping.then_some(e.percentage),
        ramping_since: e.ramping_since.filter(|_| ramping).map(Time),
        ramp_last_modified_at: e.ramp_changed_at.filter(|_| ramping).map(Time),
        current_step: step.map(|s| crate::api::twd::step_number(s.index)),
        step_started_at: step.and_then(|s| s.started_at).map(Time),
        next_step_at: step.and_then(|s| s.next_at).map(Time),
        gate_workflows,
        test_workflows: Vec::new(),
    }
}

/// Every other observed version (neither target nor Current), minus those this pass deleted,
/// in a stable order whatever order Kubernetes lists Deployments in: no status churn.
fn deprecated_versions(
    input: &PlanInput,
    plan: &Plan,
    e: &Effective,
    executed: bool,
) -> Vec<DeprecatedVersion> {
    let target = input.desired.build_id.as_str();
    let mut deprecated: Vec<DeprecatedVersion> = input
        .deployments
        .iter()
        .filter(|d| d.build_id != target && e.current.as_deref() != Some(d.build_id.as_str()))
        .filter(|d| !(executed && plan.delete.iter().any(|x| x.name == d.name)))
        .map(|d| deprecated_version(input, e, d))
        .collect();
    deprecated.sort_by(|a, b| {
        a.version
            .build_id
            .cmp(&b.version.build_id)
            .then_with(|| a.version.deployment_name.cmp(&b.version.deployment_name))
    });
    deprecated
}

/// One old version's status entry: its sunset schedule and what keeps it alive.
fn deprecated_version(
    input: &PlanInput,
    e: &Effective,
    d: &ObservedDeployment,
) -> DeprecatedVersion {
    let status = e.status_of(input, &d.build_id);
    let temporal = input.temporal.version(&d.build_id);
    let drained_since = temporal
        .filter(|_| status == VersionStatus::Drained)
        .and_then(|v| v.drainage_changed_at);
    let (scaledown_at, delete_at) = match drained_since {
        Some(since) => sunset_deadlines(
            &input.desired,
            since,
            d.scaled_down_at.filter(|_| d.replicas == Some(0)),
        ),
        None => (None, None),
    };
    let eligible = eligible_for_deletion(
        d,
        temporal
            .map(|v| v.status)
            .filter(|_| !e.demoted.contains(&d.build_id)),
    );
    let pinned = temporal.and_then(|v| v.pinned.as_ref());
    let end = temporal
        .and_then(|v| drain::pinned_end(&input.desired, v.status, v.drainage_changed_at, pinned));
    let waiting_for = temporal.and_then(|v| {
        drain::waiting_for(v.status, pinned, end, scaledown_at, delete_at, input.now)
    });
    DeprecatedVersion {
        version: info(&d.build_id, status, Some(d)),
        drained_since: drained_since.map(Time),
        scaledown_at: scaledown_at.map(Time),
        delete_at: delete_at.map(Time),
        eligible_for_deletion: eligible,
        draining_since: temporal
            .filter(|v| v.status == TemporalVersionStatus::Draining)
            .and_then(|v| v.drainage_changed_at)
            .map(Time),
        open_pinned_workflows: pinned.map(|p| i64::try_from(p.count).unwrap_or(i64::MAX)),
        oldest_pinned_workflows: pinned.map(pinned_sample).unwrap_or_default(),
        upgrade_signalled_at: temporal.and_then(|v| v.pinned_asked.signal).map(Time),
        pinned_cancel_requested_at: temporal.and_then(|v| v.pinned_asked.cancel).map(Time),
        pinned_terminate_requested_at: temporal.and_then(|v| v.pinned_asked.terminate).map(Time),
        pinned_workflows_end_at: end.map(|e| Time(e.at)),
        waiting_for,
    }
}

fn pinned_sample(p: &PinnedView) -> Vec<PinnedWorkflow> {
    p.oldest
        .iter()
        .map(|w| PinnedWorkflow {
            workflow_type: w.workflow_type.clone(),
            workflow_id: w.workflow_id.clone(),
            start_time: w.start_time.map(Time),
        })
        .collect()
}
