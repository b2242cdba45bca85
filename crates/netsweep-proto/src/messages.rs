//! Typed control messages and the wire-level data they carry (serde, JSON inside frames).
//!
//! Every struct tolerates unknown fields and defaults missing ones, so a newer peer can add
//! fields without breaking an older one. Times on the wire are u64 nanoseconds.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod quic;
mod tls;
pub use quic::QuicGranted;
pub use tls::TlsGranted;

/// A message from the client (the side that drives the run) to the server.
// Messages are built and consumed one at a time, off the data path: size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMsg {
    /// Opens a session: what to measure and who asks.
    Hello {
        /// What the session measures.
        setup: SessionSetup,
        /// The client host.
        client: HostInfo,
        /// The client's nonce (64 hex digits) when it holds an authentication key; a server
        /// with a key answers with [`ServerMsg::AuthChallenge`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_nonce: Option<String>,
    },
    /// The client's proof that it holds the key: HMAC-SHA256 over both nonces
    /// ([`crate::auth`]), 64 hex digits.
    AuthResponse {
        /// The proof.
        client_proof: String,
    },
    /// The client has connected (stream) or registered (datagram) its data endpoint.
    DataReady {},
    /// Arms the server for one trial of one point.
    TrialStart {
        /// Trial number, counted by the client over the session.
        trial: u64,
        /// What the trial does.
        spec: TrialSpec,
    },
    /// The client finished its part of the trial; carries the client's counters.
    TrialEnd {
        /// The trial's number, as in its `trial_start`.
        trial: u64,
        /// What the client counted.
        counters: SideCounters,
    },
    /// Ends the session.
    Bye {},
}

/// A message from the server to the client.
// Built and consumed one at a time, off the data path: size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMsg {
    /// The server holds a key: its nonce and its own proof that it holds the key
    /// ([`crate::auth`]); the client answers with [`ClientMsg::AuthResponse`].
    AuthChallenge {
        /// The server's nonce, 64 hex digits.
        server_nonce: String,
        /// HMAC-SHA256 over both nonces, 64 hex digits.
        server_proof: String,
    },
    /// The session is accepted; the data endpoint to reach and the cookie that binds it.
    Welcome {
        /// The server host.
        server: HostInfo,
        /// Random per-session number the client's data path carries, so the server can tell
        /// this session's data from any other.
        cookie: u64,
        /// Where the data endpoint listens.
        data: DataEndpoint,
    },
    /// The server is serving another run; try again later.
    Busy {
        /// Why, for the user.
        message: String,
    },
    /// The session cannot go on; `message` says why and, where possible, the fix.
    Error {
        /// What went wrong and, where possible, the fix.
        message: String,
    },
    /// The data endpoint is bound to this session; the knobs as the server's kernel granted them.
    DataBound {
        /// The server's knobs as its kernel granted them.
        granted: GrantedKnobs,
    },
    /// The server is armed for `trial`.
    Ready {
        /// The trial's number, as in its `trial_start`.
        trial: u64,
    },
    /// The server's counters for `trial`.
    TrialReport {
        /// The trial's number, as in its `trial_end`.
        trial: u64,
        /// What the server counted.
        counters: SideCounters,
    },
    /// The server ends the session.
    Bye {},
}

/// What a session measures: chosen by the client, applied by both sides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SessionSetup {
    /// `tcp`, `udp`, `unix-stream`, `unix-dgram`, …
    pub transport: String,
    /// `basic`, `mmsg`, …
    pub api: String,
    /// `pingpong`, `stream`, …
    pub pattern: String,
    /// `ipv4`, `ipv6` or `unix`.
    pub family: String,
    /// Largest message size the run will use (the server sizes its buffers once).
    pub max_size: u64,
    /// Knobs the server applies to its own endpoint.
    pub server_knobs: Knobs,
    /// Inactivity limit for the server's waits on this client, in nanoseconds.
    pub timeout_ns: u64,
    /// The server sends and the client receives (stream's `--reverse`). Absent (false) from
    /// clients that predate it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
    /// Concurrent data connections (`--flows`); absent (one) from clients that predate
    /// protocol 3. Read it with [`SessionSetup::flow_count`].
    #[serde(skip_serializing_if = "is_zero_or_one")]
    pub flows: u32,
    /// The server's data threads for the flows (`--threads`); 0 lets the server decide.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub threads: u32,
    /// `--one-way` (pingpong): the server writes, into each echo, its wall-clock times of the
    /// request's first receive and of the echo's send ([`crate::stamps`]). Absent (false) from
    /// clients that predate it; a server that predates it echoes unstamped, and the client
    /// says so.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub one_way: bool,
}

impl SessionSetup {
    /// The session's flows: at least one (0, a setup from an older client, means one).
    pub fn flow_count(&self) -> u32 {
        self.flows.max(1)
    }
}

fn is_zero_or_one(n: &u32) -> bool {
    *n <= 1
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// The most messages one batch call may carry (`--batch`: sendmmsg/recvmmsg, GSO, io_uring
/// submissions, XDP ring kicks): the command line refuses more, and a peer's value is
/// clamped to it before it sizes any buffer.
pub const MAX_BATCH: u32 = 1024;

/// Settings on one side's endpoint. `None` leaves the system default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Knobs {
    /// SO_SNDBUF to ask for, bytes (the kernel doubles it and clamps it to `wmem_max`).
    pub sndbuf: Option<u64>,
    /// SO_RCVBUF to ask for, bytes (the kernel doubles it and clamps it to `rmem_max`).
    pub rcvbuf: Option<u64>,
    /// TCP_NODELAY: send small segments at once instead of coalescing them (Nagle off).
    pub nodelay: Option<bool>,
    /// Offset of the message buffer from a page boundary, in bytes.
    pub buffer_offset: Option<u64>,
    /// Messages per batch call for the `mmsg` api (sendmmsg/recvmmsg); at most [`MAX_BATCH`].
    pub batch: Option<u32>,
    /// TCP congestion control algorithm (TCP_CONGESTION).
    pub congestion_control: Option<String>,
    /// TCP_NOTSENT_LOWAT, bytes: the most unsent data the socket holds beyond what is in
    /// flight (TCP and MPTCP), so a sender's queue is the path's, not its socket buffer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notsent_lowat: Option<u32>,
    /// SO_MAX_PACING_RATE, bits per second: the most this socket sends (TCP paces itself to
    /// it; other sockets only through the fq qdisc).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing_rate: Option<u64>,
    /// IP TOS byte (IP_TOS / IPV6_TCLASS); DSCP is `tos >> 2`.
    pub tos: Option<u8>,
    /// SO_PRIORITY (skb->priority: selects qdisc bands/classes).
    pub priority: Option<u32>,
    /// SO_NO_CHECK: send UDP over IPv4 with a zero checksum.
    pub no_check: Option<bool>,
    /// SO_BUSY_POLL in microseconds.
    pub busy_poll: Option<u32>,
    /// IP_MTU_DISCOVER mode: `do`, `dont`, `want` (or `probe`).
    pub pmtu: Option<String>,
    /// CPU to pin this side's data thread to.
    pub cpu: Option<u32>,
    /// Draw message buffers from a pool larger than the caches (NetPIPE -I), bytes.
    pub cache_pool: Option<u64>,
    /// Interface for the `packet` transport (found from the route to the peer when absent).
    pub interface: Option<String>,
    /// Any knob this build does not know by name travels here, so it can be reported back.
    pub extra: BTreeMap<String, String>,
}

/// Knobs as read back from the kernel after setting them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GrantedKnobs {
    /// SO_SNDBUF as read back, bytes (Linux grants twice the request, up to `wmem_max`).
    pub sndbuf: Option<u64>,
    /// SO_RCVBUF as read back, bytes (twice the request, up to `rmem_max`).
    pub rcvbuf: Option<u64>,
    /// TCP_NODELAY as read back (TCP and MPTCP only).
    pub nodelay: Option<bool>,
    /// TCP_CONGESTION in use (TCP and MPTCP only).
    pub congestion_control: Option<String>,
    /// TCP_NOTSENT_LOWAT as read back, bytes, when it was asked for (TCP and MPTCP only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notsent_lowat: Option<u32>,
    /// SO_MAX_PACING_RATE as read back, bits per second, when it was asked for (TCP and MPTCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing_rate: Option<u64>,
    /// The buffer offset asked for, echoed (no kernel setting to read back), bytes.
    pub buffer_offset: Option<u64>,
    /// The batch size asked for, echoed.
    pub batch: Option<u32>,
    /// IP_TOS / IPV6_TCLASS as read back (TCP keeps the ECN bits for itself).
    pub tos: Option<u8>,
    /// SO_PRIORITY as read back, where it applies.
    pub priority: Option<u32>,
    /// SO_NO_CHECK as read back (UDP over IPv4 only).
    pub no_check: Option<bool>,
    /// SO_BUSY_POLL as read back, microseconds (IP transports).
    pub busy_poll: Option<u32>,
    /// IP_MTU_DISCOVER mode as read back: `do`, `dont`, `want` or `probe`.
    pub pmtu: Option<String>,
    /// Datagrams the client sent to bind its data path (the cookie, resent until the server
    /// acknowledged it): on a lossy link the drops among them are not the run's losses.
    pub handshake_datagrams: Option<u64>,
    /// Path MTU the kernel reports for the connected socket (IP_MTU), when known.
    pub path_mtu: Option<u32>,
    /// The CPU this side's data thread was pinned to, when the knobs asked for one.
    pub cpu: Option<u32>,
    /// Never filled in by this build (`None`): the pool asked for is in the spec's knobs.
    pub cache_pool: Option<u64>,
    /// Interface of a `packet` or `xdp` endpoint.
    pub interface: Option<String>,
    /// MAC address of that interface (`packet` and `xdp` only).
    pub local_mac: Option<String>,
    /// MAC address of the peer it sends to (`packet` and `xdp` only).
    pub peer_mac: Option<String>,
    /// How an `xdp` endpoint's frames reach it: where the XDP program runs and whether the
    /// socket copies (`xdp` only).
    pub xdp: Option<XdpGranted>,
    /// The TLS session a `tls` endpoint's handshake agreed (`tls` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsGranted>,
    /// The QUIC connection a `quic` endpoint got (`quic` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicGranted>,
    /// Human-readable notes: clamps, fallbacks, knobs that do not apply to this transport.
    pub notes: Vec<String>,
}

/// The XDP path an `xdp` endpoint got from the kernel and its driver.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct XdpGranted {
    /// Where the XDP program runs: `native` (in the driver, before any socket buffer exists)
    /// or `generic` (after the stack built one: slower, works on every interface).
    pub attach: String,
    /// How frames move between the driver and the socket's user memory: `zero-copy` (the
    /// driver DMAs into it) or `copy` (one copy per frame; veth has only this).
    pub bind: String,
    /// The interface's receive queue the socket is bound to.
    pub queue: u32,
}

/// Where the client reaches the server's data endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct DataEndpoint {
    /// Port for IP transports (the control connection's host is implied).
    pub port: u16,
    /// Filesystem path for unix-domain transports.
    pub path: Option<String>,
    /// MAC address of the server's interface for the `packet` transport.
    pub mac: Option<String>,
    /// The SHA-256 fingerprint (`AB:CD:…`) of the certificate the server's `tls` or `quic`
    /// data path presents: the client accepts that certificate and no other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_fingerprint: Option<String>,
}

/// One trial of one point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct TrialSpec {
    /// Message size in bytes.
    pub size: u64,
    /// Round trips (pingpong) or transactions (crr) the client will perform; 0 when the
    /// trial is time-bounded.
    pub repetitions: u64,
    /// Target duration (stream), nanoseconds; 0 when the trial is count-bounded.
    pub duration_ns: u64,
    /// True for warm-up and calibration trials whose figures are not kept.
    pub warmup: bool,
    /// `--interval`: length of one timeline interval, ns; the stream loops then count per
    /// interval ([`SideCounters::intervals`]). 0: no timeline (an older server ignores it
    /// and reports none).
    #[serde(skip_serializing_if = "is_zero")]
    pub interval_ns: u64,
}

pub use crate::arrival::Arrival;

/// What one side counted during one trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SideCounters {
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Messages sent (datagrams, or whole application messages on stream transports).
    pub messages_sent: u64,
    /// Messages received, counted likewise.
    pub messages_received: u64,
    /// System calls (or batch calls) that sent data.
    pub send_calls: u64,
    /// System calls (or batch calls) that received data.
    pub recv_calls: u64,
    /// Nanoseconds from this side's first data call to its last, as this side timed them.
    pub active_ns: u64,
    /// Bytes received by the first receive of the trial (a backlog indicator).
    pub first_recv_bytes: u64,
    /// Nanoseconds from the moment the receiver was armed to its last receive's return.
    pub recv_span_ns: u64,
    /// User-mode CPU time of the data thread(s) during the trial (bidir: sending and
    /// receiving), ns.
    pub cpu_user_ns: u64,
    /// Kernel-mode CPU time of the data thread(s) during the trial, ns.
    pub cpu_sys_ns: u64,
    /// System-wide CPU busy fraction during the trial, in parts per million (all CPUs).
    pub system_busy_ppm: u64,
    /// Datagram accounting (datagram transports only).
    pub datagrams: Option<DatagramCounters>,
    /// True when this side stopped on a timeout rather than completing.
    pub timed_out: bool,
    /// MSG_ZEROCOPY sends whose completion was reaped.
    pub zerocopy_completions: u64,
    /// Of those, the ones the kernel reported as copied after all
    /// (SO_EE_CODE_ZEROCOPY_COPIED).
    pub zerocopy_copied: u64,
    /// TCP segments retransmitted during the trial (TCP_INFO delta); `None` without TCP_INFO.
    pub tcp_retransmits: Option<u64>,
    /// DSACKs received during the trial (TCP_INFO delta); `None` without TCP_INFO.
    pub tcp_dsacks: Option<u64>,
    /// Time the socket had data to send during the trial, µs (TCP_INFO `tcpi_busy_time`
    /// delta; the kernel counts it in jiffies); `None` without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_busy_us: Option<u64>,
    /// Of that, the time the peer's receive window held the sender back, µs
    /// (`tcpi_rwnd_limited` delta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_rwnd_limited_us: Option<u64>,
    /// Of that, the time the send buffer held the sender back, µs (`tcpi_sndbuf_limited`
    /// delta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_sndbuf_limited_us: Option<u64>,
    /// The namespace's kernel counters that grew during the trial (`Ip.FragCreates`,
    /// `Udp.SndbufErrors`…: netsweep-model's `kernel::FIELDS`); a receiver keeps only those
    /// names, so a peer cannot grow it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub kernel: std::collections::BTreeMap<String, u64>,
    /// Datagrams the kernel dropped at this side's receive socket during the trial (sk_drops
    /// delta: a full buffer above all); `None` where the data path cannot read it.
    pub socket_drops: Option<u64>,
    /// Times the scheduler moved this side's data thread between CPUs during the trial.
    pub cpu_migrations: Option<u64>,
    /// The CPU this side's data thread ran on when the trial started.
    pub cpu_at_start: Option<u32>,
    /// The CPU it ran on when the trial ended.
    pub cpu_at_end: Option<u32>,
    /// Datagram sends this side's own stack refused (a local firewall drop, a full qdisc,
    /// an ICMP error reported back), by errno. Such a datagram was not sent: it is not in
    /// `messages_sent` and not a loss in the network.
    #[serde(skip_serializing_if = "SendErrors::is_empty")]
    pub send_errors: SendErrors,
    /// With `--flows`: what each flow counted, in flow order (flow 0 first; both sides number
    /// the flows alike). Empty for a single-flow session.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowCounters>,
    /// With `--flows`: each data thread's flows and CPU time, in thread order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadCounters>,
    /// With `--flows`: how far apart this side's data threads started, nanoseconds (the
    /// latest first send, or first receive, minus the earliest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_skew_ns: Option<u64>,
    /// A stream trial with an interval ([`TrialSpec::interval_ns`]): what this side counted
    /// in each interval, from the start of its clock (the sender's first send, the
    /// receiver's arming); trailing empty intervals left out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalCounts>,
    /// Pingpong over a stream: how this side's receiver saw each message arrive (its
    /// direction's delivery rate, without shared clocks).
    #[serde(skip_serializing_if = "Arrival::is_empty")]
    pub arrival: Arrival,
}

/// What one side of a stream trial counted in one interval of its timeline.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct IntervalCounts {
    /// The sender: payload bytes its stack accepted in the interval. The receiver: payload
    /// bytes that arrived in it.
    pub bytes: u64,
    /// The sender: messages its stack accepted in the interval. The receiver (datagrams):
    /// distinct datagrams received whose send time — their sequence header's — falls in
    /// the interval, so the sender's count less this one is the interval's loss exactly.
    pub messages: u64,
}

/// What one flow of a `--flows` session counted in one trial.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct FlowCounters {
    /// Payload bytes sent on the flow.
    pub bytes_sent: u64,
    /// Payload bytes received on the flow.
    pub bytes_received: u64,
    /// Whole messages sent (stream: messages; pingpong: requests or responses).
    pub messages_sent: u64,
    /// Whole messages received.
    pub messages_received: u64,
}

/// One data thread of a `--flows` session in one trial.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct ThreadCounters {
    /// Flows the thread served.
    pub flows: u32,
    /// User-mode CPU time of the thread during the trial, ns.
    pub cpu_user_ns: u64,
    /// Kernel-mode CPU time of the thread during the trial, ns.
    pub cpu_sys_ns: u64,
}

/// Datagram sends refused by the local stack, counted per errno. A fixed set of fields, so
/// a timed loop counts into it without allocating; serialised as `{"EPERM": n, …}` with
/// the zero ones left out.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct SendErrors {
    /// A netfilter rule on the sending host dropped the datagram (output/postrouting).
    #[serde(rename = "EPERM", skip_serializing_if = "is_zero")]
    pub eperm: u64,
    /// No buffer or queue space: a full qdisc or device queue.
    #[serde(rename = "ENOBUFS", skip_serializing_if = "is_zero")]
    pub enobufs: u64,
    /// An ICMP port unreachable came back for an earlier datagram.
    #[serde(rename = "ECONNREFUSED", skip_serializing_if = "is_zero")]
    pub econnrefused: u64,
    /// An ICMP host unreachable came back, or no neighbour answered.
    #[serde(rename = "EHOSTUNREACH", skip_serializing_if = "is_zero")]
    pub ehostunreach: u64,
    /// An ICMP network unreachable came back, or no route.
    #[serde(rename = "ENETUNREACH", skip_serializing_if = "is_zero")]
    pub enetunreach: u64,
    /// A batch call (sendmmsg) stopped before this datagram: the kernel refused it but, for
    /// a datagram after a batch's first, does not report the errno.
    #[serde(rename = "unreported", skip_serializing_if = "is_zero")]
    pub unreported: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SendErrors {
    /// All refused sends.
    pub fn total(&self) -> u64 {
        self.eperm
            + self.enobufs
            + self.econnrefused
            + self.ehostunreach
            + self.enetunreach
            + self.unreported
    }

    /// True when no send was refused.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &SendErrors) {
        self.eperm += other.eperm;
        self.enobufs += other.enobufs;
        self.econnrefused += other.econnrefused;
        self.ehostunreach += other.ehostunreach;
        self.enetunreach += other.enetunreach;
        self.unreported += other.unreported;
    }

    /// The non-zero counts as `("EPERM", n)` pairs, in a fixed order.
    pub fn nonzero(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("EPERM", self.eperm),
            ("ENOBUFS", self.enobufs),
            ("ECONNREFUSED", self.econnrefused),
            ("EHOSTUNREACH", self.ehostunreach),
            ("ENETUNREACH", self.enetunreach),
            ("unreported", self.unreported),
        ]
        .into_iter()
        .filter(|&(_, n)| n > 0)
    }
}

/// Exact datagram accounting at the receiver.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct DatagramCounters {
    /// Distinct sequence numbers received.
    pub received: u64,
    /// Sent minus distinct received (filled in once the sender's count is known).
    pub lost: u64,
    /// Datagrams that arrived with a sequence number lower than one already seen.
    pub reordered: u64,
    /// Datagrams whose sequence number had already been received.
    pub duplicates: u64,
    /// Datagrams with a wrong cookie or a short header, not counted as received.
    pub foreign: u64,
    /// RFC 3550 interarrival jitter at the end of the trial, nanoseconds.
    pub jitter_ns: u64,
    /// Highest sequence number seen, plus one (0 when none).
    pub highest_seq: u64,
}

/// Facts about one host, recorded in every results file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct HostInfo {
    /// Program that collected this (`netsweep`).
    pub tool: String,
    /// Its version.
    pub tool_version: String,
    /// `/proc/sys/kernel/hostname`.
    pub hostname: String,
    /// `/proc/sys/kernel/random/boot_id`: the same on both ends when they run on one host
    /// (network namespaces included), so their CPUs are shared; empty when unknown.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
    /// `Linux <osrelease> <version>` from `/proc/sys/kernel`.
    pub kernel: String,
    /// The first `model name` of `/proc/cpuinfo`; empty when there is none.
    pub cpu_model: String,
    /// CPUs this process may run on (its affinity and cgroup limits), not the host's total.
    pub cpu_count: u32,
    /// Every interface of the side's network namespace, sorted by name.
    pub interfaces: Vec<InterfaceInfo>,
    /// Relevant sysctls, by dotted name, plus the kernel's current `clocksource`.
    pub sysctls: BTreeMap<String, String>,
}

/// One network interface as the host sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct InterfaceInfo {
    /// Interface name.
    pub name: String,
    /// MTU, bytes (0 when unreadable).
    pub mtu: u32,
    /// Addresses as `address/prefix-length`.
    pub addresses: Vec<String>,
    /// Kind of the root qdisc (`noqueue`, `fq_codel`, …), when `tc` answered.
    pub qdisc: Option<String>,
    /// Offload features by ethtool name, when readable.
    pub offloads: BTreeMap<String, bool>,
}
