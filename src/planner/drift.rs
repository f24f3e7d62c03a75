//! In-place updates of existing Deployments.
//!
//! - Pod-template drift (target only, custom build ID only): the build ID did not change, so
//!   the change is a rolling update of the same version. Deployments without the hash
//!   annotation (made by something else) are left alone rather than guessed at.
//! - Connection drift (every version): the injected address/TLS settings changed.
//!
//! One update per Deployment: a pod-template refresh re-renders the connection settings too.

use crate::planner::model::{DeleteDeployment, UpdateDeployment, UpdateReason};
use crate::planner::view::View;

pub fn updates(view: &View, deleting: &[DeleteDeployment]) -> Vec<UpdateDeployment> {
    let desired = &view.input.desired;
    let mut out = Vec::new();
    for d in view.input.deployments.iter().filter(|d| !d.deleting) {
        if deleting.iter().any(|x| x.name == d.name) {
            continue;
        }
        let template_drift = desired.custom_build_id
            && d.build_id == view.target
            && d.pod_template_hash
                .as_deref()
                .is_some_and(|h| !h.is_empty() && h != desired.pod_template_hash);
        let wanted = view.input.connection_hash.as_str();
        let connection_drift = !wanted.is_empty() && d.connection_hash.as_deref() != Some(wanted);
        let reason = if template_drift {
            UpdateReason::PodTemplateDrift
        } else if connection_drift {
            UpdateReason::ConnectionDrift
        } else {
            continue;
        };
        out.push(UpdateDeployment {
            name: d.name.clone(),
            build_id: d.build_id.clone(),
            reason,
        });
    }
    out
}
