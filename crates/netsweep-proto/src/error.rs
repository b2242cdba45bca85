//! Errors of the control protocol, each worded to tell the user what went wrong and the fix.

use std::fmt::Write as _;

use crate::version::{VersionMismatch, MAGIC};

/// Everything that can go wrong on a control connection.
///
/// Errors are `Clone` so a closed state machine can hand the same error back on every later call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The peer's first bytes are not the netsweep magic.
    #[error(
        "not a netsweep peer (bad magic {}, expected {}); check that the address and port \
         point at `netsweep serve`",
        hex_and_text(.got),
        hex_and_text(&MAGIC)
    )]
    BadMagic {
        /// The bytes received where the preamble should be (at most 8).
        got: Vec<u8>,
    },
    /// The two sides share no protocol version.
    #[error(transparent)]
    VersionMismatch(#[from] VersionMismatch),
    /// A frame length above the cap, rejected before allocating its body.
    #[error(
        "control frame of {size} bytes exceeds the {max}-byte cap; the peer is not a \
         compatible netsweep, or is misbehaving"
    )]
    FrameTooLarge {
        /// The length the frame claims (or the body to encode has).
        size: u64,
        /// The cap, [`crate::MAX_FRAME`].
        max: usize,
    },
    /// The connection ended inside a frame.
    #[error(
        "truncated frame: got {got} of {expected} bytes; the peer closed the control \
         connection mid-message"
    )]
    TruncatedFrame {
        /// Bytes of the frame part in progress (length header, or body) that arrived.
        got: usize,
        /// Bytes that part should have had.
        expected: usize,
    },
    /// The connection ended inside the 8-byte preamble.
    #[error(
        "truncated preamble: got {got} of 8 bytes; the peer closed the control connection \
         during the handshake (is it a netsweep peer?)"
    )]
    TruncatedPreamble {
        /// Preamble bytes that arrived.
        got: usize,
    },
    /// A frame body that is not JSON, or not a known message.
    #[error("malformed control message: {reason}; the peer is not a compatible netsweep")]
    Malformed {
        /// What serde said.
        reason: String,
    },
    /// A well-formed message that is not allowed at this point of the session.
    #[error(
        "protocol error: expected {expected}, got {got}; the peer runs an incompatible or \
         faulty netsweep"
    )]
    UnexpectedMessage {
        /// What the session allowed here.
        expected: String,
        /// What came.
        got: String,
    },
    /// The peer closed the connection between messages while a reply was due.
    #[error("the peer closed the control connection while {during}")]
    ConnectionClosed {
        /// What this side was doing or waiting for.
        during: String,
    },
    /// The local program tried to send a message the session does not allow now.
    #[error("cannot send {msg} while {state}; this is a bug in netsweep, please report it")]
    InvalidSend {
        /// What the session was doing.
        state: String,
        /// The message refused.
        msg: String,
    },
    /// The session already ended cleanly (bye, busy or error) and cannot send more.
    #[error("the control session has already ended; open a new connection")]
    SessionClosed,
}

impl ProtoError {
    /// A [`ProtoError::Malformed`] from a serde_json error.
    pub(crate) fn malformed(err: &serde_json::Error) -> Self {
        ProtoError::Malformed {
            reason: err.to_string(),
        }
    }
}

/// `4e 53 57 50 ("NSWP")`: hex for exactness, escaped text because garbage is often ASCII.
fn hex_and_text(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{b:02x}");
    }
    let _ = write!(out, " (\"{}\")", bytes.escape_ascii());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_magic_shows_hex_and_text() {
        let err = ProtoError::BadMagic {
            got: b"GET / HT".to_vec(),
        };
        assert_eq!(
            err.to_string(),
            "not a netsweep peer (bad magic 47 45 54 20 2f 20 48 54 (\"GET / HT\"), expected \
             4e 53 57 50 (\"NSWP\")); check that the address and port point at `netsweep serve`"
        );
    }

    #[test]
    fn truncated_frame_names_counts() {
        let err = ProtoError::TruncatedFrame {
            got: 3,
            expected: 10,
        };
        assert!(err
            .to_string()
            .starts_with("truncated frame: got 3 of 10 bytes"));
    }
}
