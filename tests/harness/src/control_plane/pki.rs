//! The cluster's PKI, generated fresh for every start: one CA that signs the API server's
//! serving certificate and every client certificate (admin, kube-controller-manager, test
//! users), plus the service-account signing key.

use anyhow::{Context as _, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A certificate and its private key, PEM.
#[derive(Clone, Debug)]
pub struct CertPair {
    pub cert_pem: String,
    pub key_pem: String,
}

pub struct ClusterPki {
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
    /// kube-apiserver's serving certificate (SANs: loopback and the in-cluster names).
    pub serving: CertPair,
    /// Signs service-account tokens (ECDSA P-256, PKCS#8).
    pub service_account_key_pem: String,
    /// Verifies them (the API server reads only public keys from `--service-account-key-file`).
    pub service_account_public_pem: String,
}

impl ClusterPki {
    pub fn generate() -> Result<ClusterPki> {
        let ca_key = KeyPair::generate().context("generating the cluster CA key")?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.distinguished_name = dn("twc-test-cluster-ca", None);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params
            .self_signed(&ca_key)
            .context("self-signing the cluster CA")?;
        let issuer = Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate().context("generating the serving key")?;
        let sans = [
            "127.0.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ];
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name = dn("kube-apiserver", None);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let serving_cert = params
            .signed_by(&serving_key, &issuer)
            .context("signing the serving certificate")?;

        let sa_key = KeyPair::generate().context("generating the service-account key")?;
        Ok(ClusterPki {
            ca_pem: ca_cert.pem(),
            issuer,
            serving: CertPair {
                cert_pem: serving_cert.pem(),
                key_pem: serving_key.serialize_pem(),
            },
            service_account_key_pem: sa_key.serialize_pem(),
            service_account_public_pem: sa_key.public_key_pem(),
        })
    }

    /// A client certificate for `user`, optionally in `group` (Kubernetes reads CN as the user
    /// name and O as a group; rcgen writes at most one O, so more groups use impersonation).
    pub fn client_cert(&self, user: &str, group: Option<&str>) -> Result<CertPair> {
        let key = KeyPair::generate().context("generating a client key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = dn(user, group);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&key, &self.issuer)
            .with_context(|| format!("signing a client certificate for {user}"))?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn dn(common_name: &str, organization: Option<&str>) -> rcgen::DistinguishedName {
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}
