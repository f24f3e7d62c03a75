//! What a `spec.object` may contain: the rules the controller checks before rendering (so the
//! feature is safe with the admission webhook off) and the webhook checks at admission
//! (`src/webhook/twor.rs`), in the same words.
//! Pure; every refusal names the field and says what to write instead.

use serde_json::Value;

use crate::owned::template;

/// Kinds accepted when the controller is not told otherwise.
pub const DEFAULT_ALLOWED_KINDS: &[&str] = &[
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "ScaledObject",
];

/// Keys of the external/object metric selectors the controller fills per version.
pub const METRIC_LABEL_DEPLOYMENT: &str = "temporal_worker_deployment_name";
pub const METRIC_LABEL_BUILD_ID: &str = "temporal_worker_build_id";
pub const METRIC_LABEL_NAMESPACE: &str = "temporal_namespace";
const METRIC_LABELS: &[&str] = &[
    METRIC_LABEL_DEPLOYMENT,
    METRIC_LABEL_BUILD_ID,
    METRIC_LABEL_NAMESPACE,
];

/// Keys of a KEDA `temporal` trigger's metadata the controller fills per version; a user's
/// non-empty value is refused. `taskQueue` is filled too, but a user's own value is kept.
pub const KEDA_DEPLOYMENT_NAME: &str = "workerDeploymentName";
pub const KEDA_BUILD_ID: &str = "workerDeploymentBuildId";
pub const KEDA_NAMESPACE: &str = "namespace";
pub const KEDA_TASK_QUEUE: &str = "taskQueue";
const KEDA_OWNED_KEYS: &[&str] = &[KEDA_DEPLOYMENT_NAME, KEDA_BUILD_ID, KEDA_NAMESPACE];

/// Every problem found, joined for the condition message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct Invalid(pub Vec<String>);

/// True for the opt-in markers at an injection point: `null` or an empty map.
pub fn opts_in(v: &Value) -> bool {
    v.is_null() || v.as_object().is_some_and(serde_json::Map::is_empty)
}

/// True for the opt-in markers of a string injection point: `null` or `""`.
pub fn opts_in_str(v: &Value) -> bool {
    v.is_null() || v.as_str() == Some("")
}

/// The external/object metric selectors' `matchLabels` of an HPA, with their paths.
pub fn metric_selectors(spec: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for (i, m) in array(spec.get("metrics")).iter().enumerate() {
        for source in ["external", "object"] {
            if let Some(labels) = m
                .get(source)
                .and_then(|s| s.get("metric"))
                .and_then(|m| m.get("selector"))
                .and_then(|s| s.as_object())
                .and_then(|s| s.get("matchLabels"))
            {
                let path = format!("spec.metrics[{i}].{source}.metric.selector.matchLabels");
                out.push((path, labels));
            }
        }
    }
    out
}

/// KEDA `temporal` triggers' metadata maps, with their paths.
pub fn temporal_triggers(spec: &Value) -> Vec<(String, &serde_json::Map<String, Value>)> {
    array(spec.get("triggers"))
        .iter()
        .enumerate()
        .filter(|(_, t)| t.get("type").and_then(Value::as_str) == Some("temporal"))
        .filter_map(|(i, t)| {
            let meta = t.get("metadata")?.as_object()?;
            Some((format!("spec.triggers[{i}].metadata"), meta))
        })
        .collect()
}

fn array(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// Checks `object` against every rule; `allowed_kinds` is matched case-insensitively.
/// [`check`] of a spec's object, its messages naming the field the user wrote:
/// `spec.template` (WorkerResourceTemplate) or `spec.object` (TemporalWorkerOwnedResource).
pub fn check_template_spec(
    spec: &crate::api::TemporalWorkerOwnedResourceSpec,
    allowed_kinds: &[&str],
) -> Result<(), Invalid> {
    check(spec.object(), allowed_kinds).map_err(|Invalid(problems)| {
        let path = spec.object_path();
        Invalid(
            problems
                .into_iter()
                .map(|m| m.replacen("spec.object", path, 1))
                .collect(),
        )
    })
}

pub fn check(object: &Value, allowed_kinds: &[&str]) -> Result<(), Invalid> {
    let mut problems = Vec::new();
    let Some(map) = object.as_object() else {
        return Err(Invalid(vec!["spec.object must be an object".into()]));
    };
    for field in ["apiVersion", "kind"] {
        if map
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            problems.push(format!("spec.object.{field} is required"));
        }
    }
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
    if !kind.is_empty() && !allowed_kinds.iter().any(|k| k.eq_ignore_ascii_case(kind)) {
        problems.push(format!(
            "kind {kind:?} is not allowed (allowed: {})",
            allowed_kinds.join(", ")
        ));
    }
    check_metadata(map.get("metadata"), &mut problems);
    if map.contains_key("status") {
        problems.push("spec.object.status must not be set".into());
    }
    if let Some(spec) = map.get("spec") {
        check_spec(spec, &mut problems);
    }
    check_templates(object, "spec.object", &mut problems);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Invalid(problems))
    }
}

fn check_metadata(metadata: Option<&Value>, problems: &mut Vec<String>) {
    let Some(meta) = metadata.and_then(Value::as_object) else {
        return;
    };
    for (field, why) in [
        ("name", "the controller names each version's copy"),
        (
            "namespace",
            "copies live in the TemporalWorkerOwnedResource's namespace",
        ),
        ("generateName", "the controller names each version's copy"),
        (
            "ownerReferences",
            "each copy is owned by its version's Deployment",
        ),
        ("finalizers", "copies are removed by garbage collection"),
    ] {
        let set = meta.get(field).is_some_and(|v| match v {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            _ => true,
        });
        if set {
            problems.push(format!(
                "spec.object.metadata.{field} must not be set: {why}"
            ));
        }
    }
}

fn check_spec(spec: &Value, problems: &mut Vec<String>) {
    for field in ["minReplicas", "minReplicaCount"] {
        if spec.get(field).and_then(Value::as_i64) == Some(0) {
            problems.push(format!(
                "spec.object.spec.{field} must not be 0: a version scaled to zero has no pollers, so Temporal would keep routing work to a version nobody serves"
            ));
        }
    }
    scale_target_refs(spec, "spec", problems);
    if let Some(labels) = spec.get("selector").and_then(|s| s.get("matchLabels"))
        && !opts_in(labels)
    {
        problems.push(
            "spec.object.spec.selector.matchLabels is set by the controller to each version's labels: write `matchLabels: {}` (or null)".into(),
        );
    }
    for (path, labels) in metric_selectors(spec) {
        for key in METRIC_LABELS {
            if labels.get(key).is_some() {
                problems.push(format!(
                    "spec.object.{path}.{key} is set by the controller for each version"
                ));
            }
        }
    }
    for (path, meta) in temporal_triggers(spec) {
        for key in KEDA_OWNED_KEYS {
            if meta.get(*key).is_some_and(|v| !opts_in_str(v)) {
                problems.push(format!(
                    "spec.object.{path}.{key} is set by the controller for each version: write `{key}: \"\"` (or null)"
                ));
            }
        }
    }
}

/// A `scaleTargetRef` anywhere under `spec` (maps and lists) must be the opt-in marker.
fn scale_target_refs(v: &Value, path: &str, problems: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let here = format!("{path}.{k}");
                if k == "scaleTargetRef" && !opts_in(child) {
                    problems.push(format!(
                        "spec.object.{here} is set by the controller to each version's Deployment: write `scaleTargetRef: {{}}` (or null)"
                    ));
                } else {
                    scale_target_refs(child, &here, problems);
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                scale_target_refs(child, &format!("{path}[{i}]"), problems);
            }
        }
        _ => {}
    }
}

/// Every string value must be a valid template (known keys, closed braces).
fn check_templates(v: &Value, path: &str, problems: &mut Vec<String>) {
    let probe = template::Values {
        deployment_name: "",
        build_id: "",
        temporal_namespace: "",
        task_queue: Some(""),
    };
    match v {
        Value::String(s) => {
            if let Err(e) = template::expand(s, &probe) {
                problems.push(format!("{path}: {e}"));
            }
        }
        Value::Object(map) => {
            for (k, child) in map {
                check_templates(child, &format!("{path}.{k}"), problems);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                check_templates(child, &format!("{path}[{i}]"), problems);
            }
        }
        _ => {}
    }
}

/// Who checked that a TWOR's author may have the controller manage its kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AccessCheck {
    /// The admission webhook runs and checks every TWOR write and deletion (the default
    /// install): whatever was admitted was checked.
    #[default]
    AtAdmission,
    /// No webhook (the opt-out): nobody checked, so TWORs are refused unless their kind is in
    /// `unchecked_kinds` (matched case-insensitively), which the operator declared safe to
    /// copy for anyone allowed to write TWORs.
    Refused { unchecked_kinds: Vec<String> },
}

impl AccessCheck {
    /// Whether the controller may copy `object` for a TWOR nobody else checked.
    pub fn check(&self, object: &Value) -> Result<(), Invalid> {
        let AccessCheck::Refused { unchecked_kinds } = self else {
            return Ok(());
        };
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if unchecked_kinds.iter().any(|k| k.eq_ignore_ascii_case(kind)) {
            return Ok(());
        }
        Err(Invalid(vec![not_checked(kind)]))
    }
}

/// The refusal of a TWOR whose kind needs an access check while the webhook is off.
pub fn not_checked(kind: &str) -> String {
    format!(
        "spec.object.kind: the admission webhook is off, so nobody checked that the author of \
         this TemporalWorkerOwnedResource may create, update and delete {kind} objects in the \
         namespace; the controller does not copy it. Turn the webhook on (chart \
         webhook.enabled), or, if everyone who may write TemporalWorkerOwnedResources may \
         manage {kind} objects anyway, list the kind in webhook.kindsWithoutAccessCheck (flag \
         --owned-resource-kinds-without-access-check)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(object: Value) -> Vec<String> {
        match check(&object, DEFAULT_ALLOWED_KINDS) {
            Ok(()) => Vec::new(),
            Err(Invalid(p)) => p,
        }
    }

    fn hpa(spec: Value) -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": spec})
    }

    #[test]
    fn an_hpa_with_opt_in_markers_passes() {
        let ok = hpa(json!({
            "scaleTargetRef": null, "minReplicas": 2, "maxReplicas": 5,
            "metrics": [{"type": "External", "external": {"metric": {"name": "backlog", "selector": {"matchLabels": {"queue": "{{ .TaskQueue }}"}}}}}]
        }));
        assert_eq!(problems(ok), Vec::<String>::new());
        assert_eq!(
            problems(hpa(json!({"scaleTargetRef": {}}))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn api_version_and_kind_are_required_and_the_kind_must_be_allowed() {
        let p = problems(json!({"spec": {}}));
        assert!(
            p.iter().any(|m| m.contains("apiVersion is required")),
            "{p:?}"
        );
        assert!(p.iter().any(|m| m.contains("kind is required")), "{p:?}");
        let p = problems(json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
        assert!(
            p.iter()
                .any(|m| m.contains("\"Deployment\" is not allowed")),
            "{p:?}"
        );
        let lower = json!({"apiVersion": "policy/v1", "kind": "poddisruptionbudget"});
        assert_eq!(problems(lower), Vec::<String>::new());
    }

    #[test]
    fn metadata_the_controller_owns_is_refused() {
        let p = problems(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "x", "namespace": "y", "labels": {"a": "b"}}}),
        );
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("metadata.name"));
        assert!(p[1].contains("metadata.namespace"));
    }

    #[test]
    fn scale_to_zero_is_refused_for_hpa_and_keda() {
        let p = problems(hpa(json!({"minReplicas": 0, "maxReplicas": 3})));
        assert!(
            p.iter().any(|m| m.contains("minReplicas must not be 0")),
            "{p:?}"
        );
        let so = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "spec": {"minReplicaCount": 0}});
        assert!(
            problems(so)
                .iter()
                .any(|m| m.contains("minReplicaCount must not be 0"))
        );
    }

    #[test]
    fn a_user_scale_target_anywhere_under_spec_is_refused() {
        let p = problems(hpa(
            json!({"scaleTargetRef": {"kind": "Deployment", "name": "other"}}),
        ));
        assert!(
            p.iter()
                .any(|m| m.contains("spec.scaleTargetRef is set by the controller")),
            "{p:?}"
        );
        let nested = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "spec": {"advanced": [{"scaleTargetRef": {"name": "x"}}]}});
        let p = problems(nested);
        assert!(
            p.iter()
                .any(|m| m.contains("spec.advanced[0].scaleTargetRef")),
            "{p:?}"
        );
    }

    #[test]
    fn user_selector_labels_are_refused() {
        let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "spec": {"selector": {"matchLabels": {"app": "x"}}}});
        assert!(
            problems(pdb)
                .iter()
                .any(|m| m.contains("selector.matchLabels is set by the controller"))
        );
    }

    #[test]
    fn reserved_metric_labels_are_refused() {
        let p = problems(hpa(json!({"metrics": [{"object": {"metric": {"name": "m",
            "selector": {"matchLabels": {"temporal_worker_build_id": "x"}}}}}]})));
        assert!(
            p.iter().any(|m| m.contains(
                "spec.metrics[0].object.metric.selector.matchLabels.temporal_worker_build_id"
            )),
            "{p:?}"
        );
    }

    #[test]
    fn keda_temporal_trigger_keys_the_controller_fills_are_refused_when_set() {
        let so = |meta: Value| {
            json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "spec": {"scaleTargetRef": {}, "triggers": [{"type": "temporal", "metadata": meta}]}})
        };
        assert_eq!(
            problems(so(
                json!({"workerDeploymentName": "", "workerDeploymentBuildId": null, "namespace": "", "taskQueue": "mine"})
            )),
            Vec::<String>::new()
        );
        let p = problems(so(json!({"workerDeploymentBuildId": "v1"})));
        assert!(
            p.iter()
                .any(|m| m.contains("triggers[0].metadata.workerDeploymentBuildId")),
            "{p:?}"
        );
    }

    #[test]
    fn unknown_template_keys_are_refused_with_their_path() {
        let p = problems(hpa(
            json!({"metrics": [{"external": {"metric": {"name": "{{ .Secret }}"}}}]}),
        ));
        assert!(
            p.iter().any(
                |m| m.contains("spec.object.spec.metrics[0].external.metric.name")
                    && m.contains(".Secret")
            ),
            "{p:?}"
        );
    }

    #[test]
    fn messages_name_the_field_of_the_kind_set_in_use() {
        use crate::api::{KindSet, TemporalWorkerOwnedResourceSpec};
        let object =
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "status": {}});
        for (set, path) in [
            (KindSet::Canonical, "spec.template.status"),
            (KindSet::Seed, "spec.object.status"),
        ] {
            let spec = TemporalWorkerOwnedResourceSpec::of(set, "w", object.clone());
            let Err(Invalid(p)) = check_template_spec(&spec, &[]) else {
                panic!("status must be refused")
            };
            assert!(p.iter().any(|m| m.starts_with(path)), "{set:?}: {p:?}");
        }
    }

    #[test]
    fn without_the_webhook_only_kinds_declared_unchecked_are_copied() {
        let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"});
        assert_eq!(AccessCheck::AtAdmission.check(&hpa), Ok(()));
        let refused = AccessCheck::Refused {
            unchecked_kinds: vec!["PodDisruptionBudget".into()],
        };
        let Err(Invalid(p)) = refused.check(&hpa) else {
            panic!("an unchecked HPA must be refused");
        };
        assert!(p[0].contains("the admission webhook is off"), "{p:?}");
        let declared = AccessCheck::Refused {
            unchecked_kinds: vec!["horizontalpodautoscaler".into()],
        };
        assert_eq!(declared.check(&hpa), Ok(()));
    }
}
