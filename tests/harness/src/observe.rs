//! Small raw-gRPC helpers for tests that need to see what Temporal sees: a version registered in
//! a worker deployment, a versioned poller on a task queue, and making a version current.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use temporalio_client::Connection;
use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::{Code, Request};
use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
use temporalio_common::protos::temporal::api::taskqueue::v1::{PollerInfo, TaskQueue};
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    DescribeTaskQueueRequest, DescribeWorkerDeploymentRequest, DescribeWorkerDeploymentResponse,
    SetWorkerDeploymentCurrentVersionRequest,
};

const POLL: Duration = Duration::from_millis(50);

/// `DescribeWorkerDeployment`; `Ok(None)` while the deployment does not exist yet.
pub async fn describe_deployment(
    conn: &Connection,
    namespace: &str,
    deployment: &str,
) -> Result<Option<DescribeWorkerDeploymentResponse>> {
    let mut svc = conn.clone();
    let req = DescribeWorkerDeploymentRequest {
        namespace: namespace.into(),
        deployment_name: deployment.into(),
    };
    match svc.describe_worker_deployment(Request::new(req)).await {
        Ok(resp) => Ok(Some(resp.into_inner())),
        Err(status) if status.code() == Code::NotFound => Ok(None),
        Err(status) => Err(status.into()),
    }
}

/// Build IDs listed in the deployment's `version_summaries`.
pub fn listed_build_ids(resp: &DescribeWorkerDeploymentResponse) -> Vec<String> {
    resp.worker_deployment_info
        .iter()
        .flat_map(|info| &info.version_summaries)
        .filter_map(|s| s.deployment_version.as_ref().map(|v| v.build_id.clone()))
        .collect()
}

/// Waits until `build_id` appears in the deployment's `version_summaries`; returns how long it took.
pub async fn wait_version_listed(
    conn: &Connection,
    namespace: &str,
    deployment: &str,
    build_id: &str,
    timeout: Duration,
) -> Result<Duration> {
    let start = Instant::now();
    loop {
        let listed = describe_deployment(conn, namespace, deployment)
            .await?
            .map(|d| listed_build_ids(&d))
            .unwrap_or_default();
        if listed.iter().any(|b| b == build_id) {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            bail!("{deployment}:{build_id} not listed after {timeout:?}; listed: {listed:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Workflow-task pollers of a task queue (Temporal keeps listing stopped pollers for a while).
pub async fn workflow_pollers(
    conn: &Connection,
    namespace: &str,
    task_queue: &str,
) -> Result<Vec<PollerInfo>> {
    let mut svc = conn.clone();
    let req = DescribeTaskQueueRequest {
        namespace: namespace.into(),
        task_queue: Some(TaskQueue {
            name: task_queue.into(),
            ..Default::default()
        }),
        task_queue_type: TaskQueueType::Workflow as i32,
        ..Default::default()
    };
    Ok(svc
        .describe_task_queue(Request::new(req))
        .await?
        .into_inner()
        .pollers)
}

/// Waits until a poller of `deployment:build_id` (and with `identity`, if given) polls the task
/// queue; returns how long it took.
pub async fn wait_poller(
    conn: &Connection,
    namespace: &str,
    task_queue: &str,
    deployment: &str,
    build_id: &str,
    identity: Option<&str>,
    timeout: Duration,
) -> Result<Duration> {
    let start = Instant::now();
    loop {
        let pollers = workflow_pollers(conn, namespace, task_queue).await?;
        let found = pollers.iter().any(|p| {
            p.deployment_options
                .as_ref()
                .is_some_and(|o| o.deployment_name == deployment && o.build_id == build_id)
                && identity.is_none_or(|id| p.identity == id)
        });
        if found {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            let seen: Vec<_> = pollers
                .iter()
                .map(|p| (p.identity.clone(), p.deployment_options.clone()))
                .collect();
            bail!(
                "no poller for {deployment}:{build_id} on {task_queue} after {timeout:?}; pollers: {seen:?}"
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Makes `build_id` the current version (describe for the conflict token, then SetCurrent).
pub async fn set_current(
    conn: &Connection,
    namespace: &str,
    deployment: &str,
    build_id: &str,
    identity: &str,
) -> Result<()> {
    let Some(described) = describe_deployment(conn, namespace, deployment).await? else {
        bail!("worker deployment {deployment} does not exist");
    };
    let mut svc = conn.clone();
    let req = SetWorkerDeploymentCurrentVersionRequest {
        namespace: namespace.into(),
        deployment_name: deployment.into(),
        build_id: build_id.into(),
        conflict_token: described.conflict_token,
        identity: identity.into(),
        allow_no_pollers: false,
        ..Default::default()
    };
    svc.set_worker_deployment_current_version(Request::new(req))
        .await?;
    Ok(())
}
