//! Keeping the served certificate current.
//!
//! Self-managed (the default): the Lease holder creates the Secret, renews it before expiry
//! ([`certs::decide`]) and keeps the caBundle of the ValidatingWebhookConfiguration equal to
//! the Secret's trust bundle; every replica, leader or not, re-reads the Secret and serves
//! what it holds. A renewal first adds the new CA to the caBundle, then writes the Secret, so
//! the API server trusts a new certificate before any replica serves it, and still trusts the
//! old one while the other replicas catch up.
//!
//! Files (cert-manager): every replica re-reads `tls.crt`/`tls.key` from the mounted Secret.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use serde_json::json;
use tokio::sync::watch;

use super::certs::{self, ANNOTATION_HOSTS, Bundle, CA_BUNDLE, Decision, TLS_CERT, TLS_KEY};
use super::server::CurrentCert;
use super::{CertMode, WebhookOptions};

#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    #[error("reading Secret {name:?}: {source}")]
    Read { name: String, source: kube::Error },
    #[error("writing Secret {name:?}: {source}")]
    Write { name: String, source: kube::Error },
    #[error("updating the caBundle of ValidatingWebhookConfiguration {name:?}: {source}")]
    CaBundle { name: String, source: kube::Error },
    #[error(transparent)]
    Cert(#[from] certs::CertError),
    #[error(transparent)]
    Serve(#[from] super::server::ServerError),
    #[error("reading {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
}

/// Runs until `stop` turns true: checks, renews (leader only) and reloads the certificate.
pub async fn run(
    client: kube::Client,
    opts: WebhookOptions,
    cert: Arc<CurrentCert>,
    leader: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let wait = match &opts.certs {
            CertMode::SelfManaged {
                secret_name,
                configuration_name,
                validity,
            } => {
                let names = Names {
                    secret: secret_name,
                    configuration: configuration_name,
                    namespace: &opts.namespace,
                };
                match self_managed(&client, &names, &opts.hosts(), *validity, &cert, &leader).await
                {
                    Ok(not_after) => certs::next_check(
                        not_after,
                        Timestamp::now(),
                        *validity,
                        opts.check_interval,
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook certificate upkeep failed; retrying");
                        opts.check_interval.min(Duration::from_secs(5))
                    }
                }
            }
            CertMode::Files { dir } => {
                if let Err(e) = from_files(dir, &cert).await {
                    tracing::warn!(error = %e, "webhook certificate files not loaded; retrying");
                }
                opts.check_interval
            }
        };
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

struct Names<'a> {
    secret: &'a str,
    configuration: &'a str,
    namespace: &'a str,
}

/// One pass; returns the served certificate's `notAfter`.
async fn self_managed(
    client: &kube::Client,
    names: &Names<'_>,
    hosts: &[String],
    validity: certs::Validity,
    cert: &CurrentCert,
    leader: &watch::Receiver<bool>,
) -> Result<Option<Timestamp>, RotateError> {
    // Checked before each write, like every other write of the controller.
    let leads = || *leader.borrow();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), names.namespace);
    let read = |source| RotateError::Read {
        name: names.secret.to_string(),
        source,
    };
    let mut secret = secrets.get_opt(names.secret).await.map_err(read)?;
    if leads() {
        let stored = secret.as_ref().map(Stored::of).unwrap_or_default();
        let now = Timestamp::now();
        let not_after = stored
            .cert
            .as_deref()
            .and_then(|c| certs::not_after(c.as_bytes()));
        let decision = certs::decide(not_after, stored.hosts.as_deref(), hosts, now, validity);
        if decision != Decision::Keep && leads() {
            let bundle = certs::generate(hosts, now, validity.valid_for, stored.ca.as_deref())?;
            // Trust first, serve second (module docs): the bundle holds the new CA and the
            // one that signed the certificate replicas serve now.
            set_ca_bundle(client, names.configuration, &bundle.ca_bundle_pem).await?;
            if !leads() {
                // Lost the Lease in between: the new holder renews (the extra CA in caBundle
                // is harmless and goes with its next sync).
                return Ok(None);
            }
            secret = Some(write(&secrets, names, secret, &bundle, hosts).await?);
            tracing::info!(
                ?decision,
                secret = names.secret,
                "webhook certificate renewed"
            );
        }
        if let Some(ca) = secret.as_ref().and_then(|s| Stored::of(s).ca)
            && leads()
        {
            set_ca_bundle(client, names.configuration, &ca).await?;
        }
    }
    let Some(secret) = secret else {
        // A follower waits for the leader to create it.
        return Ok(None);
    };
    let stored = Stored::of(&secret);
    let (Some(crt), Some(key)) = (stored.cert, stored.key) else {
        return Ok(None);
    };
    if cert.load(crt.as_bytes(), key.as_bytes())? {
        tracing::info!(secret = names.secret, "webhook serving a new certificate");
    }
    Ok(certs::not_after(crt.as_bytes()))
}

/// What the Secret holds, as text.
#[derive(Default)]
struct Stored {
    cert: Option<String>,
    key: Option<String>,
    ca: Option<String>,
    hosts: Option<String>,
}

impl Stored {
    fn of(secret: &Secret) -> Self {
        let entry = |k: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(k))
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
                .filter(|v| !v.is_empty())
        };
        Stored {
            cert: entry(TLS_CERT),
            key: entry(TLS_KEY),
            ca: entry(CA_BUNDLE),
            hosts: secret
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_HOSTS))
                .cloned(),
        }
    }
}

/// Creates or replaces the Secret; a replace carries the resourceVersion read, so two
/// writers (a Lease hand-over) cannot both win.
async fn write(
    secrets: &Api<Secret>,
    names: &Names<'_>,
    existing: Option<Secret>,
    bundle: &Bundle,
    hosts: &[String],
) -> Result<Secret, RotateError> {
    let data = [
        (TLS_CERT, &bundle.cert_pem),
        (TLS_KEY, &bundle.key_pem),
        (CA_BUNDLE, &bundle.ca_bundle_pem),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.clone().into_bytes())))
    .collect();
    let mut secret = existing.unwrap_or_else(|| Secret {
        metadata: ObjectMeta {
            name: Some(names.secret.to_string()),
            namespace: Some(names.namespace.to_string()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "temporal-worker-controller".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        ..Default::default()
    });
    secret.data = Some(data);
    secret
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANNOTATION_HOSTS.to_string(), hosts.join(","));
    let result = if secret.metadata.resource_version.is_some() {
        secrets
            .replace(names.secret, &PostParams::default(), &secret)
            .await
    } else {
        secrets.create(&PostParams::default(), &secret).await
    };
    result.map_err(|source| RotateError::Write {
        name: names.secret.to_string(),
        source,
    })
}

/// Sets `caBundle` on every webhook of the configuration that does not have it yet. A missing
/// configuration is not an error: nothing calls the webhook then.
async fn set_ca_bundle(client: &kube::Client, name: &str, ca_pem: &str) -> Result<(), RotateError> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let err = |source| RotateError::CaBundle {
        name: name.to_string(),
        source,
    };
    let Some(config) = api.get_opt(name).await.map_err(err)? else {
        tracing::debug!(
            configuration = name,
            "no ValidatingWebhookConfiguration yet"
        );
        return Ok(());
    };
    let Some(patch) = ca_bundle_patch(&config, ca_pem) else {
        return Ok(());
    };
    api.patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map_err(err)?;
    tracing::info!(configuration = name, "caBundle updated");
    Ok(())
}

/// The strategic-merge patch that sets `caBundle` on every webhook of `config` that lacks
/// `ca_pem` (webhooks merge by name, so nothing else changes); `None` when all have it.
pub fn ca_bundle_patch(
    config: &ValidatingWebhookConfiguration,
    ca_pem: &str,
) -> Option<serde_json::Value> {
    let stale: Vec<serde_json::Value> = config
        .webhooks
        .iter()
        .flatten()
        .filter(|w| {
            w.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()) != Some(ca_pem.as_bytes())
        })
        .map(|w| json!({"name": w.name, "clientConfig": {"caBundle": base64_pem(ca_pem)}}))
        .collect();
    (!stale.is_empty()).then(|| json!({"webhooks": stale}))
}

fn base64_pem(pem: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(pem)
}

async fn from_files(dir: &std::path::Path, cert: &CurrentCert) -> Result<(), RotateError> {
    let read = |name: &str| {
        let path = dir.join(name);
        async move {
            tokio::fs::read(&path)
                .await
                .map_err(|source| RotateError::File {
                    path: path.display().to_string(),
                    source,
                })
        }
    };
    let crt = read(TLS_CERT).await?;
    let key = read(TLS_KEY).await?;
    if cert.load(&crt, &key)? {
        tracing::info!(dir = %dir.display(), "webhook serving a new certificate from files");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn files_are_served_and_reloaded_when_they_change() {
        let dir = std::env::temp_dir().join(format!("twc-webhook-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let cert = CurrentCert::default();
        assert!(from_files(&dir, &cert).await.is_err(), "no files yet");
        let hosts = vec!["twc-webhook.ns.svc".to_string()];
        let ttl = Duration::from_secs(600);
        for _ in 0..2 {
            let b = certs::generate(&hosts, Timestamp::now(), ttl, None).expect("generate");
            std::fs::write(dir.join(TLS_CERT), &b.cert_pem).expect("crt");
            std::fs::write(dir.join(TLS_KEY), &b.key_pem).expect("key");
            from_files(&dir, &cert).await.expect("loaded");
            assert_eq!(cert.cert_pem(), Some(b.cert_pem.into_bytes()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_webhooks_without_the_bundle_are_patched_and_only_their_ca_bundle() {
        let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "twc"},
            "webhooks": [
                {"name": "a.webhook.temporal.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                    "clientConfig": {"url": "https://127.0.0.1:1/a", "caBundle": base64_pem("CA")}},
                {"name": "b.webhook.temporal.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                    "clientConfig": {"url": "https://127.0.0.1:1/b"}}
            ]
        }))
        .expect("configuration");
        assert_eq!(
            ca_bundle_patch(&config, "CA"),
            Some(json!({"webhooks": [
                {"name": "b.webhook.temporal.io", "clientConfig": {"caBundle": base64_pem("CA")}}
            ]}))
        );
        let patch = ca_bundle_patch(&config, "NEW").expect("both stale");
        assert_eq!(patch["webhooks"].as_array().map(Vec::len), Some(2));
        let mut current = config.clone();
        for w in current.webhooks.iter_mut().flatten() {
            w.client_config.ca_bundle = Some(ByteString(b"NEW".to_vec()));
        }
        assert_eq!(ca_bundle_patch(&current, "NEW"), None);
    }

    #[test]
    fn the_stored_secret_is_read_back_as_written() {
        let secret = Secret {
            data: Some(
                [
                    (TLS_CERT.to_string(), ByteString(b"crt".to_vec())),
                    (TLS_KEY.to_string(), ByteString(b"key".to_vec())),
                    (CA_BUNDLE.to_string(), ByteString(Vec::new())),
                ]
                .into(),
            ),
            metadata: ObjectMeta {
                annotations: Some([(ANNOTATION_HOSTS.to_string(), "a,b".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let s = Stored::of(&secret);
        assert_eq!(s.cert.as_deref(), Some("crt"));
        assert_eq!(s.key.as_deref(), Some("key"));
        assert_eq!(s.ca, None, "an empty entry is no entry");
        assert_eq!(s.hosts.as_deref(), Some("a,b"));
    }
}
