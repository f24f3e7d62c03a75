//! kstatus (what Flux `healthChecks`, Helm 4 `--wait` and `kubectl`-style waits compute), the
//! Flux `healthCheckExprs` snippet and the Argo CD health check, checked on one fixture per
//! rollout state. Each fixture in `flux/fixtures/` records what every tool must answer in
//! `fixtures.temporal.io/*` annotations. kstatus and the Flux expressions are the real engines
//! (`tools/gitops-checker`: cli-utils, Flux's fork, Flux's CEL reader on cel-go), the Argo CD
//! check is the shipped Lua; `tests/gitops_live.rs` repeats the fixture checks on objects read
//! back from a real API server.
//!
//! Both kinds of a model share one status shape, so each fixture is written once: the Flux
//! fixtures as the seed kinds (`TemporalWorkerDeployment`, `TemporalWorkerOwnedResource`), the
//! Argo CD test data as the Go controller's kinds (`WorkerDeployment`, `WorkerResourceTemplate`,
//! `Connection`), and every check runs each object under both kind names (`as_kind`).

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Value, json};
use temporal_worker_controller::api::conditions as c;
use temporal_worker_controller::api::twd::{TemporalWorkerDeployment, WAITING_FOR_CONTROLLER};
use test_harness::gitops::{
    EXPR_CURRENT, EXPR_FAILED, Status, argocd_health, health_check_exprs, kstatus, load_yaml,
    repo_root, verdicts, yaml_files,
};

const ANN: &str = "fixtures.temporal.io/";

fn flux_fixtures() -> Vec<(PathBuf, Value)> {
    let files = yaml_files(&repo_root().join("flux/fixtures"));
    assert!(!files.is_empty(), "no fixtures in flux/fixtures");
    files
        .into_iter()
        .map(|p| (p.clone(), load_yaml(&p)))
        .collect()
}

fn argocd_testdata() -> Vec<(PathBuf, Value)> {
    let dir =
        repo_root().join("argocd/resource_customizations/temporal.io/WorkerDeployment/testdata");
    yaml_files(&dir)
        .into_iter()
        .map(|p| (p.clone(), load_yaml(&p)))
        .collect()
}

/// The worker kinds: the one users write today (the Go controller's), then its alias.
const WORKER_KINDS: [&str; 2] = ["WorkerDeployment", "TemporalWorkerDeployment"];
/// The owned-resource kinds, in the same order.
const OWNED_KINDS: [&str; 2] = ["WorkerResourceTemplate", "TemporalWorkerOwnedResource"];

/// `obj` as an object of `kind`: every engine must answer alike for both kinds of a model, except
/// that kstatus names the kind in its message for an unobserved generation (recorded in the
/// `kstatus-message` annotation).
fn as_kind(obj: &Value, kind: &str) -> Value {
    let old = obj["kind"].as_str().unwrap_or_default().to_string();
    let mut out = match test_harness::manifests::Kinds::of(kind) {
        Some(kinds) => test_harness::manifests::in_kinds(obj.clone(), kinds),
        None if kind == "ClusterConnection" => {
            test_harness::manifests::as_cluster_connection(obj.clone())
        }
        None => panic!("{kind}: not a kind of the controller"),
    };
    let key = format!("{ANN}kstatus-message");
    if let Some(message) = obj["metadata"]["annotations"][&key].as_str() {
        let prefix = format!("{old} generation is ");
        if let Some(rest) = message.strip_prefix(&prefix) {
            out["metadata"]["annotations"][&key] = json!(format!("{kind} generation is {rest}"));
        }
    }
    out
}

/// Every fixture once under each of the `kinds`.
fn under_each_kind<const N: usize>(
    fixtures: Vec<(PathBuf, Value)>,
    kinds: [&str; N],
) -> Vec<(String, Value)> {
    fixtures
        .into_iter()
        .flat_map(|(path, obj)| {
            kinds.map(|kind| (format!("{} as {kind}", path.display()), as_kind(&obj, kind)))
        })
        .collect()
}

fn annotation<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj["metadata"]["annotations"][format!("{ANN}{key}")]
        .as_str()
        .unwrap_or_else(|| panic!("{} lacks annotation {ANN}{key}", obj["metadata"]["name"]))
}

/// The generic custom-resource vectors from kstatus' own `TestCRDGenericStatus`, plus the
/// other rules of `Compute` in order, run through the real kstatus: the rules the status
/// contract and `docs/cd-rollouts.md` rely on.
#[test]
fn kstatus_follows_the_documented_generic_rules() {
    for (name, obj, want, want_message) in generic_rule_cases() {
        assert_eq!(kstatus(&obj), (want, want_message.to_string()), "{name}");
    }
    // Wrong types are a Compute error, which the pollers report as Unknown.
    assert_eq!(
        kstatus(&cr(Some(1), Some(json!({"observedGeneration": "1"})))).0,
        Status::Unknown
    );
    assert_eq!(
        kstatus(&cr(Some(1), Some(json!({"conditions": "x"})))).0,
        Status::Unknown
    );
    let mut deleting = cr(Some(1), None);
    deleting["metadata"]["deletionTimestamp"] = json!(42);
    assert_eq!(kstatus(&deleting).0, Status::Unknown);
}

/// A custom resource of a kind kstatus knows nothing about.
fn cr(generation: Option<i64>, status: Option<Value>) -> Value {
    let mut o = json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": {"name": "x", "namespace": "y"}});
    if let Some(g) = generation {
        o["metadata"]["generation"] = json!(g);
    }
    if let Some(s) = status {
        o["status"] = s;
    }
    o
}

fn cond(t: &str, s: &str, reason: &str, message: &str) -> Value {
    json!({"type": t, "status": s, "reason": reason, "message": message})
}

/// kstatus's generic rules: (case, object, status, message).
fn generic_rule_cases() -> Vec<(&'static str, Value, Status, &'static str)> {
    let mut cases = ready_condition_cases();
    cases.extend(generation_and_deletion_cases());
    cases.extend(abnormal_condition_cases());
    cases
}

/// The Ready condition, its absence, and a condition kstatus does not know.
fn ready_condition_cases() -> Vec<(&'static str, Value, Status, &'static str)> {
    vec![
        (
            "no status",
            cr(Some(1), None),
            Status::Current,
            "Resource is current",
        ),
        (
            "ready without observedGeneration",
            cr(
                Some(1),
                Some(json!({"conditions": [cond("Ready", "True", "", "")]})),
            ),
            Status::Current,
            "Resource is Ready",
        ),
        (
            "not ready",
            cr(
                Some(1),
                Some(
                    json!({"observedGeneration": 1, "conditions": [cond("Ready", "False", "NotReadyYet", "warming up")]}),
                ),
            ),
            Status::InProgress,
            "warming up",
        ),
        (
            "ready unknown",
            cr(
                Some(1),
                Some(json!({"conditions": [cond("Ready", "Unknown", "X", "hm")]})),
            ),
            Status::InProgress,
            "hm",
        ),
        (
            "unrecognised condition",
            cr(
                Some(1),
                Some(json!({"conditions": [cond("SomeCondition", "False", "", "")]})),
            ),
            Status::Current,
            "Resource is current",
        ),
    ]
}

/// Generation against observedGeneration, and deletion.
fn generation_and_deletion_cases() -> Vec<(&'static str, Value, Status, &'static str)> {
    vec![
        (
            "generation not observed",
            cr(Some(2), Some(json!({"observedGeneration": 1}))),
            Status::InProgress,
            "MyCR generation is 2, but latest observed generation is 1",
        ),
        // A missing observedGeneration is not "not observed" to kstatus.
        (
            "observedGeneration missing",
            cr(Some(5), Some(json!({"conditions": []}))),
            Status::Current,
            "Resource is current",
        ),
        (
            "no generation at all",
            cr(None, Some(json!({"observedGeneration": 3}))),
            Status::Current,
            "Resource is current",
        ),
        (
            "deletion wins over everything",
            {
                let mut o = cr(
                    Some(2),
                    Some(
                        json!({"observedGeneration": 1, "conditions": [cond("Stalled", "True", "X", "stuck")]}),
                    ),
                );
                o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                o
            },
            Status::Terminating,
            "Resource scheduled for deletion",
        ),
    ]
}

/// Reconciling and Stalled, the abnormal-true conditions.
fn abnormal_condition_cases() -> Vec<(&'static str, Value, Status, &'static str)> {
    vec![
        (
            "reconciling true",
            cr(
                Some(1),
                Some(
                    json!({"observedGeneration": 1, "conditions": [cond("Ready", "True", "", ""), cond("Reconciling", "True", "R", "busy")]}),
                ),
            ),
            Status::InProgress,
            "busy",
        ),
        (
            "stalled true",
            cr(
                Some(1),
                Some(
                    json!({"observedGeneration": 1, "conditions": [cond("Ready", "False", "", "nope"), cond("Stalled", "True", "S", "stuck")]}),
                ),
            ),
            Status::Failed,
            "stuck",
        ),
        (
            "both abnormal-true: array order decides (stalled first)",
            cr(
                Some(1),
                Some(
                    json!({"conditions": [cond("Stalled", "True", "S", "stuck"), cond("Reconciling", "True", "R", "busy")]}),
                ),
            ),
            Status::Failed,
            "stuck",
        ),
        (
            "both abnormal-true: array order decides (reconciling first)",
            cr(
                Some(1),
                Some(
                    json!({"conditions": [cond("Reconciling", "True", "R", "busy"), cond("Stalled", "True", "S", "stuck")]}),
                ),
            ),
            Status::InProgress,
            "busy",
        ),
        (
            "abnormal-false conditions are ignored",
            cr(
                Some(1),
                Some(
                    json!({"observedGeneration": 1, "conditions": [cond("Reconciling", "False", "", ""), cond("Stalled", "False", "", ""), cond("Ready", "True", "", "")]}),
                ),
            ),
            Status::Current,
            "Resource is Ready",
        ),
    ]
}

#[test]
fn there_is_a_fixture_for_every_rollout_state() {
    let names: BTreeSet<String> = flux_fixtures()
        .iter()
        .map(|(p, _)| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    for want in [
        "fresh",
        "waiting-for-pollers",
        "ramping",
        "promoted",
        "gate-failed",
        "invalid-spec",
        "connection-missing",
        "deleting",
        "generation-not-observed",
        "manual-waiting-for-promotion",
    ] {
        assert!(
            names.contains(want),
            "missing flux/fixtures/{want}.yaml (have {names:?})"
        );
    }
}

#[test]
fn every_fixture_gets_its_recorded_kstatus_exprs_and_argocd_results() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (path, obj) in under_each_kind(flux_fixtures(), WORKER_KINDS) {
        checked += 1;
        let want_kstatus = Status::parse(annotation(&obj, "kstatus")).expect("known kstatus value");
        let want_message = annotation(&obj, "kstatus-message");
        let got = kstatus(&obj);
        if got != (want_kstatus, want_message.to_string()) {
            failures.push(format!(
                "{}: kstatus {got:?}, want {want_kstatus} {want_message:?}",
                path
            ));
        }
        let want_exprs =
            Status::parse(annotation(&obj, "health-check-exprs")).expect("known exprs value");
        let got_exprs = health_check_exprs(&obj).0;
        if got_exprs != want_exprs {
            failures.push(format!(
                "{}: healthCheckExprs {got_exprs}, want {want_exprs}",
                path
            ));
        }
        let want_argo = (
            annotation(&obj, "argocd-health").to_string(),
            annotation(&obj, "argocd-message").to_string(),
        );
        let got_argo = argocd_health(&obj);
        if got_argo != want_argo {
            failures.push(format!("{}: argocd {got_argo:?}, want {want_argo:?}", path));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(checked, 2 * flux_fixtures().len());
}

/// Reasons of `api::conditions::ALL` that need no Flux fixture, each with why. Empty: every
/// reason can appear in a status (the plan phases through `compute()` in `src/worker_deployment/status/mod.rs`, the
/// rest through `Failure::reason()` in `src/worker_deployment/outcome.rs`).
const REASONS_WITHOUT_FIXTURE: &[(&str, &str)] = &[];

/// `(status, reason)` of Ready, Progressing, Reconciling and Stalled, in that order.
fn condition_row(obj: &Value) -> Option<Vec<(&str, &str)>> {
    let conds = obj.pointer("/status/conditions")?.as_array()?;
    [c::READY, c::PROGRESSING, c::RECONCILING, c::STALLED]
        .iter()
        .map(|t| {
            let x = conds.iter().find(|x| x["type"] == *t)?;
            Some((x["status"].as_str()?, x["reason"].as_str()?))
        })
        .collect()
}

#[test]
fn every_reason_has_a_flux_fixture_showing_its_kind() {
    let mut covered = BTreeSet::new();
    for (path, obj) in flux_fixtures() {
        let name = path.display();
        let Some(row) = condition_row(&obj) else {
            // No status, or the CRD's placeholder the API server shows before the first write.
            let placeholder = obj["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.len() == 1 && cs[0]["reason"] == json!(WAITING_FOR_CONTROLLER)
            });
            assert!(
                obj.get("status").is_none() || placeholder,
                "{name}: incomplete conditions"
            );
            continue;
        };
        let reason = row[0].1;
        assert!(
            row.iter().all(|(_, r)| *r == reason),
            "{name}: the four conditions carry one reason: {row:?}"
        );
        let Some(known) = c::ALL.iter().find(|r| r.reason == reason) else {
            panic!("{name}: reason {reason:?} is not in api::conditions::ALL");
        };
        // The statuses the reason's kind promises (the Kind column of the reason table).
        let want = match known.kind {
            c::ReasonKind::Done => ["True", "False", "False", "False"],
            c::ReasonKind::Progressing => ["False", "True", "True", "False"],
            c::ReasonKind::Blocked => ["False", "False", "True", "False"],
            c::ReasonKind::Terminal => ["False", "False", "False", "True"],
            c::ReasonKind::Unknown => ["Unknown", "False", "True", "False"],
        };
        let got: Vec<&str> = row.iter().map(|(s, _)| *s).collect();
        assert_eq!(got, want, "{name}: {reason} is {:?}", known.kind);
        covered.insert(known.reason);
    }
    for (reason, why) in REASONS_WITHOUT_FIXTURE {
        assert!(
            c::ALL.iter().any(|r| r.reason == *reason),
            "excluded reason {reason:?} is not in api::conditions::ALL"
        );
        assert!(!why.trim().is_empty(), "say why {reason} has no fixture");
    }
    let missing: Vec<&str> = c::ALL
        .iter()
        .map(|r| r.reason)
        .filter(|r| !covered.contains(r))
        .filter(|r| !REASONS_WITHOUT_FIXTURE.iter().any(|(x, _)| x == r))
        .collect();
    assert!(
        missing.is_empty(),
        "no flux/fixtures/*.yaml shows {missing:?}; add one (with its fixtures.temporal.io/* \
         answers and a row in the status table of docs/cd-rollouts.md) or list the reason in \
         REASONS_WITHOUT_FIXTURE with why"
    );
    let needless: Vec<&str> = REASONS_WITHOUT_FIXTURE
        .iter()
        .map(|(r, _)| *r)
        .filter(|r| covered.contains(r))
        .collect();
    assert!(
        needless.is_empty(),
        "{needless:?} have fixtures; drop them from REASONS_WITHOUT_FIXTURE"
    );
}

/// The status the controller writes: observedGeneration plus all four conditions.
fn follows_status_contract(obj: &Value) -> bool {
    let has_generation = obj
        .pointer("/status/observedGeneration")
        .is_some_and(Value::is_i64);
    let types: BTreeSet<&str> = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c["type"].as_str()).collect())
        .unwrap_or_default();
    has_generation
        && [c::READY, c::PROGRESSING, c::RECONCILING, c::STALLED]
            .iter()
            .all(|t| types.contains(t))
}

#[test]
fn argocd_kstatus_and_exprs_agree_on_controller_written_status() {
    let mut checked = 0;
    let all = flux_fixtures()
        .into_iter()
        .chain(argocd_testdata())
        .collect();
    for (name, obj) in under_each_kind(all, WORKER_KINDS) {
        if !follows_status_contract(&obj) {
            continue;
        }
        checked += 1;
        let (health, _) = argocd_health(&obj);
        let (ks, _) = kstatus(&obj);
        let (exprs, _) = health_check_exprs(&obj);
        assert_eq!(
            health == "Healthy",
            ks == Status::Current,
            "{name}: argocd {health} vs kstatus {ks}"
        );
        assert_eq!(
            health == "Degraded",
            ks == Status::Failed,
            "{name}: argocd {health} vs kstatus {ks}"
        );
        assert_eq!(
            health == "Healthy",
            exprs == Status::Current,
            "{name}: argocd {health} vs exprs {exprs}"
        );
        assert_eq!(
            health == "Degraded",
            exprs == Status::Failed,
            "{name}: argocd {health} vs exprs {exprs}"
        );
        // kubectl wait --for=condition=Ready agrees too.
        let ready = obj["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let observed = obj["status"]["observedGeneration"] == obj["metadata"]["generation"];
        if obj["metadata"]["deletionTimestamp"].is_null() && observed {
            assert_eq!(
                ready,
                health == "Healthy",
                "{name}: Ready={ready} vs argocd {health}"
            );
        }
    }
    assert!(
        checked >= 2 * 12,
        "only {checked} fixtures (under both kinds) follow the status contract"
    );
}

/// The TWD CRD's schema default for `status`, which the API server returns until the
/// controller writes status.
fn crd_status_default() -> Value {
    crd_status_default_of("TemporalWorkerDeployment")
}

/// The schema default for `status` of `kind`'s CRD.
fn crd_status_default_of(kind: &str) -> Value {
    let file = format!("crds/{}s.temporal.io.yaml", kind.to_lowercase());
    load_yaml(&repo_root().join(&file))
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/status/default")
        .cloned()
        .unwrap_or_else(|| panic!("{file} declares no default for status"))
}

/// Both worker kinds' CRDs and both owned-resource kinds' CRDs default `status` to the same
/// placeholder, naming their own kind, so a fresh object of either kind reads as in progress.
#[test]
fn both_kinds_of_a_model_get_the_same_status_default() {
    let fresh = load_yaml(&repo_root().join("flux/fixtures/fresh.yaml"));
    for kinds in [WORKER_KINDS, OWNED_KINDS] {
        let [canonical, alias] = kinds;
        let mut renamed = crd_status_default_of(alias);
        let message = &mut renamed["conditions"][0]["message"];
        let text = message.as_str().expect("placeholder message").to_string();
        assert!(text.ends_with(&format!(" {alias}")), "{alias}: {text}");
        *message = json!(text.replace(alias, canonical));
        assert_eq!(crd_status_default_of(canonical), renamed, "{canonical}");
    }
    let [canonical, _] = WORKER_KINDS;
    let mut obj = as_kind(&fresh, canonical);
    obj["status"] = crd_status_default_of(canonical);
    let v = verdicts(&obj);
    assert_eq!(v.kstatus.status, Status::InProgress, "{v:?}");
    assert_eq!(v.flux.status, Status::InProgress, "{v:?}");
    assert_eq!(v.argocd.0, "Progressing", "{v:?}");
}

#[test]
fn the_fresh_object_gap_is_closed_by_the_status_default() {
    let fresh = load_yaml(&repo_root().join("flux/fixtures/fresh.yaml"));
    // The fixture is the object as the API server returns it before the controller ran: the
    // CRD's status default (plus the nested versionCount default).
    let mut want = crd_status_default();
    want["versionCount"] = json!(0);
    assert_eq!(fresh["status"], want);
    let ready = &fresh["status"]["conditions"][0];
    assert_eq!(
        (&ready["type"], &ready["status"], &ready["reason"]),
        (
            &json!(c::READY),
            &json!("Unknown"),
            &json!(WAITING_FOR_CONTROLLER)
        )
    );
    let v = verdicts(&fresh);
    assert_eq!(v.kstatus.status, Status::InProgress, "{v:?}");
    assert_eq!(v.flux.status, Status::InProgress, "{v:?}");
    assert_eq!(v.argocd.0, "Progressing", "{v:?}");

    // Without the default (an object with no status at all) real kstatus calls it Current:
    // documented upstream behaviour, which would let Helm 4 `--wait` and Flux pass at once.
    // The Flux expressions fail to evaluate on it instead (Unknown: Flux keeps polling).
    let mut bare = fresh.clone();
    bare.as_object_mut().map(|o| o.remove("status"));
    let v = verdicts(&bare);
    assert_eq!(
        v.kstatus.pair(),
        (Status::Current, "Resource is current".to_string())
    );
    assert_eq!(v.flux.status, Status::Unknown, "{v:?}");
    assert!(v.flux.error.contains("no such attribute"), "{v:?}");
    assert_eq!(v.argocd.0, "Progressing");
}

/// Other placeholders a default could use, on the real engines. `Ready=Unknown` is the one the
/// CRD ships: the controller never writes `Unknown`, so the placeholder's fixed
/// `lastTransitionTime` is never carried into a condition the controller keeps (it preserves
/// the time of a condition whose status did not change, and it does write `Reconciling=True`).
#[test]
fn status_default_candidates_on_the_real_engines() {
    let fresh = load_yaml(&repo_root().join("flux/fixtures/fresh.yaml"));
    let cond = |t: &str, s: &str| json!({"type": t, "status": s, "reason": WAITING_FOR_CONTROLLER, "message": "waiting", "lastTransitionTime": "1970-01-01T00:00:00Z"});
    for (name, status, want_kstatus) in [
        (
            "Ready=Unknown",
            json!({"conditions": [cond("Ready", "Unknown")]}),
            (Status::InProgress, "waiting".to_string()),
        ),
        (
            "Reconciling=True",
            json!({"conditions": [cond("Reconciling", "True")]}),
            (Status::InProgress, "waiting".to_string()),
        ),
        (
            "observedGeneration=-1",
            json!({"observedGeneration": -1}),
            (
                Status::InProgress,
                "TemporalWorkerDeployment generation is 1, but latest observed generation is -1"
                    .to_string(),
            ),
        ),
        // An empty status is no better than none.
        (
            "{}",
            json!({}),
            (Status::Current, "Resource is current".to_string()),
        ),
    ] {
        let mut obj = fresh.clone();
        obj["status"] = status;
        let v = verdicts(&obj);
        assert_eq!(v.kstatus.pair(), want_kstatus, "{name}");
        assert_eq!(v.flux.status, Status::InProgress, "{name}: {v:?}");
        assert_eq!(v.argocd.0, "Progressing", "{name}");
    }
}

#[test]
fn fixture_conditions_follow_the_controller_contract() {
    // Every reason the controller writes, plus the CRD's placeholder before its first write.
    let reasons: BTreeSet<&str> = c::ALL
        .iter()
        .map(|r| r.reason)
        .chain([WAITING_FOR_CONTROLLER])
        .collect();
    for (path, obj) in flux_fixtures().into_iter().chain(argocd_testdata()) {
        let name = path.display();
        // Same shape as the CRD types, so the fixtures cannot describe fields that do not exist.
        let mut typed = obj.clone();
        if let Some(meta) = typed["metadata"].as_object_mut() {
            meta.remove("annotations");
        }
        let parsed: Result<TemporalWorkerDeployment, _> = serde_json::from_value(typed);
        assert!(
            parsed.is_ok(),
            "{name}: does not parse as a TemporalWorkerDeployment: {:?}",
            parsed.err()
        );

        let Some(conds) = obj.pointer("/status/conditions").and_then(Value::as_array) else {
            continue;
        };
        let observed = &obj["status"]["observedGeneration"];
        let is_true = |t: &str| {
            conds
                .iter()
                .any(|x| x["type"] == t && x["status"] == "True")
        };
        assert!(
            !(is_true(c::RECONCILING) && is_true(c::STALLED)),
            "{name}: Reconciling and Stalled both True"
        );
        for cond in conds {
            let reason = cond["reason"].as_str().unwrap_or_default();
            assert!(
                reasons.contains(reason),
                "{name}: unknown reason {reason:?}"
            );
            assert_eq!(
                &cond["observedGeneration"], observed,
                "{name}: condition observedGeneration"
            );
        }
        // Ready=True only with a done reason (RolloutComplete, or PollersHealthy after an
        // outage of the live versions' pollers).
        if is_true(c::READY) {
            let done = |reason: &Value| {
                c::ALL
                    .iter()
                    .any(|r| r.kind == c::ReasonKind::Done && *reason == json!(r.reason))
            };
            assert!(
                conds
                    .iter()
                    .any(|x| x["type"] == c::READY && done(&x["reason"])),
                "{name}"
            );
        }
        if is_true(c::STALLED) {
            let stalled = conds
                .iter()
                .find(|x| x["type"] == c::STALLED)
                .map(|x| x["reason"].clone());
            let terminal = c::ALL
                .iter()
                .any(|r| r.kind == c::ReasonKind::Terminal && stalled == Some(json!(r.reason)));
            assert!(
                terminal,
                "{name}: Stalled for a non-terminal reason {stalled:?}"
            );
        }
    }
}

/// A `healthCheckExprs` list has exactly one entry per worker and owned-resource kind, each
/// with the evaluated expressions and no `inProgress`, and none for other kinds.
fn assert_exprs_cover_every_kind(exprs: &[Value], file: &str) {
    let mut kinds: Vec<&str> = exprs.iter().filter_map(|e| e["kind"].as_str()).collect();
    kinds.sort();
    let mut want: Vec<&str> = WORKER_KINDS.iter().chain(&OWNED_KINDS).copied().collect();
    want.sort();
    assert_eq!(kinds, want, "{file}: one entry per kind");
    for e in exprs {
        let kind = &e["kind"];
        assert_eq!(e["apiVersion"], "temporal.io/v1alpha1", "{file} {kind}");
        assert_eq!(
            e["current"], EXPR_CURRENT,
            "{file} {kind}: `current` drifted from test_harness::gitops"
        );
        assert_eq!(
            e["failed"], EXPR_FAILED,
            "{file} {kind}: `failed` drifted from test_harness::gitops"
        );
        assert!(
            e.get("inProgress").is_none(),
            "{file} {kind}: inProgress would be evaluated first and shadow `failed`"
        );
    }
}

#[test]
fn health_check_exprs_snippet_is_the_evaluated_one() {
    let snippet = load_yaml(&repo_root().join("flux/health-check-exprs.yaml"));
    let exprs = snippet["healthCheckExprs"]
        .as_array()
        .expect("healthCheckExprs list");
    assert_exprs_cover_every_kind(exprs, "flux/health-check-exprs.yaml");
}

#[test]
fn kustomization_health_checks_our_kind() {
    let k = load_yaml(&repo_root().join("flux/kustomization.yaml"));
    assert_eq!(k["apiVersion"], "kustomize.toolkit.fluxcd.io/v1");
    assert_eq!(k["kind"], "Kustomization");
    // `wait: true` makes Flux ignore healthChecks.
    assert_ne!(k["spec"]["wait"], true);
    assert!(
        k["spec"]["timeout"].is_string(),
        "set a timeout that covers a whole rollout"
    );
    let checks = k["spec"]["healthChecks"].as_array().expect("healthChecks");
    // The example uses the kind users write today.
    assert!(
        checks
            .iter()
            .any(|h| h["apiVersion"] == "temporal.io/v1alpha1"
                && h["kind"] == WORKER_KINDS[0]
                && h["name"].is_string()
                && h["namespace"].is_string()),
        "{checks:?}"
    );
}

#[test]
fn helmrelease_waits_with_the_same_expressions() {
    let hr = load_yaml(&repo_root().join("flux/helmrelease.yaml"));
    assert_eq!(hr["apiVersion"], "helm.toolkit.fluxcd.io/v2");
    assert_eq!(hr["kind"], "HelmRelease");
    // healthCheckExprs are only used by the poller wait strategy.
    assert_eq!(hr["spec"]["waitStrategy"]["name"], "poller");
    assert!(hr["spec"]["timeout"].is_string());
    for action in ["install", "upgrade"] {
        assert_ne!(
            hr["spec"][action]["disableWait"], true,
            "{action} must wait"
        );
    }
    let exprs = hr["spec"]["healthCheckExprs"]
        .as_array()
        .expect("healthCheckExprs");
    assert_exprs_cover_every_kind(exprs, "flux/helmrelease.yaml");
}

#[test]
fn argocd_sync_wave_example_orders_the_rollout_first() {
    let text = std::fs::read_to_string(repo_root().join("argocd/sync-waves.yaml"))
        .expect("sync-waves.yaml");
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("yaml document"))
        .collect();
    let wave = |o: &Value| -> i64 {
        o["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
            .as_str()
            .and_then(|w| w.parse().ok())
            .expect("sync-wave")
    };
    let twd = docs
        .iter()
        .find(|d| d["kind"] == WORKER_KINDS[0])
        .expect("a WorkerDeployment");
    let parsed: Result<TemporalWorkerDeployment, _> = serde_json::from_value(twd.clone());
    assert!(
        parsed.is_ok(),
        "example TWD does not match the CRD types: {:?}",
        parsed.err()
    );
    let later: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] != WORKER_KINDS[0])
        .collect();
    assert!(!later.is_empty());
    assert!(
        later.iter().all(|d| wave(d) > wave(twd)),
        "dependent objects must come in a later wave"
    );
}

/// `(file, fenced block)` for every `<!-- file: X -->` marker in the doc.
fn tagged_snippets(doc: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(rest) = lines[i].trim().strip_prefix("<!-- file:") {
            let file = rest.trim_end_matches("-->").trim().to_string();
            assert!(
                lines.get(i + 1).is_some_and(|l| l.starts_with("```")),
                "marker for {file} is not followed by a fence"
            );
            let mut body = String::new();
            let mut j = i + 2;
            while j < lines.len() && !lines[j].starts_with("```") {
                body.push_str(lines[j]);
                body.push('\n');
                j += 1;
            }
            assert!(j < lines.len(), "unterminated fence for {file}");
            out.push((file, body));
            i = j;
        }
        i += 1;
    }
    out
}

#[test]
fn cd_rollouts_doc_quotes_the_tested_files_verbatim() {
    let doc = std::fs::read_to_string(repo_root().join("docs/cd-rollouts.md"))
        .expect("docs/cd-rollouts.md");
    let snippets = tagged_snippets(&doc);
    let files: BTreeSet<&str> = snippets.iter().map(|(f, _)| f.as_str()).collect();
    for want in [
        "flux/kustomization.yaml",
        "flux/health-check-exprs.yaml",
        "flux/helmrelease.yaml",
        "argocd/argocd-cm.yaml",
        "argocd/sync-waves.yaml",
    ] {
        assert!(
            files.contains(want),
            "docs/cd-rollouts.md does not quote {want}"
        );
    }
    for (file, body) in &snippets {
        let on_disk = std::fs::read_to_string(repo_root().join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            body == &on_disk,
            "docs/cd-rollouts.md has drifted from {file}; paste the file again"
        );
    }
    // Configuration blocks must all come from files; only shell commands may stand alone.
    let mut previous = "";
    let mut in_fence = false;
    for line in doc.lines() {
        if line.starts_with("```") {
            if !in_fence {
                let lang = line.trim_start_matches('`').trim();
                assert!(
                    lang == "sh" || previous.trim().starts_with("<!-- file:"),
                    "untagged ```{lang} block in docs/cd-rollouts.md after {previous:?}"
                );
            }
            in_fence = !in_fence;
        }
        previous = line;
    }
}

#[test]
fn cd_rollouts_status_table_matches_the_fixtures() {
    let doc = std::fs::read_to_string(repo_root().join("docs/cd-rollouts.md"))
        .expect("docs/cd-rollouts.md");
    let table = doc
        .split("<!-- status-table -->")
        .nth(1)
        .expect("status table marker");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .skip(2) // header and separator
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    let fixtures = flux_fixtures();
    assert_eq!(rows.len(), fixtures.len(), "one table row per fixture");
    for row in rows {
        let [name, ready, ks, exprs, argo] = row[..] else {
            panic!("bad row {row:?}")
        };
        let obj = load_yaml(&repo_root().join(format!("flux/fixtures/{name}.yaml")));
        let want_ready = obj["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .map(|c| {
                format!(
                    "`{}` {}",
                    c["status"].as_str().unwrap_or_default(),
                    c["reason"].as_str().unwrap_or_default()
                )
            })
            .unwrap_or_else(|| "none".into());
        assert_eq!(ready, want_ready, "{name}");
        assert_eq!(ks, kstatus(&obj).0.as_str(), "{name}");
        assert_eq!(exprs, health_check_exprs(&obj).0.as_str(), "{name}");
        assert_eq!(argo, argocd_health(&obj).0, "{name}");
    }
}

/// Owned-resource states (the Argo CD test data of its own health check): kstatus, as Flux and
/// `helm --wait` compute it, agrees with the Lua check on every one the controller or the CRD
/// default can produce (no status at all is never served: the CRD's status default fills it).
#[test]
fn owned_resource_states_agree_between_kstatus_and_the_argocd_check() {
    let dir = repo_root().join("argocd/resource_customizations/temporal.io/WorkerResourceTemplate");
    let checked = argocd_cases_agree_with_kstatus(&dir, OWNED_KINDS, &["testdata/no-status.yaml"]);
    assert!(
        checked >= 2 * 5,
        "only {checked} owned-resource states checked"
    );
}

/// Connection states (the Argo CD test data of its check): kstatus agrees with the Lua check on
/// every one, including no status at all, which kstatus reads as Current and the check as
/// Healthy (a Connection has nothing to roll out).
#[test]
fn connection_states_agree_between_kstatus_and_the_argocd_check() {
    let dir = repo_root().join("argocd/resource_customizations/temporal.io/Connection");
    let checked = argocd_cases_agree_with_kstatus(&dir, ["Connection", "TemporalConnection"], &[]);
    assert!(checked >= 2 * 7, "only {checked} Connection states checked");
}

/// Runs kstatus on every case of the `health_test.yaml` in `dir` (but `skip`), under both
/// `kinds`: Healthy must be Current, Degraded Failed, the rest InProgress (Terminating when
/// deleted). Returns how many objects were checked.
fn argocd_cases_agree_with_kstatus(
    dir: &std::path::Path,
    kinds: [&str; 2],
    skip: &[&str],
) -> usize {
    let tests = load_yaml(&dir.join("health_test.yaml"));
    let mut checked = 0;
    for case in tests["tests"].as_array().expect("tests") {
        let input = case["inputPath"].as_str().expect("inputPath");
        if skip.contains(&input) {
            continue;
        }
        let want_health = case["healthStatus"]["status"].as_str();
        for kind in kinds {
            let obj = as_kind(&load_yaml(&dir.join(input)), kind);
            let want = match want_health {
                Some("Healthy") => Status::Current,
                Some("Degraded") => Status::Failed,
                _ if obj["metadata"]["deletionTimestamp"].is_string() => Status::Terminating,
                _ => Status::InProgress,
            };
            let (got, message) = kstatus(&obj);
            assert_eq!(got, want, "{input} as {kind}: kstatus {message:?}");
            checked += 1;
        }
    }
    checked
}

/// Owned-resource states (`flux/fixtures/owned/`), each recording what kstatus, the Flux
/// `healthCheckExprs` entry for the kind and the kind's Argo CD check answer, one per condition
/// reason of `api::conditions::OWNED_ALL`; each checked under both owned-resource kinds.
#[test]
fn owned_resource_fixtures_get_their_recorded_verdicts_and_cover_every_reason() {
    use temporal_worker_controller::api::conditions::OWNED_ALL;
    let script =
        std::fs::read_to_string(repo_root().join("lua/temporalworkerownedresource-health.lua"))
            .expect("owned-resource health script");
    let mut covered = BTreeSet::new();
    let mut failures = Vec::new();
    let fixtures = yaml_files(&repo_root().join("flux/fixtures/owned"))
        .into_iter()
        .map(|p| (p.clone(), load_yaml(&p)))
        .collect();
    for (name, obj) in under_each_kind(fixtures, OWNED_KINDS) {
        let got = (
            kstatus(&obj),
            health_check_exprs(&obj).0,
            test_harness::gitops::argocd_health_with(
                test_harness::gitops::Sandbox::OpenLibs,
                &script,
                &obj,
            ),
        );
        let want_kstatus = (
            Status::parse(annotation(&obj, "kstatus")).expect("kstatus value"),
            annotation(&obj, "kstatus-message").to_string(),
        );
        let want_exprs =
            Status::parse(annotation(&obj, "health-check-exprs")).expect("exprs value");
        let want_argo = (
            annotation(&obj, "argocd-health").to_string(),
            annotation(&obj, "argocd-message").to_string(),
        );
        if got != (want_kstatus.clone(), want_exprs, want_argo.clone()) {
            failures.push(format!("{name}: got {got:?}"));
        }
        if let Some(reason) = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .and_then(|c| c["reason"].as_str())
        {
            covered.insert(reason.to_string());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for r in OWNED_ALL {
        assert!(
            covered.contains(r.reason),
            "no flux/fixtures/owned fixture for reason {}",
            r.reason
        );
    }
}

/// Connection states (`flux/fixtures/connection/`), each recording what kstatus (which Flux and
/// Helm 4 use for a Connection: it needs no `healthCheckExprs` entry) and the Argo CD check
/// answer, one per condition reason of `api::conditions::CONNECTION_ALL` plus a certificate
/// within the warning window (still healthy); each checked under all three Connection kinds (the
/// cluster-scoped `ClusterConnection` included: bad credentials read Degraded/InProgress there too).
#[test]
fn connection_fixtures_get_their_recorded_verdicts_and_cover_every_reason() {
    use temporal_worker_controller::api::conditions::CONNECTION_ALL;
    let script = std::fs::read_to_string(repo_root().join("lua/temporalconnection-health.lua"))
        .expect("Connection health script");
    let mut covered = BTreeSet::new();
    let mut failures = Vec::new();
    let fixtures: Vec<(PathBuf, Value)> = yaml_files(&repo_root().join("flux/fixtures/connection"))
        .into_iter()
        .map(|p| (p.clone(), load_yaml(&p)))
        .collect();
    assert!(
        fixtures.len() >= 5,
        "{} Connection fixtures",
        fixtures.len()
    );
    let kinds = ["Connection", "TemporalConnection", "ClusterConnection"];
    for (name, obj) in under_each_kind(fixtures, kinds) {
        let got = (
            kstatus(&obj),
            test_harness::gitops::argocd_health_with(
                test_harness::gitops::Sandbox::ArgoCmDefault,
                &script,
                &obj,
            ),
        );
        let want = (
            (
                Status::parse(annotation(&obj, "kstatus")).expect("kstatus value"),
                annotation(&obj, "kstatus-message").to_string(),
            ),
            (
                annotation(&obj, "argocd-health").to_string(),
                annotation(&obj, "argocd-message").to_string(),
            ),
        );
        if got != want {
            failures.push(format!("{name}: got {got:?}, want {want:?}"));
        }
        if let Some(reason) = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .and_then(|c| c["reason"].as_str())
        {
            covered.insert(reason.to_string());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for r in CONNECTION_ALL {
        assert!(
            covered.contains(r.reason),
            "no flux/fixtures/connection fixture for reason {}",
            r.reason
        );
    }
}
