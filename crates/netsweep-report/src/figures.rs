//! The standard figures of one or more runs, overlaid: throughput, latency, the signature
//! graph, stream sender vs receiver, loss and CPU service demand — each a [`Chart`].

use crate::legend::Named;
use crate::parts::{axis, chart, fit_xy};
use crate::plot::{Axis, Chart, Marker, Scale, Series, Stroke, Unit};
use crate::units;
use netsweep_model::anomaly::{self, Anomaly, AnomalyKind};
use netsweep_model::results::{PointResult, RunResult};
use netsweep_model::spec::Pattern;

/// The anomalies of a run: those stored in the file, or detected now for files without any.
pub fn anomalies_of(run: &RunResult) -> Vec<Anomaly> {
    if run.anomalies.is_empty() {
        anomaly::detect_run(run)
    } else {
        run.anomalies.clone()
    }
}

/// The short label of an anomaly on a plot: "dip 59 KiB–72 KiB −93%".
pub fn marker_label(a: &Anomaly) -> String {
    let range = if a.from_size == a.to_size {
        units::size_tick(a.from_size as f64)
    } else {
        format!(
            "{}–{}",
            units::size_tick(a.from_size as f64),
            units::size_tick(a.to_size as f64)
        )
    };
    match a.kind {
        AnomalyKind::Unstable => format!("unstable {range} ±{:.0}%", a.magnitude * 100.0),
        k => format!("{} {range} −{:.0}%", k.name(), a.magnitude * 100.0),
    }
}

fn size_axis() -> Axis {
    Axis {
        title: "message size (bytes, log scale)".into(),
        unit: Unit::Bytes,
        scale: Scale::Log { min: 1.0, max: 2.0 },
    }
}

/// Fits both axes to the chart's data: x log; y log or linear from zero.
fn fit(c: Chart, y_log: bool) -> Chart {
    fit_xy(c, true, y_log)
}

fn markers(runs: &[Named<'_>]) -> Vec<Marker> {
    runs.iter()
        .enumerate()
        .flat_map(|(i, r)| {
            anomalies_of(r.run).into_iter().map(move |a| Marker {
                from: a.from_size as f64,
                to: a.to_size as f64,
                label: marker_label(&a),
                color: i,
            })
        })
        .collect()
}

fn throughput(runs: &[Named<'_>], labels: &[String]) -> Chart {
    let mut c = chart(
        "throughput",
        "Throughput vs message size",
        "pingpong: bytes ÷ (RTT/2); stream: receiver rate · band: 95% confidence interval of the mean · shaded: detected anomalies",
        size_axis(),
        axis("throughput", Unit::Mbps),
    );
    for (i, r) in runs.iter().enumerate() {
        let p = &r.run.points;
        c.series.push(Series {
            label: labels[i].clone(),
            color: i,
            points: p
                .iter()
                .map(|p| (p.size as f64, p.throughput_mbps.mean))
                .collect(),
            band: p
                .iter()
                .map(|p| {
                    // No interval measured: the band is the point itself.
                    let (e, ci) = (p.throughput_mbps, p.throughput_mbps.ci95.unwrap_or(0.0));
                    (p.size as f64, (e.mean - ci).max(0.0), e.mean + ci)
                })
                .collect(),
            ..Default::default()
        });
    }
    c.markers = markers(runs);
    fit(c, false)
}

fn latency(runs: &[Named<'_>], labels: &[String]) -> Option<Chart> {
    let mut c = chart(
        "latency",
        "Latency (RTT/2) vs message size",
        "line: median (p50) of RTT/2 · band: min to p99 (results keep no p1, so the band starts at the minimum)",
        size_axis(),
        axis("latency, RTT/2 (log scale)", Unit::Nanos),
    );
    for (i, r) in runs.iter().enumerate() {
        // A rate run's latency is a round trip from the intended send time: not an RTT/2,
        // it has its own figures (load_figures).
        if r.run.spec.pattern == Pattern::Rate {
            continue;
        }
        let pts: Vec<(&PointResult, _)> = r
            .run
            .points
            .iter()
            .filter_map(|p| p.latency.map(|l| (p, l.half_rtt_ns)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        c.series.push(Series {
            label: labels[i].clone(),
            color: i,
            points: pts.iter().map(|(p, d)| (p.size as f64, d.p50)).collect(),
            band: pts
                .iter()
                .map(|(p, d)| (p.size as f64, d.min, d.p99))
                .collect(),
            ..Default::default()
        });
    }
    (!c.series.is_empty()).then(|| fit(c, true))
}

fn signature(runs: &[Named<'_>], labels: &[String]) -> Chart {
    let mut c = chart(
        "signature",
        "Signature graph: throughput vs time per transfer",
        "NetPIPE's view: time per transfer is RTT/2 for pingpong, message size ÷ rate for stream",
        Axis {
            title: "time per transfer (log scale)".into(),
            unit: Unit::Nanos,
            scale: Scale::Log { min: 1.0, max: 2.0 },
        },
        axis("throughput", Unit::Mbps),
    );
    for (i, r) in runs.iter().enumerate() {
        c.series.push(Series {
            label: labels[i].clone(),
            color: i,
            points: r
                .run
                .points
                .iter()
                .filter_map(|p| Some((p.transfer_ns()?, p.throughput_mbps.mean)))
                .filter(|(t, _)| t.is_finite())
                .collect(),
            ..Default::default()
        });
    }
    fit(c, false)
}

fn stream(runs: &[Named<'_>], labels: &[String]) -> Option<Chart> {
    let mut c = chart(
        "stream",
        "Stream: sender vs receiver throughput",
        "dashed: rate the sender's stack accepted · solid: rate the receiver got · the gap is what was dropped or queued",
        size_axis(),
        axis("throughput", Unit::Mbps),
    );
    for (i, r) in runs.iter().enumerate() {
        if r.run.spec.pattern != Pattern::Stream {
            continue;
        }
        let get = |f: fn(&PointResult) -> Option<f64>| -> Vec<(f64, f64)> {
            r.run
                .points
                .iter()
                .filter_map(|p| f(p).map(|v| (p.size as f64, v)))
                .collect()
        };
        c.series.push(Series {
            label: format!("{} sender", labels[i]),
            color: i,
            stroke: Stroke::Dashed,
            points: get(|p| p.sender_mbps.map(|e| e.mean)),
            band: vec![],
            errors: vec![],
        });
        c.series.push(Series {
            label: format!("{} receiver", labels[i]),
            color: i,
            stroke: Stroke::Solid,
            points: get(|p| p.receiver_mbps.map(|e| e.mean)),
            band: vec![],
            errors: vec![],
        });
    }
    (!c.is_empty()).then(|| fit(c, false))
}

fn loss(runs: &[Named<'_>], labels: &[String]) -> Option<Chart> {
    let mut c = chart(
        "loss",
        "Datagram loss vs message size",
        "datagrams sent but never received, over sent (reordering and duplicates are counted apart)",
        size_axis(),
        axis("loss", Unit::Percent),
    );
    for (i, r) in runs.iter().enumerate() {
        let pts: Vec<(f64, f64)> = r
            .run
            .points
            .iter()
            .filter_map(|p| p.loss.map(|l| (p.size as f64, l.ratio)))
            .collect();
        if !pts.is_empty() {
            c.series.push(Series {
                label: labels[i].clone(),
                color: i,
                points: pts,
                ..Default::default()
            });
        }
    }
    (!c.series.is_empty()).then(|| fit(c, false))
}

fn cpu(runs: &[Named<'_>], labels: &[String]) -> Option<Chart> {
    let mut c = chart(
        "cpu",
        "CPU service demand vs message size",
        "CPU µs per KiB moved (netperf's definition) · solid: client · dashed: server",
        size_axis(),
        axis("service demand (log scale)", Unit::Plain("µs/KiB".into())),
    );
    for (i, r) in runs.iter().enumerate() {
        for (side, stroke) in [("client", Stroke::Solid), ("server", Stroke::Dashed)] {
            let pts: Vec<(f64, f64)> = r
                .run
                .points
                .iter()
                .map(|p| {
                    let s = if side == "client" {
                        &p.client
                    } else {
                        &p.server
                    };
                    (p.size as f64, s.service_demand_us_per_kb)
                })
                .filter(|(_, v)| *v > 0.0 && v.is_finite())
                .collect();
            if !pts.is_empty() {
                c.series.push(Series {
                    label: format!("{} {side}", labels[i]),
                    color: i,
                    stroke,
                    points: pts,
                    band: vec![],
                    errors: vec![],
                });
            }
        }
    }
    (!c.series.is_empty()).then(|| fit(c, true))
}

/// `--flows` runs: Jain's fairness index over the flows at each size (1: every flow got the
/// same; 1/n: one flow got everything).
fn fairness(runs: &[Named<'_>], labels: &[String]) -> Option<Chart> {
    let mut c = chart(
        "fairness",
        "Fairness of the flows vs message size",
        "Jain's index (Σx)² ÷ (n·Σx²) over the flows' rates: 1 = all equal, 1/n = one flow got everything",
        size_axis(),
        axis("Jain's fairness index", Unit::Plain(String::new())),
    );
    for (i, r) in runs.iter().enumerate() {
        let pts: Vec<(f64, f64)> = r
            .run
            .points
            .iter()
            .filter_map(|p| p.flows.as_ref().map(|f| (p.size as f64, f.fairness)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        c.series.push(Series {
            label: labels[i].clone(),
            color: i,
            points: pts,
            ..Default::default()
        });
    }
    c.hlines.push(1.0);
    (!c.series.is_empty()).then(|| fit(c, false))
}

/// Runs of one size each and no size in common (a probe beside a bulk run): a figure against
/// size would be a dot per run, with nothing to overlay. Repetitions of one size (a
/// scenario's `repeat`) keep their size figures: there the dots coincide and compare.
fn one_size_each(runs: &[Named<'_>]) -> bool {
    let mut seen: Vec<u64> = Vec::new();
    !runs.is_empty()
        && runs.iter().all(|r| {
            if sizes(r.run) > 1 {
                return false;
            }
            if r.run.spec.pattern == Pattern::Rate {
                return true;
            }
            match r.run.points.first() {
                Some(p) if seen.contains(&p.size) => false,
                Some(p) => {
                    seen.push(p.size);
                    true
                }
                None => true,
            }
        })
}

/// How many distinct message sizes a run measured.
fn sizes(run: &RunResult) -> usize {
    let mut v: Vec<u64> = run.points.iter().map(|p| p.size).collect();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// Runs of one size each (a probe, a one-size bulk run): a figure against size would hold a
/// dot per run, so each run is one mark with its 95% interval, side by side — throughput, and
/// RTT/2 where the run measured it.
fn per_run(runs: &[Named<'_>], labels: &[String]) -> Vec<Chart> {
    // Rate runs have their own figures (several offered loads at their one size): the marks
    // are the other runs', each in its run's colour.
    let marked: Vec<usize> = (0..runs.len())
        .filter(|&i| runs[i].run.spec.pattern != Pattern::Rate)
        .collect();
    if marked.is_empty() {
        return vec![];
    }
    let names: Vec<String> = marked
        .iter()
        .map(|&i| match runs[i].run.points.first() {
            Some(p) => format!("{} ({})", labels[i], units::size_tick(p.size as f64)),
            None => format!("{} (no point)", labels[i]),
        })
        .collect();
    let x = Axis {
        title: "run (message size)".into(),
        unit: Unit::Category(names),
        scale: Scale::Linear {
            min: -0.5,
            max: marked.len() as f64 - 0.5,
        },
    };
    let mark = |at: usize, color: usize, v: f64, lo: f64, hi: f64| Series {
        color,
        points: vec![(at as f64, v)],
        errors: if hi > lo {
            vec![(at as f64, lo, hi)]
        } else {
            vec![]
        },
        ..Default::default()
    };
    let mut tp = chart(
        "throughput",
        "Throughput of each run",
        "one size per run: pingpong bytes ÷ (RTT/2), stream the receiver's rate · whisker: 95% confidence interval of the mean",
        x.clone(),
        axis("throughput", Unit::Mbps),
    );
    let mut lat = chart(
        "latency",
        "Latency (RTT/2) of each run",
        "one size per run: the median (p50) of RTT/2 · whisker: min to p99",
        x,
        axis("latency, RTT/2", Unit::Nanos),
    );
    for (at, &i) in marked.iter().enumerate() {
        let Some(p) = runs[i].run.points.first() else {
            continue;
        };
        let (e, ci) = (p.throughput_mbps, p.throughput_mbps.ci95.unwrap_or(0.0));
        tp.series
            .push(mark(at, i, e.mean, (e.mean - ci).max(0.0), e.mean + ci));
        if let Some(l) = p.latency {
            let d = l.half_rtt_ns;
            lat.series.push(mark(at, i, d.p50, d.min, d.p99));
        }
    }
    let mut v = vec![fit_y(tp)];
    if !lat.series.is_empty() {
        v.push(fit_y(lat));
    }
    v
}

/// Fits a chart's y axis to its marks and their whiskers — linear from zero, or log when they
/// span over two decades (a 64 B probe beside a bulk run) — keeping the x axis: categories.
fn fit_y(mut c: Chart) -> Chart {
    let ys = c.ys();
    let (lo, hi) = ys
        .iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let log = lo > 0.0 && hi / lo > 100.0;
    if log {
        c.y.title.push_str(" (log scale)");
    }
    c.y.scale = Scale::fit(ys, log, !log);
    c
}

/// Every figure that applies to these runs, in report order. Rate runs add their load and
/// timeline figures ([`crate::load_figures`]), streams with `--interval` theirs
/// ([`crate::stream_timeline`]); runs that are all rate runs have only those
/// (their points share one size: the figures against size say nothing).
pub fn all(runs: &[Named<'_>], labels: &[String]) -> Vec<Chart> {
    let load = crate::load_figures::all(runs, labels);
    if !runs.is_empty() && runs.iter().all(|r| r.run.spec.pattern == Pattern::Rate) {
        return load;
    }
    if one_size_each(runs) {
        let mut v = per_run(runs, labels);
        v.extend(load);
        v.extend(crate::stream_timeline::all(runs, labels));
        return v;
    }
    let mut v = vec![throughput(runs, labels)];
    v.extend(latency(runs, labels));
    v.push(signature(runs, labels));
    v.extend(stream(runs, labels));
    v.extend(loss(runs, labels));
    v.extend(cpu(runs, labels));
    v.extend(load);
    v.extend(crate::stream_timeline::all(runs, labels));
    v.extend(fairness(runs, labels));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_probe_beside_a_one_size_run_gets_its_load_figures_and_one_mark_for_the_other() {
        let rate = crate::load_figures::tests::sweep();
        let mut bulk: RunResult =
            netsweep_model::results::load(include_str!("../../../tests/data/unix-stream.json"))
                .unwrap();
        bulk.points.truncate(1);
        let named = [Named::new("probe", &rate), Named::new("bulk", &bulk)];
        let labels = ["probe".to_string(), "bulk".to_string()];
        let charts = all(&named, &labels);
        let ids: Vec<&str> = charts.iter().map(|c| c.id.as_str()).collect();
        assert!(
            ids.contains(&"load-latency") && ids.contains(&"timeline-latency"),
            "{ids:?}"
        );
        assert!(!ids.contains(&"signature"), "{ids:?}");
        // One mark, the stream's, in its run's colour (the rate run has its own figures).
        let tp = charts.iter().find(|c| c.id == "throughput").unwrap();
        assert_eq!(tp.series.len(), 1);
        assert_eq!(tp.series[0].color, 1);
        assert_eq!(tp.x.unit, Unit::Category(vec!["bulk (1 KiB)".into()]));
        // Repetitions of one size keep the figures against size: their dots coincide.
        let named = [Named::new("a", &bulk), Named::new("b", &bulk)];
        let ids: Vec<String> = all(&named, &labels).into_iter().map(|c| c.id).collect();
        assert!(ids.contains(&"signature".to_string()), "{ids:?}");
    }

    #[test]
    fn runs_that_are_all_rate_runs_get_only_the_load_figures() {
        let run = crate::load_figures::tests::sweep();
        let named = [Named::new("r.json", &run)];
        let labels = ["r".to_string()];
        let ids = |v: Vec<Chart>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
        let load = ids(crate::load_figures::all(&named, &labels));
        assert_eq!(load.len(), 4, "{load:?}");
        // The points share one size: no figure against size.
        assert_eq!(ids(all(&named, &labels)), load);
    }
}
