//! The figures a claim or an experiment figure may name (`rtt_p50`, `throughput`, `loss`…):
//! how each is read from a measured point, its unit, and how the concurrent clients of one
//! cell combine (rates add up; latencies average). Derived figures (`goodput_limit`,
//! `wire_mbps`) come from the arithmetic of [`super::arithmetic`].

pub mod cost;
pub mod rpm;

use super::arithmetic::{self, LinkFacts};
use crate::results::PointResult;
use crate::rpm::result::RpmResult;
use crate::spec::{Pattern, RunSpec};
use serde::{Deserialize, Serialize};

/// What a figure's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetricUnit {
    /// Megabits per second (10^6 bit/s).
    Mbps,
    /// Nanoseconds.
    Nanos,
    /// A fraction (0.05 = 5%).
    Fraction,
    /// Events per second.
    PerSecond,
    /// CPU µs per KiB moved.
    UsPerKib,
    /// A plain number.
    Plain,
}

impl MetricUnit {
    /// A value in this unit for a reader: "84.3 µs", "95.6 Mbit/s", "1.2%".
    pub fn format(self, v: f64) -> String {
        if !v.is_finite() {
            return "–".into();
        }
        match self {
            MetricUnit::Mbps if v.abs() >= 1000.0 => format!("{} Gbit/s", sig(v / 1000.0)),
            MetricUnit::Mbps => format!("{} Mbit/s", sig(v)),
            MetricUnit::Nanos if v.abs() >= 1e6 => format!("{} ms", sig(v / 1e6)),
            MetricUnit::Nanos if v.abs() >= 1e3 => format!("{} µs", sig(v / 1e3)),
            MetricUnit::Nanos => format!("{} ns", sig(v)),
            MetricUnit::Fraction => format!("{}%", sig(v * 100.0)),
            MetricUnit::PerSecond => format!("{}/s", sig(v)),
            MetricUnit::UsPerKib => format!("{} µs/KiB", sig(v)),
            MetricUnit::Plain => sig(v),
        }
    }
}

/// Three or four significant digits, no exponent: 84.31, 1234, 0.0123.
pub fn sig(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        let digits = (-a.log10()).floor() as usize + 3;
        format!("{v:.digits$}")
    }
}

/// What a cell's runs measure: a `netsweep run` of a pattern, or a responsiveness test
/// (`netsweep rpm`, a run with `command = "rpm"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measures {
    /// `netsweep run` of this pattern.
    Pattern(Pattern),
    /// `netsweep rpm`.
    Rpm,
}

impl Measures {
    /// How messages name it: the pattern's name, or `rpm`.
    pub fn name(self) -> &'static str {
        match self {
            Measures::Pattern(p) => p.name(),
            Measures::Rpm => "rpm",
        }
    }
}

/// How the clients of one cell (`clients = N`) combine into the cell's figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Combine {
    /// Added up: the cell's total (rates).
    Sum,
    /// Averaged over the clients (latencies, ratios).
    Mean,
    /// Jain's fairness index over the clients' values: (Σx)² ÷ (n·Σx²), 1 when all are equal.
    Jain,
}

/// What a figure reads, with what it needs beside the point.
#[derive(Debug, Clone, Copy)]
pub struct PointContext<'a> {
    /// The run's spec.
    pub spec: &'a RunSpec,
    /// The link the run crossed, when the results recorded a lab.
    pub link: Option<&'a LinkFacts>,
    /// The lab the results recorded (`lab`: hosts, links, the emulators' window), if any.
    pub lab: Option<&'a serde_json::Value>,
}

/// One figure of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Its name in claims and figures.
    pub name: &'static str,
    /// What it is, for axis titles and tables.
    pub label: &'static str,
    /// Its unit.
    pub unit: MetricUnit,
    /// How a cell's clients combine.
    pub combine: Combine,
    /// The patterns that measure it (empty: every pattern).
    pub patterns: &'static [Pattern],
    /// Reads it from a point (a figure of responsiveness tests reads nothing here).
    pub read: fn(&PointResult, &PointContext<'_>) -> Option<f64>,
    /// Reads it from a responsiveness test's results: `Some` only for the figures of
    /// `netsweep rpm` ([`rpm::RPM_METRICS`]), which no pattern measures.
    pub rpm: Option<fn(&RpmResult) -> Option<f64>>,
}

const PP: &[Pattern] = &[Pattern::Pingpong];
const STREAMS: &[Pattern] = &[Pattern::Stream, Pattern::Bidir];
const CRR: &[Pattern] = &[Pattern::Crr];

fn rtt(p: &PointResult) -> Option<&crate::results::Distribution> {
    p.latency.as_ref().map(|l| &l.rtt_ns)
}
fn half(p: &PointResult) -> Option<&crate::results::Distribution> {
    p.latency.as_ref().map(|l| &l.half_rtt_ns)
}
fn connect(p: &PointResult) -> Option<&crate::results::Distribution> {
    p.crr.as_ref().map(|c| &c.connect_ns)
}

/// `part` of a TCP socket's busy time (TCP_INFO's chrono counters): `None` without them or
/// when the socket was never busy.
fn busy_share(part: Option<u64>, busy: Option<u64>) -> Option<f64> {
    let busy = busy.filter(|&b| b > 0)?;
    Some(part? as f64 / busy as f64)
}

/// Every figure a scenario may name.
pub const METRICS: &[Metric] = &[
    Metric {
        name: "throughput",
        label: "throughput",
        unit: MetricUnit::Mbps,
        combine: Combine::Sum,
        patterns: &[],
        rpm: None,
        read: |p, _| Some(p.throughput_mbps.mean),
    },
    Metric {
        name: "receiver_mbps",
        label: "receiver goodput",
        unit: MetricUnit::Mbps,
        combine: Combine::Sum,
        patterns: STREAMS,
        rpm: None,
        read: |p, _| p.receiver_mbps.map(|e| e.mean),
    },
    Metric {
        name: "sender_mbps",
        label: "sender rate",
        unit: MetricUnit::Mbps,
        combine: Combine::Sum,
        patterns: STREAMS,
        rpm: None,
        read: |p, _| p.sender_mbps.map(|e| e.mean),
    },
    Metric {
        name: "rtt_p50",
        label: "round trip, median",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: PP,
        rpm: None,
        read: |p, _| rtt(p).map(|d| d.p50),
    },
    Metric {
        name: "rtt_mean",
        label: "round trip, mean",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: PP,
        rpm: None,
        read: |p, _| rtt(p).map(|d| d.mean),
    },
    Metric {
        name: "rtt_p99",
        label: "round trip, 99th percentile",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: PP,
        rpm: None,
        read: |p, _| rtt(p).map(|d| d.p99),
    },
    Metric {
        name: "rtt_min",
        label: "round trip, minimum",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: PP,
        rpm: None,
        read: |p, _| rtt(p).map(|d| d.min),
    },
    Metric {
        name: "latency_p50",
        label: "latency (RTT/2), median",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: PP,
        rpm: None,
        read: |p, _| half(p).map(|d| d.p50),
    },
    Metric {
        name: "latency_mean",
        label: "latency (RTT/2), mean",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: PP,
        rpm: None,
        read: |p, _| half(p).map(|d| d.mean),
    },
    Metric {
        name: "connect_p50",
        label: "connection setup, median",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: CRR,
        rpm: None,
        read: |p, _| connect(p).map(|d| d.p50),
    },
    Metric {
        name: "connect_mean",
        label: "connection setup, mean",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: CRR,
        rpm: None,
        read: |p, _| connect(p).map(|d| d.mean),
    },
    Metric {
        name: "transactions_per_sec",
        label: "transactions per second",
        unit: MetricUnit::PerSecond,
        combine: Combine::Sum,
        patterns: CRR,
        rpm: None,
        read: |p, _| p.crr.as_ref().map(|c| c.transactions_per_sec.mean),
    },
    Metric {
        name: "loss",
        label: "datagram loss",
        unit: MetricUnit::Fraction,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| p.loss.map(|l| l.ratio),
    },
    Metric {
        name: "jitter",
        label: "jitter (RFC 3550)",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| p.loss.map(|l| l.jitter_ns),
    },
    Metric {
        name: "background_mbps",
        label: "background load received",
        unit: MetricUnit::Mbps,
        combine: Combine::Sum,
        patterns: &[],
        rpm: None,
        read: |p, _| {
            (!p.background.is_empty()).then(|| p.background.iter().map(|b| b.receiver_mbps).sum())
        },
    },
    Metric {
        name: "client_cpu",
        label: "client CPU service demand",
        unit: MetricUnit::UsPerKib,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| Some(p.client.service_demand_us_per_kb),
    },
    Metric {
        name: "server_cpu",
        label: "server CPU service demand",
        unit: MetricUnit::UsPerKib,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| Some(p.server.service_demand_us_per_kb),
    },
    Metric {
        name: "client_rwnd_limited",
        label: "client's send time held back by the receive window",
        unit: MetricUnit::Fraction,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| busy_share(p.client.tcp_rwnd_limited_us, p.client.tcp_busy_us),
    },
    Metric {
        name: "client_sndbuf_limited",
        label: "client's send time held back by its send buffer",
        unit: MetricUnit::Fraction,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| busy_share(p.client.tcp_sndbuf_limited_us, p.client.tcp_busy_us),
    },
    Metric {
        name: "fairness",
        label: "Jain's fairness index of the flows",
        unit: MetricUnit::Plain,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| p.flows.as_ref().map(|f| f.fairness),
    },
    Metric {
        name: "wire_mbps",
        label: "offered bit rate on the wire, client to server",
        unit: MetricUnit::Mbps,
        combine: Combine::Sum,
        patterns: &[],
        rpm: None,
        read: |p, c| arithmetic::wire_mbps(p, c.spec, c.link?.mtu),
    },
    Metric {
        name: "goodput_limit",
        label: "the link's goodput after headers",
        unit: MetricUnit::Mbps,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, c| {
            let l = c.link?;
            arithmetic::goodput_limit(l.rate_bps? as f64, l.mtu, c.spec, p.size)
        },
    },
    Metric {
        name: "shaper_rtt",
        label: "the least round trip the link's rate sustains",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: PP,
        rpm: None,
        read: |p, c| {
            let l = c.link?;
            arithmetic::shaper_rtt_ns(l.rate_bps? as f64, l.mtu, c.spec, p.size)
        },
    },
    Metric {
        name: "link_rate",
        label: "the link's rate",
        unit: MetricUnit::Mbps,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |_, c| c.link?.rate_bps.map(|r| r as f64 / 1e6),
    },
];

/// Every figure: [`METRICS`], the cost figures ([`cost`]) and the responsiveness test's
/// ([`rpm`]).
pub fn all() -> impl Iterator<Item = &'static Metric> {
    METRICS
        .iter()
        .chain(cost::COST_METRICS)
        .chain(rpm::RPM_METRICS)
}

/// The figure called `name`.
pub fn metric(name: &str) -> Option<&'static Metric> {
    all().find(|m| m.name == name)
}

/// The figure names, quoted, for messages.
pub fn names() -> String {
    super::design::quoted(all().map(|m| m.name))
}

impl Metric {
    /// True when a cell that measures `what` measures this figure: a responsiveness test
    /// only its own figures, a pattern the figures of every pattern and its own.
    pub fn measured_by(&self, what: Measures) -> bool {
        match what {
            Measures::Rpm => self.rpm.is_some(),
            Measures::Pattern(p) => {
                self.rpm.is_none() && (self.patterns.is_empty() || self.patterns.contains(&p))
            }
        }
    }

    /// What measures it, for messages.
    pub fn pattern_list(&self) -> String {
        if self.rpm.is_some() {
            return "an rpm run (`command = \"rpm\"`)".into();
        }
        if self.patterns.is_empty() {
            return "every pattern".into();
        }
        self.patterns
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_share_needs_busy_time() {
        assert_eq!(busy_share(Some(1000), Some(4000)), Some(0.25));
        assert_eq!(busy_share(Some(0), Some(0)), None, "never busy: no share");
        assert_eq!(busy_share(None, Some(4000)), None);
        assert_eq!(busy_share(Some(1), None), None);
    }

    #[test]
    fn names_are_unique_and_units_format() {
        let mut n: Vec<&str> = all().map(|m| m.name).collect();
        let count = n.len();
        n.sort_unstable();
        n.dedup();
        assert_eq!(n.len(), count);
        assert_eq!(MetricUnit::Nanos.format(84_312.0), "84.31 µs");
        assert_eq!(MetricUnit::Mbps.format(95.64), "95.64 Mbit/s");
        assert_eq!(MetricUnit::Mbps.format(1500.0), "1.500 Gbit/s");
        assert_eq!(MetricUnit::Fraction.format(0.0123), "1.230%");
        assert_eq!(sig(0.01234), "0.0123");
        let pp = Measures::Pattern(Pattern::Pingpong);
        assert!(metric("rtt_p50").unwrap().measured_by(pp));
        assert!(!metric("rtt_p50")
            .unwrap()
            .measured_by(Measures::Pattern(Pattern::Stream)));
        assert!(metric("throughput").unwrap().measured_by(pp));
        assert!(!metric("throughput").unwrap().measured_by(Measures::Rpm));
        assert!(metric("rpm_download").unwrap().measured_by(Measures::Rpm));
        assert!(!metric("rpm_download").unwrap().measured_by(pp));
    }
}
