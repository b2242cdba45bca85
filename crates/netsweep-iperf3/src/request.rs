//! The test an iperf3 client asks a server for: its parameters JSON parsed into typed values,
//! without IO and without policy (what a server allows is its caller's business). A pure
//! function of the peer's bytes, so a fuzz target reaches it: [`Request::parse`] never panics
//! and allocates no more than the text it is given. Read as iperf3's `get_parameters` reads
//! them: a flag is on when its key is present, a later protocol key wins (tcp, udp, sctp).

use serde_json::{Map, Value};

/// The transport protocol a test asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// TCP (iperf3's default when the parameters name none).
    Tcp,
    /// UDP.
    Udp,
    /// SCTP (parsed so that it can be refused by name).
    Sctp,
}

/// The longest text kept from a string parameter (title, extra data, congestion control,
/// client version); longer ones are cut.
pub const MAX_TEXT: usize = 256;

/// A test as the client's parameters JSON asks for it. Counts are as sent (0 where iperf3
/// means "not set"); a server checks them against its limits before it sizes anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `tcp`, `udp` or `sctp`.
    pub protocol: Protocol,
    /// `omit`: seconds at the start whose figures are discarded (`-O`).
    pub omit: u64,
    /// `time`: the test's length in seconds (`-t`; 0 when bounded by bytes or blocks).
    pub time: u64,
    /// `num`: bytes to move (`-n`; 0: not set).
    pub num: u64,
    /// `blockcount`: blocks to move (`-k`; 0: not set).
    pub blockcount: u64,
    /// `MSS` (`-M`).
    pub mss: Option<u64>,
    /// `nodelay` (`-N`).
    pub nodelay: bool,
    /// `parallel`: streams per direction (`-P`; iperf3 sends 1 without it).
    pub parallel: u64,
    /// `reverse` (`-R`): the server sends.
    pub reverse: bool,
    /// `bidirectional` (`--bidir`): both send.
    pub bidirectional: bool,
    /// `window`: socket buffer size in bytes (`-w`).
    pub window: Option<u64>,
    /// `len`: bytes per write or datagram (`-l`).
    pub len: Option<u64>,
    /// `bandwidth`: bits per second per stream (`-b`; 0 or absent: unlimited).
    pub bandwidth: Option<u64>,
    /// `fqrate`: the kernel's pacing rate in bits per second (`--fq-rate`).
    pub fqrate: Option<u64>,
    /// `pacing_timer` in microseconds (`--pacing-timer`).
    pub pacing_timer: Option<u64>,
    /// `burst`: blocks sent back to back (`-b RATE/BURST`).
    pub burst: Option<u64>,
    /// `TOS` (`-S`, `--dscp`).
    pub tos: Option<u64>,
    /// `flowlabel` (`-L`).
    pub flowlabel: Option<u64>,
    /// `title` (`-T`), cut at [`MAX_TEXT`].
    pub title: Option<String>,
    /// `extra_data` (`--extra-data`), cut at [`MAX_TEXT`].
    pub extra_data: Option<String>,
    /// `congestion` (`-C`), cut at [`MAX_TEXT`].
    pub congestion: Option<String>,
    /// `get_server_output` (`--get-server-output`).
    pub get_server_output: bool,
    /// `udp_counters_64bit` (`--udp-counters-64bit`): 64-bit sequence numbers.
    pub udp_counters_64bit: bool,
    /// `repeating_payload` (`--repeating-payload`).
    pub repeating_payload: bool,
    /// `zerocopy` (`-Z`).
    pub zerocopy: bool,
    /// `dont_fragment` (`--dont-fragment`).
    pub dont_fragment: bool,
    /// `server_affinity` (`-A n,m`): the CPU the client asks the server to run on.
    pub server_affinity: Option<u64>,
    /// Whether an `authtoken` (iperf3's RSA authentication) was sent.
    pub authtoken: bool,
    /// `client_version`, cut at [`MAX_TEXT`].
    pub client_version: Option<String>,
}

impl Request {
    /// Parses a parameters frame's bytes, or says which field is not what iperf3 sends.
    pub fn parse(text: &[u8]) -> Result<Request, String> {
        let v: Value = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(o) = v else {
            return Err("the parameters are not a JSON object".into());
        };
        let has = |k: &str| o.contains_key(k);
        let protocol = if has("sctp") {
            Protocol::Sctp
        } else if has("udp") {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        Ok(Request {
            protocol,
            omit: count(&o, "omit")?.unwrap_or(0),
            time: count(&o, "time")?.unwrap_or(0),
            num: count(&o, "num")?.unwrap_or(0),
            blockcount: count(&o, "blockcount")?.unwrap_or(0),
            mss: count(&o, "MSS")?,
            nodelay: has("nodelay"),
            parallel: count(&o, "parallel")?.unwrap_or(1),
            reverse: has("reverse"),
            bidirectional: has("bidirectional"),
            window: count(&o, "window")?,
            len: count(&o, "len")?,
            bandwidth: count(&o, "bandwidth")?,
            fqrate: count(&o, "fqrate")?,
            pacing_timer: count(&o, "pacing_timer")?,
            burst: count(&o, "burst")?,
            tos: count(&o, "TOS")?,
            flowlabel: count(&o, "flowlabel")?,
            title: text_of(&o, "title")?,
            extra_data: text_of(&o, "extra_data")?,
            congestion: text_of(&o, "congestion")?,
            get_server_output: has("get_server_output"),
            udp_counters_64bit: has("udp_counters_64bit"),
            repeating_payload: has("repeating_payload"),
            zerocopy: count(&o, "zerocopy")?.is_some_and(|z| z != 0),
            dont_fragment: count(&o, "dont_fragment")?.is_some_and(|d| d != 0),
            server_affinity: count(&o, "server_affinity")?,
            authtoken: has("authtoken"),
            client_version: text_of(&o, "client_version")?,
        })
    }

    /// Streams the server receives on (the client sends).
    pub fn streams_to_server(&self) -> u64 {
        if self.reverse && !self.bidirectional {
            0
        } else {
            self.parallel
        }
    }

    /// Streams the server sends on.
    pub fn streams_from_server(&self) -> u64 {
        if self.reverse || self.bidirectional {
            self.parallel
        } else {
            0
        }
    }
}

/// A non-negative whole number, as cJSON prints one (an integer, or a whole float such as
/// `1e+10`), or None when absent; anything else names the field.
fn count(o: &Map<String, Value>, k: &str) -> Result<Option<u64>, String> {
    let Some(v) = o.get(k) else { return Ok(None) };
    if let Some(n) = v.as_u64() {
        return Ok(Some(n));
    }
    match v.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => Ok(Some(f as u64)),
        _ => Err(format!(
            "parameter {k:?} is {}, not a count",
            cut(&v.to_string(), 40)
        )),
    }
}

/// A string field cut at [`MAX_TEXT`] characters, or None when absent.
fn text_of(o: &Map<String, Value>, k: &str) -> Result<Option<String>, String> {
    match o.get(k) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(cut(s, MAX_TEXT))),
        Some(v) => Err(format!(
            "parameter {k:?} is {}, not a string",
            cut(&v.to_string(), 40)
        )),
    }
}

fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Debian's iperf3 3.12 sends for `iperf3 -c H -u -b 100M -P 4 --bidir -l 1400 -O 1
    /// --get-server-output` (from its --debug output).
    const SENT_BY_312: &str = r#"{"udp":true,"omit":1,"time":10,"num":0,"blockcount":0,
        "parallel":4,"bidirectional":true,"len":1400,"bandwidth":100000000,"pacing_timer":1000,
        "get_server_output":1,"client_version":"3.12"}"#;

    #[test]
    fn parses_what_iperf3_sends() {
        let r = Request::parse(SENT_BY_312.as_bytes()).unwrap();
        assert_eq!(r.protocol, Protocol::Udp);
        assert_eq!((r.omit, r.time, r.num, r.parallel), (1, 10, 0, 4));
        assert!(r.bidirectional && !r.reverse && r.get_server_output);
        assert_eq!(r.len, Some(1400));
        assert_eq!(r.bandwidth, Some(100_000_000));
        assert_eq!((r.streams_to_server(), r.streams_from_server()), (4, 4));
        assert_eq!(r.client_version.as_deref(), Some("3.12"));
        assert!(!r.udp_counters_64bit && r.window.is_none() && r.congestion.is_none());
    }

    #[test]
    fn directions_and_defaults() {
        let r = Request::parse(br#"{"tcp":true,"reverse":true,"parallel":2}"#).unwrap();
        assert_eq!(r.protocol, Protocol::Tcp);
        assert_eq!((r.streams_to_server(), r.streams_from_server()), (0, 2));
        let r = Request::parse(b"{}").unwrap();
        assert_eq!((r.protocol, r.parallel), (Protocol::Tcp, 1));
        assert_eq!((r.streams_to_server(), r.streams_from_server()), (1, 0));
        let r = Request::parse(br#"{"tcp":true,"sctp":true,"num":1e+10}"#).unwrap();
        assert_eq!((r.protocol, r.num), (Protocol::Sctp, 10_000_000_000));
    }

    #[test]
    fn hostile_values_are_refused_by_name_and_text_is_cut() {
        for (t, field) in [
            (r#"{"parallel":-1}"#, "parallel"),
            (r#"{"len":1.5}"#, "len"),
            (r#"{"window":"big"}"#, "window"),
            (r#"{"time":1e300}"#, "time"),
            (r#"{"title":7}"#, "title"),
        ] {
            let e = Request::parse(t.as_bytes()).unwrap_err();
            assert!(e.contains(field), "{t}: {e}");
        }
        assert!(Request::parse(b"[1]").is_err());
        assert!(Request::parse(b"\xff").is_err());
        let long = format!(r#"{{"title":"{}"}}"#, "é".repeat(10_000));
        let r = Request::parse(long.as_bytes()).unwrap();
        assert_eq!(r.title.unwrap().chars().count(), MAX_TEXT);
    }
}
