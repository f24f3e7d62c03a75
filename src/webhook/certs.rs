//! The webhook's own certificates: a CA and a serving certificate it signs, generated together
//! (rcgen, ECDSA P-256) and kept in one Secret. Renewal is a pure decision of the certificate's
//! `notAfter`, the hosts it must name and the clock, so it is unit-tested without a cluster.
//!
//! Every renewal makes a new CA as well: the CA key is never stored, so a leaked Secret can
//! only impersonate the webhook until the next renewal. The API server must trust the new
//! serving certificate before any replica presents it, and keep trusting the old one while
//! replicas still present it, so the trust bundle (`ca.crt`, and the caBundle of the
//! ValidatingWebhookConfiguration) holds the new CA followed by the previous one.

use std::time::Duration;

use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

/// Keys of the webhook Secret (type `kubernetes.io/tls`, so cert-manager's layout works too).
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
/// The trust bundle: the CA that signed `tls.crt`, then the previous CA (if any).
pub const CA_BUNDLE: &str = "ca.crt";
/// Annotation on the Secret: the hosts (comma-separated) the serving certificate was made for,
/// so a changed Service name or URL host renews it.
pub const ANNOTATION_HOSTS: &str = "temporal.io/webhook-hosts";

/// How long a certificate is valid and how early it is renewed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub valid_for: Duration,
    pub renew_before: Duration,
}

impl Default for Validity {
    /// One year, renewed a month ahead: long enough that a stopped controller does not break
    /// admission soon, short enough that a leaked key ages out.
    fn default() -> Self {
        Self {
            valid_for: Duration::from_secs(365 * 24 * 3600),
            renew_before: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// A serving certificate, its key and the trust bundle, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    pub cert_pem: String,
    pub key_pem: String,
    pub ca_bundle_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("generating the webhook certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("the validity {0:?} does not fit a certificate's dates")]
    Validity(Duration),
    #[error("the webhook certificate has no hosts to name")]
    NoHosts,
}

/// What the stored certificate needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Valid for the hosts and not yet due.
    Keep,
    /// Nothing stored yet, or unreadable.
    Create,
    /// Within `renew_before` of its end (or past it).
    Renew,
    /// Made for other hosts (the Service or URL changed).
    Rehost,
}

/// The pure renewal rule: `not_after` is the stored certificate's end (`None`: none or
/// unreadable), `stored_hosts` the hosts it was made for.
pub fn decide(
    not_after: Option<Timestamp>,
    stored_hosts: Option<&str>,
    hosts: &[String],
    now: Timestamp,
    validity: Validity,
) -> Decision {
    let Some(end) = not_after else {
        return Decision::Create;
    };
    if stored_hosts != Some(hosts.join(",").as_str()) {
        return Decision::Rehost;
    }
    let renew_before =
        jiff::SignedDuration::try_from(validity.renew_before).unwrap_or(jiff::SignedDuration::MAX);
    match end.checked_sub(renew_before) {
        Ok(due) if now < due => Decision::Keep,
        _ => Decision::Renew,
    }
}

/// How long until the stored certificate is due, capped at `max` (never zero, so a loop that
/// sleeps this long cannot spin); without a certificate, at most a second.
pub fn next_check(
    not_after: Option<Timestamp>,
    now: Timestamp,
    validity: Validity,
    max: Duration,
) -> Duration {
    let floor = Duration::from_millis(200);
    let Some(end) = not_after else {
        // Nothing served yet (a follower waiting for the leader): look again soon, but not in
        // a tight loop of reads.
        return max.clamp(floor, Duration::from_secs(1));
    };
    let due = end
        .checked_sub(
            jiff::SignedDuration::try_from(validity.renew_before)
                .unwrap_or(jiff::SignedDuration::MAX),
        )
        .unwrap_or(now);
    let left = Duration::try_from(due.duration_since(now)).unwrap_or(Duration::ZERO);
    left.clamp(floor, max.max(floor))
}

/// `notAfter` of the first certificate in `pem` (`None` if there is none or it is unreadable).
pub fn not_after(pem: &[u8]) -> Option<Timestamp> {
    let leaf = CertificateDer::pem_slice_iter(pem).next()?.ok()?;
    crate::temporal::auth::cert_not_after(leaf.as_ref())
}

/// The first certificate of a PEM bundle, as PEM (the current CA of a trust bundle).
pub fn first_cert_pem(pem: &str) -> Option<String> {
    let begin = pem.find("-----BEGIN CERTIFICATE-----")?;
    let end_marker = "-----END CERTIFICATE-----";
    let end = pem[begin..].find(end_marker)? + begin + end_marker.len();
    Some(format!("{}\n", &pem[begin..end]))
}

/// A new CA and a serving certificate for `hosts` (DNS names; IP addresses become IP SANs),
/// both valid from a minute before `now` (clock skew) for `valid_for`. `previous_ca_pem` is
/// appended to the trust bundle so that replicas still serving the old certificate stay
/// trusted until they reload.
pub fn generate(
    hosts: &[String],
    now: Timestamp,
    valid_for: Duration,
    previous_ca_pem: Option<&str>,
) -> Result<Bundle, CertError> {
    let first = hosts.first().ok_or(CertError::NoHosts)?;
    let not_before = offset(now, -60, valid_for)?;
    let not_after = offset(now, 0, valid_for)?;

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "temporal-worker-controller webhook CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(hosts.to_vec())?;
    leaf.distinguished_name.push(DnType::CommonName, first);
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    let cert = leaf.signed_by(&key, &issuer)?;

    let mut ca_bundle_pem = ca_cert.pem();
    if let Some(prev) = previous_ca_pem.and_then(first_cert_pem) {
        ca_bundle_pem.push_str(&prev);
    }
    Ok(Bundle {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        ca_bundle_pem,
    })
}

/// `now + shift_secs` (for `not_before`) or `now + valid_for` (when `shift_secs` is 0).
fn offset(
    now: Timestamp,
    shift_secs: i64,
    valid_for: Duration,
) -> Result<time::OffsetDateTime, CertError> {
    let secs = if shift_secs == 0 {
        i64::try_from(valid_for.as_secs())
            .ok()
            .and_then(|v| now.as_second().checked_add(v))
    } else {
        now.as_second().checked_add(shift_secs)
    };
    secs.and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .ok_or(CertError::Validity(valid_for))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Vec<String> {
        vec!["twc-webhook.ns.svc".into(), "127.0.0.1".into()]
    }

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("timestamp")
    }

    #[test]
    fn a_certificate_is_renewed_only_within_renew_before_of_its_end() {
        let v = Validity {
            valid_for: Duration::from_secs(100),
            renew_before: Duration::from_secs(30),
        };
        let stored = Some("twc-webhook.ns.svc,127.0.0.1");
        let end = Some(ts(1_000));
        assert_eq!(decide(end, stored, &hosts(), ts(969), v), Decision::Keep);
        assert_eq!(decide(end, stored, &hosts(), ts(970), v), Decision::Renew);
        assert_eq!(decide(end, stored, &hosts(), ts(2_000), v), Decision::Renew);
        assert_eq!(decide(None, stored, &hosts(), ts(0), v), Decision::Create);
        assert_eq!(
            decide(end, Some("other.ns.svc"), &hosts(), ts(0), v),
            Decision::Rehost
        );
        assert_eq!(decide(end, None, &hosts(), ts(0), v), Decision::Rehost);
    }

    #[test]
    fn the_next_check_is_when_renewal_is_due_capped_and_never_zero() {
        let v = Validity {
            valid_for: Duration::from_secs(100),
            renew_before: Duration::from_secs(30),
        };
        let max = Duration::from_secs(60);
        assert_eq!(
            next_check(Some(ts(1_000)), ts(960), v, max),
            Duration::from_secs(10)
        );
        assert_eq!(next_check(Some(ts(1_000)), ts(0), v, max), max);
        assert_eq!(
            next_check(Some(ts(1_000)), ts(999), v, max),
            Duration::from_millis(200)
        );
        assert_eq!(next_check(None, ts(0), v, max), Duration::from_secs(1));
        assert_eq!(
            next_check(None, ts(0), v, Duration::from_millis(300)),
            Duration::from_millis(300)
        );
    }

    #[test]
    fn generated_certificates_chain_to_the_new_ca_and_keep_the_previous_one_trusted() {
        use rustls::client::danger::ServerCertVerifier as _;
        let now = Timestamp::now();
        let first = generate(&hosts(), now, Duration::from_secs(3600), None).expect("first");
        assert_eq!(first.ca_bundle_pem.matches("BEGIN CERTIFICATE").count(), 1);
        let end = not_after(first.cert_pem.as_bytes()).expect("notAfter");
        let want = now.as_second() + 3600;
        assert!((end.as_second() - want).abs() <= 1, "{end} vs {now}");

        let second = generate(
            &hosts(),
            now,
            Duration::from_secs(3600),
            Some(&first.ca_bundle_pem),
        )
        .expect("second");
        assert_eq!(second.ca_bundle_pem.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(second.ca_bundle_pem.ends_with(&first.ca_bundle_pem));
        assert_ne!(second.cert_pem, first.cert_pem);

        // The serving certificate verifies against the bundle for its DNS name and its IP.
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(second.ca_bundle_pem.as_bytes()) {
            roots.add(c.expect("ca")).expect("add");
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("verifier");
        let leaf = CertificateDer::from_pem_slice(second.cert_pem.as_bytes()).expect("leaf");
        let unix = rustls::pki_types::UnixTime::now();
        for name in ["twc-webhook.ns.svc", "127.0.0.1"] {
            let server = rustls::pki_types::ServerName::try_from(name).expect("name");
            verifier
                .verify_server_cert(&leaf, &[], &server, &[], unix)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let other = rustls::pki_types::ServerName::try_from("other.ns.svc").expect("name");
        assert!(
            verifier
                .verify_server_cert(&leaf, &[], &other, &[], unix)
                .is_err()
        );
    }
}
