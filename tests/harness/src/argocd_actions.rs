//! Argo CD resource actions, run in both engines and applied as Argo CD applies them.
//!
//! - [`gopher_discovery`] / [`gopher_action`]: Argo CD's own engine (gopher-lua and gopher-json
//!   at Argo CD's pins, `tools/gitops-checker/argocdactions.go`, which mirrors `util/lua`'s
//!   `ExecuteResourceActionDiscovery` and `ExecuteResourceAction`).
//! - [`mlua_discovery`] / [`mlua_action`]: the same on mlua (PUC Lua 5.1), with the JSON
//!   round trip gopher-json makes (an empty table is an empty list) and Argo CD's
//!   `cleanReturnedObj`.
//! - [`merge_patch`] / [`split_status`]: what Argo CD's server then sends (a JSON merge patch
//!   of the difference from the live object; the status part through the status subresource).

use serde_json::{Map, Value, json};

use crate::gitops::{Sandbox, json_to_lua, lua_state};

/// One discovered action as Argo CD shows it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Discovered {
    pub name: String,
    #[serde(default)]
    pub disabled: bool,
    #[serde(default)]
    pub icon_class: String,
    #[serde(default)]
    pub display_name: String,
}

fn ask(script: &str, obj: &Value, open_libs: bool, discovery: bool) -> Result<Value, String> {
    let answer = crate::gitops::ask_checker(json!({
        "object": obj,
        "argocdAction": {"script": script, "useOpenLibs": open_libs, "discovery": discovery},
        "argocdOnly": true,
    }));
    if let Some(e) = answer["error"].as_str() {
        return Err(format!("gitops checker: {e}"));
    }
    let v = answer["argocdAction"].clone();
    match v["error"].as_str() {
        Some(e) => Err(e.to_string()),
        None => Ok(v),
    }
}

/// Argo CD's discovery of `script` on `obj` (sorted by name).
pub fn gopher_discovery(
    script: &str,
    obj: &Value,
    open_libs: bool,
) -> Result<Vec<Discovered>, String> {
    let v = ask(script, obj, open_libs, true)?;
    serde_json::from_value(v["discovered"].clone()).map_err(|e| e.to_string())
}

/// Argo CD's run of an action on `obj`: the patched object (old-style output).
pub fn gopher_action(script: &str, obj: &Value, open_libs: bool) -> Result<Value, String> {
    let v = ask(script, obj, open_libs, false)?;
    let impacted = v["impacted"].as_array().cloned().unwrap_or_default();
    match impacted.as_slice() {
        [one] if one["operation"] == "patch" => Ok(one["resource"].clone()),
        _ => Err(format!("expected one patched object, got {impacted:?}")),
    }
}

/// A Lua value as gopher-json encodes it: integral numbers as integers, a table with only
/// keys 1..n as a list (an empty table too), any other table as an object.
fn lua_to_json(v: &mlua::Value) -> Result<Value, String> {
    Ok(match v {
        mlua::Value::Nil => Value::Null,
        mlua::Value::Boolean(b) => Value::Bool(*b),
        mlua::Value::Integer(i) => json!(i),
        mlua::Value::Number(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => json!(*n as i64),
        mlua::Value::Number(n) => json!(n),
        mlua::Value::String(s) => Value::String(s.to_str().map_err(|e| e.to_string())?.to_string()),
        mlua::Value::Table(t) => {
            let len = t.raw_len();
            let pairs = t.clone().pairs::<mlua::Value, mlua::Value>().count();
            if pairs == len {
                let items: Result<Vec<Value>, String> = (1..=len)
                    .map(|i| t.raw_get::<mlua::Value>(i).map_err(|e| e.to_string()))
                    .map(|r| r.and_then(|v| lua_to_json(&v)))
                    .collect();
                Value::Array(items?)
            } else {
                let mut map = Map::new();
                for pair in t.clone().pairs::<String, mlua::Value>() {
                    let (k, v) = pair.map_err(|e| e.to_string())?;
                    map.insert(k, lua_to_json(&v)?);
                }
                Value::Object(map)
            }
        }
        other => return Err(format!("cannot encode a Lua {}", other.type_name())),
    })
}

fn run_mlua(script: &str, obj: &Value, sandbox: Sandbox) -> Result<Value, String> {
    let lua = lua_state(sandbox).map_err(|e| e.to_string())?;
    let o = json_to_lua(&lua, obj).map_err(|e| e.to_string())?;
    lua.globals().set("obj", o).map_err(|e| e.to_string())?;
    let ret: mlua::Value = lua.load(script).eval().map_err(|e| e.to_string())?;
    if !ret.is_table() {
        return Err(format!(
            "expect table output from Lua script, not {}",
            ret.type_name()
        ));
    }
    lua_to_json(&ret)
}

/// Discovery on mlua, read as Argo CD reads it (sorted by name).
pub fn mlua_discovery(
    script: &str,
    obj: &Value,
    sandbox: Sandbox,
) -> Result<Vec<Discovered>, String> {
    let Value::Object(map) = run_mlua(script, obj, sandbox)? else {
        return Err("discovery returned no actions".into());
    };
    let mut out: Vec<Discovered> = map
        .into_iter()
        .map(|(name, value)| match value {
            // As Argo CD: an object's fields make the action, anything else is the bare name.
            Value::Object(mut m) => {
                m.insert("name".into(), Value::String(name));
                serde_json::from_value(Value::Object(m)).map_err(|e| e.to_string())
            }
            _ => Ok(Discovered {
                name,
                disabled: false,
                icon_class: String::new(),
                display_name: String::new(),
            }),
        })
        .collect::<Result<_, String>>()?;
    out.sort();
    Ok(out)
}

/// An action on mlua: the patched object, cleaned as Argo CD cleans it.
pub fn mlua_action(script: &str, obj: &Value, sandbox: Sandbox) -> Result<Value, String> {
    let mut out = run_mlua(script, obj, sandbox)?;
    clean_returned(&mut out, obj);
    Ok(out)
}

/// Argo CD's `cleanReturnedObj`: an empty list where the live object has a map is that map.
fn clean_returned(new: &mut Value, old: &Value) {
    match (new, old) {
        (Value::Object(n), Value::Object(o)) => {
            for (k, ov) in o {
                let Some(nv) = n.get_mut(k) else { continue };
                match (&*nv, ov) {
                    (Value::Array(a), Value::Object(_)) if a.is_empty() => *nv = ov.clone(),
                    _ => clean_returned(nv, ov),
                }
            }
        }
        (Value::Array(n), Value::Array(o)) => {
            for (nv, ov) in n.iter_mut().zip(o) {
                clean_returned(nv, ov);
            }
        }
        _ => {}
    }
}

/// JSON equality as Go decodes JSON (every number a float64): `10` and `10.0` are the same.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// RFC 7386 merge patch turning `from` into `to` (what `jsonpatch.CreateMergePatch` makes,
/// comparing numbers as Go's decoder reads them).
pub fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(f), Value::Object(t)) => {
            let mut out = Map::new();
            for (k, fv) in f {
                match t.get(k) {
                    None => {
                        out.insert(k.clone(), Value::Null);
                    }
                    Some(tv) if !same(tv, fv) => {
                        out.insert(k.clone(), merge_patch(fv, tv));
                    }
                    Some(_) => {}
                }
            }
            for (k, tv) in t.iter().filter(|(k, _)| !f.contains_key(*k)) {
                out.insert(k.clone(), tv.clone());
            }
            Value::Object(out)
        }
        _ => to.clone(),
    }
}

/// Argo CD's split of a merge patch: (everything but status, status alone if it changed).
pub fn split_status(patch: &Value) -> (Value, Option<Value>) {
    let mut rest = patch.clone();
    let status = rest.as_object_mut().and_then(|m| m.remove("status"));
    (rest, status.map(|s| json!({ "status": s })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_patch_holds_only_the_difference() {
        let from = json!({"a": 1, "b": {"c": 2, "d": 3}, "s": {"x": 1}});
        let to = json!({"a": 1, "b": {"c": 2, "e": 4}, "s": {"x": 2}});
        let p = merge_patch(&from, &to);
        assert_eq!(p, json!({"b": {"d": null, "e": 4}, "s": {"x": 2}}));
        assert_eq!(merge_patch(&from, &from), json!({}));
        assert_eq!(
            merge_patch(&json!({"r": 10.0}), &json!({"r": 10})),
            json!({})
        );
        let (rest, status) = split_status(&json!({"b": 1, "status": {"x": 2}}));
        assert_eq!(
            (rest, status),
            (json!({"b": 1}), Some(json!({"status": {"x": 2}})))
        );
    }

    #[test]
    fn an_empty_table_is_the_live_map_again() {
        let mut new = json!({"spec": {"rollout": []}, "keep": []});
        clean_returned(
            &mut new,
            &json!({"spec": {"rollout": {"paused": true}}, "keep": []}),
        );
        assert_eq!(
            new,
            json!({"spec": {"rollout": {"paused": true}}, "keep": []})
        );
    }
}
