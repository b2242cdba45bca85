//! The figures of rate runs: latency against offered load (p50, p99, p99.9), delivered
//! against offered load (the diagonal is "everything carried"), both with the knee marked,
//! and the timelines (`--interval`): latency, delivered rate and loss per interval, every
//! point of a run laid end to end in the order measured.

use crate::legend::Named;
use crate::parts::{axis, chart, end_to_end, fit_xy, line, timeline_axis};
use crate::plot::{Axis, Chart, Marker, Scale, Series, Stroke, Unit};
use netsweep_model::load::TimelineSample;
use netsweep_model::results::{PointResult, RunResult};

fn offered_axis() -> Axis {
    Axis {
        title: "offered load (requests/s, log scale)".into(),
        unit: Unit::PerSecond,
        scale: Scale::Log { min: 1.0, max: 2.0 },
    }
}

/// The rate points of a run, by offered load.
fn rate_points(run: &RunResult) -> Vec<(f64, &PointResult)> {
    let mut v: Vec<(f64, &PointResult)> = run
        .points
        .iter()
        .filter_map(|p| Some((p.rate.as_ref()?.offered_rate, p)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn knee_markers(runs: &[Named<'_>]) -> Vec<Marker> {
    runs.iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let k = r.run.knee.as_ref()?;
            Some(Marker {
                from: k.below_rate.unwrap_or(k.offered_rate),
                to: k.offered_rate,
                label: "knee".into(),
                color: i,
            })
        })
        .collect()
}

fn latency_vs_load(runs: &[Named<'_>], labels: &[String]) -> Option<Chart> {
    let mut c = chart(
        "load-latency",
        "Latency vs offered load",
        "reply − intended send time (no coordinated omission) · solid: p50 · dashed: p99 · thin band: p99.9 · shaded: the knee's bracket",
        offered_axis(),
        axis("latency (log scale)", Unit::Nanos),
    );
    for (i, r) in runs.iter().enumerate() {
        let pts = rate_points(r.run);
        if pts.len() < 2 {
            continue;
        }
        let lat = |f: fn(&netsweep_model::results::Distribution) -> f64| -> Vec<(f64, f64)> {
            pts.iter()
                .filter_map(|(o, p)| Some((*o, f(&p.latency?.rtt_ns))))
                .filter(|(_, v)| *v > 0.0)
                .collect()
        };
        c.series.push(Series {
            label: format!("{} p50", labels[i]),
            color: i,
            points: lat(|d| d.p50),
            ..Default::default()
        });
        c.series.push(Series {
            label: format!("{} p99", labels[i]),
            color: i,
            stroke: Stroke::Dashed,
            points: lat(|d| d.p99),
            band: pts
                .iter()
                .filter_map(|(o, p)| {
                    let d = p.latency?.rtt_ns;
                    Some((*o, d.p99, d.p999))
                })
                .filter(|b| b.1 > 0.0)
                .collect(),
            ..Default::default()
        });
    }
    c.markers = knee_markers(runs);
    (!c.is_empty()).then(|| fit_xy(c, true, true))
}

fn delivered_vs_offered(runs: &[Named<'_>], labels: &[String]) -> Option<Chart> {
    let mut c = chart(
        "load-delivered",
        "Delivered vs offered load",
        "replies per second the path carried in each trial's schedule · dashed: delivered = offered · shaded: the knee's bracket",
        offered_axis(),
        Axis {
            title: "delivered (requests/s, log scale)".into(),
            unit: Unit::PerSecond,
            scale: Scale::Log { min: 1.0, max: 2.0 },
        },
    );
    let mut all_offered = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let pts = rate_points(r.run);
        if pts.len() < 2 {
            continue;
        }
        all_offered.extend(pts.iter().map(|(o, _)| *o));
        c.series.push(Series {
            label: labels[i].clone(),
            color: i,
            points: pts
                .iter()
                .map(|(o, p)| (*o, p.rate.as_ref().map_or(0.0, |r| r.delivered_rate.mean)))
                .filter(|(_, v)| *v > 0.0)
                .collect(),
            band: pts
                .iter()
                .filter_map(|(o, p)| {
                    let d = p.rate.as_ref()?.delivered_rate;
                    let ci = d.ci95.unwrap_or(0.0);
                    Some((*o, (d.mean - ci).max(d.mean * 0.01), d.mean + ci))
                })
                .collect(),
            ..Default::default()
        });
    }
    if c.is_empty() {
        return None;
    }
    all_offered.sort_by(f64::total_cmp);
    c.series.push(Series {
        label: "offered".into(),
        color: 6,
        stroke: Stroke::Dashed,
        points: all_offered.iter().map(|o| (*o, *o)).collect(),
        band: vec![],
        errors: vec![],
    });
    c.markers = knee_markers(runs);
    Some(fit_xy(c, true, true))
}

/// A run's timeline, every point's intervals end to end: (t, sample).
fn timeline(run: &RunResult) -> Vec<(f64, TimelineSample)> {
    let rates = run.points.iter().filter_map(|p| p.rate.as_ref());
    end_to_end(rates.map(|r| r.timeline.as_slice()), |s| s.t_ns)
}

fn timelines(runs: &[Named<'_>], labels: &[String]) -> Vec<Chart> {
    let mut lat = chart(
        "timeline-latency",
        "Timeline: latency per interval",
        "requests due in each interval: solid p50, dashed p99 (reply − intended send)",
        timeline_axis(),
        axis("latency (log scale)", Unit::Nanos),
    );
    let mut del = chart(
        "timeline-delivered",
        "Timeline: delivered rate and loss per interval",
        "solid: replies arriving per second · dashed: requests due in the interval never answered, per second",
        timeline_axis(),
        axis("requests/s", Unit::PerSecond),
    );
    for (i, r) in runs.iter().enumerate() {
        let tl = timeline(r.run);
        if tl.is_empty() {
            continue;
        }
        let secs = tl
            .get(1)
            .map_or(1.0, |(t, _)| (t - tl[0].0) / 1e9)
            .max(1e-9);
        let get = |f: fn(&TimelineSample) -> f64| -> Vec<(f64, f64)> {
            tl.iter().map(|(t, s)| (*t, f(s))).collect()
        };
        let series = |label, stroke, points| line(label, i, stroke, points);
        let positive = |v: Vec<(f64, f64)>| v.into_iter().filter(|p| p.1 > 0.0).collect();
        lat.series.push(series(
            format!("{} p50", labels[i]),
            Stroke::Solid,
            positive(get(|s| s.p50_ns)),
        ));
        lat.series.push(series(
            format!("{} p99", labels[i]),
            Stroke::Dashed,
            positive(get(|s| s.p99_ns)),
        ));
        del.series.push(series(
            format!("{} delivered", labels[i]),
            Stroke::Solid,
            get(|s| s.delivered_rate),
        ));
        del.series.push(series(
            format!("{} lost", labels[i]),
            Stroke::Dashed,
            tl.iter().map(|(t, s)| (*t, s.lost as f64 / secs)).collect(),
        ));
    }
    if lat.is_empty() {
        return vec![];
    }
    vec![fit_xy(lat, false, true), fit_xy(del, false, false)]
}

/// The rate figures that apply to these runs.
pub fn all(runs: &[Named<'_>], labels: &[String]) -> Vec<Chart> {
    let mut v = Vec::new();
    v.extend(latency_vs_load(runs, labels));
    v.extend(delivered_vs_offered(runs, labels));
    v.extend(timelines(runs, labels));
    v
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use netsweep_model::load::{self, LoadSpec, RateFigures};
    use netsweep_model::results::{self, Estimate, Latency};
    use netsweep_model::spec::Pattern;

    /// A rate sweep at 1k, 2k, 4k, 8k/s: flat to 2k, a queue from 4k (knee 2k..4k).
    pub(crate) fn sweep() -> RunResult {
        let mut run = results::load(include_str!("../../../tests/data/udp-stream.json")).unwrap();
        run.spec.pattern = Pattern::Rate;
        run.spec.sizes = vec![64];
        run.spec.load = Some(LoadSpec {
            rate: None,
            rates: vec![1e3, 2e3, 4e3, 8e3],
            rates_spec: "1k..8k:*2".into(),
            arrivals: load::Arrivals::Constant,
            seed: 1,
        });
        run.spec.interval_ns = 100_000_000;
        let proto = run.points[0].clone();
        run.points = [
            (1e3, 1e3, 20e3),
            (2e3, 2e3, 21e3),
            (4e3, 3.9e3, 2e6),
            (8e3, 4e3, 9e6),
        ]
        .iter()
        .map(|&(offered, delivered, p50)| {
            let mut p = proto.clone();
            let mut l = Latency::default();
            (l.rtt_ns.p50, l.rtt_ns.p99, l.rtt_ns.p999) = (p50, 3.0 * p50, 4.0 * p50);
            p.latency = Some(l);
            p.rate = Some(RateFigures {
                offered_rate: offered,
                delivered_rate: Estimate {
                    mean: delivered,
                    ..Default::default()
                },
                sent: offered as u64,
                received: delivered as u64,
                timeline: (0..3)
                    .map(|i| TimelineSample {
                        t_ns: i * 100_000_000,
                        sent: 10,
                        received: 9,
                        lost: 1,
                        delivered_rate: delivered,
                        p50_ns: p50,
                        p99_ns: 2.0 * p50,
                    })
                    .collect(),
                ..Default::default()
            });
            p
        })
        .collect();
        load::annotate(&mut run);
        run
    }

    #[test]
    fn a_rate_sweep_draws_latency_and_delivery_against_load_with_the_knee() {
        let run = sweep();
        let k = run.knee.clone().expect("a knee");
        assert_eq!((k.below_rate, k.offered_rate), (Some(2e3), 4e3));
        let named = [Named::new("r.json", &run)];
        let labels = ["r".to_string()];
        let charts = all(&named, &labels);
        let ids: Vec<&str> = charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "load-latency",
                "load-delivered",
                "timeline-latency",
                "timeline-delivered"
            ]
        );
        let lat = &charts[0];
        assert_eq!(lat.series[0].points[2], (4e3, 2e6));
        assert_eq!(lat.series[1].points[3], (8e3, 27e6));
        assert_eq!(lat.series[1].band[0], (1e3, 60e3, 80e3));
        let knee = &lat.markers[0];
        assert_eq!(
            (knee.from, knee.to, knee.label.as_str()),
            (2e3, 4e3, "knee")
        );
        let del = &charts[1];
        assert_eq!(del.series[0].points[3], (8e3, 4e3));
        assert_eq!(del.series[1].label, "offered");
        assert_eq!(del.series[1].points[3], (8e3, 8e3));
        // Four points of three 100 ms intervals, end to end; 1 lost per 100 ms is 10/s.
        let tl = &charts[3];
        assert_eq!(tl.series[0].points.len(), 12);
        assert_eq!(tl.series[0].points[11].0, 1.1e9);
        assert_eq!(tl.series[1].points[0], (0.0, 10.0));
        let svg = crate::plot::svg::render(lat);
        assert!(svg.contains(">knee<"), "{svg}");
    }

    #[test]
    fn rate_rows_carry_the_load_in_csv_and_text_and_the_knee_under_the_table() {
        let run = sweep();
        let header = crate::csv::header(&run.spec);
        let row = crate::csv::row(&run.points[3]);
        let cells: Vec<&str> = row.trim_end().split(',').collect();
        let col = |name: &str| {
            let i = header
                .trim_end()
                .split(',')
                .position(|h| h == name)
                .unwrap();
            cells[i]
        };
        assert_eq!(header.split(',').count(), cells.len());
        assert_eq!(col("offered_rate"), "8000.000");
        assert_eq!(col("delivered_rate"), "4000.000");
        assert_eq!(col("rate_latency_p50_ns"), "9000000.000");
        let head = crate::text::header(&run);
        assert!(
            head.contains("· 4 offered loads at 64 B, precision"),
            "{head}"
        );
        let text = crate::text::row(&run.spec, &run.points[3]);
        assert!(text.contains("8k") && text.contains("9000"), "{text}");
        let mut done = run.clone();
        done.summarise(1);
        let summary = crate::text::summary(&done);
        assert!(
            summary.contains("knee: latency climbs between 2k and 4k"),
            "{summary}"
        );
        // Notes name the offered loads of a sweep, not its one size.
        assert!(
            summary.contains("placement varied at 4 loads (1k, 2k, 4k, 8k/s)"),
            "{summary}"
        );
    }
}
