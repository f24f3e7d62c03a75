//! A restarted version's pod template through the other in-place updates.

use std::collections::BTreeMap;

use super::*;
use crate::api::ANNOTATION_RESTART;

fn conn() -> TemporalConnectionSpec {
    super::tests::plain()
}

fn restarted(twd: &TemporalWorkerDeployment, build: &str) -> Deployment {
    let mut d = versioned_deployment(&VersionedDeploymentInput {
        twd,
        connection: &conn(),
        build_id: build,
        replicas: Some(2),
        connection_ref: None,
    })
    .expect("renders");
    d.spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANNOTATION_RESTART.into(), format!("{build}/2"));
    d
}

fn restart_of(d: &Deployment) -> Option<&str> {
    d.spec
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(ANNOTATION_RESTART)
        .map(String::as_str)
}

#[test]
fn a_refresh_keeps_the_restart_the_pods_carry_and_the_build_id() {
    let old = TemporalWorkerDeployment::test()
        .image("orders:v1")
        .custom_build_id("release-7");
    let existing = restarted(&old, "release-7");
    // Pod-template drift under the custom build ID: a fresh template from the new spec.
    let new = TemporalWorkerDeployment::test()
        .image("orders:v2")
        .custom_build_id("release-7");
    let input = VersionedDeploymentInput {
        twd: &new,
        connection: &conn(),
        build_id: "release-7",
        replicas: None,
        connection_ref: None,
    };
    let out = refresh_template(&existing, &input).expect("renders");
    assert_eq!(restart_of(&out), Some("release-7/2"));
    assert_eq!(
        out.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_BUILD_ID)),
        Some(&"release-7".to_string())
    );
    // The restart is outside the user's template: the drift hash the Deployment carries is
    // still the spec's, so a restarted version reads as up to date.
    let carried = existing
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_POD_TEMPLATE_HASH));
    assert_eq!(
        carried,
        Some(&build_id::pod_template_hash(&old.spec.template))
    );
    let settings = refresh_settings(&existing, &input).expect("renders");
    assert_eq!(restart_of(&settings), Some("release-7/2"));
    // An older version keeps its own template, restart included.
    let v1 = TemporalWorkerDeployment::test().image("orders:v1");
    let build = build_id::compute(&v1.spec.template, None).expect("build ID");
    let existing = restarted(&v1, &build);
    let input = VersionedDeploymentInput {
        twd: &new,
        connection: &conn(),
        build_id: &build,
        replicas: None,
        connection_ref: None,
    };
    let out = refresh_template(&existing, &input).expect("renders");
    assert_eq!(restart_of(&out), Some(format!("{build}/2").as_str()));
}
