//! Parts every figure module builds its charts from: axes, an empty chart, a plain line,
//! fitting the scales to the data, and the timelines' time axis laid end to end.

use crate::plot::{Axis, Chart, Scale, Series, Stroke, Unit};

pub(crate) fn axis(title: &str, unit: Unit) -> Axis {
    Axis {
        title: title.into(),
        unit,
        scale: Scale::Linear { min: 0.0, max: 1.0 },
    }
}

/// The x axis of the timelines: time, every point's intervals end to end.
pub(crate) fn timeline_axis() -> Axis {
    axis(
        "time (points end to end, trials laid back to back)",
        Unit::Nanos,
    )
}

/// Each point's timeline (its samples, each starting `t_ns(sample)` after the point's
/// first) laid after the previous point's last interval: (t, sample).
pub(crate) fn end_to_end<'a, T: Copy + 'a>(
    timelines: impl Iterator<Item = &'a [T]>,
    t_ns: impl Fn(&T) -> u64,
) -> Vec<(f64, T)> {
    let mut out = Vec::new();
    let mut base = 0u64;
    for tl in timelines {
        let step = tl.get(1).map_or(0, &t_ns);
        for s in tl {
            out.push(((base + t_ns(s)) as f64, *s));
        }
        base += tl.last().map_or(0, |s| t_ns(s) + step);
    }
    out
}

/// Fits both axes to the chart's data: x log or linear from zero, y likewise.
pub(crate) fn fit_xy(mut c: Chart, x_log: bool, y_log: bool) -> Chart {
    let xs = c
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.0)
                .chain(s.band.iter().map(|b| b.0))
        })
        .collect::<Vec<_>>();
    let ys = c
        .ys()
        .into_iter()
        .chain(c.hlines.iter().copied())
        .collect::<Vec<_>>();
    c.x.scale = Scale::fit(xs, x_log, !x_log);
    c.y.scale = Scale::fit(ys, y_log, !y_log);
    c
}

/// A series drawn as a line of run `color`'s colour, without a band.
pub(crate) fn line(label: String, color: usize, stroke: Stroke, points: Vec<(f64, f64)>) -> Series {
    Series {
        label,
        color,
        stroke,
        points,
        band: vec![],
        errors: vec![],
    }
}

pub(crate) fn chart(id: &str, title: &str, subtitle: &str, x: Axis, y: Axis) -> Chart {
    Chart {
        id: id.into(),
        title: title.into(),
        subtitle: subtitle.into(),
        x,
        y,
        series: vec![],
        markers: vec![],
        hlines: vec![],
        bars: false,
        legend_title: String::new(),
    }
}
