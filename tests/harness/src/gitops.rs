//! What GitOps tools say about a `TemporalWorkerDeployment`, from the real engines: kstatus
//! (Flux `healthChecks`, Helm 4 `--wait`) and Flux's CEL `healthCheckExprs` reader with our
//! snippet, both in the Go checker built by `tools/gitops-checker/build.sh`, and the Argo CD Lua
//! health check run (mlua) in a sandbox like Argo CD's default argocd-cm one.

use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use mlua::{HookTriggers, Lua, LuaOptions, StdLib, VmState};
use serde_json::Value;

/// The canonical Argo CD health script; `argocd/` holds a byte-identical copy.
pub const HEALTH_LUA: &str = include_str!("../../../lua/temporalworkerdeployment-health.lua");

pub use crate::repo_root;

/// kstatus result values (`status.Status` in cli-utils). `NotFound` only comes from reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    InProgress,
    Failed,
    Current,
    Terminating,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "InProgress",
            Status::Failed => "Failed",
            Status::Current => "Current",
            Status::Terminating => "Terminating",
            Status::Unknown => "Unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        [
            Status::InProgress,
            Status::Failed,
            Status::Current,
            Status::Terminating,
            Status::Unknown,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The real status engines, run by `tools/gitops-checker` (Go: `sigs.k8s.io/cli-utils` kstatus,
/// Flux's kstatus fork `github.com/fluxcd/cli-utils` that Flux and Helm 4 `--wait` use, and
/// Flux's CEL `healthCheckExprs` reader from `github.com/fluxcd/pkg/runtime/cel` on cel-go), at the
/// versions pinned in `tools/gitops-checker/versions.env`. One checker process per test binary,
/// started on first use; requests are JSON lines on its stdin, answers JSON lines on its stdout.
struct Checker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Drop for Checker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static CHECKER: OnceLock<Mutex<Checker>> = OnceLock::new();

/// Path of the checker binary: `TWC_GITOPS_CHECKER`, else whatever `tools/gitops-checker/build.sh`
/// prints (it builds into a cache outside the repo once, then answers at once).
pub fn checker_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("TWC_GITOPS_CHECKER") {
        return PathBuf::from(path);
    }
    crate::cached_build("gitops-checker").unwrap_or_else(|e| {
        panic!("{e:#}\n(Go and the Go module proxy are needed; `.ci/setup-tests` runs it)")
    })
}

fn checker() -> &'static Mutex<Checker> {
    CHECKER.get_or_init(|| {
        let bin = checker_binary();
        let mut child = Command::new(&bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let stdin = child.stdin.take().expect("checker stdin");
        let stdout = BufReader::new(child.stdout.take().expect("checker stdout"));
        Mutex::new(Checker {
            child,
            stdin,
            stdout,
            next_id: 0,
        })
    })
}

/// The `healthCheckExprs` list shipped in `flux/health-check-exprs.yaml`.
pub fn shipped_health_check_exprs() -> &'static Value {
    static EXPRS: OnceLock<Value> = OnceLock::new();
    EXPRS.get_or_init(|| {
        load_yaml(&repo_root().join("flux/health-check-exprs.yaml"))["healthCheckExprs"].clone()
    })
}

/// One engine's answer: the status, its message, and the error behind an `Unknown`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: Status,
    pub message: String,
    pub error: String,
}

impl Verdict {
    fn from_json(v: &Value) -> Verdict {
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let raw = text("status");
        Verdict {
            status: Status::parse(&raw).unwrap_or_else(|| panic!("unknown status {raw:?} in {v}")),
            message: text("message"),
            error: text("error"),
        }
    }

    /// `(status, message)`, with the error as the message when the engine gave none.
    pub fn pair(&self) -> (Status, String) {
        let message = if self.message.is_empty() {
            self.error.clone()
        } else {
            self.message.clone()
        };
        (self.status, message)
    }
}

/// What every GitOps engine says about one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdicts {
    /// Upstream kstatus (`sigs.k8s.io/cli-utils`): kubectl-style waits and kstatus pollers.
    pub kstatus: Verdict,
    /// Flux's kstatus fork: Helm 4 `--wait`, Flux `healthChecks` without expressions.
    pub flux_kstatus: Verdict,
    /// Flux with the given `healthCheckExprs` (its CEL reader when an entry matches the kind).
    pub flux: Verdict,
    /// Argo CD health `(status, message)` from the shipped Lua in the argocd-cm sandbox.
    pub argocd: (String, String),
}

/// Sends one request to the checker process and returns its answer (ids checked).
pub(crate) fn ask_checker(mut request: Value) -> Value {
    let mut c = checker().lock().unwrap_or_else(|e| e.into_inner());
    c.next_id += 1;
    let id = c.next_id;
    request["id"] = serde_json::json!(id);
    let mut line = serde_json::to_string(&request).expect("request JSON");
    line.push('\n');
    c.stdin
        .write_all(line.as_bytes())
        .and_then(|()| c.stdin.flush())
        .expect("writing to the gitops checker");
    let mut reply = String::new();
    let n = c
        .stdout
        .read_line(&mut reply)
        .expect("reading from the gitops checker");
    assert!(n > 0, "the gitops checker exited");
    let answer: Value = serde_json::from_str(&reply).expect("checker answer JSON");
    assert_eq!(
        answer["id"],
        serde_json::json!(id),
        "checker answered out of order"
    );
    answer
}

/// Argo CD's own engine: `script` run on `obj` as Argo CD v3.6.1's `util/lua` runs it
/// (gopher-lua and gopher-json at its pins, in `tools/gitops-checker`), `(status, message)` as
/// Argo CD shows them: a script error is `Unknown` with the error text, `nil` is empty health.
/// `open_libs` is `useOpenLibs` (built-in checks); false is the argocd-cm default sandbox.
pub fn argocd_gopher_lua(script: &str, obj: &Value, open_libs: bool) -> (String, String) {
    let answer = ask_checker(serde_json::json!({
        "object": obj,
        "argocd": {"script": script, "useOpenLibs": open_libs},
        "argocdOnly": true,
    }));
    assert!(
        answer.get("error").is_none_or(Value::is_null),
        "gitops checker: {}",
        answer["error"]
    );
    let v = &answer["argocd"];
    let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    (text("status"), text("message"))
}

/// What Flux's wait loop (`fluxcd/pkg/ssa` `ResourceManager.WaitForSet`) returned.
#[derive(Debug, serde::Deserialize)]
pub struct FluxWait {
    pub ok: bool,
    #[serde(default)]
    pub error: String,
    #[serde(rename = "elapsedMs")]
    pub elapsed_ms: u64,
}

/// Runs Flux's wait loop (the checker's `wait-for-set`, `fluxcd/pkg/ssa` at the pinned version,
/// fail-fast on as kustomize-controller has it) on `objects` (`GROUP/KIND/NAMESPACE/NAME`)
/// against the API server of `kubeconfig`. Blocking: run it on a blocking thread.
pub fn flux_wait_for_set(
    kubeconfig: &Path,
    objects: &[String],
    interval: Duration,
    timeout: Duration,
) -> anyhow::Result<FluxWait> {
    use anyhow::Context as _;
    let bin = checker_binary();
    let out = Command::new(&bin)
        .arg("wait-for-set")
        .arg("-kubeconfig")
        .arg(kubeconfig)
        .arg(format!("-interval={}ms", interval.as_millis()))
        .arg(format!("-timeout={}ms", timeout.as_millis()))
        .args(objects)
        .output()
        .with_context(|| format!("running {} wait-for-set", bin.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "wait-for-set failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).context("wait-for-set answer")
}

/// Asks the real engines about `obj`, evaluating `health_check_exprs` (a Flux
/// `healthCheckExprs` list) for the Flux verdict.
pub fn verdicts_with(obj: &Value, health_check_exprs: &Value) -> Verdicts {
    // Argo CD's own engine (gopher-lua) runs the shipped script on every object judged here
    // too, beside mlua, so every object of every live rollout is checked in both.
    let answer = ask_checker(serde_json::json!({
        "object": obj,
        "healthCheckExprs": health_check_exprs,
        "argocd": {"script": HEALTH_LUA},
    }));
    assert!(
        answer.get("error").is_none_or(Value::is_null),
        "gitops checker: {}",
        answer["error"]
    );
    let argocd = argocd_health(obj);
    let gopher = &answer["argocd"];
    let gopher = (
        gopher["status"].as_str().unwrap_or_default().to_string(),
        gopher["message"].as_str().unwrap_or_default().to_string(),
    );
    // A script error's text is each engine's own; its verdict (Unknown) must still agree.
    assert!(
        gopher == argocd || (gopher.0 == "Unknown" && argocd.0 == "Unknown"),
        "Argo CD's engine (gopher-lua) says {gopher:?}, mlua {argocd:?}, on {obj}"
    );
    Verdicts {
        kstatus: Verdict::from_json(&answer["kstatus"]),
        flux_kstatus: Verdict::from_json(&answer["fluxKstatus"]),
        flux: Verdict::from_json(&answer["flux"]),
        argocd,
    }
}

/// kstatus status, Flux verdict (with the shipped `healthCheckExprs`) and Argo CD health of a
/// TemporalWorkerDeployment, from the real engines. Upstream kstatus and Flux's fork must agree
/// (checked here), so one kstatus answer stands for kubectl-style waits, Helm 4 and Flux.
pub fn verdicts(obj: &Value) -> Verdicts {
    let v = verdicts_with(obj, shipped_health_check_exprs());
    assert_eq!(
        v.kstatus, v.flux_kstatus,
        "upstream kstatus and Flux's fork disagree on {obj}"
    );
    v
}

/// Real kstatus of `obj`: `(status, message)`; for `Unknown` (a `Compute` error, as the
/// pollers report it) the message is the error.
pub fn kstatus(obj: &Value) -> (Status, String) {
    verdicts(obj).kstatus.pair()
}

/// Real Flux verdict for `obj` with the shipped `healthCheckExprs` (`flux/health-check-exprs.yaml`).
/// A CEL evaluation error is `Unknown` with the error as the message: Flux reports it and keeps
/// polling until the timeout.
pub fn health_check_exprs(obj: &Value) -> (Status, String) {
    verdicts(obj).flux.pair()
}

/// The CEL expressions of `flux/health-check-exprs.yaml`. `tests/kstatus.rs` checks that the
/// file and `flux/helmrelease.yaml` carry exactly these.
pub const EXPR_CURRENT: &str = "status.?observedGeneration.orValue(-1) == metadata.generation && status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')";
pub const EXPR_FAILED: &str =
    "status.?conditions.orValue([]).exists(c, c.type == 'Stalled' && c.status == 'True')";

/// Which Lua libraries the health script gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sandbox {
    /// argocd-cm default (`useOpenLibs` unset): base, table, package; no global `os`.
    ArgoCmDefault,
    /// Built-in checks and `useOpenLibs: "true"`: all (safe) standard libraries.
    OpenLibs,
}

/// A fresh Lua 5.1 state shaped like Argo CD's for the given sandbox.
pub fn lua_state(sandbox: Sandbox) -> mlua::Result<Lua> {
    let lua = match sandbox {
        Sandbox::ArgoCmDefault => {
            let lua = Lua::new_with(StdLib::TABLE | StdLib::PACKAGE, LuaOptions::default())?;
            // PUC Lua 5.1's base library also creates `coroutine`; gopher-lua's does not.
            lua.globals().set("coroutine", mlua::Nil)?;
            // Argo CD's safe os (time and date only) is reachable via require("os") only.
            let safe_os = lua.create_table()?;
            safe_os.set("time", lua.create_function(|_, ()| Ok(unix_now()))?)?;
            let loader = lua.create_function(move |_, ()| Ok(safe_os.clone()))?;
            let package: mlua::Table = lua.globals().get("package")?;
            let preload: mlua::Table = package.get("preload")?;
            preload.set("os", loader)?;
            lua
        }
        Sandbox::OpenLibs => Lua::new_with(StdLib::ALL_SAFE, LuaOptions::default())?,
    };
    // Argo CD gives each evaluation one second.
    let deadline = Instant::now() + Duration::from_secs(1);
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(10_000),
        move |_, _| {
            if Instant::now() > deadline {
                Err(mlua::Error::runtime(
                    "health script exceeded the 1s time limit",
                ))
            } else {
                Ok(VmState::Continue)
            }
        },
    )?;
    Ok(lua)
}

/// Seconds since the Unix epoch, as Argo CD's `os.time()` and Prometheus' API use.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// JSON to Lua the way Argo CD decodes objects: numbers become numbers, arrays 1-based tables,
/// and null becomes nil, so a null field is simply absent.
pub fn json_to_lua(lua: &Lua, v: &Value) -> mlua::Result<mlua::Value> {
    Ok(match v {
        Value::Null => mlua::Value::Nil,
        Value::Bool(b) => mlua::Value::Boolean(*b),
        Value::Number(n) => mlua::Value::Number(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => mlua::Value::String(lua.create_string(s)?),
        Value::Array(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, json_to_lua(lua, item)?)?;
            }
            mlua::Value::Table(t)
        }
        Value::Object(map) => {
            let t = lua.create_table()?;
            for (k, item) in map {
                t.raw_set(k.as_str(), json_to_lua(lua, item)?)?;
            }
            mlua::Value::Table(t)
        }
    })
}

const HEALTH_STATUSES: [&str; 6] = [
    "Healthy",
    "Progressing",
    "Degraded",
    "Suspended",
    "Missing",
    "Unknown",
];

/// Runs `script` with global `obj` and returns the raw `(status, message)` table fields, or
/// the Lua error. Argo CD's post-processing is in [`argocd_health_with`].
pub fn run_health_script(
    sandbox: Sandbox,
    script: &str,
    obj: &Value,
) -> mlua::Result<Option<(String, String)>> {
    let lua = lua_state(sandbox)?;
    lua.globals().set("obj", json_to_lua(&lua, obj)?)?;
    let result: mlua::Value = lua.load(script).set_name("health.lua").eval()?;
    match result {
        mlua::Value::Nil => Ok(None),
        mlua::Value::Table(t) => {
            let status: Option<String> = t.get("status")?;
            let message: Option<String> = t.get("message")?;
            Ok(Some((
                status.unwrap_or_default(),
                message.unwrap_or_default(),
            )))
        }
        other => Err(mlua::Error::runtime(format!(
            "health script returned a {} instead of a table",
            other.type_name()
        ))),
    }
}

/// Health as Argo CD would show it: an error is `Unknown` with the error text, an invalid
/// status is `Unknown` with Argo CD's fixed message, nil is an empty health.
pub fn argocd_health_with(sandbox: Sandbox, script: &str, obj: &Value) -> (String, String) {
    match run_health_script(sandbox, script, obj) {
        Err(e) => ("Unknown".into(), e.to_string()),
        Ok(None) => (String::new(), String::new()),
        Ok(Some((status, _))) if !HEALTH_STATUSES.contains(&status.as_str()) => (
            "Unknown".into(),
            "Lua returned an invalid health status".into(),
        ),
        Ok(Some(pair)) => pair,
    }
}

/// Argo CD health of `obj` from the shipped script, in the argocd-cm default sandbox.
pub fn argocd_health(obj: &Value) -> (String, String) {
    argocd_health_with(Sandbox::ArgoCmDefault, HEALTH_LUA, obj)
}

/// Reads a YAML file into JSON (tests only; panics name the file).
pub fn load_yaml(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Every `*.yaml` directly in `dir`, sorted.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// What `helm install` of `tests/fixtures/gitops-chart` returned.
#[derive(Debug, serde::Deserialize)]
pub struct HelmInstall {
    pub helm_version: String,
    pub ok: bool,
    pub error: Option<String>,
    /// Unix seconds.
    pub started: f64,
    /// Unix seconds.
    pub finished: f64,
}

/// `helm install --wait=watcher` of `tests/fixtures/gitops-chart` with `values`, by the real
/// `helm` CLI at the pinned version ([`crate::helm`]) (blocking; run it on a blocking thread).
pub fn helm_install(
    kubeconfig: &Path,
    release: &str,
    ns: &str,
    values: &Value,
    timeout_s: u64,
) -> anyhow::Result<HelmInstall> {
    helm_action("install", kubeconfig, release, ns, values, timeout_s)
}

/// [`helm_install`]'s `helm upgrade --wait` of the same chart (the request's values are the
/// release's, as without `--reuse-values`).
pub fn helm_upgrade(
    kubeconfig: &Path,
    release: &str,
    ns: &str,
    values: &Value,
    timeout_s: u64,
) -> anyhow::Result<HelmInstall> {
    helm_action("upgrade", kubeconfig, release, ns, values, timeout_s)
}

fn helm_action(
    action: &str,
    kubeconfig: &Path,
    release: &str,
    ns: &str,
    values: &Value,
    timeout_s: u64,
) -> anyhow::Result<HelmInstall> {
    let request = serde_json::json!({
        "action": action,
        "kubeconfig": kubeconfig,
        "chart": repo_root().join("tests/fixtures/gitops-chart"),
        "release": release,
        "namespace": ns,
        "values": values,
        "wait": "watcher",
        "timeout": timeout_s,
    });
    Ok(serde_json::from_value(crate::helm::helm_release(
        &request,
    )?)?)
}
