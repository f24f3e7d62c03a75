//! `TemporalWorkerOwnedResource` (`twor`): one namespaced object (an HPA, a
//! PodDisruptionBudget, a KEDA ScaledObject, …) copied once per live worker version of a
//! `TemporalWorkerDeployment`. Rendering lives in the `owned` module.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::twd::WAITING_FOR_CONTROLLER;

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "temporal.io",
    version = "v1alpha1",
    kind = "TemporalWorkerOwnedResource",
    root = "TemporalWorkerOwnedResourceCrd",
    plural = "temporalworkerownedresources",
    shortname = "twor",
    category = "temporal",
    namespaced,
    status = "TemporalWorkerOwnedResourceStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Worker","type":"string","jsonPath":".spec.workerRef.name"}"#,
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".spec.object.kind"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.workerDeploymentRef) || has(self.workerRef) || has(self.temporalWorkerDeploymentRef)", "message": "workerDeploymentRef must be set (or workerRef, or temporalWorkerDeploymentRef for migration compatibility)"},
    {"rule": "[has(self.workerDeploymentRef), has(self.workerRef), has(self.temporalWorkerDeploymentRef)].filter(x, x).size() <= 1", "message": "only one of workerDeploymentRef, workerRef or temporalWorkerDeploymentRef may be set"},
    {"rule": "has(self.template) != has(self.object)", "message": "set exactly one of template or its alias object"},
    {"rule": "(has(self.workerDeploymentRef) ? self.workerDeploymentRef.name : has(self.workerRef) ? self.workerRef.name : has(self.temporalWorkerDeploymentRef) ? self.temporalWorkerDeploymentRef.name : '') == (has(oldSelf.workerDeploymentRef) ? oldSelf.workerDeploymentRef.name : has(oldSelf.workerRef) ? oldSelf.workerRef.name : has(oldSelf.temporalWorkerDeploymentRef) ? oldSelf.temporalWorkerDeploymentRef.name : '')", "message": "the worker reference is immutable: create a new TemporalWorkerOwnedResource for another worker"}
]))]
pub struct TemporalWorkerOwnedResourceSpec {
    /// The worker deployment in this namespace whose versions get a copy (a
    /// `WorkerDeployment` for a `WorkerResourceTemplate`, a `TemporalWorkerDeployment` for a
    /// `TemporalWorkerOwnedResource`). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_deployment_ref: Option<WorkerRef>,
    /// The seed name of `workerDeploymentRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_ref: Option<WorkerRef>,
    /// Deprecated name of `workerDeploymentRef`, accepted as the Go controller accepts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temporal_worker_deployment_ref: Option<WorkerRef>,
    /// The object copied per version: `apiVersion`, `kind` and the kind's fields, without
    /// `metadata.name` or `metadata.namespace` (the controller names each copy). `null` or
    /// `{}` at an injection point (`scaleTargetRef`, `selector.matchLabels`, …) asks the
    /// controller to fill it for each version; see docs/owned-resources.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "embedded_template")]
    pub template: Option<serde_json::Value>,
    /// The seed name of `template`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "embedded_object")]
    pub object: Option<serde_json::Value>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct WorkerRef {
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 63))]
    pub name: String,
}

/// Any Kubernetes object; the API server checks `apiVersion`, `kind` and `metadata` and keeps
/// every other field as written.
fn embedded(field: &str) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true,
        "required": ["apiVersion", "kind"],
        // CEL sees metadata.name of an embedded object (not its namespace, which the
        // controller's own rules refuse).
        "x-kubernetes-validations": [{
            "rule": "!has(self.metadata) || !has(self.metadata.name) || self.metadata.name == ''",
            "message": format!("spec.{field}.metadata.name must not be set: the controller names each version's copy")
        }]
    })
}

fn embedded_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    embedded("object")
}

fn embedded_template(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    embedded("template")
}

/// Status: rewritten after every pass. Until the controller first writes it, it reads as
/// Ready=Unknown/WaitingForController (a schema default, as for the TWD), so kstatus and
/// `kubectl wait` see it in progress from the first read.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {
    "conditions": [{
        "type": "Ready",
        "status": "Unknown",
        "reason": WAITING_FOR_CONTROLLER,
        "message": "Waiting for the controller to observe this TemporalWorkerOwnedResource",
        "lastTransitionTime": "1970-01-01T00:00:00Z"
    }]
}))]
pub struct TemporalWorkerOwnedResourceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// One entry per live version of the worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<OwnedVersionStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The copy of one version.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnedVersionStatus {
    #[serde(rename = "buildID")]
    pub build_id: String,
    /// Name of the copy (same namespace).
    pub resource_name: String,
    /// `apiVersion` and `kind` of the copy, so a later kind change can remove it.
    pub api_version: String,
    pub kind: String,
    /// True when the copy as last rendered was accepted by the API server.
    pub applied: bool,
    /// Why it was not applied (validation, rendering or the API server's message).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Hash of the applied copy; an unchanged render is not written again.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub applied_hash: String,
}

/// An owned-resource template, served as `WorkerResourceTemplate` and as
/// `TemporalWorkerOwnedResource` (see [`crate::api::kinds`]);
/// `TemporalWorkerOwnedResourceCrd` exists only to generate the schema.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TemporalWorkerOwnedResource {
    // Read without them (a manifest built in code), an object is of the seed kind.
    #[serde(default = "crate::api::kinds::default_api_version")]
    pub api_version: String,
    #[serde(default = "crate::api::kinds::default_template_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pub spec: TemporalWorkerOwnedResourceSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TemporalWorkerOwnedResourceStatus>,
}

crate::api::kinds::served_model!(
    TemporalWorkerOwnedResource,
    TemporalWorkerOwnedResourceSpec,
    TemporalWorkerOwnedResourceStatus,
    crate::api::kinds::Model::Template
);

/// Stands in for a missing `template`/`object` (the CRD requires one; the controller's rules
/// then report "must be an object").
static NO_OBJECT: serde_json::Value = serde_json::Value::Null;

impl TemporalWorkerOwnedResourceSpec {
    /// A spec naming `worker` and copying `object`, under the given kind set's field names.
    pub fn of(set: crate::api::kinds::KindSet, worker: &str, object: serde_json::Value) -> Self {
        let worker = Some(WorkerRef {
            name: worker.to_string(),
        });
        match set {
            crate::api::kinds::KindSet::Canonical => Self {
                worker_deployment_ref: worker,
                worker_ref: None,
                temporal_worker_deployment_ref: None,
                template: Some(object),
                object: None,
            },
            crate::api::kinds::KindSet::Seed => Self {
                worker_deployment_ref: None,
                worker_ref: worker,
                temporal_worker_deployment_ref: None,
                template: None,
                object: Some(object),
            },
        }
    }

    /// The worker deployment's name, under whichever of its three field names was used.
    pub fn worker_name(&self) -> &str {
        self.worker_deployment_ref
            .as_ref()
            .or(self.worker_ref.as_ref())
            .or(self.temporal_worker_deployment_ref.as_ref())
            .map(|r| r.name.as_str())
            .unwrap_or_default()
    }

    /// The object copied per version (`template`, or its seed name `object`).
    pub fn object(&self) -> &serde_json::Value {
        self.template
            .as_ref()
            .or(self.object.as_ref())
            .unwrap_or(&NO_OBJECT)
    }

    /// The field path of [`Self::object`], for messages.
    pub fn object_path(&self) -> &'static str {
        if self.template.is_some() {
            "spec.template"
        } else {
            "spec.object"
        }
    }

    /// True when the object is an autoscaler that will target each version's Deployment (an
    /// HPA or a KEDA ScaledObject with `spec.scaleTargetRef` `null` or `{}`): the controller
    /// then leaves every version's replicas to it.
    pub fn is_autoscaler(&self) -> bool {
        let kind = self
            .object()
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default();
        let autoscaler = ["HorizontalPodAutoscaler", "ScaledObject"]
            .iter()
            .any(|k| k.eq_ignore_ascii_case(kind));
        let opted_in = match self
            .object()
            .get("spec")
            .and_then(|s| s.get("scaleTargetRef"))
        {
            Some(serde_json::Value::Null) => true,
            Some(serde_json::Value::Object(m)) => m.is_empty(),
            _ => false,
        };
        autoscaler && opted_in
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(object: serde_json::Value) -> TemporalWorkerOwnedResourceSpec {
        TemporalWorkerOwnedResourceSpec::of(crate::api::kinds::KindSet::Seed, "w", object)
    }

    #[test]
    fn autoscalers_are_hpas_and_scaled_objects_targeting_each_version() {
        let hpa =
            |s: serde_json::Value| spec(json!({"kind": "HorizontalPodAutoscaler", "spec": s}));
        assert!(hpa(json!({"scaleTargetRef": null})).is_autoscaler());
        assert!(
            spec(json!({"kind": "ScaledObject", "spec": {"scaleTargetRef": {}}})).is_autoscaler()
        );
        assert!(!hpa(json!({"maxReplicas": 3})).is_autoscaler());
        assert!(!hpa(json!({"scaleTargetRef": {"name": "x"}})).is_autoscaler());
        assert!(
            !spec(json!({"kind": "PodDisruptionBudget", "spec": {"scaleTargetRef": {}}}))
                .is_autoscaler()
        );
    }
}
