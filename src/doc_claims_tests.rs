//! Checks of the claims `docs/architecture.md` makes about the code that a test can check
//! (marked *(checked)* there): the length of the worker-deployment driver, and that only the
//! report stages write status and emit events. Each checker also has a test showing it fails
//! on code that breaks the claim.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// The production part of a source file (test modules may do anything).
fn production(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or_default()
}

/// Lines of `fn name` in `source`, from its signature to its closing brace.
fn fn_lines(source: &str, name: &str) -> Option<usize> {
    let lines: Vec<&str> = source.lines().collect();
    let start = lines.iter().position(|l| {
        let l = l.trim_start();
        ["fn ", "async fn ", "pub fn ", "pub async fn "]
            .iter()
            .any(|p| l.starts_with(&format!("{p}{name}(")))
    })?;
    let mut depth = 0i32;
    let mut opened = false;
    for (i, line) in lines.iter().enumerate().skip(start) {
        depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
        opened |= line.contains('{');
        if opened && depth <= 0 {
            return Some(i - start + 1);
        }
    }
    None
}

/// The number in the doc's claim "the driver `plan_and_act()` is *(checked)* at most N lines".
fn claimed_driver_lines(doc: &str) -> Option<usize> {
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let claim = "`plan_and_act()` is *(checked)* at most ";
    let rest = &flat[flat.find(claim)? + claim.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

#[test]
fn the_driver_is_as_short_as_the_architecture_page_says() {
    let doc = read("docs/architecture.md");
    let claimed =
        claimed_driver_lines(&doc).expect("the driver-length claim in docs/architecture.md");
    let source = read("src/worker_deployment/mod.rs");
    let actual = fn_lines(production(&source), "plan_and_act").expect("plan_and_act()");
    assert!(
        actual <= claimed,
        "plan_and_act() has {actual} lines; docs/architecture.md claims at most {claimed}"
    );
}

#[test]
fn the_length_checker_counts_a_function_and_reads_the_claim() {
    let src = "fn other() {}\nasync fn plan_and_act(x: u8) -> u8 {\n    if x > 0 {\n        1\n    } else { 2 }\n}\n";
    assert_eq!(fn_lines(src, "plan_and_act"), Some(5));
    assert_eq!(fn_lines(src, "missing"), None);
    let doc = "the driver `plan_and_act()` is\n*(checked)* at most 7 lines.";
    assert_eq!(claimed_driver_lines(doc), Some(7));
    assert_eq!(claimed_driver_lines("no claim here"), None);
}

/// Calls that write status or emit events.
const WRITER_CALLS: [&str; 4] = [
    ".replace_status(",
    ".patch_status(",
    ".normal(",
    ".warning(",
];

/// Where status writes and event emission may live: the report stages.
fn is_report_stage(rel: &str) -> bool {
    rel.starts_with("src/worker_deployment/report/")
        || rel == "src/owned/report.rs"
        || rel == "src/connection/report.rs"
}

/// `(file, call)` for every status write or event outside a report stage, in production code.
fn writers_outside_report(files: &[(String, String)]) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for (rel, text) in files {
        if is_report_stage(rel) || rel.ends_with("tests.rs") || !rel.starts_with("src/") {
            continue;
        }
        // The webhook writes no status and emits no event; the TWD/TWOR/Connection writers
        // are the reconcilers'. Everything under src/ is checked.
        for call in WRITER_CALLS {
            if production(text).contains(call) {
                out.push((rel.clone(), call));
            }
        }
    }
    out
}

fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root())
                .expect("under the crate")
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, fs::read_to_string(&path).expect("read source")));
        }
    }
}

#[test]
fn only_the_report_stages_write_status_and_emit_events() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    assert!(files.iter().any(|(rel, _)| is_report_stage(rel)));
    assert_eq!(writers_outside_report(&files), Vec::<(String, &str)>::new());
}

#[test]
fn the_writer_checker_finds_an_event_outside_the_report_stage() {
    let file = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let files = vec![
        file(
            "src/worker_deployment/report/events.rs",
            "ctx.services.events.normal(twd, r, n)",
        ),
        file("src/owned/report.rs", "api.patch_status(n, p, b)"),
        file(
            "src/worker_deployment/act/finalizers.rs",
            "ctx.services.events.warning(twd, r, n)",
        ),
        file(
            "src/owned/apply.rs",
            "fn f() {}\n#[cfg(test)]\nmod t { x.patch_status(a) }",
        ),
    ];
    assert_eq!(
        writers_outside_report(&files),
        vec![(
            "src/worker_deployment/act/finalizers.rs".to_string(),
            ".warning("
        )]
    );
}

/// The minors of the rows of `docs/kubernetes-versions.md`'s results table whose smoke set passed.
fn passed_minors(doc: &str) -> Vec<u32> {
    let results = doc.split("## Results").nth(1).unwrap_or_default();
    let mut minors: Vec<u32> = results
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let version = cells.get(1)?.strip_prefix("v1.")?;
            let passed = cells.get(3)? == &"passed";
            passed.then(|| version.split('.').next()?.parse().ok())?
        })
        .collect();
    minors.sort_unstable();
    minors.dedup();
    minors
}

/// The `kubeVersion` a chart must claim for `minors` (contiguous, oldest first).
fn claimed_range(minors: &[u32]) -> Option<String> {
    let (first, last) = (minors.first()?, minors.last()?);
    let contiguous = minors.windows(2).all(|w| w[1] == w[0] + 1);
    contiguous.then(|| format!(">=1.{first}.0-0 <1.{}.0-0", last + 1))
}

#[test]
fn the_charts_claim_exactly_the_kubernetes_minors_the_smoke_set_passed_on() {
    let minors = passed_minors(&read("docs/kubernetes-versions.md"));
    let rig = read("tools/control-plane/versions.env");
    let rig_minor: u32 = rig
        .lines()
        .find_map(|l| l.strip_prefix("KUBERNETES_VERSION=v1."))
        .and_then(|v| v.split('.').next()?.parse().ok())
        .expect("KUBERNETES_VERSION in versions.env");
    assert!(
        minors.contains(&rig_minor),
        "the rig's minor 1.{rig_minor} has no passed row in docs/kubernetes-versions.md ({minors:?})"
    );
    let want = claimed_range(&minors).expect("passed minors, without a gap");
    for chart in [
        "charts/temporal-worker-controller/Chart.yaml",
        "charts/temporal-worker-controller-crds/Chart.yaml",
    ] {
        let line = format!("kubeVersion: \"{want}\"");
        assert!(
            read(chart).lines().any(|l| l == line),
            "{chart} must say {line} (the smoke set passed on 1.{minors:?})"
        );
    }
}

#[test]
fn the_kubernetes_range_checker_reads_rows_and_refuses_gaps() {
    let doc = "## Results\n\n| Kubernetes | date | smoke set | time |\n|---|---|---|---|\n\
               | v1.35.4 | 2026-12-02 | passed | 1 s |\n| v1.36.3 | 2026-12-02 | FAILED (e2e) | 1 s |\n\
               | v1.37.2 | 2026-12-02 | passed | 1 s |\n";
    assert_eq!(passed_minors(doc), vec![35, 37]);
    assert_eq!(claimed_range(&[35, 37]), None, "a failed minor in between");
    assert_eq!(
        claimed_range(&[35, 36, 37]).as_deref(),
        Some(">=1.35.0-0 <1.38.0-0")
    );
}
