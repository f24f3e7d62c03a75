//! The connection settings the controller puts into worker pods: env vars, for mTLS the
//! client-certificate volume, and for a server CA (`tls.caCertSecretRef`) its volume. The
//! workers' credentials are `workerCredentials` when set (the controller's own Secret then
//! never reaches a Pod). Injection always starts by removing whatever an earlier render
//! injected, so switching auth mode (mTLS → API key → plain) leaves nothing stale behind.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, KeyToPath, PodSpec, SecretKeySelector, SecretVolumeSource,
    Volume, VolumeMount,
};

use crate::api::connection::{AuthMode, WorkerServerCa};
use crate::api::{
    CA_MOUNT_PATH, CA_VOLUME, ENV_ADDRESS, ENV_API_KEY, ENV_BUILD_ID, ENV_DEPLOYMENT_NAME,
    ENV_NAMESPACE, ENV_TLS, ENV_TLS_CLIENT_CERT_PATH, ENV_TLS_CLIENT_KEY_PATH,
    ENV_TLS_SERVER_CA_CERT_DATA, ENV_TLS_SERVER_CA_CERT_PATH, ENV_TLS_SERVER_NAME, RESERVED_ENV,
    TLS_MOUNT_PATH, TLS_VOLUME, TemporalConnectionSpec,
};

/// The key of a Secret that holds a CA certificate (cert-manager's, and the Go controller's).
const CA_KEY: &str = "ca.crt";

/// Values injected into one versioned Deployment's pods.
pub(crate) struct Injection<'a> {
    pub connection: &'a TemporalConnectionSpec,
    pub temporal_namespace: &'a str,
    /// `<k8s-namespace>/<twd-name>`.
    pub deployment_name: &'a str,
    pub build_id: &'a str,
}

/// The server-CA paths only the controller writes (under its reserved mount paths): an env
/// var with one of them is ours, any other value the user's.
fn our_ca_paths() -> [String; 2] {
    [
        format!("{CA_MOUNT_PATH}/{CA_KEY}"),
        format!("{TLS_MOUNT_PATH}/{CA_KEY}"),
    ]
}

fn injected_by_us(e: &EnvVar) -> bool {
    RESERVED_ENV.contains(&e.name.as_str())
        || (e.name == ENV_TLS_SERVER_CA_CERT_PATH
            && e.value_from.is_none()
            && e.value.as_ref().is_some_and(|v| our_ca_paths().contains(v)))
}

fn our_volume(name: &str) -> bool {
    name == TLS_VOLUME || name == CA_VOLUME
}

/// Removes everything a previous render injected: our env vars and the TLS and CA volumes and
/// their mounts. Init containers are never injected into, so they are left alone.
pub(crate) fn strip(spec: &mut PodSpec) {
    for c in &mut spec.containers {
        if let Some(env) = c.env.as_mut() {
            env.retain(|e| !injected_by_us(e));
            if env.is_empty() {
                c.env = None;
            }
        }
        if let Some(mounts) = c.volume_mounts.as_mut() {
            mounts.retain(|m| !our_volume(&m.name));
            if mounts.is_empty() {
                c.volume_mounts = None;
            }
        }
    }
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| !our_volume(&v.name));
        if volumes.is_empty() {
            spec.volumes = None;
        }
    }
}

/// A container that sets the server CA itself (wired by hand, e.g. before the Connection could
/// give one) keeps its own: two settings would make the SDK refuse to start.
fn sets_own_server_ca(c: &Container) -> bool {
    c.env.iter().flatten().any(|e| {
        (e.name == ENV_TLS_SERVER_CA_CERT_PATH || e.name == ENV_TLS_SERVER_CA_CERT_DATA)
            && !injected_by_us(e)
    })
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_string(),
        mount_path: path.to_string(),
        read_only: Some(true),
        ..Default::default()
    }
}

/// Strips earlier injections, then injects for `inj` into every container.
pub(crate) fn inject(spec: &mut PodSpec, inj: &Injection) {
    strip(spec);
    let ours = env_vars(inj);
    let conn = inj.connection;
    let mode = conn.worker_auth_mode();
    let ca = conn.worker_server_ca();
    for c in &mut spec.containers {
        // Ours go first so that the user's own env can reference them as `$(TEMPORAL_ADDRESS)`;
        // Kubernetes only expands references to variables defined earlier in the list.
        let mut env = ours.clone();
        let ca_path = match ca {
            Some(_) if sets_own_server_ca(c) => None,
            Some(WorkerServerCa::CaSecret(_)) => Some(format!("{CA_MOUNT_PATH}/{CA_KEY}")),
            Some(WorkerServerCa::MutualTlsSecret(_)) => Some(format!("{TLS_MOUNT_PATH}/{CA_KEY}")),
            None => None,
        };
        if let Some(path) = ca_path {
            env.push(plain(ENV_TLS_SERVER_CA_CERT_PATH, &path));
        }
        env.extend(c.env.take().unwrap_or_default());
        c.env = Some(env);
        let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
        if let AuthMode::MutualTls { .. } = mode {
            mounts.push(mount(TLS_VOLUME, TLS_MOUNT_PATH));
        }
        if let Some(WorkerServerCa::CaSecret(_)) = ca {
            mounts.push(mount(CA_VOLUME, CA_MOUNT_PATH));
        }
        if mounts.is_empty() {
            c.volume_mounts = None;
        }
    }
    if let AuthMode::MutualTls { secret } = mode {
        spec.volumes
            .get_or_insert_with(Vec::new)
            .push(secret_volume(TLS_VOLUME, secret, None));
    }
    if let Some(WorkerServerCa::CaSecret(secret)) = ca {
        // Only `ca.crt`: a `kubernetes.io/tls` Secret's private key stays out of the Pod.
        let items = vec![KeyToPath {
            key: CA_KEY.to_string(),
            path: CA_KEY.to_string(),
            ..Default::default()
        }];
        spec.volumes
            .get_or_insert_with(Vec::new)
            .push(secret_volume(CA_VOLUME, secret, Some(items)));
    }
}

fn secret_volume(name: &str, secret: &str, items: Option<Vec<KeyToPath>>) -> Volume {
    Volume {
        name: name.to_string(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_string()),
            items,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The value of an injected plain env var in the first container that has it.
pub(crate) fn injected_value(spec: &PodSpec, name: &str) -> Option<String> {
    spec.containers
        .iter()
        .flat_map(|c| c.env.iter().flatten())
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

fn plain(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

fn env_vars(inj: &Injection) -> Vec<EnvVar> {
    let conn = inj.connection;
    let mode = conn.worker_auth_mode();
    let mut env = vec![
        plain(ENV_ADDRESS, &conn.host_port),
        plain(ENV_NAMESPACE, inj.temporal_namespace),
        plain(ENV_DEPLOYMENT_NAME, inj.deployment_name),
        plain(ENV_BUILD_ID, inj.build_id),
    ];
    // Same rule the controller's own client follows: credentials always mean TLS (API keys
    // are useless in plaintext), and a server name or a server CA alone also asks for TLS.
    let tls = !matches!(mode, AuthMode::Plain)
        || conn.server_name().is_some()
        || conn.worker_server_ca().is_some();
    if tls {
        env.push(plain(ENV_TLS, "true"));
    }
    if let Some(server_name) = conn.server_name() {
        env.push(plain(ENV_TLS_SERVER_NAME, server_name));
    }
    match mode {
        AuthMode::Plain => {}
        AuthMode::MutualTls { .. } => {
            env.push(plain(
                ENV_TLS_CLIENT_CERT_PATH,
                &format!("{TLS_MOUNT_PATH}/tls.crt"),
            ));
            env.push(plain(
                ENV_TLS_CLIENT_KEY_PATH,
                &format!("{TLS_MOUNT_PATH}/tls.key"),
            ));
        }
        AuthMode::ApiKey { secret, key } => env.push(EnvVar {
            name: ENV_API_KEY.to_string(),
            value: None,
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: secret.to_string(),
                    key: key.to_string(),
                    optional: None,
                }),
                ..Default::default()
            }),
        }),
    }
    env
}
