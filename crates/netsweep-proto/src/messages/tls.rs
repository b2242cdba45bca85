//! What a `tls` endpoint's handshake agreed, reported beside the socket's knobs.

use serde::{Deserialize, Serialize};

/// The TLS session a `tls` endpoint got: the protocol, the cipher suite and key exchange the
/// two ends agreed, where the records are sealed, and whether the kernel could have done it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct TlsGranted {
    /// The protocol version agreed (`TLSv1.3`).
    pub version: String,
    /// The cipher suite agreed, by its IANA name (`TLS13_AES_256_GCM_SHA384`).
    pub cipher_suite: String,
    /// The key-exchange group agreed (`X25519`).
    pub key_exchange: String,
    /// Where records are sealed and opened: `user space (rustls)` or `kernel (kTLS)`.
    pub records: String,
    /// Whether this host's kernel offers TLS (the `tls` upper-layer protocol), and so
    /// whether kernel TLS could be measured here.
    pub kernel_tls: String,
    /// The SHA-256 fingerprint of the server's certificate (as `AB:CD:…`), as this end saw
    /// it in the handshake.
    pub certificate: String,
}
