//! How the server's certificate is checked: the system's roots by default, a CA bundle for a
//! vCenter with its own CA, or — explicitly — nothing, for labs with self-signed certificates
//! (said in the log once per client).
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;

use crate::error::{Error, Result};

/// How the server's certificate is checked. The default verifies against the system's roots.
#[derive(Clone, Debug, Default)]
pub enum Tls {
    /// Verify against the operating system's trusted roots.
    #[default]
    SystemRoots,
    /// Verify against these PEM certificates (the vCenter's CA, or its own certificate).
    CaBundle(Vec<u8>),
    /// Accept any certificate: only for labs with self-signed certificates.
    Insecure,
}
/// True when `e` is a rustls error, or an I/O error wrapping one (at any depth: hyper-rustls
/// wraps tokio-rustls's I/O error in another).
pub(crate) fn holds_rustls_error(e: &(dyn std::error::Error + 'static)) -> bool {
    if e.downcast_ref::<rustls::Error>().is_some() {
        return true;
    }
    match e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
    {
        Some(inner) => holds_rustls_error(inner),
        None => false,
    }
}
pub(crate) fn tls_config(tls: &Tls) -> Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS: {e}")))?;
    match tls {
        Tls::SystemRoots => {
            let found = rustls_native_certs::load_native_certs();
            let mut roots = RootCertStore::empty();
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(Error::Config(
                    "no trusted root certificate on this system: give a CA bundle".into(),
                ));
            }
            Ok(builder.with_root_certificates(roots).with_no_client_auth())
        }
        Tls::CaBundle(pem) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| Error::Config(format!("CA bundle: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| Error::Config(format!("CA bundle: {e}")))?;
            }
            if roots.is_empty() {
                return Err(Error::Config("CA bundle holds no certificate".into()));
            }
            Ok(builder.with_root_certificates(roots).with_no_client_auth())
        }
        Tls::Insecure => {
            tracing::warn!("TLS certificate verification is off for vSphere (insecure mode)");
            Ok(builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
                .with_no_client_auth())
        }
    }
}

/// Accepts any certificate but still checks the handshake's signatures.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_ca_bundle_is_refused() {
        assert!(matches!(
            tls_config(&Tls::CaBundle(b"not a pem".to_vec())),
            Err(Error::Config(_))
        ));
    }
}
