//! `lint`'s evaluation of the CRDs' CEL rules (`x-kubernetes-validations`), with the `cel`
//! crate, as the API server evaluates them on a create: each rule on the value at its schema
//! node (`self`), a refusal as `<path>: Invalid value: "<type>": <message>` (or Forbidden /
//! Required by the rule's `reason`). Transition rules (`oldSelf`) need the stored object, so a
//! file cannot be checked against them; the API server skips them on a create too. Kubernetes'
//! list extension `isSorted()` is added; nothing else the rules use is missing from the crate.

use std::sync::Arc;

use cel::extractors::This;
use cel::{Context, Program};
use serde_json::Value;

use crate::cli::lint_schema::{ErrorKind, FieldError};

/// Every CEL refusal of `value` at `path` under `schema`.
pub fn validate(schema: &Value, value: &Value, path: &str, out: &mut Vec<FieldError>) {
    if value.is_null() {
        return;
    }
    for rule in schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(e) = refusal(schema, rule, value, path) {
            out.push(e);
        }
    }
    let child = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in map {
                match (properties.and_then(|p| p.get(k)), additional) {
                    (Some(s), _) => validate(s, v, &child(k), out),
                    (None, Some(s)) => validate(s, v, &format!("{path}[{k}]"), out),
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    validate(item, v, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// The error of one rule on `value`, when it evaluates to false. A rule that needs `oldSelf`
/// or cannot be evaluated here is not reported (the API server checks it).
fn refusal(schema: &Value, rule: &Value, value: &Value, path: &str) -> Option<FieldError> {
    let source = rule.get("rule")?.as_str()?;
    if source.contains("oldSelf") {
        return None;
    }
    let message = rule
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| format!("failed rule: {source}"), str::to_string);
    let ty = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("object");
    // A false rule shows a scalar's value and no value for an object or a list; a rule that
    // could not be evaluated shows the type.
    let (shown, message) = match run(source, value)? {
        Ok(true) => return None,
        Ok(false) if value.is_object() || value.is_array() => (None, message),
        Ok(false) => (Some(crate::cli::lint_schema::shown(value)), message),
        Err(error) => (
            Some(format!("{ty:?}")),
            format!("{error} evaluating rule: {message}"),
        ),
    };
    let field_path = rule.get("fieldPath").and_then(Value::as_str).unwrap_or("");
    let path = format!("{path}{field_path}");
    let (kind, value) = match rule.get("reason").and_then(Value::as_str) {
        Some("FieldValueForbidden") => (ErrorKind::Forbidden, None),
        Some("FieldValueRequired") => (ErrorKind::Required, None),
        Some("FieldValueDuplicate") => (ErrorKind::Duplicate, shown),
        _ => (ErrorKind::Invalid, shown),
    };
    Some(FieldError {
        path,
        kind,
        value,
        detail: message,
    })
}

/// The rule's verdict on `value` as `self`; None when it does not compile or evaluate to a
/// boolean here.
pub fn evaluate(source: &str, value: &Value) -> Option<bool> {
    run(source, value)?.ok()
}

/// The rule's verdict, or the error evaluating it in the API server's (cel-go's) words where
/// they are known; None when the rule cannot be run here.
fn run(source: &str, value: &Value) -> Option<Result<bool, String>> {
    let program = Program::compile(source).ok()?;
    let mut context = Context::default();
    context.add_variable_from_value("self", cel::to_value(value).ok()?);
    context.add_function("isSorted", is_sorted).ok()?;
    match program.execute(&context) {
        Ok(cel::Value::Bool(b)) => Some(Ok(b)),
        Ok(_) => None,
        // The one runtime error the CRDs' rules can meet: a duration that does not parse
        // (its pattern error is reported too, as the API server reports both).
        Err(_) if source.contains("duration(") => Some(Err(
            "type conversion error from 'string' to 'google.protobuf.Duration'".to_string(),
        )),
        Err(e) => Some(Err(e.to_string())),
    }
}

/// Kubernetes' `<list>.isSorted()`: every element no greater than the next.
fn is_sorted(This(list): This<Arc<Vec<cel::Value>>>) -> bool {
    list.windows(2).all(|w| match (&w[0], &w[1]) {
        (cel::Value::Int(a), cel::Value::Int(b)) => a <= b,
        (cel::Value::UInt(a), cel::Value::UInt(b)) => a <= b,
        (cel::Value::Float(a), cel::Value::Float(b)) => a <= b,
        (cel::Value::String(a), cel::Value::String(b)) => a <= b,
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rules_the_crds_use_evaluate() {
        let steps = json!([{"rampPercentage": 10}, {"rampPercentage": 5}]);
        let sorted = "self.map(s, s.rampPercentage).isSorted()";
        assert_eq!(evaluate(sorted, &steps), Some(false));
        assert_eq!(
            evaluate(sorted, &json!([{"rampPercentage": 1}])),
            Some(true)
        );
        assert_eq!(
            evaluate("duration(self) >= duration('1s')", &json!("500ms")),
            Some(false)
        );
        assert_eq!(
            evaluate("duration(self) >= duration('1s')", &json!("1m")),
            Some(true)
        );
        let port = r"self.matches('^[^:]+:0*([1-9][0-9]{0,3})$')";
        assert_eq!(evaluate(port, &json!("host:0")), Some(false));
        assert_eq!(evaluate(port, &json!("host:7233")), Some(true));
        let has = "has(self.a) != has(self.b)";
        assert_eq!(evaluate(has, &json!({"a": 1, "b": 2})), Some(false));
        assert_eq!(
            evaluate(
                "!self.metadata.name.contains('.')",
                &json!({"metadata": {"name": "a.b"}})
            ),
            Some(false)
        );
        let keys = "self.all(k, !k.startsWith('temporal.io/'))";
        assert_eq!(evaluate(keys, &json!({"temporal.io/x": "1"})), Some(false));
    }

    #[test]
    fn a_refusal_names_the_field_and_the_rule_message() {
        let schema = json!({"type": "object", "properties": {"replicas": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self >= 1", "message": "at least 1"}]}}});
        let mut out = Vec::new();
        validate(&schema, &json!({"replicas": 0}), "spec", &mut out);
        let shown: Vec<String> = out.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["spec.replicas: Invalid value: 0: at least 1"]);
    }
}
