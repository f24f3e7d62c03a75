//! Kubeconfig files for the admin, the controllers and test identities.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use base64::Engine as _;
use serde_json::json;

use super::pki::CertPair;

/// How a kubeconfig authenticates.
pub enum Credentials {
    /// A client certificate signed by the cluster CA.
    Cert(CertPair),
    /// A bearer token (e.g. a ServiceAccount's, from TokenRequest).
    Token(String),
    /// The admin certificate, impersonating `user` in `groups`.
    Impersonate {
        admin: CertPair,
        user: String,
        groups: Vec<String>,
    },
}

/// Writes a kubeconfig with one cluster, one user and one current context.
pub fn write(path: &Path, server: &str, ca_pem: &str, creds: &Credentials) -> Result<PathBuf> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let cert = |c: &CertPair| json!({"client-certificate-data": b64(&c.cert_pem), "client-key-data": b64(&c.key_pem)});
    let user = match creds {
        Credentials::Cert(c) => cert(c),
        Credentials::Token(t) => json!({"token": t}),
        Credentials::Impersonate {
            admin,
            user,
            groups,
        } => {
            let mut u = cert(admin);
            u["as"] = json!(user);
            u["as-groups"] = json!(groups);
            u
        }
    };
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "twc-test", "cluster": {
            "server": server,
            "certificate-authority-data": b64(ca_pem),
        }}],
        "users": [{"name": "twc-test-user", "user": user}],
        "contexts": [{"name": "twc-test", "context": {"cluster": "twc-test", "user": "twc-test-user"}}],
        "current-context": "twc-test",
    });
    let text = serde_yaml::to_string(&doc)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path.to_path_buf())
}
