//! Optional authentication with a pre-shared key: mutual HMAC-SHA256 challenge-response.
//!
//! The client's `hello` carries its nonce; a server holding a key answers `auth_challenge`
//! with its own nonce and its proof, the client checks that proof and answers
//! `auth_response` with its own. Each proof is HMAC-SHA256(key, label ‖ both nonces), the
//! label saying which side made it, so neither side's proof can be reflected back as the
//! other's; fresh random nonces from both sides make a recorded exchange useless later.
//! Nothing secret crosses the wire; proofs are compared in constant time. The nonces come
//! from the caller (this crate does no IO).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a nonce.
pub const NONCE_LEN: usize = 32;
/// Shortest key accepted: a shorter one is guessable.
pub const MIN_KEY_LEN: usize = 16;

/// Which side a proof comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prover {
    /// The server's proof (in `auth_challenge`).
    Server,
    /// The client's proof (in `auth_response`).
    Client,
}

impl Prover {
    fn label(self) -> &'static [u8] {
        match self {
            Prover::Server => b"netsweep-auth-v1 server proof",
            Prover::Client => b"netsweep-auth-v1 client proof",
        }
    }
}

fn mac(key: &[u8], role: Prover, client_nonce: &[u8], server_nonce: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    m.update(role.label());
    m.update(client_nonce);
    m.update(server_nonce);
    m
}

/// The proof `role` sends, as 64 hex digits.
pub fn proof(key: &[u8], role: Prover, client_nonce: &[u8], server_nonce: &[u8]) -> String {
    hex::encode(
        mac(key, role, client_nonce, server_nonce)
            .finalize()
            .into_bytes(),
    )
}

/// Whether `proof_hex` is `role`'s proof for these nonces under `key`, compared in constant
/// time; malformed hex is simply not a valid proof.
pub fn verify(
    key: &[u8],
    role: Prover,
    client_nonce: &[u8],
    server_nonce: &[u8],
    proof_hex: &str,
) -> bool {
    let Ok(bytes) = hex::decode(proof_hex) else {
        return false;
    };
    mac(key, role, client_nonce, server_nonce)
        .verify_slice(&bytes)
        .is_ok()
}

/// A nonce from its 64 hex digits; None when malformed.
pub fn decode_nonce(hex_text: &str) -> Option<[u8; NONCE_LEN]> {
    let bytes = hex::decode(hex_text).ok()?;
    bytes.try_into().ok()
}

/// A nonce as 64 hex digits.
pub fn encode_nonce(nonce: &[u8; NONCE_LEN]) -> String {
    hex::encode(nonce)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef-shared";

    #[test]
    fn proofs_verify_only_with_the_key_the_role_and_both_nonces() {
        let (c, s) = ([1u8; 32], [2u8; 32]);
        let p = proof(KEY, Prover::Client, &c, &s);
        assert_eq!(p.len(), 64);
        assert!(verify(KEY, Prover::Client, &c, &s, &p));
        assert!(
            !verify(b"another key of 16+", Prover::Client, &c, &s, &p),
            "wrong key"
        );
        assert!(
            !verify(KEY, Prover::Server, &c, &s, &p),
            "reflected as the other side's"
        );
        assert!(
            !verify(KEY, Prover::Client, &c, &[3u8; 32], &p),
            "replayed to a new challenge"
        );
        assert!(
            !verify(KEY, Prover::Client, &[4u8; 32], &s, &p),
            "another client nonce"
        );
        assert!(!verify(KEY, Prover::Client, &c, &s, "zz"), "malformed");
        assert!(!verify(KEY, Prover::Client, &c, &s, &p[..62]), "truncated");
        assert!(
            !p.contains(&hex::encode(KEY)),
            "the key is not in the proof"
        );
    }

    #[test]
    fn nonces_round_trip_and_refuse_bad_lengths() {
        let n = [7u8; 32];
        assert_eq!(decode_nonce(&encode_nonce(&n)), Some(n));
        assert_eq!(decode_nonce("07"), None);
        assert_eq!(decode_nonce("not hex"), None);
    }

    /// RFC 4231 test case 2, so the HMAC is the standard one.
    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
