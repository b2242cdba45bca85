//! `--one-way` stamps: where a pingpong message carries the wall-clock times (ns since the
//! Unix epoch, i64 little-endian) that give each direction's one-way delay. A stream message
//! carries them from its first byte, a datagram after its 8-byte sequence tag: the client's
//! send, then the server's first receive of the request and its send of the echo, which the
//! server writes into the echo.

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

/// Where the stamps start in a message.
pub fn offset(datagram: bool) -> usize {
    if datagram {
        8
    } else {
        0
    }
}

/// Whether a `size`-byte message has room for the stamps.
pub fn fits(size: usize, datagram: bool) -> bool {
    size >= offset(datagram) + STAMPS_LEN
}

/// Writes `t` into `msg`'s slot (the caller checked [`fits`]).
#[inline]
pub fn write(msg: &mut [u8], datagram: bool, slot: Stamp, t: i64) {
    let at = offset(datagram) + 8 * slot as usize;
    msg[at..at + 8].copy_from_slice(&t.to_le_bytes());
}

/// Reads `msg`'s slot (the caller checked [`fits`]).
#[inline]
pub fn read(msg: &[u8], datagram: bool, slot: Stamp) -> i64 {
    let at = offset(datagram) + 8 * slot as usize;
    let mut b = [0u8; 8];
    b.copy_from_slice(&msg[at..at + 8]);
    i64::from_le_bytes(b)
}

/// The byte range of the server's stamps: what an echo may differ from its request in.
pub fn server_range(datagram: bool) -> std::ops::Range<usize> {
    let at = offset(datagram) + 8;
    at..at + 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_sit_after_a_datagrams_tag_and_round_trip() {
        let mut m = vec![0u8; 32];
        assert!(fits(32, true) && !fits(31, true) && fits(24, false) && !fits(23, false));
        write(&mut m, true, Stamp::ClientSend, -5);
        write(&mut m, true, Stamp::ServerSend, i64::MAX);
        assert_eq!(m[..8], [0; 8], "the sequence tag is untouched");
        assert_eq!(read(&m, true, Stamp::ClientSend), -5);
        assert_eq!(read(&m, true, Stamp::ServerReceive), 0);
        assert_eq!(read(&m, true, Stamp::ServerSend), i64::MAX);
        assert_eq!(server_range(true), 16..32);
        assert_eq!(server_range(false), 8..24);
    }
}
