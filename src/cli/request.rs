//! `temporal-worker-controller retry NAME` and `restart NAME [--build ID]`: the one-shot
//! requests `temporal.io/retry` and `temporal.io/restart` with a fresh value, in the form the
//! Argo CD actions write (`<buildID>/<Unix seconds>`), so each run acts once. Pure:
//! [`decide`] reads the object and the time; `crate::cli::control::run_with` patches.

use jiff::Timestamp;
use serde_json::json;

use crate::api::conditions::PROGRESS_DEADLINE_EXCEEDED;
use crate::api::{ANNOTATION_RESTART, ANNOTATION_RETRY, TemporalWorkerDeployment};
use crate::cli::control::{Change, ControlError};

/// Which request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Retry the build that missed its progress deadline.
    Retry,
    /// Restart a version's Pods in place: `build`, else the Current version, else the target.
    Restart { build: Option<String> },
}

/// The patch and explanation for `request` on `twd` as it is now.
pub fn decide(
    request: &Request,
    twd: &TemporalWorkerDeployment,
    now: Timestamp,
) -> Result<Change, ControlError> {
    let name = twd.metadata.name.clone().unwrap_or_default();
    let not = |why: String| Err(ControlError::NotApplicable(why));
    let (key, build, explanation) = match request {
        Request::Retry => {
            let Some(build) = failed_build(twd) else {
                return not(format!(
                    "{name} has no build that missed its progress deadline to retry \
                     (status.rolloutControl.aborted with reason {PROGRESS_DEADLINE_EXCEEDED})"
                ));
            };
            let why = format!(
                "Retrying build ID {build} of {name}: its recorded failure is cleared and its \
                 progress deadline starts afresh"
            );
            (ANNOTATION_RETRY, build, why)
        }
        Request::Restart { build } => {
            let live = live_builds(twd);
            let chosen = build.clone().or_else(|| live.first().cloned());
            let Some(build) = chosen.filter(|b| live.contains(b)) else {
                return not(format!(
                    "{name} has no live version {}to restart (live: {})",
                    build.as_ref().map(|b| format!("{b} ")).unwrap_or_default(),
                    if live.is_empty() {
                        "none".to_string()
                    } else {
                        live.join(", ")
                    }
                ));
            };
            let why = format!(
                "Restarting the Pods of build ID {build} of {name} in place, by its Deployment's \
                 rolling update; build ID and routing unchanged"
            );
            (ANNOTATION_RESTART, build, why)
        }
    };
    let value = format!("{build}/{}", now.as_second());
    Ok(Change {
        patch: json!({"metadata": {"annotations": {key: value}}}),
        explanation: format!("{explanation}; sets {key}={value}"),
        spec_patch: false,
    })
}

/// The target, when its progress-deadline failure is recorded.
fn failed_build(twd: &TemporalWorkerDeployment) -> Option<String> {
    let status = twd.status.as_ref()?;
    let target = &status.target_version.as_ref()?.version.build_id;
    let failure = status.rollout_control.as_ref()?.aborted.as_ref()?;
    (failure.reason == PROGRESS_DEADLINE_EXCEEDED && &failure.build_id == target)
        .then(|| target.clone())
}

/// The versions with a Deployment, as the status lists them: Current first, then the target,
/// then the older ones.
fn live_builds(twd: &TemporalWorkerDeployment) -> Vec<String> {
    let Some(s) = twd.status.as_ref() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    let current = s.current_version.as_ref().map(|v| &v.build_id);
    let target = s.target_version.as_ref().map(|t| &t.version);
    let target = target
        .filter(|v| v.deployment_name.is_some())
        .map(|v| &v.build_id);
    let older = s
        .deprecated_versions
        .iter()
        .filter(|v| v.version.deployment_name.is_some());
    for b in current
        .into_iter()
        .chain(target)
        .chain(older.map(|v| &v.version.build_id))
    {
        if !out.contains(b) {
            out.push(b.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::twd::{
        AbortRecord, RolloutControl, TargetVersion, TemporalWorkerDeploymentStatus, VersionInfo,
        VersionStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn version(build: &str, status: VersionStatus) -> VersionInfo {
        VersionInfo {
            deployment_name: Some(format!("orders-{build}")),
            ..VersionInfo::test(build, status)
        }
    }

    fn rolling(failed: bool) -> TemporalWorkerDeployment {
        let mut twd = TemporalWorkerDeployment::test();
        let now = Timestamp::UNIX_EPOCH;
        twd.status = Some(TemporalWorkerDeploymentStatus {
            current_version: Some(version("v1", VersionStatus::Current)),
            target_version: Some(TargetVersion {
                version: version("v2", VersionStatus::NotRegistered),
                ..TargetVersion::test("v2", VersionStatus::NotRegistered)
            }),
            rollout_control: failed.then(|| RolloutControl {
                aborted: Some(AbortRecord {
                    build_id: "v2".into(),
                    reason: PROGRESS_DEADLINE_EXCEEDED.into(),
                    message: "never polled".into(),
                    at: Time(now),
                    generation: Some(1),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        twd
    }

    fn annotation(c: &Change, key: &str) -> String {
        c.patch["metadata"]["annotations"][key]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn retry_names_the_failed_build_with_a_new_value_each_second() {
        let at = |s| Timestamp::from_second(s).expect("time");
        let c = decide(&Request::Retry, &rolling(true), at(1_800_000_000)).expect("applies");
        assert_eq!(annotation(&c, ANNOTATION_RETRY), "v2/1800000000");
        assert!(!c.spec_patch);
        assert!(c.explanation.contains("v2"), "{}", c.explanation);
        let again = decide(&Request::Retry, &rolling(true), at(1_800_000_001)).expect("applies");
        assert_ne!(
            annotation(&again, ANNOTATION_RETRY),
            annotation(&c, ANNOTATION_RETRY)
        );
        let e = decide(&Request::Retry, &rolling(false), at(1)).expect_err("nothing failed");
        assert!(e.to_string().contains("ProgressDeadlineExceeded"), "{e}");
    }

    #[test]
    fn restart_takes_the_current_version_or_a_named_live_one() {
        let now = Timestamp::from_second(7).expect("time");
        let twd = rolling(false);
        let c = decide(&Request::Restart { build: None }, &twd, now).expect("applies");
        assert_eq!(annotation(&c, ANNOTATION_RESTART), "v1/7");
        let named = Request::Restart {
            build: Some("v2".into()),
        };
        let c = decide(&named, &twd, now).expect("applies");
        assert_eq!(annotation(&c, ANNOTATION_RESTART), "v2/7");
        let unknown = Request::Restart {
            build: Some("v9".into()),
        };
        let e = decide(&unknown, &twd, now).expect_err("not live");
        assert!(e.to_string().contains("v1, v2"), "{e}");
        let e = decide(
            &Request::Restart { build: None },
            &TemporalWorkerDeployment::test(),
            now,
        )
        .expect_err("no status");
        assert!(e.to_string().contains("none"), "{e}");
    }
}
