//! Pure conversions from Temporal protos to the plain observed-state types in [`super::state`].
//! Kept free of I/O so every rule (status derivation, empty ramps, timestamps) is unit-tested.

use jiff::Timestamp;
use temporalio_common::protos::temporal::api::deployment::v1::{
    WorkerDeploymentVersion, worker_deployment_info,
};
use temporalio_common::protos::temporal::api::enums::v1::{
    RoutingConfigUpdateState, TaskQueueType, VersionDrainageStatus, WorkerDeploymentVersionStatus,
    WorkerVersioningMode, WorkflowExecutionStatus,
};
use temporalio_common::protos::temporal::api::taskqueue::v1::PollerInfo;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    DescribeWorkerDeploymentResponse, DescribeWorkerDeploymentVersionResponse,
};

use super::state::{
    METADATA_INSTALL_ID, RoutingState, TemporalVersionStatus, VersionDetail, VersionState,
    WorkerDeploymentState,
};
use crate::api::twd::GateWorkflowStatus;

/// Proto timestamp → `jiff`. Unset, epoch-or-earlier (Go's zero `time.Time` marshals to year 1)
/// and out-of-range values all mean "never".
pub fn timestamp(ts: Option<&prost_wkt_types::Timestamp>) -> Option<Timestamp> {
    let ts = ts?;
    if ts.seconds <= 0 {
        return None;
    }
    Timestamp::new(ts.seconds, ts.nanos).ok()
}

fn build_id_of(v: Option<&WorkerDeploymentVersion>) -> Option<String> {
    v.map(|v| v.build_id.clone()).filter(|b| !b.is_empty())
}

/// `DescribeWorkerDeployment` response → observed state. Only structured fields are read; the
/// deprecated string fields (`current_version = "__unversioned__"`, …) are ignored. A version's
/// status is the server's own (`summary.status`): it knows a superseded version is DRAINING
/// before `drainage_info` is filled in, and second-guessing it once scaled such a version to 0
/// as if it were Inactive. Only servers that do not report a status (UNSPECIFIED) get a status
/// derived from routing (current/ramping) and drainage info.
pub fn deployment_state(resp: &DescribeWorkerDeploymentResponse) -> WorkerDeploymentState {
    let mut state = WorkerDeploymentState {
        exists: true,
        conflict_token: resp.conflict_token.clone(),
        ..Default::default()
    };
    let Some(info) = &resp.worker_deployment_info else {
        return state;
    };
    state.manager_identity = info.manager_identity.clone();
    state.last_modifier_identity = info.last_modifier_identity.clone();
    if let Some(rc) = &info.routing_config {
        let ramping = build_id_of(rc.ramping_deployment_version.as_ref());
        state.routing = RoutingState {
            current_build_id: build_id_of(rc.current_deployment_version.as_ref()),
            current_changed_at: timestamp(rc.current_version_changed_time.as_ref()),
            // Ramp details only mean something while a version is ramping.
            ramp_percentage: if ramping.is_some() {
                rc.ramping_version_percentage
            } else {
                0.0
            },
            ramping_changed_at: ramping
                .as_ref()
                .and(timestamp(rc.ramping_version_changed_time.as_ref())),
            ramp_percentage_changed_at: ramping.as_ref().and(timestamp(
                rc.ramping_version_percentage_changed_time.as_ref(),
            )),
            ramping_build_id: ramping,
            update_in_progress: false,
        };
    }
    state.routing.update_in_progress =
        info.routing_config_update_state == RoutingConfigUpdateState::InProgress as i32;
    state.versions = info
        .version_summaries
        .iter()
        .filter_map(|s| version_state(s, &state.routing))
        .collect();
    state
}

fn version_state(
    s: &worker_deployment_info::WorkerDeploymentVersionSummary,
    routing: &RoutingState,
) -> Option<VersionState> {
    let build_id = build_id_of(s.deployment_version.as_ref())?;
    let status = match WorkerDeploymentVersionStatus::try_from(s.status) {
        // Created (made through the API, no poller seen yet) has never been promoted either.
        Ok(WorkerDeploymentVersionStatus::Inactive | WorkerDeploymentVersionStatus::Created) => {
            TemporalVersionStatus::Inactive
        }
        Ok(WorkerDeploymentVersionStatus::Current) => TemporalVersionStatus::Current,
        Ok(WorkerDeploymentVersionStatus::Ramping) => TemporalVersionStatus::Ramping,
        Ok(WorkerDeploymentVersionStatus::Draining) => TemporalVersionStatus::Draining,
        Ok(WorkerDeploymentVersionStatus::Drained) => TemporalVersionStatus::Drained,
        // Older servers, and values newer than our protos.
        Ok(WorkerDeploymentVersionStatus::Unspecified) | Err(_) => {
            derived_status(s, &build_id, routing)
        }
    };
    Some(VersionState {
        build_id,
        status,
        drainage_changed_at: s
            .drainage_info
            .as_ref()
            .and_then(|d| timestamp(d.last_changed_time.as_ref())),
        last_current_at: timestamp(s.last_current_time.as_ref()),
        first_activation_at: timestamp(s.first_activation_time.as_ref()),
        open_pinned_workflows: None,
        pinned: None,
        pinned_asked: Default::default(),
    })
}

/// The status of a version on a server that does not report one: routing first, then drainage.
fn derived_status(
    s: &worker_deployment_info::WorkerDeploymentVersionSummary,
    build_id: &str,
    routing: &RoutingState,
) -> TemporalVersionStatus {
    // Prefer the drainage message; older servers only fill the flat enum.
    let drainage = s
        .drainage_info
        .as_ref()
        .map(|d| d.status)
        .unwrap_or(s.drainage_status);
    if routing.current_build_id.as_deref() == Some(build_id) {
        TemporalVersionStatus::Current
    } else if routing.ramping_build_id.as_deref() == Some(build_id) {
        TemporalVersionStatus::Ramping
    } else if drainage == VersionDrainageStatus::Draining as i32 {
        TemporalVersionStatus::Draining
    } else if drainage == VersionDrainageStatus::Drained as i32 {
        TemporalVersionStatus::Drained
    } else {
        TemporalVersionStatus::Inactive
    }
}

/// `DescribeWorkerDeploymentVersion` response → task queues by type. `version_task_queues` is
/// the current field; `task_queue_infos` inside the info message is the older location.
pub fn version_detail(resp: &DescribeWorkerDeploymentVersionResponse) -> VersionDetail {
    let mut queues: Vec<(String, i32)> = resp
        .version_task_queues
        .iter()
        .map(|q| (q.name.clone(), q.r#type))
        .collect();
    if queues.is_empty()
        && let Some(info) = &resp.worker_deployment_version_info
    {
        queues = info
            .task_queue_infos
            .iter()
            .map(|q| (q.name.clone(), q.r#type))
            .collect();
    }
    let mut detail = VersionDetail {
        install_id: resp
            .worker_deployment_version_info
            .as_ref()
            .and_then(|i| i.metadata.as_ref())
            .and_then(|m| m.entries.get(METADATA_INSTALL_ID))
            .and_then(|p| serde_json::from_slice::<String>(&p.data).ok())
            .filter(|s| !s.is_empty()),
        ..Default::default()
    };
    for (name, kind) in queues {
        let list = if kind == TaskQueueType::Workflow as i32 {
            &mut detail.workflow_task_queues
        } else if kind == TaskQueueType::Activity as i32 {
            &mut detail.activity_task_queues
        } else {
            continue;
        };
        if !name.is_empty() && !list.contains(&name) {
            list.push(name);
        }
    }
    detail
}

/// Workflow execution status → gate outcome. Anything not closed counts as still running.
pub fn gate_status(status: i32) -> GateWorkflowStatus {
    match WorkflowExecutionStatus::try_from(status) {
        Ok(WorkflowExecutionStatus::Completed) => GateWorkflowStatus::Completed,
        Ok(WorkflowExecutionStatus::Failed) => GateWorkflowStatus::Failed,
        Ok(WorkflowExecutionStatus::Canceled) => GateWorkflowStatus::Canceled,
        Ok(WorkflowExecutionStatus::Terminated) => GateWorkflowStatus::Terminated,
        Ok(WorkflowExecutionStatus::TimedOut) => GateWorkflowStatus::TimedOut,
        // Running, ContinuedAsNew, Paused, Unspecified and values newer than our protos.
        _ => GateWorkflowStatus::Running,
    }
}

/// A poller that does not use worker versioning (the migration-from-unversioned case).
pub fn is_unversioned_poller(p: &PollerInfo) -> bool {
    match &p.deployment_options {
        None => true,
        Some(o) => {
            o.worker_versioning_mode == WorkerVersioningMode::Unversioned as i32
                || o.worker_versioning_mode == WorkerVersioningMode::Unspecified as i32
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(deprecated)]

    use temporalio_common::protos::temporal::api::deployment::v1::{
        RoutingConfig, VersionDrainageInfo, WorkerDeploymentInfo, WorkerDeploymentOptions, WorkerDeploymentVersionInfo,
        worker_deployment_version_info::VersionTaskQueueInfo,
    };
    use temporalio_common::protos::temporal::api::workflowservice::v1::describe_worker_deployment_version_response::VersionTaskQueue;

    use super::*;

    const DEPLOYMENT: &str = "ns/app";

    fn ts(seconds: i64, nanos: i32) -> Option<prost_wkt_types::Timestamp> {
        Some(prost_wkt_types::Timestamp { seconds, nanos })
    }

    fn dv(build: &str) -> Option<WorkerDeploymentVersion> {
        Some(WorkerDeploymentVersion {
            build_id: build.into(),
            deployment_name: DEPLOYMENT.into(),
        })
    }

    fn summary(
        build: &str,
        drainage: Option<VersionDrainageStatus>,
    ) -> worker_deployment_info::WorkerDeploymentVersionSummary {
        worker_deployment_info::WorkerDeploymentVersionSummary {
            version: format!("{DEPLOYMENT}.{build}"),
            // An older server that reports no status of its own: it is derived.
            status: WorkerDeploymentVersionStatus::Unspecified as i32,
            deployment_version: dv(build),
            drainage_info: drainage.map(|d| VersionDrainageInfo {
                status: d as i32,
                last_changed_time: ts(1_700_000_100, 5),
                last_checked_time: ts(1_700_000_200, 0),
            }),
            last_current_time: ts(1_700_000_050, 0),
            first_activation_time: ts(1_700_000_010, 0),
            ..Default::default()
        }
    }

    /// Each version's build ID and status, in the order listed.
    fn statuses(state: &WorkerDeploymentState) -> Vec<(&str, TemporalVersionStatus)> {
        state
            .versions
            .iter()
            .map(|v| (v.build_id.as_str(), v.status))
            .collect()
    }

    fn response(
        routing: Option<RoutingConfig>,
        summaries: Vec<worker_deployment_info::WorkerDeploymentVersionSummary>,
    ) -> DescribeWorkerDeploymentResponse {
        DescribeWorkerDeploymentResponse {
            conflict_token: vec![1, 2, 3],
            worker_deployment_info: Some(WorkerDeploymentInfo {
                name: DEPLOYMENT.into(),
                version_summaries: summaries,
                routing_config: routing,
                manager_identity: "ctrl".into(),
                last_modifier_identity: "someone".into(),
                routing_config_update_state: RoutingConfigUpdateState::Completed as i32,
                ..Default::default()
            }),
        }
    }

    #[test]
    fn timestamps_convert_and_zero_means_never() {
        assert_eq!(
            timestamp(ts(1_700_000_000, 250_000_000).as_ref()),
            Some(Timestamp::new(1_700_000_000, 250_000_000).unwrap())
        );
        assert_eq!(timestamp(None), None);
        assert_eq!(timestamp(ts(0, 0).as_ref()), None);
        assert_eq!(timestamp(ts(-62_135_596_800, 0).as_ref()), None);
        // Out-of-range nanos are rejected instead of panicking.
        assert_eq!(timestamp(ts(1_700_000_000, 2_000_000_000).as_ref()), None);
    }

    #[test]
    fn without_a_server_status_it_is_derived_from_routing_then_drainage() {
        let routing = RoutingConfig {
            current_deployment_version: dv("v2"),
            current_version: format!("{DEPLOYMENT}.v2"),
            ramping_deployment_version: dv("v3"),
            ramping_version: format!("{DEPLOYMENT}.v3"),
            ramping_version_percentage: 25.0,
            current_version_changed_time: ts(1_700_000_300, 0),
            ramping_version_changed_time: ts(1_700_000_400, 0),
            ramping_version_percentage_changed_time: ts(1_700_000_500, 0),
            revision_number: 7,
        };
        let summaries = vec![
            summary("v1", Some(VersionDrainageStatus::Drained)),
            // Current wins over a (stale) drainage status.
            summary("v2", Some(VersionDrainageStatus::Draining)),
            summary("v3", None),
            summary("v4", Some(VersionDrainageStatus::Draining)),
            summary("v5", Some(VersionDrainageStatus::Unspecified)),
        ];
        let state = deployment_state(&response(Some(routing), summaries));
        assert!(state.exists);
        assert_eq!(state.conflict_token, vec![1, 2, 3]);
        assert_eq!(state.manager_identity, "ctrl");
        assert_eq!(state.last_modifier_identity, "someone");
        assert_eq!(
            statuses(&state),
            vec![
                ("v1", TemporalVersionStatus::Drained),
                ("v2", TemporalVersionStatus::Current),
                ("v3", TemporalVersionStatus::Ramping),
                ("v4", TemporalVersionStatus::Draining),
                ("v5", TemporalVersionStatus::Inactive),
            ]
        );
        let v1 = state.version("v1").unwrap();
        assert_eq!(
            v1.drainage_changed_at,
            Some(Timestamp::new(1_700_000_100, 5).unwrap())
        );
        assert_eq!(
            v1.last_current_at,
            Some(Timestamp::new(1_700_000_050, 0).unwrap())
        );
        assert_eq!(
            v1.first_activation_at,
            Some(Timestamp::new(1_700_000_010, 0).unwrap())
        );
        assert_eq!(state.version("v3").unwrap().drainage_changed_at, None);

        let r = &state.routing;
        assert_eq!(r.current_build_id.as_deref(), Some("v2"));
        assert_eq!(r.ramping_build_id.as_deref(), Some("v3"));
        assert_eq!(r.ramp_percentage, 25.0);
        assert_eq!(
            r.current_changed_at,
            Some(Timestamp::new(1_700_000_300, 0).unwrap())
        );
        assert_eq!(
            r.ramping_changed_at,
            Some(Timestamp::new(1_700_000_400, 0).unwrap())
        );
        assert_eq!(
            r.ramp_percentage_changed_at,
            Some(Timestamp::new(1_700_000_500, 0).unwrap())
        );
        assert!(!r.update_in_progress);
    }

    #[test]
    fn the_servers_own_version_status_is_trusted() {
        // Routing says v2 is current; v1 was just superseded. The server already reports v1
        // DRAINING, but its drainage info is not filled in yet (it starts UNSPECIFIED).
        let routing = RoutingConfig {
            current_deployment_version: dv("v2"),
            ..Default::default()
        };
        let with_status = |build: &str, status: WorkerDeploymentVersionStatus| {
            let mut s = summary(build, None);
            s.status = status as i32;
            s
        };
        let summaries = vec![
            with_status("v1", WorkerDeploymentVersionStatus::Draining),
            with_status("v2", WorkerDeploymentVersionStatus::Current),
            // Routing lags behind: the server says it is ramping.
            with_status("v3", WorkerDeploymentVersionStatus::Ramping),
            // Stale drainage info must not turn a Drained version back into Draining.
            {
                let mut s = summary("v4", Some(VersionDrainageStatus::Draining));
                s.status = WorkerDeploymentVersionStatus::Drained as i32;
                s
            },
            with_status("v5", WorkerDeploymentVersionStatus::Inactive),
        ];
        let state = deployment_state(&response(Some(routing), summaries));
        assert_eq!(
            statuses(&state),
            vec![
                ("v1", TemporalVersionStatus::Draining),
                ("v2", TemporalVersionStatus::Current),
                ("v3", TemporalVersionStatus::Ramping),
                ("v4", TemporalVersionStatus::Drained),
                ("v5", TemporalVersionStatus::Inactive),
            ]
        );
    }

    #[test]
    fn flat_drainage_enum_is_used_when_the_message_is_absent() {
        let mut s = summary("old", None);
        s.drainage_status = VersionDrainageStatus::Drained as i32;
        let state = deployment_state(&response(None, vec![s]));
        assert_eq!(
            state.version("old").unwrap().status,
            TemporalVersionStatus::Drained
        );
    }

    #[test]
    fn empty_ramping_and_legacy_strings_are_ignored() {
        // What the server returns with nothing current: legacy "__unversioned__", empty ramp string,
        // leftover timestamps and percentage that must not leak into the state.
        let routing = RoutingConfig {
            current_deployment_version: None,
            current_version: "__unversioned__".into(),
            ramping_deployment_version: Some(WorkerDeploymentVersion {
                build_id: String::new(),
                deployment_name: DEPLOYMENT.into(),
            }),
            ramping_version: String::new(),
            ramping_version_percentage: 40.0,
            ramping_version_changed_time: ts(1_700_000_400, 0),
            ramping_version_percentage_changed_time: ts(1_700_000_500, 0),
            ..Default::default()
        };
        let mut resp = response(Some(routing), vec![summary("v1", None)]);
        if let Some(info) = resp.worker_deployment_info.as_mut() {
            info.routing_config_update_state = RoutingConfigUpdateState::InProgress as i32;
        }
        let state = deployment_state(&resp);
        assert_eq!(state.routing.current_build_id, None);
        assert_eq!(state.routing.ramping_build_id, None);
        assert_eq!(state.routing.ramp_percentage, 0.0);
        assert_eq!(state.routing.ramping_changed_at, None);
        assert_eq!(state.routing.ramp_percentage_changed_at, None);
        assert!(state.routing.update_in_progress);
        assert_eq!(
            state.version("v1").unwrap().status,
            TemporalVersionStatus::Inactive
        );
    }

    #[test]
    fn missing_info_and_versionless_summaries() {
        let bare = DescribeWorkerDeploymentResponse {
            conflict_token: vec![9],
            worker_deployment_info: None,
        };
        let state = deployment_state(&bare);
        assert!(state.exists);
        assert_eq!(state.conflict_token, vec![9]);
        assert!(state.versions.is_empty());

        let mut nameless = summary("x", None);
        nameless.deployment_version = None;
        let state = deployment_state(&response(None, vec![nameless, summary("v1", None)]));
        assert_eq!(state.versions.len(), 1);
        assert_eq!(state.routing, RoutingState::default());
    }

    #[test]
    fn version_detail_splits_queues_by_type() {
        let resp = DescribeWorkerDeploymentVersionResponse {
            worker_deployment_version_info: None,
            version_task_queues: vec![
                VersionTaskQueue {
                    name: "orders".into(),
                    r#type: TaskQueueType::Workflow as i32,
                    ..Default::default()
                },
                VersionTaskQueue {
                    name: "orders".into(),
                    r#type: TaskQueueType::Activity as i32,
                    ..Default::default()
                },
                VersionTaskQueue {
                    name: "payments".into(),
                    r#type: TaskQueueType::Workflow as i32,
                    ..Default::default()
                },
                VersionTaskQueue {
                    name: "nexus-q".into(),
                    r#type: TaskQueueType::Nexus as i32,
                    ..Default::default()
                },
                VersionTaskQueue {
                    name: "orders".into(),
                    r#type: TaskQueueType::Workflow as i32,
                    ..Default::default()
                },
            ],
        };
        let d = version_detail(&resp);
        assert_eq!(
            d.workflow_task_queues,
            vec!["orders".to_string(), "payments".to_string()]
        );
        assert_eq!(d.activity_task_queues, vec!["orders".to_string()]);
    }

    #[test]
    fn version_detail_falls_back_to_info_queues() {
        let resp = DescribeWorkerDeploymentVersionResponse {
            worker_deployment_version_info: Some(WorkerDeploymentVersionInfo {
                task_queue_infos: vec![VersionTaskQueueInfo {
                    name: "legacy".into(),
                    r#type: TaskQueueType::Workflow as i32,
                }],
                ..Default::default()
            }),
            version_task_queues: vec![],
        };
        assert_eq!(
            version_detail(&resp).workflow_task_queues,
            vec!["legacy".to_string()]
        );
        assert_eq!(
            version_detail(&DescribeWorkerDeploymentVersionResponse::default()),
            VersionDetail::default()
        );
    }

    #[test]
    fn gate_status_mapping() {
        use WorkflowExecutionStatus as S;
        assert_eq!(gate_status(S::Running as i32), GateWorkflowStatus::Running);
        assert_eq!(
            gate_status(S::ContinuedAsNew as i32),
            GateWorkflowStatus::Running
        );
        assert_eq!(
            gate_status(S::Unspecified as i32),
            GateWorkflowStatus::Running
        );
        assert_eq!(gate_status(S::Paused as i32), GateWorkflowStatus::Running);
        assert_eq!(gate_status(999), GateWorkflowStatus::Running);
        assert_eq!(
            gate_status(S::Completed as i32),
            GateWorkflowStatus::Completed
        );
        assert_eq!(gate_status(S::Failed as i32), GateWorkflowStatus::Failed);
        assert_eq!(
            gate_status(S::Canceled as i32),
            GateWorkflowStatus::Canceled
        );
        assert_eq!(
            gate_status(S::Terminated as i32),
            GateWorkflowStatus::Terminated
        );
        assert_eq!(
            gate_status(S::TimedOut as i32),
            GateWorkflowStatus::TimedOut
        );
    }

    #[test]
    fn unversioned_poller_detection() {
        let poller = |mode: Option<WorkerVersioningMode>| PollerInfo {
            identity: "w".into(),
            deployment_options: mode.map(|m| WorkerDeploymentOptions {
                deployment_name: DEPLOYMENT.into(),
                build_id: "v1".into(),
                worker_versioning_mode: m as i32,
            }),
            ..Default::default()
        };
        assert!(is_unversioned_poller(&poller(None)));
        assert!(is_unversioned_poller(&poller(Some(
            WorkerVersioningMode::Unversioned
        ))));
        assert!(is_unversioned_poller(&poller(Some(
            WorkerVersioningMode::Unspecified
        ))));
        assert!(!is_unversioned_poller(&poller(Some(
            WorkerVersioningMode::Versioned
        ))));
    }

    #[test]
    fn version_detail_reads_the_recorded_install() {
        use temporalio_common::protos::temporal::api::common::v1::Payload;
        use temporalio_common::protos::temporal::api::deployment::v1::{
            VersionMetadata, WorkerDeploymentVersionInfo,
        };
        let with = |data: &[u8]| DescribeWorkerDeploymentVersionResponse {
            worker_deployment_version_info: Some(WorkerDeploymentVersionInfo {
                metadata: Some(VersionMetadata {
                    entries: std::collections::HashMap::from([(
                        METADATA_INSTALL_ID.to_string(),
                        Payload {
                            data: data.to_vec(),
                            ..Default::default()
                        },
                    )]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            version_detail(&with(b"\"install-b\""))
                .install_id
                .as_deref(),
            Some("install-b")
        );
        assert_eq!(version_detail(&with(b"\"\"")).install_id, None);
        assert_eq!(version_detail(&with(b"not json")).install_id, None);
        assert_eq!(
            version_detail(&DescribeWorkerDeploymentVersionResponse::default()).install_id,
            None
        );
    }
}
