//! In-place updates of existing Deployments.
//!
//! - Pod-template drift (target only, custom build ID only): the build ID did not change, so
//!   the change is a rolling update of the same version. Deployments without the hash
//!   annotation (made by something else) are left alone rather than guessed at.
//! - Connection drift: the injected address/TLS settings changed. The target, the Current and
//!   the Ramping version follow the spec's `connectionRef`; an old version (Draining, Drained,
//!   Inactive) keeps the Connection its Deployment records (`temporal.io/connection-ref`) and
//!   follows only edits of that Connection, so a `connectionRef` change leaves its Pods, and the
//!   pinned workflows they serve, where they are (the Go controller v1.10's rule, its PR #525).
//!   An old version without a record (made before it existed, or by a predecessor), or whose
//!   Connection can no longer be read, is not rolled. Pods that carry the current Connection
//!   as a predecessor controller hashed it are not rolled: the plan records our hash beside
//!   theirs instead (`super::takeover`).
//!
//! One update per Deployment: a pod-template refresh re-renders the connection settings too.
//!
//! A roll in place keeps a version's old Pods until the new ones are Ready (see
//! `render::rollout_strategy`), so a Connection whose new workers never become Ready cannot
//! empty a version; [`stalled`] names the versions where Kubernetes gave up waiting, so that
//! the rollout reports it instead of waiting forever.

use crate::planner::model::{DeleteDeployment, ObservedDeployment, UpdateDeployment, UpdateReason};
use crate::planner::takeover::{self, Adoption};
use crate::planner::view::{Role, View};

/// Live Deployments rolled in place to the current Connection settings whose new Pods did not
/// become Ready by the Deployment's progress deadline (`ProgressDeadlineExceeded`). A
/// Deployment still carrying older settings is about to be rolled again, so its stall is
/// not about the current Connection. The stall clears by itself once Kubernetes sees the new
/// Pods Ready, or once a fixed Connection rolls the Deployment again.
pub fn stalled<'a>(view: &View<'a>) -> Vec<&'a ObservedDeployment> {
    view.input
        .deployments
        .iter()
        .filter(|d| {
            !d.deleting
                && d.rolled_in_place
                && d.progress_deadline_exceeded
                && wanted(view, d)
                    .is_none_or(|w| w.hash.is_empty() || d.connection_reads_as(w.hash))
        })
        .collect()
}

/// The Connection settings a Deployment's Pods should carry.
struct Wanted<'a> {
    /// `None`: the spec's Connection; `Some`: the other one its Deployment records.
    record: Option<&'a str>,
    /// The hash of that Connection's settings (empty: not known this pass).
    hash: &'a str,
}

/// What `d` should carry; `None`: leave its Connection settings as they are.
fn wanted<'a>(view: &View<'a>, d: &'a ObservedDeployment) -> Option<Wanted<'a>> {
    let input = view.input;
    let spec = Wanted {
        record: None,
        hash: input.connection_hash.as_str(),
    };
    match view.role(&d.build_id) {
        Role::Target | Role::Current | Role::Ramping => Some(spec),
        Role::Old(_) => {
            let record = d.connection_ref.as_deref()?;
            if record == input.connection_ref {
                return Some(spec);
            }
            let hash = input.recorded_connections.get(record)?;
            Some(Wanted {
                record: Some(record),
                hash: hash.as_str(),
            })
        }
    }
}

/// The in-place updates, and the take-over records that replace an update when a Deployment's
/// Pods carry the current Connection the predecessor's way (`takeover::connection_adoption`).
pub fn updates(
    view: &View,
    deleting: &[DeleteDeployment],
) -> (Vec<Adoption>, Vec<UpdateDeployment>) {
    let desired = &view.input.desired;
    let mut adopt = Vec::new();
    let mut out = Vec::new();
    for d in view.input.deployments.iter().filter(|d| !d.deleting) {
        if deleting.iter().any(|x| x.name == d.name) {
            continue;
        }
        let template_drift = desired.custom_build_id
            && d.build_id == view.target
            && d.pod_template_hash
                .as_deref()
                .is_some_and(|h| !h.is_empty())
            && !d.template_reads_as(&desired.pod_template_hash);
        let (record, hash) = wanted(view, d).map_or((None, ""), |w| (w.record, w.hash));
        let mut connection_drift = !hash.is_empty() && !d.connection_reads_as(hash);
        if connection_drift
            && record.is_none()
            && let Some(record) =
                takeover::connection_adoption(d, hash, &view.input.predecessor_connection_hash)
        {
            adopt.push(Adoption {
                name: d.name.clone(),
                build_id: d.build_id.clone(),
                template: None,
                connection: Some(record),
            });
            connection_drift = false;
        }
        // Deployments with no record and a spec without settings are equal (None == None),
        // so a predecessor's Deployment is not touched until the user sets something.
        let settings_drift = d.settings != desired.deployment_settings;
        let reason = if template_drift {
            UpdateReason::PodTemplateDrift
        } else if connection_drift {
            UpdateReason::ConnectionDrift
        } else if settings_drift {
            UpdateReason::SettingsDrift
        } else {
            continue;
        };
        out.push(UpdateDeployment {
            name: d.name.clone(),
            build_id: d.build_id.clone(),
            reason,
            connection: record.map(str::to_string),
        });
    }
    (adopt, out)
}
