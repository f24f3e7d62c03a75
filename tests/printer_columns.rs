//! Printer columns as a user sees them: our CRDs (`crds/`) installed on the real control plane,
//! one object of every kind with its status written through the status subresource (as the
//! controller writes it), and the columns read through the real `kubectl get`, by short name
//! and by the `temporal` category.
//!
//! Every column `kubectl get` shows must have an expected value here, so a column added to a
//! CRD without a check fails this test. The Go controller's columns (those of its v1.8.1 CRDs,
//! listed in `go_controller_columns`) must be among them for its kinds, so its users' habits and
//! scripts keep working.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use test_harness::control_plane;
use test_harness::gitops::{load_yaml, repo_root};
use test_harness::names::unique;
use test_harness::wait::eventually;
use test_harness::{kubectl, world};

/// One kind: how a user names it on the command line, the object to create, the status to
/// write, and what each column must show.
struct Case {
    kind: &'static str,
    /// What the user types after `kubectl get` (a short name where the kind has one).
    resource: &'static str,
    /// `spec` of the object.
    spec: Value,
    /// `status`, written through the status subresource.
    status: Value,
    /// Column header (as kubectl prints it) and value, for every column but NAME.
    columns: Vec<(&'static str, Expect)>,
}

/// What a cell must show.
enum Expect {
    Is(&'static str),
    /// A creation timestamp turned into an age by kubectl, e.g. `4s`.
    Age,
}

/// The status and spec shapes come from the GitOps fixtures, so the columns are checked on the
/// same objects the health checks are.
fn worker_deployment_case(kind: &'static str, resource: &'static str) -> Case {
    let fixture = load_yaml(&repo_root().join("flux/fixtures/ramping.yaml"));
    Case {
        kind,
        resource,
        spec: fixture["spec"].clone(),
        status: fixture["status"].clone(),
        columns: vec![
            ("TARGET", Expect::Is("1.5.0-7c41d2a9")),
            ("CURRENT", Expect::Is("1.4.2-e03b5f18")),
            ("RAMP %", Expect::Is("10")),
            // `status.targetVersion.currentStep`: the fixture's first step, numbered from 1 as
            // its message says ("step 1 of 2").
            ("STEP", Expect::Is("1")),
            // `status.targetVersion.nextStepAt`, as written (a future date is no age).
            ("ETA", Expect::Is("2026-03-02T10:25:00Z")),
            ("READY", Expect::Is("False")),
            ("AGE", Expect::Age),
        ],
    }
}

fn connection_case(kind: &'static str, resource: &'static str) -> Case {
    let fixture = load_yaml(
        &repo_root()
            .join("argocd/resource_customizations/temporal.io/Connection/testdata/ready.yaml"),
    );
    Case {
        kind,
        resource,
        spec: json!({"hostPort": "temporal-frontend.temporal.svc:7233"}),
        status: fixture["status"].clone(),
        columns: vec![
            ("READY", Expect::Is("True")),
            ("HOST", Expect::Is("temporal-frontend.temporal.svc:7233")),
            // The client certificate's notAfter, as written (a future date is no age).
            ("EXPIRES", Expect::Is("2026-12-01T00:00:00Z")),
            ("AGE", Expect::Age),
        ],
    }
}

fn owned_resource_case(kind: &'static str, resource: &'static str, spec: Value) -> Case {
    let fixture = load_yaml(&repo_root().join("flux/fixtures/owned/all-versions-applied.yaml"));
    Case {
        kind,
        resource,
        spec,
        status: fixture["status"].clone(),
        columns: vec![
            ("WORKER", Expect::Is("orders-worker")),
            ("KIND", Expect::Is("HorizontalPodAutoscaler")),
            ("READY", Expect::Is("True")),
            ("REASON", Expect::Is("AllVersionsApplied")),
            ("AGE", Expect::Age),
        ],
    }
}

fn hpa_template() -> Value {
    json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "spec": {"scaleTargetRef": {}, "minReplicas": 2, "maxReplicas": 10}
    })
}

/// Both kind sets: the Go controller's kinds (its field names) and the seed kinds.
fn cases() -> Vec<Case> {
    vec![
        worker_deployment_case("WorkerDeployment", "wd"),
        worker_deployment_case("TemporalWorkerDeployment", "twd"),
        // The Go controller's Connection has no short name.
        connection_case("Connection", "connections"),
        connection_case("TemporalConnection", "tconn"),
        owned_resource_case(
            "WorkerResourceTemplate",
            "wrt",
            json!({"workerDeploymentRef": {"name": "orders-worker"}, "template": hpa_template()}),
        ),
        owned_resource_case(
            "TemporalWorkerOwnedResource",
            "twor",
            json!({"workerRef": {"name": "orders-worker"}, "object": hpa_template()}),
        ),
    ]
}

/// The Go controller's columns for its kinds and their deprecated aliases, in its order: ours
/// show them in the same relative order (scripts read columns by position), ours added between.
fn go_controller_columns(kind: &str) -> &'static [&'static str] {
    match kind {
        "WorkerDeployment" | "TemporalWorkerDeployment" => &["CURRENT", "TARGET", "RAMP %", "AGE"],
        "Connection" | "TemporalConnection" => &["HOST", "AGE"],
        "WorkerResourceTemplate" => &["WORKER", "KIND", "AGE"],
        _ => &[],
    }
}

/// A `kubectl get` table: the headers in kubectl's order, and each row as `header -> cell`.
struct Table {
    header: Vec<String>,
    rows: Vec<BTreeMap<String, String>>,
}

/// Parses `kubectl get` table output. kubectl pads columns with at least three spaces and
/// left-aligns cells under their header, and a header may hold one space (`RAMP %`), so cells
/// are cut at the offsets where the headers start.
fn parse_table(text: &str) -> Result<Table> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().context("no header line")?;
    let mut starts = Vec::new();
    let bytes = header.as_bytes();
    for i in 0..bytes.len() {
        let begins = bytes[i] != b' ' && (i == 0 || header[..i].ends_with("  "));
        if begins {
            starts.push(i);
        }
    }
    let names: Vec<String> = starts
        .iter()
        .enumerate()
        .map(|(n, &s)| {
            let end = starts.get(n + 1).copied().unwrap_or(header.len());
            header[s..end].trim().to_string()
        })
        .collect();
    let rows = lines
        .map(|line| {
            let cell = |n: usize| -> String {
                let s = starts[n].min(line.len());
                let end = starts
                    .get(n + 1)
                    .copied()
                    .unwrap_or(line.len())
                    .min(line.len());
                line.get(s..end).unwrap_or_default().trim().to_string()
            };
            names
                .iter()
                .enumerate()
                .map(|(n, name)| (name.clone(), cell(n)))
                .collect()
        })
        .collect();
    Ok(Table {
        header: names,
        rows,
    })
}

/// Runs `kubectl args…` with its own discovery cache (a fresh control plane must not be read
/// through another run's cache), until it succeeds: discovery may lag a just-Established CRD.
async fn kubectl_ok(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Result<String> {
    let cache_arg = format!("--cache-dir={}", cache.display());
    let mut full: Vec<&str> = vec![&cache_arg];
    full.extend_from_slice(args);
    let mut last = String::new();
    eventually(
        &format!("kubectl {}", args.join(" ")),
        Duration::from_secs(30),
        || {
            let out = kubectl::run(kubeconfig, &full, None);
            let result = match out {
                Ok(o) if o.success => Some(o.stdout),
                Ok(o) => {
                    last = o.text;
                    None
                }
                Err(e) => return std::future::ready(Err(e)),
            };
            std::future::ready(Ok(result))
        },
    )
    .await
    .with_context(|| format!("last output: {last}"))
}

/// Creates the case's object in `ns` and writes its status through the status subresource.
async fn create(client: &kube::Client, ns: &str, name: &str, case: &Case) -> Result<()> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &world::api_resource(case.kind));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "temporal.io/v1alpha1",
        "kind": case.kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": case.spec,
    }))?;
    api.create(&PostParams::default(), &obj)
        .await
        .with_context(|| format!("create {} {ns}/{name}", case.kind))?;
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": case.status})),
    )
    .await
    .with_context(|| format!("write status of {} {ns}/{name}", case.kind))?;
    Ok(())
}

/// What is wrong with one kind's row, if anything.
fn row_failures(
    case: &Case,
    name: &str,
    header: &[String],
    row: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut failures = Vec::new();
    let kind = case.kind;
    if row.get("NAME").map(String::as_str) != Some(name) {
        failures.push(format!(
            "{kind}: NAME is {:?}, want {name}",
            row.get("NAME")
        ));
    }
    for go in go_controller_columns(kind) {
        if !header.iter().any(|h| h == go) {
            failures.push(format!(
                "{kind}: no {go} column (the Go controller has it): {header:?}"
            ));
        }
    }
    let positions: Vec<usize> = go_controller_columns(kind)
        .iter()
        .filter_map(|go| header.iter().position(|h| h == go))
        .collect();
    if !positions.is_sorted() {
        failures.push(format!(
            "{kind}: the Go controller's columns {:?} are out of its order: {header:?}",
            go_controller_columns(kind)
        ));
    }
    for h in header.iter().filter(|h| *h != "NAME") {
        let got = row.get(h).map(String::as_str).unwrap_or_default();
        match case.columns.iter().find(|(c, _)| c == h) {
            None => failures.push(format!(
                "{kind}: column {h} ({got:?}) has no expected value here"
            )),
            Some((_, Expect::Is(want))) if got != *want => {
                failures.push(format!("{kind}: {h} is {got:?}, want {want:?}"))
            }
            Some((_, Expect::Age)) if !is_age(got) => {
                failures.push(format!("{kind}: {h} is {got:?}, want an age like 4s"))
            }
            Some(_) => {}
        }
    }
    for (c, _) in &case.columns {
        if !header.iter().any(|h| h == c) {
            failures.push(format!(
                "{kind}: expected column {c} is not shown: {header:?}"
            ));
        }
    }
    failures
}

/// kubectl's short human duration (`0s`, `42s`, `3m2s`, …) of a recent timestamp.
fn is_age(cell: &str) -> bool {
    let mut chars = cell.chars().peekable();
    let mut digits = false;
    while chars.peek().is_some_and(char::is_ascii_digit) {
        chars.next();
        digits = true;
    }
    digits && matches!(chars.next(), Some('s' | 'm'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_shows_every_printer_column_with_its_value() -> Result<()> {
    let (plane, client) = control_plane::shared_with_crds().await?;
    let ns = unique("columns");
    world::create_namespace(&client, &ns).await?;
    let cache = plane.dir().join("kubectl-cache-printer-columns");
    let kubeconfig = plane.kubeconfig_path();
    let cases = cases();
    let mut failures = Vec::new();
    for case in &cases {
        let name = format!("orders-{}", case.kind.to_lowercase());
        create(&client, &ns, &name, case).await?;
        let text = kubectl_ok(
            kubeconfig,
            &cache,
            &["-n", &ns, "get", case.resource, &name],
        )
        .await?;
        let table = parse_table(&text)?;
        ensure!(
            table.rows.len() == 1,
            "{}: one row expected:\n{text}",
            case.kind
        );
        let found = row_failures(case, &name, &table.header, &table.rows[0]);
        if !found.is_empty() {
            failures.push(format!("{}\n{text}", found.join("\n")));
        }
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n\n"));

    // Every short name the Go controller's v1.8.1 CRDs declare (its deprecated TWD's included),
    // and ours, names its kind.
    for (short, kind) in [
        ("wd", "WorkerDeployment"),
        ("wdeployment", "WorkerDeployment"),
        ("wrt", "WorkerResourceTemplate"),
        ("twd", "TemporalWorkerDeployment"),
        ("twdeployment", "TemporalWorkerDeployment"),
        ("tworkerdeployment", "TemporalWorkerDeployment"),
        ("tconn", "TemporalConnection"),
        ("twor", "TemporalWorkerOwnedResource"),
    ] {
        let listed =
            kubectl_ok(kubeconfig, &cache, &["-n", &ns, "get", short, "-o", "name"]).await?;
        let lower = kind.to_lowercase();
        let want = format!("{lower}.temporal.io/orders-{lower}");
        ensure!(
            listed.lines().collect::<Vec<_>>() == [want.as_str()],
            "`kubectl get {short}` should list {want} only:\n{listed}"
        );
    }

    // `kubectl get temporal` (the CRDs' category) lists every kind's object.
    let listed = kubectl_ok(
        kubeconfig,
        &cache,
        &["-n", &ns, "get", "temporal", "-o", "name"],
    )
    .await?;
    for case in &cases {
        let want = format!(
            "{}.temporal.io/orders-{}",
            case.kind.to_lowercase(),
            case.kind.to_lowercase()
        );
        ensure!(
            listed.lines().any(|l| l == want),
            "`kubectl get temporal` does not list {want}:\n{listed}"
        );
    }
    Ok(())
}

#[test]
fn parse_table_cuts_cells_under_their_headers() {
    let text = "NAME    TARGET   RAMP %   STEP   AGE\n\
                a       v2       10              3s\n";
    let table = parse_table(text).expect("table");
    assert_eq!(table.header, ["NAME", "TARGET", "RAMP %", "STEP", "AGE"]);
    assert_eq!(table.rows.len(), 1);
    let row = &table.rows[0];
    assert_eq!(row["NAME"], "a");
    assert_eq!(row["TARGET"], "v2");
    assert_eq!(row["RAMP %"], "10");
    assert_eq!(row["STEP"], "");
    assert_eq!(row["AGE"], "3s");
    assert!(is_age("0s") && is_age("42s") && is_age("3m2s"));
    assert!(!is_age("<invalid>") && !is_age("") && !is_age("s"));
}
