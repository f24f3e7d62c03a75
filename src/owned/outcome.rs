//! The owned-resource reconciler's failure vocabulary and its pure verdict, built like the
//! worker-deployment one (`src/worker_deployment/outcome.rs`): one variant per stage or cause, each
//! keeping its typed source, a [`ReconcileFailure::reason`] that labels the error metric, and an
//! exhaustive [`verdict`].
//!
//! A copy that the API server refuses is not a failure of the reconcile: it is reported per
//! version in the status (`ApplyFailed`). What fails here is reaching the API server at all;
//! the status then stays as it was (it is about the copies, which did not change) and the pass
//! is retried with backoff.

use std::time::Duration;

use crate::reconciler::{ReconcileFailure, backoff};

/// Why one pass over a TemporalWorkerOwnedResource could not finish.
#[derive(Debug, thiserror::Error)]
pub enum OwnedFailure {
    /// Observe: listing the worker's versioned Deployments failed.
    #[error("listing the worker's versioned Deployments: {0}")]
    DeploymentsUnreadable(#[source] kube::Error),
    /// Observe: reading the TemporalWorkerDeployment named by `spec.workerRef` failed.
    #[error("reading TemporalWorkerDeployment {name:?}: {source}")]
    WorkerUnreadable {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// Act: adding our finalizer or the owner reference failed.
    #[error("adding the finalizer and owner reference: {0}")]
    MetadataWriteFailed(#[source] kube::Error),
    /// Act (deletion): removing a copy failed; the finalizer stays.
    #[error("removing copy {name}: {source}")]
    CopyRemovalFailed {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// Act (deletion): dropping our finalizer failed.
    #[error("removing the finalizer: {0}")]
    FinalizerRemovalFailed(#[source] kube::Error),
    /// Report: the status write failed.
    #[error("writing status: {0}")]
    StatusWriteFailed(#[source] kube::Error),
}

impl ReconcileFailure for OwnedFailure {
    fn reason(&self) -> &'static str {
        match self {
            OwnedFailure::DeploymentsUnreadable(_) => "DeploymentsUnreadable",
            OwnedFailure::WorkerUnreadable { .. } => "WorkerUnreadable",
            OwnedFailure::MetadataWriteFailed(_) => "MetadataWriteFailed",
            OwnedFailure::CopyRemovalFailed { .. } => "CopyRemovalFailed",
            OwnedFailure::FinalizerRemovalFailed(_) => "FinalizerRemovalFailed",
            OwnedFailure::StatusWriteFailed(_) => "StatusWriteFailed",
        }
    }
}

/// What to do after a failed pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The object changed under us (409): look again at once with the fresh object.
    pub stale: bool,
    pub retry: Duration,
}

/// Pure: the retry for `failure` after `streak` failures in a row (this one included).
pub fn verdict(failure: &OwnedFailure, streak: u32) -> Verdict {
    let conflict = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 409);
    let stale = match failure {
        OwnedFailure::MetadataWriteFailed(e)
        | OwnedFailure::FinalizerRemovalFailed(e)
        | OwnedFailure::StatusWriteFailed(e) => conflict(e),
        OwnedFailure::DeploymentsUnreadable(_)
        | OwnedFailure::WorkerUnreadable { .. }
        | OwnedFailure::CopyRemovalFailed { .. } => false,
    };
    Verdict {
        stale,
        retry: if stale { STALE_RETRY } else { backoff(streak) },
    }
}

/// After a write lost a race: the watch delivers the newer object within moments.
const STALE_RETRY: Duration = Duration::from_millis(200);

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("refused", "Reason")
                .with_code(code)
                .boxed(),
        )
    }

    fn all(code: u16) -> Vec<OwnedFailure> {
        vec![
            OwnedFailure::DeploymentsUnreadable(api(code)),
            OwnedFailure::WorkerUnreadable {
                name: "w".into(),
                source: api(code),
            },
            OwnedFailure::MetadataWriteFailed(api(code)),
            OwnedFailure::CopyRemovalFailed {
                name: "c".into(),
                source: api(code),
            },
            OwnedFailure::FinalizerRemovalFailed(api(code)),
            OwnedFailure::StatusWriteFailed(api(code)),
        ]
    }

    #[test]
    fn every_failure_has_its_own_reason_and_keeps_its_source() {
        let failures = all(500);
        let reasons: std::collections::BTreeSet<_> = failures.iter().map(|f| f.reason()).collect();
        assert_eq!(reasons.len(), failures.len());
        for f in &failures {
            assert!(std::error::Error::source(f).is_some(), "{f:?}");
        }
    }

    #[test]
    fn failures_back_off_and_a_lost_write_race_retries_at_once() {
        for f in all(500) {
            let v = verdict(&f, 3);
            assert_eq!(
                v,
                Verdict {
                    stale: false,
                    retry: backoff(3)
                },
                "{f}"
            );
        }
        let stale: Vec<&'static str> = all(409)
            .iter()
            .filter(|f| verdict(f, 3).stale)
            .map(|f| f.reason())
            .collect();
        assert_eq!(
            stale,
            [
                "MetadataWriteFailed",
                "FinalizerRemovalFailed",
                "StatusWriteFailed"
            ]
        );
        assert!(verdict(&OwnedFailure::StatusWriteFailed(api(409)), 9).retry < backoff(1));
    }
}
