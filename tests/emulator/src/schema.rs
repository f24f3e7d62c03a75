//! Structural-schema handling for custom resources: pruning of unknown fields, defaulting and
//! OpenAPI v3 validation with the real server's error wording.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use regex::Regex;
use serde_json::{Map, Value};

use crate::cel_rules;
use crate::error::Cause;

/// ObjectMeta fields the server keeps; anything else under `metadata` is dropped.
pub const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "selfLink",
];

fn flag(s: &Value, k: &str) -> bool {
    s.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn is_int_or_string(s: &Value) -> bool {
    flag(s, "x-kubernetes-int-or-string")
}

/// Drops fields the schema does not declare (unless it preserves unknown fields). Returns the
/// dotted paths of dropped fields (fieldValidation=Strict turns those into errors).
pub fn prune(schema: &Value, obj: &mut Value, root: bool, path: &str, dropped: &mut Vec<String>) {
    match obj {
        Value::Object(map) => {
            if (root || flag(schema, "x-kubernetes-embedded-resource"))
                && let Some(Value::Object(meta)) = map.get_mut("metadata")
            {
                let before: Vec<String> = meta.keys().cloned().collect();
                meta.retain(|k, _| OBJECT_META_FIELDS.contains(&k.as_str()));
                for k in before.into_iter().filter(|k| !meta.contains_key(k)) {
                    dropped.push(join(&join(path, "metadata"), &k));
                }
            }
            let keep_special = root || flag(schema, "x-kubernetes-embedded-resource");
            let props = schema.get("properties").and_then(Value::as_object);
            let addl = schema.get("additionalProperties");
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if keep_special && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = join(path, &k);
                let sub = props.and_then(|p| p.get(&k)).or(match addl {
                    Some(s @ Value::Object(_)) => Some(s),
                    _ => None,
                });
                match sub {
                    Some(sub) => {
                        if let Some(v) = map.get_mut(&k) {
                            prune(sub, v, false, &child_path, dropped);
                        }
                    }
                    None if preserve || matches!(addl, Some(Value::Bool(true))) => {}
                    None => {
                        map.remove(&k);
                        dropped.push(child_path);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, it) in items.iter_mut().enumerate() {
                    prune(sub, it, false, &format!("{path}[{i}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

/// Applies `default`s. Nulls in non-nullable fields are dropped first (then defaulted), as the
/// real server does.
pub fn default(schema: &Value, obj: &mut Value) {
    match obj {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    let nullable = flag(sub, "nullable");
                    if map.get(k).is_some_and(Value::is_null) && !nullable {
                        map.remove(k);
                    }
                    if !map.contains_key(k)
                        && let Some(d) = sub.get("default")
                    {
                        map.insert(k.clone(), d.clone());
                    }
                    if let Some(v) = map.get_mut(k) {
                        default(sub, v);
                    }
                }
            }
            if let Some(sub @ Value::Object(_)) = schema.get("additionalProperties") {
                for v in map.values_mut() {
                    default(sub, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for it in items {
                    default(sub, it);
                }
            }
        }
        _ => {}
    }
}

fn join(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// Integral floats become integers, as they do after a round trip through the real server
/// (so `0.0` from YAML and `0` from JSON compare equal).
pub fn normalize_numbers(v: &mut Value) {
    match v {
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *v = Value::from(f as i64);
            }
        }
        Value::Object(m) => m.values_mut().for_each(normalize_numbers),
        Value::Array(a) => a.iter_mut().for_each(normalize_numbers),
        _ => {}
    }
}

/// Go's `%v` of a float: integral values print without a fraction.
pub fn fmt_num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

/// How `field.Invalid` prints a value.
pub fn fmt_value(v: &Value) -> String {
    match v {
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "\"null\"".into(),
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
        Value::Object(_) => "object",
        Value::Array(_) => "array",
    }
}

fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn regex_cached(p: &str) -> Option<Regex> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut g = cache.lock().unwrap_or_else(|e| e.into_inner());
    g.entry(p.to_string())
        .or_insert_with(|| Regex::new(p).ok())
        .clone()
}

fn invalid(field: &str, value: String, detail: String) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {value}: {detail}"),
        field: field.into(),
    }
}

/// Validates `obj` against `schema`. `old` is the previous value at the same place (for CEL
/// transition rules), when there is one.
pub fn validate(
    schema: &Value,
    obj: &Value,
    old: Option<&Value>,
    path: &str,
    out: &mut Vec<Cause>,
) {
    let field_desc = if path.is_empty() {
        "body".to_string()
    } else {
        path.to_string()
    };
    if obj.is_null() {
        if !flag(schema, "nullable") && schema.get("type").is_some() {
            let t = schema
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("object");
            out.push(invalid(
                path,
                "\"null\"".into(),
                format!("{field_desc} in body must be of type {t}: \"null\""),
            ));
        }
        return;
    }
    if is_int_or_string(schema) {
        if !(obj.is_string() || is_integer(obj)) {
            out.push(invalid(
                path,
                format!("\"{}\"", type_name(obj)),
                format!(
                    "{field_desc} in body must be of type integer,string: \"{}\"",
                    type_name(obj)
                ),
            ));
            return;
        }
    } else if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => obj.is_object(),
            "array" => obj.is_array(),
            "string" => obj.is_string(),
            "integer" => is_integer(obj),
            "number" => obj.is_number(),
            "boolean" => obj.is_boolean(),
            _ => true,
        };
        if !ok {
            let actual = type_name(obj);
            out.push(invalid(
                path,
                format!("\"{actual}\""),
                format!("{field_desc} in body must be of type {t}: \"{actual}\""),
            ));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(obj)
    {
        let list: Vec<String> = allowed.iter().map(fmt_value).collect();
        out.push(Cause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {}: supported values: {}",
                fmt_value(obj),
                list.join(", ")
            ),
            field: path.into(),
        });
    }
    match obj {
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
                let excl = flag(schema, "exclusiveMinimum");
                if (excl && f <= min) || (!excl && f < min) {
                    let rel = if excl {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    out.push(invalid(
                        path,
                        n.to_string(),
                        format!("{field_desc} in body should be {rel} {}", fmt_num(min)),
                    ));
                }
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
                let excl = flag(schema, "exclusiveMaximum");
                if (excl && f >= max) || (!excl && f > max) {
                    let rel = if excl {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    out.push(invalid(
                        path,
                        n.to_string(),
                        format!("{field_desc} in body should be {rel} {}", fmt_num(max)),
                    ));
                }
            }
            if let Some(m) = schema.get("multipleOf").and_then(Value::as_f64)
                && m != 0.0
                && (f / m).fract() != 0.0
            {
                out.push(invalid(
                    path,
                    n.to_string(),
                    format!(
                        "{field_desc} in body should be a multiple of {}",
                        fmt_num(m)
                    ),
                ));
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                out.push(invalid(
                    path,
                    fmt_value(obj),
                    format!("{field_desc} in body should be at least {min} chars long"),
                ));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                out.push(Cause {
                    reason: "FieldValueTooLong",
                    message: format!("Too long: may not be more than {max} bytes"),
                    field: path.into(),
                });
            }
            if let Some(p) = schema.get("pattern").and_then(Value::as_str)
                && let Some(re) = regex_cached(p)
                && !re.is_match(s)
            {
                out.push(invalid(
                    path,
                    fmt_value(obj),
                    format!("{field_desc} in body should match '{p}'"),
                ));
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                out.push(Cause {
                    reason: "FieldValueTooMany",
                    message: format!("Too many: {n}: must have at most {max} items"),
                    field: path.into(),
                });
            }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                out.push(invalid(
                    path,
                    n.to_string(),
                    format!("{field_desc} in body should have at least {min} items"),
                ));
            }
            check_list_type(schema, items, path, out);
            if let Some(sub) = schema.get("items") {
                let old_items = old.and_then(Value::as_array);
                for (i, it) in items.iter().enumerate() {
                    // Transition rules on list items only correlate for map lists; approximate by index.
                    let o = old_items.and_then(|o| o.get(i));
                    validate(sub, it, o, &format!("{path}[{i}]"), out);
                }
            }
        }
        Value::Object(map) => {
            if let Some(req) = schema.get("required").and_then(Value::as_array) {
                for r in req.iter().filter_map(Value::as_str) {
                    if !map.contains_key(r) {
                        out.push(Cause {
                            reason: "FieldValueRequired",
                            message: "Required value".into(),
                            field: join(path, r),
                        });
                    }
                }
            }
            if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
                && map.len() as u64 > max
            {
                out.push(Cause {
                    reason: "FieldValueTooMany",
                    message: format!("Too many: {}: must have at most {max} items", map.len()),
                    field: path.into(),
                });
            }
            if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
                && (map.len() as u64) < min
            {
                out.push(invalid(
                    path,
                    map.len().to_string(),
                    format!("{field_desc} in body should have at least {min} properties"),
                ));
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let addl = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in map {
                if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let sub = props.and_then(|p| p.get(k)).or(addl);
                if let Some(sub) = sub {
                    let child = if props.and_then(|p| p.get(k)).is_some() {
                        join(path, k)
                    } else {
                        format!("{path}[{k}]")
                    };
                    validate(sub, v, old.and_then(|o| o.get(k)), &child, out);
                }
            }
            if flag(schema, "x-kubernetes-embedded-resource") {
                for k in ["apiVersion", "kind"] {
                    if map.get(k).and_then(Value::as_str).is_none_or(str::is_empty) {
                        out.push(Cause {
                            reason: "FieldValueRequired",
                            message: "Required value: must not be empty".into(),
                            field: join(path, k),
                        });
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        cel_rules::check(rules, obj, old, path, out);
    }
}

fn check_list_type(schema: &Value, items: &[Value], path: &str, out: &mut Vec<Cause>) {
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => {
            for (i, it) in items.iter().enumerate() {
                if items[..i].contains(it) {
                    out.push(Cause {
                        reason: "FieldValueDuplicate",
                        message: format!("Duplicate value: {}", fmt_value(it)),
                        field: format!("{path}[{i}]"),
                    });
                }
            }
        }
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let key_of = |it: &Value| -> Map<String, Value> {
                keys.iter()
                    .filter_map(|k| it.get(*k).map(|v| (k.to_string(), v.clone())))
                    .collect()
            };
            for (i, it) in items.iter().enumerate() {
                let k = key_of(it);
                if items[..i].iter().any(|o| key_of(o) == k) {
                    out.push(Cause {
                        reason: "FieldValueDuplicate",
                        message: format!("Duplicate value: {}", Value::Object(k)),
                        field: format!("{path}[{i}]"),
                    });
                }
            }
        }
        _ => {}
    }
}

/// Looks up the sub-schema for a dotted field path (used to decide list semantics for SSA).
pub fn schema_at<'a>(schema: &'a Value, segments: &[&str]) -> Option<&'a Value> {
    let mut cur = schema;
    for seg in segments {
        cur = if *seg == "[]" {
            cur.get("items")?
        } else {
            cur.get("properties")
                .and_then(|p| p.get(*seg))
                .or_else(|| cur.get("additionalProperties").filter(|a| a.is_object()))?
        };
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["mode"], "properties": {
            "mode": {"type": "string", "enum": ["A", "B"]},
            "n": {"type": "integer", "minimum": 0.0, "maximum": 5.0},
            "s": {"type": "string", "pattern": "^[a-z]+$", "default": "abc"},
            "free": {"x-kubernetes-preserve-unknown-fields": true},
            "l": {"type": "array", "maxItems": 1, "items": {"type": "string"}}
        }}}})
    }

    #[test]
    fn prunes_defaults_and_validates() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "junk": 1},
            "spec": {"mode": "C", "n": 9, "extra": true, "free": {"anything": 1}, "l": ["a", "b"]}});
        let mut dropped = Vec::new();
        prune(&schema(), &mut obj, true, "", &mut dropped);
        assert_eq!(
            dropped,
            vec!["metadata.junk".to_string(), "spec.extra".to_string()]
        );
        default(&schema(), &mut obj);
        assert_eq!(obj.pointer("/spec/s"), Some(&json!("abc")));
        assert_eq!(obj.pointer("/spec/free/anything"), Some(&json!(1)));
        let mut out = Vec::new();
        validate(&schema(), &obj, None, "", &mut out);
        let mut msgs: Vec<String> = out.iter().map(Cause::display).collect();
        msgs.sort();
        assert_eq!(
            msgs,
            vec![
                "spec.l: Too many: 2: must have at most 1 items".to_string(),
                "spec.mode: Unsupported value: \"C\": supported values: \"A\", \"B\"".to_string(),
                "spec.n: Invalid value: 9: spec.n in body should be less than or equal to 5"
                    .to_string(),
            ]
        );
    }
}
