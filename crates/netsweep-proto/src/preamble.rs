//! The 8-byte preamble that opens a control connection and negotiates the protocol version.
//!
//! Client → server (8 bytes): `NSWP`, u16 min_version, u16 max_version.
//! Server → client (10 bytes): `NSWP`, u16 chosen_version (0 = mismatch), u16 server_min,
//! u16 server_max. All integers are big-endian. The server always answers, even on a
//! mismatch, so the client can print both ranges.

use crate::error::ProtoError;
use crate::version::{VersionRange, MAGIC};

/// Length of the client's preamble: magic, min, max.
pub const CLIENT_PREAMBLE_LEN: usize = 8;
/// Length of the server's reply: magic, chosen, min, max.
pub const SERVER_PREAMBLE_LEN: usize = 10;

/// The server's answer to a client preamble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerReply {
    /// The version the session uses; 0 when there is none.
    pub chosen: u16,
    /// What the server speaks, so the client can report a mismatch in full.
    pub server: VersionRange,
}

/// The client's preamble: magic and the range it speaks.
pub fn encode_client_preamble(range: VersionRange) -> [u8; CLIENT_PREAMBLE_LEN] {
    let mut out = [0u8; CLIENT_PREAMBLE_LEN];
    out[..4].copy_from_slice(&MAGIC);
    out[4..6].copy_from_slice(&range.min.to_be_bytes());
    out[6..8].copy_from_slice(&range.max.to_be_bytes());
    out
}

/// Reads a client preamble; [`ProtoError::BadMagic`] if it does not start with [`MAGIC`].
pub fn decode_client_preamble(
    bytes: &[u8; CLIENT_PREAMBLE_LEN],
) -> Result<VersionRange, ProtoError> {
    check_magic(bytes)?;
    Ok(VersionRange::new(be16(bytes, 4), be16(bytes, 6)))
}

/// The server's reply: magic, the chosen version (0 = mismatch) and the range it speaks.
pub fn encode_server_preamble(reply: ServerReply) -> [u8; SERVER_PREAMBLE_LEN] {
    let mut out = [0u8; SERVER_PREAMBLE_LEN];
    out[..4].copy_from_slice(&MAGIC);
    out[4..6].copy_from_slice(&reply.chosen.to_be_bytes());
    out[6..8].copy_from_slice(&reply.server.min.to_be_bytes());
    out[8..10].copy_from_slice(&reply.server.max.to_be_bytes());
    out
}

/// Reads a server reply; [`ProtoError::BadMagic`] if it does not start with [`MAGIC`].
pub fn decode_server_preamble(
    bytes: &[u8; SERVER_PREAMBLE_LEN],
) -> Result<ServerReply, ProtoError> {
    check_magic(bytes)?;
    Ok(ServerReply {
        chosen: be16(bytes, 4),
        server: VersionRange::new(be16(bytes, 6), be16(bytes, 8)),
    })
}

/// Checks that `bytes` (possibly fewer than 4) agree with [`MAGIC`] as far as they go, so a
/// garbage peer is rejected on its first wrong byte rather than after a whole preamble.
pub(crate) fn check_magic(bytes: &[u8]) -> Result<(), ProtoError> {
    let n = bytes.len().min(MAGIC.len());
    if bytes[..n] == MAGIC[..n] {
        Ok(())
    } else {
        Err(ProtoError::BadMagic {
            got: bytes.to_vec(),
        })
    }
}

fn be16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

/// Accumulates a fixed-size preamble from arbitrary chunks, checking the magic as bytes come.
#[derive(Debug, Clone)]
pub(crate) struct PreambleBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Default for PreambleBuf<N> {
    fn default() -> Self {
        PreambleBuf {
            buf: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> PreambleBuf<N> {
    /// Takes bytes from `data` until the preamble is whole; returns how many it took.
    pub(crate) fn fill(&mut self, data: &[u8]) -> Result<usize, ProtoError> {
        let take = (N - self.len).min(data.len());
        self.buf[self.len..self.len + take].copy_from_slice(&data[..take]);
        self.len += take;
        check_magic(&self.buf[..self.len])?;
        Ok(take)
    }

    /// The whole preamble, once all `N` bytes arrived.
    pub(crate) fn complete(&self) -> Option<&[u8; N]> {
        (self.len == N).then_some(&self.buf)
    }

    /// Bytes received so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::{negotiate, VersionMismatch};

    fn r(min: u16, max: u16) -> VersionRange {
        VersionRange::new(min, max)
    }

    #[test]
    fn version_matrix() {
        // (client, server, expected outcome)
        let cases = [
            (r(1, 1), r(1, 1), Some(1)), // equal
            (r(1, 3), r(1, 3), Some(3)), // equal, wide
            (r(1, 3), r(2, 5), Some(3)), // overlapping, client older
            (r(2, 5), r(1, 3), Some(3)), // overlapping, server older
            (r(1, 5), r(2, 3), Some(3)), // server inside client
            (r(2, 3), r(1, 5), Some(3)), // client inside server
            (r(1, 2), r(2, 4), Some(2)), // touching at one version
            (r(1, 1), r(2, 3), None),    // disjoint, client older
            (r(2, 3), r(1, 1), None),    // disjoint, server older
            (r(0, 0), r(0, 0), None),    // version 0 is never chosen
            (r(3, 1), r(1, 3), None),    // inverted range is empty
        ];
        for (client, server, want) in cases {
            let got = negotiate(client, server);
            match want {
                Some(v) => assert_eq!(got, Ok(v), "{client} x {server}"),
                None => assert_eq!(got, Err(VersionMismatch { client, server })),
            }
        }
    }

    #[test]
    fn mismatch_message_names_both_ranges() {
        let err = negotiate(r(1, 1), r(2, 3)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "protocol version mismatch: client speaks 1..=1, server speaks 2..=3; upgrade the \
             older netsweep"
        );
    }

    #[test]
    fn client_preamble_round_trip() {
        let bytes = encode_client_preamble(r(1, 0x0203));
        assert_eq!(bytes, [b'N', b'S', b'W', b'P', 0, 1, 2, 3]);
        assert_eq!(decode_client_preamble(&bytes), Ok(r(1, 0x0203)));
    }

    #[test]
    fn server_preamble_round_trip() {
        let reply = ServerReply {
            chosen: 0,
            server: r(2, 3),
        };
        let bytes = encode_server_preamble(reply);
        assert_eq!(bytes, [b'N', b'S', b'W', b'P', 0, 0, 0, 2, 0, 3]);
        assert_eq!(decode_server_preamble(&bytes), Ok(reply));
    }

    #[test]
    fn garbage_preamble_is_bad_magic() {
        let err = decode_client_preamble(b"GET / HT").unwrap_err();
        assert_eq!(
            err,
            ProtoError::BadMagic {
                got: b"GET / HT".to_vec()
            }
        );
        assert!(err
            .to_string()
            .contains("not a netsweep peer (bad magic 47 45 54 20"));
        assert!(matches!(
            decode_server_preamble(b"HTTP/1.1 4"),
            Err(ProtoError::BadMagic { .. })
        ));
    }

    #[test]
    fn preamble_buf_fails_on_first_wrong_byte_and_keeps_leftover() {
        let mut buf = PreambleBuf::<CLIENT_PREAMBLE_LEN>::default();
        assert_eq!(buf.fill(b"NS"), Ok(2));
        assert_eq!(buf.complete(), None);
        assert_eq!(buf.fill(b"WP\x00\x01\x00\x01extra"), Ok(6));
        assert_eq!(buf.len(), 8);
        assert_eq!(buf.complete(), Some(&encode_client_preamble(r(1, 1))));

        let mut bad = PreambleBuf::<CLIENT_PREAMBLE_LEN>::default();
        assert_eq!(
            bad.fill(b"X"),
            Err(ProtoError::BadMagic { got: b"X".to_vec() })
        );
    }
}
