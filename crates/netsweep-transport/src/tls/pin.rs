//! The client's check of the server's certificate: the one whose SHA-256 fingerprint the
//! session announced on its (authenticated, where a key is set) control connection, and no
//! other; names and issuers do not matter, and the handshake's signature must verify.

use super::identity::{fingerprint, provider};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, Error, SignatureScheme};
use std::sync::Arc;

/// Accepts the certificate with one fingerprint (or, made by [`Pinned::any`], any: the
/// handshake's signature is checked either way).
#[derive(Debug)]
pub struct Pinned {
    want: Option<String>,
    /// The fingerprint came from the session's control connection, not from the user.
    announced: bool,
    algs: WebPkiSupportedAlgorithms,
}

impl Pinned {
    /// A verifier for the certificate whose fingerprint (`AB:CD:…`) its session announced.
    pub fn new(want: String) -> Self {
        Self {
            want: Some(want),
            announced: true,
            algs: provider().signature_verification_algorithms,
        }
    }

    /// A verifier for the certificate whose fingerprint the user gave (`--tls-pin`).
    pub fn by_user(want: String) -> Self {
        Self {
            announced: false,
            ..Self::new(want)
        }
    }

    /// A verifier that accepts any certificate (`--insecure`).
    pub fn any() -> Self {
        Self {
            want: None,
            ..Self::by_user(String::new())
        }
    }
}

/// The client side's TLS configuration (TLS 1.3 only) accepting the certificate `want`.
pub fn client_config(want: String) -> Result<Arc<ClientConfig>, String> {
    let c = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS 1.3 with ring: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned::new(want)))
        .with_no_client_auth();
    Ok(Arc::new(c))
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let Some(want) = &self.want else {
            return Ok(ServerCertVerified::assertion());
        };
        let got = fingerprint(end_entity);
        if &got == want {
            Ok(ServerCertVerified::assertion())
        } else if !self.announced {
            Err(Error::General(format!(
                "the server presented certificate {got}, not the pinned {want}"
            )))
        } else {
            Err(Error::General(format!(
                "the server's data path presented certificate {got}, not {} as its session \
                 announced: something between the hosts answered for it",
                want
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}
