//! The checked-in CRD YAML must equal what the binary generates, so users install exactly
//! the schema the controller was built with. Regenerate with:
//! `cargo run -- crds` (or `UPDATE_CRDS=1 cargo test --test crds`).

use std::path::Path;

#[test]
fn checked_in_crds_match_generated() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let update = std::env::var_os("UPDATE_CRDS").is_some();
    let mut stale = Vec::new();
    for (file, yaml) in temporal_worker_controller::crdgen::files() {
        let path = dir.join(&file);
        if update {
            std::fs::write(&path, &yaml).expect("write crd");
            continue;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if on_disk != yaml {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "stale CRD YAML in crds/: {stale:?}; run `UPDATE_CRDS=1 cargo test --test crds`"
    );
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
