//! Reads: a deployment's routing and versions, one version's task queues, and whether the
//! unversioned fleet polls every queue of a version; whether the frontend answers at all.

use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    DescribeTaskQueueRequest, DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentVersionRequest, GetSystemInfoRequest,
};

use super::{TemporalClient, legacy_version, version};
use crate::temporal::convert;
use crate::temporal::error::TemporalError;
use crate::temporal::state::{VersionDetail, WorkerDeploymentState};

impl TemporalClient {
    /// Whether the frontend answers on this connection: `GetSystemInfo`, the cheapest call
    /// there is (no namespace, no worker deployment; what the SDK itself dials with).
    pub async fn system_info(&self) -> Result<(), TemporalError> {
        self.rpc(None, "GetSystemInfo", |mut c| async move {
            c.get_system_info(Request::new(GetSystemInfoRequest {}))
                .await
        })
        .await
        .map(|_| ())
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
}
