//! The conditions of a TemporalWorkerOwnedResource, from what one pass did (pure).
//!
//! | Situation | Ready | Reconciling | Stalled |
//! |---|---|---|---|
//! | every live version's copy applied | True/`AllVersionsApplied` | False | False |
//! | the worker does not exist (yet) | False/`WorkerDeploymentNotFound` | True | False |
//! | some copy refused (rules, rendering, API server) | False/`ApplyFailed` | False | True |
//! | `spec.object` breaks a rule (nothing applied) | False/`ApplyFailed` | False | True |

use jiff::Timestamp;

use crate::api::conditions as reason;
use crate::api::twor::{OwnedVersionStatus, TemporalWorkerOwnedResourceStatus};

/// What one pass found.
#[derive(Clone, Debug, PartialEq)]
pub enum Pass {
    /// `spec.workerRef` names no TWD.
    WorkerNotFound { worker: String },
    /// One entry per live version, in build-ID order.
    Applied(Vec<OwnedVersionStatus>),
    /// `spec.object` breaks a rule of `validate::check` (the webhook's message); nothing was
    /// applied.
    Invalid { message: String },
}

impl Pass {
    /// The reason of a pass that failed or is blocked (the `Ready=False` reason of
    /// [`compute`]); `None` when every copy is applied.
    pub fn failure_reason(&self) -> Option<&'static str> {
        match self {
            Pass::WorkerNotFound { .. } => Some(reason::WORKER_DEPLOYMENT_NOT_FOUND),
            Pass::Invalid { .. } => Some(reason::APPLY_FAILED),
            Pass::Applied(versions) => versions
                .iter()
                .any(|v| !v.applied)
                .then_some(reason::APPLY_FAILED),
        }
    }
}

/// The status to write for `pass`; `old` keeps `lastTransitionTime` of unchanged conditions.
pub fn compute(
    old: Option<&TemporalWorkerOwnedResourceStatus>,
    generation: i64,
    pass: Pass,
    now: Timestamp,
) -> TemporalWorkerOwnedResourceStatus {
    let (ready, reconciling, stalled, why, message, versions) = match pass {
        Pass::WorkerNotFound { worker } => (
            false,
            true,
            false,
            reason::WORKER_DEPLOYMENT_NOT_FOUND,
            format!("TemporalWorkerDeployment {worker:?} not found in this namespace"),
            // Copies of a deleted worker go with its Deployments; keep what is known.
            old.map(|s| s.versions.clone()).unwrap_or_default(),
        ),
        Pass::Invalid { message } => (
            false,
            false,
            true,
            reason::APPLY_FAILED,
            message,
            // Copies applied before the spec changed stay (and are listed) until it is fixed.
            old.map(|s| s.versions.clone()).unwrap_or_default(),
        ),
        Pass::Applied(versions) => {
            let failed: Vec<String> = versions
                .iter()
                .filter(|v| !v.applied)
                .map(|v| format!("{}: {}", v.build_id, v.message))
                .collect();
            if failed.is_empty() {
                let message = format!("{} version(s) applied", versions.len());
                (
                    true,
                    false,
                    false,
                    reason::ALL_VERSIONS_APPLIED,
                    message,
                    versions,
                )
            } else {
                let message = format!("not applied for {}", failed.join("; "));
                (false, false, true, reason::APPLY_FAILED, message, versions)
            }
        }
    };
    let old_conditions = old.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let conditions = reason::with_transitions(
        old_conditions,
        &[
            (reason::READY, reason::status_of(ready)),
            (reason::RECONCILING, reason::status_of(reconciling)),
            (reason::STALLED, reason::status_of(stalled)),
        ],
        (why, &message),
        generation,
        now,
    );
    TemporalWorkerOwnedResourceStatus {
        observed_generation: Some(generation),
        versions,
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(build: &str, applied: bool, message: &str) -> OwnedVersionStatus {
        OwnedVersionStatus {
            build_id: build.into(),
            resource_name: format!("x-{build}"),
            api_version: "policy/v1".into(),
            kind: "PodDisruptionBudget".into(),
            applied,
            message: message.into(),
            applied_hash: if applied { "h".into() } else { String::new() },
        }
    }

    fn cond<'a>(s: &'a TemporalWorkerOwnedResourceStatus, t: &str) -> (&'a str, &'a str) {
        let c = s
            .conditions
            .iter()
            .find(|c| c.type_ == t)
            .expect("condition");
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn a_refused_object_stalls_with_the_rules_message_and_keeps_the_copies_listed() {
        let old = compute(
            None,
            1,
            Pass::Applied(vec![entry("a", true, "")]),
            Timestamp::UNIX_EPOCH,
        );
        let message = "spec.object.spec.minReplicas must not be 0: why".to_string();
        let s = compute(
            Some(&old),
            2,
            Pass::Invalid {
                message: message.clone(),
            },
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(cond(&s, "Ready"), ("False", reason::APPLY_FAILED));
        assert_eq!(cond(&s, "Stalled"), ("True", reason::APPLY_FAILED));
        assert_eq!(cond(&s, "Reconciling"), ("False", reason::APPLY_FAILED));
        assert!(s.conditions.iter().all(|c| c.message == message));
        assert_eq!(s.versions, old.versions);
        assert_eq!(s.observed_generation, Some(2));
    }

    #[test]
    fn all_applied_is_ready() {
        let s = compute(
            None,
            3,
            Pass::Applied(vec![entry("a", true, ""), entry("b", true, "")]),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(cond(&s, "Ready"), ("True", "AllVersionsApplied"));
        assert_eq!(cond(&s, "Reconciling").0, "False");
        assert_eq!(cond(&s, "Stalled").0, "False");
        assert_eq!(s.observed_generation, Some(3));
    }

    #[test]
    fn one_failure_is_stalled_and_names_the_version() {
        let s = compute(
            None,
            1,
            Pass::Applied(vec![
                entry("a", true, ""),
                entry("b", false, "denied by policy"),
            ]),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(cond(&s, "Ready"), ("False", "ApplyFailed"));
        assert_eq!(cond(&s, "Stalled"), ("True", "ApplyFailed"));
        let msg = &s.conditions[0].message;
        assert!(
            msg.contains("b: denied by policy") && !msg.contains("a:"),
            "{msg}"
        );
    }

    #[test]
    fn a_missing_worker_is_in_progress_and_keeps_known_versions() {
        let before = compute(
            None,
            1,
            Pass::Applied(vec![entry("a", true, "")]),
            Timestamp::UNIX_EPOCH,
        );
        let s = compute(
            Some(&before),
            1,
            Pass::WorkerNotFound {
                worker: "pay".into(),
            },
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(cond(&s, "Ready"), ("False", "WorkerDeploymentNotFound"));
        assert_eq!(cond(&s, "Reconciling").0, "True");
        assert_eq!(cond(&s, "Stalled").0, "False");
        assert_eq!(s.versions, before.versions);
    }

    #[test]
    fn an_unchanged_pass_keeps_the_transition_times() {
        let t1 = Timestamp::UNIX_EPOCH;
        let t2 = Timestamp::from_second(100).expect("ts");
        let pass = || Pass::Applied(vec![entry("a", true, "")]);
        let first = compute(None, 1, pass(), t1);
        let second = compute(Some(&first), 1, pass(), t2);
        assert_eq!(
            first, second,
            "an unchanged pass must not change the status"
        );
    }

    /// The reason counted in `reconcile_errors_total` is the `Ready=False` reason in status.
    #[test]
    fn the_counted_failure_reason_is_the_ready_reason() {
        for pass in [
            Pass::WorkerNotFound { worker: "w".into() },
            Pass::Invalid {
                message: "m".into(),
            },
            Pass::Applied(vec![entry("a", true, ""), entry("b", false, "no")]),
            Pass::Applied(vec![entry("a", true, "")]),
        ] {
            let counted = pass.failure_reason();
            let s = compute(None, 1, pass, Timestamp::UNIX_EPOCH);
            let want = match cond(&s, "Ready") {
                ("False", why) => Some(why),
                _ => None,
            };
            assert_eq!(counted, want);
        }
    }
}
