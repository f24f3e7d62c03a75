//! The checked-in CRD YAML (`crds/` and the CRD chart's templates,
//! `charts/temporal-worker-controller-crds/templates/`) must equal what the binary generates, so
//! users install exactly the schema the controller was built with; so must the Argo CD copies of
//! the Lua health scripts (`argocd/resource_customizations/temporal.io/*/health.lua` and
//! `argocd/argocd-cm.yaml`, generated from `lua/*.lua` by `luagen`). Regenerate every copy with
//! `UPDATE_CRDS=1 cargo test --test crds` (`cargo run -- crds` prints the CRDs).

use std::path::Path;

#[test]
fn checked_in_crds_match_generated() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let update = std::env::var_os("UPDATE_CRDS").is_some();
    let outputs = temporal_worker_controller::generate::crds::outputs();
    let dirs = [
        temporal_worker_controller::generate::crds::CRDS_DIR,
        temporal_worker_controller::generate::crds::CHART_TEMPLATES_DIR,
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

/// `lua/*.lua` is the one source of the health scripts: every copy Argo CD reads is generated.
/// A hand edit to a copy fails here with the command that rewrites it from `lua/`.
#[test]
fn argocd_lua_copies_match_lua_sources() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let update = std::env::var_os("UPDATE_CRDS").is_some();
    let mut stale = Vec::new();
    for (rel, text) in temporal_worker_controller::generate::lua::outputs() {
        let path = root.join(&rel);
        if update {
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, &text).expect("write a Lua copy");
            continue;
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != text {
            stale.push(rel);
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from lua/*.lua (the source; edit it, not the copies); run `{}`",
        temporal_worker_controller::generate::lua::REGENERATE
    );
}

/// Helm renders the CRD chart's templates as Go templates: a `{{` in a description would be
/// read as an action (or fail the render), so no generated CRD may contain one. The chart
/// copies keep their CRDs (and so every object) on `helm uninstall`.
#[test]
fn chart_copies_are_plain_yaml_that_helm_keeps() {
    for (rel, yaml) in temporal_worker_controller::generate::crds::outputs() {
        assert!(!yaml.contains("{{"), "{rel} contains `{{{{`");
        if rel.starts_with(temporal_worker_controller::generate::crds::CHART_TEMPLATES_DIR) {
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
    for (file, yaml) in temporal_worker_controller::generate::crds::files() {
        let crd: serde_json::Value = serde_yaml::from_str(&yaml).expect("parse");
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1", "{file}");
        assert!(
            version["subresources"]["status"].is_object(),
            "{file} lacks status subresource"
        );
        // The Go controller's `Connection` and `ClusterConnection` have no short name; ours
        // match them.
        if ![
            "connections.temporal.io.yaml",
            "clusterconnections.temporal.io.yaml",
        ]
        .contains(&file.as_str())
        {
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
fn the_cluster_connection_is_the_connection_schema_served_cluster_wide() {
    let files = temporal_worker_controller::generate::crds::files();
    let crd = |name: &str| -> serde_json::Value {
        let (_, yaml) = files.iter().find(|(f, _)| f == name).expect(name);
        serde_yaml::from_str(yaml).expect("parse")
    };
    let (cluster, namespaced) = (
        crd("clusterconnections.temporal.io.yaml"),
        crd("connections.temporal.io.yaml"),
    );
    assert_eq!(cluster["spec"]["scope"], "Cluster");
    assert_eq!(cluster["spec"]["names"]["kind"], "ClusterConnection");
    assert_eq!(
        cluster["spec"]["versions"][0]["schema"],
        namespaced["spec"]["versions"][0]["schema"]
    );
    // `connectionRef.kind` names the set's own namespaced kind or the ClusterConnection.
    let kinds = |file: &str| {
        crd(file)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["workerOptions"]["properties"]["connectionRef"]["properties"]["kind"]
            ["enum"]
            .clone()
    };
    assert_eq!(
        kinds("workerdeployments.temporal.io.yaml"),
        serde_json::json!(["Connection", "ClusterConnection"])
    );
    assert_eq!(
        kinds("temporalworkerdeployments.temporal.io.yaml"),
        serde_json::json!(["TemporalConnection", "ClusterConnection"])
    );
}

#[test]
fn twd_name_rules_are_in_the_schema() {
    let files = temporal_worker_controller::generate::crds::files();
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
