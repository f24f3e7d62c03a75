//! Gate workflows: the rollout gate and each Progressive step's gate, started pinned to the
//! version under test and described by their latest run.

use sha2::{Digest as _, Sha256};
use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::common::v1::{
    Payloads, WorkflowExecution, WorkflowType,
};
use temporalio_common::protos::temporal::api::enums::v1::{
    WorkflowIdConflictPolicy, WorkflowIdReusePolicy,
};
use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
use temporalio_common::protos::temporal::api::workflow::v1::{
    VersioningOverride, versioning_override,
};
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    DescribeWorkflowExecutionRequest, StartWorkflowExecutionRequest,
};

use super::{GATE_EXECUTION_TIMEOUT, TemporalClient, json_payload, version};
use crate::temporal::convert;
use crate::temporal::error::TemporalError;
use crate::temporal::state::GateObservation;

impl TemporalClient {
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
}

impl TemporalClient {
    /// The gate workflow ID of the step at index `step` of a build on one task queue, named by
    /// the step's number (`-step1` for the first), as everywhere a user reads one.
    pub fn step_gate_workflow_id(
        deployment: &str,
        build_id: &str,
        step: usize,
        task_queue: &str,
    ) -> String {
        format!(
            "{}-step{}",
            Self::gate_workflow_id(deployment, build_id, task_queue),
            crate::api::twd::step_number(step)
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
mod tests {
    use super::*;

    #[test]
    fn gate_workflow_id_matches_the_go_controller() {
        assert_eq!(
            TemporalClient::gate_workflow_id("ns/app", "v1-abc", "orders"),
            "test-ns/app:v1-abc-orders"
        );
    }
}
