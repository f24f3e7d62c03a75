//! The pod template: what the controller injects must not be set by hand, and which image
//! references are mutable (a warning, never a refusal).

use k8s_openapi::api::core::v1::Container;

use crate::api::twd::TemporalWorkerDeployment;
use crate::api::{CA_MOUNT_PATH, CA_VOLUME, RESERVED_ENV, TLS_MOUNT_PATH, TLS_VOLUME};
use crate::build_id;
use crate::planner::model::MutableImage;

use super::problems::Problems;

pub(super) fn check_template(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let Some(pod) = twd.spec.template.spec.as_ref() else {
        p.add(
            "spec.template.spec.containers",
            "at least one container is required",
        );
        return;
    };
    if pod.containers.is_empty() {
        p.add(
            "spec.template.spec.containers",
            "at least one container is required",
        );
    }
    for (i, c) in pod.containers.iter().enumerate() {
        check_container(i, c, p);
    }
    for (i, v) in pod.volumes.iter().flatten().enumerate() {
        if v.name == TLS_VOLUME || v.name == CA_VOLUME {
            p.add(
                format!("spec.template.spec.volumes[{i}].name"),
                format!(
                    "{:?} is reserved for the client certificate and server CA the controller \
                     mounts; use another name",
                    v.name
                ),
            );
        }
    }
}

pub(super) fn check_container(i: usize, c: &Container, p: &mut Problems) {
    for (j, env) in c.env.iter().flatten().enumerate() {
        if RESERVED_ENV.contains(&env.name.as_str()) {
            p.add(
                format!("spec.template.spec.containers[{i}].env[{j}]"),
                format!(
                    "container {:?} sets {}, which the controller injects from the \
                     TemporalConnection and workerOptions; remove it",
                    c.name, env.name
                ),
            );
        }
    }
    for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
        let path = m.mount_path.trim_end_matches('/');
        if path == TLS_MOUNT_PATH || path == CA_MOUNT_PATH {
            p.add(
                format!("spec.template.spec.containers[{i}].volumeMounts[{j}].mountPath"),
                format!(
                    "container {:?} mounts {path}, which is reserved for the client certificate \
                     and server CA the controller mounts",
                    c.name
                ),
            );
        }
    }
}

/// The containers (init containers too) whose image reference is mutable
/// ([`build_id::mutable_reference`]): reported as a warning, never refused.
pub fn mutable_images(template: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Vec<MutableImage> {
    let Some(pod) = &template.spec else {
        return Vec::new();
    };
    pod.init_containers
        .iter()
        .flatten()
        .chain(&pod.containers)
        .filter_map(|c| {
            let image = c.image.as_deref()?;
            build_id::mutable_reference(image).map(|why| MutableImage {
                container: c.name.clone(),
                image: image.trim().to_string(),
                why,
            })
        })
        .collect()
}
