//! Every Temporal call the controller makes, as raw `WorkflowService` RPCs on a pooled
//! [`Connection`] (the SDK's retry layer included). Each call goes through [`TemporalClient::rpc`],
//! which applies a deadline, maps errors and reports to the metrics observer.
//!
//! The calls by concept: [`describe`] (reads), [`routing`] (routing writes and version
//! metadata), [`gates`] (gate workflows), [`visibility`] (workflow counts), [`cleanup`]
//! (finalizer deletion), [`pollers`] (who polls a task queue).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use temporalio_client::Connection;
use temporalio_client::tonic::{Response, Status};
use temporalio_common::protos::temporal::api::common::v1::Payload;
use temporalio_common::protos::temporal::api::deployment::v1::WorkerDeploymentVersion;

use super::budget::{Class, NamespaceBudget};
use super::connections::{EvictHandle, RpcObserver};
use super::error::{TemporalError, code_label};

mod cleanup;
mod describe;
mod gates;
mod pollers;
mod routing;
mod visibility;

pub use cleanup::VersionDeletion;
pub use pollers::QueueKind;
pub(super) use visibility::open_workflows_query;

/// Upper bound on one RPC including the SDK's retries. Temporal Server 1.32 stalls a
/// DescribeWorkerDeployment for about 1–2 s right after a Set* write; that fits comfortably.
const RPC_TIMEOUT: Duration = Duration::from_secs(20);
/// Upper bound on one write (routing, manager claim, metadata, gate start, deletion). Only the
/// Lease holder writes, and it checks that before each group of writes; a write that outlasted
/// the lease could land after another replica took over. A holder renews the Lease when
/// `run::leadership::LEASE_GRACE_SECS` of it remain, so a write started while it held the
/// Lease ends (or is abandoned) before that Lease expires, even if no renewal succeeds
/// meanwhile; a test in `run::leadership` checks the margin. Reads keep [`RPC_TIMEOUT`].
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
        let label = match &result {
            Ok(_) => code_label(temporalio_client::tonic::Code::Ok),
            Err(e) => e.code_label(),
        };
        // Each call's place in a reconcile's time line, for latency analysis at debug level.
        tracing::debug!(method, code = label, elapsed = ?started.elapsed(), "Temporal call");
        if let Some(observe) = &self.observer {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
