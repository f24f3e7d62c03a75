//! The connection settings the controller puts into worker pods: env vars, and for mTLS the
//! client-certificate volume. Injection always starts by removing whatever an earlier render
//! injected, so switching auth mode (mTLS → API key → plain) leaves nothing stale behind.

use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, PodSpec, SecretKeySelector, SecretVolumeSource, Volume, VolumeMount,
};

use crate::api::connection::AuthMode;
use crate::api::{
    ENV_ADDRESS, ENV_API_KEY, ENV_BUILD_ID, ENV_DEPLOYMENT_NAME, ENV_NAMESPACE, ENV_TLS,
    ENV_TLS_CLIENT_CERT_PATH, ENV_TLS_CLIENT_KEY_PATH, ENV_TLS_SERVER_NAME, RESERVED_ENV,
    TLS_MOUNT_PATH, TLS_VOLUME, TemporalConnectionSpec,
};

/// Values injected into one versioned Deployment's pods.
pub(crate) struct Injection<'a> {
    pub connection: &'a TemporalConnectionSpec,
    pub temporal_namespace: &'a str,
    /// `<k8s-namespace>/<twd-name>`.
    pub deployment_name: &'a str,
    pub build_id: &'a str,
}

/// Removes everything a previous render injected: reserved env vars and the TLS volume and
/// its mounts. Init containers are never injected into, so they are left alone.
pub(crate) fn strip(spec: &mut PodSpec) {
    for c in &mut spec.containers {
        if let Some(env) = c.env.as_mut() {
            env.retain(|e| !RESERVED_ENV.contains(&e.name.as_str()));
            if env.is_empty() {
                c.env = None;
            }
        }
        if let Some(mounts) = c.volume_mounts.as_mut() {
            mounts.retain(|m| m.name != TLS_VOLUME);
            if mounts.is_empty() {
                c.volume_mounts = None;
            }
        }
    }
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| v.name != TLS_VOLUME);
        if volumes.is_empty() {
            spec.volumes = None;
        }
    }
}

/// Strips earlier injections, then injects for `inj` into every container.
pub(crate) fn inject(spec: &mut PodSpec, inj: &Injection) {
    strip(spec);
    let ours = env_vars(inj);
    let mode = inj.connection.auth_mode();
    for c in &mut spec.containers {
        // Ours go first so that the user's own env can reference them as `$(TEMPORAL_ADDRESS)`;
        // Kubernetes only expands references to variables defined earlier in the list.
        let mut env = ours.clone();
        env.extend(c.env.take().unwrap_or_default());
        c.env = Some(env);
        if let AuthMode::MutualTls { .. } = mode {
            c.volume_mounts
                .get_or_insert_with(Vec::new)
                .push(VolumeMount {
                    name: TLS_VOLUME.to_string(),
                    mount_path: TLS_MOUNT_PATH.to_string(),
                    read_only: Some(true),
                    ..Default::default()
                });
        }
    }
    if let AuthMode::MutualTls { secret } = mode {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: TLS_VOLUME.to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        });
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

fn env_vars(inj: &Injection) -> Vec<EnvVar> {
    let plain = |name: &str, value: &str| EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    };
    let conn = inj.connection;
    let mode = conn.auth_mode();
    let mut env = vec![
        plain(ENV_ADDRESS, &conn.host_port),
        plain(ENV_NAMESPACE, inj.temporal_namespace),
        plain(ENV_DEPLOYMENT_NAME, inj.deployment_name),
        plain(ENV_BUILD_ID, inj.build_id),
    ];
    // Same rule the controller's own client follows: credentials always mean TLS (API keys
    // are useless in plaintext), and a server name alone also asks for TLS.
    let tls = !matches!(mode, AuthMode::Plain) || conn.server_name().is_some();
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
