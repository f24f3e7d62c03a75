//! Credentials for a `TemporalConnection`, read from its Secret and checked before we dial, so
//! a broken Secret is reported as `AuthSecretInvalid` with a precise message rather than as an
//! opaque TLS handshake failure. Secret contents never appear in errors or `Debug` output.

use std::fmt;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Secret;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest as _, Sha256};

use crate::api::connection::AuthMode;

pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_KEY_KEY: &str = "tls.key";
pub const CA_CERT_KEY: &str = "ca.crt";
/// A client certificate this close to `notAfter` is refused, like the Go controller does.
pub const CERT_EXPIRY_MARGIN: SignedDuration = SignedDuration::from_mins(5);

const TYPE_TLS: &str = "kubernetes.io/tls";
const TYPE_OPAQUE: &str = "Opaque";

/// Credential material for one connection.
#[derive(Clone, PartialEq, Eq)]
pub enum AuthMaterial {
    Plain,
    MutualTls {
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
        ca_pem: Option<Vec<u8>>,
    },
    ApiKey(String),
}

impl fmt::Debug for AuthMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only the kind and a short fingerprint: enough to tell two materials apart in logs.
        let fp = self.fingerprint();
        let short = fp.get(..12).unwrap_or(&fp);
        match self {
            AuthMaterial::Plain => f.write_str("Plain"),
            AuthMaterial::MutualTls { ca_pem, .. } => {
                write!(
                    f,
                    "MutualTls {{ fingerprint: {short}, ca: {} }}",
                    ca_pem.is_some()
                )
            }
            AuthMaterial::ApiKey(_) => write!(f, "ApiKey {{ fingerprint: {short} }}"),
        }
    }
}

impl AuthMaterial {
    pub fn kind(&self) -> &'static str {
        match self {
            AuthMaterial::Plain => "plain",
            AuthMaterial::MutualTls { .. } => "mtls",
            AuthMaterial::ApiKey(_) => "api-key",
        }
    }

    /// SHA-256 over the kind and the length-prefixed material (hex). Distinct materials get
    /// distinct fingerprints, so a rotated Secret maps to a new pooled connection.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_be_bytes());
            h.update(bytes);
        };
        field(self.kind().as_bytes());
        match self {
            AuthMaterial::Plain => {}
            AuthMaterial::MutualTls {
                cert_pem,
                key_pem,
                ca_pem,
            } => {
                field(cert_pem);
                field(key_pem);
                match ca_pem {
                    Some(ca) => field(ca),
                    None => field(b"\0no-ca"),
                }
            }
            AuthMaterial::ApiKey(key) => field(key.as_bytes()),
        }
        hex::encode(h.finalize())
    }

    /// `notAfter` of the client certificate (mTLS only; `None` if it cannot be read).
    pub fn cert_not_after(&self) -> Option<Timestamp> {
        match self {
            AuthMaterial::MutualTls { cert_pem, .. } => {
                let leaf = CertificateDer::pem_slice_iter(cert_pem).next()?.ok()?;
                cert_not_after(leaf.as_ref())
            }
            _ => None,
        }
    }
}

#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    #[error("{mode} Secret {name:?} not found")]
    SecretNotFound { mode: &'static str, name: String },
    #[error("Secret {name:?} has type {actual:?}; {mode} needs type {expected}")]
    WrongType {
        mode: &'static str,
        name: String,
        actual: String,
        expected: &'static str,
    },
    #[error("Secret {name:?} has no {key:?} entry, or it is empty")]
    MissingKey { name: String, key: String },
    #[error("Secret {name:?}: {key:?} is not valid PEM: {reason}")]
    InvalidPem {
        name: String,
        key: &'static str,
        reason: String,
    },
    #[error(
        "Secret {name:?}: the private key in tls.key does not belong to the certificate in tls.crt"
    )]
    KeyMismatch { name: String },
    #[error(
        "Secret {name:?}: the certificate in tls.crt expires at {not_after}, which is in the past or within 5 minutes"
    )]
    CertExpiring { name: String, not_after: Timestamp },
    #[error("Secret {name:?}: the API key in {key:?} {reason}")]
    InvalidApiKey {
        name: String,
        key: String,
        reason: &'static str,
    },
}

/// Reads and checks the credentials a connection's auth mode needs. `secret` is the Secret named
/// by the mode (`None` when it does not exist); it is ignored in plain mode.
pub fn auth_from_secret(
    mode: &AuthMode<'_>,
    secret: Option<&Secret>,
) -> Result<AuthMaterial, AuthError> {
    auth_from_secret_at(mode, secret, Timestamp::now())
}

pub(crate) fn auth_from_secret_at(
    mode: &AuthMode<'_>,
    secret: Option<&Secret>,
    now: Timestamp,
) -> Result<AuthMaterial, AuthError> {
    match mode {
        AuthMode::Plain => Ok(AuthMaterial::Plain),
        AuthMode::MutualTls { secret: name } => {
            let secret = secret.ok_or_else(|| AuthError::SecretNotFound {
                mode: "mTLS",
                name: name.to_string(),
            })?;
            check_type(
                secret,
                name,
                "mTLS",
                &[TYPE_TLS, TYPE_OPAQUE],
                "kubernetes.io/tls or Opaque",
            )?;
            let cert_pem =
                entry(secret, TLS_CERT_KEY).ok_or_else(|| missing(name, TLS_CERT_KEY))?;
            let key_pem = entry(secret, TLS_KEY_KEY).ok_or_else(|| missing(name, TLS_KEY_KEY))?;
            let ca_pem = entry(secret, CA_CERT_KEY);
            check_mtls(name, &cert_pem, &key_pem, ca_pem.as_deref(), now)?;
            Ok(AuthMaterial::MutualTls {
                cert_pem,
                key_pem,
                ca_pem,
            })
        }
        AuthMode::ApiKey { secret: name, key } => {
            let secret = secret.ok_or_else(|| AuthError::SecretNotFound {
                mode: "API key",
                name: name.to_string(),
            })?;
            check_type(secret, name, "API key", &[TYPE_OPAQUE], "Opaque")?;
            let raw = entry(secret, key).ok_or_else(|| missing(name, key))?;
            let invalid = |reason| AuthError::InvalidApiKey {
                name: name.to_string(),
                key: key.to_string(),
                reason,
            };
            let text = String::from_utf8(raw).map_err(|_| invalid("is not UTF-8 text"))?;
            // A trailing newline from `kubectl create secret --from-file` is common and harmless.
            let text = text.trim();
            if text.is_empty() {
                return Err(invalid("is blank"));
            }
            // It travels as an `authorization: Bearer …` header value.
            if !text.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
                return Err(invalid(
                    "contains characters that cannot be sent in a gRPC header",
                ));
            }
            Ok(AuthMaterial::ApiKey(text.to_string()))
        }
    }
}

/// The `ca.crt` of the Secret of `tls.caCertSecretRef` (`None` when it does not exist). As in
/// the Go controller v1.10, a Secret without `ca.crt` is an error, never a silent fall back to
/// the system roots alone.
pub fn ca_from_secret(name: &str, secret: Option<&Secret>) -> Result<Vec<u8>, AuthError> {
    const MODE: &str = "CA certificate (tls.caCertSecretRef)";
    let secret = secret.ok_or_else(|| AuthError::SecretNotFound {
        mode: MODE,
        name: name.to_string(),
    })?;
    check_type(
        secret,
        name,
        MODE,
        &[TYPE_TLS, TYPE_OPAQUE],
        "kubernetes.io/tls or Opaque",
    )?;
    let ca = entry(secret, CA_CERT_KEY).ok_or_else(|| missing(name, CA_CERT_KEY))?;
    parse_certs(&ca).map_err(|reason| AuthError::InvalidPem {
        name: name.to_string(),
        key: CA_CERT_KEY,
        reason,
    })?;
    Ok(ca)
}

fn missing(name: &str, key: &str) -> AuthError {
    AuthError::MissingKey {
        name: name.to_string(),
        key: key.to_string(),
    }
}

fn check_type(
    secret: &Secret,
    name: &str,
    mode: &'static str,
    allowed: &[&str],
    expected: &'static str,
) -> Result<(), AuthError> {
    // An unset type is what the API server defaults to Opaque.
    let actual = secret.type_.as_deref().unwrap_or(TYPE_OPAQUE);
    if allowed.contains(&actual) {
        Ok(())
    } else {
        Err(AuthError::WrongType {
            mode,
            name: name.to_string(),
            actual: actual.to_string(),
            expected,
        })
    }
}

/// The value of `key` (`data`, then `stringData`), `None` when absent or empty.
fn entry(secret: &Secret, key: &str) -> Option<Vec<u8>> {
    let from_data = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone());
    let value = from_data.or_else(|| {
        secret
            .string_data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|s| s.clone().into_bytes())
    });
    value.filter(|v| !v.iter().all(u8::is_ascii_whitespace))
}

fn check_mtls(
    name: &str,
    cert_pem: &[u8],
    key_pem: &[u8],
    ca_pem: Option<&[u8]>,
    now: Timestamp,
) -> Result<(), AuthError> {
    let pem_err = |key: &'static str, reason: String| AuthError::InvalidPem {
        name: name.to_string(),
        key,
        reason,
    };
    let chain = parse_certs(cert_pem).map_err(|r| pem_err(TLS_CERT_KEY, r))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| pem_err(TLS_KEY_KEY, pem_reason("private key", &e)))?;
    if let Some(ca) = ca_pem {
        parse_certs(ca).map_err(|r| pem_err(CA_CERT_KEY, r))?;
    }
    let leaf = chain
        .first()
        .cloned()
        .ok_or_else(|| pem_err(TLS_CERT_KEY, "no CERTIFICATE block".into()))?;
    let not_after = cert_not_after(leaf.as_ref()).ok_or_else(|| {
        pem_err(
            TLS_CERT_KEY,
            "the first certificate is not a readable X.509 certificate".into(),
        )
    })?;
    if now >= not_after - CERT_EXPIRY_MARGIN {
        return Err(AuthError::CertExpiring {
            name: name.to_string(),
            not_after,
        });
    }
    let provider = rustls::crypto::ring::default_provider();
    match rustls::sign::CertifiedKey::from_der(chain, key, &provider) {
        Ok(_) => Ok(()),
        Err(rustls::Error::InconsistentKeys(_)) => Err(AuthError::KeyMismatch {
            name: name.to_string(),
        }),
        Err(e) => Err(pem_err(
            TLS_KEY_KEY,
            format!("unusable private key or certificate ({e})"),
        )),
    }
}

fn parse_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_reason("certificate", &e))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block".into());
    }
    Ok(certs)
}

/// A PEM error without echoing any of the input (the error type can carry the bytes).
fn pem_reason(what: &str, e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::NoItemsFound => format!("no {what} block"),
        E::MissingSectionEnd { .. } | E::IllegalSectionStart { .. } => {
            format!("malformed {what} block")
        }
        E::Base64Decode(_) => format!("{what} block is not valid base64"),
        _ => format!("cannot read {what}"),
    }
}

// --- Minimal DER reading: just enough of X.509 to find `validity.notAfter`. ---

/// One DER element: (tag, contents, remaining input). Low-tag-number form only, which covers
/// every element on the path to `validity`.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | *b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// `Certificate → tbsCertificate → [version] serial signature issuer validity → notAfter`.
pub(crate) fn cert_not_after(der: &[u8]) -> Option<Timestamp> {
    const SEQUENCE: u8 = 0x30;
    let (tag, cert, _) = der_element(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = der_element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut rest = tbs;
    let (tag, _, after) = der_element(rest)?;
    if tag == 0xa0 {
        // Explicit [0] version.
        rest = after;
    }
    for _ in 0..3 {
        // serialNumber, signature, issuer
        let (_, _, after) = der_element(rest)?;
        rest = after;
    }
    let (tag, validity, _) = der_element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let (_, _, after_not_before) = der_element(validity)?;
    let (tag, not_after, _) = der_element(after_not_before)?;
    parse_der_time(tag, not_after)
}

fn parse_der_time(tag: u8, value: &[u8]) -> Option<Timestamp> {
    let text = std::str::from_utf8(value).ok()?;
    let digits = text.strip_suffix('Z')?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |range: std::ops::Range<usize>| digits.get(range)?.parse::<i16>().ok();
    let (year, rest) = match (tag, digits.len()) {
        // UTCTime YYMMDDHHMMSS: 50–99 are 1950–1999 (RFC 5280).
        (0x17, 12) => {
            let yy = num(0..2)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, 2)
        }
        // GeneralizedTime YYYYMMDDHHMMSS.
        (0x18, 14) => (num(0..4)?, 4),
        _ => return None,
    };
    let field = |i: usize| num(rest + 2 * i..rest + 2 * i + 2);
    let dt = jiff::civil::DateTime::new(
        year,
        field(0)? as i8,
        field(1)? as i8,
        field(2)? as i8,
        field(3)? as i8,
        field(4)? as i8,
        0,
    )
    .ok()?;
    dt.to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    // Fixtures made with the openssl CLI (see tests/fixtures/tls/README.md).
    const CERT: &str = include_str!("../../tests/fixtures/tls/client.crt");
    const KEY: &str = include_str!("../../tests/fixtures/tls/client.key");
    const OTHER_KEY: &str = include_str!("../../tests/fixtures/tls/other.key");
    const CA: &str = include_str!("../../tests/fixtures/tls/ca.crt");
    const EC_CERT: &str = include_str!("../../tests/fixtures/tls/ec-client.crt");
    const EC_KEY: &str = include_str!("../../tests/fixtures/tls/ec-client.key");
    const SHORT_CERT: &str = include_str!("../../tests/fixtures/tls/short-lived.crt");
    /// `notAfter` of client.crt / ec-client.crt (`openssl x509 -enddate`).
    const CERT_NOT_AFTER: &str = "2125-01-01T00:00:00Z";
    /// `notAfter` of short-lived.crt, signed with client.key.
    const SHORT_NOT_AFTER: &str = "2030-06-15T12:00:00Z";

    fn secret(type_: Option<&str>, entries: &[(&str, &str)]) -> Secret {
        Secret {
            type_: type_.map(String::from),
            data: Some(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

    fn mtls() -> AuthMode<'static> {
        AuthMode::MutualTls {
            secret: "client-tls",
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn now() -> Timestamp {
        at("2026-01-01T00:00:00Z")
    }

    #[test]
    fn plain_mode_needs_no_secret() {
        assert_eq!(
            auth_from_secret(&AuthMode::Plain, None),
            Ok(AuthMaterial::Plain)
        );
    }

    #[test]
    fn mtls_reads_cert_key_and_optional_ca() {
        let s = secret(
            Some(TYPE_TLS),
            &[(TLS_CERT_KEY, CERT), (TLS_KEY_KEY, KEY), (CA_CERT_KEY, CA)],
        );
        let m = auth_from_secret_at(&mtls(), Some(&s), now()).unwrap();
        assert_eq!(
            m,
            AuthMaterial::MutualTls {
                cert_pem: CERT.as_bytes().to_vec(),
                key_pem: KEY.as_bytes().to_vec(),
                ca_pem: Some(CA.as_bytes().to_vec())
            }
        );
        assert_eq!(m.cert_not_after(), Some(at(CERT_NOT_AFTER)));
        // Opaque and untyped Secrets work too; an empty ca.crt counts as absent.
        let s = secret(
            None,
            &[
                (TLS_CERT_KEY, EC_CERT),
                (TLS_KEY_KEY, EC_KEY),
                (CA_CERT_KEY, "\n"),
            ],
        );
        let m = auth_from_secret_at(&mtls(), Some(&s), now()).unwrap();
        assert!(matches!(m, AuthMaterial::MutualTls { ca_pem: None, .. }));
        assert_eq!(m.cert_not_after(), Some(at(CERT_NOT_AFTER)));
    }

    #[test]
    fn mtls_errors_are_specific_and_secret_free() {
        let missing_secret = auth_from_secret_at(&mtls(), None, now()).unwrap_err();
        assert_eq!(
            missing_secret,
            AuthError::SecretNotFound {
                mode: "mTLS",
                name: "client-tls".into()
            }
        );

        let wrong = secret(
            Some("kubernetes.io/basic-auth"),
            &[(TLS_CERT_KEY, CERT), (TLS_KEY_KEY, KEY)],
        );
        assert!(matches!(
            auth_from_secret_at(&mtls(), Some(&wrong), now()),
            Err(AuthError::WrongType { .. })
        ));

        let no_key = secret(Some(TYPE_TLS), &[(TLS_CERT_KEY, CERT)]);
        assert_eq!(
            auth_from_secret_at(&mtls(), Some(&no_key), now()).unwrap_err(),
            AuthError::MissingKey {
                name: "client-tls".into(),
                key: TLS_KEY_KEY.into()
            }
        );

        let garbage = secret(
            Some(TYPE_TLS),
            &[(TLS_CERT_KEY, "hello"), (TLS_KEY_KEY, KEY)],
        );
        let e = auth_from_secret_at(&mtls(), Some(&garbage), now()).unwrap_err();
        assert!(
            matches!(
                e,
                AuthError::InvalidPem {
                    key: TLS_CERT_KEY,
                    ..
                }
            ),
            "{e:?}"
        );

        // The key is a certificate, not a key.
        let swapped = secret(Some(TYPE_TLS), &[(TLS_CERT_KEY, CERT), (TLS_KEY_KEY, CERT)]);
        let e = auth_from_secret_at(&mtls(), Some(&swapped), now()).unwrap_err();
        assert!(
            matches!(
                e,
                AuthError::InvalidPem {
                    key: TLS_KEY_KEY,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(!e.to_string().contains("BEGIN"), "{e}");

        let bad_ca = secret(
            Some(TYPE_TLS),
            &[
                (TLS_CERT_KEY, CERT),
                (TLS_KEY_KEY, KEY),
                (CA_CERT_KEY, "not pem"),
            ],
        );
        let e = auth_from_secret_at(&mtls(), Some(&bad_ca), now()).unwrap_err();
        assert!(
            matches!(
                e,
                AuthError::InvalidPem {
                    key: CA_CERT_KEY,
                    ..
                }
            ),
            "{e:?}"
        );

        let mismatch = secret(
            Some(TYPE_TLS),
            &[(TLS_CERT_KEY, CERT), (TLS_KEY_KEY, OTHER_KEY)],
        );
        let e = auth_from_secret_at(&mtls(), Some(&mismatch), now()).unwrap_err();
        assert_eq!(
            e,
            AuthError::KeyMismatch {
                name: "client-tls".into()
            }
        );
        let text = e.to_string();
        assert!(!text.contains("PRIVATE") && !text.contains("MII"), "{text}");
    }

    #[test]
    fn certificate_expiry_margin() {
        let s = secret(
            Some(TYPE_TLS),
            &[(TLS_CERT_KEY, SHORT_CERT), (TLS_KEY_KEY, KEY)],
        );
        let not_after = at(SHORT_NOT_AFTER);
        // Six minutes before expiry is fine; four minutes before is refused; after is refused.
        assert!(
            auth_from_secret_at(&mtls(), Some(&s), not_after - SignedDuration::from_mins(6))
                .is_ok()
        );
        for when in [
            not_after - SignedDuration::from_mins(4),
            not_after + SignedDuration::from_secs(1),
        ] {
            assert_eq!(
                auth_from_secret_at(&mtls(), Some(&s), when).unwrap_err(),
                AuthError::CertExpiring {
                    name: "client-tls".into(),
                    not_after
                }
            );
        }
    }

    #[test]
    fn api_key_is_trimmed_and_validated() {
        let mode = AuthMode::ApiKey {
            secret: "cloud",
            key: "apiKey",
        };
        let s = secret(Some(TYPE_OPAQUE), &[("apiKey", "abc.def-123\n")]);
        assert_eq!(
            auth_from_secret_at(&mode, Some(&s), now()),
            Ok(AuthMaterial::ApiKey("abc.def-123".into()))
        );

        let blank = secret(None, &[("apiKey", "   ")]);
        assert_eq!(
            auth_from_secret_at(&mode, Some(&blank), now()).unwrap_err(),
            AuthError::MissingKey {
                name: "cloud".into(),
                key: "apiKey".into()
            }
        );
        let other_key = secret(None, &[("token", "abc")]);
        assert!(matches!(
            auth_from_secret_at(&mode, Some(&other_key), now()),
            Err(AuthError::MissingKey { .. })
        ));
        let tls_type = secret(Some(TYPE_TLS), &[("apiKey", "abc")]);
        assert!(matches!(
            auth_from_secret_at(&mode, Some(&tls_type), now()),
            Err(AuthError::WrongType { .. })
        ));
        let control = secret(None, &[("apiKey", "ab\u{7}c")]);
        let e = auth_from_secret_at(&mode, Some(&control), now()).unwrap_err();
        assert!(matches!(e, AuthError::InvalidApiKey { .. }));
        assert!(!e.to_string().contains("ab"), "{e}");
        assert_eq!(
            auth_from_secret_at(&mode, None, now()).unwrap_err(),
            AuthError::SecretNotFound {
                mode: "API key",
                name: "cloud".into()
            }
        );
        // stringData is honoured too (objects built in tests or by tools that never round-trip).
        let string_data = Secret {
            string_data: Some(BTreeMap::from([("apiKey".to_string(), "xyz".to_string())])),
            ..Default::default()
        };
        assert_eq!(
            auth_from_secret_at(&mode, Some(&string_data), now()),
            Ok(AuthMaterial::ApiKey("xyz".into()))
        );
    }

    #[test]
    fn ca_cert_secret_needs_a_certificate_in_ca_crt() {
        for type_ in [Some(TYPE_OPAQUE), Some(TYPE_TLS), None] {
            let s = secret(type_, &[(CA_CERT_KEY, CA)]);
            assert_eq!(ca_from_secret("ca", Some(&s)), Ok(CA.as_bytes().to_vec()));
        }
        assert!(matches!(
            ca_from_secret("ca", None),
            Err(AuthError::SecretNotFound { .. })
        ));
        let no_ca = secret(None, &[(TLS_CERT_KEY, CERT)]);
        assert_eq!(
            ca_from_secret("ca", Some(&no_ca)),
            Err(AuthError::MissingKey {
                name: "ca".into(),
                key: CA_CERT_KEY.into()
            })
        );
        let garbage = secret(None, &[(CA_CERT_KEY, "not pem")]);
        assert!(matches!(
            ca_from_secret("ca", Some(&garbage)),
            Err(AuthError::InvalidPem {
                key: CA_CERT_KEY,
                ..
            })
        ));
        let wrong = secret(Some("kubernetes.io/basic-auth"), &[(CA_CERT_KEY, CA)]);
        let e = ca_from_secret("ca", Some(&wrong)).unwrap_err();
        assert!(e.to_string().contains("tls.caCertSecretRef"), "{e}");
    }

    #[test]
    fn debug_never_prints_material_and_fingerprints_differ() {
        let key = AuthMaterial::ApiKey("super-secret-value".into());
        let dbg = format!("{key:?}");
        assert!(!dbg.contains("super-secret-value"), "{dbg}");
        let m = AuthMaterial::MutualTls {
            cert_pem: CERT.into(),
            key_pem: KEY.into(),
            ca_pem: None,
        };
        let dbg = format!("{m:?}");
        assert!(!dbg.contains("BEGIN") && !dbg.contains("MII"), "{dbg}");

        let fps = [
            AuthMaterial::Plain.fingerprint(),
            key.fingerprint(),
            AuthMaterial::ApiKey("other".into()).fingerprint(),
            m.fingerprint(),
            AuthMaterial::MutualTls {
                cert_pem: CERT.into(),
                key_pem: KEY.into(),
                ca_pem: Some(CA.into()),
            }
            .fingerprint(),
            // Moving bytes between fields must not collide.
            AuthMaterial::MutualTls {
                cert_pem: [CERT, KEY].concat().into(),
                key_pem: vec![],
                ca_pem: None,
            }
            .fingerprint(),
        ];
        for (i, a) in fps.iter().enumerate() {
            assert_eq!(a.len(), 64);
            for b in &fps[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(
            key.fingerprint(),
            AuthMaterial::ApiKey("super-secret-value".into()).fingerprint()
        );
    }

    #[test]
    fn der_time_forms() {
        assert_eq!(
            parse_der_time(0x17, b"491231235959Z"),
            Some(at("2049-12-31T23:59:59Z"))
        );
        assert_eq!(
            parse_der_time(0x17, b"500101000000Z"),
            Some(at("1950-01-01T00:00:00Z"))
        );
        assert_eq!(
            parse_der_time(0x18, b"21250101000000Z"),
            Some(at("2125-01-01T00:00:00Z"))
        );
        assert_eq!(parse_der_time(0x18, b"2125010100000Z"), None);
        assert_eq!(parse_der_time(0x17, b"491331235959Z"), None);
        assert_eq!(parse_der_time(0x17, b"4912312359+0"), None);
        assert_eq!(cert_not_after(b"\x30\x03\x02\x01"), None);
        assert_eq!(cert_not_after(&[]), None);
    }
}
