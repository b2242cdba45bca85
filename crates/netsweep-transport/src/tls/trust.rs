//! Which certificates a client of an HTTPS server (`netsweep rpm`) accepts: the one with a
//! pinned SHA-256 fingerprint (`--tls-pin`, as `serve` prints it), any (`--insecure`, marked in
//! the results), or one the system's roots vouch for (the default, for public servers).

use super::identity::provider;
use super::pin::Pinned;
use rustls::{ClientConfig, RootCertStore};
use std::sync::Arc;

/// The client's choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The certificate with this fingerprint (`AB:CD:…`), whatever its name or issuer.
    Pin(String),
    /// Any certificate (its handshake signature still checked): only for a test server.
    Insecure,
    /// A certificate for the URL's host that the system's roots vouch for.
    System,
}

impl Trust {
    /// How it reads in results: `pinned AB:CD:…`, `insecure`, `system roots`.
    pub fn label(&self) -> String {
        match self {
            Trust::Pin(fp) => format!("pinned {fp}"),
            Trust::Insecure => "insecure".to_string(),
            Trust::System => "system roots".to_string(),
        }
    }
}

/// The TLS configuration for `trust` (TLS 1.3 or 1.2), offering ALPN h2 then http/1.1.
pub fn client_config(trust: &Trust) -> Result<Arc<ClientConfig>, String> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS with ring: {e}"))?;
    let mut c = match trust {
        Trust::System => {
            let found = rustls_native_certs::load_native_certs();
            let mut roots = RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "no trusted root certificates found on this system (install \
                     ca-certificates), so no server can be verified; give --tls-pin with the \
                     server's fingerprint, or --insecure for a test server"
                        .into(),
                );
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::Pin(fp) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned::by_user(fp.clone())))
            .with_no_client_auth(),
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned::any()))
            .with_no_client_auth(),
    };
    c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}
