//! Checks of what is said about the exposition elsewhere: the docs' list of families with a
//! build ID, and the label names the dashboards query.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::api::TemporalWorkerDeployment;

/// An exposition in which every family has at least one sample.
fn busy_exposition() -> String {
    let mut twd = TemporalWorkerDeployment::test();
    twd.status = Some(
        serde_json::from_value(serde_json::json!({
            "targetVersion": {"buildID": "v2", "status": "Ramping", "rampPercentage": 10.0},
            "currentVersion": {"buildID": "v1", "status": "Current"},
            "deprecatedVersions": [{"buildID": "v0", "status": "Draining",
                "drainingSince": "2026-03-02T10:00:00Z", "openPinnedWorkflows": 2}],
        }))
        .expect("status"),
    );
    let workers = crate::workers::Workers::of(vec![twd]);
    let m = Metrics::new();
    m.reconcile_error(ControllerKind::WorkerDeployment, "InvalidSpec");
    m.temporal_rpc(
        "DescribeWorkerDeployment",
        "ResourceExhausted",
        Duration::ZERO,
    );
    m.kube_write("create", "deployments", true);
    m.backlog.replace(vec![crate::backlog::VersionQueue {
        namespace: "shop".into(),
        name: "orders".into(),
        build_id: "v1".into(),
        temporal_namespace: "prod".into(),
        stats: crate::temporal::task_queue_stats::QueueStats {
            task_queue: "orders".into(),
            queue_type: "workflow",
            backlog_count: 1,
            backlog_age_seconds: 1.0,
            add_rate: 1.0,
            dispatch_rate: 1.0,
        },
    }]);
    m.encode(&workers)
}

/// `(sample name, label names)` of every sample line.
fn samples(text: &str) -> Vec<(&str, Vec<&str>)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('{'))
        .map(|(name, rest)| {
            let labels = rest.rsplit_once('}').map_or("", |(l, _)| l);
            let names = labels
                .split("\",")
                .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
                .collect();
            (name, names)
        })
        .collect()
}

/// Names (without our prefix) of the families whose samples carry a build-ID label.
fn families_with_a_build_id(text: &str) -> BTreeSet<String> {
    let mut typed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' ').map(|(name, _)| name))
        .collect();
    // Longest first, so a sample of `x_y` is not taken for one of `x`.
    typed.sort_by_key(|n| std::cmp::Reverse(n.len()));
    samples(text)
        .into_iter()
        .filter(|(_, labels)| labels.iter().any(|l| l.ends_with("build_id")))
        .filter_map(|(sample, _)| typed.iter().find(|f| sample.starts_with(**f)))
        .map(|f| {
            f.trim_start_matches("temporal_worker_controller_")
                .to_string()
        })
        .collect()
}

/// The families listed under "Families that carry a build ID" in docs/status-api.md.
fn documented_build_id_families() -> BTreeSet<String> {
    let doc = include_str!("../../docs/status-api.md");
    let section = doc
        .split_once("### Families that carry a build ID")
        .map(|(_, rest)| rest.split("\n#").next().unwrap_or_default())
        .expect("docs/status-api.md has the section");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_string()))
        .collect()
}

#[test]
fn the_docs_list_exactly_the_families_that_carry_a_build_id() {
    let text = busy_exposition();
    let exported = families_with_a_build_id(&text);
    assert_eq!(exported.len(), 7, "{exported:?} in:\n{text}");
    assert_eq!(exported, documented_build_id_families());
}

#[test]
fn the_build_id_checker_sees_a_family_missing_from_the_docs() {
    let text = "# TYPE temporal_worker_controller_x gauge\n\
                temporal_worker_controller_x{build_id=\"v1\"} 1\n\
                # TYPE temporal_worker_controller_x_y gauge\n\
                temporal_worker_controller_x_y{name=\"a\",target_build=\"v1\"} 1\n";
    let found = families_with_a_build_id(text);
    assert_eq!(found, BTreeSet::from(["x".to_string()]));
    assert_ne!(found, documented_build_id_families());
}

/// Label names a PromQL expression uses: in matchers and in `by`/`without`/`on`/`ignoring`/
/// `group_left`/`group_right` lists.
fn promql_labels(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = expr.as_bytes();
    let word = |i: usize| bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_';
    for kw in [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ] {
        for (at, _) in expr.match_indices(kw) {
            let end = at + kw.len();
            if (at > 0 && word(at - 1)) || (end < bytes.len() && word(end)) {
                continue;
            }
            let Some(list) = expr[end..]
                .trim_start()
                .strip_prefix('(')
                .and_then(|r| r.split_once(')'))
                .map(|(l, _)| l)
            else {
                continue;
            };
            out.extend(
                list.split(',')
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(String::from),
            );
        }
    }
    for (at, _) in expr.match_indices('{') {
        let Some((matchers, _)) = expr[at + 1..].split_once('}') else {
            continue;
        };
        for m in matchers.split(',') {
            if let Some(name) = m.split(['=', '!']).next().map(str::trim)
                && !name.is_empty()
            {
                out.insert(name.to_string());
            }
        }
    }
    out
}

/// Label names in a Grafana legend (`{{label}}`).
fn legend_labels(legend: &str) -> BTreeSet<String> {
    legend
        .split("{{")
        .skip(1)
        .filter_map(|r| r.split_once("}}").map(|(l, _)| l.trim().to_string()))
        .collect()
}

/// Every label name a dashboard uses, by where it was found.
fn dashboard_labels(board: &Value, out: &mut Vec<(String, String)>) {
    match board {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", Value::String(e)) => {
                        out.extend(promql_labels(e).into_iter().map(|l| (l, e.clone())));
                    }
                    ("legendFormat", Value::String(f)) => {
                        out.extend(legend_labels(f).into_iter().map(|l| (l, f.clone())));
                    }
                    ("query" | "definition", Value::String(q))
                        if q.starts_with("label_values(") =>
                    {
                        let args = q.trim_start_matches("label_values(").trim_end_matches(')');
                        let (selector, label) = args.rsplit_once(',').unwrap_or(("", args));
                        out.push((label.trim().to_string(), q.clone()));
                        out.extend(promql_labels(selector).into_iter().map(|l| (l, q.clone())));
                    }
                    _ => dashboard_labels(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| dashboard_labels(i, out)),
        _ => {}
    }
}

#[test]
fn the_promql_label_reader_finds_every_kind_of_use() {
    let e = r#"sum by (controller, result) (rate(x_total{outcome="error", phase=~"A|B"}[5m])) * on (namespace) group_left y"#;
    let want = ["controller", "namespace", "outcome", "phase", "result"];
    assert_eq!(promql_labels(e), want.map(String::from).into());
    assert_eq!(
        legend_labels("target {{target_build}} / {{ x }}"),
        ["target_build", "x"].map(String::from).into()
    );
}

/// A dashboard that groups by a label no family has would still return data (one group with
/// the label empty), so the live Prometheus run cannot see a stale label name: this test does.
#[test]
fn every_label_a_dashboard_uses_is_exported() {
    let text = busy_exposition();
    let mut exported: BTreeSet<&str> = samples(&text).into_iter().flat_map(|(_, l)| l).collect();
    // Added by Prometheus to every scraped series.
    exported.extend(["instance", "job"]);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards");
    let mut boards = 0;
    for entry in std::fs::read_dir(&dir).expect("dashboards/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        boards += 1;
        let board: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("JSON");
        let mut used = Vec::new();
        dashboard_labels(&board, &mut used);
        assert!(used.len() > 10, "{}: {used:?}", path.display());
        for (label, place) in used {
            assert!(
                exported.contains(label.as_str()),
                "{}: label {label:?} (in {place:?}) is on no exported series",
                path.display()
            );
        }
    }
    assert!(boards >= 2, "dashboards found: {boards}");
}
