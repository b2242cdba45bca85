//! `--one-way` stamps: where a request carries the wall-clock times (ns since the Unix
//! epoch, i64 little-endian) that give each direction's one-way delay: the client's send,
//! then the server's first receive of the request and its send of the echo, which the server
//! writes into the echo. A pingpong's stream message carries them from its first byte, its
//! datagram after the 8-byte sequence tag; a rate request after its 20-byte sequence header
//! (stream or datagram).

/// Bytes of stamps a message carries: three times of 8 bytes.
pub const STAMPS_LEN: usize = 24;

/// Which time a stamp slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// The client's send of the request.
    ClientSend = 0,
    /// The server's first receive of the request.
    ServerReceive = 1,
    /// The server's send of the echo.
    ServerSend = 2,
}

/// Where a pingpong message's stamps start.
pub fn offset(datagram: bool) -> usize {
    if datagram {
        8
    } else {
        0
    }
}

/// Where a rate request's stamps start: after its sequence header (cookie, sequence number,
/// intended send time), on streams and datagrams alike.
pub const RATE_OFFSET: usize = 20;

/// Whether a `size`-byte message has room for stamps from `base`.
pub fn fits(size: usize, base: usize) -> bool {
    size >= base + STAMPS_LEN
}

/// Writes `t` into `msg`'s slot of the stamps from `base` (the caller checked [`fits`]).
#[inline]
pub fn write(msg: &mut [u8], base: usize, slot: Stamp, t: i64) {
    let at = base + 8 * slot as usize;
    msg[at..at + 8].copy_from_slice(&t.to_le_bytes());
}

/// Reads `msg`'s slot of the stamps from `base` (the caller checked [`fits`]).
#[inline]
pub fn read(msg: &[u8], base: usize, slot: Stamp) -> i64 {
    let at = base + 8 * slot as usize;
    let mut b = [0u8; 8];
    b.copy_from_slice(&msg[at..at + 8]);
    i64::from_le_bytes(b)
}

/// The byte range of the server's stamps from `base`: what an echo may differ from its
/// request in.
pub fn server_range(base: usize) -> std::ops::Range<usize> {
    let at = base + 8;
    at..at + 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_sit_after_a_datagrams_tag_and_round_trip() {
        let mut m = vec![0u8; 32];
        let (d, s) = (offset(true), offset(false));
        assert!(fits(32, d) && !fits(31, d) && fits(24, s) && !fits(23, s));
        assert!(fits(44, RATE_OFFSET) && !fits(43, RATE_OFFSET));
        write(&mut m, d, Stamp::ClientSend, -5);
        write(&mut m, d, Stamp::ServerSend, i64::MAX);
        assert_eq!(m[..8], [0; 8], "the sequence tag is untouched");
        assert_eq!(read(&m, d, Stamp::ClientSend), -5);
        assert_eq!(read(&m, d, Stamp::ServerReceive), 0);
        assert_eq!(read(&m, d, Stamp::ServerSend), i64::MAX);
        assert_eq!(server_range(d), 16..32);
        assert_eq!(server_range(s), 8..24);
        assert_eq!(server_range(RATE_OFFSET), 28..44);
    }
}
