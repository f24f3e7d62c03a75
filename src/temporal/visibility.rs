//! Visibility list queries about the workflows that keep an old version alive.
//!
//! Counting lives next to the other calls in `client` (`count_open_workflows`); listing is
//! here because it needs a page and a pick: the SQL visibility stores of small installs (and
//! the dev server) cannot `ORDER BY`, so the oldest are picked from one bounded page.

use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::workflowservice::v1::ListWorkflowExecutionsRequest;

use super::TemporalClient;
use super::client::open_workflows_query;
use super::convert::timestamp;
use super::error::TemporalError;
use super::state::PinnedWorkflowRef;

/// Workflows read to pick the oldest from: bounds the cost of one listing.
const PAGE: i32 = 100;

impl TemporalClient {
    /// Up to `n` of the oldest open workflows pinned to a version, oldest first. With more
    /// than one page of them, the oldest of the first page.
    pub async fn oldest_open_pinned(
        &self,
        deployment: &str,
        build_id: &str,
        n: usize,
    ) -> Result<Vec<PinnedWorkflowRef>, TemporalError> {
        const METHOD: &str = "ListWorkflowExecutions";
        let query = open_workflows_query(deployment, build_id, true).ok_or_else(|| {
            TemporalError::InvalidRequest {
                method: METHOD,
                message: format!(
                    "cannot quote version {deployment:?}:{build_id:?} in a visibility query"
                ),
            }
        })?;
        let req = ListWorkflowExecutionsRequest {
            namespace: self.namespace().to_string(),
            page_size: PAGE,
            next_page_token: Vec::new(),
            query,
        };
        let resp = self
            .rpc(METHOD, |mut c| async move {
                c.list_workflow_executions(Request::new(req)).await
            })
            .await?;
        let listed = resp.executions.into_iter().map(|e| PinnedWorkflowRef {
            workflow_type: e.r#type.map(|t| t.name).unwrap_or_default(),
            workflow_id: e.execution.map(|x| x.workflow_id).unwrap_or_default(),
            start_time: timestamp(e.start_time.as_ref()),
        });
        Ok(oldest(listed, n))
    }
}

/// The `n` oldest, oldest first; unknown start times last, ties by workflow ID (stable
/// status whatever order visibility lists them in).
pub fn oldest(
    all: impl IntoIterator<Item = PinnedWorkflowRef>,
    n: usize,
) -> Vec<PinnedWorkflowRef> {
    let mut all: Vec<_> = all.into_iter().collect();
    all.sort_by(|a, b| {
        (a.start_time.is_none(), a.start_time, &a.workflow_id).cmp(&(
            b.start_time.is_none(),
            b.start_time,
            &b.workflow_id,
        ))
    });
    all.truncate(n);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wf(id: &str, started: Option<&str>) -> PinnedWorkflowRef {
        PinnedWorkflowRef {
            workflow_type: "wait".into(),
            workflow_id: id.into(),
            start_time: started.map(|s| s.parse().expect("timestamp")),
        }
    }

    #[test]
    fn the_oldest_come_first_and_unknown_start_times_last() {
        let picked = oldest(
            [
                wf("c", Some("2026-03-02T10:00:03Z")),
                wf("x", None),
                wf("a", Some("2026-03-02T10:00:01Z")),
                wf("b2", Some("2026-03-02T10:00:02Z")),
                wf("b1", Some("2026-03-02T10:00:02Z")),
            ],
            4,
        );
        let ids: Vec<_> = picked.iter().map(|w| w.workflow_id.as_str()).collect();
        assert_eq!(ids, ["a", "b1", "b2", "c"]);
        assert_eq!(oldest([wf("x", None)], 0), Vec::new());
    }
}
