//! The cluster's PKI, generated fresh for every start: one CA that signs the API server's
//! serving certificate and every client certificate (admin, kube-controller-manager, test
//! users), plus the service-account signing key.

use anyhow::{Context as _, Result};
use rcgen::KeyPair;

pub use crate::certs::CertPair;
use crate::certs::{Authority, Usage};

/// The API server's names: loopback and the in-cluster Service names.
const SERVING_SANS: [&str; 6] = [
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

pub struct ClusterPki {
    pub ca_pem: String,
    authority: Authority,
    /// kube-apiserver's serving certificate.
    pub serving: CertPair,
    /// Signs service-account tokens (ECDSA P-256, PKCS#8).
    pub service_account_key_pem: String,
    /// Verifies them (the API server reads only public keys from `--service-account-key-file`).
    pub service_account_public_pem: String,
}

impl ClusterPki {
    pub fn generate() -> Result<ClusterPki> {
        let authority = Authority::new("twc-test-cluster-ca")?;
        let serving = authority.issue("kube-apiserver", None, &SERVING_SANS, Usage::Server)?;
        let sa_key = KeyPair::generate().context("generating the service-account key")?;
        Ok(ClusterPki {
            ca_pem: authority.ca_pem.clone(),
            authority,
            serving,
            service_account_key_pem: sa_key.serialize_pem(),
            service_account_public_pem: sa_key.public_key_pem(),
        })
    }

    /// A client certificate for `user`, optionally in `group` (Kubernetes reads CN as the user
    /// name and O as a group; more groups use impersonation).
    pub fn client_cert(&self, user: &str, group: Option<&str>) -> Result<CertPair> {
        self.authority.issue(user, group, &[], Usage::Client)
    }
}
