//! `lint`'s check of an object against its CRD's OpenAPI schema, as the API server makes it
//! (types, enums, patterns, ranges, lengths, item counts, required fields),
//! each problem as a field error in the API server's words: `spec.replicas: Invalid value: -1:
//! spec.replicas in body should be greater than or equal to 0`.

use serde_json::Value;

/// One field error, in Kubernetes' `field.Error` shape.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// `spec.rollout.steps[0].rampPercentage`, or empty for the object itself (`<nil>`).
    pub path: String,
    pub kind: ErrorKind,
    /// The value as the API server prints it (Go `%#v`-like: strings quoted).
    pub value: Option<String>,
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Invalid,
    Unsupported,
    Required,
    Forbidden,
    TooMany,
    TooLong,
    Duplicate,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "<nil>"
        } else {
            &self.path
        };
        let kind = match self.kind {
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::Unsupported => "Unsupported value",
            ErrorKind::Required => "Required value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::TooMany => "Too many",
            ErrorKind::TooLong => "Too long",
            ErrorKind::Duplicate => "Duplicate value",
        };
        write!(f, "{path}: {kind}")?;
        if let Some(v) = &self.value {
            write!(f, ": {v}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// A JSON value as Go's `%#v` prints it in a field error: strings quoted, numbers plain.
pub fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Object(_) => "\"object\"".to_string(),
        Value::Array(_) => "\"array\"".to_string(),
        other => other.to_string(),
    }
}

fn err(path: &str, kind: ErrorKind, value: Option<String>, detail: String) -> FieldError {
    FieldError {
        path: path.to_string(),
        kind,
        value,
        detail,
    }
}

/// Every schema error of `value` at `path` (empty at the root).
pub fn validate(schema: &Value, value: &Value, path: &str, out: &mut Vec<FieldError>) {
    if value.is_null() {
        return;
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            let detail = format!(
                "{path} in body must be of type integer,string: {}",
                shown_type(value)
            );
            out.push(err(
                path,
                ErrorKind::Invalid,
                Some(shown_type(value)),
                detail,
            ));
        }
        return;
    }
    let Some(ty) = schema.get("type").and_then(Value::as_str) else {
        return;
    };
    if !of_type(ty, value) {
        let detail = format!("{path} in body must be of type {ty}: {}", shown_type(value));
        out.push(err(
            path,
            ErrorKind::Invalid,
            Some(shown_type(value)),
            detail,
        ));
        return;
    }
    scalar_rules(schema, value, path, out);
    match value {
        Value::Object(map) => object_rules(schema, map, path, out),
        Value::Array(items) => array_rules(schema, items, path, out),
        _ => {}
    }
}

/// The JSON type's name, quoted, as the type error shows it.
fn shown_type(v: &Value) -> String {
    let name = match v {
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    };
    format!("{name:?}")
}

fn of_type(ty: &str, v: &Value) -> bool {
    match ty {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => true,
    }
}

fn scalar_rules(schema: &Value, value: &Value, path: &str, out: &mut Vec<FieldError>) {
    if let Some(choices) = schema.get("enum").and_then(Value::as_array)
        && !choices.contains(value)
    {
        let supported: Vec<String> = choices.iter().map(shown).collect();
        let detail = format!("supported values: {}", supported.join(", "));
        out.push(err(
            path,
            ErrorKind::Unsupported,
            Some(shown(value)),
            detail,
        ));
    }
    if let (Some(s), Some(re)) = (
        value.as_str(),
        schema.get("pattern").and_then(Value::as_str),
    ) && regex_lite_match(re, s) == Some(false)
    {
        let detail = format!("{path} in body should match '{re}'");
        out.push(err(path, ErrorKind::Invalid, Some(shown(value)), detail));
    }
    if let Some(s) = value.as_str() {
        let chars = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && chars < min
        {
            let detail = format!("{path} in body should be at least {min} chars long");
            out.push(err(path, ErrorKind::Invalid, Some(shown(value)), detail));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && chars > max
        {
            out.push(err(
                path,
                ErrorKind::TooLong,
                None,
                format!("may not be more than {max} bytes"),
            ));
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            let detail = format!("{path} in body should be greater than or equal to {min}");
            out.push(err(path, ErrorKind::Invalid, Some(shown(value)), detail));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            let detail = format!("{path} in body should be less than or equal to {max}");
            out.push(err(path, ErrorKind::Invalid, Some(shown(value)), detail));
        }
    }
}

fn object_rules(
    schema: &Value,
    map: &serde_json::Map<String, Value>,
    path: &str,
    out: &mut Vec<FieldError>,
) {
    let child = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    for key in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(k) = key.as_str()
            && !map.contains_key(k)
        {
            out.push(err(&child(k), ErrorKind::Required, None, String::new()));
        }
    }
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (k, v) in map {
        match (properties.and_then(|p| p.get(k)), additional) {
            (Some(s), _) => validate(s, v, &child(k), out),
            (None, Some(s)) => validate(s, v, &format!("{path}[{k}]"), out),
            (None, None) => {}
        }
    }
}

fn array_rules(schema: &Value, items: &[Value], path: &str, out: &mut Vec<FieldError>) {
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && items.len() as u64 > max
    {
        let detail = format!("must have at most {max} items");
        out.push(err(
            path,
            ErrorKind::TooMany,
            Some(items.len().to_string()),
            detail,
        ));
        return;
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && (items.len() as u64) < min
    {
        let detail = format!("{path} in body should have at least {min} items");
        out.push(err(
            path,
            ErrorKind::Invalid,
            Some(items.len().to_string()),
            detail,
        ));
    }
    if let Some(item) = schema.get("items") {
        for (i, v) in items.iter().enumerate() {
            validate(item, v, &format!("{path}[{i}]"), out);
        }
    }
}

/// Whether `s` matches the schema's `pattern` (None: a pattern the regex engine cannot read,
/// which is left to the API server).
fn regex_lite_match(pattern: &str, s: &str) -> Option<bool> {
    regex::Regex::new(pattern).ok().map(|re| re.is_match(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(schema: Value, value: Value) -> Vec<String> {
        let mut out = Vec::new();
        validate(&schema, &value, "spec", &mut out);
        out.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn errors_read_as_the_api_server_writes_them() {
        let schema = json!({"type": "object", "required": ["name"], "properties": {
            "replicas": {"type": "integer", "minimum": 0.0},
            "strategy": {"type": "string", "enum": ["AllAtOnce", "Manual"]},
            "steps": {"type": "array", "maxItems": 1, "items": {"type": "integer"}},
            "pause": {"type": "string", "pattern": "^[0-9]+s$"}}});
        let value = json!({"replicas": -1, "strategy": "Canary", "steps": [1, 2], "pause": "x"});
        assert_eq!(
            errors(schema, value),
            [
                "spec.name: Required value",
                "spec.pause: Invalid value: \"x\": spec.pause in body should match '^[0-9]+s$'",
                "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
                "spec.steps: Too many: 2: must have at most 1 items",
                "spec.strategy: Unsupported value: \"Canary\": supported values: \"AllAtOnce\", \"Manual\"",
            ]
        );
        let typed = errors(json!({"type": "integer"}), json!("ten"));
        assert_eq!(
            typed,
            ["spec: Invalid value: \"string\": spec in body must be of type integer: \"string\""]
        );
    }
}
