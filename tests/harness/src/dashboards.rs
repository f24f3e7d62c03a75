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

/// The alerts the chart ships, as a Prometheus rule file: the `spec.groups` of the
/// PrometheusRule the chart renders with `prometheusRule.enabled` (from its
/// `files/alerts.yaml`), rendered by the real Helm engine as users get them.
pub fn chart_alert_rules() -> String {
    let values = serde_json::json!({"prometheusRule": {"enabled": true}});
    let objects = crate::chart::render(&values, crate::chart::E2E_NAMESPACE)
        .unwrap_or_else(|e| panic!("rendering the chart's PrometheusRule: {e:#}"));
    let rule = objects
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("prometheusRule.enabled renders a PrometheusRule");
    serde_yaml::to_string(&serde_json::json!({"groups": rule["spec"]["groups"]}))
        .expect("serialising the rule file")
}

/// The alert names of a rule file, in order.
pub fn alert_names(rules: &str) -> Vec<String> {
    let file: serde_yaml::Value = serde_yaml::from_str(rules).expect("the rule file is YAML");
    file["groups"]
        .as_sequence()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_sequence().cloned().unwrap_or_default())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect()
}

/// The rule file with the threshold of each alert named in `lower` (the number after the
/// expression's last `>`) replaced by `threshold`, so that a test need not wait for a
/// production threshold; the other alerts are left as written. Panics on a named alert that is
/// missing or whose expression does not end in `> <number>`: the test must then be taught its
/// shape instead of silently testing something else.
pub fn with_thresholds(rules: &str, threshold: &str, lower: &[&str]) -> String {
    let mut file: serde_yaml::Value = serde_yaml::from_str(rules).expect("the rule file is YAML");
    let groups = file["groups"]
        .as_sequence_mut()
        .expect("the rule file has groups");
    let mut lowered = Vec::new();
    for group in groups {
        let rules = group["rules"].as_sequence_mut().expect("a group has rules");
        for rule in rules.iter_mut() {
            let Some(name) = rule["alert"].as_str().map(str::to_string) else {
                continue;
            };
            if !lower.contains(&name.as_str()) {
                continue;
            }
            let expr = rule["expr"].as_str().expect("an alert has an expr").trim();
            let (head, number) = expr
                .rsplit_once('>')
                .unwrap_or_else(|| panic!("alert expression without a final `>`: {expr}"));
            assert!(
                number.trim().parse::<f64>().is_ok(),
                "alert expression does not end in `> <number>`: {expr}"
            );
            rule["expr"] = serde_yaml::Value::String(format!("{}> {threshold}", head));
            lowered.push(name);
        }
    }
    for name in lower {
        assert!(
            lowered.iter().any(|l| l == name),
            "no alert {name} to lower in the rule file"
        );
    }
    serde_yaml::to_string(&file).expect("serialising the rule file")
}

/// The rule file with the `for:` of every alert that has one set to `duration`, so that a test
/// sees an alert fire within seconds of its condition holding rather than minutes. Panics when
/// no alert has a `for:` (the test would then not shorten anything).
pub fn with_for(rules: &str, duration: &str) -> String {
    let mut file: serde_yaml::Value = serde_yaml::from_str(rules).expect("the rule file is YAML");
    let mut shortened = 0;
    for group in file["groups"]
        .as_sequence_mut()
        .expect("the rule file has groups")
    {
        for rule in group["rules"]
            .as_sequence_mut()
            .expect("a group has rules")
            .iter_mut()
        {
            if rule["alert"].is_string() && !rule["for"].is_null() {
                rule["for"] = serde_yaml::Value::String(duration.to_string());
                shortened += 1;
            }
        }
    }
    assert!(shortened > 0, "no alert with a `for:` in the rule file");
    serde_yaml::to_string(&file).expect("serialising the rule file")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charts_alerts_are_found_and_their_thresholds_lowered() {
        let rules = chart_alert_rules();
        let names = alert_names(&rules);
        assert!(names.len() >= 3, "{names:?}");
        let lower = [
            "TemporalWorkerRolloutBlocked",
            "TemporalWorkerRolloutStepOverdue",
        ];
        let lowered = with_thresholds(&rules, "3", &lower);
        assert_eq!(alert_names(&lowered), names);
        assert!(lowered.contains("> 3"), "{lowered}");
        assert!(!lowered.contains("> 900"), "{lowered}");
        assert!(!lowered.contains("> 300"), "{lowered}");
        // The alerts not named are left as written.
        assert!(lowered.contains("< 7 * 86400"), "{lowered}");
        let short = with_for(&rules, "1s");
        let file: serde_yaml::Value = serde_yaml::from_str(&short).expect("YAML");
        let fors: Vec<&str> = file["groups"][0]["rules"]
            .as_sequence()
            .expect("rules")
            .iter()
            .filter_map(|r| r["for"].as_str())
            .collect();
        assert!(
            fors.len() >= 5 && fors.iter().all(|f| *f == "1s"),
            "{fors:?}"
        );
        assert_eq!(alert_names(&short), names);
    }
}
