//! What netsweep's iperf3 client reads from a server (`netsweep_iperf3::wire`, `outcome`,
//! and the control connection's reader): never a panic, never an allocation beyond the
//! frame cap, and what parses is consistent.
//!
//! Input: a mode byte, then
//! - mode 0: the server's results JSON (`ServerReport::parse`);
//! - mode 1: the server's control bytes (state bytes, the results frame: its 4-byte length
//!   and JSON), read by the client's control sequence in pieces of (mode >> 2) + 1 bytes;
//! - mode 2: UDP data datagrams for the receiver's accounting (a length byte, the arrival
//!   second and microsecond bytes, the datagram);
//! - mode 3: the small readers (state byte, frame length, UDP header, connect reply).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_iperf3::fuzzing::{control_replies, UdpReceiver};
use netsweep_iperf3::wire::{self, State};
use netsweep_iperf3::{Iperf3Error, ServerReport};

fn check_report(r: &ServerReport) {
    assert!(r.raw.is_object());
    let n = r
        .raw
        .get("streams")
        .and_then(|s| s.as_array())
        .map_or(0, Vec::len);
    assert_eq!(r.streams.len(), n);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => {
            if let Ok(r) = ServerReport::parse(rest) {
                check_report(&r);
            }
        }
        1 => match control_replies(rest, usize::from(mode >> 2) + 1) {
            Ok(r) => check_report(&r),
            Err(Iperf3Error::BadResults(m)) => assert!(!m.is_empty()),
            Err(_) => {}
        },
        2 => {
            let mut u = UdpReceiver::default();
            let mut rest = rest;
            let mut count = 0u64;
            while let [len, s, us, tail @ ..] = rest {
                let (d, tail) = tail.split_at(usize::from(*len).min(tail.len()));
                rest = tail;
                let arrival = (u32::from(*s) << 24, u32::from(*us) * 4000);
                u.on_datagram(d, arrival);
                count += u64::from(d.len() >= wire::UDP_HEADER_64);
            }
            let (highest, lost, ooo, jitter) = u.counts();
            assert!(lost <= highest, "lost {lost} of {highest}");
            assert!(ooo <= count);
            assert!(jitter.is_finite() && jitter >= 0.0, "{jitter}");
        }
        _ => {
            if let Some(&b) = rest.first() {
                if let Some(s) = State::from_byte(b) {
                    assert_eq!(s.to_byte(), b);
                }
            }
            if let Some(h) = rest.get(..4) {
                let n = wire::frame_len(h.try_into().expect("4 bytes"));
                assert_eq!(n.to_be_bytes(), h);
            }
            if let Some((sec, usec, seq)) = wire::udp_header(rest) {
                let mut b = [0u8; wire::UDP_HEADER_64];
                wire::put_udp_header(&mut b, sec, usec, seq);
                assert_eq!(b[..], rest[..wire::UDP_HEADER_64]);
            } else {
                assert!(rest.len() < wire::UDP_HEADER_64);
            }
            let _ = wire::is_udp_connect_reply(rest);
        }
    }
});
