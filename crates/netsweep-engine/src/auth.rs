//! Authentication with a pre-shared key (`--auth-key FILE` on both `run` and `serve`): the
//! key file, fresh nonces from the kernel, and each side's half of the mutual
//! challenge-response of netsweep-proto's [`auth`](netsweep_proto::auth). The server
//! authenticates a connection during its handshake, before it is admitted as a session, so a
//! client without the key gets nothing but a refusal and never holds a session slot.

use crate::control::{ClientControl, ServerControl};
use crate::error::NetError;
use netsweep_proto::auth::{self, Prover, MIN_KEY_LEN, NONCE_LEN};
use netsweep_proto::messages::{ClientMsg, ServerMsg};
use std::path::Path;
use std::time::Duration;

/// A pre-shared key. Its bytes are never printed.
#[derive(Clone)]
pub struct AuthKey(Vec<u8>);

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuthKey({} bytes)", self.0.len())
    }
}

impl AuthKey {
    /// Reads a key file: its bytes, trailing whitespace (a final newline) removed. Errors say
    /// the fix; a file others may read gets a warning on stderr.
    pub fn load(path: &Path) -> Result<AuthKey, String> {
        let shown = path.display();
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read --auth-key {shown}: {e}"))?;
        let end = bytes
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        if end < MIN_KEY_LEN {
            return Err(format!(
                "--auth-key {shown} holds {end} bytes; a key needs at least {MIN_KEY_LEN} \
                 (make one with: head -c 32 /dev/urandom | base64 > {shown}; chmod 600 {shown})"
            ));
        }
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                eprintln!("netsweep: warning: --auth-key {shown} is readable by others (chmod 600 {shown})");
            }
        }
        Ok(AuthKey(bytes[..end].to_vec()))
    }

    /// A key from bytes (at least [`MIN_KEY_LEN`]).
    pub fn from_bytes(bytes: &[u8]) -> Option<AuthKey> {
        (bytes.len() >= MIN_KEY_LEN).then(|| AuthKey(bytes.to_vec()))
    }
}

/// A fresh nonce from the kernel's random source.
pub fn nonce() -> Result<[u8; NONCE_LEN], NetError> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| {
        NetError::io(
            "drawing an authentication nonce",
            std::io::Error::other(e.to_string()),
        )
    })?;
    Ok(n)
}

/// The client's half: `reply` is the server's answer to a hello that carried `client_nonce`
/// (when this side has a key). Answers a challenge and returns the server's next reply
/// (welcome, or a refusal as an error).
pub(crate) fn client_answer(
    ctl: &mut ClientControl,
    key: Option<&AuthKey>,
    client_nonce: Option<&[u8; NONCE_LEN]>,
    reply: ServerMsg,
    during: &str,
) -> Result<ServerMsg, NetError> {
    match (key, client_nonce, reply) {
        (
            Some(key),
            Some(cn),
            ServerMsg::AuthChallenge {
                server_nonce,
                server_proof,
            },
        ) => {
            let sn = auth::decode_nonce(&server_nonce)
                .ok_or_else(|| NetError::Refused("the server's challenge is malformed".into()))?;
            if !auth::verify(&key.0, Prover::Server, cn, &sn, &server_proof) {
                return Err(NetError::Refused(
                    "the server could not prove it holds the same --auth-key: its key differs \
                     (or it is not the server you meant)"
                        .into(),
                ));
            }
            let client_proof = auth::proof(&key.0, Prover::Client, cn, &sn);
            ctl.request(ClientMsg::AuthResponse { client_proof }, during, None)
        }
        (None, _, ServerMsg::AuthChallenge { .. }) => Err(NetError::Auth(
            "the server requires authentication: give the key it was started with, \
             --auth-key FILE"
                .into(),
        )),
        (Some(_), _, ServerMsg::Welcome { .. }) => Err(NetError::Auth(
            "the server did not authenticate itself although --auth-key was given: with a key, \
             netsweep talks only to a server started with the same --auth-key"
                .into(),
        )),
        (_, _, other) => Ok(other),
    }
}

/// The server's half, right after a hello carrying `client_nonce`: challenges the client and
/// checks its answer. A refusal is sent to the client and returned as
/// [`NetError::Refused`] (the reason, for the log).
pub(crate) fn server_challenge(
    ctl: &mut ServerControl,
    key: &AuthKey,
    client_nonce: Option<&str>,
    timeout: Duration,
) -> Result<(), NetError> {
    let refuse = |ctl: &mut ServerControl, to_client: &str, log: &str| {
        let _ = ctl.send(ServerMsg::Error {
            message: to_client.to_string(),
        });
        Err(NetError::Refused(log.to_string()))
    };
    let Some(cn) = client_nonce.and_then(auth::decode_nonce) else {
        return refuse(
            ctl,
            "this server requires authentication: run with --auth-key FILE holding the server's key",
            "authentication required: the client offered no key",
        );
    };
    let sn = nonce()?;
    ctl.send(ServerMsg::AuthChallenge {
        server_nonce: auth::encode_nonce(&sn),
        server_proof: auth::proof(&key.0, Prover::Server, &cn, &sn),
    })?;
    let answer = match ctl.recv("waiting for auth_response", timeout) {
        Ok(m) => m,
        // A client holding another key checks our proof first and hangs up (seen as the
        // connection closing; a broken message here is no better).
        Err(NetError::Closed { .. } | NetError::Protocol(_)) => {
            return Err(NetError::Refused(
                "authentication failed: the client closed after the challenge (a client \
                 holding another key does)"
                    .into(),
            ))
        }
        Err(e) => return Err(e),
    };
    match answer {
        ClientMsg::AuthResponse { client_proof }
            if auth::verify(&key.0, Prover::Client, &cn, &sn, &client_proof) =>
        {
            Ok(())
        }
        ClientMsg::AuthResponse { .. } => refuse(
            ctl,
            "authentication failed: your --auth-key differs from the server's",
            "authentication failed: the client's key differs",
        ),
        other => Err(NetError::Refused(format!(
            "expected auth_response, got {}",
            other.kind()
        ))),
    }
}
