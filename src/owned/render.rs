//! Pure rendering of one TemporalWorkerOwnedResource for one live version: its name, the
//! values injected where the user opted in, `{{ .Key }}` templates, metadata and the hash
//! that lets an unchanged copy go unwritten.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::api::{LABEL_BUILD_ID, LABEL_DEPLOYMENT_NAME, LABEL_OWNED_RESOURCE};
use crate::owned::template::{self, TemplateError};
use crate::owned::validate::{self, Invalid};

/// Longest copy name: safe for any kind, Deployments included.
pub const MAX_NAME_LEN: usize = 47;
/// Readable prefix length; the rest is `-` and an 8-hex hash.
const PREFIX_LEN: usize = 38;

/// One live version, as the copy needs it.
#[derive(Clone, Debug)]
pub struct Version<'a> {
    pub twd_name: &'a str,
    /// Kubernetes namespace of the TWD, the TWOR and every copy.
    pub namespace: &'a str,
    pub deployment_name: &'a str,
    pub deployment_uid: &'a str,
    pub build_id: &'a str,
    /// The versioned Deployment's `spec.selector.matchLabels`.
    pub selector_labels: &'a BTreeMap<String, String>,
    pub temporal_namespace: &'a str,
    /// The version's task queue, when known (see [`needs_task_queue`]).
    pub task_queue: Option<&'a str>,
}

/// The copy for one version, ready for server-side apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub name: String,
    pub api_version: String,
    pub kind: String,
    pub object: Value,
    /// First 16 hex of SHA-256 over the object's JSON.
    pub hash: String,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error(
        "a KEDA temporal trigger asks for the task queue (taskQueue: \"\") but the version's task queue is not known; set taskQueue explicitly"
    )]
    TaskQueueUnknown,
}

/// `<twd>-<twor>-<buildID>` cleaned and cut to 38 characters, then `-` and 8 hex of a hash
/// over the three parts, so two copies never share a name even when their prefixes do.
pub fn resource_name(twd: &str, twor: &str, build_id: &str) -> String {
    let mut prefix = String::new();
    for c in format!("{twd}-{twor}-{build_id}").chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() || c == '-' {
            prefix.push(c);
        } else if !prefix.ends_with('-') {
            prefix.push('-');
        }
    }
    prefix.truncate(PREFIX_LEN);
    let prefix = prefix.trim_end_matches('-');
    // '/' cannot occur in any of the three names, so the hash input is unambiguous.
    let digest = Sha256::digest(format!("{twd}/{twor}/{build_id}").as_bytes());
    format!("{prefix}-{}", &hex::encode(digest)[..8])
}

/// True when rendering needs the version's task queue (a `{{ .TaskQueue }}` template or a
/// KEDA temporal trigger opting in to `taskQueue`), which costs a Temporal lookup.
pub fn needs_task_queue(object: &Value) -> bool {
    let in_trigger = object.get("spec").is_some_and(|spec| {
        validate::temporal_triggers(spec).iter().any(|(_, m)| {
            m.get(validate::KEDA_TASK_QUEUE)
                .is_some_and(validate::opts_in_str)
        })
    });
    in_trigger || mentions_task_queue(object)
}

fn mentions_task_queue(v: &Value) -> bool {
    match v {
        Value::String(s) => template::mentions_task_queue(s),
        Value::Object(m) => m.values().any(mentions_task_queue),
        Value::Array(a) => a.iter().any(mentions_task_queue),
        _ => false,
    }
}

/// Renders `object` (a TWOR's `spec.object`) for `version`.
pub fn render(
    twor_name: &str,
    object: &Value,
    version: &Version,
    allowed_kinds: &[&str],
) -> Result<Rendered, RenderError> {
    validate::check(object, allowed_kinds)?;
    let values = template::Values {
        deployment_name: version.deployment_name,
        build_id: version.build_id,
        temporal_namespace: version.temporal_namespace,
        task_queue: version.task_queue,
    };
    let mut out = expand_all(object, &values)?;
    if let Some(spec) = out.get_mut("spec") {
        inject(spec, version)?;
    }
    let name = resource_name(version.twd_name, twor_name, version.build_id);
    set_metadata(&mut out, &name, twor_name, version);
    let api_version = str_of(&out, "apiVersion");
    let kind = str_of(&out, "kind");
    let hash = hex::encode(Sha256::digest(out.to_string().as_bytes()))[..16].to_string();
    Ok(Rendered {
        name,
        api_version,
        kind,
        object: out,
        hash,
    })
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn expand_all(v: &Value, values: &template::Values) -> Result<Value, TemplateError> {
    Ok(match v {
        Value::String(s) => Value::String(template::expand(s, values)?),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), expand_all(v, values)?)))
                .collect::<Result<Map<_, _>, TemplateError>>()?,
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|v| expand_all(v, values))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

/// Fills every injection point the user opted in to (the rules already refused user values).
fn inject(spec: &mut Value, version: &Version) -> Result<(), RenderError> {
    let target =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": version.deployment_name});
    fill_scale_target_refs(spec, &target);
    if let Some(labels) = spec
        .get_mut("selector")
        .and_then(|s| s.as_object_mut())
        .and_then(|s| s.get_mut("matchLabels"))
        && validate::opts_in(labels)
    {
        *labels = json!(version.selector_labels);
    }
    let metric_labels = [
        (
            validate::METRIC_LABEL_DEPLOYMENT,
            format!("{}_{}", version.namespace, version.twd_name),
        ),
        (
            validate::METRIC_LABEL_BUILD_ID,
            version.build_id.to_string(),
        ),
        (
            validate::METRIC_LABEL_NAMESPACE,
            version.temporal_namespace.to_string(),
        ),
    ];
    for m in spec
        .get_mut("metrics")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for source in ["external", "object"] {
            let Some(selector) = m
                .get_mut(source)
                .and_then(|s| s.get_mut("metric"))
                .and_then(|m| m.get_mut("selector"))
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            let Some(labels) = selector.get_mut("matchLabels") else {
                continue;
            };
            if !labels.is_object() {
                *labels = json!({});
            }
            if let Some(map) = labels.as_object_mut() {
                for (k, v) in &metric_labels {
                    map.insert((*k).to_string(), json!(v));
                }
            }
        }
    }
    inject_keda(spec, version)
}

fn inject_keda(spec: &mut Value, version: &Version) -> Result<(), RenderError> {
    let deployment = format!("{}/{}", version.namespace, version.twd_name);
    let fills = [
        (validate::KEDA_DEPLOYMENT_NAME, Some(deployment.as_str())),
        (validate::KEDA_BUILD_ID, Some(version.build_id)),
        (validate::KEDA_NAMESPACE, Some(version.temporal_namespace)),
        (validate::KEDA_TASK_QUEUE, version.task_queue),
    ];
    let triggers = spec
        .get_mut("triggers")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("temporal"));
    for trigger in triggers {
        let Some(meta) = trigger.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        for (key, value) in fills {
            let Some(slot) = meta.get_mut(key) else {
                continue;
            };
            if !validate::opts_in_str(slot) {
                continue;
            }
            let value = value.ok_or(RenderError::TaskQueueUnknown)?;
            *slot = json!(value);
        }
    }
    Ok(())
}

fn fill_scale_target_refs(v: &mut Value, target: &Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                if k == "scaleTargetRef" && validate::opts_in(child) {
                    *child = target.clone();
                } else {
                    fill_scale_target_refs(child, target);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|c| fill_scale_target_refs(c, target)),
        _ => {}
    }
}

fn set_metadata(out: &mut Value, name: &str, twor_name: &str, version: &Version) {
    let mut labels: Map<String, Value> = out
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.insert(
        LABEL_DEPLOYMENT_NAME.into(),
        json!(crate::render::label_value(version.twd_name)),
    );
    labels.insert(LABEL_BUILD_ID.into(), json!(version.build_id));
    labels.insert(LABEL_OWNED_RESOURCE.into(), json!(twor_name));
    let Some(obj) = out.as_object_mut() else {
        return;
    };
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    let Some(meta) = meta else {
        return;
    };
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(version.namespace));
    meta.insert("labels".into(), Value::Object(labels));
    // No blockOwnerDeletion: it would need update on deployments/finalizers, and background
    // garbage collection removes the copy with its Deployment either way.
    meta.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": version.deployment_name,
            "uid": version.deployment_uid,
            "controller": true
        }]),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("temporal.io/deployment-name".to_string(), "pay".to_string()),
            ("temporal.io/build-id".to_string(), "v1".to_string()),
        ])
    }

    fn version<'a>(
        labels: &'a BTreeMap<String, String>,
        task_queue: Option<&'a str>,
    ) -> Version<'a> {
        Version {
            twd_name: "pay",
            namespace: "shop",
            deployment_name: "pay-v1",
            deployment_uid: "uid-1",
            build_id: "v1",
            selector_labels: labels,
            temporal_namespace: "prod",
            task_queue,
        }
    }

    fn render_ok(object: Value) -> Rendered {
        let l = labels();
        render(
            "scaler",
            &object,
            &version(&l, Some("orders")),
            validate::DEFAULT_ALLOWED_KINDS,
        )
        .expect("renders")
    }

    #[test]
    fn names_are_at_most_47_characters_and_unique_per_triple() {
        let long = "a".repeat(63);
        let n = resource_name(&long, &long, "build");
        assert!(n.len() <= MAX_NAME_LEN, "{n}");
        // Same 38-character prefix, different build IDs: different names.
        assert_ne!(n, resource_name(&long, &long, "build2"));
        // The parts cannot be shifted into each other.
        assert_ne!(resource_name("ab", "c", "x"), resource_name("a", "bc", "x"));
        assert_eq!(
            resource_name("pay", "scaler", "v1"),
            resource_name("pay", "scaler", "v1")
        );
        let odd = resource_name("pay", "scaler", "Build_1.2");
        assert!(odd.starts_with("pay-scaler-build-1-2-"), "{odd}");
        assert!(!resource_name("a", "b", &"-".repeat(40)).contains("--"));
    }

    #[test]
    fn scale_target_ref_opt_in_points_at_the_versioned_deployment() {
        let r = render_ok(
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "spec": {"scaleTargetRef": null, "minReplicas": 1, "maxReplicas": 3}}),
        );
        assert_eq!(
            r.object["spec"]["scaleTargetRef"],
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "pay-v1"})
        );
        assert_eq!(r.name, resource_name("pay", "scaler", "v1"));
        assert_eq!(r.kind, "HorizontalPodAutoscaler");
        assert_eq!(r.object["metadata"]["namespace"], "shop");
        assert_eq!(r.object["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(
            r.object["metadata"]["labels"]["temporal.io/owned-resource"],
            "scaler"
        );
    }

    #[test]
    fn without_the_marker_nothing_is_injected() {
        let r = render_ok(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "spec": {"maxUnavailable": 1}}),
        );
        assert_eq!(r.object["spec"], json!({"maxUnavailable": 1}));
    }

    #[test]
    fn pdb_selector_gets_the_version_labels() {
        for marker in [json!(null), json!({})] {
            let r = render_ok(
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "spec": {"minAvailable": 1, "selector": {"matchLabels": marker}}}),
            );
            assert_eq!(r.object["spec"]["selector"]["matchLabels"], json!(labels()));
        }
    }

    #[test]
    fn metric_selectors_merge_version_labels_with_the_users() {
        let r = render_ok(
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "spec": {"scaleTargetRef": {}, "maxReplicas": 3, "metrics": [
                {"type": "External", "external": {"metric": {"name": "backlog", "selector": {"matchLabels": {"tier": "gold"}}}}},
                {"type": "Object", "object": {"metric": {"name": "m", "selector": {"matchLabels": null}}}},
                {"type": "External", "external": {"metric": {"name": "plain"}}}
            ]}}),
        );
        let m = &r.object["spec"]["metrics"];
        assert_eq!(
            m[0]["external"]["metric"]["selector"]["matchLabels"],
            json!({"tier": "gold", "temporal_worker_deployment_name": "shop_pay",
                "temporal_worker_build_id": "v1", "temporal_namespace": "prod"})
        );
        assert_eq!(
            m[1]["object"]["metric"]["selector"]["matchLabels"]["temporal_worker_build_id"],
            "v1"
        );
        assert!(m[2]["external"]["metric"].get("selector").is_none());
    }

    #[test]
    fn keda_temporal_trigger_metadata_is_filled_where_asked() {
        let r = render_ok(
            json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "spec": {"scaleTargetRef": {}, "minReplicaCount": 1, "triggers": [
                {"type": "temporal", "metadata": {"workerDeploymentName": "", "workerDeploymentBuildId": "",
                    "namespace": null, "taskQueue": "", "targetQueueSize": "5"}},
                {"type": "cpu", "metadata": {"namespace": ""}}
            ]}}),
        );
        assert_eq!(
            r.object["spec"]["triggers"][0]["metadata"],
            json!({"workerDeploymentName": "shop/pay", "workerDeploymentBuildId": "v1",
                "namespace": "prod", "taskQueue": "orders", "targetQueueSize": "5"})
        );
        assert_eq!(r.object["spec"]["triggers"][1]["metadata"]["namespace"], "");
        assert_eq!(r.object["spec"]["scaleTargetRef"]["name"], "pay-v1");
    }

    #[test]
    fn an_unknown_task_queue_is_an_error_only_when_asked_for() {
        let l = labels();
        let asks = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "spec": {"triggers": [{"type": "temporal", "metadata": {"taskQueue": ""}}]}});
        assert!(needs_task_queue(&asks));
        assert_eq!(
            render(
                "s",
                &asks,
                &version(&l, None),
                validate::DEFAULT_ALLOWED_KINDS
            ),
            Err(RenderError::TaskQueueUnknown)
        );
        let own = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "spec": {"triggers": [{"type": "temporal", "metadata": {"taskQueue": "mine"}}]}});
        assert!(!needs_task_queue(&own));
        assert!(
            render(
                "s",
                &own,
                &version(&l, None),
                validate::DEFAULT_ALLOWED_KINDS
            )
            .is_ok()
        );
    }

    #[test]
    fn templates_are_expanded_in_string_values() {
        let r = render_ok(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"annotations": {"note": "{{ .DeploymentName }} in {{ .TemporalNamespace }} on {{ .TaskQueue }}"}},
            "spec": {"maxUnavailable": 1}}),
        );
        assert_eq!(
            r.object["metadata"]["annotations"]["note"],
            "pay-v1 in prod on orders"
        );
    }

    #[test]
    fn the_hash_changes_with_the_owner_so_a_recreated_version_is_applied_again() {
        let l = labels();
        let obj = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "spec": {"maxUnavailable": 1}});
        let a = render(
            "s",
            &obj,
            &version(&l, None),
            validate::DEFAULT_ALLOWED_KINDS,
        )
        .expect("a");
        let again = render(
            "s",
            &obj,
            &version(&l, None),
            validate::DEFAULT_ALLOWED_KINDS,
        )
        .expect("b");
        assert_eq!(a.hash, again.hash);
        let recreated = Version {
            deployment_uid: "uid-2",
            ..version(&l, None)
        };
        let c = render("s", &obj, &recreated, validate::DEFAULT_ALLOWED_KINDS).expect("c");
        assert_ne!(a.hash, c.hash);
    }

    #[test]
    fn invalid_objects_are_refused_before_rendering() {
        let l = labels();
        let bad = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "spec": {"scaleTargetRef": {"name": "mine"}}});
        assert!(matches!(
            render(
                "s",
                &bad,
                &version(&l, None),
                validate::DEFAULT_ALLOWED_KINDS
            ),
            Err(RenderError::Invalid(_))
        ));
    }
}
