//! What `serve --metrics` gives Prometheus about the tests the server served: sessions
//! started, finished (ok or failed) and running, and connections refused, per protocol
//! (netsweep's own control port, the iperf3 port and the responsiveness port), counted where the server logs them,
//! whether or not `--verbose` prints the lines. Values only: the HTTP side is the CLI's.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which port a session came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// netsweep's control protocol (`netsweep run`).
    Netsweep,
    /// The iperf3 port (`--iperf3`).
    Iperf3,
    /// The responsiveness port (`--rpm`).
    Rpm,
}

impl Protocol {
    const ALL: [Protocol; 3] = [Protocol::Netsweep, Protocol::Iperf3, Protocol::Rpm];

    fn name(self) -> &'static str {
        match self {
            Protocol::Netsweep => "netsweep",
            Protocol::Iperf3 => "iperf3",
            Protocol::Rpm => "rpm",
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    started: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    refused: AtomicU64,
}

/// The server's counters, shared by every connection thread.
#[derive(Debug)]
pub struct ServeMetrics {
    version: String,
    start_time_s: f64,
    counts: [Counts; 3],
}

impl ServeMetrics {
    /// Counters at zero for a server of `version` started at `start_time_s` (Unix seconds).
    pub fn new(version: &str, start_time_s: f64) -> Self {
        Self {
            version: version.to_string(),
            start_time_s,
            counts: Default::default(),
        }
    }

    fn of(&self, p: Protocol) -> &Counts {
        &self.counts[p as usize]
    }

    /// A session was admitted.
    pub fn started(&self, p: Protocol) {
        self.of(p).started.fetch_add(1, Ordering::Relaxed);
    }

    /// An admitted session ended, well or not.
    pub fn finished(&self, p: Protocol, ok: bool) {
        let c = self.of(p);
        if ok { &c.ok } else { &c.failed }.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection was refused: `--allow-from`, the key, a limit, the budget, a busy server.
    pub fn refused(&self, p: Protocol) {
        self.of(p).refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition (format 0.0.4) of every counter.
    pub fn exposition(&self) -> String {
        let mut o = String::new();
        let version = self.version.replace(['\\', '"', '\n'], "_");
        let family = |o: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        family(
            &mut o,
            "netsweep_serve_info",
            "gauge",
            "The server's build (always 1).",
        );
        let _ = writeln!(o, "netsweep_serve_info{{version=\"{version}\"}} 1");
        family(
            &mut o,
            "netsweep_serve_start_time_seconds",
            "gauge",
            "When the server started, Unix seconds.",
        );
        let _ = writeln!(o, "netsweep_serve_start_time_seconds {}", self.start_time_s);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        family(
            &mut o,
            "netsweep_serve_sessions_started_total",
            "counter",
            "Sessions admitted, by the port they came in on.",
        );
        for p in Protocol::ALL {
            let n = load(&self.of(p).started);
            let _ = writeln!(
                o,
                "netsweep_serve_sessions_started_total{{protocol=\"{}\"}} {n}",
                p.name()
            );
        }
        family(
            &mut o,
            "netsweep_serve_sessions_finished_total",
            "counter",
            "Admitted sessions that ended: ok (the client said bye, or the iperf3 test completed) or failed.",
        );
        for p in Protocol::ALL {
            let c = self.of(p);
            for (outcome, n) in [("ok", load(&c.ok)), ("failed", load(&c.failed))] {
                let _ = writeln!(
                    o,
                    "netsweep_serve_sessions_finished_total{{protocol=\"{}\",outcome=\"{outcome}\"}} {n}",
                    p.name()
                );
            }
        }
        family(
            &mut o,
            "netsweep_serve_sessions_running",
            "gauge",
            "Sessions admitted and not yet ended.",
        );
        for p in Protocol::ALL {
            let c = self.of(p);
            let running = load(&c.started).saturating_sub(load(&c.ok) + load(&c.failed));
            let _ = writeln!(
                o,
                "netsweep_serve_sessions_running{{protocol=\"{}\"}} {running}",
                p.name()
            );
        }
        family(
            &mut o,
            "netsweep_serve_refused_total",
            "counter",
            "Connections refused: --allow-from, the key, a limit, the memory or thread budget, a busy server.",
        );
        for p in Protocol::ALL {
            let n = load(&self.of(p).refused);
            let _ = writeln!(
                o,
                "netsweep_serve_refused_total{{protocol=\"{}\"}} {n}",
                p.name()
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{series} not in\n{text}"))
    }

    #[test]
    fn counts_by_protocol_and_a_running_gauge_that_returns_to_zero() {
        let m = ServeMetrics::new("0.1.0", 1_796_623_000.5);
        m.started(Protocol::Netsweep);
        m.started(Protocol::Netsweep);
        m.started(Protocol::Iperf3);
        m.finished(Protocol::Netsweep, true);
        m.refused(Protocol::Iperf3);
        let t = m.exposition();
        let v = |s: &str| value(&t, s);
        assert_eq!(
            v(r#"netsweep_serve_sessions_started_total{protocol="netsweep"}"#),
            2.0
        );
        assert_eq!(
            v(r#"netsweep_serve_sessions_running{protocol="netsweep"}"#),
            1.0
        );
        assert_eq!(
            v(r#"netsweep_serve_sessions_running{protocol="iperf3"}"#),
            1.0
        );
        assert_eq!(v(r#"netsweep_serve_refused_total{protocol="iperf3"}"#), 1.0);
        assert_eq!(v("netsweep_serve_start_time_seconds"), 1_796_623_000.5);
        m.finished(Protocol::Netsweep, false);
        m.finished(Protocol::Iperf3, true);
        let t = m.exposition();
        let v = |s: &str| value(&t, s);
        assert_eq!(
            v(r#"netsweep_serve_sessions_running{protocol="netsweep"}"#),
            0.0
        );
        assert_eq!(
            v(r#"netsweep_serve_sessions_finished_total{protocol="netsweep",outcome="failed"}"#),
            1.0
        );
        // Every sample's family is declared once, before it.
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            let name = l.split(['{', ' ']).next().unwrap();
            assert!(t.contains(&format!("# TYPE {name} ")), "{name}");
        }
    }

    #[test]
    fn a_version_cannot_break_the_exposition() {
        let t = ServeMetrics::new("1\"\n2", 0.0).exposition();
        assert!(
            t.contains(r#"netsweep_serve_info{version="1__2"} 1"#),
            "{t}"
        );
    }
}
