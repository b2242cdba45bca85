//! The server's TLS identity: a certificate and its key, made at start (self-signed, for the
//! name `netsweep`) or loaded from PEM files (`serve --tls-cert/--tls-key`), and the SHA-256
//! fingerprint a client pins. One per process: every `tls` session presents it.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The name a generated certificate is made for (clients pin the certificate, not a name).
pub const SERVER_NAME: &str = "netsweep";

/// The server's certificate and the TLS configuration that presents it.
#[derive(Debug)]
pub struct Identity {
    /// The server side's TLS configuration (TLS 1.3 only).
    pub config: Arc<ServerConfig>,
    /// The leaf certificate's SHA-256 fingerprint, `AB:CD:…`.
    pub fingerprint: String,
    /// Where the certificate came from: `self-signed, made at start` or the file.
    pub source: String,
}

static IDENTITY: OnceLock<Identity> = OnceLock::new();

/// The crypto this build seals records with: ring's AES-GCM and ChaCha20-Poly1305, and key
/// exchange over X25519 first (what most of today's TLS without post-quantum groups uses;
/// ring's own order puts secp384r1 first), then the NIST curves. rustls 0.23.48 deprecates it for lacking post-quantum key exchange
/// (X25519MLKEM768 needs aws-lc-rs, a CMake build of a C library): ring builds with a C
/// compiler alone, and the key exchange each session got is recorded with its results.
pub fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::ring::kx_group;
    #[allow(deprecated)]
    let mut p = rustls::crypto::ring::default_provider();
    p.kx_groups = vec![kx_group::X25519, kx_group::SECP256R1, kx_group::SECP384R1];
    Arc::new(p)
}

/// The SHA-256 fingerprint of a DER certificate as `openssl x509 -fingerprint -sha256`
/// writes it: upper-case hex pairs joined by colons.
pub fn fingerprint(der: &[u8]) -> String {
    let d = Sha256::digest(der);
    d.iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A fingerprint as a user may write it (`sha256:`, colons or none, either case), in the
/// form [`fingerprint`] writes; the error says what a fingerprint looks like.
pub fn parse_pin(s: &str) -> Result<String, String> {
    let t = s.trim();
    let t = t
        .strip_prefix("sha256:")
        .or_else(|| t.strip_prefix("SHA256:"))
        .or_else(|| t.strip_prefix("sha256="))
        .unwrap_or(t);
    let hex: String = t.chars().filter(|c| *c != ':').collect();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "{s:?} is not a SHA-256 certificate fingerprint: give 32 bytes in hex, colons \
             optional, as `netsweep serve` prints it (or `openssl x509 -noout -fingerprint \
             -sha256 -in CERT`)"
        ));
    }
    let up = hex.to_ascii_uppercase();
    Ok((0..32)
        .map(|i| &up[2 * i..2 * i + 2])
        .collect::<Vec<_>>()
        .join(":"))
}

fn config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<ServerConfig>, String> {
    let c = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS 1.3 with ring: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("the certificate and key do not make a TLS identity: {e}"))?;
    Ok(Arc::new(c))
}

/// A self-signed certificate for [`SERVER_NAME`] on a fresh ECDSA P-256 key.
pub fn generate() -> Result<Identity, String> {
    let made = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
        .map_err(|e| format!("cannot make a self-signed certificate: {e}"))?;
    let der = made.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pair.serialize_der()));
    Ok(Identity {
        fingerprint: fingerprint(&der),
        config: config(vec![der], key)?,
        source: "self-signed, made at start".into(),
    })
}

/// The identity in a PEM certificate chain (leaf first) and a PEM private key.
pub fn load(cert: &Path, key: &Path) -> Result<Identity, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    let leaf = chain.first().ok_or_else(|| {
        format!(
            "--tls-cert {}: no certificate in it (a PEM file with -----BEGIN CERTIFICATE-----)",
            cert.display()
        )
    })?;
    let fp = fingerprint(leaf);
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!(
            "--tls-key {}: {e} (give the certificate's private key in PEM: PKCS#8, PKCS#1 or SEC1)",
            key.display()
        )
    })?;
    Ok(Identity {
        fingerprint: fp,
        config: config(chain, key)?,
        source: cert.display().to_string(),
    })
}

/// Makes the identity this process presents the one in `cert` and `key`, before any
/// session: refused once one is in use.
pub fn install(cert: &Path, key: &Path) -> Result<&'static Identity, String> {
    let id = load(cert, key)?;
    IDENTITY
        .set(id)
        .map_err(|_| "a TLS identity is already in use in this process".to_string())?;
    Ok(IDENTITY.get().expect("just set"))
}

/// The identity this process presents: the installed one, or a self-signed one made the
/// first time it is asked for.
pub fn server() -> Result<&'static Identity, String> {
    if let Some(id) = IDENTITY.get() {
        return Ok(id);
    }
    let id = generate()?;
    Ok(IDENTITY.get_or_init(|| id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_read_in_any_common_spelling() {
        let fp = generate().unwrap().fingerprint;
        assert_eq!(fp.len(), 32 * 3 - 1);
        let bare: String = fp.chars().filter(|c| *c != ':').collect();
        for s in [
            fp.clone(),
            bare.to_ascii_lowercase(),
            format!("sha256:{bare}"),
            format!("SHA256:{}", fp.to_ascii_lowercase()),
        ] {
            assert_eq!(parse_pin(&s).as_deref(), Ok(fp.as_str()), "{s}");
        }
        for bad in ["", "AB:CD", &bare[..62], &format!("{}ZZ", &bare[..62])] {
            assert!(parse_pin(bad).unwrap_err().contains("SHA-256"), "{bad}");
        }
    }

    #[test]
    fn two_generated_identities_differ() {
        assert_ne!(
            generate().unwrap().fingerprint,
            generate().unwrap().fingerprint
        );
    }
}
