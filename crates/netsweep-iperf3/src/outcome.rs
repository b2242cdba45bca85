//! What one iperf3 test yields: what this client measured itself, and what the server reported
//! in its results JSON — every server field as the server sent it, None when it did not send
//! it (parsing is sans-IO: [`ServerReport::parse`] takes the frame's bytes).

use serde_json::Value;
use std::time::{Duration, Instant};

/// Which end of the data this client was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The client sent the data (forward).
    Sender,
    /// The server sent the data (reverse, `-R`).
    Receiver,
}

/// What the client measured on its own data connection.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientMeasure {
    /// Sender (forward) or receiver (reverse).
    pub role: Role,
    /// Payload bytes written or read (for UDP including iperf3's 16-byte header).
    pub bytes: u64,
    /// Messages (TCP: writes of `len` or the final shorter one; read: not counted, see
    /// `calls`) or datagrams sent or received.
    pub messages: u64,
    /// send/write or recv/read system calls made in the data phase.
    pub calls: u64,
    /// UDP receiver: datagrams missing from the sequence (gaps minus late arrivals).
    pub lost: Option<u64>,
    /// UDP receiver: datagrams that arrived after a later one.
    pub out_of_order: Option<u64>,
    /// UDP receiver: RFC 1889 interarrival jitter in seconds, as iperf3 computes it.
    pub jitter_s: Option<f64>,
    /// UDP receiver: the highest sequence number seen.
    pub highest_seq: Option<u64>,
    /// TCP sender: the kernel's total retransmissions on the data connection (TCP_INFO).
    pub retransmits: Option<u64>,
    /// UDP sender: sends refused by the kernel (ENOBUFS) and retried.
    pub send_retries: u64,
    /// When the data phase began (TEST_RUNNING received).
    pub start: Instant,
    /// When the last byte was written or read.
    pub end: Instant,
    /// TCP sender: when the kernel had every byte acknowledged (the settle time follows);
    /// otherwise the end of the data loop.
    pub drained: Instant,
    /// This process's CPU (total, user, system) in percent of the wall time of the test, as
    /// iperf3 computes its own.
    pub cpu_util: [f64; 3],
}

impl ClientMeasure {
    /// Wall time of the data phase: from TEST_RUNNING to the last byte.
    pub fn wall(&self) -> Duration {
        self.end.duration_since(self.start)
    }
}

/// One stream of the server's results, every field as sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerStream {
    /// iperf3's stream id.
    pub id: Option<i64>,
    /// Bytes the server received (forward) or sent (reverse).
    pub bytes: Option<u64>,
    /// The server's TCP retransmissions as sender (-1: not measured).
    pub retransmits: Option<i64>,
    /// UDP jitter the server measured as receiver, in seconds.
    pub jitter: Option<f64>,
    /// UDP datagrams the server counted lost as receiver.
    pub errors: Option<i64>,
    /// UDP datagrams: highest sequence received (receiver) or sent (sender).
    pub packets: Option<u64>,
    /// Lost datagrams in the omitted interval (newer servers only).
    pub omitted_errors: Option<i64>,
    /// Datagrams in the omitted interval (newer servers only).
    pub omitted_packets: Option<u64>,
    /// Seconds since the stream's start at which it started (0).
    pub start_time: Option<f64>,
    /// Seconds from the stream's start to its end on the server.
    pub end_time: Option<f64>,
}

/// The server's results JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReport {
    /// The server process's CPU over the test, percent of wall time.
    pub cpu_util_total: Option<f64>,
    /// Its user part.
    pub cpu_util_user: Option<f64>,
    /// Its system part.
    pub cpu_util_system: Option<f64>,
    /// 1 when the server (as sender) measured retransmits, 0 when not, -1 as receiver.
    pub sender_has_retransmits: Option<i64>,
    /// The congestion control the server's data socket used.
    pub congestion_used: Option<String>,
    /// The streams (one here).
    pub streams: Vec<ServerStream>,
    /// The whole JSON as received.
    pub raw: Value,
}

/// A JSON number as u64: integers, and floats that are whole and non-negative (cJSON prints
/// large counters in exponent form).
fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
            .map(|f| f as u64)
    })
}

/// A JSON number as i64 (whole floats too). iperf3 3.12's cJSON prints -1 as
/// 18446744073709551615: integers from 2^63 up are read as the two's complement they are.
fn as_i64(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_u64().map(|u| u as i64))
        .or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                .map(|f| f as i64)
        })
}

impl ServerReport {
    /// Parses the server's results frame, or says what is wrong with it.
    pub fn parse(text: &[u8]) -> Result<ServerReport, String> {
        let raw: Value = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
        if !raw.is_object() {
            return Err("not a JSON object".into());
        }
        let f = |k: &str| raw.get(k).and_then(Value::as_f64);
        let streams = match raw.get("streams") {
            None => Vec::new(),
            Some(Value::Array(a)) => a.iter().map(stream).collect(),
            Some(_) => return Err("\"streams\" is not an array".into()),
        };
        Ok(ServerReport {
            cpu_util_total: f("cpu_util_total"),
            cpu_util_user: f("cpu_util_user"),
            cpu_util_system: f("cpu_util_system"),
            sender_has_retransmits: raw.get("sender_has_retransmits").and_then(as_i64),
            congestion_used: raw
                .get("congestion_used")
                .and_then(Value::as_str)
                .map(String::from),
            streams,
            raw,
        })
    }

    /// The first stream, or an empty one when the server sent none.
    pub fn stream(&self) -> ServerStream {
        self.streams.first().cloned().unwrap_or_default()
    }
}

fn stream(s: &Value) -> ServerStream {
    let u = |k: &str| s.get(k).and_then(as_u64);
    let i = |k: &str| s.get(k).and_then(as_i64);
    let f = |k: &str| s.get(k).and_then(Value::as_f64);
    ServerStream {
        id: i("id"),
        bytes: u("bytes"),
        retransmits: i("retransmits"),
        jitter: f("jitter"),
        errors: i("errors"),
        packets: u("packets"),
        omitted_errors: i("omitted_errors"),
        omitted_packets: u("omitted_packets"),
        start_time: f("start_time"),
        end_time: f("end_time"),
    }
}

/// One test's outcome: the client's own figures and the server's report.
#[derive(Debug, Clone, PartialEq)]
pub struct TestOutcome {
    /// What this client measured.
    pub client: ClientMeasure,
    /// What the server reported.
    pub server: ServerReport,
    /// When TEST_END went out: the server's `end_time` runs to about here, so the time from
    /// the last byte to it (the drain and the settle) is not the server's receiving time.
    pub test_end_sent: Instant,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_312_server_report_and_keeps_absent_fields_none() {
        let t = br#"{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1,
            "sender_has_retransmits":18446744073709551615,"congestion_used":"cubic","streams":[{"id":1,
            "bytes":1.2e10,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,
            "start_time":0,"end_time":0.25}]}"#;
        let r = ServerReport::parse(t).unwrap();
        assert_eq!(r.cpu_util_total, Some(1.5));
        assert_eq!(r.cpu_util_system, Some(1.0));
        assert_eq!(r.sender_has_retransmits, Some(-1));
        assert_eq!(r.congestion_used.as_deref(), Some("cubic"));
        let s = r.stream();
        assert_eq!(s.bytes, Some(12_000_000_000));
        assert_eq!(
            (s.id, s.retransmits, s.end_time),
            (Some(1), Some(-1), Some(0.25))
        );
        assert_eq!((s.omitted_errors, s.omitted_packets), (None, None));
    }

    #[test]
    fn a_report_without_streams_or_cpu_is_none_not_zero() {
        let r = ServerReport::parse(b"{}").unwrap();
        assert_eq!(r.cpu_util_total, None);
        assert_eq!(r.stream(), ServerStream::default());
        assert_eq!(r.stream().bytes, None);
        assert!(ServerReport::parse(b"[1]").is_err());
        assert!(ServerReport::parse(b"{\"streams\":3}").is_err());
        assert!(ServerReport::parse(b"{").is_err());
    }
}
