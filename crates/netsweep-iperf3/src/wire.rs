//! iperf3's control protocol as bytes, without IO: the state bytes, the 37-byte cookie, the
//! length-prefixed JSON frames, the parameters the client sends, the UDP connect datagrams and
//! the UDP data header. Learned from iperf3's documentation and source (iperf.h,
//! iperf_api.h, iperf_api.c, iperf_udp.c); written here from scratch.

use serde_json::{json, Value};

/// Size of the cookie that opens the control connection and every TCP data connection: 36
/// characters and a NUL.
pub const COOKIE_SIZE: usize = 37;

/// The alphabet iperf3 draws cookie characters from.
const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The datagram a UDP data socket sends first so the server learns its address (iperf3
/// writes the integer 0x36373839 in host order; x86 servers read it back the same way).
pub const UDP_CONNECT_MSG: u32 = 0x3637_3839;
/// The server's answer to [`UDP_CONNECT_MSG`].
pub const UDP_CONNECT_REPLY: u32 = 0x3938_3736;
/// The answer servers before 3.9 gave.
pub const LEGACY_UDP_CONNECT_REPLY: u32 = 987_654_321;

/// Bytes of the UDP data header with 64-bit sequence numbers: seconds, microseconds (both
/// u32, big-endian) and the sequence number (u64, big-endian).
pub const UDP_HEADER_64: usize = 16;

/// The largest JSON frame accepted from a server (iperf3's results are a few hundred bytes;
/// server output text could be more).
pub const MAX_FRAME: u32 = 16 << 20;

/// A state byte on the control connection (iperf_api.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The server starts the test (1).
    TestStart,
    /// The data phase runs (2).
    TestRunning,
    /// The client ends the data phase (4).
    TestEnd,
    /// The server asks for the parameters (9).
    ParamExchange,
    /// The server asks for the data connections (10).
    CreateStreams,
    /// The server is terminating (11).
    ServerTerminate,
    /// The client is terminating (12).
    ClientTerminate,
    /// The server asks for the results exchange (13).
    ExchangeResults,
    /// The results were exchanged (14).
    DisplayResults,
    /// The client is done (16).
    IperfDone,
    /// The server serves another test (-1).
    AccessDenied,
    /// The server failed; two big-endian i32 follow: iperf3's error code and errno (-2).
    ServerError,
}

impl State {
    /// The byte on the wire.
    pub fn to_byte(self) -> u8 {
        let v: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        };
        v as u8
    }

    /// The state a byte names, or None for a byte this client does not expect.
    pub fn from_byte(b: u8) -> Option<State> {
        Some(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            _ => return None,
        })
    }
}

/// A cookie from 36 random bytes: each maps onto iperf3's 32-character alphabet; NUL last.
pub fn cookie_from(random: &[u8; COOKIE_SIZE - 1]) -> [u8; COOKIE_SIZE] {
    let mut c = [0u8; COOKIE_SIZE];
    for (o, r) in c.iter_mut().zip(random) {
        *o = COOKIE_ALPHABET[(*r as usize) % COOKIE_ALPHABET.len()];
    }
    c
}

/// A JSON value as a frame: its length (u32, big-endian) then its compact text.
pub fn frame(v: &Value) -> Vec<u8> {
    let text = v.to_string();
    let mut out = Vec::with_capacity(4 + text.len());
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

/// The length a frame header announces.
pub fn frame_len(header: [u8; 4]) -> u32 {
    u32::from_be_bytes(header)
}

/// What bounds a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// So many bytes (iperf3's `num`; at most 2^31-1, since iperf3 reads it as a C int).
    Bytes(u64),
    /// So long (iperf3's `time`, in whole seconds, rounded up).
    Duration(std::time::Duration),
}

/// The largest `num` an iperf3 server reads correctly (cJSON's valueint is a C int).
pub const MAX_NUM: u64 = i32::MAX as u64;

/// The parameters JSON the client sends after PARAM_EXCHANGE: one stream, no omit, the
/// message size, the bound, the direction, the UDP rate (`bandwidth`; never for TCP, whose
/// pacing netsweep does not do), 64-bit UDP counters.
pub fn params_json(udp: bool, len: usize, bound: Bound, reverse: bool, rate: Option<u64>) -> Value {
    let (time, num) = match bound {
        Bound::Bytes(n) => (0, n),
        Bound::Duration(d) => (d.as_secs() + u64::from(d.subsec_nanos() > 0), 0),
    };
    let mut j = json!({
        "omit": 0,
        "time": time,
        "num": num,
        "blockcount": 0,
        "parallel": 1,
        "len": len,
        "client_version": concat!("netsweep-iperf3 ", env!("CARGO_PKG_VERSION")),
    });
    let o = j.as_object_mut().expect("an object");
    o.insert(if udp { "udp" } else { "tcp" }.into(), Value::Bool(true));
    if reverse {
        o.insert("reverse".into(), Value::Bool(true));
    }
    if let Some(r) = rate.filter(|r| *r > 0 && udp) {
        o.insert("bandwidth".into(), r.into());
    }
    if udp {
        o.insert("udp_counters_64bit".into(), 1.into());
    }
    j
}

/// What the client reports about its one stream in the results exchange.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientStreamResult {
    /// Bytes sent (sender) or received (receiver).
    pub bytes: u64,
    /// TCP retransmissions of the sender, or None (iperf3 sends -1).
    pub retransmits: Option<u64>,
    /// Jitter in seconds (UDP receiver), else 0.
    pub jitter_s: f64,
    /// Datagrams lost (UDP receiver), else 0.
    pub errors: u64,
    /// Datagrams sent, or the highest sequence number received.
    pub packets: u64,
    /// Seconds from the stream's start to its end.
    pub seconds: f64,
}

/// The results JSON the client sends after EXCHANGE_RESULTS (stream id 1: iperf3 numbers its
/// first stream 1 on both ends). `cpu` is the client's (total, user, system) CPU percent.
pub fn client_results_json(sender: bool, cpu: [f64; 3], s: &ClientStreamResult) -> Value {
    json!({
        "cpu_util_total": cpu[0],
        "cpu_util_user": cpu[1],
        "cpu_util_system": cpu[2],
        "sender_has_retransmits": if !sender { -1 } else if s.retransmits.is_some() { 1 } else { 0 },
        "streams": [{
            "id": 1,
            "bytes": s.bytes,
            "retransmits": s.retransmits.map_or(-1, |r| r as i64),
            "jitter": s.jitter_s,
            "errors": s.errors,
            "packets": s.packets,
            "start_time": 0.0,
            "end_time": s.seconds,
        }],
    })
}

/// Whether a 4-byte datagram is the server's answer to the UDP connect datagram (either
/// byte order of either value: the server writes an int in its own host order).
pub fn is_udp_connect_reply(d: &[u8]) -> bool {
    let Ok(b) = <[u8; 4]>::try_from(d) else {
        return false;
    };
    [u32::from_le_bytes(b), u32::from_be_bytes(b)]
        .iter()
        .any(|v| *v == UDP_CONNECT_REPLY || *v == LEGACY_UDP_CONNECT_REPLY)
}

/// The UDP connect datagram as an x86 iperf3 client writes it.
pub fn udp_connect_msg() -> [u8; 4] {
    UDP_CONNECT_MSG.to_le_bytes()
}

/// Writes the UDP data header (send time, sequence number) into the start of `buf`.
pub fn put_udp_header(buf: &mut [u8], sec: u32, usec: u32, seq: u64) {
    buf[0..4].copy_from_slice(&sec.to_be_bytes());
    buf[4..8].copy_from_slice(&usec.to_be_bytes());
    buf[8..16].copy_from_slice(&seq.to_be_bytes());
}

/// Reads (sec, usec, seq) from a UDP data header, or None when the datagram is shorter.
pub fn udp_header(buf: &[u8]) -> Option<(u32, u32, u64)> {
    if buf.len() < UDP_HEADER_64 {
        return None;
    }
    let u = |r: std::ops::Range<usize>| u32::from_be_bytes(buf[r].try_into().expect("4 bytes"));
    let seq = u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes"));
    Some((u(0..4), u(4..8), seq))
}

/// Bytes of the UDP data header with iperf3's default 32-bit sequence numbers.
pub const UDP_HEADER_32: usize = 12;

/// Writes the UDP data header with a 64-bit (`--udp-counters-64bit`) or a 32-bit sequence
/// number (iperf3's default; the number wraps as iperf3's does). `buf` must hold the header
/// (16 bytes: iperf3's smallest datagram).
pub fn put_udp_header_sized(buf: &mut [u8], sec: u32, usec: u32, seq: u64, counters_64bit: bool) {
    if counters_64bit {
        put_udp_header(buf, sec, usec, seq);
    } else if buf.len() >= UDP_HEADER_32 {
        buf[0..4].copy_from_slice(&sec.to_be_bytes());
        buf[4..8].copy_from_slice(&usec.to_be_bytes());
        buf[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
    }
}

/// A UDP receiver's accounting of iperf3's data header, as iperf3 keeps it: the highest
/// sequence number, datagrams missing below it (a late one makes up for a gap), late ones,
/// and RFC 3550 interarrival jitter (from the second datagram on; iperf3 counts the first
/// datagram's transit as a jump). Pure: [`UdpReceiver::take`] is a function of the datagram
/// and its arrival time, so a fuzz target reaches it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UdpReceiver {
    /// The highest sequence number seen.
    pub highest: u64,
    /// Datagrams missing.
    pub lost: u64,
    /// Datagrams that arrived after a later one.
    pub out_of_order: u64,
    /// Jitter in seconds.
    pub jitter: f64,
    prev_transit: Option<f64>,
}

impl UdpReceiver {
    /// Accounts one datagram that arrived at wall time (`sec`, `usec`); a datagram shorter
    /// than the header moves nothing.
    pub fn take(&mut self, d: &[u8], counters_64bit: bool, sec: u32, usec: u32) {
        let need = if counters_64bit {
            UDP_HEADER_64
        } else {
            UDP_HEADER_32
        };
        if d.len() < need {
            return;
        }
        let u = |r: std::ops::Range<usize>| {
            u32::from_be_bytes([d[r.start], d[r.start + 1], d[r.start + 2], d[r.start + 3]])
        };
        let seq = if counters_64bit {
            (u64::from(u(8..12)) << 32) | u64::from(u(12..16))
        } else {
            u64::from(u(8..12))
        };
        if seq > self.highest {
            self.lost = self.lost.saturating_add(seq - self.highest - 1);
            self.highest = seq;
        } else {
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
        }
        let transit =
            (f64::from(sec) - f64::from(u(0..4))) + (f64::from(usec) - f64::from(u(4..8))) * 1e-6;
        if let Some(prev) = self.prev_transit {
            let jump = (transit - prev).abs();
            if jump.is_finite() {
                self.jitter += (jump - self.jitter) / 16.0;
            }
        }
        self.prev_transit = Some(transit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_bytes_are_iperf3s_and_round_trip() {
        assert_eq!(State::ParamExchange.to_byte(), 9);
        assert_eq!(State::AccessDenied.to_byte(), 0xff);
        assert_eq!(State::ServerError.to_byte(), 0xfe);
        for b in 0..=255u8 {
            if let Some(s) = State::from_byte(b) {
                assert_eq!(s.to_byte(), b);
            }
        }
        assert_eq!(State::from_byte(3), None, "RESULT_REQUEST is unused");
    }

    #[test]
    fn cookie_is_36_alphabet_characters_and_a_nul() {
        let c = cookie_from(&[255; 36]);
        assert_eq!(c[36], 0);
        assert!(c[..36].iter().all(|b| COOKIE_ALPHABET.contains(b)));
        assert_eq!(&cookie_from(&[0; 36])[..3], b"aaa");
    }

    #[test]
    fn frames_carry_a_big_endian_length() {
        let f = frame(&json!({"a": 1}));
        assert_eq!(&f[..4], &[0, 0, 0, 7]);
        assert_eq!(&f[4..], br#"{"a":1}"#);
        assert_eq!(frame_len([0, 0, 1, 2]), 258);
    }

    #[test]
    fn params_name_protocol_bound_direction_and_rate() {
        let p = params_json(true, 1400, Bound::Bytes(1 << 20), true, Some(100_000_000));
        assert_eq!(p["udp"], true);
        assert!(p.get("tcp").is_none());
        assert_eq!(p["num"], 1 << 20);
        assert_eq!(p["time"], 0);
        assert_eq!(p["len"], 1400);
        assert_eq!(p["reverse"], true);
        assert_eq!(p["bandwidth"], 100_000_000u64);
        assert_eq!(p["udp_counters_64bit"], 1);
        assert_eq!(p["parallel"], 1);
        let t = params_json(
            false,
            8,
            Bound::Duration(std::time::Duration::from_millis(1500)),
            false,
            None,
        );
        assert_eq!(t["tcp"], true);
        assert_eq!(t["time"], 2);
        assert!(t.get("reverse").is_none() && t.get("bandwidth").is_none());
    }

    #[test]
    fn client_results_have_every_field_iperf3_requires() {
        let s = ClientStreamResult {
            bytes: 10,
            retransmits: None,
            jitter_s: 0.5,
            errors: 2,
            packets: 3,
            seconds: 1.5,
        };
        let r = client_results_json(false, [1.0, 0.5, 0.5], &s);
        for k in [
            "cpu_util_total",
            "cpu_util_user",
            "cpu_util_system",
            "sender_has_retransmits",
        ] {
            assert!(r.get(k).is_some(), "{k}");
        }
        assert_eq!(r["sender_has_retransmits"], -1);
        let st = &r["streams"][0];
        for k in ["id", "bytes", "retransmits", "jitter", "errors", "packets"] {
            assert!(st.get(k).is_some(), "{k}");
        }
        assert_eq!(
            (st["id"].as_u64(), st["retransmits"].as_i64()),
            (Some(1), Some(-1))
        );
    }

    #[test]
    fn udp_connect_reply_in_either_order_and_legacy() {
        assert!(is_udp_connect_reply(&UDP_CONNECT_REPLY.to_le_bytes()));
        assert!(is_udp_connect_reply(&UDP_CONNECT_REPLY.to_be_bytes()));
        assert!(is_udp_connect_reply(
            &LEGACY_UDP_CONNECT_REPLY.to_le_bytes()
        ));
        // A big-endian server's reply has the bytes of our (little-endian) connect datagram;
        // harmless, since a connected socket never hears its own datagram back.
        assert!(is_udp_connect_reply(&udp_connect_msg()));
        assert!(!is_udp_connect_reply(&[0; 16]));
        assert_eq!(&udp_connect_msg(), b"9876");
    }

    #[test]
    fn udp_header_round_trips() {
        let mut b = [0u8; 20];
        put_udp_header(&mut b, 7, 999_999, (1 << 40) + 3);
        assert_eq!(udp_header(&b), Some((7, 999_999, (1 << 40) + 3)));
        assert_eq!(&b[8..16], &((1u64 << 40) + 3).to_be_bytes());
        assert_eq!(udp_header(&b[..15]), None);
    }

    #[test]
    fn a_receiver_counts_gaps_late_datagrams_and_jitter_in_either_header() {
        for wide in [false, true] {
            let mut rx = UdpReceiver::default();
            let mut d = [0u8; 20];
            for (seq, usec) in [(1u64, 0u32), (2, 100), (5, 200), (4, 300), (6, 400)] {
                put_udp_header_sized(&mut d, 10, usec, seq, wide);
                rx.take(&d, wide, 10, usec + 50);
            }
            assert_eq!((rx.highest, rx.lost, rx.out_of_order), (6, 1, 1), "{wide}");
            assert_eq!(rx.jitter, 0.0, "constant transit: no jitter");
            rx.take(&d[..11], wide, 0, 0);
            assert_eq!(rx.highest, 6, "a short datagram moves nothing");
        }
        let mut rx = UdpReceiver::default();
        let mut d = [0u8; 16];
        put_udp_header_sized(&mut d, 0, 0, u64::MAX, true);
        rx.take(&d, true, u32::MAX, 999_999);
        rx.take(&d, true, 0, 0);
        assert_eq!(rx.highest, u64::MAX);
        assert!(rx.jitter.is_finite());
        put_udp_header_sized(&mut d, 1, 2, (1 << 32) + 7, false);
        assert_eq!(&d[8..12], &7u32.to_be_bytes(), "32-bit counters wrap");
    }
}
