//! `x-kubernetes-validations` rules evaluated with the `cel` crate. `self` is the value at the
//! schema node; `oldSelf` is bound on updates, and transition rules (those naming `oldSelf`)
//! are skipped on create, like the real server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cel::extractors::This;
use cel::{Context, Env, Program};
use serde_json::Value;

use crate::error::Cause;

enum Compiled {
    Ok(Arc<Program>),
    Err(String),
}

fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib()))
}

fn compile(rule: &str) -> Result<Arc<Program>, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Compiled>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut g = cache.lock().unwrap_or_else(|e| e.into_inner());
    let entry = g
        .entry(rule.to_string())
        .or_insert_with(|| {
            Arc::new(match env().compile(rule) {
                Ok(p) => Compiled::Ok(Arc::new(p)),
                Err(e) => Compiled::Err(e.to_string()),
            })
        })
        .clone();
    match &*entry {
        Compiled::Ok(p) => Ok(p.clone()),
        Compiled::Err(e) => Err(e.clone()),
    }
}

fn cel_less(a: &cel::Value, b: &cel::Value) -> Option<bool> {
    use cel::Value as V;
    Some(match (a, b) {
        (V::Int(x), V::Int(y)) => x <= y,
        (V::UInt(x), V::UInt(y)) => x <= y,
        (V::Float(x), V::Float(y)) => x <= y,
        (V::Int(x), V::Float(y)) => (*x as f64) <= *y,
        (V::Float(x), V::Int(y)) => *x <= (*y as f64),
        (V::String(x), V::String(y)) => x <= y,
        _ => return None,
    })
}

/// The Kubernetes list library's `isSorted()`.
fn is_sorted(This(list): This<Arc<Vec<cel::Value>>>) -> bool {
    list.windows(2)
        .all(|w| cel_less(&w[0], &w[1]).unwrap_or(false))
}

fn eval(program: &Program, value: &Value, old: Option<&Value>) -> Result<bool, String> {
    let mut ctx = Context::with_env(env().clone());
    ctx.add_function("isSorted", is_sorted)
        .map_err(|e| e.to_string())?;
    let v = cel::to_value(value).map_err(|e| e.to_string())?;
    ctx.add_variable_from_value("self", v);
    if let Some(o) = old {
        let ov = cel::to_value(o).map_err(|e| e.to_string())?;
        ctx.add_variable_from_value("oldSelf", ov);
    }
    match program.execute(&ctx) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("rule did not evaluate to a bool: {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

fn type_word(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// Evaluates every rule at one schema node and appends failures.
pub fn check(
    rules: &[Value],
    value: &Value,
    old: Option<&Value>,
    path: &str,
    out: &mut Vec<Cause>,
) {
    for r in rules {
        let Some(rule) = r.get("rule").and_then(Value::as_str) else {
            continue;
        };
        let transition = rule.contains("oldSelf");
        if transition && old.is_none() {
            continue;
        }
        let field = match r.get("fieldPath").and_then(Value::as_str) {
            Some(fp) => format!("{path}{fp}").trim_start_matches('.').to_string(),
            // The real server prints a nil field path for rules on the root.
            None if path.is_empty() => "<nil>".to_string(),
            None => path.to_string(),
        };
        let reason = match r.get("reason").and_then(Value::as_str) {
            Some("FieldValueRequired") => "FieldValueRequired",
            Some("FieldValueDuplicate") => "FieldValueDuplicate",
            Some("FieldValueForbidden") => "FieldValueForbidden",
            _ => "FieldValueInvalid",
        };
        let program = match compile(rule) {
            Ok(p) => p,
            Err(e) => {
                out.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!(
                        "Invalid value: \"{}\": compilation failed: {e}",
                        type_word(value)
                    ),
                    field,
                });
                continue;
            }
        };
        match eval(&program, value, old) {
            Ok(true) => {}
            Ok(false) => {
                let msg = r
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("failed rule: {rule}"));
                out.push(Cause {
                    reason,
                    message: format!("Invalid value: \"{}\": {msg}", type_word(value)),
                    field,
                });
            }
            Err(e) => out.push(Cause {
                reason: "FieldValueInvalid",
                message: format!(
                    "Invalid value: \"{}\": evaluating rule: {e}",
                    type_word(value)
                ),
                field,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(rule: &str, v: Value) -> usize {
        let mut out = Vec::new();
        check(
            &[json!({"rule": rule, "message": "m"})],
            &v,
            None,
            "spec",
            &mut out,
        );
        out.len()
    }

    #[test]
    fn rules_used_by_our_crds() {
        assert_eq!(
            run(
                "!self.metadata.name.contains('.')",
                json!({"metadata": {"name": "a.b"}})
            ),
            1
        );
        assert_eq!(
            run(
                "!self.metadata.name.contains('.')",
                json!({"metadata": {"name": "ab"}})
            ),
            0
        );
        assert_eq!(
            run(
                "self.metadata.name.size() <= 3",
                json!({"metadata": {"name": "abcd"}})
            ),
            1
        );
        assert_eq!(run("duration(self) >= duration('1s')", json!("500ms")), 1);
        assert_eq!(run("duration(self) >= duration('1s')", json!("1m")), 0);
        let sorted = "!has(self.steps) || size(self.steps) < 2 || self.steps.map(s, s.r).isSorted() && self.steps.all(s, self.steps.filter(t, t.r == s.r).size() == 1)";
        assert_eq!(run(sorted, json!({"steps": [{"r": 1}, {"r": 5}]})), 0);
        assert_eq!(run(sorted, json!({"steps": [{"r": 5}, {"r": 1}]})), 1);
        assert_eq!(run(sorted, json!({"steps": [{"r": 5}, {"r": 5}]})), 1);
        assert_eq!(run(sorted, json!({})), 0);
        assert_eq!(run("has(self.a) != has(self.b)", json!({"a": 1})), 0);
        assert_eq!(
            run("has(self.a) != has(self.b)", json!({"a": 1, "b": 2})),
            1
        );
    }
}
