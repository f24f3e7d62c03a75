use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec, VolumeMount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

use super::*;
use crate::api::connection::{SecretKeyRef, SecretRef, TlsOptions};
use crate::api::{
    ENV_ADDRESS, ENV_API_KEY, ENV_BUILD_ID, ENV_DEPLOYMENT_NAME, ENV_TLS, ENV_TLS_CLIENT_CERT_PATH,
    ENV_TLS_CLIENT_KEY_PATH, ENV_TLS_SERVER_NAME, TLS_MOUNT_PATH, TLS_VOLUME,
};

/// The shared fixture with a full pod template and `minReadySeconds: 7`.
fn twd() -> TemporalWorkerDeployment {
    TemporalWorkerDeployment::test()
        .full_pod()
        .min_ready_seconds(7)
}

pub(super) fn plain() -> TemporalConnectionSpec {
    TemporalConnectionSpec {
        host_port: "temporal.shop:7233".into(),
        tls: None,
        mutual_tls_secret_ref: None,
        api_key_secret_ref: None,
        worker_credentials: None,
    }
}

fn mtls() -> TemporalConnectionSpec {
    TemporalConnectionSpec {
        mutual_tls_secret_ref: Some(SecretRef {
            name: "client-cert".into(),
        }),
        tls: Some(TlsOptions {
            server_name: Some("frontend.example".into()),
            ..Default::default()
        }),
        ..plain()
    }
}

fn api_key() -> TemporalConnectionSpec {
    TemporalConnectionSpec {
        host_port: "cloud.example:7233".into(),
        api_key_secret_ref: Some(SecretKeyRef {
            name: "api".into(),
            key: "token".into(),
        }),
        ..plain()
    }
}

fn build_of(twd: &TemporalWorkerDeployment) -> String {
    build_id::compute(
        &twd.spec.template,
        twd.spec.worker_options.custom_build_id.as_deref(),
    )
    .unwrap()
}

fn render(
    twd: &TemporalWorkerDeployment,
    conn: &TemporalConnectionSpec,
    replicas: Option<i32>,
) -> Deployment {
    let build = build_of(twd);
    versioned_deployment(&VersionedDeploymentInput {
        connection_ref: None,
        twd,
        connection: conn,
        build_id: &build,
        replicas,
    })
    .unwrap()
}

fn pod(d: &Deployment) -> &PodTemplateSpec {
    &d.spec.template
}

fn pod_spec(d: &Deployment) -> &PodSpec {
    pod(d).spec.as_ref().unwrap()
}

fn env_names(c: &Container) -> Vec<&str> {
    c.env.iter().flatten().map(|e| e.name.as_str()).collect()
}

fn env_value<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    c.env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.as_deref())
}

fn pod_annotation<'a>(d: &'a Deployment, key: &str) -> Option<&'a str> {
    pod(d)
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Nothing left over from any auth mode other than `conn`'s.
fn assert_only_injection_for(d: &Deployment, conn: &TemporalConnectionSpec) {
    let spec = pod_spec(d);
    let is_mtls = conn.mutual_tls_secret_ref.is_some();
    let tls_volumes = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.name == TLS_VOLUME)
        .count();
    assert_eq!(tls_volumes, usize::from(is_mtls));
    for c in &spec.containers {
        let mounts = c
            .volume_mounts
            .iter()
            .flatten()
            .filter(|m| m.name == TLS_VOLUME)
            .count();
        assert_eq!(mounts, usize::from(is_mtls), "container {}", c.name);
        let names = env_names(c);
        for reserved in crate::api::RESERVED_ENV {
            assert!(
                names.iter().filter(|n| *n == reserved).count() <= 1,
                "{reserved} twice"
            );
        }
        assert_eq!(names.contains(&ENV_TLS_CLIENT_CERT_PATH), is_mtls);
        assert_eq!(names.contains(&ENV_TLS_CLIENT_KEY_PATH), is_mtls);
        assert_eq!(
            names.contains(&ENV_API_KEY),
            conn.api_key_secret_ref.is_some()
        );
        assert_eq!(
            names.contains(&ENV_TLS_SERVER_NAME),
            conn.server_name().is_some()
        );
        assert_eq!(env_value(c, ENV_ADDRESS), Some(conn.host_port.as_str()));
    }
    assert_eq!(
        pod_annotation(d, ANNOTATION_CONNECTION_HASH),
        Some(build_id::connection_hash(conn).as_str())
    );
}

#[test]
fn metadata_labels_selector_and_owner() {
    let twd = twd();
    let build = build_of(&twd);
    let d = render(&twd, &plain(), Some(2));
    assert_eq!(
        d.metadata.name.as_deref(),
        Some(build_id::deployment_name("orders", &build).as_str())
    );
    assert_eq!(d.metadata.namespace.as_deref(), Some("shop"));
    let ours = BTreeMap::from([
        (LABEL_DEPLOYMENT_NAME.to_string(), "orders".to_string()),
        (LABEL_BUILD_ID.to_string(), build.clone()),
    ]);
    assert_eq!(d.metadata.labels.as_ref(), Some(&ours));
    let spec = &d.spec;
    assert_eq!(spec.selector.match_labels.as_ref(), Some(&ours));
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(spec.min_ready_seconds, Some(7));
    let owners = d.metadata.owner_references.as_ref().unwrap();
    assert_eq!(owners.len(), 1);
    let o = &owners[0];
    assert_eq!(o.api_version, "temporal.io/v1alpha1");
    assert_eq!(o.kind, "TemporalWorkerDeployment");
    assert_eq!((o.name.as_str(), o.uid.as_str()), ("orders", "uid-123"));
    assert_eq!(
        (o.controller, o.block_owner_deletion),
        (Some(true), Some(true))
    );
    // Pod labels: user's kept, ours override, and the selector matches the pods.
    let labels = pod(&d).metadata.as_ref().unwrap().labels.as_ref().unwrap();
    assert_eq!(labels.get("app").map(String::as_str), Some("worker"));
    assert_eq!(labels.get(LABEL_BUILD_ID), Some(&build));
    assert_eq!(
        labels.get(LABEL_DEPLOYMENT_NAME).map(String::as_str),
        Some("orders")
    );
    // Unset replicas stay unset so an autoscaler can own them.
    assert_eq!(render(&twd, &plain(), None).spec.replicas, None);
}

#[test]
fn annotations_hash_the_user_template_before_injection() {
    let twd = twd();
    let d = render(&twd, &mtls(), None);
    assert_eq!(pod_annotation(&d, "team"), Some("payments"));
    assert_eq!(
        pod_annotation(&d, ANNOTATION_POD_TEMPLATE_HASH),
        Some(build_id::pod_template_hash(&twd.spec.template).as_str())
    );
    assert_ne!(
        pod_annotation(&d, ANNOTATION_POD_TEMPLATE_HASH),
        Some(build_id::pod_template_hash(pod(&d)).as_str())
    );
    assert_eq!(
        pod_annotation(&d, ANNOTATION_CONNECTION_HASH),
        Some(build_id::connection_hash(&mtls()).as_str())
    );
}

#[test]
fn plain_env_in_every_container_first_and_init_untouched() {
    let twd = twd();
    let build = build_of(&twd);
    let d = render(&twd, &plain(), None);
    let spec = pod_spec(&d);
    for c in &spec.containers {
        let names = env_names(c);
        assert_eq!(
            &names[..4],
            &[
                ENV_ADDRESS,
                ENV_NAMESPACE,
                ENV_DEPLOYMENT_NAME,
                ENV_BUILD_ID
            ]
        );
        assert!(!names.contains(&ENV_TLS) && !names.contains(&ENV_TLS_SERVER_NAME));
        assert_eq!(env_value(c, ENV_ADDRESS), Some("temporal.shop:7233"));
        assert_eq!(env_value(c, ENV_NAMESPACE), Some("orders-ns"));
        assert_eq!(env_value(c, ENV_DEPLOYMENT_NAME), Some("shop/orders"));
        assert_eq!(env_value(c, ENV_BUILD_ID), Some(build.as_str()));
    }
    assert_eq!(env_names(&spec.containers[0])[4..], ["LOG_LEVEL"]);
    assert_eq!(env_names(&spec.containers[1]).len(), 4);
    assert_eq!(
        spec.init_containers,
        twd.spec.template.spec.as_ref().unwrap().init_containers
    );
    assert_eq!(
        spec.volumes,
        twd.spec.template.spec.as_ref().unwrap().volumes
    );
    assert_only_injection_for(&d, &plain());
}

#[test]
fn mtls_mounts_the_client_certificate_everywhere() {
    let d = render(&twd(), &mtls(), None);
    let spec = pod_spec(&d);
    let vol = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == TLS_VOLUME)
        .unwrap();
    assert_eq!(
        vol.secret.as_ref().unwrap().secret_name.as_deref(),
        Some("client-cert")
    );
    assert!(spec.volumes.iter().flatten().any(|v| v.name == "scratch"));
    for c in &spec.containers {
        let m = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == TLS_VOLUME)
            .unwrap();
        assert_eq!(
            (m.mount_path.as_str(), m.read_only),
            (TLS_MOUNT_PATH, Some(true))
        );
        assert_eq!(env_value(c, ENV_TLS), Some("true"));
        assert_eq!(env_value(c, ENV_TLS_SERVER_NAME), Some("frontend.example"));
        assert_eq!(
            env_value(c, ENV_TLS_CLIENT_CERT_PATH),
            Some("/etc/temporal/tls/tls.crt")
        );
        assert_eq!(
            env_value(c, ENV_TLS_CLIENT_KEY_PATH),
            Some("/etc/temporal/tls/tls.key")
        );
    }
    let init = &spec.init_containers.as_ref().unwrap()[0];
    assert!(init.volume_mounts.is_none());
    assert_only_injection_for(&d, &mtls());
}

#[test]
fn api_key_comes_from_the_secret_and_enables_tls() {
    let d = render(&twd(), &api_key(), None);
    for c in &pod_spec(&d).containers {
        assert_eq!(env_value(c, ENV_TLS), Some("true"));
        let key = c
            .env
            .iter()
            .flatten()
            .find(|e| e.name == ENV_API_KEY)
            .unwrap();
        assert_eq!(key.value, None);
        let r = key
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!((r.name.as_str(), r.key.as_str()), ("api", "token"));
    }
    assert_only_injection_for(&d, &api_key());
}

#[test]
fn server_name_alone_means_tls() {
    let conn = TemporalConnectionSpec {
        tls: Some(TlsOptions {
            server_name: Some("sni.example".into()),
            ..Default::default()
        }),
        ..plain()
    };
    let d = render(&twd(), &conn, None);
    let c = &pod_spec(&d).containers[0];
    assert_eq!(env_value(c, ENV_TLS), Some("true"));
    assert_eq!(env_value(c, ENV_TLS_SERVER_NAME), Some("sni.example"));
    assert_only_injection_for(&d, &conn);
}

#[test]
fn rendering_is_deterministic() {
    let twd = twd();
    assert_eq!(
        render(&twd, &mtls(), Some(1)),
        render(&twd, &mtls(), Some(1))
    );
}

#[test]
fn refuses_incomplete_input() {
    let conn = plain();
    let check = |twd: &TemporalWorkerDeployment, build: &str, want: RenderError| {
        let input = VersionedDeploymentInput {
            connection_ref: None,
            twd,
            connection: &conn,
            build_id: build,
            replicas: None,
        };
        assert_eq!(versioned_deployment(&input), Err(want.clone()));
        let existing = render(&self::twd(), &conn, None);
        assert_eq!(refresh_template(&existing, &input).map(|_| ()), Err(want));
    };
    let mut t = twd();
    t.metadata.namespace = None;
    check(&t, "v1", RenderError::MissingMetadata("namespace"));
    let mut t = twd();
    t.metadata.uid = Some(String::new());
    check(&t, "v1", RenderError::MissingMetadata("uid"));
    let mut t = twd();
    t.metadata.name = None;
    check(&t, "v1", RenderError::MissingMetadata("name"));
    for bad in ["", "-v1", "v 1", &"x".repeat(64)] {
        check(&twd(), bad, RenderError::InvalidBuildId(bad.to_string()));
    }
    let mut t = twd();
    t.spec.template.spec = None;
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: &t,
        connection: &conn,
        build_id: "v1",
        replicas: None,
    };
    assert_eq!(
        versioned_deployment(&input),
        Err(RenderError::MissingPodSpec)
    );
}

/// What the API server returns: the rendered object plus server-set fields.
fn as_stored(mut d: Deployment, replicas: i32) -> Deployment {
    d.metadata.resource_version = Some("42".into());
    d.metadata.uid = Some("dep-uid".into());
    d.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
    {
        let spec = &mut d.spec;
        spec.replicas = Some(replicas);
        spec.revision_history_limit = Some(10);
    }
    d.status = Some(Default::default());
    d
}

#[test]
fn refresh_of_target_rebuilds_template_under_custom_build_id() {
    let old = twd().image("orders:v1").custom_build_id("release-7");
    let existing = as_stored(render(&old, &plain(), Some(3)), 5);
    let mut new = twd().image("orders:v2").custom_build_id("release-7");
    new.spec.min_ready_seconds = Some(30);
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: &new,
        connection: &plain(),
        build_id: "release-7",
        replicas: None,
    };
    let out = refresh_template(&existing, &input).unwrap();
    assert_eq!(out.metadata.name, existing.metadata.name);
    assert_eq!(out.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(out.metadata.managed_fields, None);
    assert_eq!(out.status, None);
    let spec = &out.spec;
    let old_spec = &existing.spec;
    assert_eq!(spec.selector, old_spec.selector);
    assert_eq!(
        spec.replicas,
        Some(5),
        "replicas kept when not asked to change"
    );
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(spec.min_ready_seconds, Some(30));
    assert_eq!(
        pod_spec(&out).containers[0].image.as_deref(),
        Some("orders:v2")
    );
    assert_eq!(
        pod_annotation(&out, ANNOTATION_POD_TEMPLATE_HASH),
        Some(build_id::pod_template_hash(&new.spec.template).as_str())
    );
    // Identical to a fresh render of the new spec, so the next reconcile sees no drift.
    assert_eq!(pod(&out), pod(&render(&new, &plain(), None)));

    let scaled = refresh_template(
        &existing,
        &VersionedDeploymentInput {
            connection_ref: None,
            replicas: Some(1),
            ..input
        },
    );
    assert_eq!(scaled.unwrap().spec.replicas, Some(1));
}

#[test]
fn refresh_is_idempotent() {
    let twd = twd();
    let build = build_of(&twd);
    for conn in [plain(), mtls(), api_key()] {
        let fresh = render(&twd, &conn, None);
        let input = VersionedDeploymentInput {
            connection_ref: None,
            twd: &twd,
            connection: &conn,
            build_id: &build,
            replicas: None,
        };
        let once = refresh_template(&fresh, &input).unwrap();
        assert_eq!(pod(&once), pod(&fresh));
        assert_eq!(refresh_template(&once, &input).unwrap(), once);
    }
}

#[test]
fn auth_switches_leave_nothing_stale() {
    let twd = twd();
    let build = build_of(&twd);
    let sequence = [
        mtls(),
        api_key(),
        plain(),
        mtls(),
        plain(),
        api_key(),
        mtls(),
    ];
    for target in [true, false] {
        // `false`: the same Deployment but as an older version that keeps its own template.
        let mut current = if target {
            render(&twd, &sequence[0], Some(2))
        } else {
            render(&self::twd().image("orders:v0"), &sequence[0], Some(2))
        };
        let build_id = if target {
            build.clone()
        } else {
            build_of(&self::twd().image("orders:v0"))
        };
        for conn in &sequence[1..] {
            let input = VersionedDeploymentInput {
                connection_ref: None,
                twd: &twd,
                connection: conn,
                build_id: &build_id,
                replicas: None,
            };
            current = refresh_template(&current, &input).unwrap();
            assert_only_injection_for(&current, conn);
            let spec = pod_spec(&current);
            assert!(
                spec.volumes.iter().flatten().any(|v| v.name == "scratch"),
                "user volume kept"
            );
            assert_eq!(env_names(&spec.containers[0]).last(), Some(&"LOG_LEVEL"));
            assert_eq!(
                env_value(&spec.containers[0], ENV_BUILD_ID),
                Some(build_id.as_str())
            );
        }
        // Back to the first mode: byte-for-byte what a fresh render gives.
        let fresh_twd = if target {
            twd.clone()
        } else {
            self::twd().image("orders:v0")
        };
        assert_eq!(
            pod(&current),
            pod(&render(&fresh_twd, sequence.last().unwrap(), None))
        );
    }
}

#[test]
fn refresh_of_older_version_keeps_its_code() {
    let old = twd().image("orders:v1");
    let old_build = build_of(&old);
    let existing = as_stored(render(&old, &plain(), Some(1)), 1);
    let mut new = twd().image("orders:v2");
    new.spec.worker_options.temporal_namespace = "elsewhere".into();
    let conn = mtls();
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: &new,
        connection: &conn,
        build_id: &old_build,
        replicas: None,
    };
    let out = refresh_template(&existing, &input).unwrap();
    let c = &pod_spec(&out).containers[0];
    assert_eq!(c.image.as_deref(), Some("orders:v1"));
    assert_eq!(
        env_value(c, ENV_NAMESPACE),
        Some("orders-ns"),
        "old workers stay in their namespace"
    );
    assert_eq!(env_value(c, ENV_BUILD_ID), Some(old_build.as_str()));
    assert_eq!(
        pod_annotation(&out, ANNOTATION_POD_TEMPLATE_HASH),
        Some(build_id::pod_template_hash(&old.spec.template).as_str()),
        "the template hash still describes the old version's template"
    );
    assert_only_injection_for(&out, &conn);
    assert_eq!(out.spec.replicas, Some(1));
}

#[test]
fn the_connection_record_names_the_connection_the_settings_come_from() {
    let old = twd().image("orders:v1");
    let old_build = build_of(&old);
    let d = render(&old, &plain(), Some(1));
    let spec_record = connection_record(&old);
    assert!(spec_record.ends_with("Connection/prod"), "{spec_record}");
    assert_eq!(
        pod_annotation(&d, ANNOTATION_CONNECTION_REF),
        Some(spec_record.as_str())
    );
    // An old version re-rendered with the Connection it keeps records that one, not the
    // spec's (which names another by now).
    let existing = as_stored(d, 1);
    let mut new = twd().image("orders:v2");
    new.spec.worker_options.connection_ref.name = "moved".into();
    let conn = mtls();
    let input = VersionedDeploymentInput {
        connection_ref: Some(spec_record.as_str()),
        twd: &new,
        connection: &conn,
        build_id: &old_build,
        replicas: None,
    };
    let out = refresh_template(&existing, &input).unwrap();
    assert_eq!(
        pod_annotation(&out, ANNOTATION_CONNECTION_REF),
        Some(spec_record.as_str())
    );
    assert_only_injection_for(&out, &conn);
    // Rendered with the spec's Connection: the spec's record.
    let input = VersionedDeploymentInput {
        connection_ref: None,
        ..input
    };
    let out = refresh_template(&existing, &input).unwrap();
    let moved = connection_record(&new);
    assert!(moved.ends_with("Connection/moved"), "{moved}");
    assert_eq!(
        pod_annotation(&out, ANNOTATION_CONNECTION_REF),
        Some(moved.as_str())
    );
}

#[test]
fn refresh_refuses_a_different_build() {
    let twd = twd();
    let existing = render(&twd, &plain(), None);
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: &twd,
        connection: &plain(),
        build_id: "other",
        replicas: None,
    };
    assert!(matches!(
        refresh_template(&existing, &input),
        Err(RenderError::BuildIdMismatch { requested, .. }) if requested == "other"
    ));
}

#[test]
fn stale_injections_in_user_template_are_replaced_not_duplicated() {
    // Validation rejects this, but rendering must still never emit duplicates.
    let mut twd = twd();
    if let Some(spec) = twd.spec.template.spec.as_mut() {
        spec.containers[0]
            .env
            .get_or_insert_with(Vec::new)
            .push(EnvVar {
                name: ENV_ADDRESS.into(),
                value: Some("wrong:1".into()),
                value_from: None,
            });
        spec.containers[0].volume_mounts = Some(vec![VolumeMount {
            name: TLS_VOLUME.into(),
            mount_path: "/x".into(),
            ..Default::default()
        }]);
    }
    let d = render(&twd, &plain(), None);
    assert_only_injection_for(&d, &plain());
}

#[test]
fn label_value_is_label_safe() {
    assert_eq!(label_value("orders"), "orders");
    assert_eq!(label_value(&"a".repeat(70)), "a".repeat(63));
    assert_eq!(label_value("-x-"), "x");
    assert!(build_id::is_label_safe(&label_value("weird name!")));
}

fn assert_keeps_old_pods_until_new_ones_are_ready(d: &Deployment) {
    let strategy = d.spec.strategy.as_ref();
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    assert_eq!(
        strategy.and_then(|s| s.type_.as_deref()),
        Some("RollingUpdate"),
        "{strategy:?}"
    );
    assert_eq!(
        rolling.and_then(|r| r.max_unavailable.clone()),
        Some(IntOrString::Int(0)),
        "{strategy:?}"
    );
    assert_eq!(
        rolling.and_then(|r| r.max_surge.clone()),
        Some(IntOrString::Int(1)),
        "{strategy:?}"
    );
}

/// A connection change re-renders every live version, Current and Draining included:
/// each must keep its old pods until the new ones are Ready.
#[test]
fn versioned_deployments_roll_without_losing_ready_workers() {
    let twd = TemporalWorkerDeployment::test();
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: &twd,
        connection: &plain(),
        build_id: "v1-abc",
        replicas: Some(2),
    };
    let created = versioned_deployment(&input).unwrap();
    assert_keeps_old_pods_until_new_ones_are_ready(&created);

    // A Deployment made before this rule (or edited by someone) gets it back on refresh.
    let mut old = created.clone();
    {
        let spec = &mut old.spec;
        spec.strategy = None;
    }
    let refreshed = refresh_template(&old, &input).unwrap();
    assert_keeps_old_pods_until_new_ones_are_ready(&refreshed);
}

/// A roll whose new Pods never become Ready must end in Kubernetes' own verdict
/// (`ProgressDeadlineExceeded`) after a bounded time that `minReadySeconds` cannot eat.
#[test]
fn versioned_deployments_set_a_progress_deadline_beyond_min_ready_seconds() {
    let deadline = |d: &Deployment| d.spec.progress_deadline_seconds;
    for (min_ready, want) in [(None, 600), (Some(30), 630)] {
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.min_ready_seconds = min_ready;
        let input = VersionedDeploymentInput {
            connection_ref: None,
            twd: &twd,
            connection: &plain(),
            build_id: "v1-abc",
            replicas: Some(2),
        };
        let created = versioned_deployment(&input).unwrap();
        assert_eq!(
            deadline(&created),
            Some(want),
            "created, minReady {min_ready:?}"
        );
        let mut old = created.clone();
        {
            let spec = &mut old.spec;
            spec.progress_deadline_seconds = None;
        }
        let refreshed = refresh_template(&old, &input).unwrap();
        assert_eq!(
            deadline(&refreshed),
            Some(want),
            "refreshed, minReady {min_ready:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// `spec.deployment` passthrough (`settings.rs`)

fn with_settings(labels: &[(&str, &str)], surge: Option<IntOrString>) -> TemporalWorkerDeployment {
    use crate::api::twd::{DeploymentMetadata, DeploymentSettings, StrategySettings};
    let mut t = twd();
    t.spec.deployment_metadata = Some(DeploymentMetadata {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        annotations: BTreeMap::from([("owner".to_string(), "payments".to_string())]),
    });
    t.spec.deployment = surge.map(|s| DeploymentSettings {
        strategy: Some(StrategySettings {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(crate::api::twd::RollingUpdateSettings {
                max_surge: Some(s),
                max_unavailable: None,
            }),
        }),
        ..Default::default()
    });
    t
}

/// The same settings in the shape before `DeploymentSpec` positions (deprecated aliases).
fn with_old_settings(
    labels: &[(&str, &str)],
    surge: Option<IntOrString>,
) -> TemporalWorkerDeployment {
    let mut t = twd();
    t.spec.deployment = Some(crate::api::twd::DeploymentSettings {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        annotations: BTreeMap::from([("owner".to_string(), "payments".to_string())]),
        rolling_update: surge.map(|s| crate::api::twd::RollingUpdateSettings {
            max_surge: Some(s),
            max_unavailable: None,
        }),
        ..Default::default()
    });
    t
}

#[test]
fn the_deprecated_shape_renders_the_same_deployment_and_is_named() {
    let surge = || Some(IntOrString::String("50%".into()));
    let new = with_settings(&[("team", "payments")], surge());
    let old = with_old_settings(&[("team", "payments")], surge());
    assert_eq!(
        render(&old, &plain(), Some(2)),
        render(&new, &plain(), Some(2))
    );
    assert_eq!(settings::record(&old.spec), settings::record(&new.spec));
    assert!(settings::deprecated_aliases(&new.spec).is_empty());
    assert_eq!(settings::deprecation_note(&new.spec), None);
    assert_eq!(
        settings::deprecated_aliases(&old.spec),
        vec![
            ("spec.deployment.labels", "spec.deploymentMetadata.labels"),
            (
                "spec.deployment.annotations",
                "spec.deploymentMetadata.annotations"
            ),
            (
                "spec.deployment.rollingUpdate",
                "spec.deployment.strategy.rollingUpdate"
            ),
        ]
    );
    let note = settings::deprecation_note(&old.spec).expect("a note");
    assert!(
        note.contains("move spec.deployment.labels to spec.deploymentMetadata.labels"),
        "{note}"
    );
    // A record an earlier release wrote (the old field names) reads as the same settings.
    let earlier = r#"{"labels":{"team":"payments"},"annotations":{"owner":"payments"},"rollingUpdate":{"maxSurge":"50%"}}"#;
    assert_eq!(settings::record(&new.spec).as_deref(), Some(earlier));
}

#[test]
fn revision_history_limit_lands_and_goes_back_to_the_default() {
    let mut t = twd();
    t.spec.deployment = Some(crate::api::twd::DeploymentSettings {
        revision_history_limit: Some(3),
        ..Default::default()
    });
    let d = render(&t, &plain(), Some(2));
    assert_eq!(d.spec.revision_history_limit, Some(3));
    let stored = as_stored(d, 2);
    assert_eq!(stored.spec.revision_history_limit, Some(10));
    let build = build_of(&t);
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: &t,
        connection: &plain(),
        build_id: &build,
        replicas: None,
    };
    let again = refresh_settings(&stored, &input).unwrap();
    assert_eq!(again.spec.revision_history_limit, Some(3));
    // Removed from the spec: handed back to the API server's default.
    let mut without = t.clone();
    without.spec.deployment = None;
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: &without,
        ..input
    };
    let cleared = refresh_settings(&again, &input).unwrap();
    assert_eq!(cleared.spec.revision_history_limit, None);
    // Never recorded, never touched (a Deployment taken over keeps its own).
    let unrecorded = as_stored(render(&without, &plain(), Some(2)), 2);
    let untouched = refresh_settings(&unrecorded, &input).unwrap();
    assert_eq!(untouched.spec.revision_history_limit, Some(10));
}

#[test]
fn deploymentspec_fields_must_agree_with_the_top_level_and_take_only_rolling_update() {
    use crate::api::twd::{DeploymentMetadata, DeploymentSettings, StrategySettings};
    let mut t = twd();
    t.spec.progress_deadline_seconds = Some(600);
    t.spec.min_ready_seconds = Some(5);
    t.spec.deployment = Some(DeploymentSettings {
        progress_deadline_seconds: Some(600),
        min_ready_seconds: Some(5),
        ..Default::default()
    });
    assert_eq!(settings::problems(&t.spec), vec![]);
    let d = t.spec.deployment.as_mut().unwrap();
    d.progress_deadline_seconds = Some(300);
    d.min_ready_seconds = Some(0);
    d.strategy = Some(StrategySettings {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
    let paths: Vec<String> = settings::problems(&t.spec)
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(
        paths,
        vec![
            "spec.deployment.strategy.type",
            "spec.deployment.progressDeadlineSeconds",
            "spec.deployment.minReadySeconds"
        ]
    );
    // Only at spec.deployment: that is the deadline and the minimum.
    let mut only = twd();
    only.spec.deployment = Some(DeploymentSettings {
        progress_deadline_seconds: Some(45),
        min_ready_seconds: Some(7),
        ..Default::default()
    });
    assert_eq!(only.spec.progress_deadline(), Some(45));
    assert_eq!(only.spec.min_ready(), Some(7));
    assert_eq!(
        render(&only, &plain(), Some(1)).spec.min_ready_seconds,
        Some(7)
    );
    // Both shapes of the labels at once, and both rolling updates at once.
    let mut both = with_old_settings(&[("team", "a")], Some(IntOrString::Int(1)));
    both.spec.deployment_metadata = Some(DeploymentMetadata::default());
    both.spec.deployment.as_mut().unwrap().strategy = Some(StrategySettings {
        type_: None,
        rolling_update: Some(crate::api::twd::RollingUpdateSettings::default()),
    });
    let paths: Vec<String> = settings::problems(&both.spec)
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(
        paths,
        vec!["spec.deployment.labels", "spec.deployment.rollingUpdate"]
    );
}

#[test]
fn deployment_settings_land_on_the_deployment_not_on_its_pods() {
    let plain_render = render(&twd(), &plain(), Some(2));
    let t = with_settings(
        &[("team", "payments")],
        Some(IntOrString::String("50%".into())),
    );
    let d = render(&t, &plain(), Some(2));
    let labels = d.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("payments"));
    assert_eq!(labels.get(LABEL_BUILD_ID), Some(&build_of(&t)));
    let annotations = d.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("owner").map(String::as_str),
        Some("payments")
    );
    assert_eq!(
        annotations
            .get(settings::ANNOTATION_SETTINGS)
            .map(String::as_str),
        settings::record(&t.spec).as_deref()
    );
    let strategy = d.spec.strategy.clone().unwrap();
    let rolling = strategy.rolling_update.unwrap();
    assert_eq!(rolling.max_surge, Some(IntOrString::String("50%".into())));
    assert_eq!(
        rolling.max_unavailable,
        Some(IntOrString::Int(0)),
        "default kept"
    );
    // The pods, selector and build ID are those of the same spec without settings.
    assert_eq!(pod(&d), pod(&plain_render));
    assert_eq!(d.spec.selector, plain_render.spec.selector);
    assert_eq!(build_of(&t), build_of(&twd()), "not part of the build ID");
    // Without settings nothing is recorded and the default strategy applies.
    assert_eq!(plain_render.metadata.annotations, None);
    assert_eq!(plain_render.spec.strategy.clone(), Some(rollout_strategy()));
}

#[test]
fn a_settings_refresh_replaces_what_it_set_and_leaves_pods_and_others_keys_alone() {
    let before = with_settings(&[("team", "payments"), ("tier", "gold")], None);
    let build = build_of(&before);
    let mut existing = render(&before, &plain(), Some(2));
    // Someone else's label, and a pod template the controller did not render (a take-over).
    existing
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("cost-center".into(), "42".into());
    {
        let s = &mut existing.spec;
        s.template
            .metadata
            .get_or_insert_with(Default::default)
            .annotations = Some(BTreeMap::from([("go".to_string(), "hash".to_string())]));
    }
    let after = with_settings(&[("team", "billing")], Some(IntOrString::Int(3)));
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: &after,
        connection: &plain(),
        build_id: &build,
        replicas: None,
    };
    let d = refresh_settings(&existing, &input).unwrap();
    let labels = d.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("billing"));
    assert_eq!(
        labels.get("tier"),
        None,
        "removed from the spec, removed here"
    );
    assert_eq!(labels.get("cost-center").map(String::as_str), Some("42"));
    assert_eq!(labels.get(LABEL_BUILD_ID), Some(&build));
    assert_eq!(pod(&d), pod(&existing), "no Pod restarts");
    assert_eq!(d.spec.replicas, existing.spec.replicas);
    let rolling = d.spec.strategy.clone().unwrap();
    assert_eq!(
        rolling.rolling_update.and_then(|r| r.max_surge),
        Some(IntOrString::Int(3))
    );
    // Settings removed altogether: their keys and the record go.
    let mut none = after.clone();
    none.spec.deployment = None;
    none.spec.deployment_metadata = None;
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: &none,
        ..input
    };
    let d = refresh_settings(&d, &input).unwrap();
    let labels = d.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("team"), None);
    assert_eq!(labels.get("cost-center").map(String::as_str), Some("42"));
    assert_eq!(
        d.metadata.annotations, None,
        "owner and the record are gone"
    );
}

#[test]
fn reserved_keys_and_rolls_that_could_empty_a_version_are_refused() {
    use crate::api::twd::RollingUpdateSettings;
    let t = with_settings(&[("temporal.io/build-id", "x")], None);
    let p = settings::problems(&t.spec);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(
        p[0].0,
        "spec.deploymentMetadata.labels[temporal.io/build-id]"
    );
    let p = settings::problems(&with_old_settings(&[("temporal.io/build-id", "x")], None).spec);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "spec.deployment.labels[temporal.io/build-id]");
    assert!(p[0].1.contains("reserved"), "{}", p[0].1);
    let mut t = twd();
    t.spec.deployment = Some(crate::api::twd::DeploymentSettings {
        annotations: BTreeMap::from([(
            "deployment.kubernetes.io/revision".to_string(),
            "9".to_string(),
        )]),
        ..Default::default()
    });
    assert_eq!(settings::problems(&t.spec).len(), 1);

    let r = |surge: Option<IntOrString>, unavailable: Option<IntOrString>| RollingUpdateSettings {
        max_surge: surge,
        max_unavailable: unavailable,
    };
    let int = |i| Some(IntOrString::Int(i));
    let pct = |s: &str| Some(IntOrString::String(s.into()));
    let ok = |r: &RollingUpdateSettings, replicas| settings::keeps_one_available(r, replicas);
    // Defaults, and anything that keeps one Pod available at the version's size.
    assert_eq!(ok(&r(None, None), Some(1)), Ok(()));
    assert_eq!(ok(&r(int(5), int(2)), Some(3)), Ok(()));
    assert_eq!(ok(&r(pct("25%"), pct("99%")), None), Ok(()));
    assert_eq!(ok(&r(int(0), int(1)), Some(2)), Ok(()));
    // Every Pod down at once, at the given size or at some autoscaled size.
    for (bad, replicas) in [
        (r(None, int(3)), Some(3)),
        (r(None, pct("100%")), Some(4)),
        (r(None, int(1)), None),
        (r(int(0), int(1)), Some(1)),
        // Both round to 0 at 1 replica: Kubernetes then makes one Pod unavailable.
        (r(int(0), pct("50%")), None),
        (r(pct("0%"), None), Some(1)),
    ] {
        let e = ok(&bad, replicas).expect_err("refused");
        assert!(
            e.contains("no ready pollers") || e.contains("every Pod"),
            "{e}"
        );
    }
    for malformed in [r(pct("x%"), None), r(int(-1), None), r(None, pct("5"))] {
        assert!(ok(&malformed, Some(3)).is_err(), "{malformed:?}");
    }
}
