//! Binding a session's data connections: each fresh connection presents the 8-byte session
//! cookie (read by `netsweep_transport::cookie::read_by` from a real socket pair: a
//! connection with another is dropped, as the listener does) and, in a session with flows, its 4-byte flow number, under which the
//! server files it. Never a panic or an index out of bounds: the session is refused (a
//! number out of range or repeated, a connection cut short) or every flow is filed once,
//! each under the number it said.
//!
//! Input: the flows (1 byte), the bytes per receive (1 byte), then connections: a length
//! byte (its top bit: the right cookie first) and that many bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_engine::fuzzing::file_flows;
use netsweep_transport::cookie;

const WANT: u64 = 0x0123_4567_89ab_cdef;

/// What the listener reads first on a connection that sent `bytes` and closed.
fn read_cookie(bytes: &[u8]) -> std::io::Result<u64> {
    use socket2::{Domain, Socket, Type};
    use std::io::Write;
    let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM, None)?;
    (&a).write_all(bytes)?;
    drop(a);
    let deadline = std::time::Instant::now() + cookie::PRESENT_WITHIN;
    cookie::read_by(&b, deadline)
}

fuzz_target!(|data: &[u8]| {
    let [n, piece, rest @ ..] = data else {
        return;
    };
    let n = u32::from(*n % 64) + 1;
    let piece = usize::from(*piece % 8) + 1;
    // The connections the listener accepts: those whose first 8 bytes are the cookie.
    let mut conns: Vec<Vec<u8>> = Vec::new();
    let mut rest = rest;
    while let [len, tail @ ..] = rest {
        let take = usize::from(len & 0x7f).min(tail.len());
        let (body, tail) = tail.split_at(take);
        rest = tail;
        let mut bytes = Vec::new();
        if len & 0x80 != 0 {
            bytes.extend_from_slice(&WANT.to_be_bytes());
        }
        bytes.extend_from_slice(body);
        match read_cookie(&bytes) {
            Ok(c) => {
                assert!(bytes.len() >= cookie::LEN);
                assert_eq!(c.to_be_bytes()[..], bytes[..cookie::LEN]);
                if c == WANT {
                    conns.push(bytes[cookie::LEN..].to_vec());
                }
            }
            Err(_) => assert!(bytes.len() < cookie::LEN),
        }
    }
    let said = |k: usize| -> Option<u32> {
        let b = conns.get(k)?.get(..4)?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    };
    match file_flows(n, conns.iter().map(Vec::as_slice), piece) {
        Ok(by_number) => {
            assert_eq!(by_number.len(), n as usize, "every flow filed");
            for (i, &k) in by_number.iter().enumerate() {
                assert_eq!(said(k), Some(i as u32), "connection {k} filed under {i}");
            }
        }
        Err(e) => {
            // Refused only for a reason: a short connection, a bad or repeated number, or
            // too few connections.
            let first_n: Vec<Option<u32>> = (0..n as usize).map(said).collect();
            let mut numbers: Vec<u32> = first_n.iter().flatten().copied().collect();
            let all_said = first_n.iter().all(Option::is_some);
            numbers.sort_unstable();
            let perm = numbers.iter().enumerate().all(|(i, &x)| x == i as u32);
            assert!(!(all_said && perm), "refused a valid session: {e}");
        }
    }
});
