//! Reading the Grafana dashboards in `dashboards/`: their PromQL expressions, their template
//! variable queries, and Grafana's variable substitution. Shared by the offline metrics checks
//! (`tests/metrics.rs`) and the live Prometheus run in the end-to-end suite.

use std::path::PathBuf;

use serde_json::Value;

fn dir() -> PathBuf {
    crate::repo_root().join("dashboards")
}

/// Every dashboard file, sorted, so that a new dashboard is checked without touching tests.
pub fn files() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".json"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

pub fn load(name: &str) -> Value {
    let path = dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every panel target's `expr`, in document order.
pub fn exprs(dashboard: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, val) in map {
                    match (k.as_str(), val) {
                        ("expr", Value::String(s)) => out.push(s.clone()),
                        _ => walk(val, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(dashboard, &mut out);
    out
}

/// A `label_values(selector, label)` template variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelValuesQuery {
    pub variable: String,
    pub selector: String,
    pub label: String,
}

/// The dashboard's `label_values(...)` template variables.
pub fn label_values_queries(dashboard: &Value) -> Vec<LabelValuesQuery> {
    let mut out = Vec::new();
    for var in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = var["query"]["query"]
            .as_str()
            .or_else(|| var["query"].as_str())
            .unwrap_or_default();
        let Some(args) = query
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
        else {
            continue;
        };
        // The label is the last argument; the selector may itself contain commas.
        let (selector, label) = args.rsplit_once(',').unwrap_or(("", args));
        out.push(LabelValuesQuery {
            variable: var["name"].as_str().unwrap_or_default().to_string(),
            selector: selector.trim().to_string(),
            label: label.trim().to_string(),
        });
    }
    out
}

/// Grafana's substitution of the variables our dashboards use.
pub fn substitute(expr: &str, namespace: &str, name: &str, rate_interval: &str) -> String {
    expr.replace("$__rate_interval", rate_interval)
        .replace("$__range", "1h")
        .replace("$namespace", namespace)
        .replace("$name", name)
}
