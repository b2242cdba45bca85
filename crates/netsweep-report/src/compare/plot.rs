//! The ratio plot of comparisons: B ÷ A throughput against size, with its 95% CI band and a
//! line at 1 (no difference).

use super::{Comparison, Metric};
use crate::plot::{Axis, Chart, Scale, Series, Unit};

/// One chart of every comparison's ratio for `metric` (colours follow the runs: B of the
/// first comparison is colour 1, as in the overlaid figures).
pub fn ratio_chart(cs: &[Comparison], metric: Metric) -> Chart {
    let what = match metric {
        Metric::Throughput => "throughput",
        Metric::Latency => "latency (RTT/2)",
    };
    let mut series = Vec::new();
    for (i, c) in cs.iter().enumerate() {
        let Some(mc) = c.metrics.iter().find(|m| m.metric == metric) else {
            continue;
        };
        let ok: Vec<_> = mc.rows.iter().filter(|r| r.ratio.is_finite()).collect();
        series.push(Series {
            label: format!("{} ÷ {}", c.b, c.a),
            color: i + 1,
            points: ok.iter().map(|r| (r.size as f64, r.ratio)).collect(),
            band: ok
                .iter()
                .filter(|r| r.ratio_low.is_finite() && r.ratio_high.is_finite())
                .map(|r| (r.size as f64, r.ratio_low, r.ratio_high))
                .collect(),
            ..Default::default()
        });
    }
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.band.iter().flat_map(|b| [b.1, b.2]))
        })
        .chain([1.0])
        .collect();
    Chart {
        id: format!("ratio-{}", metric.name()),
        title: format!("Ratio of {what}: B ÷ A"),
        subtitle: "band: 95% CI of the ratio · dashed line: no difference".into(),
        x: Axis {
            title: "message size (bytes, log scale)".into(),
            unit: Unit::Bytes,
            scale: Scale::fit(xs, true, false),
        },
        y: Axis {
            title: format!("{what} ratio"),
            unit: Unit::Ratio,
            scale: Scale::fit(ys, false, false),
        },
        series,
        markers: vec![],
        hlines: vec![1.0],
        bars: false,
        legend_title: String::new(),
    }
}
