//! The cluster's PKI, generated fresh for every start: one CA that signs the API server's
//! serving certificate, every client certificate (admin, kube-controller-manager, test users)
//! and the serving certificates of aggregated API servers, plus the service-account signing key
//! and, as a real cluster has, a separate front-proxy CA for the aggregation layer: the API
//! server authenticates to aggregated API servers with its client certificate, and they trust
//! the user it names in request headers only because that CA signed it.

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

/// The front-proxy client certificate's common name, the one name aggregated API servers accept
/// request headers from (`--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

pub struct ClusterPki {
    pub ca_pem: String,
    authority: Authority,
    /// Signs only the front-proxy client certificate (`--requestheader-client-ca-file`).
    pub front_proxy_ca_pem: String,
    /// kube-apiserver's client certificate towards aggregated API servers
    /// (`--proxy-client-cert-file`).
    pub front_proxy_client: CertPair,
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
        let front_proxy = Authority::new("twc-test-front-proxy-ca")?;
        let front_proxy_client = front_proxy.issue(FRONT_PROXY_CLIENT, None, &[], Usage::Client)?;
        Ok(ClusterPki {
            ca_pem: authority.ca_pem.clone(),
            authority,
            front_proxy_ca_pem: front_proxy.ca_pem.clone(),
            front_proxy_client,
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

    /// A serving certificate for `names`, signed by the cluster CA: what an aggregated API
    /// server presents (the API server checks it against `<service>.<namespace>.svc` and the
    /// APIService's `caBundle`, which is [`ClusterPki::ca_pem`]).
    pub fn serving_cert(&self, common_name: &str, names: &[&str]) -> Result<CertPair> {
        self.authority
            .issue(common_name, None, names, Usage::Server)
    }
}
