//! The tables a scenario prints after its runs: one line of headline figures per run, and the
//! runs compared side by side in the figure their pattern measures (round trips for pingpong,
//! connection setup for crr, else the rate), sizes down or, when every run measured one size,
//! runs down with the background load beside each.

use crate::units;
use netsweep_model::results;
use std::fmt::Write as _;

/// One line per run: its headline figures.
pub fn run_line(r: &results::RunResult) -> String {
    let s = r.summary.unwrap_or_default();
    let mut line = format!(
        "{} {} · peak {} Mbit/s at {}",
        r.spec.transport,
        r.spec.pattern,
        units::mbps(s.peak_mbps),
        units::size(s.peak_at_size)
    );
    if let Some(l) = s.min_latency_ns {
        line.push_str(&format!(" · min latency {} µs", units::us(l)));
    }
    let lost: u64 = r.points.iter().filter_map(|p| p.loss.map(|l| l.lost)).sum();
    let sent: u64 = r.points.iter().filter_map(|p| p.loss.map(|l| l.sent)).sum();
    if sent > 0 {
        line.push_str(&format!(" · loss {lost}/{sent}"));
    }
    line
}

/// The figure a comparison shows: what the compared runs' pattern measures — round trips for
/// pingpong (the seeds' RTT tables), connection setup for crr, else the throughput.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Figure {
    Rate,
    Rtt,
    Connect,
}

impl Figure {
    fn of(runs: &[&results::RunResult]) -> Figure {
        use netsweep_model::spec::Pattern;
        let all = |p: Pattern| !runs.is_empty() && runs.iter().all(|r| r.spec.pattern == p);
        if all(Pattern::Pingpong) {
            Figure::Rtt
        } else if all(Pattern::Crr) {
            Figure::Connect
        } else {
            Figure::Rate
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Figure::Rate => "(Mbit/s)",
            Figure::Rtt => "(round trip, p50 µs)",
            Figure::Connect => "(connection setup, p50 µs)",
        }
    }

    fn value(self, p: &results::PointResult) -> Option<String> {
        match self {
            Figure::Rate => Some(units::mbps(p.throughput_mbps.mean)),
            Figure::Rtt => p.latency.map(|l| format!("{:.1}", l.rtt_ns.p50 / 1e3)),
            Figure::Connect => p
                .crr
                .as_ref()
                .map(|c| format!("{:.1}", c.connect_ns.p50 / 1e3)),
        }
    }
}

/// Sizes down, runs across, in the figure the runs' pattern calls for; runs down when every
/// run measured one size (the seeds' tables: one figure per band or client), with the
/// background load beside each run that had one.
pub fn table(loaded: &[(String, Option<results::RunResult>)]) -> String {
    let present: Vec<&results::RunResult> = loaded.iter().filter_map(|(_, r)| r.as_ref()).collect();
    let figure = Figure::of(&present);
    let mut sizes: Vec<u64> = present
        .iter()
        .flat_map(|r| r.points.iter().map(|p| p.size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    if let [size] = sizes[..] {
        return runs_down(loaded, figure, size);
    }
    let mut s = format!("{:>9}", "bytes");
    for (n, _) in loaded {
        s.push_str(&format!(" {:>18}", n));
    }
    s.push_str(&format!("   {}\n", figure.unit()));
    for size in sizes {
        s.push_str(&format!("{size:>9}"));
        for (_, r) in loaded {
            let v = r
                .as_ref()
                .and_then(|r| r.points.iter().find(|p| p.size == size))
                .and_then(|p| figure.value(p))
                .unwrap_or_else(|| "-".to_string());
            s.push_str(&format!(" {v:>18}"));
        }
        s.push('\n');
    }
    s
}

/// One row per run at one size: the figure, and the background flows' received rate.
fn runs_down(loaded: &[(String, Option<results::RunResult>)], figure: Figure, size: u64) -> String {
    let point = |r: &Option<results::RunResult>| {
        r.as_ref()
            .and_then(|r| r.points.iter().find(|p| p.size == size).cloned())
    };
    let loads = loaded
        .iter()
        .any(|(_, r)| point(r).is_some_and(|p| !p.background.is_empty()));
    let width = loaded
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(3)
        .max(3);
    let head = format!("{size} B {}", figure.unit());
    let col = head.chars().count().max(18);
    let mut s = format!("{:<width$} {head:>col$}", "run");
    if loads {
        s.push_str("   background (Mbit/s)");
    }
    s.push('\n');
    for (name, r) in loaded {
        let p = point(r);
        let v = p.as_ref().and_then(|p| figure.value(p));
        let _ = write!(s, "{name:<width$} {:>col$}", v.as_deref().unwrap_or("-"));
        if let Some(p) = p.filter(|p| !p.background.is_empty()) {
            let mbps: f64 = p.background.iter().map(|b| b.receiver_mbps).sum();
            let _ = write!(s, "   {:>20}", units::mbps(mbps));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archived(name: &str) -> results::RunResult {
        let path = format!("{}/../../tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
        results::load(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// One size per run (seed 002's bands): a row per run, its background load beside it.
    #[test]
    fn one_size_comparisons_put_runs_down_with_their_load() {
        let mut idle = archived("tcp-pingpong.json");
        idle.points.truncate(1);
        let size = idle.points[0].size;
        let mut loaded = idle.clone();
        loaded.points[0].background = vec![netsweep_model::background::BackgroundFigures {
            flow: "stream".into(),
            receiver_mbps: 42.0,
            ..Default::default()
        }];
        let t = table(&[
            ("band-1-idle".into(), Some(idle.clone())),
            ("band-1-loaded".into(), Some(loaded)),
            ("gone".into(), None),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].contains(&format!("{size} B (round trip, p50 µs)"))
                && lines[0].ends_with("background (Mbit/s)"),
            "{t}"
        );
        let rtt = format!("{:.1}", idle.points[0].latency.unwrap().rtt_ns.p50 / 1e3);
        assert!(
            lines[1].starts_with("band-1-idle") && lines[1].trim_end().ends_with(&rtt),
            "{t}"
        );
        assert!(
            lines[2].contains(&rtt) && lines[2].trim_end().ends_with("42.0"),
            "{t}"
        );
        assert!(
            lines[3].starts_with("gone") && lines[3].trim_end().ends_with('-'),
            "{t}"
        );
    }

    /// Pingpong runs compare round trips (the seeds' unit), streams compare rates, and a mix
    /// falls back to rates.
    #[test]
    fn comparisons_show_the_figure_of_the_pattern() {
        let pp = archived("tcp-pingpong.json");
        let st = archived("udp-stream.json");
        let t = table(&[("a".into(), Some(pp.clone())), ("b".into(), None)]);
        assert!(
            t.lines().next().unwrap().ends_with("(round trip, p50 µs)"),
            "{t}"
        );
        let p = &pp.points[0];
        let rtt = format!("{:.1}", p.latency.unwrap().rtt_ns.p50 / 1e3);
        let row = t.lines().nth(1).unwrap();
        assert!(
            row.contains(&rtt) && row.trim_end().ends_with('-'),
            "{row} lacks {rtt}"
        );
        let t = table(&[("s".into(), Some(st))]);
        assert!(t.lines().next().unwrap().ends_with("(Mbit/s)"), "{t}");
        let t = table(&[
            ("a".into(), Some(pp)),
            ("s".into(), Some(archived("unix-stream.json"))),
        ]);
        assert!(t.lines().next().unwrap().ends_with("(Mbit/s)"), "{t}");
    }
}
