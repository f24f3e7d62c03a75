//! The real `helm` CLI (Helm 4, built from `helm.sh/helm/v4` at the version pinned in
//! `tools/helm/versions.env` by `tools/helm/build.sh`), driven the way users drive it: `helm
//! lint`, `helm template`, `helm install|upgrade|rollback|uninstall --wait`, `helm history`.
//! Every Helm test goes through here; the answers keep the JSON shapes the tests read
//! (`helm_chart` for lint and render, `helm_release` for release actions).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};

/// The pinned Helm version (`HELM_VERSION` in `tools/helm/versions.env`).
pub fn pinned_version() -> String {
    let env = std::fs::read_to_string(crate::repo_root().join("tools/helm/versions.env"))
        .expect("tools/helm/versions.env");
    env.lines()
        .find_map(|l| l.trim().strip_prefix("HELM_VERSION="))
        .expect("HELM_VERSION in tools/helm/versions.env")
        .trim()
        .to_string()
}

/// Path of the `helm` binary: `TWC_HELM`, else whatever `tools/helm/build.sh` prints (it builds
/// into a cache outside the repository once, then answers at once).
pub fn binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(path) = std::env::var_os("TWC_HELM") {
            return PathBuf::from(path);
        }
        crate::cached_build("helm").unwrap_or_else(|e| {
            panic!("{e:#}\n(Go and the Go module proxy are needed; `.ci/setup-tests` runs it)")
        })
    })
    .clone()
}

/// `helm version --template '{{.Version}}'` of [`binary`].
pub fn version() -> Result<String> {
    static VERSION: OnceLock<String> = OnceLock::new();
    if let Some(v) = VERSION.get() {
        return Ok(v.clone());
    }
    let out = run(&["version", "--template", "{{.Version}}"], None)?;
    ensure!(out.ok, "helm version failed: {}", out.stderr);
    let v = out.stdout.trim().to_string();
    Ok(VERSION.get_or_init(|| v).clone())
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str], kubeconfig: Option<&Path>) -> Result<Output> {
    let bin = binary();
    let mut cmd = Command::new(&bin);
    cmd.args(args);
    // No user config or repositories leak in; everything Helm keeps goes to a scratch home.
    let home = std::env::temp_dir().join(format!("twc-helm-home-{}", std::process::id()));
    cmd.env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"));
    if let Some(k) = kubeconfig {
        cmd.arg("--kubeconfig").arg(k);
    }
    let out = cmd
        .output()
        .with_context(|| format!("running {} {args:?}", bin.display()))?;
    Ok(Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// `helm <args>` outside any cluster (`package`, `push`); `Err` with Helm's message unless it
/// succeeds, else its stdout.
pub fn run_checked(args: &[&str]) -> Result<String> {
    let out = run(args, None)?;
    ensure!(out.ok, "helm {args:?} failed: {}", out.stderr.trim());
    Ok(out.stdout)
}

/// Writes `values` (JSON is YAML) to a scratch file for `-f`; `None` for no values.
fn values_file(values: &Value) -> Result<Option<tempfile_path::TempPath>> {
    if values.is_null() || values.as_object().is_some_and(|o| o.is_empty()) {
        return Ok(None);
    }
    let path = tempfile_path::TempPath::new("values", "json")?;
    std::fs::write(path.path(), serde_json::to_vec(values)?)?;
    Ok(Some(path))
}

mod tempfile_path {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A scratch file removed on drop.
    pub struct TempPath(PathBuf);

    impl TempPath {
        pub fn new(stem: &str, ext: &str) -> std::io::Result<TempPath> {
            static N: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!("twc-helm-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let n = N.fetch_add(1, Ordering::Relaxed);
            Ok(TempPath(dir.join(format!("{stem}-{n}.{ext}"))))
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// `helm lint --strict` as data: `{"total_charts_linted", "errors", "messages": [{"severity",
/// "path", "err"}]}` with severity 1 info, 2 warning, 3 error (Helm's support levels).
fn lint(chart: &Path, values: &Value, namespace: &str) -> Result<Value> {
    let file = values_file(values)?;
    let chart_s = chart.to_string_lossy();
    let mut args: Vec<&str> = vec!["lint", "--strict", "--namespace", namespace, &*chart_s];
    let file_s = file
        .as_ref()
        .map(|f| f.path().to_string_lossy().into_owned());
    if let Some(f) = &file_s {
        args.extend(["-f", f.as_str()]);
    }
    let out = run(&args, None)?;
    let mut messages = Vec::new();
    let mut errors = Vec::new();
    let mut linted = 0;
    for line in out.stdout.lines().chain(out.stderr.lines()) {
        let line = line.trim();
        let level = [("[INFO]", 1), ("[WARNING]", 2), ("[ERROR]", 3)]
            .into_iter()
            .find_map(|(tag, sev)| line.strip_prefix(tag).map(|rest| (sev, rest.trim())));
        if let Some((severity, rest)) = level {
            let (path, err) = rest.split_once(": ").unwrap_or(("", rest));
            messages.push(json!({"severity": severity, "path": path, "err": err}));
            if severity == 3 {
                errors.push(rest.to_string());
            }
        } else if let Some(n) = line
            .split_once(" chart(s) linted")
            .and_then(|(n, _)| n.rsplit(' ').next()?.parse::<u64>().ok())
        {
            linted = n;
        }
    }
    if !out.ok && errors.is_empty() {
        errors.push(out.stderr.trim().to_string());
    }
    Ok(json!({"total_charts_linted": linted, "errors": errors, "messages": messages}))
}

/// `helm template` (install mode) as `{template path: text}`, split on Helm's `# Source:`
/// comments; `Err(text)` is Helm's error.
fn template(
    chart: &Path,
    values: &Value,
    release: &str,
    namespace: &str,
) -> Result<std::result::Result<BTreeMap<String, String>, String>> {
    let file = values_file(values)?;
    let chart_s = chart.to_string_lossy();
    let mut args: Vec<&str> = vec!["template", release, &*chart_s, "--namespace", namespace];
    let file_s = file
        .as_ref()
        .map(|f| f.path().to_string_lossy().into_owned());
    if let Some(f) = &file_s {
        args.extend(["-f", f.as_str()]);
    }
    let out = run(&args, None)?;
    if !out.ok {
        return Ok(Err(out.stderr.trim().to_string()));
    }
    let mut manifests: BTreeMap<String, String> = BTreeMap::new();
    // `helm template` leaves NOTES.txt out; a client-side dry-run install renders it.
    if let Some(notes) = rendered_notes(&args[1..])? {
        let chart_name = chart
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        manifests.insert(format!("{chart_name}/templates/NOTES.txt"), notes);
    }
    let mut current: Option<String> = None;
    for line in out.stdout.lines() {
        if let Some(src) = line.strip_prefix("# Source: ") {
            current = Some(src.trim().to_string());
            continue;
        }
        if let Some(src) = &current {
            let text = manifests.entry(src.clone()).or_default();
            text.push_str(line);
            text.push('\n');
        }
    }
    Ok(Ok(manifests))
}

/// The chart's NOTES as `helm install --dry-run=client` renders them for `args` (release,
/// chart and flags as for `helm template`); `None` when the chart has none.
fn rendered_notes(args: &[&str]) -> Result<Option<String>> {
    let mut install = vec!["install"];
    install.extend_from_slice(args);
    install.extend(["--dry-run=client", "-o", "json"]);
    let out = run(&install, None)?;
    if !out.ok {
        return Ok(None);
    }
    let release: Value = serde_json::from_str(&out.stdout)
        .with_context(|| format!("helm install --dry-run output: {}", out.stdout))?;
    Ok(release["info"]["notes"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_string))
}

/// Lints and renders a chart for several value sets. Request `{"chart", "cases": [{"name",
/// "values", "release", "namespace"}]}`; answer `{"helm_version", "crds": [files of the chart's
/// crds/], "results": [{"name", "lint", "manifests", "error"}]}`. Render errors are data.
pub fn helm_chart(request: &Value) -> Result<Value> {
    let chart = PathBuf::from(request["chart"].as_str().context("chart")?);
    let mut crds: Vec<String> = match std::fs::read_dir(chart.join("crds")) {
        Ok(dir) => dir
            .filter_map(|e| e.ok())
            .map(|e| format!("crds/{}", e.file_name().to_string_lossy()))
            .collect(),
        Err(_) => Vec::new(),
    };
    crds.sort();
    let mut results = Vec::new();
    for case in request["cases"].as_array().into_iter().flatten() {
        let ns = case["namespace"].as_str().unwrap_or("default");
        let release = case["release"].as_str().unwrap_or("release");
        let lint = lint(&chart, &case["values"], ns)?;
        let (manifests, error) = match template(&chart, &case["values"], release, ns)? {
            Ok(m) => (json!(m), Value::Null),
            Err(e) => (Value::Null, json!(e)),
        };
        results.push(
            json!({"name": case["name"], "lint": lint, "manifests": manifests, "error": error}),
        );
    }
    Ok(json!({"helm_version": version()?, "crds": crds, "results": results}))
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// The arguments of `helm install|upgrade` for a [`helm_release`] request.
fn install_args(
    r: &Value,
    action: &str,
    release: &str,
    file: Option<&tempfile_path::TempPath>,
) -> Result<Vec<String>> {
    let chart = r["chart"].as_str().context("chart")?.to_string();
    let mut a = vec![action.to_string(), release.to_string(), chart];
    if action == "upgrade" {
        // Like `helm upgrade` without --reuse-values: the request's values are the release's.
        a.push("--reset-values".into());
        if r["install"] == true {
            a.push("--install".into());
        }
    }
    if r["create_namespace"] == true {
        a.push("--create-namespace".into());
    }
    // A chart from an OCI registry: `oci://host/charts/name --version v`, over plain
    // HTTP for the rig's loopback registry.
    if let Some(v) = r["chart_version"].as_str() {
        a.extend(["--version".into(), v.into()]);
    }
    if r["plain_http"] == true {
        a.push("--plain-http".into());
    }
    if let Some(f) = file {
        a.extend(["-f".into(), f.path().to_string_lossy().into_owned()]);
    }
    a.extend(["-o".into(), "json".into()]);
    Ok(a)
}

/// One release action. Request `{"kubeconfig", "namespace", "action":
/// "install"|"upgrade"|"rollback"|"uninstall"|"test"|"history", "release", "chart", "values", "wait"
/// (a `--wait` strategy: "watcher", "hookOnly", "legacy"; none when absent), "timeout"
/// (seconds), "version" (rollback revision), "create_namespace", "install" (upgrade
/// --install), "chart_version" and "plain_http" (a chart from an OCI registry)}`; answer
/// `{"helm_version", "ok", "error", "status", "revision", "history", "started", "finished"}`
/// (Unix seconds, taken around the command). A failed action is data.
pub fn helm_release(r: &Value) -> Result<Value> {
    let text = |k: &str| r[k].as_str().map(str::to_string);
    let action = text("action").context("action")?;
    let release = text("release").context("release")?;
    let ns = text("namespace").context("namespace")?;
    let kubeconfig = PathBuf::from(text("kubeconfig").context("kubeconfig")?);
    let file = values_file(&r["values"])?;
    let mut args: Vec<String> = match action.as_str() {
        "install" | "upgrade" => install_args(r, &action, &release, file.as_ref())?,
        "rollback" => {
            let mut a = vec!["rollback".into(), release.clone()];
            if let Some(v) = r["version"].as_i64() {
                a.push(v.to_string());
            }
            a
        }
        // Helm's own advice for resources with finalizers: foreground deletion, so that
        // --wait returns only once they are gone.
        "uninstall" => vec![
            "uninstall".into(),
            release.clone(),
            "--cascade=foreground".into(),
        ],
        // The release's test hooks, run to completion (no --logs: the stand-in serves no logs).
        "test" => vec!["test".into(), release.clone()],
        "history" => vec![
            "history".into(),
            release.clone(),
            "-o".into(),
            "json".into(),
        ],
        other => anyhow::bail!("unknown helm action {other}"),
    };
    args.extend(["--namespace".into(), ns.clone()]);
    if action != "history" {
        if let Some(w) = r["wait"].as_str().filter(|_| action != "test") {
            args.push(format!("--wait={w}"));
        }
        if let Some(t) = r["timeout"].as_u64() {
            args.push(format!("--timeout={t}s"));
        }
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = unix_now();
    let out = run(&argv, Some(&kubeconfig))?;
    let finished = unix_now();
    let mut answer = json!({"helm_version": version()?, "ok": out.ok, "error": null,
        "status": null, "revision": null, "history": null,
        "started": started, "finished": finished});
    if !out.ok {
        answer["error"] = json!(out.stderr.trim());
        return Ok(answer);
    }
    match action.as_str() {
        "install" | "upgrade" => {
            // A chart pulled from a registry is announced first (`Pulled: …`, `Digest: …`).
            let json_text = &out.stdout[out.stdout.find('{').unwrap_or(0)..];
            let rel: Value = serde_json::from_str(json_text)
                .with_context(|| format!("helm {action} -o json: {}", out.stdout))?;
            answer["status"] = rel["info"]["status"].clone();
            answer["revision"] = rel["version"].clone();
        }
        "rollback" => {
            let st = run(
                &["status", &release, "--namespace", &ns, "-o", "json"],
                Some(&kubeconfig),
            )?;
            if st.ok {
                let rel: Value = serde_json::from_str(&st.stdout).unwrap_or_default();
                answer["status"] = rel["info"]["status"].clone();
                answer["revision"] = rel["version"].clone();
            }
        }
        "history" => {
            let h: Value = serde_json::from_str(&out.stdout).unwrap_or_default();
            answer["history"] = json!(
                h.as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| json!({"revision": e["revision"], "status": e["status"]}))
                    .collect::<Vec<_>>()
            );
        }
        _ => {}
    }
    Ok(answer)
}
