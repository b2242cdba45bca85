//! What a run measures: transport, api, pattern, the sweep and the repetition policy.

use netsweep_proto::messages::{Knobs, SessionSetup};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The protocol stack under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    Tcp,
    Udp,
    UnixStream,
    UnixDgram,
    /// Unix SOCK_SEQPACKET: message boundaries kept, reliable and ordered (never loses).
    UnixSeqpacket,
    /// Raw Ethernet frames over AF_PACKET (EtherType 0x88B5): no IP, no UDP.
    Packet,
    /// Multipath TCP (IPPROTO_MPTCP).
    Mptcp,
    /// UDP-Lite (IPPROTO_UDPLITE, RFC 3828).
    Udplite,
    /// Two endpoints on one host copying through a shared-memory ring (no kernel on the data
    /// path): the in-host memcpy ceiling, NetPIPE's memcpy module. A byte stream.
    Shm,
}

/// Bytes of the netsweep header inside every `packet` frame (session tag, direction, payload
/// length): the largest `packet` payload is the interface MTU minus this.
pub const PACKET_HEADER: u64 = 8;

impl Transport {
    /// Every transport this build knows, in listing order.
    pub const ALL: [Transport; 9] = [
        Transport::Tcp,
        Transport::Udp,
        Transport::UnixStream,
        Transport::UnixDgram,
        Transport::UnixSeqpacket,
        Transport::Packet,
        Transport::Mptcp,
        Transport::Udplite,
        Transport::Shm,
    ];

    /// The name used on the command line, on the wire and in results.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
            Transport::UnixStream => "unix-stream",
            Transport::UnixDgram => "unix-dgram",
            Transport::UnixSeqpacket => "unix-seqpacket",
            Transport::Packet => "packet",
            Transport::Mptcp => "mptcp",
            Transport::Udplite => "udplite",
            Transport::Shm => "shm",
        }
    }

    /// Parses a name; `unix` is short for `unix-stream`, `seqpacket` for `unix-seqpacket`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "tcp" => Some(Transport::Tcp),
            "udp" => Some(Transport::Udp),
            "unix" | "unix-stream" => Some(Transport::UnixStream),
            "unix-dgram" => Some(Transport::UnixDgram),
            "unix-seqpacket" | "seqpacket" => Some(Transport::UnixSeqpacket),
            "packet" => Some(Transport::Packet),
            "mptcp" => Some(Transport::Mptcp),
            "udplite" | "udp-lite" => Some(Transport::Udplite),
            "shm" | "memcpy" => Some(Transport::Shm),
            _ => None,
        }
    }

    /// True when message boundaries are kept (and loss is possible: patterns count it).
    /// `unix-seqpacket` keeps boundaries but never loses: it is a datagram transport whose
    /// loss is always 0.
    pub fn is_datagram(self) -> bool {
        matches!(
            self,
            Transport::Udp
                | Transport::UnixDgram
                | Transport::UnixSeqpacket
                | Transport::Packet
                | Transport::Udplite
        )
    }

    /// True for transports addressed by IP (host and port). `packet` is not (it is addressed
    /// by MAC), although it finds its interface from the route to the peer's IP.
    pub fn is_ip(self) -> bool {
        matches!(
            self,
            Transport::Tcp | Transport::Udp | Transport::Mptcp | Transport::Udplite
        )
    }

    /// The largest message the default sweep goes up to.
    pub fn default_ceiling(self) -> u64 {
        match self {
            // 65535 − 20 (IPv4 header) − 8 (UDP header).
            Transport::Udp | Transport::Udplite => 65_507,
            // net.core.wmem_default-bound on Linux; 64 KiB is safe for the default sweep.
            Transport::UnixDgram | Transport::UnixSeqpacket => 65_536,
            // A 1500-byte Ethernet MTU minus the netsweep frame header; the real limit is the
            // interface MTU, checked when the data path opens.
            Transport::Packet => 1500 - PACKET_HEADER,
            Transport::Tcp | Transport::UnixStream | Transport::Mptcp | Transport::Shm => 8 << 20,
        }
    }

    /// The largest message a single datagram can carry, if the transport has such a limit.
    /// For `packet` this is the bound of the frame header's length field; the interface MTU
    /// (minus [`PACKET_HEADER`]) is the real limit, checked when the data path opens.
    pub fn max_message(self, ipv6: bool) -> Option<u64> {
        match self {
            Transport::Udp | Transport::Udplite if ipv6 => Some(65_527),
            Transport::Udp | Transport::Udplite => Some(65_507),
            Transport::UnixDgram | Transport::UnixSeqpacket => Some(212_992),
            Transport::Packet => Some(65_535 - PACKET_HEADER),
            _ => None,
        }
    }

    /// The apis this transport supports, `basic` first.
    pub fn apis(self) -> &'static [Api] {
        match self {
            Transport::Tcp => &[
                Api::Basic,
                Api::Zerocopy,
                Api::Sendfile,
                Api::Splice,
                Api::Uring,
            ],
            Transport::Mptcp => &[Api::Basic, Api::Sendfile],
            Transport::Udp => &[Api::Basic, Api::Mmsg, Api::Zerocopy, Api::Uring],
            Transport::Udplite | Transport::UnixDgram | Transport::Packet => {
                &[Api::Basic, Api::Mmsg]
            }
            Transport::UnixStream => &[Api::Basic, Api::Splice],
            Transport::UnixSeqpacket | Transport::Shm => &[Api::Basic],
        }
    }

    /// Checks that this transport supports `api` with `pattern`; the error says the fix.
    pub fn check_api(self, api: Api, pattern: Pattern) -> Result<(), String> {
        let apis = self.apis();
        if !apis.contains(&api) {
            return Err(format!(
                "{self} does not support --api {}: it supports {}",
                api.name(),
                apis.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
            ));
        }
        if pattern == Pattern::Crr
            && (self.is_datagram()
                || !matches!(
                    self,
                    Transport::Tcp | Transport::Mptcp | Transport::UnixStream
                ))
        {
            return Err(format!(
                "--pattern crr needs a connection-oriented transport (tcp, mptcp, unix-stream), not {self}"
            ));
        }
        if pattern == Pattern::Crr && api != Api::Basic {
            return Err("--pattern crr uses --api basic (one connection per transaction)".into());
        }
        if api == Api::Splice && pattern != Pattern::Stream {
            return Err(format!(
                "--api splice applies to the receiver of a stream (socket → pipe → /dev/null): \
                 use --pattern stream, or --api basic for {pattern}"
            ));
        }
        Ok(())
    }
}
impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How data is handed to the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// One send/recv system call per message (or per partial transfer).
    Basic,
    /// sendmmsg/recvmmsg: `--batch` datagrams per system call (stream pattern).
    Mmsg,
    /// MSG_ZEROCOPY sends, completions reaped from the error queue and counted.
    Zerocopy,
    /// sendfile(2) from a memory file holding the message bytes (sender side).
    Sendfile,
    /// splice(2) socket → pipe → /dev/null on the stream receiver.
    Splice,
    /// io_uring: one submission per message, or a batch of `--batch` SQEs per
    /// io_uring_enter(2) (stream); `calls` counts io_uring_enter calls.
    Uring,
}

impl Api {
    pub const ALL: [Api; 6] = [
        Api::Basic,
        Api::Mmsg,
        Api::Zerocopy,
        Api::Sendfile,
        Api::Splice,
        Api::Uring,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Api::Basic => "basic",
            Api::Mmsg => "mmsg",
            Api::Zerocopy => "zerocopy",
            Api::Sendfile => "sendfile",
            Api::Splice => "splice",
            Api::Uring => "uring",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "basic" => Some(Api::Basic),
            "mmsg" => Some(Api::Mmsg),
            "zerocopy" | "msg-zerocopy" => Some(Api::Zerocopy),
            "sendfile" => Some(Api::Sendfile),
            "splice" => Some(Api::Splice),
            "uring" | "io-uring" | "io_uring" => Some(Api::Uring),
            _ => None,
        }
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The traffic pattern of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Round trips: the client sends a message, the server echoes it.
    Pingpong,
    /// One way, client to server, as fast as the stack accepts.
    Stream,
    /// Connect, request, response, close: one new connection per transaction (netperf
    /// TCP_CRR). Measures connection setup as well as the exchange.
    Crr,
}

impl Pattern {
    pub const ALL: [Pattern; 3] = [Pattern::Pingpong, Pattern::Stream, Pattern::Crr];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Pingpong => "pingpong",
            Pattern::Stream => "stream",
            Pattern::Crr => "crr",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pingpong" | "pp" | "rr" => Some(Pattern::Pingpong),
            "stream" => Some(Pattern::Stream),
            "crr" => Some(Pattern::Crr),
            _ => None,
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Address family of the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
    Unix,
    /// Link layer (raw Ethernet frames, no network-layer address family).
    Link,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
            Family::Unix => "unix",
            Family::Link => "link",
        }
    }
}

/// Bytes of the header every datagram of a datagram stream carries:
/// cookie (u32), sequence number (u64), send timestamp (u64 ns).
pub const DGRAM_HEADER: u64 = 20;

/// A whole run: one configuration swept over message sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    pub transport: Transport,
    pub api: Api,
    pub pattern: Pattern,
    pub family: Family,
    /// The message sizes, in the order they are measured.
    pub sizes: Vec<u64>,
    /// How the sizes were asked for (`--sizes` text, or the default schedule's description).
    pub sizes_spec: String,
    /// Target duration of one trial, nanoseconds.
    pub trial_time_ns: u64,
    /// Target relative half-width of the 95% confidence interval (0.02 = 2%).
    pub precision: f64,
    /// Fewest trials per point.
    pub min_trials: u32,
    /// Most trials per point.
    pub max_trials: u32,
    /// Time budget of one point, nanoseconds; the point stops when it is spent.
    pub max_point_time_ns: u64,
    /// Whether each point starts with an untimed warm-up trial.
    pub warmup: bool,
    /// Stop the sweep once one transfer takes longer than this, nanoseconds (0: never).
    pub stop_after_transfer_ns: u64,
    /// Inactivity limit on every wait for the peer, nanoseconds.
    pub timeout_ns: u64,
    /// After the sweep, measure finely around suspected anomalies (`--refine`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refine: bool,
    /// The knobs' CPUs were chosen by netsweep's default placement, not asked for with
    /// `--cpu` (see [`RunSpec::placement`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default_placement: bool,
    /// Knobs applied on the client's endpoint.
    pub client_knobs: Knobs,
    /// Knobs applied on the server's endpoint.
    pub server_knobs: Knobs,
}

impl RunSpec {
    /// Defaults for a transport and pattern; sizes left empty for the caller to fill.
    pub fn new(transport: Transport, pattern: Pattern, family: Family) -> Self {
        Self {
            transport,
            api: Api::Basic,
            pattern,
            family,
            sizes: Vec::new(),
            sizes_spec: String::new(),
            trial_time_ns: 20_000_000,
            precision: 0.02,
            min_trials: 3,
            max_trials: 30,
            max_point_time_ns: 300_000_000,
            warmup: true,
            stop_after_transfer_ns: 1_000_000_000,
            timeout_ns: 10_000_000_000,
            refine: false,
            default_placement: false,
            client_knobs: Knobs::default(),
            server_knobs: Knobs::default(),
        }
    }

    /// Where the data threads run, in words: pinned (by `--cpu` or by default) or free.
    pub fn placement(&self) -> String {
        let how = if self.default_placement {
            "by default; --cpu free lets the scheduler place them"
        } else {
            "--cpu"
        };
        match (self.client_knobs.cpu, self.server_knobs.cpu) {
            (Some(c), Some(s)) if c == s => format!("both ends on CPU {c} ({how})"),
            (None, None) => "free: the scheduler places both ends (recorded per point)".into(),
            (c, s) => {
                let one = |x: Option<u32>| x.map_or("free".into(), |c| format!("CPU {c}"));
                format!("client on {}, server on {} ({how})", one(c), one(s))
            }
        }
    }

    /// The session setup the server receives.
    pub fn session_setup(&self) -> SessionSetup {
        SessionSetup {
            transport: self.transport.name().to_string(),
            api: self.api.name().to_string(),
            pattern: self.pattern.name().to_string(),
            family: self.family.name().to_string(),
            max_size: self.sizes.iter().copied().max().unwrap_or(0),
            server_knobs: self.server_knobs.clone(),
            timeout_ns: self.timeout_ns,
        }
    }

    /// Checks the combination; the error says the fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.sizes.is_empty() {
            return Err(
                "no message sizes to measure: give --sizes, e.g. --sizes 1,1k..64k:*2".into(),
            );
        }
        self.transport.check_api(self.api, self.pattern)?;
        let ipv6 = self.family == Family::Ipv6;
        if let Some(max) = self.transport.max_message(ipv6) {
            if let Some(&big) = self.sizes.iter().find(|&&s| s > max) {
                return Err(format!(
                    "size {big} is larger than one {} datagram can carry ({max} bytes): lower --sizes",
                    self.transport
                ));
            }
        }
        if self.transport.is_datagram() && self.pattern == Pattern::Stream {
            if let Some(&small) = self.sizes.iter().find(|&&s| s < DGRAM_HEADER) {
                return Err(format!(
                    "size {small} is too small for a {} stream: every datagram carries a {DGRAM_HEADER}-byte \
                     sequence header, so use sizes of at least {DGRAM_HEADER} (e.g. --sizes {DGRAM_HEADER}..1472:*2)",
                    self.transport
                ));
            }
        }
        if self.pattern == Pattern::Stream && self.sizes.contains(&0) {
            return Err("size 0 cannot be streamed: use sizes of at least 1".into());
        }
        if !(self.precision > 0.0 && self.precision < 1.0) {
            return Err(format!(
                "--precision {} is out of range: give a fraction between 0 and 1 (0.02 = 2%)",
                self.precision
            ));
        }
        if self.min_trials < 2 || self.max_trials < self.min_trials {
            return Err("trials: need at least 2, and max at or above min".into());
        }
        if self.trial_time_ns == 0 || self.timeout_ns == 0 || self.max_point_time_ns == 0 {
            return Err("--trial-time, --max-point-time and --timeout must be above zero".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_names_round_trip() {
        for t in Transport::ALL {
            assert_eq!(Transport::parse(t.name()), Some(t));
        }
        assert_eq!(Transport::parse("unix"), Some(Transport::UnixStream));
        assert_eq!(Transport::parse("sctp"), None);
        for a in Api::ALL {
            assert_eq!(Api::parse(a.name()), Some(a));
        }
    }

    #[test]
    fn api_support_is_checked_with_a_fix() {
        assert_eq!(Transport::Udp.check_api(Api::Mmsg, Pattern::Stream), Ok(()));
        let e = Transport::Tcp
            .check_api(Api::Mmsg, Pattern::Stream)
            .unwrap_err();
        assert!(e.contains("basic, zerocopy, sendfile, splice"), "{e}");
        assert!(Transport::Tcp
            .check_api(Api::Splice, Pattern::Pingpong)
            .unwrap_err()
            .contains("--pattern stream"));
        for t in Transport::ALL {
            assert_eq!(t.apis()[0], Api::Basic);
        }
    }

    #[test]
    fn uring_and_shm_are_known() {
        assert_eq!(Api::parse("io_uring"), Some(Api::Uring));
        assert_eq!(Transport::parse("shm"), Some(Transport::Shm));
        for t in [Transport::Tcp, Transport::Udp] {
            assert_eq!(t.check_api(Api::Uring, Pattern::Stream), Ok(()));
            assert_eq!(t.check_api(Api::Uring, Pattern::Pingpong), Ok(()));
        }
        let s = Transport::Shm;
        assert!(!s.is_datagram() && !s.is_ip() && s.max_message(false).is_none());
        assert_eq!(s.default_ceiling(), 8 << 20);
        assert!(s
            .check_api(Api::Uring, Pattern::Stream)
            .unwrap_err()
            .contains("supports basic"));
    }

    #[test]
    fn validate_rejects_bad_combinations() {
        let mut s = RunSpec::new(Transport::Udp, Pattern::Stream, Family::Ipv4);
        assert!(s.validate().unwrap_err().contains("--sizes"));
        s.sizes = vec![8];
        assert!(s.validate().unwrap_err().contains("at least 20"));
        s.sizes = vec![70_000];
        assert!(s.validate().unwrap_err().contains("65507"));
        s.sizes = vec![1472];
        assert_eq!(s.validate(), Ok(()));
        s.precision = 0.0;
        assert!(s.validate().unwrap_err().contains("--precision"));
    }
}
