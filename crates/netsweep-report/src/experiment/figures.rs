//! An experiment's figures, drawn from the cells' medians and spreads: a figure against a
//! factor (lines with error bars for numeric levels, grouped bars with error bars for
//! categorical ones) or against message size (one series per level), with one series per
//! level of the series factor, small multiples over the panel factor (and over any other
//! factor that varies, and past six series a panel), legends in the factor's own labels; or
//! against another figure, point by point over the sizes (NetPIPE's signature graph:
//! throughput against the time of one transfer).

use crate::plot::{panels, svg, Axis, Chart, Scale, Series, Unit};
use netsweep_model::experiment::metric::{self, Metric, MetricUnit};
use netsweep_model::experiment::{Design, FigureSpec, Observations};

/// Most series one panel shows: more cannot be told apart.
pub const MAX_SERIES: usize = 6;

/// A figure drawn: its SVG and what it shows (for the page and for tests).
#[derive(Debug, Clone)]
pub struct Drawn {
    /// File stem.
    pub id: String,
    /// Title.
    pub title: String,
    /// The SVG document.
    pub svg: String,
    /// The panels, each a chart (title = the panel's levels).
    pub charts: Vec<Chart>,
}

/// The plot unit of a figure's unit.
pub fn unit(u: MetricUnit) -> Unit {
    match u {
        MetricUnit::Mbps => Unit::Mbps,
        MetricUnit::Nanos => Unit::Nanos,
        MetricUnit::Fraction => Unit::Percent,
        MetricUnit::PerSecond => Unit::PerSecond,
        MetricUnit::UsPerKib => Unit::Plain("µs/KiB".into()),
        MetricUnit::Plain => Unit::Plain(String::new()),
    }
}

/// A group of cells drawn in one panel: its title and its cells.
struct Panel {
    title: String,
    cells: Vec<usize>,
}

/// Splits the cells into panels: by run, by the panel factor and by every factor on no axis
/// that has more than one level.
fn panels_of(spec: &FigureSpec, design: &Design) -> Vec<Panel> {
    let on_axis = |name: &str| name == spec.x || spec.series.as_deref() == Some(name);
    let mut out: Vec<Panel> = Vec::new();
    // Only cells that have a level of every factor the figure names.
    let named: Vec<usize> = [
        Some(spec.x.as_str()),
        spec.series.as_deref(),
        spec.panels.as_deref(),
    ]
    .into_iter()
    .flatten()
    .filter_map(|n| design.factor(n))
    .collect();
    let cells: Vec<(usize, &netsweep_model::experiment::Cell)> = design
        .cells
        .iter()
        .enumerate()
        .filter(|(_, c)| named.iter().all(|&f| c.level_of(f).is_some()))
        .filter(|(_, c)| spec.run.as_ref().is_none_or(|r| *r == c.run))
        .filter(|(_, c)| {
            spec.only.iter().all(|(name, levels)| {
                design
                    .factor(name)
                    .and_then(|f| c.level_of(f).map(|l| &design.factors[f].levels[l].name))
                    .is_some_and(|l| levels.contains(l))
            })
        })
        .collect();
    if cells.is_empty() {
        return out;
    }
    let several_runs = cells.iter().any(|(_, c)| c.run != cells[0].1.run);
    for (ci, c) in cells {
        let mut key: Vec<String> = Vec::new();
        if several_runs {
            key.push(c.run.clone());
        }
        for &(f, l) in &c.at {
            let fac = &design.factors[f];
            if !on_axis(&fac.name) && fac.levels.len() > 1 {
                key.push(format!("{}: {}", fac.label, fac.levels[l].label));
            }
        }
        let title = key.join(" · ");
        match out.iter_mut().find(|p| p.title == title) {
            Some(p) => p.cells.push(ci),
            None => out.push(Panel {
                title,
                cells: vec![ci],
            }),
        }
    }
    out
}

/// Draws one figure; `None` when no cell measured it.
pub fn draw(spec: &FigureSpec, design: &Design, obs: &Observations<'_>) -> Option<Drawn> {
    let m = metric::metric(&spec.y)?;
    let series_f = spec.series.as_deref().and_then(|s| design.factor(s));
    let x_f = design.factor(&spec.x);
    let x_m = spec.x_figure(design);
    let title = spec.title.clone().unwrap_or_else(|| {
        let against = match (x_f, x_m) {
            (Some(f), _) => design.factors[f].label.clone(),
            (None, Some(xm)) => xm.label.to_string(),
            (None, None) => "message size".into(),
        };
        format!("{} against {against}", capitalise(m.label))
    });
    let mut charts = Vec::new();
    let panels = panels_of(spec, design);
    for (pi, panel) in panels.iter().enumerate() {
        // Series: the series factor's levels present in this panel, in level order.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for &ci in &panel.cells {
            let label = match series_f {
                Some(f) => design.cells[ci]
                    .level_of(f)
                    .map(|l| design.factors[f].levels[l].label.clone())
                    .unwrap_or_default(),
                None => String::new(),
            };
            match groups.iter_mut().find(|g| g.0 == label) {
                Some(g) => g.1.push(ci),
                None => groups.push((label, vec![ci])),
            }
        }
        for (k, chunk) in groups.chunks(MAX_SERIES).enumerate() {
            let mut chart = match (x_f, x_m) {
                (Some(f), _) => against_factor(spec, design, obs, m, f, chunk),
                (None, Some(xm)) => against_metric(spec, obs, m, xm, chunk),
                (None, None) => against_size(spec, obs, m, chunk),
            };
            if let Some(d) = spec.dashed.as_deref().and_then(metric::metric) {
                let extra = match (x_f, x_m) {
                    (Some(f), _) => against_factor(spec, design, obs, d, f, chunk),
                    (None, Some(xm)) => against_metric(spec, obs, d, xm, chunk),
                    (None, None) => against_size(spec, obs, d, chunk),
                };
                dashed_beside(&mut chart, extra, m, d, spec.y_zero.unwrap_or(true));
            }
            chart.id = format!("{}-{pi}-{k}", spec.id);
            chart.title = match (panel.title.is_empty(), groups.len() > MAX_SERIES) {
                (true, false) => String::new(),
                (true, true) => format!(
                    "series {}–{}",
                    k * MAX_SERIES + 1,
                    k * MAX_SERIES + chunk.len()
                ),
                (false, _) => panel.title.clone(),
            };
            // A level keeps its colour in every panel.
            for s in &mut chart.series {
                s.color += k * MAX_SERIES;
            }
            chart.legend_title = series_f
                .map(|f| format!("{}:", design.factors[f].label))
                .unwrap_or_default();
            if !chart.is_empty() {
                charts.push(chart);
            }
        }
    }
    if charts.is_empty() {
        return None;
    }
    // Small multiples share the value axis, so heights compare across panels.
    if charts.len() > 1 {
        let all: Vec<f64> = charts.iter().flat_map(Chart::ys).collect();
        let log_y = spec.log_y.unwrap_or(false);
        let scale = Scale::fit(all, log_y, !log_y && spec.y_zero.unwrap_or(true));
        for c in &mut charts {
            c.y.scale = scale;
        }
    }
    let reps = obs.repeat();
    // The fewest repetitions that measured anything in a cell drawn: a failed run's are fewer.
    let fewest = panels
        .iter()
        .flat_map(|p| &p.cells)
        .map(|&ci| (1..=reps).filter(|&r| obs.measured(ci, r)).count() as u32)
        .min()
        .unwrap_or(reps);
    let of = if fewest < reps {
        format!("{reps} repetitions ({fewest} in a cell where a run failed)")
    } else {
        format!("{reps} repetitions")
    };
    let subtitle = if reps > 1 && x_m.is_some() {
        format!("a point per message size: the medians of {of} (cells interleaved) on both axes")
    } else if reps > 1 {
        format!(
            "median of {of} (cells interleaved) · {}: interval of the median over the repetitions",
            if x_f.is_some() { "bars" } else { "band" }
        )
    } else {
        "one repetition: no spread over repetitions (set repeat = 5)".to_string()
    };
    let doc = if charts.len() == 1 {
        let mut c = charts[0].clone();
        c.subtitle = subtitle;
        c.title = if c.title.is_empty() {
            title.clone()
        } else {
            format!("{title} — {}", c.title)
        };
        svg::render(&c)
    } else {
        panels::render(
            &title,
            &subtitle,
            &charts,
            if charts.len() <= 2 { 2 } else { 3 },
        )
    };
    Some(Drawn {
        id: spec.id.clone(),
        title,
        svg: doc,
        charts,
    })
}

/// Adds `extra`'s series to `chart` dashed, in the colours of `chart`'s, each legend naming
/// its figure, and refits the value axis to both.
fn dashed_beside(chart: &mut Chart, extra: Chart, solid: &Metric, dashed: &Metric, zero: bool) {
    // Short names ("sender rate") unless they coincide ("round trip" twice): then in full.
    let (sn, dn) = match (short(solid), short(dashed)) {
        (a, b) if a == b => (solid.label, dashed.label),
        pair => pair,
    };
    let name = |label: &str, m: &str| {
        if label.is_empty() {
            m.to_string()
        } else {
            format!("{label}, {m}")
        }
    };
    for s in &mut chart.series {
        s.label = name(&s.label, sn);
    }
    for mut s in extra.series {
        s.label = name(&s.label, dn);
        s.stroke = crate::plot::Stroke::Dashed;
        chart.series.push(s);
    }
    let log = matches!(chart.y.scale, Scale::Log { .. });
    chart.y.scale = Scale::fit(chart.ys(), log, !log && zero);
    chart.y.title = format!("{sn} (solid), {dn} (dashed)");
}

/// A figure's label up to its first parenthesis or comma: "sender rate".
fn short(m: &Metric) -> &'static str {
    m.label.split([',', '(']).next().unwrap_or(m.label).trim()
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn y_axis(m: &Metric) -> Axis {
    Axis {
        title: m.label.into(),
        unit: unit(m.unit),
        scale: Scale::Linear { min: 0.0, max: 1.0 },
    }
}

fn empty_chart(x: Axis, y: Axis) -> Chart {
    Chart {
        id: String::new(),
        title: String::new(),
        subtitle: String::new(),
        x,
        y,
        series: vec![],
        markers: vec![],
        hlines: vec![],
        bars: false,
        legend_title: String::new(),
    }
}

fn against_factor(
    spec: &FigureSpec,
    design: &Design,
    obs: &Observations<'_>,
    m: &'static Metric,
    f: usize,
    groups: &[(String, Vec<usize>)],
) -> Chart {
    let factor = &design.factors[f];
    let numeric = factor.is_numeric();
    let pos = |l: usize| -> f64 {
        if numeric {
            factor.levels[l].x.unwrap_or(l as f64)
        } else {
            l as f64
        }
    };
    let xs: Vec<f64> = (0..factor.levels.len()).map(pos).collect();
    let log_x = spec.log_x.unwrap_or_else(|| {
        numeric && xs.iter().all(|x| *x > 0.0) && {
            let (lo, hi) = xs
                .iter()
                .fold((f64::MAX, 0.0f64), |a, x| (a.0.min(*x), a.1.max(*x)));
            hi / lo > 20.0
        }
    });
    let x = Axis {
        title: if log_x {
            format!("{} (log scale)", factor.label)
        } else {
            factor.label.clone()
        },
        unit: if numeric {
            Unit::Ticks(
                xs.iter()
                    .copied()
                    .zip(factor.levels.iter().map(|l| l.label.clone()))
                    .collect(),
            )
        } else {
            Unit::Category(factor.levels.iter().map(|l| l.label.clone()).collect())
        },
        scale: if numeric {
            Scale::fit(xs.iter().copied(), log_x, false)
        } else {
            Scale::Linear {
                min: -0.5,
                max: factor.levels.len() as f64 - 0.5,
            }
        },
    };
    let mut c = empty_chart(x, y_axis(m));
    c.bars = !numeric;
    for (i, (label, cells)) in groups.iter().enumerate() {
        let mut s = Series {
            label: label.clone(),
            color: i,
            ..Default::default()
        };
        let mut pts: Vec<(f64, f64, f64, f64)> = cells
            .iter()
            .filter_map(|&ci| {
                let l = design.cells[ci].level_of(f)?;
                let sp = obs.spread(ci, m, spec.size)?;
                Some((pos(l), sp.median, sp.lo, sp.hi))
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        s.points = pts.iter().map(|p| (p.0, p.1)).collect();
        if obs.repeat() > 1 {
            s.errors = pts.iter().map(|p| (p.0, p.2, p.3)).collect();
        }
        c.series.push(s);
    }
    let log_y = spec.log_y.unwrap_or(false);
    c.y.scale = Scale::fit(c.ys(), log_y, !log_y && spec.y_zero.unwrap_or(true));
    c
}

fn against_size(
    spec: &FigureSpec,
    obs: &Observations<'_>,
    m: &'static Metric,
    groups: &[(String, Vec<usize>)],
) -> Chart {
    let x = Axis {
        title: "message size (bytes)".into(),
        unit: Unit::Bytes,
        scale: Scale::Log { min: 1.0, max: 2.0 },
    };
    let mut c = empty_chart(x, y_axis(m));
    c.series = per_size(groups, obs, |s, ci, size| {
        if let Some(sp) = obs.spread(ci, m, Some(size)) {
            s.points.push((size as f64, sp.median));
            if obs.repeat() > 1 {
                s.band.push((size as f64, sp.lo, sp.hi));
            }
        }
    });
    let xs: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let log_x = spec.log_x.unwrap_or(true);
    // A linear size axis spans the sizes swept (a 32–128 KiB sweep is not drawn from 0), and
    // never below 0 bytes.
    c.x.scale = match Scale::fit(
        xs.iter().copied().filter(|x| !log_x || *x > 0.0),
        log_x,
        false,
    ) {
        Scale::Linear { min, max } => Scale::Linear {
            min: min.max(0.0),
            max,
        },
        log => log,
    };
    if !log_x {
        // The ticks' unit (bytes, KiB, MiB) is added to the title when drawn.
        c.x.title = "message size".into();
    } else {
        c.x.title = "message size (bytes, log scale)".into();
    }
    let log_y = spec.log_y.unwrap_or(false);
    c.y.scale = Scale::fit(c.ys(), log_y, !log_y && spec.y_zero.unwrap_or(true));
    c
}

/// `m` against `xm`, a point per message size (x and y the medians over the repetitions at
/// that size), joined in size order: NetPIPE's signature graph when `xm` is a time.
fn against_metric(
    spec: &FigureSpec,
    obs: &Observations<'_>,
    m: &'static Metric,
    xm: &'static Metric,
    groups: &[(String, Vec<usize>)],
) -> Chart {
    let log_x = spec.log_x.unwrap_or(true);
    let x = Axis {
        title: format!("{}{}", xm.label, if log_x { " (log scale)" } else { "" }),
        unit: unit(xm.unit),
        scale: Scale::Log { min: 1.0, max: 2.0 },
    };
    let mut c = empty_chart(x, y_axis(m));
    // In size order: the sizes are the line's parameter, not its axis.
    c.series = per_size(groups, obs, |s, ci, size| {
        if let (Some(xs), Some(ys)) = (
            obs.spread(ci, xm, Some(size)),
            obs.spread(ci, m, Some(size)),
        ) {
            s.points.push((xs.median, ys.median));
        }
    });
    let xs: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .filter(|x| !log_x || *x > 0.0)
        .collect();
    c.x.scale = Scale::fit(xs, log_x, false);
    let log_y = spec.log_y.unwrap_or(false);
    c.y.scale = Scale::fit(c.ys(), log_y, !log_y && spec.y_zero.unwrap_or(true));
    c
}

/// A series per group (its label, its colour by position), filled by `add` at every size
/// each of its cells measured, in size order.
fn per_size(
    groups: &[(String, Vec<usize>)],
    obs: &Observations<'_>,
    add: impl Fn(&mut Series, usize, u64),
) -> Vec<Series> {
    groups
        .iter()
        .enumerate()
        .map(|(i, (label, cells))| {
            let mut s = Series {
                label: label.clone(),
                color: i,
                ..Default::default()
            };
            let mut at: Vec<(u64, usize)> = cells
                .iter()
                .flat_map(|&ci| obs.sizes(ci).into_iter().map(move |z| (z, ci)))
                .collect();
            at.sort_unstable();
            for (size, ci) in at {
                add(&mut s, ci, size);
            }
            s
        })
        .collect()
}

#[cfg(test)]
#[path = "figures_tests.rs"]
mod tests;
