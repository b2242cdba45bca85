//! OpenMetrics (Prometheus text exposition) of a run's figures, for node_exporter's textfile
//! collector: a systemd timer runs `netsweep run … -o /var/lib/node_exporter/textfile/x.prom`
//! and the path's latency and throughput become time series. Base units throughout (seconds,
//! bytes, bits per second, ratios), every series labelled with the path (transport, api,
//! pattern, peer) so several runs can share one collector directory.

use netsweep_model::results::{Distribution, PointResult, RunResult, RunStatus};
use netsweep_model::spec::Pattern;
use std::fmt::Write;

/// The whole run as an OpenMetrics exposition, ending in `# EOF`.
pub fn render(run: &RunResult) -> String {
    let path = path_labels(run);
    let mut m = Exposition::default();

    m.family(
        "netsweep_run",
        "info",
        "The run: tool version and how it ended.",
    );
    let status = match run.status {
        RunStatus::Running => "running",
        RunStatus::Complete => "complete",
        RunStatus::Interrupted => "interrupted",
        RunStatus::Failed => "failed",
    };
    m.sample(
        "netsweep_run_info",
        &format!(
            "{path},version=\"{}\",status=\"{status}\"",
            escape(&run.tool.version)
        ),
        1.0,
    );
    m.family(
        "netsweep_run_points",
        "gauge",
        "Points (message sizes) measured.",
    );
    m.sample("netsweep_run_points", &path, run.points.len() as f64);
    m.family(
        "netsweep_run_flows",
        "gauge",
        "Concurrent data connections of the run (--flows; a probe's parallel).",
    );
    m.sample(
        "netsweep_run_flows",
        &path,
        f64::from(run.spec.flows.max(1)),
    );
    if let Some(s) = &run.summary {
        m.family(
            "netsweep_run_duration_seconds",
            "gauge",
            "Wall time of the sweep, session setup excluded.",
        );
        m.sample(
            "netsweep_run_duration_seconds",
            &path,
            s.elapsed_ns as f64 / 1e9,
        );
        m.family(
            "netsweep_peak_throughput_bits_per_second",
            "gauge",
            "Highest mean throughput over the points.",
        );
        let at = format!("{path},size=\"{}\"", s.peak_at_size);
        m.sample(
            "netsweep_peak_throughput_bits_per_second",
            &at,
            s.peak_mbps * 1e6,
        );
        if let (Some(ns), Some(size)) = (s.min_latency_ns, s.min_latency_at_size) {
            m.family(
                "netsweep_min_half_rtt_seconds",
                "gauge",
                "Smallest median one-way latency (RTT/2) over the points.",
            );
            let at = format!("{path},size=\"{size}\"");
            m.sample("netsweep_min_half_rtt_seconds", &at, ns / 1e9);
        }
    }

    let at = |p: &PointResult| format!("{path},size=\"{}\"", p.size);
    m.family(
        "netsweep_throughput_bits_per_second",
        "gauge",
        "Mean headline throughput per message size (pingpong: size over RTT/2; stream: receiver).",
    );
    for p in &run.points {
        m.sample(
            "netsweep_throughput_bits_per_second",
            &at(p),
            p.throughput_mbps.mean * 1e6,
        );
    }
    m.family(
        "netsweep_trials",
        "gauge",
        "Timed trials the point ran (the exporter's probe fails below its min_trials).",
    );
    for p in &run.points {
        m.sample("netsweep_trials", &at(p), f64::from(p.trials));
    }
    m.family(
        "netsweep_precision_met",
        "gauge",
        "1 when the throughput's 95% interval is within the run's precision target, else 0.",
    );
    for p in &run.points {
        m.sample(
            "netsweep_precision_met",
            &at(p),
            f64::from(u8::from(p.precision_met)),
        );
    }
    let ci: Vec<_> = run
        .points
        .iter()
        .filter_map(|p| p.precision_achieved.map(|c| (p, c)))
        .collect();
    if !ci.is_empty() {
        m.family(
            "netsweep_throughput_ci95_ratio",
            "gauge",
            "Half-width of the throughput's 95% confidence interval over its mean (absent with one trial).",
        );
        for (p, c) in ci {
            m.sample("netsweep_throughput_ci95_ratio", &at(p), c);
        }
    }
    let sender: Vec<_> = run
        .points
        .iter()
        .filter_map(|p| p.sender_mbps.as_ref().map(|e| (p, e.mean)))
        .collect();
    if !sender.is_empty() {
        m.family(
            "netsweep_sender_throughput_bits_per_second",
            "gauge",
            "Stream: rate at which the sender's stack accepted bytes.",
        );
        for (p, v) in sender {
            m.sample(
                "netsweep_sender_throughput_bits_per_second",
                &at(p),
                v * 1e6,
            );
        }
    }
    let latency: Vec<_> = run
        .points
        .iter()
        .filter_map(|p| p.latency.as_ref().map(|l| (p, &l.half_rtt_ns)))
        .collect();
    if !latency.is_empty() {
        m.family(
            "netsweep_half_rtt_seconds",
            "summary",
            "One-way latency (RTT/2) per message size: quantiles over every timed round trip.",
        );
        for (p, d) in latency {
            quantiles(&mut m, "netsweep_half_rtt_seconds", &at(p), d);
        }
    }
    let loss: Vec<_> = run
        .points
        .iter()
        .filter_map(|p| p.loss.as_ref().map(|l| (p, l)))
        .collect();
    if !loss.is_empty() {
        m.family(
            "netsweep_datagrams_sent",
            "gauge",
            "Datagrams sent in the timed trials.",
        );
        for (p, l) in &loss {
            m.sample("netsweep_datagrams_sent", &at(p), l.sent as f64);
        }
        m.family(
            "netsweep_datagrams_lost",
            "gauge",
            "Datagrams sent and never received (distinct sequence numbers).",
        );
        for (p, l) in &loss {
            m.sample("netsweep_datagrams_lost", &at(p), l.lost as f64);
        }
        m.family(
            "netsweep_loss_ratio",
            "gauge",
            "Datagrams lost over datagrams sent.",
        );
        for (p, l) in &loss {
            m.sample("netsweep_loss_ratio", &at(p), l.ratio);
        }
    }
    let receiver: Vec<_> = run
        .points
        .iter()
        .filter_map(|p| p.receiver_mbps.as_ref().map(|e| (p, e.mean)))
        .collect();
    if !receiver.is_empty() {
        m.family(
            "netsweep_receiver_throughput_bits_per_second",
            "gauge",
            "Stream and bidir: the client-to-server direction's receiver rate (-R: the \
             server-to-client direction's).",
        );
        for (p, v) in receiver {
            m.sample(
                "netsweep_receiver_throughput_bits_per_second",
                &at(p),
                v * 1e6,
            );
        }
    }
    let reverse: Vec<_> = run
        .points
        .iter()
        .filter_map(|p| p.reverse.as_ref().map(|r| (p, r)))
        .collect();
    if !reverse.is_empty() {
        m.family(
            "netsweep_reverse_throughput_bits_per_second",
            "gauge",
            "Bidir: the server-to-client direction's receiver rate (the series above without \
             reverse_ are the client-to-server direction's).",
        );
        for (p, r) in &reverse {
            m.sample(
                "netsweep_reverse_throughput_bits_per_second",
                &at(p),
                r.receiver_mbps.mean * 1e6,
            );
        }
        m.family(
            "netsweep_reverse_sender_throughput_bits_per_second",
            "gauge",
            "Bidir: the rate at which the server's stack accepted bytes.",
        );
        for (p, r) in &reverse {
            m.sample(
                "netsweep_reverse_sender_throughput_bits_per_second",
                &at(p),
                r.sender_mbps.mean * 1e6,
            );
        }
    }
    intervals(&mut m, run, &at);
    m.family(
        "netsweep_cpu_utilisation_ratio",
        "gauge",
        "CPU time of a side's data threads per wall time of the trials (1 = one core).",
    );
    for p in &run.points {
        for (side, t) in [("client", &p.client), ("server", &p.server)] {
            let labels = format!("{},side=\"{side}\"", at(p));
            m.sample("netsweep_cpu_utilisation_ratio", &labels, t.cpu_utilisation);
        }
    }
    let retrans: Vec<_> = run
        .points
        .iter()
        .flat_map(|p| {
            [("client", &p.client), ("server", &p.server)]
                .into_iter()
                .filter_map(move |(side, t)| t.tcp_retransmits.map(|r| (p, side, r)))
        })
        .collect();
    if !retrans.is_empty() {
        m.family(
            "netsweep_tcp_retransmits",
            "gauge",
            "TCP segments a side retransmitted in the point's trials (TCP_INFO); DSACKed ones \
             were not lost.",
        );
        for (p, side, r) in retrans {
            let labels = format!("{},side=\"{side}\"", at(p));
            m.sample("netsweep_tcp_retransmits", &labels, r as f64);
        }
    }
    let crr: Vec<_> = run
        .points
        .iter()
        .filter_map(|p| p.crr.as_ref().map(|c| (p, c)))
        .collect();
    if !crr.is_empty() {
        m.family(
            "netsweep_crr_transaction_seconds",
            "summary",
            "connect/request/response/close: quantiles of the whole transaction.",
        );
        for (p, c) in crr {
            quantiles(
                &mut m,
                "netsweep_crr_transaction_seconds",
                &at(p),
                &c.transaction_ns,
            );
        }
    }
    m.out.push_str("# EOF\n");
    m.out
}

/// Each figure's 95 % interval (issue 39 item 7), one family per figure with a `bound` label
/// (`lower`, `upper`) in the figure's own unit, beside the figure's family rather than on it,
/// so `sum()` and `avg()` over the figure stay what they were, and a dashboard draws the band
/// from one query (docs/report.md says why this form). Throughput: the mean's interval over
/// the trials; latency: the mean RTT/2's, from per-trial means; loss: the Wilson score interval
/// of lost over sent. A point with no interval (one trial, nothing sent) has no sample.
fn intervals(m: &mut Exposition, run: &RunResult, at: &dyn Fn(&PointResult) -> String) {
    use crate::interval::bounds;
    use netsweep_model::stats::wilson95;
    type Of = fn(&PointResult) -> Option<(f64, f64)>;
    let families: [(&str, &str, Of); 6] = [
        (
            "netsweep_throughput_ci95_bits_per_second",
            "95% interval of the headline throughput's mean over the trials.",
            |p| {
                bounds(p.throughput_mbps.mean, p.throughput_mbps.ci95)
                    .map(|(lo, hi)| (lo * 1e6, hi * 1e6))
            },
        ),
        (
            "netsweep_sender_throughput_ci95_bits_per_second",
            "95% interval of the sender's rate.",
            |p| rate_of(p.sender_mbps.as_ref()),
        ),
        (
            "netsweep_receiver_throughput_ci95_bits_per_second",
            "95% interval of the receiver's rate (the client-to-server direction's; -R: the \
             server-to-client one's).",
            |p| rate_of(p.receiver_mbps.as_ref()),
        ),
        (
            "netsweep_reverse_throughput_ci95_bits_per_second",
            "Bidir: 95% interval of the server-to-client receiver rate.",
            |p| rate_of(p.reverse.as_ref().map(|r| &r.receiver_mbps)),
        ),
        (
            "netsweep_half_rtt_mean_ci95_seconds",
            "95% interval of the mean one-way latency (RTT/2), from per-trial means.",
            |p| {
                let d = p.latency.as_ref()?.half_rtt_ns;
                bounds(d.mean, d.ci95).map(|(lo, hi)| (lo / 1e9, hi / 1e9))
            },
        ),
        (
            "netsweep_loss_ci95_ratio",
            "95% Wilson score interval of lost over sent datagrams (independent losses assumed).",
            |p| {
                let l = p.loss.as_ref()?;
                wilson95(l.lost, l.sent)
            },
        ),
    ];
    for (name, help, of) in families {
        let rows: Vec<_> = run
            .points
            .iter()
            .filter_map(|p| of(p).map(|b| (p, b)))
            .collect();
        if rows.is_empty() {
            continue;
        }
        m.family(name, "gauge", help);
        for (p, (lo, hi)) in rows {
            m.sample(name, &format!("{},bound=\"lower\"", at(p)), lo);
            m.sample(name, &format!("{},bound=\"upper\"", at(p)), hi);
        }
    }
}

/// A rate's interval in bit/s.
fn rate_of(e: Option<&netsweep_model::results::Estimate>) -> Option<(f64, f64)> {
    e.and_then(|e| crate::interval::bounds(e.mean, e.ci95))
        .map(|(lo, hi)| (lo * 1e6, hi * 1e6))
}

/// The labels naming the path a series belongs to. `direction` tells a `--reverse` stream
/// (`reverse`: the server sends) from a forward one, which otherwise carry the same labels
/// (issue 41); bidir is `both`, the round-trip patterns `round_trip`.
fn path_labels(run: &RunResult) -> String {
    let direction = match run.spec.pattern {
        Pattern::Stream if run.spec.reverse => "reverse",
        Pattern::Stream => "forward",
        Pattern::Bidir => "both",
        _ => "round_trip",
    };
    format!(
        "transport=\"{}\",api=\"{}\",pattern=\"{}\",peer=\"{}\",direction=\"{direction}\"",
        run.spec.transport,
        run.spec.api,
        run.spec.pattern,
        escape(&run.peer)
    )
}

/// A summary's quantiles (ns in, seconds out) with its count and sum.
fn quantiles(m: &mut Exposition, name: &str, labels: &str, d: &Distribution) {
    for (q, v) in [
        ("0.5", d.p50),
        ("0.9", d.p90),
        ("0.99", d.p99),
        ("0.999", d.p999),
    ] {
        m.sample(name, &format!("{labels},quantile=\"{q}\""), v / 1e9);
    }
    m.sample(&format!("{name}_count"), labels, d.count as f64);
    m.sample(
        &format!("{name}_sum"),
        labels,
        d.mean * d.count as f64 / 1e9,
    );
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The text being built.
#[derive(Default)]
struct Exposition {
    out: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# TYPE {name} {kind}\n# HELP {name} {help}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: f64) {
        let v = if value.is_finite() {
            format!("{value}")
        } else if value.is_nan() {
            "NaN".into()
        } else if value > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
        let _ = writeln!(self.out, "{name}{{{labels}}} {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_run() -> RunResult {
        netsweep_model::results::load(include_str!("../../../tests/data/tcp-pingpong.json"))
            .unwrap()
    }

    #[test]
    fn every_point_is_a_series_and_the_exposition_ends_in_eof() {
        let run = sample_run();
        let text = render(&run);
        assert!(text.ends_with("# EOF\n"));
        let series = text
            .lines()
            .filter(|l| l.starts_with("netsweep_throughput_bits_per_second{"))
            .count();
        assert_eq!(series, run.points.len());
        let p = &run.points[0];
        let line = format!(
            "netsweep_throughput_bits_per_second{{transport=\"tcp\",api=\"basic\",pattern=\"pingpong\",peer=\"{}\",direction=\"round_trip\",size=\"{}\"}} {}",
            run.peer,
            p.size,
            p.throughput_mbps.mean * 1e6
        );
        assert!(text.contains(&line), "{line} not in\n{text}");
        let median = p.latency.as_ref().unwrap().half_rtt_ns.p50 / 1e9;
        assert!(text.contains(&format!(
            "size=\"{}\",quantile=\"0.5\"}} {median}\n",
            p.size
        )));
    }

    #[test]
    fn a_reverse_stream_is_labelled_apart_and_each_point_says_its_trials() {
        let mut run = sample_run();
        let text = render(&run);
        let p = &run.points[0];
        assert!(text.contains(&format!(
            "netsweep_trials{{transport=\"tcp\",api=\"basic\",pattern=\"pingpong\",peer=\"{}\",direction=\"round_trip\",size=\"{}\"}} {}\n",
            run.peer, p.size, p.trials
        )), "{text}");
        assert!(text.contains("netsweep_precision_met{"), "{text}");
        run.spec.pattern = Pattern::Stream;
        run.spec.reverse = true;
        assert!(render(&run).contains("direction=\"reverse\""));
        run.spec.reverse = false;
        assert!(render(&run).contains("direction=\"forward\""));
    }

    #[test]
    fn every_figure_with_an_interval_has_its_bounds() {
        let run = sample_run();
        let text = render(&run);
        let p = run
            .points
            .iter()
            .find(|p| p.throughput_mbps.ci95.is_some())
            .unwrap();
        let (lo, hi) =
            crate::interval::bounds(p.throughput_mbps.mean, p.throughput_mbps.ci95).unwrap();
        let labels = format!(
            "transport=\"tcp\",api=\"basic\",pattern=\"pingpong\",peer=\"{}\",direction=\"round_trip\",size=\"{}\"",
            run.peer, p.size
        );
        for (bound, v) in [("lower", lo), ("upper", hi)] {
            let line = format!(
                "netsweep_throughput_ci95_bits_per_second{{{labels},bound=\"{bound}\"}} {}\n",
                v * 1e6
            );
            assert!(text.contains(&line), "{line} not in\n{text}");
        }
        let d = p.latency.unwrap().half_rtt_ns;
        let (lo, _) = crate::interval::bounds(d.mean, d.ci95).unwrap();
        assert!(text.contains(&format!(
            "netsweep_half_rtt_mean_ci95_seconds{{{labels},bound=\"lower\"}} {}\n",
            lo / 1e9
        )));
        // Loss, on a datagram run.
        let mut udp = run.clone();
        udp.points[0].loss = Some(netsweep_model::results::Loss {
            sent: 100,
            lost: 10,
            ..Default::default()
        });
        let t = render(&udp);
        let (lo, _) = netsweep_model::stats::wilson95(10, 100).unwrap();
        assert!(t.contains(&format!("bound=\"lower\"}} {lo}\n")), "{t}");
        assert!(t.contains("# TYPE netsweep_loss_ci95_ratio gauge"), "{t}");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
