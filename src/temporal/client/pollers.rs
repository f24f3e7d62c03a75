//! Who polls a task queue: `DescribeTaskQueue` (legacy mode, one task-queue type per call),
//! whose poller list carries each poller's version and last access time. The poller health
//! check (`src/planner/poller_health.rs`) judges the live versions by it.

use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
use temporalio_common::protos::temporal::api::taskqueue::v1::{PollerInfo, TaskQueue};
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeTaskQueueRequest;

use super::TemporalClient;
use crate::temporal::convert;
use crate::temporal::error::TemporalError;
use crate::temporal::state::SeenPoller;

/// Which pollers of a task queue to list (ordered workflow first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueKind {
    Workflow,
    Activity,
}

impl TemporalClient {
    /// Every poller Temporal lists on `task_queue` for `kind` (of any version; a stopped one
    /// stays listed for a while). Charged to `deployment`'s budget: the call is made for it.
    pub async fn task_queue_pollers(
        &self,
        deployment: &str,
        task_queue: &str,
        kind: QueueKind,
    ) -> Result<Vec<SeenPoller>, TemporalError> {
        let kind = match kind {
            QueueKind::Workflow => TaskQueueType::Workflow,
            QueueKind::Activity => TaskQueueType::Activity,
        };
        #[allow(deprecated)]
        let req = DescribeTaskQueueRequest {
            namespace: self.namespace.clone(),
            task_queue: Some(TaskQueue {
                name: task_queue.to_string(),
                ..Default::default()
            }),
            task_queue_type: kind as i32,
            ..Default::default()
        };
        match self
            .rpc(Some(deployment), "DescribeTaskQueue", |mut c| async move {
                c.describe_task_queue(Request::new(req)).await
            })
            .await
        {
            Ok(resp) => Ok(resp.pollers.iter().map(seen).collect()),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

fn seen(p: &PollerInfo) -> SeenPoller {
    let versioned = !convert::is_unversioned_poller(p);
    let options = p.deployment_options.as_ref().filter(|_| versioned);
    let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    SeenPoller {
        identity: p.identity.clone(),
        deployment_name: options.and_then(|o| nonempty(&o.deployment_name)),
        build_id: options.and_then(|o| nonempty(&o.build_id)),
        last_access: convert::timestamp(p.last_access_time.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use temporalio_common::protos::temporal::api::deployment::v1::WorkerDeploymentOptions;
    use temporalio_common::protos::temporal::api::enums::v1::WorkerVersioningMode;

    fn info(mode: WorkerVersioningMode, seconds: i64) -> PollerInfo {
        PollerInfo {
            identity: "1@pod".into(),
            last_access_time: Some(prost_wkt_types::Timestamp { seconds, nanos: 0 }),
            deployment_options: Some(WorkerDeploymentOptions {
                deployment_name: "ns/orders".into(),
                build_id: "v1".into(),
                worker_versioning_mode: mode as i32,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_versioned_poller_keeps_its_version_and_last_access() {
        let p = seen(&info(WorkerVersioningMode::Versioned, 1_700_000_000));
        assert_eq!(p.identity, "1@pod");
        assert_eq!(p.deployment_name.as_deref(), Some("ns/orders"));
        assert_eq!(p.build_id.as_deref(), Some("v1"));
        assert_eq!(
            p.last_access,
            Some(jiff::Timestamp::from_second(1_700_000_000).unwrap())
        );
    }

    #[test]
    fn an_unversioned_poller_is_of_no_version_and_a_zero_time_is_never() {
        let p = seen(&info(WorkerVersioningMode::Unversioned, 0));
        assert_eq!(
            (p.deployment_name, p.build_id, p.last_access),
            (None, None, None)
        );
    }
}
