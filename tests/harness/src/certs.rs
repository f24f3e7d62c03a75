//! A throw-away certificate authority for tests (rcgen, ECDSA P-256): the control plane's
//! cluster CA and the TLS proxy's CA are both one of these.

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

/// A UTC date: `(year, month, day)`.
pub type Ymd = (i32, u8, u8);

/// What a leaf certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
}

pub struct Authority {
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    /// A fresh self-signed CA named `common_name`.
    pub fn new(common_name: &str) -> Result<Authority> {
        let key = KeyPair::generate().context("generating a CA key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = dn(common_name, None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params
            .self_signed(&key)
            .with_context(|| format!("self-signing CA {common_name}"))?;
        Ok(Authority {
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// A leaf certificate `CN=common_name` (optionally `O=organization`, which Kubernetes reads
    /// as a group; rcgen writes at most one O) with subject alternative names `sans` (IP
    /// addresses become IP SANs).
    pub fn issue(
        &self,
        common_name: &str,
        organization: Option<&str>,
        sans: &[&str],
        usage: Usage,
    ) -> Result<CertPair> {
        self.issue_valid(common_name, organization, sans, usage, None)
    }

    /// [`Authority::issue`] valid from `not_before` to `not_after` (whole days, UTC: `(year,
    /// month, day)`), e.g. one about to expire or already expired; `None`: rcgen's default.
    pub fn issue_valid(
        &self,
        common_name: &str,
        organization: Option<&str>,
        sans: &[&str],
        usage: Usage,
        validity: Option<(Ymd, Ymd)>,
    ) -> Result<CertPair> {
        let key = KeyPair::generate().context("generating a key")?;
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name = dn(common_name, organization);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.use_authority_key_identifier_extension = true;
        if let Some(((y0, m0, d0), (y1, m1, d1))) = validity {
            params.not_before = rcgen::date_time_ymd(y0, m0, d0);
            params.not_after = rcgen::date_time_ymd(y1, m1, d1);
        }
        let cert = params
            .signed_by(&key, &self.issuer)
            .with_context(|| format!("signing a certificate for {common_name}"))?;
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
