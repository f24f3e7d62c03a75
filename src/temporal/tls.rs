//! Which server certificates an mTLS connection trusts: the system roots **plus** the Secret's
//! `ca.crt`.
//!
//! cert-manager writes the issuer of the *client* certificate into `ca.crt`. The SDK's
//! `server_root_ca_cert` trusts that CA *instead of* the system roots, which refuses Temporal
//! Cloud's publicly signed server certificate. The Go controller appends `ca.crt` to the system
//! pool; this does the same with a rustls root store handed to the SDK as its server
//! certificate verifier (the narrowest hook `temporalio-client` 1.1 offers: it takes no
//! rustls `ClientConfig`).

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use temporalio_client::danger::ServerCertVerifier;

/// Why the trust store could not be built.
#[derive(thiserror::Error, Debug)]
pub enum TrustError {
    #[error("ca.crt holds no usable CA certificate")]
    NoCaCertificate,
    #[error("building the server certificate verifier: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
}

/// What the system trust store held when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemRoots {
    /// CA certificates parsed and usable as roots.
    pub loaded: usize,
    /// Files or certificates that could not be read or parsed.
    pub errors: usize,
}

/// Reads the system trust store as [`system_roots_plus`] does (`SSL_CERT_FILE`, `SSL_CERT_DIR`,
/// else the distribution's bundle, e.g. the image's `/etc/ssl/certs/ca-certificates.crt`), so
/// that the controller can say at start whether its image has CA certificates at all: without
/// them, TLS to a publicly signed server (Temporal Cloud) fails only at the first connection.
pub fn system_roots() -> SystemRoots {
    let native = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (loaded, unparsable) = roots.add_parsable_certificates(native.certs);
    SystemRoots {
        loaded,
        errors: native.errors.len() + unparsable,
    }
}

/// A verifier trusting the system roots (as `rustls-native-certs` finds them, which honours
/// `SSL_CERT_FILE` and `SSL_CERT_DIR`) and every certificate in `ca_pem`.
pub fn system_roots_plus(ca_pem: &[u8]) -> Result<Arc<dyn ServerCertVerifier>, TrustError> {
    let native = rustls_native_certs::load_native_certs();
    if !native.errors.is_empty() {
        // An image without a CA bundle still works with ca.crt alone, as before.
        tracing::debug!(errors = ?native.errors, "some system root certificates could not be loaded");
    }
    let mut roots = RootCertStore::empty();
    let (system, _) = roots.add_parsable_certificates(native.certs);
    let (added, _) = roots
        .add_parsable_certificates(CertificateDer::pem_slice_iter(ca_pem).filter_map(Result::ok));
    if added == 0 {
        return Err(TrustError::NoCaCertificate);
    }
    tracing::debug!(
        system_roots = system,
        ca_crt = added,
        "server trust: system roots plus ca.crt"
    );
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
    Ok(verifier)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = include_str!("../../tests/fixtures/tls/ca.crt");

    #[test]
    fn ca_crt_must_hold_a_certificate() {
        assert!(system_roots_plus(CA.as_bytes()).is_ok());
        assert!(matches!(
            system_roots_plus(b"not pem"),
            Err(TrustError::NoCaCertificate)
        ));
    }
}
