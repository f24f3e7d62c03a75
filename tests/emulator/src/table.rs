//! `meta.k8s.io/v1` Table output (what `kubectl get` asks for), using a CRD's
//! `additionalPrinterColumns` and a few built-in column sets.

use serde_json::{Value, json};

use crate::registry::{Builtin, PrinterColumn, ResourceDef};

/// Whether the Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// Evaluates the JSONPath subset CRD printer columns use: `.a.b`, `[n]`, `[*]`, `['k']`,
/// `[?(@.f=="v")]`.
pub fn jsonpath(obj: &Value, path: &str) -> Vec<Value> {
    let p = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut cur: Vec<Value> = vec![obj.clone()];
    let bytes: Vec<char> = p.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            '.' => {
                let start = i + 1;
                let mut j = start;
                while j < bytes.len() && bytes[j] != '.' && bytes[j] != '[' {
                    j += 1;
                }
                let field: String = bytes[start..j].iter().collect();
                if !field.is_empty() {
                    cur = cur.iter().filter_map(|v| v.get(&field).cloned()).collect();
                }
                i = j;
            }
            '[' => {
                let Some(end) = find_close(&bytes, i) else {
                    return Vec::new();
                };
                let inner: String = bytes[i + 1..end].iter().collect();
                cur = step_bracket(&cur, inner.trim());
                i = end + 1;
            }
            _ => return Vec::new(),
        }
    }
    cur
}

fn find_close(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    for (k, c) in chars.iter().enumerate().skip(open) {
        match (quote, c) {
            (Some(q), c) if *c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(*c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> String {
    s.trim().trim_matches('"').trim_matches('\'').to_string()
}

fn step_bracket(cur: &[Value], inner: &str) -> Vec<Value> {
    if inner == "*" {
        return cur
            .iter()
            .flat_map(|v| match v {
                Value::Array(a) => a.clone(),
                Value::Object(m) => m.values().cloned().collect(),
                _ => Vec::new(),
            })
            .collect();
    }
    if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
        let (lhs, rhs, eq) = if let Some((l, r)) = filter.split_once("!=") {
            (l, Some(r), false)
        } else if let Some((l, r)) = filter.split_once("==") {
            (l, Some(r), true)
        } else {
            (filter, None, true)
        };
        let field = lhs.trim().trim_start_matches('@');
        return cur
            .iter()
            .flat_map(|v| v.as_array().cloned().unwrap_or_default())
            .filter(|item| {
                let got = jsonpath(item, field).into_iter().next();
                match rhs {
                    None => got.is_some(),
                    Some(r) => {
                        let want = unquote(r);
                        let g = match &got {
                            Some(Value::String(s)) => Some(s.clone()),
                            Some(other) => Some(other.to_string()),
                            None => None,
                        };
                        (g.as_deref() == Some(want.as_str())) == eq
                    }
                }
            })
            .collect();
    }
    if inner.starts_with('\'') || inner.starts_with('"') {
        let k = unquote(inner);
        return cur.iter().filter_map(|v| v.get(&k).cloned()).collect();
    }
    match inner.parse::<i64>() {
        Ok(n) => cur
            .iter()
            .filter_map(|v| {
                let a = v.as_array()?;
                let idx = if n < 0 { a.len() as i64 + n } else { n };
                a.get(usize::try_from(idx).ok()?).cloned()
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Kubernetes' short human durations ("5s", "3m2s", "4h", "2d5h", ...).
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h) = (s / 60, s / 3600);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{}d", h / 24)
        } else {
            format!("{}d{}h", h / 24, h % 24)
        }
    } else if h < 24 * 365 * 2 {
        format!("{}d", h / 24)
    } else if h < 24 * 365 * 8 {
        format!("{}y{}d", h / 24 / 365, (h / 24) % 365)
    } else {
        format!("{}y", h / 24 / 365)
    }
}

fn age(v: &Value) -> Value {
    let Some(ts) = v.as_str().and_then(|s| s.parse::<jiff::Timestamp>().ok()) else {
        return Value::Null;
    };
    let secs = jiff::Timestamp::now().as_second() - ts.as_second();
    json!(human_duration(secs))
}

fn col(
    name: &str,
    type_: &str,
    json_path: &str,
    format: &str,
    description: &str,
    priority: i64,
) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        json_path: json_path.into(),
        description: description.into(),
        priority,
        format: format.into(),
    }
}

fn columns(def: &ResourceDef) -> Vec<PrinterColumn> {
    let age_col = col(
        "Age",
        "date",
        ".metadata.creationTimestamp",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        0,
    );
    let mut cols = vec![col(
        "Name",
        "string",
        ".metadata.name",
        "name",
        "Name must be unique within a namespace.",
        0,
    )];
    match def.builtin {
        Builtin::Custom if !def.printer_columns.is_empty() => {
            cols.extend(def.printer_columns.iter().cloned())
        }
        Builtin::Deployment => {
            cols.push(col(
                "Ready",
                "string",
                "",
                "",
                "Number of the pod with ready state",
                0,
            ));
            cols.push(col("Up-to-date", "string", ".status.updatedReplicas", "", "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", 0));
            cols.push(col("Available", "string", ".status.availableReplicas", "", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", 0));
            cols.push(age_col);
        }
        Builtin::Namespace => {
            cols.push(col(
                "Status",
                "string",
                ".status.phase",
                "",
                "The status of the namespace",
                0,
            ));
            cols.push(age_col);
        }
        _ => cols.push(age_col),
    }
    cols
}

fn cell(def: &ResourceDef, c: &PrinterColumn, obj: &Value) -> Value {
    if def.builtin == Builtin::Deployment && c.name == "Ready" {
        let ready = obj
            .pointer("/status/readyReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let want = obj
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        return json!(format!("{ready}/{want}"));
    }
    let found = jsonpath(obj, &c.json_path);
    let Some(v) = found.into_iter().next() else {
        return if def.builtin == Builtin::Deployment {
            json!(0)
        } else {
            Value::Null
        };
    };
    match c.type_.as_str() {
        "date" => age(&v),
        "integer" | "number" | "boolean" => v,
        _ => match v {
            Value::String(_) => v,
            other => json!(other.to_string()),
        },
    }
}

pub fn build(
    def: &ResourceDef,
    objs: &[&Value],
    include_object: &str,
    resource_version: Option<u64>,
) -> Value {
    let cols = columns(def);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| json!({"name": c.name, "type": if c.type_ == "date" { "string" } else { c.type_.as_str() }, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let cells: Vec<Value> = cols.iter().map(|c| cell(def, c, o)).collect();
            let object = match include_object {
                "None" => Value::Null,
                "Object" => (*o).clone(),
                _ => json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata").cloned().unwrap_or(json!({}))}),
            };
            json!({"cells": cells, "object": object})
        })
        .collect();
    let mut meta = json!({});
    if let Some(rv) = resource_version {
        meta["resourceVersion"] = json!(rv.to_string());
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_filters() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}], "n": 3}});
        assert_eq!(
            jsonpath(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![json!("True")]
        );
        assert_eq!(jsonpath(&o, ".status.n"), vec![json!(3)]);
        assert_eq!(jsonpath(&o, ".status.conditions[0].type"), vec![json!("A")]);
        assert!(jsonpath(&o, ".status.missing").is_empty());
    }

    #[test]
    fn durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(185), "3m5s");
        assert_eq!(human_duration(3600 * 5 + 60), "5h1m");
        assert_eq!(human_duration(86400 * 3), "3d");
    }
}
