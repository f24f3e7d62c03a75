//! What the worker Pods get of a server CA (`tls.caCertSecretRef`, or the opt-in `ca.crt` of
//! their mTLS Secret) and of `workerCredentials`.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};

use super::*;
use crate::api::connection::{SecretKeyRef, SecretRef, TlsOptions, WorkerCredentials};
use crate::api::{
    CA_MOUNT_PATH, CA_VOLUME, ENV_API_KEY, ENV_TLS, ENV_TLS_CLIENT_CERT_PATH,
    ENV_TLS_SERVER_CA_CERT_PATH, TLS_MOUNT_PATH, TLS_VOLUME,
};

fn twd() -> TemporalWorkerDeployment {
    TemporalWorkerDeployment::test().full_pod()
}

fn build_of(twd: &TemporalWorkerDeployment) -> String {
    build_id::compute(
        &twd.spec.template,
        twd.spec.worker_options.custom_build_id.as_deref(),
    )
    .unwrap()
}

fn render(twd: &TemporalWorkerDeployment, conn: &TemporalConnectionSpec) -> Deployment {
    let build = build_of(twd);
    versioned_deployment(&VersionedDeploymentInput {
        connection_ref: None,
        twd,
        connection: conn,
        build_id: &build,
        replicas: Some(1),
    })
    .unwrap()
}

fn pod_spec(d: &Deployment) -> &PodSpec {
    d.spec.template.spec.as_ref().unwrap()
}

fn env<'a>(c: &'a Container, name: &str) -> Vec<&'a EnvVar> {
    c.env.iter().flatten().filter(|e| e.name == name).collect()
}

fn value<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    env(c, name).first().and_then(|e| e.value.as_deref())
}

/// Every Secret a Pod of `d` reads, from volumes and env.
fn secrets_in(d: &Deployment) -> Vec<String> {
    let spec = pod_spec(d);
    let mut out: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
        .collect();
    for c in &spec.containers {
        for e in c.env.iter().flatten() {
            if let Some(r) = e
                .value_from
                .as_ref()
                .and_then(|v| v.secret_key_ref.as_ref())
            {
                out.push(r.name.clone());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn api_key_with_ca() -> TemporalConnectionSpec {
    TemporalConnectionSpec {
        host_port: "temporal.internal:7233".into(),
        api_key_secret_ref: Some(SecretKeyRef {
            name: "controller-key".into(),
            key: "apiKey".into(),
        }),
        tls: Some(TlsOptions {
            ca_cert_secret_ref: Some(SecretRef {
                name: "private-ca".into(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn mtls(workers_trust_ca: Option<bool>) -> TemporalConnectionSpec {
    TemporalConnectionSpec {
        host_port: "temporal.internal:7233".into(),
        mutual_tls_secret_ref: Some(SecretRef {
            name: "controller-cert".into(),
        }),
        tls: Some(TlsOptions {
            workers_trust_mutual_tls_ca: workers_trust_ca,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn the_private_ca_is_mounted_alone_and_named_by_the_sdk_variable() {
    let d = render(&twd(), &api_key_with_ca());
    let spec = pod_spec(&d);
    let ca = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == CA_VOLUME)
        .and_then(|v| v.secret.as_ref())
        .expect("CA volume");
    assert_eq!(ca.secret_name.as_deref(), Some("private-ca"));
    let items = ca.items.as_ref().expect("only ca.crt is projected");
    assert_eq!(items.len(), 1);
    assert_eq!(
        (items[0].key.as_str(), items[0].path.as_str()),
        ("ca.crt", "ca.crt")
    );
    for c in &spec.containers {
        assert_eq!(
            value(c, ENV_TLS_SERVER_CA_CERT_PATH),
            Some(format!("{CA_MOUNT_PATH}/ca.crt").as_str()),
            "container {}",
            c.name
        );
        assert_eq!(value(c, ENV_TLS), Some("true"));
        let mount = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == CA_VOLUME)
            .expect("CA mount");
        assert_eq!(mount.mount_path, CA_MOUNT_PATH);
        assert_eq!(mount.read_only, Some(true));
    }
    // Init containers get nothing.
    assert!(
        spec.init_containers
            .iter()
            .flatten()
            .all(|c| env(c, ENV_TLS_SERVER_CA_CERT_PATH).is_empty())
    );
    // A CA alone (no credentials) also means TLS.
    let mut no_credentials = api_key_with_ca();
    no_credentials.api_key_secret_ref = None;
    let d = render(&twd(), &no_credentials);
    assert_eq!(value(&pod_spec(&d).containers[0], ENV_TLS), Some("true"));
}

#[test]
fn the_mtls_ca_reaches_workers_only_when_opted_in() {
    for opt in [None, Some(false)] {
        let d = render(&twd(), &mtls(opt));
        let c = &pod_spec(&d).containers[0];
        assert!(env(c, ENV_TLS_SERVER_CA_CERT_PATH).is_empty(), "{opt:?}");
        assert!(
            pod_spec(&d)
                .volumes
                .iter()
                .flatten()
                .all(|v| v.name != CA_VOLUME),
            "{opt:?}"
        );
    }
    let d = render(&twd(), &mtls(Some(true)));
    let c = &pod_spec(&d).containers[0];
    assert_eq!(
        value(c, ENV_TLS_SERVER_CA_CERT_PATH),
        Some(format!("{TLS_MOUNT_PATH}/ca.crt").as_str())
    );
    // Already mounted with the client certificate: no second volume.
    assert!(
        pod_spec(&d)
            .volumes
            .iter()
            .flatten()
            .all(|v| v.name != CA_VOLUME)
    );
    assert_ne!(
        build_id::connection_hash(&mtls(Some(true))),
        build_id::connection_hash(&mtls(None))
    );
    assert_eq!(
        build_id::connection_hash(&mtls(Some(false))),
        build_id::connection_hash(&mtls(None))
    );
}

#[test]
fn a_server_ca_wired_by_hand_is_kept_not_doubled() {
    let mut twd = twd();
    let by_hand = EnvVar {
        name: ENV_TLS_SERVER_CA_CERT_PATH.into(),
        value: Some("/certs/ca.pem".into()),
        value_from: None,
    };
    if let Some(s) = twd.spec.template.spec.as_mut() {
        s.containers[0]
            .env
            .get_or_insert_with(Vec::new)
            .push(by_hand.clone());
    }
    let d = render(&twd, &api_key_with_ca());
    let spec = pod_spec(&d);
    assert_eq!(
        env(&spec.containers[0], ENV_TLS_SERVER_CA_CERT_PATH),
        [&by_hand]
    );
    // Other containers get ours.
    for c in &spec.containers[1..] {
        assert_eq!(
            value(c, ENV_TLS_SERVER_CA_CERT_PATH),
            Some(format!("{CA_MOUNT_PATH}/ca.crt").as_str())
        );
    }
    // An older version's refresh keeps the user's and replaces ours.
    let old = twd.clone().image("orders:v0");
    let old_build = build_of(&old);
    let mut current = render(&old, &api_key_with_ca());
    for conn in [mtls(None), api_key_with_ca(), mtls(Some(true))] {
        current = refresh_template(
            &current,
            &VersionedDeploymentInput {
                connection_ref: None,
                twd: &twd,
                connection: &conn,
                build_id: &old_build,
                replicas: None,
            },
        )
        .unwrap();
        let spec = pod_spec(&current);
        assert_eq!(
            env(&spec.containers[0], ENV_TLS_SERVER_CA_CERT_PATH),
            [&by_hand]
        );
        let ours = env(&spec.containers[1], ENV_TLS_SERVER_CA_CERT_PATH);
        assert!(ours.len() <= 1, "{ours:?}");
    }
}

#[test]
fn worker_credentials_replace_the_controllers_secret_in_the_pods() {
    let mut conn = mtls(None);
    conn.worker_credentials = Some(WorkerCredentials {
        mutual_tls_secret_ref: None,
        api_key_secret_ref: Some(SecretKeyRef {
            name: "worker-key".into(),
            key: "apiKey".into(),
        }),
    });
    let d = render(&twd(), &conn);
    assert_eq!(secrets_in(&d), ["worker-key"]);
    let c = &pod_spec(&d).containers[0];
    assert!(env(c, ENV_TLS_CLIENT_CERT_PATH).is_empty());
    assert!(
        pod_spec(&d)
            .volumes
            .iter()
            .flatten()
            .all(|v| v.name != TLS_VOLUME)
    );
    assert_eq!(env(c, ENV_API_KEY).len(), 1);

    // The other way round, with the private CA: the workers' certificate and the CA only.
    let mut conn = api_key_with_ca();
    conn.worker_credentials = Some(WorkerCredentials {
        mutual_tls_secret_ref: Some(SecretRef {
            name: "worker-cert".into(),
        }),
        api_key_secret_ref: None,
    });
    let d = render(&twd(), &conn);
    assert_eq!(secrets_in(&d), ["private-ca", "worker-cert"]);
    let c = &pod_spec(&d).containers[0];
    assert!(env(c, ENV_API_KEY).is_empty());
    assert_eq!(
        value(c, ENV_TLS_CLIENT_CERT_PATH),
        Some(format!("{TLS_MOUNT_PATH}/tls.crt").as_str())
    );
    // Switching back to shared credentials leaves no worker Secret behind.
    let build = build_of(&twd());
    let back = refresh_template(
        &d,
        &VersionedDeploymentInput {
            connection_ref: None,
            twd: &twd(),
            connection: &api_key_with_ca(),
            build_id: &build,
            replicas: None,
        },
    )
    .unwrap();
    assert_eq!(secrets_in(&back), ["controller-key", "private-ca"]);
}
