//! The per-point table of one run in HTML: the same figures as the text table, plus CPU,
//! calls, trials and the honesty notes.

use crate::plot::svg::esc;
use crate::units;
use netsweep_model::results::{RunResult, StopReason};
use netsweep_model::spec::Pattern;
use std::fmt::Write;

fn stop(s: StopReason) -> &'static str {
    match s {
        StopReason::Precision => "precision met",
        StopReason::TimeBudget => "time budget",
        StopReason::MaxTrials => "max trials",
        StopReason::Timeout => "timeout",
    }
}

/// The table of a run's points.
pub fn table(run: &RunResult) -> String {
    let pp = run.spec.pattern == Pattern::Pingpong;
    let dgram = run.spec.datagrams();
    let mut o = String::from("<table class=\"points\">\n<tr><th>bytes</th><th>trials</th>");
    if pp {
        o.push_str("<th>p50 µs</th><th>p99 µs</th><th>min µs</th><th>max µs</th>");
    } else {
        o.push_str("<th>sender Mbit/s</th><th>receiver Mbit/s</th>");
    }
    o.push_str("<th>Mbit/s</th><th>± CI</th>");
    if dgram {
        o.push_str("<th>loss</th><th>reordered</th><th>jitter µs</th>");
    }
    o.push_str(
        "<th>client µs/KiB</th><th>server µs/KiB</th><th>calls (c send/recv)</th><th>stop</th><th>notes</th></tr>\n",
    );
    for p in &run.points {
        let _ = write!(o, "<tr><td>{}</td><td>{}</td>", p.size, p.trials);
        if pp {
            let l = p.latency.unwrap_or_default().half_rtt_ns;
            let _ = write!(
                o,
                "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                units::us(l.p50),
                units::us(l.p99),
                units::us(l.min),
                units::us(l.max)
            );
        } else {
            let _ = write!(
                o,
                "<td>{}</td><td>{}</td>",
                units::mbps(p.sender_mbps.unwrap_or_default().mean),
                units::mbps(p.receiver_mbps.unwrap_or_default().mean)
            );
        }
        let ci = p.throughput_mbps.relative_ci();
        let _ = write!(
            o,
            "<td>{}</td><td>{}</td>",
            units::mbps(p.throughput_mbps.mean),
            if let Some(ci) = ci.filter(|c| c.is_finite()) {
                format!("{:.1}%", ci * 100.0)
            } else {
                "-".into()
            }
        );
        if dgram {
            let l = p.loss.unwrap_or_default();
            let _ = write!(
                o,
                "<td>{:.2}%</td><td>{}</td><td>{}</td>",
                l.ratio * 100.0,
                l.reordered,
                units::us(l.jitter_ns)
            );
        }
        let _ = writeln!(
            o,
            "<td>{:.4}</td><td>{:.4}</td><td>{}/{}</td><td{}>{}</td><td>{}</td></tr>",
            p.client.service_demand_us_per_kb,
            p.server.service_demand_us_per_kb,
            p.client.send_calls,
            p.client.recv_calls,
            if p.precision_met {
                ""
            } else {
                " class=\"warn\""
            },
            stop(p.stop_reason),
            esc(&p.notes.join("; "))
        );
    }
    o.push_str("</table>\n");
    o
}
