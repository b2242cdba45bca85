//! What `netsweep rpm` found, as its JSON results file holds it (schema `netsweep-rpm`) and
//! as its table shows it.

use netsweep_model::rpm::{Params, Responsiveness};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

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
    /// Load-generating connections started (one that failed is counted, and its error is
    /// in `load_errors`).
    pub connections: usize,
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
    /// The moving average of aggregate goodput at its end, bits per second.
    pub goodput_bps: f64,
    /// Load-generating connections open.
    pub connections: usize,
    /// The responsiveness of the window ending here, if it had probes of both kinds.
    pub rpm: Option<f64>,
    /// Probes that finished in the interval: foreign, self.
    pub probes: (usize, usize),
}

fn rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else {
        format!("{:.1} Mbit/s", bps / 1e6)
    }
}

impl RpmResult {
    /// The table `netsweep rpm` prints.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "responsiveness (draft-ietf-ippm-responsiveness-09) of {} over HTTP/2, {}{}",
            self.config_url,
            self.tls_version,
            if self.trust == "insecure" {
                " (certificate NOT checked: --insecure)"
            } else {
                ""
            }
        );
        if let Some(i) = &self.idle {
            let _ = writeln!(
                s,
                "  idle       {:>7.0} RPM  (foreign probes: TCP {:.2} ms, TLS {:.2} ms, GET {:.2} ms; {} probes)",
                i.rpm, i.tcp_ms, i.tls_ms, i.http_ms, i.probes
            );
        }
        for d in &self.directions {
            let rpm = match (&d.responsiveness, d.rpm_interval95) {
                (Some(r), Some((lo, hi))) => format!("{:>7.0} RPM  (95 % {lo:.0}..{hi:.0})", r.rpm),
                (Some(r), None) => format!("{:>7.0} RPM  (too few probes for an interval)", r.rpm),
                (None, _) => "      — RPM  (no window with both probe kinds)".to_string(),
            };
            let _ = writeln!(s, "  {:<9}  {rpm}", d.direction);
            if let Some(r) = &d.responsiveness {
                let _ = writeln!(
                    s,
                    "             loaded GET {:.2} ms (self probes); new connection: TCP {:.2} ms, TLS {:.2} ms, GET {:.2} ms; {} + {} probes",
                    r.http_loaded_ms, r.tcp_ms, r.tls_ms, r.http_foreign_ms, r.probes.0, r.probes.1
                );
            }
            let sat = d
                .goodput_saturated_s
                .map_or("goodput never saturated".to_string(), |t| {
                    format!("goodput saturated after {t:.0} s")
                });
            let stable = d
                .rpm_stable_s
                .map_or("responsiveness not stable".to_string(), |t| {
                    format!("responsiveness stable after {t:.0} s")
                });
            let _ = writeln!(
                s,
                "             goodput {} on {} connection{}; {sat}, {stable}; {} in {:.1} s{}",
                rate(d.goodput_bps),
                d.connections,
                if d.connections == 1 { "" } else { "s" },
                d.outcome,
                d.duration_s,
                if d.probe_errors > 0 {
                    format!("; {} probes failed", d.probe_errors)
                } else {
                    String::new()
                }
            );
            for e in &d.load_errors {
                let _ = writeln!(s, "             load connection failed: {e}");
            }
        }
        s
    }
}

impl RpmResult {
    /// The OpenMetrics exposition `netsweep rpm --openmetrics` prints (and the exporter's
    /// `pattern=rpm` probe answers with): per direction the RPM, its interval, whether it was
    /// stable, the goodput and the loaded round trip; the idle round trip; then `# EOF`.
    pub fn openmetrics(&self) -> String {
        let mut s = String::new();
        let fam = |s: &mut String, name: &str, unit: Option<&str>, help: &str| {
            let _ = writeln!(s, "# TYPE {name} gauge");
            if let Some(u) = unit {
                let _ = writeln!(s, "# UNIT {name} {u}");
            }
            let _ = writeln!(s, "# HELP {name} {help}");
        };
        let each = |s: &mut String, f: &dyn Fn(&Direction) -> Option<f64>, name: &str| {
            for d in &self.directions {
                if let Some(v) = f(d) {
                    let _ = writeln!(s, "{name}{{direction=\"{}\"}} {v}", d.direction);
                }
            }
        };
        fam(&mut s, "netsweep_rpm", None, "Responsiveness under working conditions, round trips per minute (draft-ietf-ippm-responsiveness-09), the last window's.");
        each(&mut s, &|d| d.responsiveness.map(|r| r.rpm), "netsweep_rpm");
        fam(
            &mut s,
            "netsweep_rpm_ci95_low",
            None,
            "The lower end of the RPM's 95 % bootstrap interval over the window's probes.",
        );
        each(
            &mut s,
            &|d| d.rpm_interval95.map(|i| i.0),
            "netsweep_rpm_ci95_low",
        );
        fam(
            &mut s,
            "netsweep_rpm_ci95_high",
            None,
            "The upper end of the RPM's 95 % bootstrap interval.",
        );
        each(
            &mut s,
            &|d| d.rpm_interval95.map(|i| i.1),
            "netsweep_rpm_ci95_high",
        );
        fam(&mut s, "netsweep_rpm_stable", None, "1 when goodput and responsiveness were both stable, 0 when the test ran out of time first.");
        each(
            &mut s,
            &|d| Some(f64::from(u8::from(d.outcome == "stable"))),
            "netsweep_rpm_stable",
        );
        fam(
            &mut s,
            "netsweep_rpm_goodput_bits_per_second",
            None,
            "The last moving average of the load-generating connections' aggregate goodput.",
        );
        each(
            &mut s,
            &|d| Some(d.goodput_bps),
            "netsweep_rpm_goodput_bits_per_second",
        );
        fam(
            &mut s,
            "netsweep_rpm_loaded_latency_seconds",
            Some("seconds"),
            "The self probes' trimmed mean: a GET beside the load on a loaded connection.",
        );
        each(
            &mut s,
            &|d| d.responsiveness.map(|r| r.http_loaded_ms / 1e3),
            "netsweep_rpm_loaded_latency_seconds",
        );
        if let Some(i) = &self.idle {
            fam(&mut s, "netsweep_rpm_idle_latency_seconds", Some("seconds"), "The idle path's foreign probes: the mean of the TCP, TLS and GET phases' trimmed means.");
            let _ = writeln!(
                s,
                "netsweep_rpm_idle_latency_seconds {}",
                (i.tcp_ms + i.tls_ms + i.http_ms) / 3e3
            );
        }
        s.push_str("# EOF\n");
        s
    }
}
