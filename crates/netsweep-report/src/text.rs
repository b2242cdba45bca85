//! The live text table: a header, one line per point as it completes, a closing summary.

use crate::units;
use netsweep_model::results::{PointResult, RunResult, RunStatus, StopReason};
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_proto::messages::SendErrors;
use std::fmt::Write;

mod missed;
use missed::why_missed;

/// The title line and column header for a run.
pub fn header(run: &RunResult) -> String {
    let s = &run.spec;
    let points = match s.load.as_ref().filter(|l| !l.rates.is_empty()) {
        Some(l) => format!(
            "{} offered loads at {}",
            l.rates.len(),
            units::size(s.sizes.first().copied().unwrap_or(0))
        ),
        None => format!("{} sizes", s.sizes.len()),
    };
    let mut out = format!(
        "netsweep {} · {} {}{} over {} ({}) · peer {} · {points}, precision ±{:.1}%\n",
        run.tool.version,
        s.transport,
        s.pattern,
        if s.reverse {
            " reversed (the server sends)"
        } else {
            ""
        },
        s.api.name(),
        s.family.name(),
        run.peer,
        s.precision * 100.0
    );
    let _ = writeln!(out, "placement: {}", s.placement());
    // What the measurements showed is said after the rows (`summary`), live or saved.
    let measured = netsweep_model::symmetry::measured_warnings(run);
    for w in run.warnings.iter().filter(|w| !measured.contains(w)) {
        let _ = writeln!(out, "warning: {w}");
    }
    if s.pattern == Pattern::Rate {
        let _ = writeln!(
            out,
            "trials: {} each, {}–{} per point (percentiles over every reply; p99 is shown \
             from {} replies, p99.9 from {})",
            units::time_tick(s.trial_time_ns as f64),
            s.min_trials,
            s.max_trials,
            tail_needs(0.99),
            tail_needs(0.999)
        );
    }
    if s.flows > 1 {
        let _ = writeln!(
            out,
            "flows: {} at once (--threads {}); each row ends with [the aggregate · Jain's \
             fairness index over the flows · the start skew across data threads]",
            s.flows,
            if s.threads == 0 && s.pattern == Pattern::Stream {
                "one per flow".to_string()
            } else if s.threads == 0 {
                "one per CPU".to_string()
            } else {
                s.threads.to_string()
            }
        );
    }
    out.push_str(&columns(s));
    out
}

/// Samples a `q` quantile needs before the table shows it: 1/(1−q), so that one lies above
/// it (the p99 of 50 replies is their largest — a maximum, not a percentile).
fn tail_needs(q: f64) -> u64 {
    (1.0 / (1.0 - q)).round() as u64
}

/// A tail percentile for the table, or `–` when `count` samples are too few for it.
fn tail_us(count: u64, q: f64, ns: f64) -> String {
    if count >= tail_needs(q) {
        units::us(ns)
    } else {
        "–".into()
    }
}

fn columns(s: &RunSpec) -> String {
    let dgram = s.datagrams();
    match s.pattern {
        Pattern::Pingpong => format!(
            "{:>9} {:>9} {:>10} {:>10} {:>12} {:>8}{}  {}\n",
            "bytes",
            "reps",
            "p50 µs",
            "p99 µs",
            "Mbit/s",
            "± CI",
            if dgram {
                format!(" {:>7}", "loss")
            } else {
                String::new()
            },
            "(latency is RTT/2)"
        ),
        Pattern::Crr => format!(
            "{:>9} {:>9} {:>12} {:>10} {:>10} {:>10} {:>8}  {}\n",
            "bytes",
            "reps",
            "connect µs",
            "txn p50",
            "txn p99",
            "trans/s",
            "± CI",
            "(connect, request, response, close; µs)"
        ),
        Pattern::Stream => format!(
            "{:>9} {:>12} {:>12} {:>8}{}  {}\n",
            "bytes",
            "sender",
            "receiver",
            "± CI",
            if dgram {
                format!(" {:>7} {:>9} {:>9}", "loss", "reorder", "jitter µs")
            } else {
                String::new()
            },
            "(Mbit/s each side; CI of the receiver's)"
        ),
        Pattern::Bidir => format!(
            "{:>9} {:>12} {:>12} {:>12} {:>12} {:>8}{}  {}\n",
            "bytes",
            "c→s sender",
            "c→s recv",
            "s→c sender",
            "s→c recv",
            "± CI",
            if dgram {
                format!(" {:>9} {:>9}", "c→s loss", "s→c loss")
            } else {
                String::new()
            },
            "(Mbit/s each way; CI of their sum)"
        ),
        Pattern::Rate => format!(
            "{:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8}{}  {}\n",
            "bytes",
            "offered/s",
            "deliv/s",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "late µs",
            "± CI",
            if dgram {
                format!(" {:>7}", "loss")
            } else {
                String::new()
            },
            "(latency: reply − intended send; late: sender lateness p50)"
        ),
    }
}

fn flags(p: &PointResult) -> String {
    let mut f = String::new();
    if !p.precision_met {
        f.push_str(match p.stop_reason {
            StopReason::TimeBudget => "  ~ time budget spent",
            StopReason::MaxTrials => "  ~ max trials",
            StopReason::Timeout => "  ! timeout",
            StopReason::Precision => "",
        });
    }
    // The row names each note; its text is said once, under the table (see [`notes`]).
    // Refused sends are the row's own figures: said in full on the row.
    // Each label once: bidir's two directions can note the same thing.
    let mut notes: Vec<String> = Vec::new();
    for label in p.notes.iter().map(|n| note_label(n)) {
        if !notes.iter().any(|n| n == label) {
            notes.push(label.to_string());
        }
    }
    for (side, t) in [("client", &p.client), ("server", &p.server)] {
        if let Some(n) = refused_note(side, &t.send_errors) {
            notes.push(n);
        }
    }
    if !notes.is_empty() {
        f.push_str("  * ");
        f.push_str(&notes.join("; "));
    }
    f
}

/// A note's name in a table row: its text up to the first colon.
fn note_label(note: &str) -> &str {
    note.split_once(':').map_or(note, |(label, _)| label).trim()
}

/// The notes of a run said once each, under the table, with the sizes they concern: a note
/// repeated on many rows (placement varied, a server timeout…) would otherwise fill the table.
pub fn notes(run: &RunResult) -> String {
    if run.spec.load.as_ref().is_some_and(|l| !l.rates.is_empty()) {
        return load_notes(run);
    }
    let mut groups: Vec<(&str, &str, Vec<u64>)> = Vec::new();
    for p in &run.points {
        for n in &p.notes {
            let label = note_label(n);
            match groups.iter_mut().find(|g| g.0 == label) {
                // A size once, however many of its point's notes share the label.
                Some(g) if g.2.contains(&p.size) => {}
                Some(g) => g.2.push(p.size),
                None => groups.push((label, n, vec![p.size])),
            }
        }
    }
    let mut out = String::new();
    for (label, first, sizes) in groups {
        if sizes.len() == 1 {
            // The label once: "* memory at 1 KiB: opening …", not "… at 1 KiB: memory: …".
            let at = units::size(sizes[0]);
            let _ = match first.split_once(':') {
                Some((_, detail)) => writeln!(out, "* {label} at {at}:{detail}"),
                None => writeln!(out, "* {label} at {at}"),
            };
        } else {
            let _ = write!(
                out,
                "* {label} at {} sizes ({})",
                sizes.len(),
                size_list(&sizes)
            );
            match first.split_once(':') {
                Some((_, detail)) => {
                    let _ = writeln!(out, "; at {}:{detail}", units::size(sizes[0]));
                }
                None => out.push('\n'),
            }
        }
    }
    out
}

/// The notes of a `--rates` sweep, said once each with the offered loads they concern (its
/// points share one size).
fn load_notes(run: &RunResult) -> String {
    let mut groups: Vec<(&str, &str, Vec<String>)> = Vec::new();
    for p in &run.points {
        let at = netsweep_model::load::si(p.rate.as_ref().map_or(0.0, |r| r.offered_rate));
        for n in &p.notes {
            let label = note_label(n);
            match groups.iter_mut().find(|g| g.0 == label) {
                Some(g) => g.2.push(at.clone()),
                None => groups.push((label, n, vec![at.clone()])),
            }
        }
    }
    let mut out = String::new();
    for (label, first, at) in groups {
        let detail = first.split_once(':').map_or("", |(_, d)| d);
        let _ = match at.len() {
            1 => writeln!(out, "* {label} at {}/s:{detail}", at[0]),
            n => writeln!(
                out,
                "* {label} at {n} loads ({}/s); at {}/s:{detail}",
                at.join(", "),
                at[0]
            ),
        };
    }
    out
}

/// Sizes in bytes, comma-separated, the middle elided past a dozen.
fn size_list(sizes: &[u64]) -> String {
    let s = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    if sizes.len() <= 12 {
        format!("{} B", s(sizes))
    } else {
        format!("{}, … {} B", s(&sizes[..8]), s(&sizes[sizes.len() - 2..]))
    }
}

/// "client stack refused 12 sends (EPERM 12): not sent, not counted lost", or nothing.
fn refused_note(side: &str, e: &SendErrors) -> Option<String> {
    if e.is_empty() {
        return None;
    }
    let by: Vec<String> = e.nonzero().map(|(name, n)| format!("{name} {n}")).collect();
    Some(format!(
        "{side} stack refused {} sends ({}): not sent, not counted lost",
        e.total(),
        by.join(", ")
    ))
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// One table line for a point.
pub fn row(spec: &RunSpec, p: &PointResult) -> String {
    let dgram = spec.datagrams();
    // No interval from fewer than two trials: say so, never print a zero-width one.
    let ci = p
        .throughput_mbps
        .relative_ci()
        .map_or("n/a".into(), |c| format!("{:.1}%", c.min(9.99) * 100.0));
    let mut line = match spec.pattern {
        Pattern::Pingpong => {
            let l = p.latency.unwrap_or_default();
            format!(
                "{:>9} {:>9} {:>10} {:>10} {:>12} {:>8}",
                p.size,
                p.repetitions,
                units::us(l.half_rtt_ns.p50),
                units::us(l.half_rtt_ns.p99),
                units::mbps(p.throughput_mbps.mean),
                ci
            )
        }
        Pattern::Crr => {
            let c = p.crr.clone().unwrap_or_default();
            format!(
                "{:>9} {:>9} {:>12} {:>10} {:>10} {:>10.0} {:>8}",
                p.size,
                p.repetitions,
                units::us(c.connect_ns.p50),
                units::us(c.transaction_ns.p50),
                units::us(c.transaction_ns.p99),
                c.transactions_per_sec.mean,
                ci
            )
        }
        Pattern::Rate => {
            let (l, r) = (
                p.latency.unwrap_or_default(),
                p.rate.clone().unwrap_or_default(),
            );
            format!(
                "{:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8}",
                p.size,
                netsweep_model::load::si(r.offered_rate),
                netsweep_model::load::si(r.delivered_rate.mean),
                units::us(l.rtt_ns.p50),
                tail_us(l.rtt_ns.count, 0.99, l.rtt_ns.p99),
                tail_us(l.rtt_ns.count, 0.999, l.rtt_ns.p999),
                units::us(r.lateness_ns.p50),
                ci
            )
        }
        Pattern::Stream => format!(
            "{:>9} {:>12} {:>12} {:>8}",
            p.size,
            units::mbps(p.sender_mbps.unwrap_or_default().mean),
            units::mbps(p.receiver_mbps.unwrap_or_default().mean),
            ci
        ),
        Pattern::Bidir => {
            let back = p.reverse.clone().unwrap_or_default();
            let mut line = format!(
                "{:>9} {:>12} {:>12} {:>12} {:>12} {:>8}",
                p.size,
                units::mbps(p.sender_mbps.unwrap_or_default().mean),
                units::mbps(p.receiver_mbps.unwrap_or_default().mean),
                units::mbps(back.sender_mbps.mean),
                units::mbps(back.receiver_mbps.mean),
                ci
            );
            if dgram {
                let (there, back) = (p.loss.unwrap_or_default(), back.loss.unwrap_or_default());
                let _ = write!(line, " {:>9} {:>9}", pct(there.ratio), pct(back.ratio));
            }
            line.push_str(&flags(p));
            line.push('\n');
            line.push_str(&background_lines(p));
            return line;
        }
    };
    if dgram {
        let l = p.loss.unwrap_or_default();
        let _ = write!(line, " {:>7}", pct(l.ratio));
        if spec.pattern == Pattern::Stream {
            let _ = write!(line, " {:>9} {:>9}", l.reordered, units::us(l.jitter_ns));
        }
    }
    if let Some(f) = &p.flows {
        line.push_str(&flow_cells(f));
    }
    line.push_str(&flags(p));
    line.push('\n');
    line.push_str(&background_lines(p));
    line
}

/// A line under a point's row per background flow (`--background`): what it moved while the
/// point's timed trials ran.
fn background_lines(p: &PointResult) -> String {
    let mut out = String::new();
    for b in &p.background {
        let _ = writeln!(
            out,
            "{:>9} background {}: {} Mbit/s received, {} bytes in {} trials",
            "",
            b.flow,
            units::mbps(b.receiver_mbps),
            b.bytes_received,
            b.trials
        );
    }
    out
}

/// A flows point's aggregate, fairness and start skew (the larger side's), for its row.
fn flow_cells(f: &netsweep_model::flows::FlowFigures) -> String {
    let agg = match f.unit.as_str() {
        "mbps" => format!("{} Mbit/s", units::mbps(f.aggregate)),
        "requests_per_s" => format!("{:.0} req/s delivered", f.aggregate),
        _ => format!("{:.0} txn/s", f.aggregate),
    };
    let skew = f.client_start_skew_ns.max(f.server_start_skew_ns) as f64;
    format!(
        "  [{agg} · fair {:.3} · skew {} µs]",
        f.fairness,
        units::us(skew)
    )
}

/// The closing summary.
pub fn summary(run: &RunResult) -> String {
    let mut out = String::new();
    if let Some(s) = run.summary.as_ref().filter(|s| s.points == 0) {
        // Nothing measured: no peak of 0 Mbit/s "at 0 B".
        let _ = writeln!(
            out,
            "no points measured · {:.1} s",
            s.elapsed_ns as f64 / 1e9
        );
    } else if let Some(s) = &run.summary {
        let _ = write!(
            out,
            "peak {} Mbit/s at {}",
            units::mbps(s.peak_mbps),
            units::size(s.peak_at_size)
        );
        if let (Some(l), Some(at)) = (s.min_latency_ns, s.min_latency_at_size) {
            // A rate request's latency is a round trip (as its table says), pingpong's RTT/2.
            let what = if run.spec.pattern == Pattern::Rate {
                "round trip"
            } else {
                "RTT/2"
            };
            let _ = write!(
                out,
                " · smallest latency {} µs ({what}, p50) at {}",
                units::us(l),
                units::size(at)
            );
        }
        let _ = writeln!(
            out,
            " · {} points in {:.1} s",
            s.points,
            s.elapsed_ns as f64 / 1e9
        );
    }
    out.push_str(&notes(run));
    let measured = netsweep_model::symmetry::measured_warnings(run);
    for w in run.warnings.iter().filter(|w| measured.contains(w)) {
        let _ = writeln!(out, "warning: {w}");
    }
    out.push_str(&directions(run));
    for a in &run.anomalies {
        let _ = writeln!(out, "{}", anomaly_line(a));
    }
    if let Some(k) = &run.knee {
        let _ = writeln!(out, "knee: {}", k.detail);
    }
    let missed: Vec<&PointResult> = run.points.iter().filter(|p| !p.precision_met).collect();
    if !missed.is_empty() {
        let _ = writeln!(
            out,
            "{} of {} points did not reach ±{:.1}% (marked ~){}: raise --max-point-time or lower --precision",
            missed.len(),
            run.points.len(),
            run.spec.precision * 100.0,
            why_missed(&missed)
        );
    }
    match run.status {
        RunStatus::Complete => {}
        RunStatus::Interrupted => {
            let _ = writeln!(
                out,
                "interrupted: {} points measured and kept",
                run.points.len()
            );
        }
        RunStatus::Failed | RunStatus::Running => {
            let _ = writeln!(
                out,
                "run failed: {} ({} points measured and kept)",
                run.message.as_deref().unwrap_or("unknown error"),
                run.points.len()
            );
        }
    }
    if let Some(m) = &run.message {
        if run.status == RunStatus::Complete {
            let _ = writeln!(out, "{m}");
        }
    }
    out
}

/// Each direction of the largest point a receiver timed, and of the largest with `--one-way`
/// delays: the rest is in the results (`directions`).
fn directions(run: &RunResult) -> String {
    let mut out = String::new();
    let with = |f: &dyn Fn(&netsweep_model::symmetry::Directions) -> bool| {
        let n = run
            .points
            .iter()
            .filter(|p| p.directions.as_ref().is_some_and(f))
            .count();
        let last = run
            .points
            .iter()
            .rev()
            .find(|p| p.directions.as_ref().is_some_and(f));
        last.and_then(|p| Some((n, p.size, p.directions?)))
    };
    let rate = |r: Option<netsweep_model::symmetry::DirectionRate>| {
        r.map_or("not timed".into(), |r| {
            format!("{} Mbit/s", units::mbps(r.mbps))
        })
    };
    if let Some((n, size, d)) = with(&|d| d.to_server.is_some() || d.to_client.is_some()) {
        let _ = writeln!(
            out,
            "directions, as each receiver timed them ({n} of {} sizes; all in the results): \
             at {} client→server {}, server→client {}",
            run.points.len(),
            units::size(size),
            rate(d.to_server),
            rate(d.to_client)
        );
    }
    if let Some((n, size, d)) = with(&|d| d.one_way.is_some()) {
        let o = d.one_way.expect("selected for it");
        let _ = writeln!(
            out,
            "one-way delay (µs, least / mean; {n} of {} sizes): at {} client→server {} / {}, \
             server→client {} / {}",
            run.points.len(),
            units::size(size),
            units::us(o.to_server_ns.min),
            units::us(o.to_server_ns.mean),
            units::us(o.to_client_ns.min),
            units::us(o.to_client_ns.mean)
        );
    }
    out
}

/// One line for an anomaly: "anomaly: dip 60416..73728 B (26 points): throughput 93% below … · hint".
pub fn anomaly_line(a: &netsweep_model::anomaly::Anomaly) -> String {
    let mut s = format!(
        "anomaly: {} {}..{} B ({} points, confidence {:.2}): {}",
        a.kind.name(),
        a.from_size,
        a.to_size,
        a.points,
        a.confidence,
        a.detail
    );
    if let Some(h) = &a.hint {
        s.push_str(" · ");
        s.push_str(h);
    }
    s
}

/// The whole table of a saved run.
pub fn render(run: &RunResult) -> String {
    let mut out = header(run);
    for p in &run.points {
        out.push_str(&row(&run.spec, p));
    }
    out.push_str(&summary(run));
    out
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
