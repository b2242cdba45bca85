//! What a server tells an iperf3 client about its test, without IO: the results JSON of the
//! results exchange (every field iperf3 3.12 clients require, and the omitted counts newer ones
//! read) and, for `--get-server-output`, a text in the shape of `iperf3 -s`'s own output.

use serde_json::{json, Value};
use std::fmt::Write;

/// One stream's figures as the server measured them, from the stream's start (or the end of
/// the omitted seconds) to the client's TEST_END (or the last byte drained after it).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamFigures {
    /// iperf3's stream id (1, 3, 4, 5, … in the order the streams were created).
    pub id: u32,
    /// The server sent on this stream.
    pub sender: bool,
    /// Bytes sent or received after the omitted seconds.
    pub bytes: u64,
    /// UDP: datagrams sent (sender) or the highest sequence number received (receiver),
    /// omitted seconds included, as iperf3 counts them.
    pub packets: u64,
    /// UDP: `packets` at the end of the omitted seconds.
    pub omitted_packets: u64,
    /// UDP receiver: datagrams missing after the omitted seconds.
    pub errors: u64,
    /// UDP receiver: datagrams that arrived after a later one.
    pub out_of_order: u64,
    /// UDP receiver: RFC 3550 interarrival jitter in seconds.
    pub jitter_s: f64,
    /// TCP sender: the kernel's retransmissions after the omitted seconds.
    pub retransmits: Option<u64>,
    /// Seconds the figures cover.
    pub seconds: f64,
}

/// The server's results JSON. `cpu` is (total, user, system) percent. The omitted seconds'
/// errors are left out of `errors` (and `omitted_errors` is 0), so a 3.12 client, which does
/// not read `omitted_errors`, and a newer one both report the loss after them.
pub fn results_json(
    cpu: [f64; 3],
    congestion_used: Option<&str>,
    streams: &[StreamFigures],
    server_output_text: Option<&str>,
) -> Value {
    let sends = streams.iter().any(|s| s.sender);
    let has_retransmits = streams.iter().any(|s| s.sender && s.retransmits.is_some());
    let list: Vec<Value> = streams
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "bytes": s.bytes,
                "retransmits": match s.retransmits {
                    Some(r) if s.sender => r as i64,
                    _ => -1,
                },
                "jitter": s.jitter_s,
                "errors": s.errors,
                "omitted_errors": 0,
                "packets": s.packets,
                "omitted_packets": s.omitted_packets,
                "start_time": 0.0,
                "end_time": s.seconds,
            })
        })
        .collect();
    let mut j = json!({
        "cpu_util_total": cpu[0],
        "cpu_util_user": cpu[1],
        "cpu_util_system": cpu[2],
        "sender_has_retransmits": if !sends { -1 } else { i64::from(has_retransmits) },
        "streams": list,
    });
    if let Some(o) = j.as_object_mut() {
        if let Some(cc) = congestion_used {
            o.insert("congestion_used".into(), cc.into());
        }
        if let Some(t) = server_output_text {
            o.insert("server_output_text".into(), t.into());
        }
    }
    j
}

/// One second (or the last part of one) of a test, both directions summed over their streams.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Interval {
    /// Seconds from the start of the test.
    pub start: f64,
    /// Seconds from the start of the test.
    pub end: f64,
    /// Bytes the server received in it.
    pub received: u64,
    /// Bytes the server sent in it.
    pub sent: u64,
    /// UDP: datagrams the server received in it.
    pub datagrams_received: u64,
    /// UDP: datagrams found missing in it.
    pub lost: u64,
    /// Whether it lies in the omitted seconds.
    pub omitted: bool,
}

/// What the text output says about the test besides its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct TextHeader {
    /// The server's iperf3 port.
    pub port: u16,
    /// The session's number in the server's log.
    pub session: u64,
    /// The client's control connection, as `ADDR, port PORT`.
    pub client: String,
    /// UDP (else TCP).
    pub udp: bool,
}

/// iperf3's adaptive byte units (1024-based), as in `28.6 GBytes`.
pub fn bytes_text(n: f64) -> String {
    let (v, unit) = if n >= 1024.0 * 1024.0 * 1024.0 {
        (n / (1024.0 * 1024.0 * 1024.0), "GBytes")
    } else if n >= 1024.0 * 1024.0 {
        (n / (1024.0 * 1024.0), "MBytes")
    } else if n >= 1024.0 {
        (n / 1024.0, "KBytes")
    } else {
        (n, "Bytes")
    };
    format!("{} {unit}", three_digits(v))
}

/// iperf3's adaptive bit rates (1000-based), as in `24.5 Gbits/sec`.
pub fn rate_text(bits_per_second: f64) -> String {
    let b = bits_per_second;
    let (v, unit) = if b >= 1e9 {
        (b / 1e9, "Gbits/sec")
    } else if b >= 1e6 {
        (b / 1e6, "Mbits/sec")
    } else if b >= 1e3 {
        (b / 1e3, "Kbits/sec")
    } else {
        (b, "bits/sec")
    };
    format!("{} {unit}", three_digits(v))
}

fn three_digits(v: f64) -> String {
    if v < 9.995 {
        format!("{v:4.2}")
    } else if v < 99.95 {
        format!("{v:4.1}")
    } else {
        format!("{v:4.0}")
    }
}

const RULE: &str = "-----------------------------------------------------------\n";

/// The text `--get-server-output` returns: a header, a line per second per direction, and a
/// line per stream at the end, in the shape of `iperf3 -s`'s output.
pub fn text_output(h: &TextHeader, intervals: &[Interval], streams: &[StreamFigures]) -> String {
    let mut t = String::new();
    let _ = write!(
        t,
        "{RULE}netsweep serve: iperf3 test (session {}) on port {}\n{RULE}\
         Accepted connection from {}\n",
        h.session, h.port, h.client
    );
    let directions: Vec<(&str, bool)> = [("RX", false), ("TX", true)]
        .into_iter()
        .filter(|(_, sender)| streams.iter().any(|s| s.sender == *sender))
        .collect();
    let both = directions.len() == 2;
    let head = if h.udp {
        "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
    } else {
        "[ ID] Interval           Transfer     Bitrate\n"
    };
    t.push_str(head);
    for i in intervals {
        let secs = (i.end - i.start).max(1e-9);
        for (name, sender) in &directions {
            let bytes = if *sender { i.sent } else { i.received } as f64;
            let id = if both {
                format!("[SUM][{name}]")
            } else {
                "[SUM]".into()
            };
            let _ = write!(
                t,
                "{id} {:6.2}-{:<6.2} sec  {:>11}  {:>15}",
                i.start,
                i.end,
                bytes_text(bytes),
                rate_text(bytes * 8.0 / secs)
            );
            if h.udp && !sender {
                let total = i.datagrams_received + i.lost;
                let pct = if total > 0 {
                    100.0 * i.lost as f64 / total as f64
                } else {
                    0.0
                };
                let _ = write!(t, "  {}/{} ({pct:.2}%)", i.lost, total);
            }
            t.push_str(if i.omitted { "  (omitted)\n" } else { "\n" });
        }
    }
    t.push_str("- - - - - - - - - - - - - - - - - - - - - - - - -\n");
    t.push_str(head);
    for s in streams {
        let role = if s.sender { "sender" } else { "receiver" };
        let _ = write!(
            t,
            "[{:3}] {:6.2}-{:<6.2} sec  {:>11}  {:>15}",
            s.id,
            0.0,
            s.seconds,
            bytes_text(s.bytes as f64),
            rate_text(if s.seconds > 0.0 {
                s.bytes as f64 * 8.0 / s.seconds
            } else {
                0.0
            })
        );
        if h.udp && !s.sender {
            let total = s.packets.saturating_sub(s.omitted_packets);
            let pct = if total > 0 {
                100.0 * s.errors as f64 / total as f64
            } else {
                0.0
            };
            let _ = write!(
                t,
                "  {:.3} ms  {}/{} ({pct:.2}%)",
                s.jitter_s * 1e3,
                s.errors,
                total
            );
        }
        if let (Some(r), true) = (s.retransmits, s.sender) {
            let _ = write!(t, "  {r} retransmits");
        }
        let _ = writeln!(t, "  {role}");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(id: u32, sender: bool) -> StreamFigures {
        StreamFigures {
            id,
            sender,
            bytes: 1_000_000,
            packets: 110,
            omitted_packets: 10,
            errors: 3,
            out_of_order: 0,
            jitter_s: 0.000_25,
            retransmits: sender.then_some(7),
            seconds: 2.0,
        }
    }

    #[test]
    fn results_carry_every_field_a_312_client_requires() {
        let j = results_json(
            [3.0, 1.0, 2.0],
            Some("cubic"),
            &[stream(1, false), stream(3, true)],
            Some("text"),
        );
        for k in [
            "cpu_util_total",
            "cpu_util_user",
            "cpu_util_system",
            "sender_has_retransmits",
            "streams",
        ] {
            assert!(j.get(k).is_some(), "{k}");
        }
        assert_eq!(j["sender_has_retransmits"], 1);
        assert_eq!(j["congestion_used"], "cubic");
        assert_eq!(j["server_output_text"], "text");
        let s = &j["streams"];
        assert_eq!(
            (s[0]["id"].as_u64(), s[1]["id"].as_u64()),
            (Some(1), Some(3))
        );
        assert_eq!(s[0]["retransmits"], -1, "a receiver has none");
        assert_eq!(s[1]["retransmits"], 7);
        for k in [
            "bytes",
            "jitter",
            "errors",
            "packets",
            "start_time",
            "end_time",
        ] {
            assert!(s[0].get(k).is_some(), "{k}");
        }
        let recv_only = results_json([0.0; 3], None, &[stream(1, false)], None);
        assert_eq!(recv_only["sender_has_retransmits"], -1);
        assert!(recv_only.get("server_output_text").is_none());
    }

    #[test]
    fn units_read_as_iperf3_prints_them() {
        assert_eq!(bytes_text(1.5 * 1024.0 * 1024.0 * 1024.0), "1.50 GBytes");
        assert_eq!(bytes_text(119.0 * 1024.0), " 119 KBytes");
        assert_eq!(rate_text(24.5e9), "24.5 Gbits/sec");
        assert_eq!(rate_text(976e3), " 976 Kbits/sec");
    }

    #[test]
    fn the_text_has_a_line_per_interval_and_per_stream() {
        let h = TextHeader {
            port: 5201,
            session: 4,
            client: "127.0.0.1, port 4000".into(),
            udp: true,
        };
        let iv = [Interval {
            start: 0.0,
            end: 1.0,
            received: 125_000,
            datagrams_received: 97,
            lost: 3,
            ..Interval::default()
        }];
        let t = text_output(&h, &iv, &[stream(1, false)]);
        assert!(
            t.contains("Accepted connection from 127.0.0.1, port 4000"),
            "{t}"
        );
        assert!(t.contains("[SUM]   0.00-1.00   sec"), "{t}");
        assert!(t.contains("3/100 (3.00%)"), "{t}");
        assert!(t.contains("0.250 ms  3/100 (3.00%)  receiver"), "{t}");
    }
}
