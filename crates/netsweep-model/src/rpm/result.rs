//! What `netsweep rpm` found, as its JSON results file holds it (schema `netsweep-rpm`): the
//! idle path, each direction's outcome, its responsiveness and goodput, and its intervals.
//! The client fills it in; scenarios read it back for their claims and figures.

use super::{Params, Responsiveness};
use serde::{Deserialize, Serialize};

/// The `schema` value of a responsiveness results file.
pub const SCHEMA: &str = "netsweep-rpm";

/// A whole test: both directions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RpmResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// The netsweep that measured.
    pub tool_version: String,
    /// When the test started (RFC 3339, UTC).
    pub started: String,
    /// The configuration document's URL.
    pub config_url: String,
    /// The large, small and upload URLs it named.
    pub urls: [String; 3],
    /// How the server's certificate was checked: `pinned AB:CD:…`, `system roots`, or
    /// `insecure` (not at all).
    pub trust: String,
    /// The TLS version of the connections.
    pub tls_version: String,
    /// The draft's parameters the test ran with.
    pub params: Params,
    /// Foreign probes on the idle path, before any load.
    pub idle: Option<Idle>,
    /// Download, then upload.
    pub directions: Vec<Direction>,
    /// The testbed the test crossed (`--lab-meta`, as a scenario's runs record it), and the
    /// path emulators' counters over the test (`lab.emulators`); absent outside the lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<serde_json::Value>,
    /// What the lab noticed about the test (a path emulator that fell behind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The idle path: foreign probes one after another before any load, their trimmed means.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Idle {
    /// 60 s over the mean of the three phases.
    pub rpm: f64,
    /// The TCP handshake, milliseconds.
    pub tcp_ms: f64,
    /// The TLS handshake over its round trips, milliseconds.
    pub tls_ms: f64,
    /// The GET, milliseconds.
    pub http_ms: f64,
    /// Probes.
    pub probes: usize,
}

/// One direction's test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Direction {
    /// `download` or `upload`.
    pub direction: String,
    /// `stable` (goodput and responsiveness both were) or `out of time` (the interval budget
    /// ran out first: the numbers are the last interval's, not a stable result).
    pub outcome: String,
    /// The last moving average of aggregate goodput, bits per second.
    pub goodput_bps: f64,
    /// When goodput saturated (seconds from the direction's start), if it did.
    pub goodput_saturated_s: Option<f64>,
    /// When responsiveness was stable, if it was.
    pub rpm_stable_s: Option<f64>,
    /// Load-generating connections open at the end (the ramp's count).
    pub connections: usize,
    /// Load-generating connections that failed (each replaced by a new one, as many times
    /// as MNP at most; the first errors are in `load_errors`).
    #[serde(default)]
    pub connections_failed: usize,
    /// The responsiveness of the last window (the last MAD intervals' probes).
    pub responsiveness: Option<Responsiveness>,
    /// A 95 % bootstrap interval of that RPM over the window's probes.
    pub rpm_interval95: Option<(f64, f64)>,
    /// How long the direction took, seconds.
    pub duration_s: f64,
    /// Bytes the load-generating connections moved.
    pub bytes: u64,
    /// Probes that failed (a timeout, a reset).
    pub probe_errors: u64,
    /// The first few load-generating connections' failures.
    pub load_errors: Vec<String>,
    /// Each interval as it ended.
    pub intervals: Vec<Interval>,
}

/// One interval of a direction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interval {
    /// Seconds from the direction's start to the interval's end.
    pub t_s: f64,
    /// Bytes moved in the interval, all load-generating connections together.
    pub bytes: u64,
    /// How long the interval lasted, seconds: its nominal length, or more when the client's
    /// timer woke late (the goodput is the bytes over these times).
    #[serde(default)]
    pub seconds: f64,
    /// The moving average of aggregate goodput at its end, bits per second.
    pub goodput_bps: f64,
    /// Load-generating connections open.
    pub connections: usize,
    /// The responsiveness of the window ending here, if it had probes of both kinds.
    pub rpm: Option<f64>,
    /// Probes that finished in the interval: foreign, self.
    pub probes: (usize, usize),
}
