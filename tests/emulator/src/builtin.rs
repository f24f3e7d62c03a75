//! Defaults and light validation for built-in kinds, plus ObjectMeta validation shared by all.

use serde_json::{Value, json};

use crate::error::Cause;
use crate::registry::{Builtin, ResourceDef};
use crate::schema::fmt_value;
use crate::selectors::selector_object_matches;

fn set_default(obj: &mut Value, ptr: &str, key: &str, v: Value) {
    if let Some(Value::Object(m)) = obj.pointer_mut(ptr)
        && !m.contains_key(key)
    {
        m.insert(key.to_string(), v);
    }
}

fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "", "restartPolicy", json!("Always"));
    set_default(spec, "", "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "", "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "", "securityContext", json!({}));
    set_default(spec, "", "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs.iter_mut().filter(|c| c.is_object()) {
                let image = c
                    .get("image")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let last = image.rsplit('/').next().unwrap_or_default();
                let latest =
                    !image.contains('@') && (!last.contains(':') || last.ends_with(":latest"));
                set_default(
                    c,
                    "",
                    "imagePullPolicy",
                    json!(if latest { "Always" } else { "IfNotPresent" }),
                );
                set_default(
                    c,
                    "",
                    "terminationMessagePath",
                    json!("/dev/termination-log"),
                );
                set_default(c, "", "terminationMessagePolicy", json!("File"));
                set_default(c, "", "resources", json!({}));
                if let Some(Value::Array(ports)) = c.get_mut("ports") {
                    for p in ports.iter_mut() {
                        set_default(p, "", "protocol", json!("TCP"));
                    }
                }
                if let Some(Value::Array(env)) = c.get_mut("env") {
                    for e in env.iter_mut() {
                        if let Some(Value::Object(f)) = e.pointer_mut("/valueFrom/fieldRef") {
                            f.entry("apiVersion").or_insert(json!("v1"));
                        }
                    }
                }
            }
        }
    }
}

/// Server-side defaults the real API server applies (those a controller could observe).
pub fn apply_defaults(def: &ResourceDef, obj: &mut Value) {
    match def.builtin {
        Builtin::Deployment => {
            if !obj.get("spec").is_some_and(Value::is_object) {
                return;
            }
            set_default(obj, "/spec", "replicas", json!(1));
            set_default(obj, "/spec", "revisionHistoryLimit", json!(10));
            set_default(obj, "/spec", "progressDeadlineSeconds", json!(600));
            set_default(obj, "/spec", "strategy", json!({"type": "RollingUpdate"}));
            if obj.pointer("/spec/strategy/type").and_then(Value::as_str) == Some("RollingUpdate") {
                set_default(obj, "/spec/strategy", "rollingUpdate", json!({}));
                set_default(
                    obj,
                    "/spec/strategy/rollingUpdate",
                    "maxUnavailable",
                    json!("25%"),
                );
                set_default(
                    obj,
                    "/spec/strategy/rollingUpdate",
                    "maxSurge",
                    json!("25%"),
                );
            }
            if let Some(spec) = obj.pointer_mut("/spec/template/spec") {
                default_pod_spec(spec);
            }
            set_default(obj, "/spec/template", "metadata", json!({}));
        }
        Builtin::Namespace => {
            set_default(obj, "", "spec", json!({}));
            set_default(obj, "/spec", "finalizers", json!(["kubernetes"]));
            set_default(obj, "", "status", json!({}));
            set_default(obj, "/status", "phase", json!("Active"));
            if let Some(name) = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
            {
                set_default(obj, "/metadata", "labels", json!({}));
                if let Some(Value::Object(l)) = obj.pointer_mut("/metadata/labels") {
                    l.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
            }
        }
        Builtin::Other if def.plural == "secrets" => {
            set_default(obj, "", "type", json!("Opaque"));
            fold_string_data(obj);
        }
        Builtin::Other if def.plural == "pods" => {
            if let Some(spec) = obj.get_mut("spec") {
                default_pod_spec(spec);
            }
        }
        _ => {}
    }
    if !def.is_custom() {
        drop_nulls(obj);
    }
}

/// `stringData` is write-only: the API server base64-encodes it into `data` (overriding keys
/// of the same name) and never stores or returns it.
fn fold_string_data(obj: &mut Value) {
    use base64::Engine as _;
    let Some(Value::Object(string_data)) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    let Some(o) = obj.as_object_mut() else { return };
    let data = o.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    if let Value::Object(d) = data {
        for (k, v) in string_data {
            let text = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            d.insert(
                k,
                json!(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
}

/// Typed Go structs never keep JSON nulls; built-in objects come back without them.
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, c| !c.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Deployment status counters are `omitempty` int32s: a zero is not stored.
pub fn normalize_status(def: &ResourceDef, obj: &mut Value) {
    if def.builtin == Builtin::Deployment
        && let Some(Value::Object(st)) = obj.get_mut("status")
    {
        for k in [
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "terminatingReplicas",
        ] {
            if st.get(k).and_then(Value::as_i64) == Some(0) {
                st.remove(k);
            }
        }
    }
}

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

pub fn dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(dns_label)
}

fn label_value_ok(v: &str) -> bool {
    v.len() <= 63
        && (v.is_empty()
            || (v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && v.as_bytes()[0].is_ascii_alphanumeric()
                && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric()))
}

fn qualified_name_ok(k: &str) -> bool {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(dns_subdomain) && !name.is_empty() && label_value_ok(name)
}

/// ObjectMeta checks the real server applies to every kind.
pub fn validate_meta(def: &ResourceDef, obj: &Value, out: &mut Vec<Cause>) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name_ok = if def.builtin == Builtin::Namespace {
        dns_label(name)
    } else {
        dns_subdomain(name)
    };
    if !name_ok {
        let rule = if def.builtin == Builtin::Namespace {
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
        } else {
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        };
        out.push(Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {}: {rule}", fmt_value(&json!(name))),
            field: "metadata.name".into(),
        });
    }
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if !qualified_name_ok(k) {
                out.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!("Invalid value: {}: name part must consist of alphanumeric characters, '-', '_' or '.'", fmt_value(&json!(k))),
                    field: "metadata.labels".into(),
                });
            }
            match v.as_str() {
                Some(s) if label_value_ok(s) => {}
                _ => out.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!("Invalid value: {}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", fmt_value(v)),
                    field: "metadata.labels".into(),
                }),
            }
        }
    }
    if let Some(ann) = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for (k, v) in ann {
            if !qualified_name_ok(k) || !v.is_string() {
                out.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!("Invalid value: {}: name part must consist of alphanumeric characters, '-', '_' or '.'", fmt_value(&json!(k))),
                    field: "metadata.annotations".into(),
                });
            }
        }
    }
    if let Some(fins) = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
    {
        for (i, f) in fins.iter().enumerate() {
            let ok = f.as_str().is_some_and(|s| {
                qualified_name_ok(s)
                    && (s.contains('/')
                        || matches!(s, "kubernetes" | "orphan" | "foregroundDeletion"))
            });
            if !ok {
                out.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!("Invalid value: {}: name is neither a standard finalizer name nor is it fully qualified", fmt_value(f)),
                    field: format!("metadata.finalizers[{i}]"),
                });
            }
        }
    }
    if let Some(refs) = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    {
        for (i, r) in refs.iter().enumerate() {
            for k in ["apiVersion", "kind", "name", "uid"] {
                if r.get(k).and_then(Value::as_str).is_none_or(str::is_empty) {
                    out.push(Cause {
                        reason: "FieldValueInvalid",
                        message: format!("Invalid value: \"\": {k} must not be empty"),
                        field: format!("metadata.ownerReferences[{i}].{k}"),
                    });
                }
            }
        }
        let controllers = refs
            .iter()
            .filter(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            .count();
        if controllers > 1 {
            out.push(Cause {
                reason: "FieldValueInvalid",
                message:
                    "Invalid value: \"array\": Only one reference can have Controller set to true"
                        .into(),
                field: "metadata.ownerReferences".into(),
            });
        }
    }
}

fn required(out: &mut Vec<Cause>, field: &str) {
    out.push(Cause {
        reason: "FieldValueRequired",
        message: "Required value".into(),
        field: field.into(),
    });
}

/// Kind-specific validation of built-ins (only what our tools could trip over).
pub fn validate_builtin(def: &ResourceDef, obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    if def.builtin != Builtin::Deployment {
        return;
    }
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(r) = spec.get("replicas").and_then(Value::as_i64)
        && r < 0
    {
        out.push(Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {r}: must be greater than or equal to 0"),
            field: "spec.replicas".into(),
        });
    }
    let selector = spec.get("selector");
    match selector {
        None => required(out, "spec.selector"),
        Some(sel) => {
            let empty = sel
                .get("matchLabels")
                .and_then(Value::as_object)
                .is_none_or(|m| m.is_empty())
                && sel
                    .get("matchExpressions")
                    .and_then(Value::as_array)
                    .is_none_or(|a| a.is_empty());
            if empty {
                out.push(Cause {
                    reason: "FieldValueInvalid",
                    message: "Invalid value: \"object\": empty selector is invalid for deployment"
                        .into(),
                    field: "spec.selector".into(),
                });
            } else {
                let labels = spec
                    .pointer("/template/metadata/labels")
                    .and_then(Value::as_object);
                if !selector_object_matches(sel, labels) {
                    out.push(Cause {
                        reason: "FieldValueInvalid",
                        message: format!(
                            "Invalid value: {}: `selector` does not match template `labels`",
                            labels
                                .map(|l| Value::String(
                                    l.iter()
                                        .map(|(k, v)| format!(
                                            "{k}:{}",
                                            v.as_str().unwrap_or_default()
                                        ))
                                        .collect::<Vec<_>>()
                                        .join(",")
                                )
                                .to_string())
                                .unwrap_or_else(|| "\"\"".into())
                        ),
                        field: "spec.template.metadata.labels".into(),
                    });
                }
            }
            if let Some(old_sel) = old.and_then(|o| o.pointer("/spec/selector"))
                && old_sel != sel
            {
                out.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!("Invalid value: {}: field is immutable", fmt_value(sel)),
                    field: "spec.selector".into(),
                });
            }
        }
    }
    match spec
        .pointer("/template/spec/containers")
        .and_then(Value::as_array)
    {
        None => required(out, "spec.template.spec.containers"),
        Some(cs) if cs.is_empty() => required(out, "spec.template.spec.containers"),
        Some(cs) => {
            for (i, c) in cs.iter().enumerate() {
                let field = format!("spec.template.spec.containers[{i}].name");
                match c.get("name").and_then(Value::as_str) {
                    None | Some("") => required(out, &field),
                    // kube-apiserver's wording for an invalid DNS-1123 label.
                    Some(n) if !dns_label(n) => out.push(Cause {
                        reason: "FieldValueInvalid",
                        message: format!(
                            "Invalid value: {n:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                        ),
                        field,
                    }),
                    Some(_) => {}
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    required(out, &format!("spec.template.spec.containers[{i}].image"));
                }
            }
        }
    }
    if let Some(p) = spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
        && p != "Always"
    {
        out.push(Cause {
            reason: "FieldValueNotSupported",
            message: format!("Unsupported value: \"{p}\": supported values: \"Always\""),
            field: "spec.template.spec.restartPolicy".into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtins;

    fn deploy_def() -> ResourceDef {
        builtins()
            .into_iter()
            .find(|d| d.plural == "deployments")
            .unwrap_or_else(|| unreachable!())
    }

    #[test]
    fn deployment_defaults_and_selector_check() {
        let def = deploy_def();
        let mut d = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}});
        apply_defaults(&def, &mut d);
        assert_eq!(d.pointer("/spec/replicas"), Some(&json!(1)));
        assert_eq!(
            d.pointer("/spec/template/spec/containers/0/imagePullPolicy"),
            Some(&json!("IfNotPresent"))
        );
        let mut out = Vec::new();
        validate_builtin(&def, &d, None, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].field, "spec.template.metadata.labels");
    }

    #[test]
    fn names_and_finalizers() {
        let def = deploy_def();
        let mut out = Vec::new();
        validate_meta(
            &def,
            &json!({"metadata": {"name": "Bad_Name", "finalizers": ["nope"]}}),
            &mut out,
        );
        let fields: Vec<&str> = out.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, vec!["metadata.name", "metadata.finalizers[0]"]);
    }
}
