//! Retiring old versions: scale-down and deletion of Deployments that no longer serve new
//! work, and the "too many versions" guard on creating a new one.
//!
//! | Old version (not target/current/ramping) | Action |
//! |---|---|
//! | unknown to Temporal (NotRegistered), Temporal lists other versions | delete now (unless it is on another Connection than the spec's: kept) |
//! | Inactive (never activated, or superseded before promotion) | once no open workflow is pinned to it: scale to 0, delete once its pods are gone |
//! | Current or Ramping (Temporal's own status, even when routing lags) | never touched |
//! | Draining | never scaled down or deleted (found at 0 with open pinned workflows: woken or reported, `scaling.rs`) |
//! | Drained | once no open workflow is pinned to it: scale to 0 at `drainedSince + scaledownDelay`, delete `deleteDelay` after the scale-down actually happened (once at 0) |
//!
//! The status is the server's own per-version status. "No open workflow pinned" is a visibility
//! count (gate workflows included) that the observe stage makes only for the versions
//! [`pinned_check_candidates`] names; an uncounted version is never retired.
//!
//! Nothing is scaled down or deleted while Temporal does not know the worker deployment at
//! all: that can be a first rollout or a transient read, and guessing wrong deletes workers.
//!
//! Once an old version's Deployment is gone, its record in Temporal is deleted too, if it is
//! one this controller ran (`super::records`).

use jiff::Timestamp;

use crate::planner::clock::{self, DRAIN_POLL, Wake};
use crate::planner::model::{
    DeleteDeployment, DeleteReason, Desired, ObservedDeployment, PlanInput, ScaleDeployment,
    ScaleReason,
};
use crate::planner::records;
use crate::planner::view::{Role, View};
use crate::temporal::state::TemporalVersionStatus;

/// How soon to look again while a version due for scale-down waits for its autoscaler copy to
/// be removed.
pub const AUTOSCALER_HANDOFF_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Annotation on a versioned Deployment: when sunset scaled it to zero (RFC 3339). Deletion
/// counts `deleteDelay` from it, so a drainage noticed late (a controller outage, a slow
/// drainage report) still leaves the documented warm window before the Deployment goes.
pub const ANNOTATION_SCALED_DOWN_AT: &str = "temporal.io/scaled-down-at";

/// A Drained version's scale-down and deletion deadlines (`None`: never).
pub type Deadlines = (Option<Timestamp>, Option<Timestamp>);

/// When a drained version is scaled to zero and when its Deployment is deleted.
/// Deletion counts from the later of the scale-down deadline and the recorded scale-down
/// (`scaled_down_at`, the Deployment's [`ANNOTATION_SCALED_DOWN_AT`]); without a record (a
/// version scaled to zero by hand or by an older controller) from the deadline.
pub fn deadlines(
    desired: &Desired,
    drained_since: Timestamp,
    scaled_down_at: Option<Timestamp>,
) -> Deadlines {
    let scaledown_at = clock::add(drained_since, desired.scaledown_delay);
    // A record older than the deadline is stale (a version scaled up again after an earlier
    // sunset, then scaled to zero by someone else): the deadline wins.
    let base = match (scaledown_at, scaled_down_at) {
        (Some(due), Some(done)) => Some(due.max(done)),
        (due, _) => due,
    };
    let delete_at = base.and_then(|t| clock::add(t, desired.delete_delay));
    (scaledown_at, delete_at)
}

/// Whether an old version no longer holds a slot worth protecting: it has no pods left and
/// will never receive work again (Drained), or never received any (Inactive, scaled to 0).
/// Versions Temporal does not know are not counted here: they use no server-side slot.
pub fn eligible_for_deletion(
    d: &ObservedDeployment,
    status: Option<TemporalVersionStatus>,
) -> bool {
    match status {
        Some(TemporalVersionStatus::Drained) => d.status_replicas == 0,
        Some(TemporalVersionStatus::Inactive) => d.status_replicas == 0 && d.replicas == Some(0),
        _ => false,
    }
}

/// What retiring old versions wants this reconcile.
#[derive(Debug, Default, PartialEq)]
pub struct Retirement {
    pub scale: Vec<ScaleDeployment>,
    pub delete: Vec<DeleteDeployment>,
    /// Old versions Temporal knows that are not yet eligible for deletion and stay after
    /// this plan (the count the creation guard compares with the limit).
    pub ineligible: usize,
}

/// The versions whose open pinned workflows must be counted before this plan: exactly those
/// [`retire`] would scale down or delete (Inactive or Drained) if none were pinned to them.
/// Pure; the observe stage counts only these, so visibility is asked about a handful of
/// versions at their deadlines and not about every version on every reconcile.
pub fn pinned_check_candidates(input: &PlanInput) -> Vec<String> {
    let mut assumed = input.clone();
    for v in &mut assumed.temporal.versions {
        if v.open_pinned_workflows.is_none() {
            v.open_pinned_workflows = Some(0);
        }
    }
    let view = View::new(&assumed);
    let retirement = retire(&view, &mut Wake::default());
    let mut out: Vec<String> = Vec::new();
    let builds = retirement
        .scale
        .iter()
        .map(|s| &s.build_id)
        .chain(retirement.delete.iter().map(|d| &d.build_id));
    for build in builds {
        let known = input.temporal.version(build);
        let uncounted = known.is_some_and(|v| v.open_pinned_workflows.is_none());
        if uncounted && !out.contains(build) {
            out.push(build.clone());
        }
    }
    // The record GC's visibility check (`super::records`).
    for build in records::uncounted(&View::new(input)) {
        if !out.contains(&build) {
            out.push(build);
        }
    }
    out
}

/// True once visibility said no open workflow is pinned to the version.
fn unpinned(input: &PlanInput, build_id: &str) -> bool {
    input
        .temporal
        .version(build_id)
        .is_some_and(|v| v.open_pinned_workflows == Some(0))
}

pub fn retire(view: &View, wake: &mut Wake) -> Retirement {
    let input = view.input;
    let now = input.now;
    let temporal_known = input.temporal.exists && !input.temporal.versions.is_empty();
    let mut out = Retirement::default();
    for d in input.deployments.iter().filter(|d| !d.deleting) {
        let Role::Old(status) = view.role(&d.build_id) else {
            continue;
        };
        let mut deleted = false;
        match status {
            // On another Connection (kept there by a `connectionRef` change), which may reach
            // another Temporal than the one asked: unknown here proves nothing.
            None if temporal_known && !on_other_connection(input, d) => {
                out.delete.push(delete(d, DeleteReason::NotRegistered));
                deleted = true;
            }
            None => {}
            Some(
                version_status @ (TemporalVersionStatus::Inactive | TemporalVersionStatus::Drained),
            ) if !unpinned(input, &d.build_id) => {
                // Workflows are pinned to it (a gate, an override, a batch move), or nobody
                // counted yet: its workers stay. Look again at the drain pace, and at its sunset
                // deadlines: a Drained version is counted only once a deadline is due
                // (`pinned_check_candidates`), so without that wake-up a scale-down would wait
                // for the next drain poll, up to 30 s past its delay.
                wake.after(DRAIN_POLL);
                if version_status == TemporalVersionStatus::Drained
                    && let Some(deadlines) = drained_deadlines(input, d)
                {
                    wake_at_both(wake, now, deadlines);
                }
            }
            Some(TemporalVersionStatus::Inactive) => {
                if d.replicas != Some(0) {
                    out.scale.push(scale_to_zero(d, now));
                } else if d.status_replicas == 0 {
                    // Never received work: nothing to drain. Keeping it would count against the
                    // version limit forever (Inactive versions never drain).
                    out.delete.push(delete(d, DeleteReason::Superseded));
                    deleted = true;
                }
            }
            Some(TemporalVersionStatus::Draining) => wake.after(DRAIN_POLL),
            Some(TemporalVersionStatus::Drained) => {
                deleted = retire_drained(input, d, wake, &mut out)
            }
            // Temporal still routes to it even though routing did not say so: leave it alone.
            Some(TemporalVersionStatus::Current | TemporalVersionStatus::Ramping) => {}
        }
        if !deleted && status.is_some() && !eligible_for_deletion(d, status) {
            out.ineligible += 1;
        }
    }
    out
}

/// A Drained version with no pinned workflow, by its sunset deadlines: scaled to zero once the
/// scale-down delay is due (its autoscaler copy first), deleted once the delete delay is.
/// Whether it was deleted.
fn retire_drained(
    input: &PlanInput,
    d: &ObservedDeployment,
    wake: &mut Wake,
    out: &mut Retirement,
) -> bool {
    let now = input.now;
    let Some((scaledown_at, delete_at)) = drained_deadlines(input, d) else {
        return false;
    };
    wake_at_both(wake, now, (scaledown_at, delete_at));
    let due = |t: Option<Timestamp>| t.is_some_and(|t| t <= now);
    if d.replicas == Some(0) && due(delete_at) {
        out.delete.push(delete(d, DeleteReason::Sunset));
        return true;
    }
    if d.replicas != Some(0) && due(scaledown_at) {
        if d.autoscaler_present {
            // Its autoscaler copy goes first (the TWOR controller removes it once status shows
            // the scale-down due), so the two never fight.
            wake.after(AUTOSCALER_HANDOFF_POLL);
        } else {
            out.scale.push(scale_to_zero(d, now));
        }
    }
    false
}

/// Whether `d` records a Connection other than the spec's (`super::drift`).
fn on_other_connection(input: &PlanInput, d: &ObservedDeployment) -> bool {
    d.connection_ref
        .as_deref()
        .is_some_and(|r| !input.connection_ref.is_empty() && r != input.connection_ref)
}

/// A Drained version's scale-down and deletion deadlines, counted from when Temporal reported
/// it Drained (`None` without that time).
fn drained_deadlines(input: &PlanInput, d: &ObservedDeployment) -> Option<Deadlines> {
    let since = input.temporal.version(&d.build_id)?.drainage_changed_at?;
    let recorded = d.scaled_down_at.filter(|_| d.replicas == Some(0));
    Some(deadlines(&input.desired, since, recorded))
}

/// Come back at the scale-down and at the deletion deadline, whichever are ahead.
fn wake_at_both(wake: &mut Wake, now: Timestamp, (scaledown_at, delete_at): Deadlines) {
    for t in [scaledown_at, delete_at].into_iter().flatten() {
        wake.at(now, t);
    }
}

fn scale_to_zero(d: &ObservedDeployment, now: Timestamp) -> ScaleDeployment {
    ScaleDeployment {
        name: d.name.clone(),
        build_id: d.build_id.clone(),
        replicas: 0,
        reason: ScaleReason::Sunset,
        record_scaled_down_at: Some(now),
    }
}

fn delete(d: &ObservedDeployment, reason: DeleteReason) -> DeleteDeployment {
    DeleteDeployment {
        name: d.name.clone(),
        build_id: d.build_id.clone(),
        reason,
    }
}

/// Message for a target held back by the version limit: how many block and what to do.
pub fn too_many_versions_message(ineligible: usize, desired: &Desired) -> String {
    format!(
        "Not creating the Deployment for build ID {}: {ineligible} older versions are not yet eligible for deletion \
         (limit {}). Creation resumes as they drain and are scaled down; finish or cancel workflows pinned to old \
         versions, or shorten spec.sunset.scaledownDelay",
        desired.build_id, desired.max_versions_ineligible_for_deletion
    )
}
