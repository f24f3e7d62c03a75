//! Every Temporal call the controller makes, as raw `WorkflowService` RPCs on a pooled
//! [`Connection`] (the SDK's retry layer included). Each call goes through [`TemporalClient::rpc`],
//! which applies a deadline, maps errors and reports to the metrics observer.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};
use temporalio_client::Connection;
use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::{Request, Response, Status};
use temporalio_common::protos::temporal::api::common::v1::{
    Payload, Payloads, WorkflowExecution, WorkflowType,
};
use temporalio_common::protos::temporal::api::deployment::v1::WorkerDeploymentVersion;
use temporalio_common::protos::temporal::api::enums::v1::{
    TaskQueueType, WorkflowIdConflictPolicy, WorkflowIdReusePolicy,
};
use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
use temporalio_common::protos::temporal::api::workflow::v1::{
    VersioningOverride, versioning_override,
};
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    CountWorkflowExecutionsRequest, DeleteWorkerDeploymentRequest,
    DeleteWorkerDeploymentVersionRequest, DescribeTaskQueueRequest,
    DescribeWorkerDeploymentRequest, DescribeWorkerDeploymentVersionRequest,
    DescribeWorkflowExecutionRequest, SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentManagerRequest, SetWorkerDeploymentRampingVersionRequest,
    StartWorkflowExecutionRequest, UpdateWorkerDeploymentVersionMetadataRequest,
    set_worker_deployment_manager_request,
};

use super::budget::{Class, NamespaceBudget};
use super::connections::{EvictHandle, RpcObserver};
use super::convert;
use super::error::{TemporalError, code_label};
use super::state::{GateObservation, VersionDetail, WorkerDeploymentState};

/// Upper bound on one RPC including the SDK's retries. Temporal Server 1.32 stalls a
/// DescribeWorkerDeployment for about 1–2 s right after a Set* write; that fits comfortably.
const RPC_TIMEOUT: Duration = Duration::from_secs(20);
/// Upper bound on one write (routing, manager claim, metadata, gate start, deletion). Only the
/// Lease holder writes, and it checks that before each group of writes; a write that outlasted
/// the lease could land after another replica took over. A holder renews the Lease when
/// `run::LEASE_GRACE_SECS` of it remain, so a write started while it held the Lease ends
/// (or is abandoned) before that Lease expires, even if no renewal succeeds meanwhile;
/// `run::tests` checks the margin. Reads keep [`RPC_TIMEOUT`].
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(8);
/// Gate workflows that hang must not block a rollout forever.
const GATE_EXECUTION_TIMEOUT: Duration = Duration::from_secs(3600);
/// The legacy "no version" string older servers expect alongside an empty build ID.
const UNVERSIONED: &str = "__unversioned__";
pub const METADATA_CONTROLLER: &str = "temporal.io/controller";
pub const METADATA_CONTROLLER_VERSION: &str = "temporal.io/controller-version";
pub use super::state::METADATA_INSTALL_ID;

/// A Temporal namespace seen through one pooled connection, acting as one identity.
#[derive(Clone)]
pub struct TemporalClient {
    conn: Connection,
    namespace: String,
    identity: String,
    /// Which install of the controller this is (empty: unknown, nothing recorded or checked).
    install_id: String,
    observer: Option<RpcObserver>,
    evict: Option<EvictHandle>,
    /// Shared by every client of this Temporal namespace; `None` in tests that want none.
    budget: Option<Arc<NamespaceBudget>>,
}

impl fmt::Debug for TemporalClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TemporalClient")
            .field("namespace", &self.namespace)
            .field("identity", &self.identity)
            .finish()
    }
}

pub(super) fn version(deployment: &str, build_id: &str) -> Option<WorkerDeploymentVersion> {
    Some(WorkerDeploymentVersion {
        deployment_name: deployment.to_string(),
        build_id: build_id.to_string(),
    })
}

/// `<deployment>.<build>` (or `__unversioned__`), what servers before structured versions read.
pub(super) fn legacy_version(deployment: &str, build_id: &str) -> String {
    if build_id.is_empty() {
        UNVERSIONED.to_string()
    } else {
        format!("{deployment}.{build_id}")
    }
}

/// The visibility query for running workflows on `<deployment>:<build>` (the value format of
/// the `TemporalWorkerDeploymentVersion` search attribute). `None` when a name holds a quote or
/// backslash, which no valid deployment name or build ID does.
pub(super) fn open_workflows_query(
    deployment: &str,
    build_id: &str,
    pinned_only: bool,
) -> Option<String> {
    let unsafe_char = |s: &str| s.contains(['\'', '"', '\\']);
    if build_id.is_empty() || unsafe_char(deployment) || unsafe_char(build_id) {
        return None;
    }
    let mut q = format!(
        "TemporalWorkerDeploymentVersion = '{deployment}:{build_id}' AND ExecutionStatus = 'Running'"
    );
    if pinned_only {
        q.push_str(" AND TemporalWorkflowVersioningBehavior = 'Pinned'");
    }
    Some(q)
}

/// The version metadata a routing write records; no install entry while the install is
/// unknown.
fn metadata_entries(
    identity: &str,
    controller_version: &str,
    install_id: &str,
) -> HashMap<String, Payload> {
    let mut entries = HashMap::from([
        (
            METADATA_CONTROLLER.to_string(),
            json_payload(&serde_json::Value::from(identity)),
        ),
        (
            METADATA_CONTROLLER_VERSION.to_string(),
            json_payload(&serde_json::Value::from(controller_version)),
        ),
    ]);
    if !install_id.is_empty() {
        entries.insert(
            METADATA_INSTALL_ID.to_string(),
            json_payload(&serde_json::Value::from(install_id)),
        );
    }
    entries
}

/// A JSON value as one `json/plain` payload, the encoding every SDK's default converter reads.
pub(super) fn json_payload(value: &serde_json::Value) -> Payload {
    Payload {
        metadata: HashMap::from([("encoding".to_string(), b"json/plain".to_vec())]),
        data: serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec()),
        ..Default::default()
    }
}

impl TemporalClient {
    pub(crate) fn new(
        conn: Connection,
        namespace: &str,
        identity: &str,
        observer: Option<RpcObserver>,
        evict: Option<EvictHandle>,
        budget: Option<Arc<NamespaceBudget>>,
    ) -> Self {
        TemporalClient {
            conn,
            namespace: namespace.to_string(),
            identity: identity.to_string(),
            install_id: String::new(),
            observer,
            evict,
            budget,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// This client, recording `install_id` with its routing writes (version metadata).
    pub fn with_install_id(mut self, install_id: &str) -> Self {
        self.install_id = install_id.to_string();
        self
    }

    pub fn install_id(&self) -> &str {
        &self.install_id
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Runs one RPC on a clone of the connection: a token from the namespace's budget (and
    /// from `deployment`'s, when the call is about one worker deployment), a deadline, error
    /// mapping, metrics, and eviction of the pooled connection when the server rejects our
    /// credentials.
    pub(super) async fn rpc<T, F, Fut>(
        &self,
        deployment: Option<&str>,
        method: &'static str,
        call: F,
    ) -> Result<T, TemporalError>
    where
        F: FnOnce(Connection) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        self.rpc_within(RPC_TIMEOUT, deployment, method, call).await
    }

    /// [`Self::rpc`] for a write, bounded by [`WRITE_TIMEOUT`] so it cannot outlast the lease.
    pub(super) async fn write<T, F, Fut>(
        &self,
        deployment: Option<&str>,
        method: &'static str,
        call: F,
    ) -> Result<T, TemporalError>
    where
        F: FnOnce(Connection) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        self.rpc_within(WRITE_TIMEOUT, deployment, method, call)
            .await
    }

    async fn rpc_within<T, F, Fut>(
        &self,
        timeout: Duration,
        deployment: Option<&str>,
        method: &'static str,
        call: F,
    ) -> Result<T, TemporalError>
    where
        F: FnOnce(Connection) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        if let Some(budget) = &self.budget {
            // The wait is not part of the call's deadline: a throttled call is slow, not failed.
            budget.admit(Class::of(method), deployment).await;
        }
        let started = Instant::now();
        let result = match tokio::time::timeout(timeout, call(self.conn.clone())).await {
            Ok(Ok(resp)) => Ok(resp.into_inner()),
            Ok(Err(status)) => Err(TemporalError::from_status(method, &status)),
            Err(_) => Err(TemporalError::Timeout { method, timeout }),
        };
        if let Some(observe) = &self.observer {
            let label = match &result {
                Ok(_) => code_label(temporalio_client::tonic::Code::Ok),
                Err(e) => e.code_label(),
            };
            observe(method, label, started.elapsed());
        }
        if let Err(e) = &result
            && e.is_auth()
            && let Some(evict) = &self.evict
        {
            evict.evict();
        }
        result
    }

    /// Routing, versions and the conflict token. A deployment no worker has polled yet is
    /// NotFound in Temporal and comes back as `WorkerDeploymentState::default()`.
    pub async fn describe_deployment(
        &self,
        deployment: &str,
    ) -> Result<WorkerDeploymentState, TemporalError> {
        let req = DescribeWorkerDeploymentRequest {
            namespace: self.namespace.clone(),
            deployment_name: deployment.to_string(),
        };
        match self
            .rpc(
                Some(deployment),
                "DescribeWorkerDeployment",
                |mut c| async move { c.describe_worker_deployment(Request::new(req)).await },
            )
            .await
        {
            Ok(resp) => Ok(convert::deployment_state(&resp)),
            Err(e) if e.is_not_found() => Ok(WorkerDeploymentState::default()),
            Err(e) => Err(e),
        }
    }

    /// Task queues of one version; `None` when Temporal does not (yet) know it.
    pub async fn describe_version(
        &self,
        deployment: &str,
        build_id: &str,
    ) -> Result<Option<VersionDetail>, TemporalError> {
        const METHOD: &str = "DescribeWorkerDeploymentVersion";
        if build_id.is_empty() {
            return Err(TemporalError::InvalidRequest {
                method: METHOD,
                message: "empty build ID".into(),
            });
        }
        #[allow(deprecated)]
        let req = DescribeWorkerDeploymentVersionRequest {
            namespace: self.namespace.clone(),
            version: legacy_version(deployment, build_id),
            deployment_version: version(deployment, build_id),
            report_task_queue_stats: false,
        };
        match self
            .rpc(Some(deployment), METHOD, |mut c| async move {
                c.describe_worker_deployment_version(Request::new(req))
                    .await
            })
            .await
        {
            Ok(resp) => Ok(Some(convert::version_detail(&resp))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn set_current_inner(
        &self,
        deployment: &str,
        build_id: &str,
        token: &[u8],
        ignore_missing_task_queues: bool,
    ) -> Result<Vec<u8>, TemporalError> {
        #[allow(deprecated)]
        let req = SetWorkerDeploymentCurrentVersionRequest {
            namespace: self.namespace.clone(),
            deployment_name: deployment.to_string(),
            version: legacy_version(deployment, build_id),
            build_id: build_id.to_string(),
            conflict_token: token.to_vec(),
            identity: self.identity.clone(),
            ignore_missing_task_queues,
            // Liveness is judged from pod readiness; a build that never polled must stay refused.
            allow_no_pollers: false,
        };
        let resp = self
            .write(
                Some(deployment),
                "SetWorkerDeploymentCurrentVersion",
                |mut c| async move {
                    c.set_worker_deployment_current_version(Request::new(req))
                        .await
                },
            )
            .await?;
        Ok(resp.conflict_token)
    }

    /// Makes `build_id` current (this also ends any ramp). Returns the new conflict token, which
    /// is what a following Describe would return, so calls can be chained without re-reading.
    pub async fn set_current(
        &self,
        deployment: &str,
        build_id: &str,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        if build_id.is_empty() {
            return Err(TemporalError::InvalidRequest {
                method: "SetWorkerDeploymentCurrentVersion",
                message: "empty build ID (unversioned is only set during cleanup)".into(),
            });
        }
        self.set_current_inner(deployment, build_id, token, false)
            .await
    }

    async fn set_ramping_inner(
        &self,
        deployment: &str,
        build_id: &str,
        percentage: f32,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        #[allow(deprecated)]
        let req = SetWorkerDeploymentRampingVersionRequest {
            namespace: self.namespace.clone(),
            deployment_name: deployment.to_string(),
            version: if build_id.is_empty() {
                String::new()
            } else {
                legacy_version(deployment, build_id)
            },
            build_id: build_id.to_string(),
            percentage,
            conflict_token: token.to_vec(),
            identity: self.identity.clone(),
            ignore_missing_task_queues: false,
            allow_no_pollers: false,
        };
        let resp = self
            .write(
                Some(deployment),
                "SetWorkerDeploymentRampingVersion",
                |mut c| async move {
                    c.set_worker_deployment_ramping_version(Request::new(req))
                        .await
                },
            )
            .await?;
        Ok(resp.conflict_token)
    }

    /// Ramps `percentage` (0–100) of new workflows to `build_id`.
    pub async fn set_ramping(
        &self,
        deployment: &str,
        build_id: &str,
        percentage: f32,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        const METHOD: &str = "SetWorkerDeploymentRampingVersion";
        if build_id.is_empty() {
            return Err(TemporalError::InvalidRequest {
                method: METHOD,
                message: "empty build ID (use clear_ramp)".into(),
            });
        }
        if !(0.0..=100.0).contains(&percentage) {
            return Err(TemporalError::InvalidRequest {
                method: METHOD,
                message: format!("percentage {percentage} is outside 0–100"),
            });
        }
        self.set_ramping_inner(deployment, build_id, percentage, token)
            .await
    }

    /// Removes the ramping version (empty build ID, 0 %).
    pub async fn clear_ramp(
        &self,
        deployment: &str,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        self.set_ramping_inner(deployment, "", 0.0, token).await
    }

    /// Makes this client's identity the deployment's manager identity (the only one allowed to
    /// change routing). Returns the new conflict token.
    pub async fn claim_manager(
        &self,
        deployment: &str,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        let req = SetWorkerDeploymentManagerRequest {
            namespace: self.namespace.clone(),
            deployment_name: deployment.to_string(),
            conflict_token: token.to_vec(),
            identity: self.identity.clone(),
            new_manager_identity: Some(
                set_worker_deployment_manager_request::NewManagerIdentity::Self_(true),
            ),
        };
        let resp = self
            .write(
                Some(deployment),
                "SetWorkerDeploymentManager",
                |mut c| async move { c.set_worker_deployment_manager(Request::new(req)).await },
            )
            .await?;
        Ok(resp.conflict_token)
    }

    /// Records on the version which controller (identity, release and install) last routed
    /// to it.
    pub async fn update_version_metadata(
        &self,
        deployment: &str,
        build_id: &str,
        controller_version: &str,
    ) -> Result<(), TemporalError> {
        const METHOD: &str = "UpdateWorkerDeploymentVersionMetadata";
        if build_id.is_empty() {
            return Err(TemporalError::InvalidRequest {
                method: METHOD,
                message: "empty build ID".into(),
            });
        }
        #[allow(deprecated)]
        let req = UpdateWorkerDeploymentVersionMetadataRequest {
            namespace: self.namespace.clone(),
            version: legacy_version(deployment, build_id),
            deployment_version: version(deployment, build_id),
            upsert_entries: metadata_entries(&self.identity, controller_version, &self.install_id),
            remove_entries: Vec::new(),
            identity: self.identity.clone(),
        };
        self.write(Some(deployment), METHOD, |mut c| async move {
            c.update_worker_deployment_version_metadata(Request::new(req))
                .await
        })
        .await
        .map(|_| ())
    }

    /// `test-<deployment>:<build>-<task queue>`, the Go controller's gate workflow ID.
    pub fn gate_workflow_id(deployment: &str, build_id: &str, task_queue: &str) -> String {
        format!("test-{deployment}:{build_id}-{task_queue}")
    }

    /// Starts the gate workflow pinned to the version under test. A gate that already ran for
    /// this build (running or closed) is never started again; its run ID is returned instead.
    pub async fn start_gate(
        &self,
        deployment: &str,
        build_id: &str,
        task_queue: &str,
        workflow_type: &str,
        input: Option<&serde_json::Value>,
    ) -> Result<String, TemporalError> {
        let workflow_id = Self::gate_workflow_id(deployment, build_id, task_queue);
        self.start_gate_as(
            workflow_id,
            deployment,
            build_id,
            task_queue,
            workflow_type,
            input,
        )
        .await
    }

    /// [`Self::start_gate`] under a given workflow ID (step gates have their own).
    async fn start_gate_as(
        &self,
        workflow_id: String,
        deployment: &str,
        build_id: &str,
        task_queue: &str,
        workflow_type: &str,
        input: Option<&serde_json::Value>,
    ) -> Result<String, TemporalError> {
        // Deterministic, so a retried start of the same gate is deduplicated by the server.
        let request_id = hex::encode(
            &Sha256::digest(format!("{}\0{workflow_id}", self.namespace).as_bytes())[..16],
        );
        let req = StartWorkflowExecutionRequest {
            namespace: self.namespace.clone(),
            workflow_id: workflow_id.clone(),
            workflow_type: Some(WorkflowType {
                name: workflow_type.to_string(),
            }),
            task_queue: Some(TaskQueue {
                name: task_queue.to_string(),
                ..Default::default()
            }),
            input: input.map(|v| Payloads {
                payloads: vec![json_payload(v)],
            }),
            workflow_execution_timeout: Some(prost_wkt_types::Duration {
                seconds: GATE_EXECUTION_TIMEOUT.as_secs() as i64,
                nanos: 0,
            }),
            identity: self.identity.clone(),
            request_id,
            workflow_id_reuse_policy: WorkflowIdReusePolicy::RejectDuplicate as i32,
            workflow_id_conflict_policy: WorkflowIdConflictPolicy::Fail as i32,
            versioning_override: Some(VersioningOverride {
                r#override: Some(versioning_override::Override::Pinned(
                    versioning_override::PinnedOverride {
                        behavior: versioning_override::PinnedOverrideBehavior::Pinned as i32,
                        version: version(deployment, build_id),
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        };
        match self
            .write(None, "StartWorkflowExecution", |mut c| async move {
                c.start_workflow_execution(Request::new(req)).await
            })
            .await
        {
            Ok(resp) => Ok(resp.run_id),
            Err(e) if e.code() == Some(temporalio_client::tonic::Code::AlreadyExists) => {
                match self.describe_workflow(&workflow_id).await? {
                    Some(found) => Ok(found.run_id),
                    // Gone between the two calls (retention); report the original refusal.
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    async fn describe_workflow(
        &self,
        workflow_id: &str,
    ) -> Result<Option<GateObservation>, TemporalError> {
        let req = DescribeWorkflowExecutionRequest {
            namespace: self.namespace.clone(),
            execution: Some(WorkflowExecution {
                workflow_id: workflow_id.to_string(),
                run_id: String::new(),
            }),
        };
        let resp = match self
            .rpc(None, "DescribeWorkflowExecution", |mut c| async move {
                c.describe_workflow_execution(Request::new(req)).await
            })
            .await
        {
            Ok(resp) => resp,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(info) = resp.workflow_execution_info else {
            return Ok(None);
        };
        Ok(Some(GateObservation {
            workflow_id: workflow_id.to_string(),
            run_id: info.execution.map(|e| e.run_id).unwrap_or_default(),
            task_queue: info.task_queue,
            status: convert::gate_status(info.status),
            started_at: convert::timestamp(info.start_time.as_ref()),
        }))
    }

    /// The latest run of each queue's gate workflow; queues whose gate was never started are
    /// left out.
    pub async fn describe_gates(
        &self,
        deployment: &str,
        build_id: &str,
        task_queues: &[String],
    ) -> Result<Vec<GateObservation>, TemporalError> {
        let ids = task_queues
            .iter()
            .map(|tq| (tq.clone(), Self::gate_workflow_id(deployment, build_id, tq)));
        self.describe_gates_by(ids).await
    }

    /// The latest run of each `(task queue, workflow ID)`; never-started ones are left out.
    async fn describe_gates_by(
        &self,
        ids: impl Iterator<Item = (String, String)>,
    ) -> Result<Vec<GateObservation>, TemporalError> {
        let mut out = Vec::new();
        for (tq, id) in ids {
            if let Some(mut gate) = self.describe_workflow(&id).await? {
                if gate.task_queue.is_empty() {
                    gate.task_queue = tq;
                }
                out.push(gate);
            }
        }
        Ok(out)
    }

    /// True when every task queue of the version (workflow and activity) has at least one
    /// poller without worker versioning, i.e. the unversioned fleet can take the traffic that
    /// a ramp would not send to the new version. False for a version with no queues.
    pub async fn unversioned_pollers_on_all_queues(
        &self,
        detail: &VersionDetail,
    ) -> Result<bool, TemporalError> {
        let queues = detail
            .workflow_task_queues
            .iter()
            .map(|q| (q, TaskQueueType::Workflow))
            .chain(
                detail
                    .activity_task_queues
                    .iter()
                    .map(|q| (q, TaskQueueType::Activity)),
            );
        let mut any = false;
        for (name, kind) in queues {
            any = true;
            #[allow(deprecated)]
            let req = DescribeTaskQueueRequest {
                namespace: self.namespace.clone(),
                task_queue: Some(TaskQueue {
                    name: name.clone(),
                    ..Default::default()
                }),
                task_queue_type: kind as i32,
                ..Default::default()
            };
            let resp = match self
                .rpc(None, "DescribeTaskQueue", |mut c| async move {
                    c.describe_task_queue(Request::new(req)).await
                })
                .await
            {
                Ok(resp) => resp,
                Err(e) if e.is_not_found() => return Ok(false),
                Err(e) => return Err(e),
            };
            if !resp.pollers.iter().any(convert::is_unversioned_poller) {
                return Ok(false);
            }
        }
        Ok(any)
    }

    /// Open workflows on one version, from visibility (`CountWorkflowExecutions`). With
    /// `pinned_only`, AutoUpgrade workflows whose last task merely ran there are left out (they
    /// move on with their next task); without it every running workflow on the version counts,
    /// gate workflows included whatever their recorded behaviour.
    pub async fn count_open_workflows(
        &self,
        deployment: &str,
        build_id: &str,
        pinned_only: bool,
    ) -> Result<u64, TemporalError> {
        const METHOD: &str = "CountWorkflowExecutions";
        let query = open_workflows_query(deployment, build_id, pinned_only).ok_or_else(|| {
            TemporalError::InvalidRequest {
                method: METHOD,
                message: format!(
                    "cannot quote version {deployment:?}:{build_id:?} in a visibility query"
                ),
            }
        })?;
        self.count_workflows(query).await
    }

    /// Removes everything the deployment has in Temporal (finalizer cleanup): clear the ramp,
    /// hand new workflows back to unversioned workers, delete every version without waiting
    /// for drainage, then the deployment. Idempotent: NotFound at any step counts as done.
    ///
    /// Temporal refuses to delete a version while it remembers pollers for it
    /// ([`TemporalError::has_active_pollers`]): the version's workers must be stopped first,
    /// and stopped pollers are remembered for `matching.PollerHistoryTTL` (5 min by default).
    pub async fn cleanup_deployment(&self, deployment: &str) -> Result<(), TemporalError> {
        let state = self.describe_deployment(deployment).await?;
        if !state.exists {
            return Ok(());
        }
        // NotFound here means someone else already removed the deployment or version.
        let ok_if_gone = |r: Result<Vec<u8>, TemporalError>, previous: &[u8]| match r {
            Ok(t) => Ok(t),
            Err(e) if e.is_not_found() => Ok(previous.to_vec()),
            Err(e) => Err(e),
        };
        let mut token = state.conflict_token.clone();
        if state.routing.ramping_build_id.is_some() {
            token = ok_if_gone(
                self.set_ramping_inner(deployment, "", 0.0, &token).await,
                &token,
            )?;
        }
        if state.routing.current_build_id.is_some() {
            // Unversioned: the server must not insist that every queue of a version be polled.
            ok_if_gone(
                self.set_current_inner(deployment, "", &token, true).await,
                &token,
            )?;
        }
        // Try every version even if one is refused (typically: pollers still remembered), so
        // each retry has less left to do; the deployment itself can only go once all are gone.
        let mut refused = None;
        for v in &state.versions {
            #[allow(deprecated)]
            let req = DeleteWorkerDeploymentVersionRequest {
                namespace: self.namespace.clone(),
                version: legacy_version(deployment, &v.build_id),
                deployment_version: version(deployment, &v.build_id),
                skip_drainage: true,
                identity: self.identity.clone(),
            };
            match self
                .write(Some(deployment), "DeleteWorkerDeploymentVersion", |mut c| async move {
                    c.delete_worker_deployment_version(Request::new(req)).await
                })
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) if e.has_active_pollers() => {
                    refused.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(e) = refused {
            return Err(e);
        }
        let req = DeleteWorkerDeploymentRequest {
            namespace: self.namespace.clone(),
            deployment_name: deployment.to_string(),
            identity: self.identity.clone(),
        };
        match self
            .write(
                Some(deployment),
                "DeleteWorkerDeployment",
                |mut c| async move { c.delete_worker_deployment(Request::new(req)).await },
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Canary analysis (rollout control, issue 16): visibility counts of closed workflows. Kept
// in its own block; every call goes through `rpc()` like the rest of the wrapper.
// ---------------------------------------------------------------------------------------

/// Closed workflows that count as failures in a canary analysis.
const FAILED_STATUSES: &[&str] = &["Failed", "TimedOut"];
/// Closed workflows that count at all (cancelled and terminated ones are human decisions).
const CLOSED_STATUSES: &[&str] = &["Completed", "Failed", "TimedOut"];

/// `TemporalWorkerDeploymentVersion = '<deployment>:<build>' AND CloseTime >= '<since>' AND
/// (ExecutionStatus = …) [AND (WorkflowType = …)]`; `None` when a value cannot be quoted.
fn closed_workflows_query(
    deployment: &str,
    build_id: &str,
    since: jiff::Timestamp,
    statuses: &[&str],
    workflow_types: &[String],
) -> Option<String> {
    let unsafe_char = |s: &str| s.contains(['\'', '"', '\\']);
    if build_id.is_empty()
        || unsafe_char(deployment)
        || unsafe_char(build_id)
        || workflow_types
            .iter()
            .any(|t| t.is_empty() || unsafe_char(t))
    {
        return None;
    }
    let any_of = |field: &str, values: &mut dyn Iterator<Item = &str>| {
        let terms: Vec<String> = values.map(|v| format!("{field} = '{v}'")).collect();
        format!("({})", terms.join(" OR "))
    };
    let mut q = format!(
        "TemporalWorkerDeploymentVersion = '{deployment}:{build_id}' AND CloseTime >= '{}' AND {}",
        since.strftime("%Y-%m-%dT%H:%M:%S%.fZ"),
        any_of("ExecutionStatus", &mut statuses.iter().copied())
    );
    if !workflow_types.is_empty() {
        q.push_str(" AND ");
        q.push_str(&any_of(
            "WorkflowType",
            &mut workflow_types.iter().map(String::as_str),
        ));
    }
    Some(q)
}

impl TemporalClient {
    /// Closed workflows of one version since `since` (optionally of some workflow types):
    /// `(closed, failed)`, where failed means Failed or TimedOut. Two `CountWorkflowExecutions`.
    pub async fn count_closed_workflows(
        &self,
        deployment: &str,
        build_id: &str,
        since: jiff::Timestamp,
        workflow_types: &[String],
    ) -> Result<(u64, u64), TemporalError> {
        let mut counts = [0u64; 2];
        for (slot, statuses) in [CLOSED_STATUSES, FAILED_STATUSES].into_iter().enumerate() {
            const METHOD: &str = "CountWorkflowExecutions";
            let query =
                closed_workflows_query(deployment, build_id, since, statuses, workflow_types)
                    .ok_or_else(|| TemporalError::InvalidRequest {
                        method: METHOD,
                        message: format!(
                            "cannot quote version {deployment:?}:{build_id:?} or workflow types \
                             {workflow_types:?} in a visibility query"
                        ),
                    })?;
            counts[slot] = self.count_workflows(query).await?;
        }
        Ok((counts[0], counts[1]))
    }

    /// `CountWorkflowExecutions` for a visibility query (shared with `count_open_workflows`).
    async fn count_workflows(&self, query: String) -> Result<u64, TemporalError> {
        let req = CountWorkflowExecutionsRequest {
            namespace: self.namespace.clone(),
            query,
        };
        let resp = self
            .rpc(None, "CountWorkflowExecutions", |mut c| async move {
                c.count_workflow_executions(Request::new(req)).await
            })
            .await?;
        Ok(u64::try_from(resp.count).unwrap_or(0))
    }
}

impl TemporalClient {
    /// The gate workflow ID of step `step` (zero-based) of a build on one task queue.
    pub fn step_gate_workflow_id(
        deployment: &str,
        build_id: &str,
        step: usize,
        task_queue: &str,
    ) -> String {
        format!(
            "{}-step{step}",
            Self::gate_workflow_id(deployment, build_id, task_queue)
        )
    }

    /// Starts a step's gate workflow, pinned to the build, once per build and step.
    pub async fn start_step_gate(
        &self,
        deployment: &str,
        build_id: &str,
        step: usize,
        task_queue: &str,
        workflow_type: &str,
        input: Option<&serde_json::Value>,
    ) -> Result<String, TemporalError> {
        let id = Self::step_gate_workflow_id(deployment, build_id, step, task_queue);
        self.start_gate_as(id, deployment, build_id, task_queue, workflow_type, input)
            .await
    }

    /// The latest run of each queue's gate workflow for one step.
    pub async fn describe_step_gates(
        &self,
        deployment: &str,
        build_id: &str,
        step: usize,
        task_queues: &[String],
    ) -> Result<Vec<GateObservation>, TemporalError> {
        let ids = task_queues.iter().map(|tq| {
            (
                tq.clone(),
                Self::step_gate_workflow_id(deployment, build_id, step, tq),
            )
        });
        self.describe_gates_by(ids).await
    }
}

#[cfg(test)]
mod analysis_query_tests {
    use super::*;

    #[test]
    fn closed_workflows_query_filters_version_window_status_and_types() {
        let since: jiff::Timestamp = "2026-03-02T12:00:00.5Z".parse().expect("ts");
        assert_eq!(
            closed_workflows_query("shop/orders", "v2", since, FAILED_STATUSES, &[]).as_deref(),
            Some(
                "TemporalWorkerDeploymentVersion = 'shop/orders:v2' AND CloseTime >= \
                 '2026-03-02T12:00:00.5Z' AND (ExecutionStatus = 'Failed' OR ExecutionStatus = 'TimedOut')"
            )
        );
        let q = closed_workflows_query(
            "shop/orders",
            "v2",
            since,
            CLOSED_STATUSES,
            &["charge".to_string(), "refund".to_string()],
        )
        .expect("quotable");
        assert!(
            q.ends_with("AND (WorkflowType = 'charge' OR WorkflowType = 'refund')"),
            "{q}"
        );
        assert!(
            closed_workflows_query("shop/orders", "v'2", since, FAILED_STATUSES, &[]).is_none()
        );
        let quoted = ["a'b".to_string()];
        assert!(
            closed_workflows_query("shop/orders", "v2", since, FAILED_STATUSES, &quoted).is_none()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_workflow_id_matches_the_go_controller() {
        assert_eq!(
            TemporalClient::gate_workflow_id("ns/app", "v1-abc", "orders"),
            "test-ns/app:v1-abc-orders"
        );
    }

    #[test]
    fn open_workflows_query_uses_the_search_attribute_format() {
        assert_eq!(
            open_workflows_query("shop/orders", "v1-abc", false).as_deref(),
            Some(
                "TemporalWorkerDeploymentVersion = 'shop/orders:v1-abc' AND ExecutionStatus = 'Running'"
            )
        );
        assert_eq!(
            open_workflows_query("shop/orders", "v1", true).as_deref(),
            Some(
                "TemporalWorkerDeploymentVersion = 'shop/orders:v1' AND ExecutionStatus = 'Running' \
                 AND TemporalWorkflowVersioningBehavior = 'Pinned'"
            )
        );
        assert_eq!(open_workflows_query("shop/orders", "", false), None);
        assert_eq!(open_workflows_query("shop/o'rders", "v1", false), None);
        assert_eq!(open_workflows_query("shop/orders", "v1\\", false), None);
    }

    #[test]
    fn legacy_version_strings() {
        assert_eq!(legacy_version("ns/app", "1.2.3"), "ns/app.1.2.3");
        assert_eq!(legacy_version("ns/app", ""), "__unversioned__");
    }

    #[test]
    fn json_payload_is_json_plain() {
        let p = json_payload(&serde_json::json!({"a": [1, 2]}));
        assert_eq!(
            p.metadata.get("encoding").map(Vec::as_slice),
            Some(&b"json/plain"[..])
        );
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&p.data).unwrap(),
            serde_json::json!({"a": [1, 2]})
        );
        let s = json_payload(&serde_json::Value::from("ctrl/ns/uid"));
        assert_eq!(s.data, b"\"ctrl/ns/uid\"");
    }

    #[test]
    fn routing_writes_record_the_install_once_known() {
        let known = metadata_entries("ctrl", "1.2.3", "install-a");
        assert_eq!(
            known.get(METADATA_INSTALL_ID).map(|p| p.data.as_slice()),
            Some(&b"\"install-a\""[..])
        );
        assert!(known.contains_key(METADATA_CONTROLLER));
        assert!(!metadata_entries("ctrl", "1.2.3", "").contains_key(METADATA_INSTALL_ID));
    }
}
