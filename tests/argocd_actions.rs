//! The Argo CD resource actions of the worker deployment kinds, run as Argo CD's own
//! `resource_customizations` tests run them: every case of each kind's
//! `actions/action_test.yaml` (discovery: the actions offered and which are disabled; each
//! action: the object it returns), in Argo CD's engine (gopher-lua at its pins, through
//! `tools/gitops-checker`) and in mlua, in the argocd-cm default sandbox and with open
//! libraries, all with the same results. The restart and retry values end in the Unix time of
//! the run: the runner checks it is now, then normalizes it to 0, as Argo CD's test normalizes
//! `restartedAt`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use temporal_worker_controller::generate::lua::{ACTION_DISCOVERY, ACTIONS, action_kinds};
use test_harness::argocd_actions::{
    Discovered, gopher_action, gopher_discovery, merge_patch, mlua_action, mlua_discovery,
};
use test_harness::gitops::{Sandbox, load_yaml, repo_root, unix_now};

const CUSTOMIZATIONS: &str = "argocd/resource_customizations/temporal.io";
const TIMED: [&str; 2] = ["temporal.io/restart", "temporal.io/retry"];

fn actions_dir(kind: &str) -> PathBuf {
    repo_root().join(CUSTOMIZATIONS).join(kind).join("actions")
}

fn tests_of(dir: &Path) -> Value {
    load_yaml(&dir.join("action_test.yaml"))
}

/// `obj` as Argo CD hands it to the actions of `kind`.
fn as_kind(obj: Value, kind: &str) -> Value {
    let kinds = test_harness::manifests::Kinds::of(kind).expect("a kind of the controller");
    test_harness::manifests::in_kinds(obj, kinds)
}

/// A restart or retry value's time normalized to 0, once checked to be within a minute of now.
fn normalize(mut obj: Value) -> Result<Value, String> {
    for key in TIMED {
        let Some(v) = obj
            .pointer_mut("/metadata/annotations")
            .and_then(|a| a.get_mut(key))
        else {
            continue;
        };
        let text = v.as_str().unwrap_or_default().to_string();
        let (build, at) = text
            .rsplit_once('/')
            .ok_or(format!("{key}={text}: no time"))?;
        let at: f64 = at
            .parse()
            .map_err(|_| format!("{key}={text}: not Unix seconds"))?;
        if (unix_now() - at).abs() > 60.0 {
            return Err(format!("{key}={text}: not the time of the run"));
        }
        *v = Value::String(format!("{build}/0"));
    }
    Ok(obj)
}

fn discovered(case: &Value) -> Vec<Discovered> {
    let mut want: Vec<Discovered> =
        serde_json::from_value(case["result"].clone()).expect("discovery result");
    want.sort();
    want
}

type Engine = (
    &'static str,
    Box<dyn Fn(&Value) -> Result<Vec<Discovered>, String>>,
);

fn discovery_engines(script: &'static str) -> Vec<Engine> {
    vec![
        (
            "mlua",
            Box::new(move |o| mlua_discovery(script, o, Sandbox::ArgoCmDefault)),
        ),
        (
            "mlua open libs",
            Box::new(move |o| mlua_discovery(script, o, Sandbox::OpenLibs)),
        ),
        (
            "gopher-lua",
            Box::new(move |o| gopher_discovery(script, o, false)),
        ),
        (
            "gopher-lua open libs",
            Box::new(move |o| gopher_discovery(script, o, true)),
        ),
    ]
}

/// Runs every discovery case of `dir` with `script`; one line per disagreement.
fn run_discovery(dir: &Path, kind: &str, script: &'static str) -> (usize, Vec<String>) {
    let tests = tests_of(dir);
    let cases = tests["discoveryTests"].as_array().expect("discoveryTests");
    let mut ran = 0;
    let mut failures = Vec::new();
    for case in cases {
        let input = case["inputPath"].as_str().expect("inputPath");
        let obj = as_kind(load_yaml(&dir.join(input)), kind);
        let want = discovered(case);
        for (engine, run) in discovery_engines(script) {
            ran += 1;
            let got = run(&obj);
            if got.as_ref() != Ok(&want) {
                failures.push(format!(
                    "{kind} {input} ({engine}): got {got:?}, want {want:?}"
                ));
            }
        }
    }
    (ran, failures)
}

fn action_script(name: &str) -> &'static str {
    ACTIONS
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("no action {name}"))
        .text
}

/// Runs every action case of `dir`; one line per disagreement.
fn run_actions(dir: &Path, kind: &str) -> (usize, Vec<String>) {
    let tests = tests_of(dir);
    let cases = tests["actionTests"].as_array().expect("actionTests");
    let mut ran = 0;
    let mut failures = Vec::new();
    for case in cases {
        let text = |k: &str| {
            case[k]
                .as_str()
                .unwrap_or_else(|| panic!("{k}"))
                .to_string()
        };
        let (action, input) = (text("action"), text("inputPath"));
        let live = as_kind(load_yaml(&dir.join(&input)), kind);
        let want = as_kind(load_yaml(&dir.join(text("expectedOutputPath"))), kind);
        let script = action_script(&action);
        let runs: [(&str, Result<Value, String>); 4] = [
            ("mlua", mlua_action(script, &live, Sandbox::ArgoCmDefault)),
            (
                "mlua open libs",
                mlua_action(script, &live, Sandbox::OpenLibs),
            ),
            ("gopher-lua", gopher_action(script, &live, false)),
            ("gopher-lua open libs", gopher_action(script, &live, true)),
        ];
        for (engine, got) in runs {
            ran += 1;
            match got.and_then(normalize) {
                Ok(got) if got == want => {}
                Ok(got) => failures.push(format!(
                    "{kind} {action} on {input} ({engine}): patch against the expected output {}",
                    merge_patch(&want, &got)
                )),
                Err(e) => failures.push(format!("{kind} {action} on {input} ({engine}): {e}")),
            }
        }
    }
    (ran, failures)
}

#[test]
fn every_discovery_case_agrees_in_gopher_lua_and_mlua() {
    let mut ran = 0;
    let mut failures = Vec::new();
    for kind in action_kinds() {
        let (n, f) = run_discovery(&actions_dir(kind), kind, ACTION_DISCOVERY);
        ran += n;
        failures.extend(f);
    }
    assert!(ran >= 2 * 8 * 4, "ran {ran}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_action_case_agrees_in_gopher_lua_and_mlua() {
    let mut ran = 0;
    let mut failures = Vec::new();
    for kind in action_kinds() {
        let (n, f) = run_actions(&actions_dir(kind), kind);
        ran += n;
        failures.extend(f);
    }
    assert!(ran >= 2 * ACTIONS.len() * 4, "ran {ran}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every action has a case, and each is offered in one tested state and withheld in another.
#[test]
fn every_action_is_tested_enabled_and_disabled() {
    let tests = tests_of(&actions_dir("WorkerDeployment"));
    for a in &ACTIONS {
        let acted = tests["actionTests"]
            .as_array()
            .expect("actionTests")
            .iter()
            .any(|c| c["action"] == a.name);
        assert!(acted, "no action test runs {}", a.name);
        for disabled in [false, true] {
            let seen = tests["discoveryTests"]
                .as_array()
                .expect("discoveryTests")
                .iter()
                .flat_map(discovered)
                .any(|d| d.name == a.name && d.disabled == disabled);
            assert!(
                seen,
                "{} is never {}",
                a.name,
                if disabled { "disabled" } else { "enabled" }
            );
        }
    }
}

/// Both kinds carry the generated scripts, and the alias kind runs the canonical kind's cases.
#[test]
fn the_actions_are_installed_under_both_kinds_with_the_same_cases() {
    let regenerate = temporal_worker_controller::generate::lua::REGENERATE;
    for kind in action_kinds() {
        let dir = actions_dir(kind);
        let read = |p: PathBuf| {
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        assert!(
            read(dir.join("discovery.lua")) == ACTION_DISCOVERY,
            "{kind}: run `{regenerate}`"
        );
        for a in &ACTIONS {
            let copy = read(dir.join(a.name).join("action.lua"));
            assert!(
                copy == a.text,
                "{kind}/actions/{}: run `{regenerate}`",
                a.name
            );
        }
    }
    let canonical = tests_of(&actions_dir("WorkerDeployment"));
    let alias = serde_json::to_string(&tests_of(&actions_dir("TemporalWorkerDeployment")))
        .expect("JSON")
        .replace("../../WorkerDeployment/actions/", "");
    let canonical = serde_json::to_string(&canonical).expect("JSON");
    assert_eq!(
        alias, canonical,
        "TemporalWorkerDeployment/actions/action_test.yaml"
    );
}

/// The comparison can fail: a script run on the wrong input, or a changed script in one
/// engine, is told apart.
#[test]
fn a_changed_script_or_output_fails_the_comparison() {
    let dir = actions_dir("WorkerDeployment");
    let live = load_yaml(&dir.join("../testdata/ramping.yaml"));
    let want = load_yaml(&dir.join("testdata/paused.yaml"));
    let promoted = gopher_action(action_script("promote"), &live, false).expect("runs");
    assert_ne!(promoted, want, "promote does not pause");
    assert_eq!(
        gopher_action(action_script("pause"), &live, false),
        Ok(want.clone())
    );
    let changed = action_script("pause").replace("paused = true", "paused = 1");
    assert_ne!(gopher_action(&changed, &live, false), Ok(want));
    // A script error is an error in both engines, not a silent no-op.
    let broken = "obj.spec.rollout.nothing.here = 1\nreturn obj";
    assert!(gopher_action(broken, &live, false).is_err());
    assert!(mlua_action(broken, &live, Sandbox::ArgoCmDefault).is_err());
    // A stale time is refused by the normalizer.
    let mut stale = live.clone();
    stale["metadata"]["annotations"] = serde_json::json!({"temporal.io/restart": "v1/1000"});
    assert!(normalize(stale).is_err());
}

#[test]
fn scripts_use_only_the_sandbox() {
    let texts = ACTIONS
        .iter()
        .map(|a| (a.name, a.text))
        .chain([("discovery", ACTION_DISCOVERY)]);
    for (name, text) in texts {
        let code: String = text
            .lines()
            .map(|l| l.split("--").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
            .replace("require(\"os\")", "")
            .replace("os.time()", "");
        for forbidden in ["string.", "math.", "io.", "os.", "debug.", "require", ":"] {
            assert!(!code.contains(forbidden), "{name} uses `{forbidden}`");
        }
    }
}
