//! The Argo CD health checks, run the way Argo CD's own `util/lua` health tests run them: every
//! `health_test.yaml` case under `argocd/resource_customizations/`, status and message exact,
//! in a Lua 5.1 sandbox with only base, table and package (the argocd-cm default).
//!
//! One script per status shape (`lua/`), installed under both kinds of that shape: the kind
//! users write today (the Go controller's) and its alias kind. The canonical kind's directory
//! holds the test data; the alias kind's `health_test.yaml` runs the same cases, and every case
//! runs with `kind` set to the directory's kind, so both names are exercised.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use temporal_worker_controller::api::conditions;
use temporal_worker_controller::api::twd::WAITING_FOR_CONTROLLER;
use test_harness::gitops::{
    HEALTH_LUA, Sandbox, argocd_gopher_lua, argocd_health_with, load_yaml, repo_root,
    run_health_script,
};

const CUSTOMIZATIONS: &str = "argocd/resource_customizations/temporal.io";
const KIND_DIR: &str = "argocd/resource_customizations/temporal.io/WorkerDeployment";
const OWNED_LUA: &str = include_str!("../lua/temporalworkerownedresource-health.lua");
const CONNECTION_LUA: &str = include_str!("../lua/temporalconnection-health.lua");

/// One status shape: its script in `lua/`, the kind users write today, and its alias kinds (the
/// seed kind; for the Connection shape also the cluster-scoped `ClusterConnection`).
struct Model {
    lua: &'static str,
    script: &'static str,
    canonical: &'static str,
    aliases: &'static [&'static str],
}

impl Model {
    fn kinds(&self) -> impl Iterator<Item = &'static str> + use<> {
        std::iter::once(self.canonical).chain(self.aliases.iter().copied())
    }
}

const MODELS: [Model; 3] = [
    Model {
        lua: "lua/temporalworkerdeployment-health.lua",
        script: HEALTH_LUA,
        canonical: "WorkerDeployment",
        aliases: &["TemporalWorkerDeployment"],
    },
    Model {
        lua: "lua/temporalworkerownedresource-health.lua",
        script: OWNED_LUA,
        canonical: "WorkerResourceTemplate",
        aliases: &["TemporalWorkerOwnedResource"],
    },
    Model {
        lua: "lua/temporalconnection-health.lua",
        script: CONNECTION_LUA,
        canonical: "Connection",
        aliases: &["TemporalConnection", "ClusterConnection"],
    },
];

/// The model a kind belongs to.
fn model_of(kind: &str) -> &'static Model {
    MODELS
        .iter()
        .find(|m| m.kinds().any(|k| k == kind))
        .unwrap_or_else(|| panic!("{CUSTOMIZATIONS}/{kind}: not one of our kinds"))
}

/// Every directory under `argocd/resource_customizations` holding a `health.lua`.
fn health_dirs() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("read dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.file_name().is_some_and(|n| n == "health.lua") {
                out.push(dir.to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &repo_root().join("argocd/resource_customizations"),
        &mut out,
    );
    out
}

/// `(inputPath, status, message)` of every case of a `health_test.yaml`.
fn cases_of(dir: &Path) -> Vec<(String, String, String)> {
    let tests = load_yaml(&dir.join("health_test.yaml"));
    let cases = tests["tests"]
        .as_array()
        .expect("health_test.yaml: `tests` list");
    assert!(!cases.is_empty(), "{}: no test cases", dir.display());
    cases
        .iter()
        .map(|case| {
            let text = |p: &str| case.pointer(p).and_then(Value::as_str).unwrap_or_default();
            assert!(
                !text("/inputPath").is_empty(),
                "{}: case without inputPath",
                dir.display()
            );
            (
                text("/inputPath").to_string(),
                text("/healthStatus/status").to_string(),
                text("/healthStatus/message").to_string(),
            )
        })
        .collect()
}

/// The directory's kind (its name).
fn kind_of_dir(dir: &Path) -> &str {
    dir.file_name()
        .and_then(|n| n.to_str())
        .expect("kind directory name")
}

/// `obj` as Argo CD hands it to the health check of `kind` (the directory's kind, either name
/// of the model).
fn as_kind(obj: Value, kind: &str) -> Value {
    if kind == "ClusterConnection" {
        return test_harness::manifests::as_cluster_connection(obj);
    }
    let kinds = test_harness::manifests::Kinds::of(kind).expect("a kind of the controller");
    test_harness::manifests::in_kinds(obj, kinds)
}

/// Runs every case of every `health_test.yaml`, each with `kind` set to its directory's kind;
/// returns (cases run, failures).
fn run_health_tests(sandbox: Sandbox) -> (usize, Vec<String>) {
    let dirs = health_dirs();
    assert!(
        !dirs.is_empty(),
        "no health.lua found under argocd/resource_customizations"
    );
    let mut ran = 0;
    let mut failures = Vec::new();
    for dir in dirs {
        let kind = kind_of_dir(&dir);
        let model = model_of(kind);
        let script = std::fs::read_to_string(dir.join("health.lua")).expect("read health.lua");
        for (input, want_status, want_message) in cases_of(&dir) {
            let obj = load_yaml(&dir.join(&input));
            let written = obj["kind"].as_str().unwrap_or_default();
            assert!(
                model.kinds().any(|k| k == written),
                "{}/{input}: kind {written:?} is not one of {:?}",
                dir.display(),
                model.kinds().collect::<Vec<_>>()
            );
            let obj = as_kind(obj, kind);
            let (status, message) = argocd_health_with(sandbox, &script, &obj);
            ran += 1;
            if status != want_status || message != want_message {
                failures.push(format!(
                    "{}/{input}: got {status:?} {message:?}, want {want_status:?} {want_message:?}",
                    dir.display()
                ));
            }
        }
    }
    (ran, failures)
}

#[test]
fn health_test_yaml_cases_pass_in_the_argocd_cm_sandbox() {
    let (ran, failures) = run_health_tests(Sandbox::ArgoCmDefault);
    // Each model's cases run once under each of its kinds (Connection's under three).
    assert!(
        ran >= 2 * (20 + 7) + 3 * 7,
        "expected at least 75 cases, ran {ran}"
    );
    assert!(
        failures.is_empty(),
        "{} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn health_test_yaml_cases_pass_with_open_libs() {
    // Built-in checks (after upstreaming) run with all libraries: the answers must not change.
    let (ran, failures) = run_health_tests(Sandbox::OpenLibs);
    assert!(
        failures.is_empty(),
        "{} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_testdata_file_has_a_case_and_every_case_a_file() {
    for model in &MODELS {
        let dir = repo_root().join(CUSTOMIZATIONS).join(model.canonical);
        let mut referenced: Vec<String> = cases_of(&dir)
            .into_iter()
            .map(|(input, _, _)| input)
            .collect();
        referenced.sort();
        let mut on_disk: Vec<String> = test_harness::gitops::yaml_files(&dir.join("testdata"))
            .iter()
            .map(|p| {
                format!(
                    "testdata/{}",
                    p.file_name().and_then(|n| n.to_str()).expect("name")
                )
            })
            .collect();
        on_disk.sort();
        assert_eq!(referenced, on_disk, "{}", model.canonical);
    }
    // Every health status the worker-deployment script can give for a live object is exercised.
    let statuses: std::collections::BTreeSet<String> = cases_of(&repo_root().join(KIND_DIR))
        .into_iter()
        .map(|(_, status, _)| status)
        .collect();
    for want in ["Healthy", "Progressing", "Degraded", "Suspended"] {
        assert!(statuses.contains(want), "no case expects {want}");
    }
}

/// Both kinds of every model are installed in Argo CD's layout with the model's one script,
/// and the alias kind's `health_test.yaml` runs exactly the canonical kind's cases (read from
/// the canonical kind's `testdata/`), so the two answer alike by construction.
#[test]
fn each_script_is_installed_under_both_kinds_with_the_same_cases() {
    let root = repo_root().join(CUSTOMIZATIONS);
    let mut installed: Vec<String> = health_dirs()
        .iter()
        .map(|d| kind_of_dir(d).to_string())
        .collect();
    installed.sort();
    let mut want: Vec<String> = MODELS
        .iter()
        .flat_map(|m| m.kinds().map(str::to_string))
        .collect();
    want.sort();
    assert_eq!(installed, want, "kind directories under {CUSTOMIZATIONS}");
    for model in &MODELS {
        let on_disk = std::fs::read_to_string(repo_root().join(model.lua)).expect("lua/ script");
        assert_eq!(on_disk, model.script, "{}", model.lua);
        for kind in model.kinds() {
            let copy = std::fs::read_to_string(root.join(kind).join("health.lua"))
                .unwrap_or_else(|e| panic!("{kind}/health.lua: {e}"));
            assert!(
                copy == model.script,
                "{CUSTOMIZATIONS}/{kind}/health.lua differs from {} (its source); run `{}`",
                model.lua,
                temporal_worker_controller::generate::lua::REGENERATE
            );
        }
        let canonical = cases_of(&root.join(model.canonical));
        for alias in model.aliases {
            let through_alias: Vec<(String, String, String)> = cases_of(&root.join(alias))
                .into_iter()
                .map(|(input, status, message)| {
                    let prefix = format!("../{}/", model.canonical);
                    let local = input
                        .strip_prefix(&prefix)
                        .unwrap_or_else(|| panic!("{alias}: {input} is not under {prefix}"));
                    (local.to_string(), status, message)
                })
                .collect();
            assert_eq!(
                through_alias, canonical,
                "{alias}/health_test.yaml must list {}'s cases",
                model.canonical
            );
        }
    }
}

/// The reason on a status' `Ready` condition, if it has one.
fn ready_reason(obj: &Value) -> Option<&str> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?["reason"]
        .as_str()
}

/// Every reason of `api::conditions::ALL` is run through the Lua check: by a `health_test.yaml`
/// case, or by a Flux fixture (`flux/fixtures/`, one per reason, each recording the Argo CD
/// answer in `fixtures.temporal.io/argocd-*`), in both sandboxes. Every reason either uses is
/// in `ALL`, or is the CRD's `WaitingForController` placeholder.
#[test]
fn every_reason_is_checked_by_the_lua_health_check() {
    let dir = repo_root().join(KIND_DIR);
    let mut covered = std::collections::BTreeSet::new();
    for path in test_harness::gitops::yaml_files(&dir.join("testdata")) {
        if let Some(reason) = ready_reason(&load_yaml(&path)) {
            covered.insert(reason.to_string());
        }
    }
    // Plus the CRD's status placeholder, which the API server shows before the controller's
    // first write (the controller never writes it, so it is not in `ALL`).
    let known = |reason: &str| {
        reason == WAITING_FOR_CONTROLLER || conditions::ALL.iter().any(|r| r.reason == reason)
    };
    if let Some(unknown) = covered.iter().find(|r| !known(r)) {
        panic!("{KIND_DIR}/testdata uses reason {unknown:?}, which is not in api::conditions::ALL");
    }
    let mut failures = Vec::new();
    for path in test_harness::gitops::yaml_files(&repo_root().join("flux/fixtures")) {
        let obj = load_yaml(&path);
        let ann = |key: &str| {
            obj["metadata"]["annotations"][format!("fixtures.temporal.io/{key}")]
                .as_str()
                .unwrap_or_else(|| panic!("{}: no {key} annotation", path.display()))
                .to_string()
        };
        let want = (ann("argocd-health"), ann("argocd-message"));
        for sandbox in [Sandbox::ArgoCmDefault, Sandbox::OpenLibs] {
            let got = argocd_health_with(sandbox, HEALTH_LUA, &obj);
            if got != want {
                failures.push(format!(
                    "{} ({sandbox:?}): got {got:?}, want {want:?}",
                    path.display()
                ));
            }
        }
        if let Some(reason) = ready_reason(&obj) {
            assert!(
                known(reason),
                "{}: reason {reason:?} is not in api::conditions::ALL",
                path.display()
            );
            covered.insert(reason.to_string());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let missing: Vec<&str> = conditions::ALL
        .iter()
        .map(|r| r.reason)
        .filter(|r| !covered.contains(*r))
        .collect();
    assert!(missing.is_empty(), "no Lua case shows {missing:?}");
}

/// `argocd/argocd-cm.yaml` installs every model's script under both its kinds (the alias
/// kinds' keys are YAML aliases of the canonical kinds' scripts), and nothing else.
#[test]
fn argocd_cm_snippet_embeds_exactly_the_scripts() {
    let cm = load_yaml(&repo_root().join("argocd/argocd-cm.yaml"));
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["name"], "argocd-cm");
    let data = cm["data"].as_object().expect("data");
    let mut want_keys = Vec::new();
    for model in &MODELS {
        for kind in model.kinds() {
            let key = format!("resource.customizations.health.temporal.io_{kind}");
            let embedded = data
                .get(&key)
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("no {key} in argocd-cm.yaml"));
            assert!(
                embedded == model.script,
                "argocd-cm.yaml {key} differs from {} (its source); run `{}`",
                model.lua,
                temporal_worker_controller::generate::lua::REGENERATE
            );
            want_keys.push(key);
        }
    }
    // Beside the health checks: the worker deployment kinds' resource actions
    // (tests/argocd_actions.rs checks their content).
    for kind in temporal_worker_controller::generate::lua::action_kinds() {
        want_keys.push(temporal_worker_controller::generate::lua::cm_actions_key(
            kind,
        ));
    }
    let mut keys: Vec<&String> = data.keys().collect();
    keys.sort();
    want_keys.sort();
    assert_eq!(keys, want_keys.iter().collect::<Vec<_>>());
    // Each script is written out once; the alias kinds point at it.
    let text = std::fs::read_to_string(repo_root().join("argocd/argocd-cm.yaml")).expect("cm");
    assert_eq!(text.matches("return health(obj)").count(), MODELS.len());
}

#[test]
fn string_library_is_missing_in_the_argocd_cm_sandbox() {
    let obj = json!({"metadata": {"generation": 1}});
    let uses_format = r#"return { status = "Healthy", message = string.format("gen %d", obj.metadata.generation) }"#;
    let err = run_health_script(Sandbox::ArgoCmDefault, uses_format, &obj)
        .expect_err("string.format must fail");
    assert!(
        err.to_string().contains("string"),
        "unexpected error: {err}"
    );
    // Argo CD turns a script error into Unknown with the error text.
    let (status, message) = argocd_health_with(Sandbox::ArgoCmDefault, uses_format, &obj);
    assert_eq!(status, "Unknown");
    assert!(message.contains("string"), "{message}");
    // The same script works once the libraries are open, so the failure is the sandbox's doing.
    assert_eq!(
        argocd_health_with(Sandbox::OpenLibs, uses_format, &obj),
        ("Healthy".to_string(), "gen 1".to_string())
    );

    // Methods on strings need the string metatable, which the sandbox does not set either.
    let method = r#"return { status = "Healthy", message = ("abc"):upper() }"#;
    assert!(run_health_script(Sandbox::ArgoCmDefault, method, &obj).is_err());
    let math = r#"return { status = "Healthy", message = tostring(math.floor(1.5)) }"#;
    assert!(run_health_script(Sandbox::ArgoCmDefault, math, &obj).is_err());
    // No global os; only require("os") with time/date, as in Argo CD.
    let globals = r#"return { status = "Healthy", message = type(os) .. " " .. type(io) .. " " .. type(require("os").time) }"#;
    assert_eq!(
        argocd_health_with(Sandbox::ArgoCmDefault, globals, &obj),
        ("Healthy".to_string(), "nil nil function".to_string())
    );
}

#[test]
fn script_source_avoids_libraries_outside_the_sandbox() {
    for model in &MODELS {
        assert_sandbox_safe(model.lua, model.script);
    }
}

fn assert_sandbox_safe(name: &str, script: &str) {
    // Executing the test cases covers the branches they reach; this covers the rest.
    let code: String = script
        .lines()
        .map(|l| l.split("--").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    for forbidden in [
        "string.",
        "math.",
        "io.",
        "os.",
        "coroutine.",
        "debug.",
        "goto ",
        "require",
    ] {
        assert!(!code.contains(forbidden), "{name} uses `{forbidden}`");
    }
    // `s:method()` on a string needs the string metatable; the script only calls tables' fields.
    assert!(!code.contains(':'), "{name} uses a method call");
}

#[test]
fn odd_objects_give_a_health_status_not_a_script_error() {
    let cases = [
        json!({}),
        json!({"metadata": "not a table", "status": "not a table"}),
        json!({"metadata": {"generation": 2}, "status": {"observedGeneration": "2", "conditions": "nope"}}),
        json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "conditions": [1, "x", null, {"type": "Ready"}]}}),
        json!({"metadata": {"generation": 2}, "spec": {"rollout": "Manual"}, "status": {"observedGeneration": 2}}),
        json!({"metadata": {}, "status": {"observedGeneration": 7, "conditions": [{"type": "Ready", "status": "True"}]}}),
    ];
    for model in &MODELS {
        for obj in &cases {
            let (status, message) = argocd_health_with(Sandbox::ArgoCmDefault, model.script, obj);
            assert!(
                ["Healthy", "Progressing", "Degraded", "Suspended"].contains(&status.as_str()),
                "{}: {obj}: {status} {message}",
                model.lua
            );
            assert!(!message.is_empty(), "{}: {obj}: empty message", model.lua);
        }
    }
    // Fallback messages when the controller left a condition's message empty.
    let bare = json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "conditions": [
        {"type": "Stalled", "status": "True", "reason": "InvalidSpec"}]}});
    assert_eq!(
        argocd_health_with(Sandbox::ArgoCmDefault, HEALTH_LUA, &bare),
        ("Degraded".to_string(), "Rollout is stalled".to_string())
    );
    let no_generation = json!({"metadata": {}, "status": {}});
    assert_eq!(
        argocd_health_with(Sandbox::ArgoCmDefault, HEALTH_LUA, &no_generation),
        (
            "Progressing".to_string(),
            "Waiting for controller to observe the latest generation".to_string()
        )
    );
}

#[test]
fn runaway_scripts_hit_the_time_limit() {
    let (status, message) =
        argocd_health_with(Sandbox::ArgoCmDefault, "while true do end", &json!({}));
    assert_eq!(status, "Unknown");
    assert!(message.contains("time limit"), "{message}");
}

#[test]
fn invalid_statuses_are_reported_like_argocd_does() {
    let obj = json!({});
    assert_eq!(
        argocd_health_with(
            Sandbox::ArgoCmDefault,
            r#"return { status = "Fine" }"#,
            &obj
        ),
        (
            "Unknown".to_string(),
            "Lua returned an invalid health status".to_string()
        )
    );
    assert_eq!(
        argocd_health_with(Sandbox::ArgoCmDefault, "return nil", &obj),
        (String::new(), String::new())
    );
}

const OWNED_DIR: &str = "argocd/resource_customizations/temporal.io/WorkerResourceTemplate";

/// The owned-resource check's test data shows every reason of `api::conditions::OWNED_ALL`.
#[test]
fn owned_resource_check_covers_every_reason() {
    let mut covered = std::collections::BTreeSet::new();
    for path in test_harness::gitops::yaml_files(&repo_root().join(OWNED_DIR).join("testdata")) {
        if let Some(reason) = ready_reason(&load_yaml(&path)) {
            covered.insert(reason.to_string());
        }
    }
    let missing: Vec<&str> = conditions::OWNED_ALL
        .iter()
        .map(|r| r.reason)
        .filter(|r| !covered.contains(*r))
        .collect();
    assert!(
        missing.is_empty(),
        "no owned-resource Lua case shows {missing:?}"
    );
}

/// Runs every case of the `health_test.yaml` in `dir` through both engines: mlua (PUC Lua 5.1,
/// `tests/harness/src/gitops.rs`) with `mlua_script`, and Argo CD's own (gopher-lua and
/// gopher-json at Argo CD v3.6.1's pins, `tools/gitops-checker`) with `gopher_script`, in both
/// sandboxes, each case with `kind` set to the directory's kind. Returns (runs, one line per
/// disagreement between the engines or with the case's expected health).
fn differential(dir: &Path, mlua_script: &str, gopher_script: &str) -> (usize, Vec<String>) {
    let kind = kind_of_dir(dir);
    let mut ran = 0;
    let mut failures = Vec::new();
    for (input, want_status, want_message) in cases_of(dir) {
        let obj = as_kind(load_yaml(&dir.join(&input)), kind);
        for (sandbox, open_libs) in [(Sandbox::ArgoCmDefault, false), (Sandbox::OpenLibs, true)] {
            let mlua = argocd_health_with(sandbox, mlua_script, &obj);
            let gopher = argocd_gopher_lua(gopher_script, &obj, open_libs);
            ran += 1;
            let want = (want_status.clone(), want_message.clone());
            if mlua != gopher || gopher != want {
                failures.push(format!(
                    "{}/{input} ({sandbox:?}): mlua {mlua:?}, gopher-lua {gopher:?}, health_test.yaml {want:?}",
                    dir.display()
                ));
            }
        }
    }
    (ran, failures)
}

/// Every `health_test.yaml` case of every kind gives the same status and message in Argo CD's
/// engine (gopher-lua) as in mlua, and both give the case's expected health.
#[test]
fn every_case_agrees_in_gopher_lua_and_mlua() {
    let mut ran = 0;
    let mut failures = Vec::new();
    for dir in health_dirs() {
        let script = std::fs::read_to_string(dir.join("health.lua")).expect("read health.lua");
        let (n, f) = differential(&dir, &script, &script);
        ran += n;
        failures.extend(f);
    }
    // Each model's cases run under both kinds, in both sandboxes.
    assert!(
        ran >= 4 * (20 + 7 + 7),
        "expected at least 136 runs, ran {ran}"
    );
    assert!(
        failures.is_empty(),
        "{} of {ran} runs disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The comparison can fail: a scratch copy of the worker-deployment check whose Healthy message
/// differs, run in gopher-lua only, disagrees with mlua on the original.
#[test]
fn a_script_changed_in_one_engine_fails_the_comparison() {
    let scratch = std::env::temp_dir().join(format!("twc-argocd-scratch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let src = repo_root().join(KIND_DIR);
    let dir = scratch.join("WorkerDeployment");
    std::fs::create_dir_all(dir.join("testdata")).expect("mkdir");
    std::fs::copy(src.join("health_test.yaml"), dir.join("health_test.yaml")).expect("copy");
    for file in test_harness::gitops::yaml_files(&src.join("testdata")) {
        std::fs::copy(
            &file,
            dir.join("testdata").join(file.file_name().expect("name")),
        )
        .expect("copy testdata");
    }
    let original = std::fs::read_to_string(src.join("health.lua")).expect("health.lua");
    let changed = original.replace("status = \"Healthy\"", "status = \"Progressing\"");
    assert_ne!(changed, original, "the scratch edit must change the script");
    std::fs::write(dir.join("health.lua"), &changed).expect("write scratch copy");

    let (_, unchanged) = differential(&dir, &original, &original);
    assert!(unchanged.is_empty(), "{}", unchanged.join("\n"));
    let (ran, failures) = differential(&dir, &original, &changed);
    assert!(
        !failures.is_empty(),
        "a changed script in gopher-lua went unnoticed in {ran} runs"
    );
    assert!(
        failures
            .iter()
            .all(|f| f.contains("gopher-lua (\"Progressing\"")),
        "{}",
        failures.join("\n")
    );
    let _ = std::fs::remove_dir_all(&scratch);
}

/// Argo CD's engine itself has the sandbox the mlua runner imitates: no string library, no
/// global os (its safe os is only `require("os")`), an invalid status reported as Unknown.
#[test]
fn gopher_lua_sandbox_is_argo_cds() {
    let obj = json!({"metadata": {"generation": 1}});
    let (status, message) = argocd_gopher_lua(
        r#"return { status = "Healthy", message = string.format("gen %d", obj.metadata.generation) }"#,
        &obj,
        false,
    );
    assert_eq!(status, "Unknown");
    assert!(message.contains("string"), "{message}");
    assert_eq!(
        argocd_gopher_lua(
            r#"return { status = "Healthy", message = type(os) .. " " .. type(io) .. " " .. type(require("os").time) }"#,
            &obj,
            false
        ),
        ("Healthy".to_string(), "nil nil function".to_string())
    );
    assert_eq!(
        argocd_gopher_lua(r#"return { status = "Fine" }"#, &obj, false),
        (
            "Unknown".to_string(),
            "Lua returned an invalid health status".to_string()
        )
    );
    // obj's integers arrive as numbers (int64 -> LNumber), as in the application controller.
    assert_eq!(
        argocd_gopher_lua(
            r#"return { status = "Healthy", message = tostring(obj.metadata.generation + 1) }"#,
            &obj,
            false
        ),
        ("Healthy".to_string(), "2".to_string())
    );
}
