//! Visibility counts: open workflows on a version (drainage) and closed ones since a time
//! (canary analysis).

use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::workflowservice::v1::CountWorkflowExecutionsRequest;

use super::TemporalClient;
use crate::temporal::error::TemporalError;

/// The visibility query for running workflows on `<deployment>:<build>` (the value format of
/// the `TemporalWorkerDeploymentVersion` search attribute). `None` when a name holds a quote or
/// backslash, which no valid deployment name or build ID does.
pub(in crate::temporal) fn open_workflows_query(
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

/// The visibility query for running workflows on these task queues that no versioned worker
/// has run a task of (no `TemporalWorkerDeploymentVersion`): those started on unversioned
/// workers that have not moved to a version yet (`crate::planner::adoption`). `None` for no
/// queues or one that cannot be quoted.
pub(in crate::temporal) fn open_unversioned_query(task_queues: &[String]) -> Option<String> {
    if task_queues.is_empty()
        || task_queues
            .iter()
            .any(|q| q.is_empty() || q.contains(['\'', '"', '\\']))
    {
        return None;
    }
    let queues: Vec<String> = task_queues
        .iter()
        .map(|q| format!("TaskQueue = '{q}'"))
        .collect();
    Some(format!(
        "ExecutionStatus = 'Running' AND TemporalWorkerDeploymentVersion IS NULL AND ({})",
        queues.join(" OR ")
    ))
}

impl TemporalClient {
    /// Running workflows on these task queues still unversioned ([`open_unversioned_query`]).
    pub async fn count_open_unversioned(
        &self,
        task_queues: &[String],
    ) -> Result<u64, TemporalError> {
        let query =
            open_unversioned_query(task_queues).ok_or_else(|| TemporalError::InvalidRequest {
                method: "CountWorkflowExecutions",
                message: format!("cannot quote task queues {task_queues:?} in a visibility query"),
            })?;
        self.count_workflows(query).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unversioned_query_names_every_queue_and_refuses_what_it_cannot_quote() {
        assert_eq!(
            open_unversioned_query(&["a".into(), "b".into()]).as_deref(),
            Some(
                "ExecutionStatus = 'Running' AND TemporalWorkerDeploymentVersion IS NULL AND \
                 (TaskQueue = 'a' OR TaskQueue = 'b')"
            )
        );
        assert_eq!(open_unversioned_query(&[]), None);
        assert_eq!(open_unversioned_query(&["a'b".into()]), None);
        assert_eq!(open_unversioned_query(&[String::new()]), None);
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
