//! Temporal's records of old versions: which ones are this controller's, and deleting those
//! whose Deployment is gone.
//!
//! Temporal caps versions per worker deployment (`matching.maxVersionsInDeployment`, 100 by
//! default), and records nobody deletes would eventually refuse every new version. But a
//! worker deployment's name is open to anyone: workers run outside Kubernetes (or by another
//! tool) register versions under it too, and such a version never has a Deployment of ours.
//! So the record GC deletes only versions this controller ran:
//!
//! - **The ledger** ([`ledger`], `status.retiredVersions`): the build IDs of old versions that
//!   Temporal knows and that had a versioned Deployment of this worker deployment (ours, or a
//!   predecessor's we took over: same labels and owner). An entry is added while the
//!   Deployment is still there, so it is in the status before sunset deletes the Deployment,
//!   and it survives a restart with the status; it is dropped once Temporal no longer lists
//!   the version. A lost status loses entries, and then records stay: the safe direction.
//! - **A visibility check**: a ledger entry's record is deleted only once visibility counts
//!   no open workflow on it (pinned ones for a Drained version; any for an Inactive one, gate
//!   workflows included), as the Go controller's #577 does for superseded Inactive versions.
//!
//! Versions registered by workers outside Kubernetes are never in the ledger, so their
//! records are left to whoever runs them (and to Temporal's own eviction at its cap).

use jiff::Timestamp;

use crate::planner::clock::{self, DRAIN_POLL, Wake};
use crate::planner::model::PlanInput;
use crate::planner::view::{Role, View};
use crate::temporal::state::{TemporalVersionStatus, VersionState};

/// At most this many version records are deleted in Temporal per reconcile (the Temporal
/// budget is shared; the rest follow on the next passes).
pub const MAX_FORGET_PER_RECONCILE: usize = 3;

/// The ledger to keep in status: the last one, plus every old version Temporal knows that has
/// a Deployment here now, minus the versions Temporal no longer lists (once it is known to
/// list some: an empty or failed read drops nothing).
pub fn ledger(view: &View) -> Vec<String> {
    let input = view.input;
    let listed = input.temporal.exists && !input.temporal.versions.is_empty();
    let mut out: Vec<String> = Vec::new();
    let kept = input
        .retired
        .iter()
        .filter(|b| !listed || input.temporal.version(b).is_some());
    let ours = input
        .deployments
        .iter()
        .filter(|d| matches!(view.role(&d.build_id), Role::Old(Some(_))))
        .map(|d| &d.build_id);
    for build in kept.chain(ours) {
        if !out.contains(build) {
            out.push(build.clone());
        }
    }
    out
}

/// Old versions in the ledger whose Deployment is gone, that Temporal reports Drained or
/// Inactive (nothing pinned can need them), that were not Current within the rollback window
/// and on which visibility counts no open workflow: their records are deleted in Temporal, at
/// most [`MAX_FORGET_PER_RECONCILE`] per reconcile. Temporal itself refuses while it still
/// remembers pollers; the next pass asks again.
pub fn forget(view: &View, wake: &mut Wake) -> Vec<String> {
    let candidates = candidates(view);
    if !candidates.is_empty() {
        // Refused while Temporal remembers pollers, uncounted, pinned, or more than one
        // pass's worth: look again.
        wake.after(DRAIN_POLL);
    }
    candidates
        .into_iter()
        .filter(|v| v.open_pinned_workflows == Some(0))
        .map(|v| v.build_id.clone())
        .take(MAX_FORGET_PER_RECONCILE)
        .collect()
}

/// The versions whose open workflows must be counted before [`forget`] may delete them.
pub fn uncounted(view: &View) -> Vec<String> {
    candidates(view)
        .into_iter()
        .filter(|v| v.open_pinned_workflows.is_none())
        .take(MAX_FORGET_PER_RECONCILE)
        .map(|v| v.build_id.clone())
        .collect()
}

/// Ledger versions whose records may go once nothing is open on them.
fn candidates<'a>(view: &View<'a>) -> Vec<&'a VersionState> {
    let input = view.input;
    if !input.temporal.exists {
        return Vec::new();
    }
    input
        .temporal
        .versions
        .iter()
        .filter(|v| {
            matches!(
                view.role(&v.build_id),
                Role::Old(Some(
                    TemporalVersionStatus::Drained | TemporalVersionStatus::Inactive
                ))
            ) && input.retired.contains(&v.build_id)
                && !input.deployments.iter().any(|d| d.build_id == v.build_id)
                && !rollback_candidate(input, v.last_current_at)
        })
        .collect()
}

/// Current within the rollback window: its record is what makes going back to it a rollback
/// (promoted at once), so it stays until the window has passed.
fn rollback_candidate(input: &PlanInput, last_current_at: Option<Timestamp>) -> bool {
    last_current_at
        .and_then(|t| clock::add(t, input.desired.rollback_window))
        .is_some_and(|until| until > input.now)
}
