//! What GitOps tools would say about a `TemporalWorkerDeployment`, computed offline:
//! kstatus (Flux `healthChecks`, Helm 4 `--wait`), our Flux `healthCheckExprs` snippet, and the
//! Argo CD Lua health check run in a sandbox like Argo CD's default argocd-cm one.
//!
//! Self-contained (paths are relative to this file) so other test crates can pull it in with
//! `#[path = ".../tests/gitops_support/mod.rs"] mod gitops_support;`.

#![allow(dead_code)]

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mlua::{HookTriggers, Lua, LuaOptions, StdLib, VmState};
use serde_json::Value;

/// The canonical Argo CD health script; `argocd/` holds a byte-identical copy.
pub const HEALTH_LUA: &str = include_str!("../../lua/temporalworkerdeployment-health.lua");

/// Root of the crate that owns the GitOps files (`lua/`, `argocd/`, `flux/`, `charts/`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

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

/// kstatus `Compute` for a custom kind (no legacy per-kind rule applies), in its order:
/// deletion, generation, abnormal-true conditions in array order, `Ready`, default Current.
/// Type errors become `Unknown`, as the kstatus pollers report a `Compute` error.
pub fn kstatus(obj: &Value) -> (Status, String) {
    match kstatus_inner(obj) {
        Ok(r) => r,
        Err(e) => (Status::Unknown, e),
    }
}

fn kstatus_inner(obj: &Value) -> Result<(Status, String), String> {
    match obj.pointer("/metadata/deletionTimestamp") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(Value::String(_)) => {
            return Ok((
                Status::Terminating,
                "Resource scheduled for deletion".into(),
            ));
        }
        Some(_) => {
            return Err("looking up metadata.deletionTimestamp from resource: not a string".into());
        }
    }

    if let Some(generation) = nested_i64(obj, "/metadata/generation")?
        && let Some(observed) = nested_i64(obj, "/status/observedGeneration")?
        && observed != generation
    {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        return Ok((
            Status::InProgress,
            format!(
                "{kind} generation is {generation}, but latest observed generation is {observed}"
            ),
        ));
    }

    let conditions = conditions_of(obj)?;
    for c in &conditions {
        if c.type_ == "Reconciling" && c.status == "True" {
            return Ok((Status::InProgress, c.message.clone()));
        }
        if c.type_ == "Stalled" && c.status == "True" {
            return Ok((Status::Failed, c.message.clone()));
        }
    }

    if let Some(ready) = conditions.iter().find(|c| c.type_ == "Ready") {
        match ready.status.as_str() {
            "True" => return Ok((Status::Current, "Resource is Ready".into())),
            "False" | "Unknown" => return Ok((Status::InProgress, ready.message.clone())),
            _ => {}
        }
    }
    Ok((Status::Current, "Resource is current".into()))
}

/// Like `unstructured.NestedInt64`: absent is `None`, a non-integer is an error.
fn nested_i64(obj: &Value, pointer: &str) -> Result<Option<i64>, String> {
    match obj.pointer(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("{pointer} accessor error: {v} is not an int64")),
    }
}

#[derive(Clone, Debug, Default)]
struct Cond {
    type_: String,
    status: String,
    reason: String,
    message: String,
}

/// Decodes `status.conditions` the way kstatus does (a typed decode, so a wrong shape errors).
fn conditions_of(obj: &Value) -> Result<Vec<Cond>, String> {
    let list = match obj.pointer("/status/conditions") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err("status.conditions is not a list".into()),
    };
    let field = |c: &Value, key: &str| -> Result<String, String> {
        match c.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!("condition field {key} is not a string: {other}")),
        }
    };
    list.iter()
        .map(|c| {
            if !c.is_object() {
                return Err(format!("condition is not an object: {c}"));
            }
            Ok(Cond {
                type_: field(c, "type")?,
                status: field(c, "status")?,
                reason: field(c, "reason")?,
                message: field(c, "message")?,
            })
        })
        .collect()
}

/// The CEL expressions of `flux/health-check-exprs.yaml`. `tests/kstatus.rs` checks that the
/// file carries exactly these, so [`health_check_exprs`] below cannot drift from it.
pub const EXPR_CURRENT: &str = "status.?observedGeneration.orValue(-1) == metadata.generation && status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')";
pub const EXPR_FAILED: &str =
    "status.?conditions.orValue([]).exists(c, c.type == 'Stalled' && c.status == 'True')";

/// Flux's CEL status evaluator (fluxcd/pkg `runtime/cel/status_evaluator.go`) applied to the
/// two expressions above, evaluated by hand: no CEL engine is available to the tests.
/// An expression that reads the top-level `status` of an object without one is a CEL error
/// ("no such key"), which Flux reports instead of a status; that shows up here as `Unknown`.
pub fn health_check_exprs(obj: &Value) -> (Status, String) {
    // Flux's own observedGeneration gate, ahead of the expressions.
    if let (Some(observed), Some(generation)) = (
        obj.pointer("/status/observedGeneration")
            .and_then(Value::as_i64),
        obj.pointer("/metadata/generation").and_then(Value::as_i64),
    ) && observed != generation
    {
        return (Status::InProgress, String::new());
    }
    let Some(status) = obj.get("status").filter(|s| !s.is_null()) else {
        return (Status::Unknown, "no such key: status".into());
    };
    let conditions: &[Value] = status
        .get("conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let has_true = |t: &str| {
        conditions.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(t)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    // RFC-0009 order: inProgress (unset here), failed, current; none true means InProgress.
    if has_true("Stalled") {
        return (Status::Failed, String::new());
    }
    let observed = status
        .get("observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(-1);
    let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64);
    if generation == Some(observed) && has_true("Ready") {
        return (Status::Current, String::new());
    }
    (Status::InProgress, String::new())
}

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
