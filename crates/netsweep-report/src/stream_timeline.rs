//! The figures of stream timelines (`--interval`): the receiver's and the sender's rate per
//! interval and, for datagrams, the share of each interval's datagrams lost — every point of
//! a run laid end to end in the order measured, as the rate timelines are.

use crate::legend::Named;
use crate::parts::{axis, chart, end_to_end, fit_xy, line, timeline_axis};
use crate::plot::{Chart, Stroke, Unit};
use netsweep_model::results::RunResult;
use netsweep_model::timeline::StreamSample;

/// A run's stream timeline, every point's intervals end to end: (t, sample).
fn timeline(run: &RunResult) -> Vec<(f64, StreamSample)> {
    end_to_end(run.points.iter().map(|p| p.timeline.as_slice()), |s| s.t_ns)
}

/// The stream timeline figures of these runs: none when no run kept one.
pub fn all(runs: &[Named<'_>], labels: &[String]) -> Vec<Chart> {
    let mut rate = chart(
        "timeline-throughput",
        "Timeline: throughput per interval",
        "solid: the receiver's rate (bytes arrived in the interval) · dashed: the sender's \
         (bytes its stack accepted)",
        timeline_axis(),
        axis("throughput", Unit::Mbps),
    );
    let mut loss = chart(
        "timeline-loss",
        "Timeline: datagrams lost per interval",
        "of the datagrams sent in each interval (by their send time), the share never received",
        timeline_axis(),
        axis("lost", Unit::Percent),
    );
    for (i, r) in runs.iter().enumerate() {
        let tl = timeline(r.run);
        if tl.is_empty() {
            continue;
        }
        let series = |label, stroke, points| line(label, i, stroke, points);
        let get = |f: fn(&StreamSample) -> f64| tl.iter().map(|(t, s)| (*t, f(s))).collect();
        rate.series.push(series(
            format!("{} receiver", labels[i]),
            Stroke::Solid,
            get(|s| s.receiver_mbps),
        ));
        rate.series.push(series(
            format!("{} sender", labels[i]),
            Stroke::Dashed,
            get(|s| s.sender_mbps),
        ));
        let lost: Vec<(f64, f64)> = tl
            .iter()
            .filter_map(|(t, s)| {
                let d = s.datagrams.filter(|d| d.sent > 0)?;
                Some((*t, d.lost as f64 / d.sent as f64))
            })
            .collect();
        if !lost.is_empty() {
            loss.series
                .push(series(labels[i].clone(), Stroke::Solid, lost));
        }
    }
    let mut v = Vec::new();
    if !rate.is_empty() {
        v.push(fit_xy(rate, false, false));
    }
    if !loss.is_empty() {
        v.push(fit_xy(loss, false, false));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_model::results;
    use netsweep_model::timeline::IntervalDatagrams;

    #[test]
    fn points_are_laid_end_to_end_and_loss_is_a_share_of_the_interval() {
        let mut run = results::load(include_str!("../../../tests/data/udp-stream.json")).unwrap();
        assert!(all(&[Named::new("a", &run)], &["a".into()]).is_empty());
        for p in run.points.iter_mut().take(2) {
            p.timeline = (0..3)
                .map(|k| StreamSample {
                    t_ns: k * 100_000_000,
                    receiver_mbps: 10.0 * (k + 1) as f64,
                    sender_mbps: 40.0,
                    datagrams: Some(IntervalDatagrams {
                        sent: 100,
                        received: 100 - k * 10,
                        lost: k * 10,
                    }),
                    ..Default::default()
                })
                .collect();
        }
        let charts = all(&[Named::new("a", &run)], &["a".into()]);
        assert_eq!(charts.len(), 2);
        let rx = &charts[0].series[0].points;
        assert_eq!(rx.len(), 6);
        // The second point starts where the first one's last interval ends.
        assert_eq!(rx[3], (300e6, 10.0));
        let lost = &charts[1].series[0].points;
        assert_eq!(lost[2], (200e6, 0.2));
    }
}
