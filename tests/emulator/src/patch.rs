//! JSON merge patch (RFC 7386), JSON patch (RFC 6902) and a strategic-merge subset.

use serde_json::Value;

use crate::error::ApiError;
use crate::managed::{ListKind, builtin_list_kind};

pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

pub fn json_patch(target: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let p: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
    // The real server answers 422 for any patch that cannot be applied (failed `test` included).
    json_patch::patch(target, &p).map_err(|e| ApiError::Invalid {
        message: format!("the server rejected our request due to an error in our request: {e}"),
        details: Default::default(),
        causes: Vec::new(),
    })
}

/// Strategic merge patch for built-in kinds: maps merge, lists with a known merge key merge by
/// key (honouring `$patch: delete`), `finalizers` merge as a set, other lists are replaced.
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut clean = patch.clone();
        strip_directives(&mut clean);
        *target = clean;
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(t) = target else { return };
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(del)) = (t.get_mut(field), v) {
                items.retain(|i| !del.contains(i));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        if v.get("$patch").and_then(Value::as_str) == Some("delete") {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), v) {
            (Some(Value::Array(cur)), Value::Array(items)) => match builtin_list_kind(k) {
                kind @ ListKind::Map(..) => {
                    for it in items {
                        let key = kind.key_of(it);
                        let pos = key.as_ref().and_then(|key| {
                            cur.iter()
                                .position(|c| kind.key_of(c).as_ref() == Some(key))
                        });
                        let delete = it.get("$patch").and_then(Value::as_str) == Some("delete");
                        match (pos, delete) {
                            (Some(i), true) => {
                                cur.remove(i);
                            }
                            (None, true) => {}
                            (Some(i), false) => strategic_merge(&mut cur[i], it),
                            (None, false) => {
                                let mut clean = it.clone();
                                strip_directives(&mut clean);
                                cur.push(clean);
                            }
                        }
                    }
                }
                ListKind::Set => {
                    for it in items {
                        if !cur.contains(it) {
                            cur.push(it.clone());
                        }
                    }
                }
                ListKind::Atomic => *cur = items.clone(),
            },
            (Some(cur @ Value::Object(_)), Value::Object(_)) => strategic_merge(cur, v),
            _ => {
                let mut clean = v.clone();
                strip_directives(&mut clean);
                t.insert(k.clone(), clean);
            }
        }
    }
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            for c in m.values_mut() {
                strip_directives(c);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_and_strategic() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge_patch(&mut t, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(t, json!({"a": {"c": 2, "d": 3}, "l": [3]}));

        let mut d = json!({"spec": {"containers": [{"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]}]},
                           "metadata": {"finalizers": ["f1"]}});
        strategic_merge(
            &mut d,
            &json!({"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]}, {"name": "b", "image": "2"}]},
                    "metadata": {"finalizers": ["f2"], "$setElementOrder/finalizers": ["f1", "f2"]}}),
        );
        assert_eq!(
            d["spec"]["containers"][0]["env"].as_array().map(Vec::len),
            Some(2)
        );
        assert_eq!(d["spec"]["containers"][1]["name"], json!("b"));
        assert_eq!(d["metadata"]["finalizers"], json!(["f1", "f2"]));
        strategic_merge(
            &mut d,
            &json!({"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}),
        );
        assert_eq!(d["spec"]["containers"].as_array().map(Vec::len), Some(1));
    }
}
