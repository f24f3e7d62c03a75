//! The checked-in CRD YAML (`crds/` and the CRD chart's templates,
//! `charts/temporal-worker-controller-crds/templates/`) must equal what the binary generates, so
//! users install exactly the schema the controller was built with. Regenerate every copy with
//! `UPDATE_CRDS=1 cargo test --test crds` (`cargo run -- crds` prints them).

use std::path::Path;

use test_harness::manifests;

#[test]
fn checked_in_crds_match_generated() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let update = std::env::var_os("UPDATE_CRDS").is_some();
    let outputs = temporal_worker_controller::crdgen::outputs();
    let dirs = [
        temporal_worker_controller::crdgen::CRDS_DIR,
        temporal_worker_controller::crdgen::CHART_TEMPLATES_DIR,
    ];
    let mut stale = Vec::new();
    // A file the generator no longer makes (a CRD renamed or dropped) is stale too.
    for dir in dirs {
        for entry in std::fs::read_dir(root.join(dir)).expect("list a CRD dir") {
            let name = entry.expect("dir entry").file_name();
            let rel = format!("{dir}/{}", name.to_string_lossy());
            if rel.ends_with(".yaml") && !outputs.iter().any(|(p, _)| *p == rel) {
                if update {
                    std::fs::remove_file(root.join(&rel)).expect("remove a stale CRD");
                } else {
                    stale.push(rel);
                }
            }
        }
    }
    for (rel, yaml) in &outputs {
        let path = root.join(rel);
        if update {
            std::fs::write(&path, yaml).expect("write crd");
            continue;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if on_disk != *yaml {
            stale.push(rel.clone());
        }
    }
    assert!(
        stale.is_empty(),
        "stale CRD YAML: {stale:?}; run `UPDATE_CRDS=1 cargo test --test crds`"
    );
}

/// Helm renders the CRD chart's templates as Go templates: a `{{` in a description would be
/// read as an action (or fail the render), so no generated CRD may contain one. The chart
/// copies keep their CRDs (and so every object) on `helm uninstall`.
#[test]
fn chart_copies_are_plain_yaml_that_helm_keeps() {
    for (rel, yaml) in temporal_worker_controller::crdgen::outputs() {
        assert!(!yaml.contains("{{"), "{rel} contains `{{{{`");
        if rel.starts_with(temporal_worker_controller::crdgen::CHART_TEMPLATES_DIR) {
            let crd: serde_json::Value = serde_yaml::from_str(&yaml).expect("parse");
            assert_eq!(
                crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
                "{rel}"
            );
        }
    }
}

#[test]
fn crds_declare_status_subresource_and_short_names() {
    for (file, yaml) in temporal_worker_controller::crdgen::files() {
        let crd: serde_json::Value = serde_yaml::from_str(&yaml).expect("parse");
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1", "{file}");
        assert!(
            version["subresources"]["status"].is_object(),
            "{file} lacks status subresource"
        );
        // The Go controller's `Connection` has no short name; ours matches it.
        if file != "connections.temporal.io.yaml" {
            assert!(
                crd["spec"]["names"]["shortNames"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty()),
                "{file}"
            );
        }
    }
}

#[test]
fn twd_name_rules_are_in_the_schema() {
    let files = temporal_worker_controller::crdgen::files();
    let (_, yaml) = files
        .iter()
        .find(|(f, _)| f.starts_with("temporalworkerdeployments"))
        .expect("twd crd");
    assert!(
        yaml.contains("!self.metadata.name.contains('.')")
            || yaml.contains("!self.metadata.name.contains(''.'')")
    );
    assert!(yaml.contains("self.metadata.name.size() <= 63"));
}

/// kube-apiserver accepts every CRD: its schema is structural and every CEL rule compiles
/// against it. A rule naming a field the API server hides from CEL (schema-less JSON such as
/// the gate's `input`) fails here, not in a user's cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_api_server_accepts_every_crd() {
    test_harness::control_plane::shared_with_crds()
        .await
        .expect("kube-apiserver refused a CRD");
}

/// TWDs in `default` on the shared control plane, and dry-run create parameters.
async fn twd_api() -> (kube::Api<kube::api::DynamicObject>, kube::api::PostParams) {
    let (_, client) = test_harness::control_plane::shared_with_crds()
        .await
        .expect("kube-apiserver refused a CRD");
    let api = kube::Api::namespaced_with(
        client,
        "default",
        &test_harness::world::api_resource("TemporalWorkerDeployment"),
    );
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    (api, dry_run)
}

/// `spec.replicas: 0` would scale the Current version to zero while Temporal keeps routing new
/// workflows to it, so kube-apiserver refuses it with a message that says why and what to do
/// instead. One replica, and no replicas field at all (an autoscaler owns them), are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_api_server_refuses_zero_replicas() {
    use kube::api::DynamicObject;

    let (api, dry_run) = twd_api().await;
    let twd = |replicas: Option<i32>| -> DynamicObject {
        let twd = manifests::twd("replicas-check")
            .image("orders:v1")
            .rollout(serde_json::json!({"strategy": "AllAtOnce"}))
            .connection("prod");
        let twd = match replicas {
            Some(r) => twd.replicas(r.into()),
            None => twd,
        };
        serde_json::from_value(twd.build()).expect("a TWD")
    };
    match api.create(&dry_run, &twd(Some(0))).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(
                status.message.contains("spec.replicas")
                    && status
                        .message
                        .contains("Temporal keeps routing new workflows")
                    && status.message.contains("leave spec.replicas unset"),
                "{}",
                status.message
            );
        }
        other => panic!("replicas: 0 was not refused: {other:?}"),
    }
    for ok in [Some(1), None] {
        api.create(&dry_run, &twd(ok))
            .await
            .unwrap_or_else(|e| panic!("replicas {ok:?} refused: {e}"));
    }
}

/// Pausing or aborting a Manual rollout means nothing (the controller routes nothing there), so
/// kube-apiserver refuses it and says what to do instead; a Progressive one is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_api_server_refuses_pause_and_abort_on_manual() {
    use kube::api::DynamicObject;

    let (api, dry_run) = twd_api().await;
    let twd = |rollout: serde_json::Value| -> DynamicObject {
        let twd = manifests::twd("control-check")
            .image("orders:v1")
            .rollout(rollout)
            .connection("prod");
        serde_json::from_value(twd.build()).expect("a TWD")
    };
    for field in ["paused", "abort"] {
        let manual = twd(serde_json::json!({"strategy": "Manual", (field): true}));
        match api.create(&dry_run, &manual).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{status:?}");
                assert!(
                    status.message.contains("Manual strategy"),
                    "{}",
                    status.message
                );
            }
            other => panic!("Manual with {field} was not refused: {other:?}"),
        }
        let progressive = twd(serde_json::json!({
            "strategy": "Progressive",
            "steps": [{"rampPercentage": 10, "pauseDuration": "1m"}],
            (field): true,
        }));
        api.create(&dry_run, &progressive)
            .await
            .unwrap_or_else(|e| panic!("Progressive with {field} refused: {e}"));
    }
}

/// The controller refuses `spec.replicas: 0` too (an object stored before the CEL rule keeps its
/// 0 through CEL ratcheting), with the same message as admission.
#[test]
fn zero_replicas_are_refused_by_the_controller_with_the_admission_message() {
    use temporal_worker_controller::api::TemporalWorkerDeployment;
    use temporal_worker_controller::reconcile::validate::{self, REPLICAS_ZERO};

    let files = temporal_worker_controller::crdgen::files();
    let (_, yaml) = files
        .iter()
        .find(|(f, _)| f.starts_with("temporalworkerdeployments"))
        .expect("twd crd");
    let crd: serde_json::Value = serde_yaml::from_str(yaml).expect("crd yaml");
    let rules = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["replicas"]["x-kubernetes-validations"];
    assert_eq!(rules[0]["rule"], "self >= 1", "{rules}");
    assert_eq!(rules[0]["message"], REPLICAS_ZERO, "{rules}");

    let twd = |replicas: i32| -> TemporalWorkerDeployment {
        let twd = manifests::twd("orders")
            .namespace("shop")
            .replicas(replicas.into())
            .image("orders:v1")
            .rollout(serde_json::json!({"strategy": "AllAtOnce"}))
            .connection("prod");
        serde_json::from_value(twd.build()).expect("a TWD")
    };
    let settings = validate::ControllerSettings::default();
    let refused = validate::desired(&twd(0), &settings).expect_err("replicas 0 accepted");
    assert_eq!(refused.message, REPLICAS_ZERO);
    assert_eq!(
        validate::desired(&twd(1), &settings).map(|d| d.replicas),
        Ok(Some(1))
    );
}
