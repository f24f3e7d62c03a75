//! `temporal-worker-controller undo NAME`: back to the build that was Current before, within
//! the rollback window. The target is whatever `spec.template` (and a custom build ID) says, so
//! undo puts back the older version's template, read from its versioned Deployment
//! (`crate::cli::template`); the controller then sees a build Current within the window and
//! promotes it at once (a rollback: no gate, no ramp).
//!
//! In a GitOps install a spec patch is reverted by the next sync, so undo prints the change to
//! commit instead. An object counts as GitOps-managed when its own metadata says so
//! ([`gitops_manager`]): that needs no access to the GitOps tool and no guess about the cluster.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::api::TemporalWorkerDeployment;
use crate::api::twd::{DeprecatedVersion, VersionStatus};
use crate::cli::control::{ControlError, FIELD_MANAGER};
use crate::cli::template::{RecoverError, recover};

/// The markers Argo CD and Flux leave on the objects they apply.
const GITOPS_ANNOTATIONS: [(&str, &str); 1] = [("argocd.argoproj.io/tracking-id", "Argo CD")];
const GITOPS_LABELS: [(&str, &str); 2] = [
    ("kustomize.toolkit.fluxcd.io/name", "Flux"),
    ("helm.toolkit.fluxcd.io/name", "Flux"),
];
/// Field managers of GitOps tools (server-side apply and their own updates).
const GITOPS_MANAGERS: [(&str, &str); 3] = [
    ("argocd-controller", "Argo CD"),
    ("kustomize-controller", "Flux"),
    ("helm-controller", "Flux"),
];

#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("{name}: build ID {build}: {source}")]
    Recover {
        name: String,
        build: String,
        source: RecoverError,
    },
    #[error("{0}")]
    NotApplicable(String),
}

/// The older version undo goes back to.
#[derive(Clone, Debug, PartialEq)]
pub struct Previous {
    pub build_id: String,
    pub deployment: String,
}

/// The version that was Current before the present one: of the versions that left routing
/// (Draining or Drained) and still have a Deployment, the one that left last, if that was
/// within `window` of `now`.
pub fn previous(
    twd: &TemporalWorkerDeployment,
    now: Timestamp,
    window: Duration,
) -> Result<Previous, UndoError> {
    let name = twd.metadata.name.clone().unwrap_or_default();
    let status = twd.status.as_ref();
    let current = status
        .and_then(|s| s.current_version.as_ref())
        .map(|v| v.build_id.clone());
    let left = |v: &DeprecatedVersion| {
        let since = v.draining_since.as_ref().or(v.drained_since.as_ref());
        since.map(|t| t.0)
    };
    let last = status
        .into_iter()
        .flat_map(|s| &s.deprecated_versions)
        .filter(|v| {
            matches!(
                v.version.status,
                VersionStatus::Draining | VersionStatus::Drained
            )
        })
        .filter(|v| Some(&v.version.build_id) != current.as_ref())
        .filter_map(|v| Some((left(v)?, v, v.version.deployment_name()?)))
        .max_by_key(|(at, ..)| *at);
    let Some((at, v, deployment)) = last else {
        return Err(UndoError::NotApplicable(format!(
            "{name} has no earlier version with a Deployment to go back to"
        )));
    };
    let age = now.duration_since(at).unsigned_abs();
    if age > window {
        return Err(UndoError::NotApplicable(format!(
            "build ID {} of {name} left routing at {at}, more than the rollback window ({}s) \
             ago: set spec.template back in Git for a normal rollout",
            v.version.build_id,
            window.as_secs()
        )));
    }
    Ok(Previous {
        build_id: v.version.build_id.clone(),
        deployment: deployment.to_string(),
    })
}

/// The GitOps tool that manages `twd`, by the marks it leaves on the objects it applies.
pub fn gitops_manager(twd: &TemporalWorkerDeployment) -> Option<&'static str> {
    let meta = &twd.metadata;
    let annotated = GITOPS_ANNOTATIONS.iter().find(|(k, _)| {
        meta.annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(*k))
    });
    let labelled = GITOPS_LABELS
        .iter()
        .find(|(k, _)| meta.labels.as_ref().is_some_and(|l| l.contains_key(*k)));
    let managed = GITOPS_MANAGERS.iter().find(|(m, _)| {
        meta.managed_fields
            .iter()
            .flatten()
            .any(|f| f.manager.as_deref() == Some(m))
    });
    annotated.or(labelled).or(managed).map(|(_, tool)| *tool)
}

/// The spec fields undo sets: the older template, and the build ID when the object names one.
pub fn spec_change(
    twd: &TemporalWorkerDeployment,
    build: &str,
    template: &PodTemplateSpec,
) -> Value {
    let mut spec = json!({"template": template});
    let options = &twd.spec.worker_options;
    if options.custom_build_id.is_some() {
        spec["workerOptions"] = json!({"customBuildID": build});
    }
    if options.unsafe_custom_build_id.is_some() {
        spec["workerOptions"]["unsafeCustomBuildID"] = json!(build);
    }
    spec
}

/// A JSON merge patch that turns `old` into `new` (removed keys become null; lists whole).
pub fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = serde_json::Map::new();
            for (k, v) in n {
                match o.get(k) {
                    Some(ov) if ov == v => {}
                    Some(ov) => {
                        out.insert(k.clone(), merge_diff(ov, v));
                    }
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

/// Reads `namespace/name` and its earlier version's Deployment, then patches the spec back, or
/// in a GitOps install (or with `print`) prints the change to commit.
pub async fn run(
    name: &str,
    namespace: Option<&str>,
    kube: &crate::cli::kubeconfig::KubeOptions,
    window: Duration,
    print: bool,
) -> Result<(), UndoError> {
    let client = kube.client().await.map_err(ControlError::from)?;
    let ns = namespace.map_or_else(|| client.default_namespace().to_string(), str::to_string);
    let twd = crate::workers::fetch(&client, &ns, name)
        .await
        .map_err(ControlError::from)?
        .ok_or_else(|| ControlError::NotFound(format!("{ns}/{name}")))?;
    let back = previous(&twd, Timestamp::now(), window)?;
    let deployments: kube::Api<Deployment> = kube::Api::namespaced(client.clone(), &ns);
    let deployment = deployments
        .get_opt(&back.deployment)
        .await
        .map_err(ControlError::from)?
        .ok_or_else(|| ControlError::NotFound(format!("Deployment {ns}/{}", back.deployment)))?;
    let deployed = deployment.spec.template;
    let template = recover(&deployed).map_err(|source| UndoError::Recover {
        name: name.to_string(),
        build: back.build_id.clone(),
        source,
    })?;
    let spec = spec_change(&twd, &back.build_id, &template);
    if let Some(tool) = gitops_manager(&twd).or(print.then_some("--print")) {
        print!("{}", git_instructions(name, &back.build_id, tool, &spec));
        return Ok(());
    }
    let old = serde_json::to_value(&twd.spec).unwrap_or(Value::Null);
    let patch = json!({"spec": merge_diff(&old, &merge_into(&old, &spec))});
    println!(
        "Undoing {name}: spec.template back to build ID {} (from Deployment {}); the controller \
         promotes it at once as a rollback",
        back.build_id, back.deployment
    );
    twd.own_api(client)
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(ControlError::from)?;
    println!("patched {ns}/{name}");
    Ok(())
}

/// `old` with the fields of `change` put in (objects merged one level down, for
/// `workerOptions`; the template replaced whole).
fn merge_into(old: &Value, change: &Value) -> Value {
    let mut out = old.clone();
    for (k, v) in change.as_object().into_iter().flatten() {
        match (out.get_mut(k), v) {
            (Some(Value::Object(o)), Value::Object(n)) if k != "template" => {
                o.extend(n.clone());
            }
            _ => out[k] = v.clone(),
        }
    }
    out
}

/// What to commit instead of a patch the GitOps tool would revert.
pub fn git_instructions(name: &str, build: &str, tool: &str, spec: &Value) -> String {
    let yaml = serde_yaml::to_string(&json!({"spec": spec})).unwrap_or_default();
    let why = if tool == "--print" {
        "as asked (--print)".to_string()
    } else {
        format!("{name} is managed by {tool}, whose sync would put a patched spec back")
    };
    format!(
        "Not patching {name}: {why}. To go back to build ID {build}, commit these fields to \
         the object's manifest in Git (the controller promotes it at once as a rollback once \
         synced):\n---\n{yaml}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::twd::{TemporalWorkerDeploymentStatus, VersionInfo};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};

    fn old(build: &str, status: VersionStatus, left_at: i64) -> DeprecatedVersion {
        let at = Time(Timestamp::from_second(left_at).expect("time"));
        let mut v: DeprecatedVersion = serde_json::from_value(json!({
            "buildID": build, "status": "Draining", "deploymentName": format!("orders-{build}")
        }))
        .expect("version");
        v.version.status = status;
        if status == VersionStatus::Drained {
            v.drained_since = Some(at);
        } else {
            v.draining_since = Some(at);
        }
        v
    }

    fn twd(deprecated: Vec<DeprecatedVersion>) -> TemporalWorkerDeployment {
        let mut twd = TemporalWorkerDeployment::test();
        twd.status = Some(TemporalWorkerDeploymentStatus {
            current_version: Some(VersionInfo::test("v3", VersionStatus::Current)),
            deprecated_versions: deprecated,
            ..Default::default()
        });
        twd
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn undo_goes_back_to_the_version_that_left_last_within_the_window() {
        let now = Timestamp::from_second(10_000).expect("time");
        let t = twd(vec![
            old("v1", VersionStatus::Drained, 8_000),
            old("v2", VersionStatus::Draining, 9_000),
        ]);
        let back = previous(&t, now, HOUR).expect("v2");
        assert_eq!(back.build_id, "v2");
        assert_eq!(back.deployment, "orders-v2");
        let e = previous(&t, now, Duration::from_secs(600)).expect_err("outside the window");
        assert!(e.to_string().contains("rollback window"), "{e}");
        let e = previous(&twd(Vec::new()), now, HOUR).expect_err("nothing earlier");
        assert!(e.to_string().contains("no earlier version"), "{e}");
        // A version that never served (Inactive) is not one to go back to.
        let t = twd(vec![old("v2", VersionStatus::Inactive, 9_000)]);
        assert!(previous(&t, now, HOUR).is_err());
    }

    #[test]
    fn gitops_installs_are_told_apart_by_their_marks() {
        let mut t = twd(Vec::new());
        assert_eq!(gitops_manager(&t), None);
        t.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl-client-side-apply".into()),
            ..Default::default()
        }]);
        assert_eq!(gitops_manager(&t), None);
        t.metadata.labels =
            Some([("kustomize.toolkit.fluxcd.io/name".into(), "apps".into())].into());
        assert_eq!(gitops_manager(&t), Some("Flux"));
        t.metadata.labels = None;
        t.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("argocd-controller".into()),
            ..Default::default()
        }]);
        assert_eq!(gitops_manager(&t), Some("Argo CD"));
    }

    #[test]
    fn the_patch_replaces_the_template_and_a_custom_build_id() {
        let mut t = twd(Vec::new());
        t.spec.worker_options.custom_build_id = Some("v3".into());
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "spec": {"containers": [{"name": "worker", "image": "w:v2"}]}}))
        .expect("template");
        let change = spec_change(&t, "v2", &template);
        assert_eq!(change["workerOptions"], json!({"customBuildID": "v2"}));
        let old = json!({"template": {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}},
                         "replicas": 2});
        let new = json!({"template": {"spec": {"x": 2}}, "replicas": 2});
        assert_eq!(
            merge_diff(&old, &new),
            json!({"template": {"metadata": null, "spec": {"x": 2}}})
        );
        let text = git_instructions("orders", "v2", "Argo CD", &change);
        assert!(
            text.contains("managed by Argo CD") && text.contains("image: w:v2"),
            "{text}"
        );
    }
}
