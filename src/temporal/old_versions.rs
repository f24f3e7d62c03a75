//! Calls about the workflows that keep an old version alive: listing the oldest (drain
//! visibility) and ending them in one batch operation (`spec.sunset.cancelPinnedAfter` /
//! `terminatePinnedAfter`).
//!
//! Counting lives next to the other calls in `client` (`count_open_workflows`). Listing needs
//! a page and a pick: the SQL visibility stores of small installs (and the dev server) cannot
//! `ORDER BY`, so the oldest are picked from one bounded page.

use sha2::{Digest as _, Sha256};
use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::batch::v1::{
    BatchOperationCancellation, BatchOperationSignal, BatchOperationTermination,
};
use temporalio_common::protos::temporal::api::common::v1::Payloads;
use temporalio_common::protos::temporal::api::workflowservice::v1::start_batch_operation_request::Operation;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    ListWorkflowExecutionsRequest, StartBatchOperationRequest,
};

use super::TemporalClient;
use super::client::{json_payload, open_workflows_query};
use super::convert::timestamp;
use super::error::TemporalError;
use super::state::{PinnedAction, PinnedWorkflowRef};

/// Workflows read to pick the oldest from: bounds the cost of one listing.
const PAGE: i32 = 100;
/// Pace of a batch that ends pinned workflows: gentle on a shared Temporal namespace.
const BATCH_OPS_PER_SECOND: f32 = 20.0;

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
            .rpc(None, METHOD, |mut c| async move {
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

impl TemporalClient {
    /// Signals, cancels or terminates, in one batch operation, every open workflow pinned to a
    /// version. The job ID is derived from the version and the action, so asking again (a
    /// restart before the status recorded it) finds the same job instead of starting another.
    pub async fn pinned_batch(
        &self,
        deployment: &str,
        build_id: &str,
        action: &PinnedAction,
    ) -> Result<(), TemporalError> {
        const METHOD: &str = "StartBatchOperation";
        let query = open_workflows_query(deployment, build_id, true).ok_or_else(|| {
            TemporalError::InvalidRequest {
                method: METHOD,
                message: format!(
                    "cannot quote version {deployment:?}:{build_id:?} in a visibility query"
                ),
            }
        })?;
        let identity = self.identity().to_string();
        let operation = match action {
            PinnedAction::Signal { name, new_build_id } => {
                Operation::SignalOperation(BatchOperationSignal {
                    signal: name.clone(),
                    input: Some(Payloads {
                        payloads: vec![json_payload(
                            &serde_json::json!({ "newBuildID": new_build_id }),
                        )],
                    }),
                    header: None,
                    identity,
                })
            }
            PinnedAction::Cancel => {
                Operation::CancellationOperation(BatchOperationCancellation { identity })
            }
            PinnedAction::Terminate => Operation::TerminationOperation(BatchOperationTermination {
                details: None,
                identity,
            }),
        };
        let req = StartBatchOperationRequest {
            namespace: self.namespace().to_string(),
            visibility_query: query,
            job_id: batch_job_id(deployment, build_id, action),
            reason: reason(deployment, build_id, action),
            max_operations_per_second: BATCH_OPS_PER_SECOND,
            operation: Some(operation),
            ..Default::default()
        };
        let result = self
            .write(None, METHOD, |mut c| async move {
                c.start_batch_operation(Request::new(req)).await
            })
            .await;
        match result {
            Ok(_) => Ok(()),
            // The same job already ran or runs: asked before.
            Err(e) if e.is_already_exists() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Why, as recorded with the batch job.
fn reason(deployment: &str, build_id: &str, action: &PinnedAction) -> String {
    let why = match action {
        PinnedAction::Signal { new_build_id, .. } => {
            format!("draining; spec.sunset.upgradeSignal asks it to move to {new_build_id}")
        }
        PinnedAction::Cancel => "draining for longer than spec.sunset.cancelPinnedAfter".into(),
        PinnedAction::Terminate => {
            "draining for longer than spec.sunset.terminatePinnedAfter".into()
        }
    };
    format!("temporal-worker-controller: version {build_id} of {deployment} is {why}")
}

/// `twc-<action>-<hash of deployment:build>`: stable, short, and free of the characters a
/// build ID may carry.
pub fn batch_job_id(deployment: &str, build_id: &str, action: &PinnedAction) -> String {
    let digest = Sha256::digest(format!("{deployment}:{build_id}").as_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("twc-{}-{hex}", action.as_str())
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
    fn batch_job_ids_are_stable_per_version_and_action() {
        let a = batch_job_id("shop/orders", "v1", &PinnedAction::Cancel);
        assert_eq!(a, batch_job_id("shop/orders", "v1", &PinnedAction::Cancel));
        assert!(
            a.starts_with("twc-cancel-") && a.len() == "twc-cancel-".len() + 24,
            "{a}"
        );
        assert_ne!(a, batch_job_id("shop/orders", "v2", &PinnedAction::Cancel));
        assert_ne!(a, batch_job_id("shop/other", "v1", &PinnedAction::Cancel));
        assert!(
            batch_job_id("shop/orders", "v1", &PinnedAction::Terminate)
                .starts_with("twc-terminate-")
        );
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
