//! Per-version task-queue statistics (`DescribeWorkerDeploymentVersion` with
//! `report_task_queue_stats`): backlog count and age and add/dispatch rates of every task queue
//! one version polls, for autoscaling signals.

use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeWorkerDeploymentVersionRequest;

use super::TemporalClient;
use super::client::{legacy_version, version};
use super::error::TemporalError;

/// One task queue of one version, as Temporal estimates it.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueStats {
    pub task_queue: String,
    /// `workflow`, `activity` or `nexus`.
    pub queue_type: &'static str,
    pub backlog_count: i64,
    pub backlog_age_seconds: f64,
    /// Tasks per second, averaged by the server over the last 30 s.
    pub add_rate: f64,
    pub dispatch_rate: f64,
}

impl TemporalClient {
    /// The task queues of one version with their statistics; empty when Temporal does not know
    /// the version (yet, or any more).
    pub async fn version_queue_stats(
        &self,
        deployment: &str,
        build_id: &str,
    ) -> Result<Vec<QueueStats>, TemporalError> {
        const METHOD: &str = "DescribeWorkerDeploymentVersion";
        #[allow(deprecated)]
        let req = DescribeWorkerDeploymentVersionRequest {
            namespace: self.namespace().to_string(),
            version: legacy_version(deployment, build_id),
            deployment_version: version(deployment, build_id),
            report_task_queue_stats: true,
        };
        let resp = match self
            .rpc(Some(deployment), METHOD, |mut c| async move {
                c.describe_worker_deployment_version(Request::new(req))
                    .await
            })
            .await
        {
            Ok(resp) => resp,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(resp
            .version_task_queues
            .into_iter()
            .map(|q| {
                let stats = q.stats.unwrap_or_default();
                QueueStats {
                    task_queue: q.name,
                    queue_type: queue_type(q.r#type),
                    backlog_count: stats.approximate_backlog_count.max(0),
                    backlog_age_seconds: stats
                        .approximate_backlog_age
                        .map(|d| d.seconds as f64 + f64::from(d.nanos) / 1e9)
                        .unwrap_or(0.0)
                        .max(0.0),
                    add_rate: f64::from(stats.tasks_add_rate),
                    dispatch_rate: f64::from(stats.tasks_dispatch_rate),
                }
            })
            .collect())
    }
}

fn queue_type(t: i32) -> &'static str {
    match TaskQueueType::try_from(t) {
        Ok(TaskQueueType::Workflow) => "workflow",
        Ok(TaskQueueType::Activity) => "activity",
        Ok(TaskQueueType::Nexus) => "nexus",
        _ => "unspecified",
    }
}

#[cfg(test)]
mod tests {
    use super::queue_type;
    use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;

    #[test]
    fn queue_types_have_short_stable_labels() {
        assert_eq!(queue_type(TaskQueueType::Workflow as i32), "workflow");
        assert_eq!(queue_type(TaskQueueType::Activity as i32), "activity");
        assert_eq!(queue_type(TaskQueueType::Nexus as i32), "nexus");
        assert_eq!(queue_type(0), "unspecified");
        assert_eq!(queue_type(99), "unspecified");
    }
}
