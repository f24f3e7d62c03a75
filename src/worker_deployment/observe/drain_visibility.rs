//! Part of the observe stage: what keeps each old version alive, for the status (drain
//! visibility). Which versions and when to ask again are decided in `crate::planner::drain`.
//! Counts are remembered in memory (`PinnedCounts`) rather than in the status: a timestamp
//! in the status would be a write per poll with nothing changed, and a restart only costs one
//! extra count.

use jiff::Timestamp;

use crate::api::twd::TemporalWorkerDeploymentStatus;
use crate::planner::drain;
use crate::planner::model::PlanInput;
use crate::temporal::state::{PinnedAsked, PinnedView, TemporalVersionStatus};
use crate::temporal::{TemporalClient, TemporalError};
use crate::worker_deployment::remembered::pinned::PinnedCounts;

/// Fills `pinned` on every version the status shows the pinned workflows of, and what was
/// already asked of Temporal about them (from the last status). A failed read keeps the last
/// count (and is tried again on the next reconcile).
pub async fn observe(
    client: &TemporalClient,
    counts: &PinnedCounts,
    deployment: &str,
    prior: Option<&TemporalWorkerDeploymentStatus>,
    input: &mut PlanInput,
) {
    for v in &mut input.temporal.versions {
        v.pinned_asked = pinned_asked(prior, &v.build_id);
    }
    let mut views = Vec::new();
    for build in drain::shown(input) {
        let last = counts.get(deployment, &build);
        // A count made this reconcile for the sunset rules (Drained: pinned only) is fresh.
        let fresh = input.temporal.version(&build).and_then(|v| {
            v.open_pinned_workflows
                .filter(|_| v.status == TemporalVersionStatus::Drained)
        });
        let view = if fresh.is_none() && !drain::due(last.as_ref(), input.now) {
            last
        } else {
            match count(client, deployment, &build, fresh, input.now).await {
                Ok(view) => Some(view),
                // Only logged: the status keeps the last count, with its age.
                Err(e) => {
                    tracing::warn!(build_id = %build, error = %e, "counting pinned workflows for status failed");
                    last
                }
            }
        };
        if let Some(view) = view {
            if let Some(v) = input
                .temporal
                .versions
                .iter_mut()
                .find(|v| v.build_id == build)
            {
                v.pinned = Some(view.clone());
            }
            views.push((build, view));
        }
    }
    counts.set(deployment, views);
}

/// What the last status recorded as asked about `build`'s pinned workflows.
fn pinned_asked(prior: Option<&TemporalWorkerDeploymentStatus>, build: &str) -> PinnedAsked {
    let d = prior.and_then(|s| {
        s.deprecated_versions
            .iter()
            .find(|d| d.version.build_id == build)
    });
    PinnedAsked {
        signal: d.and_then(|d| d.upgrade_signalled_at.as_ref()).map(|t| t.0),
        cancel: d
            .and_then(|d| d.pinned_cancel_requested_at.as_ref())
            .map(|t| t.0),
        terminate: d
            .and_then(|d| d.pinned_terminate_requested_at.as_ref())
            .map(|t| t.0),
    }
}

async fn count(
    client: &TemporalClient,
    deployment: &str,
    build: &str,
    fresh: Option<u64>,
    now: Timestamp,
) -> Result<PinnedView, TemporalError> {
    let count = match fresh {
        Some(n) => n,
        None => client.count_open_workflows(deployment, build, true).await?,
    };
    let oldest = if count > 0 {
        client
            .oldest_open_pinned(deployment, build, drain::SAMPLE)
            .await?
    } else {
        Vec::new()
    };
    Ok(PinnedView {
        count,
        counted_at: now,
        oldest,
    })
}

#[cfg(test)]
mod tests {
    use super::{PinnedCounts, pinned_asked};
    use crate::api::twd::{DeprecatedVersion, TemporalWorkerDeploymentStatus, VersionStatus};
    use crate::fixtures::ago;
    use crate::temporal::state::PinnedView;

    fn view(count: u64) -> PinnedView {
        PinnedView {
            count,
            counted_at: ago(5),
            oldest: Vec::new(),
        }
    }

    #[test]
    fn counts_are_kept_per_deployment_and_forgotten_once_not_shown() {
        let counts = PinnedCounts::default();
        counts.set("ns/a", vec![("v1".into(), view(2)), ("v2".into(), view(0))]);
        counts.set("ns/b", vec![("v1".into(), view(7))]);
        assert_eq!(counts.get("ns/a", "v1"), Some(view(2)));
        assert_eq!(counts.get("ns/b", "v1"), Some(view(7)));
        counts.set("ns/a", vec![("v2".into(), view(1))]);
        assert_eq!(counts.get("ns/a", "v1"), None, "v1 no longer shown");
        assert_eq!(counts.get("ns/a", "v2"), Some(view(1)));
        assert_eq!(
            counts.get("ns/b", "v1"),
            Some(view(7)),
            "other deployments untouched"
        );
    }

    #[test]
    fn what_was_asked_is_read_from_the_last_status() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let mut old = DeprecatedVersion::test("v0", VersionStatus::Draining);
        old.pinned_cancel_requested_at = Some(Time(ago(30)));
        let status = TemporalWorkerDeploymentStatus {
            deprecated_versions: vec![old],
            ..Default::default()
        };
        let asked = pinned_asked(Some(&status), "v0");
        assert_eq!(
            (asked.signal, asked.cancel, asked.terminate),
            (None, Some(ago(30)), None)
        );
        assert_eq!(pinned_asked(Some(&status), "v1"), Default::default());
        assert_eq!(pinned_asked(None, "v0"), Default::default());
    }
}
