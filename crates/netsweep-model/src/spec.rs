//! What a run measures: transport, api, pattern, the sweep and the repetition policy.

use netsweep_proto::messages::{Knobs, SessionSetup};
use serde::{Deserialize, Serialize};
use std::fmt;

mod reach;
mod transport;
pub use reach::Reach;
pub use transport::Transport;

/// The member of `all` called `s`, by its name or one of its aliases (as `names` gives them).
fn by_name<T: Copy>(
    all: &[T],
    s: &str,
    names: impl Fn(T) -> (&'static str, &'static [&'static str]),
) -> Option<T> {
    all.iter().copied().find(|&x| {
        let (name, aliases) = names(x);
        name == s || aliases.contains(&s)
    })
}

/// What validating a spec needs to know of its transport. The model names transports (and
/// knows which keep message boundaries, which results are read by); what each supports and
/// carries is described by netsweep-transport's descriptors, which implement this.
pub trait TransportRules {
    /// Checks that the transport supports `api` with `pattern`; the error says the fix.
    fn check(&self, api: Api, pattern: Pattern) -> Result<(), String>;
    /// The largest message one datagram can carry over `api`, if there is such a limit.
    fn max_message(&self, api: Api, ipv6: bool) -> Option<u64>;
}

/// How data is handed to the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// UDP segmentation offload: one sendmsg(2) with a UDP_SEGMENT control message carries up
    /// to 64 datagrams; the receiver enables UDP_GRO and splits what coalesced (stream).
    Gso,
    /// QUIC DATAGRAM frames (RFC 9221, `quic` only): unreliable messages on the connection,
    /// boundaries kept, congestion-controlled, lost ones counted.
    Datagram,
}

impl Api {
    /// Every api this build knows, in listing order.
    pub const ALL: [Api; 8] = [
        Api::Basic,
        Api::Mmsg,
        Api::Zerocopy,
        Api::Sendfile,
        Api::Splice,
        Api::Uring,
        Api::Gso,
        Api::Datagram,
    ];

    /// The name used on the command line, on the wire and in results.
    pub fn name(self) -> &'static str {
        match self {
            Api::Basic => "basic",
            Api::Mmsg => "mmsg",
            Api::Zerocopy => "zerocopy",
            Api::Sendfile => "sendfile",
            Api::Splice => "splice",
            Api::Uring => "uring",
            Api::Gso => "gso",
            Api::Datagram => "datagram",
        }
    }

    /// Other names the command line accepts.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Api::Zerocopy => &["msg-zerocopy"],
            Api::Uring => &["io-uring", "io_uring"],
            Api::Gso => &["udp-gso"],
            _ => &[],
        }
    }

    /// Parses a name or an alias.
    pub fn parse(s: &str) -> Option<Self> {
        by_name(&Self::ALL, s, |a| (a.name(), a.aliases()))
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The traffic pattern of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Round trips: the client sends a message, the server echoes it.
    Pingpong,
    /// One way, client to server, as fast as the stack accepts.
    Stream,
    /// Connect, request, response, close: one new connection per transaction (netperf
    /// TCP_CRR). Measures connection setup as well as the exchange.
    Crr,
    /// Both ways at once on the same data path (iperf3 --bidir): each end sends and
    /// receives, each direction accounted on its own.
    Bidir,
    /// Open loop: requests leave on a schedule (`--rate`) whatever the replies do, the
    /// server echoes, latency runs from each request's intended send time.
    Rate,
}

impl Pattern {
    /// Every pattern this build knows, in listing order.
    pub const ALL: [Pattern; 5] = [
        Pattern::Pingpong,
        Pattern::Stream,
        Pattern::Crr,
        Pattern::Bidir,
        Pattern::Rate,
    ];

    /// The name used on the command line, on the wire and in results.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Pingpong => "pingpong",
            Pattern::Stream => "stream",
            Pattern::Crr => "crr",
            Pattern::Bidir => "bidir",
            Pattern::Rate => "rate",
        }
    }

    /// Other names the command line accepts.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Pattern::Pingpong => &["pp", "rr"],
            Pattern::Bidir => &["bidirectional"],
            Pattern::Rate => &["open-loop"],
            _ => &[],
        }
    }

    /// Parses a name or an alias.
    pub fn parse(s: &str) -> Option<Self> {
        by_name(&Self::ALL, s, |p| (p.name(), p.aliases()))
    }

    /// True for the patterns that stream messages for a trial's time (stream, bidir): their
    /// datagrams carry the sequence header.
    pub fn streams(self) -> bool {
        matches!(self, Pattern::Stream | Pattern::Bidir)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Address family of the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// IPv4 addresses.
    Ipv4,
    /// IPv6 addresses.
    Ipv6,
    /// Unix-domain socket paths, or a shared-memory file (`shm`).
    Unix,
    /// Link layer (raw Ethernet frames, no network-layer address family).
    Link,
    /// MPI ranks of one MPI world (`mpi`): the library picks what carries the bytes.
    Mpi,
}

impl Family {
    /// The name used in results.
    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
            Family::Unix => "unix",
            Family::Link => "link",
            Family::Mpi => "mpi",
        }
    }
}

/// Bytes of the header every datagram of a datagram stream carries:
/// cookie (u32), sequence number (u64), send timestamp (u64 ns).
pub const DGRAM_HEADER: u64 = 20;

/// The most timeline intervals one trial may have (`--interval`): each side reports its
/// counts per interval in one control message.
pub const MAX_INTERVALS: u64 = 10_000;

/// The most interval buckets one side keeps for a trial: a trial's intervals as many again
/// for a receiver still draining after the sender stopped (a full socket buffer behind a slow
/// link), and a few for the last datagrams. Whatever arrives later is counted in the last
/// bucket, whose length the client takes from the side's last receive. Full buckets of
/// 9-digit counts make a trial report of ~0.85 MB, under the control protocol's 1 MiB frame
/// (tested). The client takes no more than this from a peer's report either.
pub const MAX_INTERVAL_BUCKETS: u64 = 2 * MAX_INTERVALS + 64;

/// Most passes one run makes over its sizes.
pub const MAX_PASSES: u32 = 10;

/// A whole run: one configuration swept over message sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSpec {
    /// The protocol stack under test.
    pub transport: Transport,
    /// How data is handed to it.
    pub api: Api,
    /// The traffic pattern.
    pub pattern: Pattern,
    /// The data path's address family.
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
    /// How many passes visit every size (`--passes`): the first measures each point as its
    /// stop rule says; each later one re-measures every size, in a perturbed order, with
    /// `min_trials` trials, and a point's interval is widened to the spread of its passes'
    /// means (a host episode lands on different sizes in different passes); 1 by default.
    #[serde(default = "one")]
    pub passes: u32,
    /// `--hard-point-time`: trials held to fit `max_point_time_ns`, never widened (probes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hard_point_time: bool,
    /// `--start-at`: the first point waited for this wall-clock time, ns since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ns: Option<u64>,
    /// Whether each point starts with an untimed warm-up trial.
    pub warmup: bool,
    /// Stop the sweep once one transfer takes longer than this, nanoseconds (0: never).
    pub stop_after_transfer_ns: u64,
    /// Inactivity limit on every wait for the peer, nanoseconds.
    pub timeout_ns: u64,
    /// After the sweep, measure finely around suspected anomalies (`--refine`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refine: bool,
    /// The CPUs are netsweep's default placement, not `--cpu`'s ([`RunSpec::placement`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default_placement: bool,
    /// `--reverse`: the server sends and the client receives (stream), so a point's
    /// `sender_mbps` and the bytes sent are the server's, `receiver_mbps` the client's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
    /// `--one-way` (pingpong): each direction's one-way delay from both ends' wall clocks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_way: bool,
    /// `--interval`: length of one timeline interval, ns (0: no timeline) — rate and stream
    /// points keep per-interval samples.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub interval_ns: u64,
    /// The rate pattern's offered load (`--rate`/`--rates`, `--arrivals`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::load::LoadSpec>,
    /// `--flows`: concurrent data connections (1 for a single flow).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub flows: u32,
    /// `--threads`: data threads per side for the flows (0: one per flow up to 64 for a
    /// stream, one per CPU otherwise; at most the flows).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub threads: u32,
    /// Knobs applied on the client's endpoint.
    pub client_knobs: Knobs,
    /// Knobs applied on the server's endpoint.
    pub server_knobs: Knobs,
    /// `--background`: flows loading the path during every measured trial, each its own
    /// session with the same server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub background: Vec<crate::background::BackgroundSpec>,
}

/// True when the messages of `transport` over `api` are datagrams (boundaries kept, loss
/// possible and counted): a datagram transport, or QUIC's DATAGRAM frames (`--api
/// datagram`). The one place this rule is written: tables, the server's plan, the default
/// sweep and the conformance tests all ask it.
pub fn datagrams(transport: Transport, api: Api) -> bool {
    transport.is_datagram() || api == Api::Datagram
}

impl RunSpec {
    /// True when the run's messages are datagrams: [`datagrams`] of its transport and api.
    pub fn datagrams(&self) -> bool {
        datagrams(self.transport, self.api)
    }

    /// Checks `--interval`: rate and stream points only, at least 1 ms, and at most
    /// [`MAX_INTERVALS`] per trial.
    fn check_interval(&self) -> Result<(), String> {
        if self.interval_ns == 0 {
            return Ok(());
        }
        if !matches!(self.pattern, Pattern::Rate | Pattern::Stream) {
            return Err(format!(
                "--interval keeps a timeline of rate and stream points, not of {}: add -p \
                 stream or -p rate, or drop --interval",
                self.pattern
            ));
        }
        if self.interval_ns < 1_000_000 {
            return Err("--interval must be at least 1ms".into());
        }
        let per_trial = self.trial_time_ns.div_ceil(self.interval_ns);
        if per_trial > MAX_INTERVALS {
            return Err(format!(
                "--interval {} ms cuts each {} ms trial into {per_trial} intervals; at most \
                 {MAX_INTERVALS}: give a longer --interval or a shorter --trial-time",
                self.interval_ns as f64 / 1e6,
                self.trial_time_ns as f64 / 1e6
            ));
        }
        Ok(())
    }

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
            passes: 1,
            hard_point_time: false,
            start_at_unix_ns: None,
            warmup: true,
            stop_after_transfer_ns: 1_000_000_000,
            timeout_ns: 10_000_000_000,
            refine: false,
            one_way: false,
            default_placement: false,
            reverse: false,
            load: None,
            flows: 1,
            threads: 0,
            client_knobs: Knobs::default(),
            server_knobs: Knobs::default(),
            background: Vec::new(),
            interval_ns: 0,
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
            reverse: self.reverse,
            flows: self.flows,
            threads: self.threads,
            one_way: self.one_way,
        }
    }

    /// Checks the combination against the transport's `rules` (its descriptor); the error
    /// says the fix.
    pub fn validate(&self, rules: &dyn TransportRules) -> Result<(), String> {
        if self.sizes.is_empty() {
            return Err(
                "no message sizes to measure: give --sizes, e.g. --sizes 1,1k..64k:*2".into(),
            );
        }
        rules.check(self.api, self.pattern)?;
        let ipv6 = self.family == Family::Ipv6;
        if let Some(max) = rules.max_message(self.api, ipv6) {
            if let Some(&big) = self.sizes.iter().find(|&&s| s > max) {
                return Err(format!(
                    "size {big} is larger than one {} datagram can carry ({max} bytes): lower --sizes",
                    self.transport
                ));
            }
        }
        if self.datagrams() && self.pattern.streams() {
            if let Some(&small) = self.sizes.iter().find(|&&s| s < DGRAM_HEADER) {
                return Err(format!(
                    "size {small} is too small for a {} {}: every datagram carries a {DGRAM_HEADER}-byte \
                     sequence header, so use sizes of at least {DGRAM_HEADER} (e.g. --sizes {DGRAM_HEADER}..1472:*2)",
                    self.transport, self.pattern
                ));
            }
        }
        if self.reverse && self.pattern != Pattern::Stream {
            return Err(format!(
                "--reverse applies to the stream pattern only (the server sends, the client \
                 receives); {} already measures both directions of each exchange: drop -R, or \
                 use -p stream -R",
                self.pattern
            ));
        }
        if self.pattern == Pattern::Rate {
            if let Some(&small) = self.sizes.iter().find(|&&s| s < DGRAM_HEADER) {
                return Err(format!(
                    "size {small} is too small for the rate pattern: every request carries a \
                     {DGRAM_HEADER}-byte header (its sequence number and intended send time), so \
                     use sizes of at least {DGRAM_HEADER}"
                ));
            }
            let load = self
                .load
                .as_ref()
                .ok_or("the rate pattern needs --rate or --rates")?;
            load.validate(&self.sizes)?;
            if self.refine {
                return Err(
                    "--refine re-sweeps sizes; it does not apply to the rate pattern".into(),
                );
            }
        }
        self.check_interval()?;
        crate::flows::check(self)?;
        if self.one_way
            && (!matches!(self.pattern, Pattern::Pingpong | Pattern::Rate) || self.flows > 1)
        {
            return Err("--one-way times the round trips of pingpong or rate on one flow: use -p pingpong or -p rate without --flows".into());
        }
        if !(self.precision > 0.0 && self.precision < 1.0) {
            return Err(format!(
                "--precision {} is out of range: give a fraction between 0 and 1 (0.02 = 2%)",
                self.precision
            ));
        }
        if self.min_trials < 2 || self.max_trials < self.min_trials {
            return Err("need --min-trials ≥ 2 and --max-trials ≥ --min-trials".into());
        }
        if !(1..=MAX_PASSES).contains(&self.passes) {
            return Err(format!(
                "--passes {} is outside 1..={MAX_PASSES}",
                self.passes
            ));
        }
        if self.trial_time_ns == 0 || self.timeout_ns == 0 || self.max_point_time_ns == 0 {
            return Err("--trial-time, --max-point-time and --timeout must be above zero".into());
        }
        Ok(())
    }
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
