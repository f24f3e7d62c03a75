//! Pure rendering of versioned Deployments: one Deployment per build ID, owned by its
//! `TemporalWorkerDeployment`, with the connection settings injected into every container.

pub(crate) mod inject;
pub mod settings;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::api::{
    ANNOTATION_CONNECTION_HASH, ANNOTATION_CONNECTION_REF, ANNOTATION_POD_TEMPLATE_HASH,
    ANNOTATION_RESTART, ENV_NAMESPACE, GROUP, LABEL_BUILD_ID, LABEL_DEPLOYMENT_NAME,
    TemporalConnectionSpec, TemporalWorkerDeployment, VERSION,
};
use crate::build_id;
use inject::Injection;

/// Everything needed to render the Deployment of one version.
pub struct VersionedDeploymentInput<'a> {
    /// Must have a namespace, a name and a uid (i.e. come from the API server).
    pub twd: &'a TemporalWorkerDeployment,
    pub connection: &'a TemporalConnectionSpec,
    pub build_id: &'a str,
    /// `None` leaves replicas unset (new Deployment) or unchanged (refresh).
    pub replicas: Option<i32>,
    /// The Connection `connection` comes from (`<Kind>/<name>`, [`ANNOTATION_CONNECTION_REF`]);
    /// `None`: the TWD's `connectionRef`.
    pub connection_ref: Option<&'a str>,
}

impl VersionedDeploymentInput<'_> {
    /// The value of [`ANNOTATION_CONNECTION_REF`] for this render.
    fn connection_record(&self) -> String {
        self.connection_ref
            .map_or_else(|| connection_record(self.twd), str::to_string)
    }
}

/// The [`ANNOTATION_CONNECTION_REF`] value of a TWD's `connectionRef`: `<Kind>/<name>`.
pub fn connection_record(twd: &TemporalWorkerDeployment) -> String {
    let reference = &twd.spec.worker_options.connection_ref;
    format!("{}/{}", reference.kind_name(twd.kind_set()), reference.name)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("TemporalWorkerDeployment has no metadata.{0}; it must be read from the API server")]
    MissingMetadata(&'static str),
    #[error(
        "build ID {0:?} is not a valid label value (1-63 of [A-Za-z0-9._-], alphanumeric at both ends)"
    )]
    InvalidBuildId(String),
    #[error("TemporalWorkerDeployment has no spec.template.spec")]
    MissingPodSpec,
    #[error("Deployment {deployment:?} is labelled with build ID {existing:?}, not {requested:?}")]
    BuildIdMismatch {
        deployment: String,
        existing: String,
        requested: String,
    },
}

/// The value of the `temporal.io/deployment-name` label for a TWD name. The same function is
/// used for the list selector, so both sides always agree.
pub fn label_value(twd_name: &str) -> String {
    build_id::clean(twd_name, build_id::MAX_BUILD_ID_LEN)
}

/// Renders the Deployment for `input.build_id` from the TWD's current pod template.
pub fn versioned_deployment(input: &VersionedDeploymentInput) -> Result<Deployment, RenderError> {
    let id = Identity::of(input)?;
    let labels = id.labels();
    let template = render_pod_template(input, &id)?;
    let mut d = Deployment {
        metadata: ObjectMeta {
            name: Some(build_id::deployment_name(id.name, input.build_id)),
            namespace: Some(id.namespace.to_string()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner_reference(&id)]),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: input.replicas,
            min_ready_seconds: input.twd.spec.min_ready(),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                match_expressions: None,
            },
            template,
            strategy: Some(rollout_strategy()),
            progress_deadline_seconds: Some(progress_deadline_seconds(input.twd.spec.min_ready())),
            ..Default::default()
        },
        status: None,
    };
    settings::apply(&mut d, &input.twd.spec, &labels);
    Ok(d)
}

/// Only `spec.deployment` (labels, annotations, rolling update) put on an existing versioned
/// Deployment: its pod template, replicas and selector stay as they are, so no Pod restarts
/// (a Deployment taken over from the Go controller keeps its Pods too).
pub fn refresh_settings(
    existing: &Deployment,
    input: &VersionedDeploymentInput,
) -> Result<Deployment, RenderError> {
    let id = Identity::of(input)?;
    same_build(existing, input)?;
    let mut out = existing.clone();
    out.metadata.managed_fields = None;
    out.status = None;
    settings::apply(&mut out, &input.twd.spec, &id.labels());
    Ok(out)
}

/// The existing Deployment's name, if it carries `input`'s build ID (or none): re-labelling
/// would orphan the pods behind the immutable selector.
fn same_build(
    existing: &Deployment,
    input: &VersionedDeploymentInput,
) -> Result<String, RenderError> {
    let name = existing.name_any();
    match existing.labels().get(LABEL_BUILD_ID) {
        Some(label) if label != input.build_id => Err(RenderError::BuildIdMismatch {
            deployment: name,
            existing: label.clone(),
            requested: input.build_id.to_string(),
        }),
        _ => Ok(name),
    }
}

/// How a versioned Deployment replaces its pods (a connection change, or pod-template drift
/// under a custom build ID) by default, i.e. without a rolling update in `spec.deployment`
/// (`strategy()` in [`settings`]): one extra pod at a time, and never an old pod removed before its
/// replacement is Ready. A Current or Draining version keeps serving its workflows, and new
/// workers that never become ready stall the rollout visibly instead of emptying the version.
pub fn rollout_strategy() -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(0)),
        }),
    }
}

/// How long Kubernetes waits for a rollout of a versioned Deployment to make progress before it
/// reports `Progressing=False` with reason `ProgressDeadlineExceeded`, which the controller
/// reports as `ConnectionRolloutStalled` for a Connection roll.
pub const PROGRESS_DEADLINE_SECONDS: i32 = 600;

/// [`PROGRESS_DEADLINE_SECONDS`] after `minReadySeconds`: Kubernetes requires the deadline to
/// exceed it, and a Pod is not progress until it has been Ready that long.
pub fn progress_deadline_seconds(min_ready_seconds: Option<i32>) -> i32 {
    PROGRESS_DEADLINE_SECONDS.saturating_add(min_ready_seconds.unwrap_or(0).max(0))
}

/// Re-renders an existing versioned Deployment in place, keeping its name, selector and
/// (unless `input.replicas` is set) its replicas.
///
/// - The current target (its build ID is the one the TWD spec computes to) gets a fresh pod
///   template from the spec: this repairs pod-template drift under a custom build ID and any
///   connection drift at once.
/// - Any other version keeps its own pod template (it runs older code): only the injected
///   connection settings and the connection-hash annotation are replaced.
///
/// In both cases the previous injection is removed first, so an auth-mode switch leaves no
/// stale env vars or TLS volume behind.
pub fn refresh_template(
    existing: &Deployment,
    input: &VersionedDeploymentInput,
) -> Result<Deployment, RenderError> {
    let id = Identity::of(input)?;
    same_build(existing, input)?;
    let existing_spec = &existing.spec;
    let spec_build_id = build_id::compute(
        &input.twd.spec.template,
        input.twd.spec.worker_options.build_id_pin(),
    );
    let is_target = spec_build_id.as_deref() == Ok(input.build_id);
    let template = if is_target {
        keep_restart(render_pod_template(input, &id)?, &existing_spec.template)
    } else {
        refresh_connection(&existing_spec.template, input, &id)
    };

    let mut out = existing.clone();
    // Let the API server keep tracking field ownership; status is ignored on update anyway.
    out.metadata.managed_fields = None;
    out.status = None;
    out.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(id.labels());
    let mut spec = existing_spec.clone();
    spec.template = template;
    spec.strategy = Some(rollout_strategy());
    spec.min_ready_seconds = input.twd.spec.min_ready();
    spec.progress_deadline_seconds = Some(progress_deadline_seconds(input.twd.spec.min_ready()));
    if input.replicas.is_some() {
        spec.replicas = input.replicas;
    }
    out.spec = spec;
    settings::apply(&mut out, &input.twd.spec, &id.labels());
    Ok(out)
}

/// A fresh template keeps the restart request its Pods carry (`temporal.io/restart`), so the
/// Deployment keeps saying the request is done (the planner's restart rule 3) and a
/// status that has not recorded it yet does not roll the Pods once more.
fn keep_restart(mut fresh: PodTemplateSpec, existing: &PodTemplateSpec) -> PodTemplateSpec {
    let restart = existing
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_RESTART));
    if let Some(value) = restart {
        fresh
            .metadata
            .get_or_insert_with(ObjectMeta::default)
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_RESTART.to_string(), value.clone());
    }
    fresh
}

/// The TWD facts every render needs, checked once.
struct Identity<'a> {
    /// The owner's kind: `WorkerDeployment` or `TemporalWorkerDeployment`.
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    build_id: &'a str,
}

impl<'a> Identity<'a> {
    fn of(input: &VersionedDeploymentInput<'a>) -> Result<Self, RenderError> {
        let meta = &input.twd.metadata;
        let namespace = meta
            .namespace
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or(RenderError::MissingMetadata("namespace"))?;
        let name = meta
            .name
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or(RenderError::MissingMetadata("name"))?;
        let uid = meta
            .uid
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or(RenderError::MissingMetadata("uid"))?;
        if !build_id::is_label_safe(input.build_id) {
            return Err(RenderError::InvalidBuildId(input.build_id.to_string()));
        }
        Ok(Self {
            kind: input.twd.kind_name(),
            namespace,
            name,
            uid,
            build_id: input.build_id,
        })
    }

    fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_DEPLOYMENT_NAME.to_string(), label_value(self.name)),
            (LABEL_BUILD_ID.to_string(), self.build_id.to_string()),
        ])
    }

    fn temporal_deployment_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

fn owner_reference(id: &Identity) -> OwnerReference {
    OwnerReference {
        api_version: format!("{GROUP}/{VERSION}"),
        kind: id.kind.to_string(),
        name: id.name.to_string(),
        uid: id.uid.to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The user's pod template with our labels, annotations and connection settings added.
fn render_pod_template(
    input: &VersionedDeploymentInput,
    id: &Identity,
) -> Result<PodTemplateSpec, RenderError> {
    let user = &input.twd.spec.template;
    let mut template = user.clone();
    let spec = template.spec.as_mut().ok_or(RenderError::MissingPodSpec)?;
    let deployment_name = id.temporal_deployment_name();
    inject::inject(
        spec,
        &Injection {
            connection: input.connection,
            temporal_namespace: &input.twd.spec.worker_options.temporal_namespace,
            deployment_name: &deployment_name,
            build_id: input.build_id,
        },
    );
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .extend(id.labels());
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(
        ANNOTATION_POD_TEMPLATE_HASH.to_string(),
        build_id::pod_template_hash(user),
    );
    annotations.insert(
        ANNOTATION_CONNECTION_HASH.to_string(),
        build_id::connection_hash(input.connection),
    );
    annotations.insert(
        ANNOTATION_CONNECTION_REF.to_string(),
        input.connection_record(),
    );
    Ok(template)
}

/// An older version's pod template with only the connection settings replaced.
fn refresh_connection(
    existing: &PodTemplateSpec,
    input: &VersionedDeploymentInput,
    id: &Identity,
) -> PodTemplateSpec {
    let mut template = existing.clone();
    let spec = template.spec.get_or_insert_with(Default::default);
    // A connection change must not move old workers to another Temporal namespace.
    let temporal_namespace = inject::injected_value(spec, ENV_NAMESPACE)
        .unwrap_or_else(|| input.twd.spec.worker_options.temporal_namespace.clone());
    let deployment_name = id.temporal_deployment_name();
    inject::inject(
        spec,
        &Injection {
            connection: input.connection,
            temporal_namespace: &temporal_namespace,
            deployment_name: &deployment_name,
            build_id: input.build_id,
        },
    );
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .extend(id.labels());
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(
        ANNOTATION_CONNECTION_HASH.to_string(),
        build_id::connection_hash(input.connection),
    );
    annotations.insert(
        ANNOTATION_CONNECTION_REF.to_string(),
        input.connection_record(),
    );
    template
}

#[cfg(test)]
mod restart_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod worker_tls_tests;
