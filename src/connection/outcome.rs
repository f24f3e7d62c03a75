//! The Connection reconciler's failure vocabulary and its pure verdict, built like the other
//! reconcilers' (`src/worker_deployment/outcome.rs`, `src/owned/outcome.rs`).

use std::time::Duration;

use crate::caches::CacheStopped;

use crate::reconciler::{ReconcileFailure, backoff};

#[derive(Debug, thiserror::Error)]
pub enum ConnectionFailure {
    /// Observe: the TWD cache will never be ready (its watch ended, at shutdown).
    #[error("the TemporalWorkerDeployment cache is unavailable: {0}")]
    CacheUnavailable(#[source] CacheStopped),
    /// Observe: the TWD cache has not listed yet.
    #[error("the TemporalWorkerDeployment cache has not listed yet")]
    CacheNotReady,
    /// Observe (sharded install): listing the worker deployments of every shard failed.
    #[error("listing the worker deployments that may use the Connection: {0}")]
    UsersUnreadable(#[source] kube::Error),
    /// Act: dropping our finalizer failed.
    #[error("releasing the TemporalConnection's finalizer: {0}")]
    ReleaseFailed(#[source] kube::Error),
    /// Report: the status write failed.
    #[error("writing the TemporalConnection's status: {0}")]
    StatusWriteFailed(#[source] kube::Error),
}

impl ReconcileFailure for ConnectionFailure {
    fn reason(&self) -> &'static str {
        match self {
            ConnectionFailure::CacheUnavailable(_) => "CacheUnavailable",
            ConnectionFailure::CacheNotReady => "CacheNotReady",
            ConnectionFailure::UsersUnreadable(_) => "UsersUnreadable",
            ConnectionFailure::ReleaseFailed(_) => "ReleaseFailed",
            ConnectionFailure::StatusWriteFailed(_) => "StatusWriteFailed",
        }
    }
}

/// Pure: when to look again after `streak` failures in a row (this one included).
pub fn verdict(failure: &ConnectionFailure, streak: u32) -> Duration {
    match failure {
        ConnectionFailure::CacheUnavailable(_)
        | ConnectionFailure::CacheNotReady
        | ConnectionFailure::UsersUnreadable(_)
        | ConnectionFailure::ReleaseFailed(_)
        | ConnectionFailure::StatusWriteFailed(_) => backoff(streak),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_release_backs_off_and_keeps_its_source() {
        let f = ConnectionFailure::ReleaseFailed(kube::Error::Api(
            kube::core::Status::failure("boom", "InternalError")
                .with_code(500)
                .boxed(),
        ));
        assert_eq!(verdict(&f, 1), backoff(1));
        assert_eq!(verdict(&f, 4), backoff(4));
        assert_eq!(f.reason(), "ReleaseFailed");
        assert!(std::error::Error::source(&f).is_some());
    }
}
