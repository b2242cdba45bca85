//! The results model: one run's spec, both hosts' metadata and every measured point.
//!
//! Serialised as JSON with `schema: "netsweep-result"` and an integer `schema_version`.
//! Every field added later must be optional or defaulted so older files keep loading.

pub use crate::placement::Placement;
use crate::spec::RunSpec;
use netsweep_proto::messages::{GrantedKnobs, HostInfo, SendErrors};
use serde::{Deserialize, Serialize};

/// Value of the `schema` field.
pub const SCHEMA: &str = "netsweep-result";
/// Current `schema_version`. 2 added flows (`spec.flows`/`threads`, `PointResult.flows`),
/// the rate pattern (`spec.load`, `PointResult.rate`, `RunResult.knee`) and background flows
/// (`spec.background`, `PointResult.background`) and the kernel's receive-socket drops
/// (`socket_drops` per side, `DatagramTotals.to_*_socket_drops`); every one is optional, so
/// version-1 files load unchanged.
pub const SCHEMA_VERSION: u32 = 2;

/// How a run ended (or that it is still going, for a file written mid-run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still measuring: the file was written mid-run.
    Running,
    /// Every size was measured without error or interruption.
    Complete,
    /// Stopped by the user (Ctrl-C): every completed point is kept.
    Interrupted,
    /// Stopped by an error (peer lost, timeout…): every completed point is kept.
    Failed,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunResult {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The [`SCHEMA_VERSION`] of the build that wrote the file.
    pub schema_version: u32,
    /// The program and version that wrote the file.
    pub tool: ToolInfo,
    /// RFC 3339 UTC time the run started.
    pub started_at: String,
    /// RFC 3339 UTC time the run ended; `None` while it is still running.
    #[serde(default)]
    pub finished_at: Option<String>,
    /// How the run ended.
    pub status: RunStatus,
    /// Why the run failed or stopped early, when it did.
    #[serde(default)]
    pub message: Option<String>,
    /// The run as the client asked for it.
    pub spec: RunSpec,
    /// Where the server was reached (`host:port`, or `in-process`).
    #[serde(default)]
    pub peer: String,
    /// The client host (collected by the client).
    pub client: HostInfo,
    /// The server host, as the server described itself in its `welcome`.
    #[serde(default)]
    pub server: HostInfo,
    /// Each side's knobs as its kernel granted them.
    #[serde(default)]
    pub granted: Granted,
    /// Warnings about the run as a whole: e.g. a path whose two directions are shaped
    /// differently, so a pingpong's RTT/2 is not a one-way time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Free-form testbed description (a lab's topology as built), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<serde_json::Value>,
    /// The measured points, one per message size.
    pub points: Vec<PointResult>,
    /// Datagram transports: every datagram of the run per direction, warm-up and calibration
    /// trials included — the figures to hold against a link's own drop counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagram_totals: Option<DatagramTotals>,
    /// Peaks over the points, computed when the run ends; `None` in a file written mid-run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<RunSummary>,
    /// Dips, cliffs and unstable bands found in the sweep (see [`crate::anomaly`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anomalies: Vec<crate::anomaly::Anomaly>,
    /// A `--rates` sweep: where latency climbs and delivery stops following the offered load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<crate::load::Knee>,
}

/// Which program wrote the file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ToolInfo {
    /// Program name (`netsweep`).
    pub name: String,
    /// Its version.
    pub version: String,
}

/// Knobs as each side's kernel granted them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Granted {
    /// The client's knobs as granted on its data path (crr: on the first connection).
    pub client: GrantedKnobs,
    /// The server's knobs as granted on its data path, reported in `data_bound`.
    pub server: GrantedKnobs,
}

/// A distribution of one quantity over a point (nanoseconds for latencies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Distribution {
    /// Values recorded in the point's timed trials (0: every other field is 0 too).
    pub count: u64,
    /// Smallest value.
    pub min: f64,
    /// Mean of every value.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest value.
    pub max: f64,
    /// Population standard deviation.
    pub stddev: f64,
    /// Half-width of the 95% confidence interval of the mean, from per-trial means; `None`
    /// (null) when fewer than two trials were measured: no interval exists then.
    pub ci95: Option<f64>,
}

/// A rate estimated from several trials: mean over trials with its 95% confidence interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Estimate {
    /// Mean over trials.
    pub mean: f64,
    /// Half-width of the 95% confidence interval of the mean (same unit); `None` (null) when
    /// fewer than two trials were measured: no interval exists then, and none is claimed.
    pub ci95: Option<f64>,
    /// Best trial.
    pub max: f64,
    /// Trials it is estimated from.
    pub trials: u32,
}

impl Estimate {
    /// Half-width relative to the mean: `None` when no interval was measured, ∞ when the
    /// mean is 0.
    pub fn relative_ci(&self) -> Option<f64> {
        let ci = self.ci95?;
        Some(if self.mean == 0.0 {
            f64::INFINITY
        } else {
            ci / self.mean.abs()
        })
    }
}

/// Latency of a pingpong point. `rtt` is the measured round trip; `half_rtt` is RTT/2, the
/// one-way figure NetPIPE, netperf and sockperf report (it assumes symmetric directions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Latency {
    /// Round-trip time as the client measured it, ns.
    pub rtt_ns: Distribution,
    /// Half the round-trip time: each figure of `rtt_ns` halved (`count` aside), ns.
    pub half_rtt_ns: Distribution,
}

/// A crr point: every transaction opened its own connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Crr {
    /// Connection setup: socket(2), the asked socket options and connect(2), nanoseconds.
    pub connect_ns: Distribution,
    /// The whole transaction: connect, request, response, close, nanoseconds.
    pub transaction_ns: Distribution,
    /// Transactions per second (from the mean transaction time of each trial).
    pub transactions_per_sec: Estimate,
    /// Connections (transactions) the client completed in the timed trials.
    pub connections: u64,
    /// Connections the server served in the timed trials: requests it received carrying this
    /// session's cookie. When it differs from `connections` the point carries a note.
    pub server_accepted: u64,
    /// The client's knobs as the kernel granted them on the point's first connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub granted: Option<GrantedKnobs>,
}

/// Datagram loss accounting of one point (summed over its timed trials).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Loss {
    /// Datagrams the client sent in the timed trials.
    pub sent: u64,
    /// Datagrams that arrived: distinct ones counted by the server (stream), echoes the
    /// client got back in time (pingpong).
    pub received: u64,
    /// Datagrams that never arrived (pingpong: requests without an echo in time).
    pub lost: u64,
    /// lost ÷ sent.
    pub ratio: f64,
    /// Stream: datagrams that arrived after a later one (0 for pingpong).
    pub reordered: u64,
    /// Stream: datagrams that arrived more than once (0 for pingpong).
    pub duplicates: u64,
    /// Datagrams with a wrong cookie or too short to carry the header.
    pub foreign: u64,
    /// Replies that arrived after the client had given up on them (pingpong).
    pub late: u64,
    /// Datagrams the sender's own stack refused (a local firewall drop, a full qdisc): not
    /// in `sent`, not lost in the network. Per errno in each side's `send_errors`.
    #[serde(skip_serializing_if = "is_zero")]
    pub send_errors: u64,
    /// RFC 3550 interarrival jitter, mean over trials, nanoseconds.
    pub jitter_ns: f64,
}

impl Loss {
    /// `lost ÷ sent`, 0 when nothing was sent.
    pub fn ratio_of(lost: u64, sent: u64) -> f64 {
        if sent > 0 {
            lost as f64 / sent as f64
        } else {
            0.0
        }
    }
}

/// Every datagram of a run, per direction, as the two ends counted them.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct DatagramTotals {
    /// Trials counted (warm-up and calibration included).
    pub trials: u64,
    /// Datagrams the client sent.
    pub to_server_sent: u64,
    /// Datagrams the server received: distinct ones for stream (it de-duplicates them),
    /// every one for pingpong.
    pub to_server_received: u64,
    /// Datagrams the server sent (pingpong's echoes; 0 for stream).
    pub to_client_sent: u64,
    /// Echoes the client received.
    pub to_client_received: u64,
    /// Sends the client's own stack refused (not in `to_server_sent`).
    #[serde(skip_serializing_if = "is_zero")]
    pub to_server_send_errors: u64,
    /// Sends the server's own stack refused (not in `to_client_sent`).
    #[serde(skip_serializing_if = "is_zero")]
    pub to_client_send_errors: u64,
    /// Of the datagrams lost client → server, those the server's receive socket dropped
    /// (kernel-counted sk_drops: a full buffer above all).
    #[serde(skip_serializing_if = "is_zero")]
    pub to_server_socket_drops: u64,
    /// Of the datagrams lost server → client, those the client's receive socket dropped.
    #[serde(skip_serializing_if = "is_zero")]
    pub to_client_socket_drops: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl DatagramTotals {
    /// Datagrams lost client → server.
    pub fn to_server_lost(&self) -> u64 {
        self.to_server_sent.saturating_sub(self.to_server_received)
    }
    /// Datagrams lost server → client.
    pub fn to_client_lost(&self) -> u64 {
        self.to_client_sent.saturating_sub(self.to_client_received)
    }
}

/// One side's totals over a point's timed trials.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SideTotals {
    /// Payload bytes this side sent.
    pub bytes_sent: u64,
    /// Payload bytes this side received.
    pub bytes_received: u64,
    /// Messages this side sent.
    pub messages_sent: u64,
    /// Messages this side received.
    pub messages_received: u64,
    /// Send system calls this side made.
    pub send_calls: u64,
    /// Receive system calls this side made.
    pub recv_calls: u64,
    /// User-mode CPU time of this side's data thread(s) (bidir: sending and receiving), ns.
    pub cpu_user_ns: u64,
    /// Kernel-mode CPU time of this side's data thread(s), ns.
    pub cpu_sys_ns: u64,
    /// CPU time of this side's data thread per wall time of the trials (1.0 = one core).
    pub cpu_utilisation: f64,
    /// System-wide busy fraction of all CPUs during the trials (0..1).
    pub system_busy: f64,
    /// Service demand: this side's CPU µs per KiB moved (netperf's definition, KB = 1024 B).
    pub service_demand_us_per_kb: f64,
    /// MSG_ZEROCOPY sends the kernel reported complete.
    pub zerocopy_completions: u64,
    /// Of those, the sends the kernel copied after all.
    pub zerocopy_copied: u64,
    /// TCP segments this side retransmitted (TCP_INFO); `None` when the data path has no TCP_INFO.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_retransmits: Option<u64>,
    /// DSACKs this side received (TCP_INFO): a DSACK means the peer got a segment twice, so
    /// a retransmit it reports was not a loss. `None` when the data path has no TCP_INFO.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_dsacks: Option<u64>,
    /// Time this side's socket had data to send, µs (TCP_INFO `tcpi_busy_time`, counted by
    /// the kernel in jiffies): what the two figures below are parts of. `None` when the data
    /// path has no TCP_INFO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_busy_us: Option<u64>,
    /// Of that, the time the peer's receive window held this side's sends back, µs
    /// (`tcpi_rwnd_limited`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_rwnd_limited_us: Option<u64>,
    /// Of that, the time this side's send buffer held its sends back, µs
    /// (`tcpi_sndbuf_limited`). The rest of the busy time the congestion control (its window
    /// or its pacing) or the link held them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_sndbuf_limited_us: Option<u64>,
    /// Datagrams the kernel dropped at this side's receive socket (sk_drops: a full receive
    /// buffer above all) — part of the loss, counted by the kernel independently of netsweep.
    /// `None` when the data path cannot read it (stream transports, older servers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket_drops: Option<u64>,
    /// Datagram sends this side's own stack refused, per errno (not in `messages_sent`).
    #[serde(skip_serializing_if = "SendErrors::is_empty")]
    pub send_errors: SendErrors,
    /// This side's network namespace counters that grew over the timed trials, as
    /// `Section.Name` of /proc/net/snmp and /proc/net/netstat (`Ip.FragCreates`,
    /// `Udp.SndbufErrors`, `TcpExt.TCPRcvCollapsed`…): the kernel's view of fragments,
    /// buffer drops and receive-queue pruning. The whole namespace's, control traffic
    /// included.
    #[serde(default, skip_serializing_if = "crate::kernel::KernelCounts::is_empty")]
    pub kernel: crate::kernel::KernelCounts,
}

/// How a point's repetitions ended.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The confidence target was met.
    #[default]
    Precision,
    /// The point's time budget was spent first.
    TimeBudget,
    /// The most trials allowed were run.
    MaxTrials,
    /// The peer stopped answering.
    Timeout,
}

/// One measured message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PointResult {
    /// Message size in bytes.
    pub size: u64,
    /// Timed trials run.
    pub trials: u32,
    /// Repetitions per timed trial — round trips for pingpong, transactions for crr; messages
    /// sent in all timed trials for stream.
    pub repetitions: u64,
    /// Wall time the whole point took, calibration included, nanoseconds.
    pub elapsed_ns: u64,
    /// Headline throughput in Mbit/s (10^6 bit/s): pingpong bytes ÷ (RTT/2); crr request bytes
    /// ÷ half a transaction; stream: receiver rate.
    pub throughput_mbps: Estimate,
    /// Pingpong latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Stream: rate at which the sender's stack accepted bytes, Mbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_mbps: Option<Estimate>,
    /// Stream: rate at which the receiver got bytes, Mbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_mbps: Option<Estimate>,
    /// Connect/request/response/close: connection setup and transaction times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crr: Option<Crr>,
    /// Datagram transports: loss, reordering, duplicates, jitter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<Loss>,
    /// Bidir: the server-to-client direction's figures; `sender_mbps`, `receiver_mbps` and `loss`
    /// are then client-to-server's, `throughput_mbps` both directions' receiver rates summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<DirectionFigures>,
    /// Pingpong over a stream: each direction's delivery rate, as its receiver timed it;
    /// pingpong and rate with `--one-way`: each direction's delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directions: Option<crate::directions::Directions>,
    /// Rate: offered and delivered load, sender lateness, the timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<crate::load::RateFigures>,
    /// `--flows`: the aggregate, each flow, fairness, start skew and each data thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<crate::flows::FlowFigures>,
    /// Totals of the client side.
    pub client: SideTotals,
    /// Totals of the server side, as it reported them.
    pub server: SideTotals,
    /// The run's precision target: the relative 95% CI half-width of `throughput_mbps` asked
    /// for (0.05 = ±5%).
    pub precision_target: f64,
    /// Achieved relative CI half-width of `throughput_mbps`; `None` when it cannot be computed (fewer than two
    /// trials, or a zero mean). A point without one has not met the target.
    pub precision_achieved: Option<f64>,
    /// Whether `precision_achieved` is at most `precision_target`.
    pub precision_met: bool,
    /// Why the point stopped taking trials.
    pub stop_reason: StopReason,
    /// Where each side's data thread ran during the timed trials.
    #[serde(default)]
    pub placement: Placement,
    /// When the timed trials ran, wall clock: what a sum over separate clients is checked
    /// against (a point from an older netsweep has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<crate::window::MeasuredWindow>,
    /// Honesty notes: timeouts, clamps, fallbacks, asymmetry warnings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// `--background`: what each background flow did during this point's timed trials.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub background: Vec<crate::background::BackgroundFigures>,
    /// Stream with `--interval`: the sender's and the receiver's rate (and datagrams' loss)
    /// per interval, the point's timed trials laid end to end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<crate::timeline::StreamSample>,
}

/// One direction's figures of a point that measured two at once (bidir).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionFigures {
    /// Rate at which the sender's stack accepted bytes, Mbit/s.
    pub sender_mbps: Estimate,
    /// Rate at which the receiver got bytes, Mbit/s.
    pub receiver_mbps: Estimate,
    /// Datagram transports: loss, reordering, duplicates, jitter of this direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<Loss>,
}

impl PointResult {
    /// NetPIPE's time per transfer, nanoseconds: RTT/2 for pingpong; for stream the time one
    /// message takes at the measured rate (size ÷ throughput), and for crr likewise, which
    /// is half a transaction (its throughput counts the request bytes per half transaction,
    /// as pingpong's does per half round trip). `None` when the point measured no rate.
    pub fn transfer_ns(&self) -> Option<f64> {
        match &self.latency {
            Some(l) => Some(l.half_rtt_ns.mean),
            None if self.throughput_mbps.mean > 0.0 => {
                Some(self.size as f64 * 8.0 / (self.throughput_mbps.mean * 1e6) * 1e9)
            }
            None => None,
        }
    }
}

/// The closing summary of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct RunSummary {
    /// Highest mean throughput over the points, Mbit/s.
    pub peak_mbps: f64,
    /// Message size of that point, bytes (0 when no point had a rate).
    pub peak_at_size: u64,
    /// Smallest median latency over the points, ns: RTT/2, except a rate run's, which is its
    /// requests' round trip (from the intended send time); `None` without latency points.
    pub min_latency_ns: Option<f64>,
    /// Message size of that point, bytes.
    pub min_latency_at_size: Option<u64>,
    /// Points measured.
    pub points: u32,
    /// Wall time from the first point to the end of the run (session setup excluded), ns.
    pub elapsed_ns: u64,
}

impl RunResult {
    /// Computes the summary from the points.
    pub fn summarise(&mut self, elapsed_ns: u64) {
        let mut s = RunSummary {
            points: self.points.len() as u32,
            elapsed_ns,
            ..Default::default()
        };
        for p in &self.points {
            if p.throughput_mbps.mean > s.peak_mbps {
                s.peak_mbps = p.throughput_mbps.mean;
                s.peak_at_size = p.size;
            }
            if let Some(l) = &p.latency {
                let v = if self.spec.pattern == crate::spec::Pattern::Rate {
                    l.rtt_ns.p50
                } else {
                    l.half_rtt_ns.p50
                };
                if s.min_latency_ns.is_none_or(|m| v < m) {
                    s.min_latency_ns = Some(v);
                    s.min_latency_at_size = Some(p.size);
                }
            }
        }
        self.summary = Some(s);
    }
}

/// Why a results file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The text is not JSON.
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON of the right schema whose fields do not match the model (one missing, one of
    /// the wrong type): says which.
    #[error("a results file with a field missing or wrong: {0}")]
    Fields(serde_json::Error),
    /// The `schema` field is missing or is not [`SCHEMA`].
    #[error("not a netsweep results file (schema is {0:?}, expected \"netsweep-result\")")]
    Schema(String),
    #[error(
        "results schema version {0} is newer than this netsweep understands ({SCHEMA_VERSION}): upgrade netsweep"
    )]
    /// `schema_version` is newer than [`SCHEMA_VERSION`]: a newer netsweep wrote it.
    TooNew(u32),
}

/// Loads a results file of any schema version this build knows.
pub fn load(text: &str) -> Result<RunResult, LoadError> {
    let v: serde_json::Value = serde_json::from_str(text)?;
    let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
    if schema != SCHEMA {
        return Err(LoadError::Schema(schema.to_string()));
    }
    let version = v
        .get("schema_version")
        .and_then(|s| s.as_u64())
        .unwrap_or(0) as u32;
    if version > SCHEMA_VERSION {
        return Err(LoadError::TooNew(version));
    }
    serde_json::from_value(v).map_err(LoadError::Fields)
}

#[cfg(test)]
#[path = "results_tests.rs"]
mod tests;
