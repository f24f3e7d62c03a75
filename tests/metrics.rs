//! Metrics exposition checks: every metric a dashboard queries is exported, rollout-state
//! series follow the store (no stale series), and `promtool check metrics` finds nothing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::metrics::{
    ControllerKind, Metrics, ReconcileOutcome, openmetrics_to_prometheus_text,
};
use temporal_worker_controller::workers::Workers;
use test_harness::{dashboards, manifests};

fn twd(ns: &str, name: &str, strategy: &str, status: Value) -> TemporalWorkerDeployment {
    let steps = if strategy == "Progressive" {
        json!([{"rampPercentage": 10, "pauseDuration": "1m"}, {"rampPercentage": 50, "pauseDuration": "1m"}])
    } else {
        json!([])
    };
    let twd = manifests::twd(name)
        .namespace(ns)
        .metadata(json!({"generation": 2, "uid": format!("uid-{name}"),
                         "creationTimestamp": "2024-05-01T10:00:00Z"}))
        .container(json!({"name": "w", "image": "img:1"}))
        .rollout(json!({"strategy": strategy, "steps": steps}))
        .connection("conn")
        .status(status);
    serde_json::from_value(twd.build()).expect("fixture must deserialize")
}

fn cond(type_: &str, status: &str, reason: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": format!("{type_} {reason}"),
           "lastTransitionTime": "2024-05-01T11:00:00Z"})
}

fn fixtures() -> Vec<TemporalWorkerDeployment> {
    vec![
        twd(
            "shop",
            "orders",
            "Progressive",
            json!({
                "observedGeneration": 2, "versionCount": 3,
                "targetVersion": {"buildID": "v2", "status": "Ramping", "rampPercentage": 10.0, "currentStep": 1,
                                  "nextStepAt": "2024-05-01T12:01:00Z"},
                "currentVersion": {"buildID": "v1", "status": "Current"},
                "deprecatedVersions": [{"buildID": "v0", "status": "Drained", "drainedSince": "2024-05-01T09:00:00Z"}],
                "conditions": [cond("Ready", "False", "Ramping"), cond("Progressing", "True", "Ramping")]
            }),
        ),
        twd(
            "shop",
            "payments",
            "AllAtOnce",
            json!({
                "observedGeneration": 2, "versionCount": 1,
                "targetVersion": {"buildID": "p1", "status": "Current"},
                "currentVersion": {"buildID": "p1", "status": "Current"},
                "conditions": [cond("Ready", "True", "RolloutComplete"), cond("Progressing", "False", "RolloutComplete")]
            }),
        ),
        twd(
            "billing",
            "invoices",
            "AllAtOnce",
            json!({
                "observedGeneration": 1, "versionCount": 0,
                "conditions": [cond("Ready", "False", "InvalidSpec"), cond("Progressing", "False", "InvalidSpec"),
                               cond("Stalled", "True", "InvalidSpec")]
            }),
        ),
        twd(
            "billing",
            "ledger",
            "Manual",
            json!({
                "observedGeneration": 2, "versionCount": 2,
                "targetVersion": {"buildID": "l2", "status": "Inactive"},
                "currentVersion": {"buildID": "l1", "status": "Current"},
                "conditions": [cond("Ready", "False", "TemporalStateFetchFailed"),
                               cond("Progressing", "False", "TemporalStateFetchFailed")]
            }),
        ),
    ]
}

fn store_with(objs: &[TemporalWorkerDeployment]) -> (Writer<TemporalWorkerDeployment>, Workers) {
    let mut writer = Writer::<TemporalWorkerDeployment>::new(KindSet::Seed);
    let listed = temporal_worker_controller::caches::Listed::done();
    let store = Workers::new(vec![(KindSet::Seed, (writer.as_reader(), listed))]);
    for o in objs {
        writer.apply_watcher_event(&watcher::Event::Apply(o.clone()));
    }
    (writer, store)
}

/// A metrics instance with every operational family touched at least once.
fn busy_metrics() -> Arc<Metrics> {
    let m = Arc::new(Metrics::new());
    m.reconcile_started(ControllerKind::WorkerDeployment)
        .finish(ReconcileOutcome::Success);
    m.reconcile_started(ControllerKind::WorkerDeployment)
        .finish(ReconcileOutcome::Error);
    m.reconcile_error(ControllerKind::WorkerDeployment, "TemporalStateFetchFailed");
    m.temporal_rpc("DescribeWorkerDeployment", "OK", Duration::from_millis(12));
    m.temporal_rpc(
        "SetWorkerDeploymentRampingVersion",
        "Unavailable",
        Duration::from_millis(40),
    );
    m.kube_write("create", "deployments", true);
    m.set_leader(true);
    m.gate_outcome("completed");
    m.backlog
        .replace(vec![temporal_worker_controller::backlog::VersionQueue {
            namespace: "shop".into(),
            name: "orders".into(),
            build_id: "v1".into(),
            temporal_namespace: "prod".into(),
            stats: temporal_worker_controller::temporal::task_queue_stats::QueueStats {
                task_queue: "orders".into(),
                queue_type: "workflow",
                backlog_count: 4,
                backlog_age_seconds: 2.0,
                add_rate: 1.0,
                dispatch_rate: 1.0,
            },
        }]);
    m
}

/// Sample lines `name{labels} value` (comments and EOF dropped).
fn samples(text: &str) -> Vec<(String, String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("sample has a value");
            let (name, labels) = match series.find('{') {
                Some(i) => (&series[..i], &series[i..]),
                None => (series, ""),
            };
            (
                name.to_string(),
                labels.to_string(),
                value.parse::<f64>().expect("numeric value"),
            )
        })
        .collect()
}

fn value(text: &str, name: &str, label_fragment: &str) -> Option<f64> {
    samples(text)
        .into_iter()
        .find(|(n, l, _)| n == name && l.contains(label_fragment))
        .map(|(_, _, v)| v)
}

const PROM_FUNCTIONS_AND_KEYWORDS: &[&str] = &[
    "sum",
    "count",
    "avg",
    "max",
    "min",
    "by",
    "without",
    "rate",
    "irate",
    "increase",
    "histogram_quantile",
    "time",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "le",
    "topk",
    "bottomk",
    "clamp_min",
    "clamp_max",
    "label_replace",
    "vector",
    "scalar",
    "abs",
    "offset",
    "changes",
    "resets",
    "delta",
    "deriv",
    "max_over_time",
    "min_over_time",
    "avg_over_time",
    "last_over_time",
    "count_over_time",
    "absent",
    "sort",
    "sort_desc",
    "round",
    "ceil",
    "floor",
    "timestamp",
    "group",
];

/// Identifiers in a PromQL expression that name metrics: strip strings, label matchers,
/// `by (...)` lists, ranges and template variables, then keep identifiers that are not
/// functions or keywords.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut cleaned = String::new();
    let mut chars = expr.chars().peekable();
    let mut depth_brace = 0;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                for d in chars.by_ref() {
                    if d == '"' {
                        break;
                    }
                }
                cleaned.push(' ');
            }
            '{' => {
                depth_brace += 1;
                cleaned.push(' ');
            }
            '}' => {
                depth_brace -= 1;
                cleaned.push(' ');
            }
            '[' => {
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                }
                cleaned.push(' ');
            }
            '$' => {
                while chars
                    .peek()
                    .is_some_and(|d| d.is_alphanumeric() || *d == '_')
                {
                    chars.next();
                }
                cleaned.push(' ');
            }
            _ if depth_brace > 0 => {}
            _ => cleaned.push(c),
        }
    }
    // Label lists after by/without/on/ignoring/group_left/group_right are not metrics.
    let mut out = BTreeSet::new();
    let tokens: Vec<&str> = cleaned
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '(' || c == ')'))
        .flat_map(|t| t.split_inclusive(['(', ')']))
        .collect();
    let mut in_label_list = false;
    let mut prev_kw = false;
    for tok in tokens {
        let word = tok.trim_end_matches(['(', ')']);
        if tok == "(" && prev_kw {
            in_label_list = true;
            prev_kw = false;
            continue;
        }
        if in_label_list {
            if tok.ends_with(')') {
                in_label_list = false;
            }
            continue;
        }
        prev_kw = matches!(
            word,
            "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
        );
        if prev_kw && tok.ends_with('(') {
            in_label_list = true;
            prev_kw = false;
            continue;
        }
        if word.is_empty()
            || word.chars().next().is_some_and(|c| c.is_ascii_digit())
            || PROM_FUNCTIONS_AND_KEYWORDS.contains(&word)
        {
            continue;
        }
        out.insert(word.to_string());
    }
    out
}

/// PromQL syntax check: every expression (Grafana variables substituted) goes into a rules
/// file that `promtool check rules` parses.
fn promtool_check_exprs(file: &str, exprs: &[String]) {
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let e = dashboards::substitute(e, "default", "example", "5m");
            json!({"record": format!("dashboard:expr_{i}"), "expr": e})
        })
        .collect();
    let doc = json!({"groups": [{"name": file, "rules": rules}]});
    let path = std::env::temp_dir().join(format!(
        "twc-dashboard-rules-{}-{file}.yaml",
        std::process::id()
    ));
    // JSON is valid YAML.
    std::fs::write(&path, serde_json::to_string_pretty(&doc).expect("json"))
        .expect("write rules file");
    let out = std::process::Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&path)
        .output()
        .expect("run promtool");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{file}: invalid PromQL:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn metric_name_extraction_works() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le) (rate(foo_bucket{job="x", a=~"$ns"}[$__rate_interval]))) / on (namespace) group_left(name) bar_info"#,
    );
    assert_eq!(
        names,
        BTreeSet::from(["bar_info".to_string(), "foo_bucket".to_string()])
    );
}

#[test]
fn promql_syntax_check_rejects_garbage() {
    let bad = std::panic::catch_unwind(|| {
        promtool_check_exprs("bad.json", &["sum(rate(foo[5m])".to_string()])
    });
    assert!(bad.is_err(), "an unbalanced expression must be reported");
}

#[test]
fn detail_dashboard_is_parameterised() {
    let board = dashboards::load("rollout-detail.json");
    let names: Vec<&str> = board["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(
        names.contains(&"namespace") && names.contains(&"name"),
        "{names:?}"
    );
    assert_eq!(dashboards::label_values_queries(&board).len(), 2);
    for e in dashboards::exprs(&board) {
        assert!(
            e.contains(r#"namespace="$namespace""#) && e.contains(r#"name="$name""#),
            "unscoped query {e:?}"
        );
    }
}

#[test]
fn every_dashboard_metric_is_exported() {
    let (_w, store) = store_with(&fixtures());
    let text = busy_metrics().encode(&store);
    let exported: BTreeSet<String> = samples(&text).into_iter().map(|(n, _, _)| n).collect();
    let files = dashboards::files();
    assert!(files.len() >= 2, "dashboards: {files:?}");
    for file in &files {
        let file = file.as_str();
        let board = dashboards::load(file);
        let exprs = dashboards::exprs(&board);
        assert!(
            exprs.len() >= 5,
            "{file}: expected several queries, found {}",
            exprs.len()
        );
        for q in dashboards::label_values_queries(&board) {
            let names = metric_names(&q.selector);
            assert_eq!(names.len(), 1, "{file}: {q:?}");
            let name = names.into_iter().next().unwrap_or_default();
            assert!(
                exported.contains(&name),
                "{file}: template variable uses {name}, which is not exported"
            );
        }
        promtool_check_exprs(file, &exprs);
        for expr in exprs {
            let names = metric_names(&expr);
            assert!(!names.is_empty(), "{file}: no metric found in {expr:?}");
            for name in names {
                assert!(
                    exported.contains(&name),
                    "{file}: {name} (in {expr:?}) is not exported; exported: {exported:?}"
                );
            }
        }
    }
}

/// The series `rollout_state_follows_the_store` expects from the fixtures at 12:00: metric
/// name (without the `temporal_worker_controller_` prefix), a fragment of its labels, and its
/// value (`None`: no such series).
fn expected_rollout_series() -> Vec<(&'static str, &'static str, Option<f64>)> {
    let orders = r#"namespace="shop",name="orders""#;
    let payments = r#"namespace="shop",name="payments""#;
    let invoices = r#"namespace="billing",name="invoices""#;
    vec![
        ("rollout_ramp_ratio", orders, Some(0.1)),
        // The first step, numbered from 1 as everywhere.
        ("rollout_step", orders, Some(1.0)),
        ("rollout_configured_steps", orders, Some(2.0)),
        (
            "rollout_next_step_timestamp_seconds",
            orders,
            Some(1_714_564_860.0),
        ),
        ("rollout_time_in_phase_seconds", orders, Some(3600.0)),
        ("rollout_ready", orders, Some(0.0)),
        (
            "rollout_versions",
            r#"namespace="shop",name="orders",status="Drained""#,
            Some(1.0),
        ),
        // Statuses without versions are left out rather than reported as 0.
        (
            "rollout_versions",
            r#"namespace="shop",name="orders",status="Inactive""#,
            None,
        ),
        ("rollout_ramp_ratio", payments, Some(1.0)),
        ("rollout_ready", payments, Some(1.0)),
        // Target and current are the same version: counted once.
        (
            "rollout_versions",
            r#"namespace="shop",name="payments",status="Current""#,
            Some(1.0),
        ),
        ("rollout_stalled", invoices, Some(1.0)),
        ("rollout_observed_generation_lag", invoices, Some(1.0)),
        ("rollouts", r#"phase="Blocked""#, Some(1.0)),
        ("rollouts", r#"phase="Stalled""#, Some(1.0)),
        ("rollouts", r#"phase="Completed""#, Some(1.0)),
        ("rollouts", r#"phase="Progressing""#, Some(1.0)),
    ]
}

#[test]
fn rollout_state_follows_the_store() {
    let objs = fixtures();
    let (mut writer, store) = store_with(&objs);
    let m = Metrics::new();
    let now: jiff::Timestamp = "2024-05-01T12:00:00Z".parse().expect("timestamp");
    let text = m.encode_at(&store, now);
    let p = "temporal_worker_controller_";

    for (name, labels, want) in expected_rollout_series() {
        assert_eq!(
            value(&text, &format!("{p}{name}"), labels),
            want,
            "{p}{name}{{{labels}}}"
        );
    }
    assert!(text.contains(
        r#"temporal_worker_controller_rollout_info{namespace="shop",name="orders",kind="TemporalWorkerDeployment",strategy="Progressive",phase="Progressing",reason="Ramping",target_build_id="v2",current_build_id="v1"} 1"#
    ), "{text}");
    // Histograms never carry object identity or build IDs.
    for (name, labels, _) in samples(&text) {
        if name.ends_with("_bucket") || name.ends_with("_sum") || name.ends_with("_count") {
            assert!(
                !labels.contains("namespace=") && !labels.contains("build"),
                "{name}{labels}"
            );
        }
    }

    // Deleting an object removes its series at the next scrape.
    writer.apply_watcher_event(&watcher::Event::Delete(objs[0].clone()));
    let text = m.encode_at(&store, now);
    assert!(
        !text.contains(r#"name="orders""#),
        "stale series for a deleted TWD:\n{text}"
    );
    assert!(text.contains(r#"name="payments""#));
}

/// promtool lints the Prometheus text format (0.0.4) only, which `/metrics` serves to
/// clients that do not ask for OpenMetrics; it is the same exposition with 0.0.4 metadata.
#[test]
fn promtool_finds_no_problems() {
    let (_w, store) = store_with(&fixtures());
    let m = busy_metrics();
    let openmetrics = m.encode(&store);
    let text = openmetrics_to_prometheus_text(&openmetrics);
    // Same samples in both encodings; only metadata lines differ.
    assert_eq!(samples(&openmetrics), samples(&text));
    assert!(
        m.encode_prometheus_text(&store)
            .contains("# TYPE temporal_worker_controller_reconcile_total counter")
    );
    assert!(openmetrics.ends_with("# EOF\n"));
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool must be installed (Debian package prometheus)");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(text.as_bytes()).expect("write to promtool");
    }
    let out = child.wait_with_output().expect("promtool output");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool check metrics:\n{report}\n---\n{text}"
    );
}

/// A TemporalWorkerOwnedResource merges its version labels into an HPA's external-metric
/// selector; the backlog series must carry exactly those labels, so that such an HPA selects the
/// series of its own version (docs/autoscaling.md).
#[test]
fn backlog_series_carry_the_labels_an_owned_hpa_selects_on() {
    use temporal_worker_controller::owned::validate;
    let (_w, store) = store_with(&fixtures());
    let text = busy_metrics().encode(&store);
    let line = text
        .lines()
        .find(|l| l.starts_with("temporal_worker_controller_version_backlog_tasks{"))
        .expect("a backlog series");
    for (label, value) in [
        (validate::METRIC_LABEL_DEPLOYMENT, "shop_orders"),
        (validate::METRIC_LABEL_BUILD_ID, "v1"),
        (validate::METRIC_LABEL_NAMESPACE, "prod"),
    ] {
        assert!(
            line.contains(&format!("{label}=\"{value}\"")),
            "{label}={value:?} missing from {line}"
        );
    }
}
