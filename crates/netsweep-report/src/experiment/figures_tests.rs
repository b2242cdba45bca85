//! Tests of the experiment figures: the series, their labels and legend title, bars for
//! categorical factors, error bars from the repetitions, and small multiples.

use super::*;
use netsweep_model::experiment::design::full_grid;
use netsweep_model::experiment::{Cell, Factor, FactorKind, Level, Order};
use netsweep_model::results::{self, RunResult};

fn level(name: &str, label: &str, x: Option<f64>) -> Level {
    Level {
        name: name.into(),
        label: label.into(),
        args: vec![],
        value: None,
        x,
    }
}

/// `band` (numeric, `bands` levels) × `load` (idle, loaded), 3 repetitions.
fn design(bands: usize) -> Design {
    let factors = vec![
        Factor {
            name: "band".into(),
            label: "SO_PRIORITY band".into(),
            kind: FactorKind::Arg {
                flag: "--priority".into(),
            },
            levels: (0..bands)
                .map(|b| level(&b.to_string(), &format!("band {b}"), Some(b as f64)))
                .collect(),
        },
        Factor {
            name: "load".into(),
            label: "competing load".into(),
            kind: FactorKind::Args,
            levels: vec![
                level("idle", "idle", None),
                level("loaded", "band-0 stream", None),
            ],
        },
    ];
    let cells = full_grid(&[bands, 2])
        .into_iter()
        .map(|c| Cell {
            name: format!("rtt-b{}-{}", c[0], c[1]),
            run: "rtt".into(),
            at: vec![(0, c[0]), (1, c[1])],
            levels: Default::default(),
        })
        .collect();
    Design {
        factors,
        cells,
        repeat: 3,
        order: Order::Interleaved,
    }
}

/// A pingpong result of one 1000-byte point whose median round trip is `rtt_ns`.
fn result(rtt_ns: f64) -> RunResult {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/tcp-pingpong.json"
    );
    let mut r = results::load(&std::fs::read_to_string(path).unwrap()).unwrap();
    r.points.truncate(1);
    r.points[0].size = 1000;
    let l = r.points[0].latency.as_mut().unwrap();
    l.rtt_ns.p50 = rtt_ns;
    r
}

fn observed(d: &Design) -> Vec<(usize, u32, RunResult)> {
    let mut v = Vec::new();
    for ci in 0..d.cells.len() {
        for rep in 1..=3u32 {
            let loaded = d.cells[ci].at[1].1 as f64;
            let base = 100e3 * (1.0 + ci as f64) * (1.0 + 9.0 * loaded);
            v.push((ci, rep, result(base * (1.0 + 0.01 * rep as f64))));
        }
    }
    v
}

/// The observations of `data`, three repetitions per cell of `d`.
fn observations<'a>(d: &Design, data: &'a [(usize, u32, RunResult)]) -> Observations<'a> {
    let mut obs = Observations::new(d.cells.len(), 3);
    for (c, r, res) in data {
        obs.add(*c, *r, res);
    }
    obs
}

fn spec(x: &str, series: Option<&str>) -> FigureSpec {
    FigureSpec {
        id: "f".into(),
        title: None,
        y: "rtt_p50".into(),
        dashed: None,
        x: x.into(),
        series: series.map(String::from),
        panels: None,
        size: None,
        log_x: None,
        log_y: None,
        run: None,
        only: Default::default(),
        y_zero: None,
    }
}

#[test]
fn the_metric_against_a_numeric_factor_has_a_series_per_level_with_error_bars() {
    let d = design(4);
    let data = observed(&d);
    let obs = observations(&d, &data);
    let drawn = draw(&spec("band", Some("load")), &d, &obs).unwrap();
    assert_eq!(drawn.title, "Round trip, median against SO_PRIORITY band");
    assert_eq!(drawn.charts.len(), 1, "no other factor varies: one panel");
    let c = &drawn.charts[0];
    assert!(!c.bars, "numeric levels are drawn as lines");
    assert_eq!(c.legend_title, "competing load:");
    let labels: Vec<&str> = c.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels,
        ["idle", "band-0 stream"],
        "the legend names only what varies"
    );
    let idle = &c.series[0];
    assert_eq!(idle.points.len(), 4);
    // Band 0, idle: repetitions at 101, 102, 103 µs → median 102 µs, interval 101–103 µs.
    assert_eq!(idle.points[0], (0.0, 102e3));
    let (x, lo, hi) = idle.errors[0];
    assert_eq!(x, 0.0);
    assert!(
        (lo - 101e3).abs() < 1e-6 && (hi - 103e3).abs() < 1e-6,
        "{lo} {hi}"
    );
    assert_eq!(c.x.unit.label(2.0), "band 2");
    assert_eq!(c.x.title, "SO_PRIORITY band");
    assert!(drawn.svg.contains("competing load:") && drawn.svg.contains("band-0 stream"));
    assert!(drawn.svg.contains(r#"class="error-bar""#));
    assert!(!drawn.svg.contains("198.18."), "no machine labels");
}

#[test]
fn a_categorical_factor_is_drawn_as_grouped_bars_and_other_factors_as_panels() {
    let d = design(3);
    let data = observed(&d);
    let obs = observations(&d, &data);
    let drawn = draw(&spec("load", None), &d, &obs).unwrap();
    // band varies and is on no axis: one panel per band.
    assert_eq!(drawn.charts.len(), 3);
    assert_eq!(drawn.charts[1].title, "SO_PRIORITY band: band 1");
    assert!(drawn.charts.iter().all(|c| c.bars));
    assert_eq!(drawn.charts[0].x.unit.label(1.0), "band-0 stream");
    assert!(drawn.svg.contains(r#"class="panel""#) && drawn.svg.contains(r#"class="bar""#));
}

#[test]
fn more_than_six_series_become_small_multiples() {
    let d = design(8);
    let data = observed(&d);
    let obs = observations(&d, &data);
    let drawn = draw(&spec("load", Some("band")), &d, &obs).unwrap();
    let per_panel: Vec<usize> = drawn.charts.iter().map(|c| c.series.len()).collect();
    assert_eq!(per_panel, [6, 2]);
    assert_eq!(drawn.charts[1].series[0].label, "band 6");
    assert_eq!(drawn.charts[0].title, "series 1–6");
}

#[test]
fn a_figure_of_one_run_draws_only_that_runs_cells() {
    // The same grid measured by two runs: "rtt" for band 0 and 1, "other" for the rest.
    let mut d = design(4);
    for c in &mut d.cells {
        if c.at[0].1 >= 2 {
            c.run = "other".into();
        }
    }
    let data = observed(&d);
    let obs = observations(&d, &data);
    let all = draw(&spec("band", Some("load")), &d, &obs).unwrap();
    assert_eq!(all.charts.len(), 2, "a panel per run without `run`");
    let one = FigureSpec {
        run: Some("rtt".into()),
        ..spec("band", Some("load"))
    };
    one.check(&d).unwrap();
    let drawn = draw(&one, &d, &obs).unwrap();
    assert_eq!(drawn.charts.len(), 1);
    let c = &drawn.charts[0];
    assert!(
        c.series.iter().all(|s| s.points.len() == 2),
        "bands 0 and 1 only"
    );
    let unknown = FigureSpec {
        run: Some("nope".into()),
        ..spec("band", None)
    };
    let e = unknown.check(&d).unwrap_err();
    assert!(e.contains("\"rtt\"") && e.contains("\"other\""), "{e}");
}

#[test]
fn a_dashed_figure_is_drawn_beside_the_solid_one_in_the_same_colours() {
    let d = design(4);
    let data = observed(&d);
    let obs = observations(&d, &data);
    let mut s = spec("band", Some("load"));
    s.dashed = Some("rtt_p99".into());
    let drawn = draw(&s, &d, &obs).unwrap();
    let c = &drawn.charts[0];
    assert_eq!(c.series.len(), 4, "two levels, each solid and dashed");
    let (solid, dashed) = c.series.split_at(2);
    for (a, b) in solid.iter().zip(dashed) {
        assert_eq!(a.stroke, crate::plot::Stroke::Solid);
        assert_eq!(b.stroke, crate::plot::Stroke::Dashed);
        assert_eq!(a.color, b.color, "a level keeps its colour, dashed or not");
        // Both figures are "round trip, …": the legend keeps their full names apart.
        assert!(
            a.label.contains("median") && b.label.contains("99"),
            "{} / {}",
            a.label,
            b.label
        );
    }
    assert!(c.y.title.contains("(solid)") && c.y.title.contains("(dashed)"));
    // A dashed figure of another unit is refused by name.
    s.dashed = Some("throughput".into());
    let e = s.check(&d).unwrap_err();
    assert!(e.contains("dashed") && e.contains("same unit"), "{e}");
}

/// NetPIPE's signature graph: throughput against the round trip, a point per message size,
/// each the medians of the repetitions, joined in size order on a logarithmic time axis.
#[test]
fn a_figure_against_another_figure_is_a_point_per_size_in_size_order() {
    let d = design(1);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/tcp-pingpong.json"
    );
    let r = results::load(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut obs = Observations::new(d.cells.len(), 3);
    for ci in 0..d.cells.len() {
        for rep in 1..=3u32 {
            obs.add(ci, rep, &r);
        }
    }
    let mut s = spec("rtt_p50", Some("load"));
    s.y = "throughput".into();
    // The scenario check takes a figure's name for x when no factor has it.
    s.check(&d).unwrap();
    let drawn = draw(&s, &d, &obs).unwrap();
    assert!(
        drawn.title.ends_with("against round trip, median"),
        "{}",
        drawn.title
    );
    let c = &drawn.charts[0];
    assert_eq!(c.series.len(), 2);
    let want: Vec<(f64, f64)> = r
        .points
        .iter()
        .map(|p| {
            (
                p.latency.as_ref().unwrap().rtt_ns.p50,
                p.throughput_mbps.mean,
            )
        })
        .collect();
    assert_eq!(want.len(), 7);
    for series in &c.series {
        assert_eq!(series.points, want, "{}", series.label);
        assert!(
            series.band.is_empty(),
            "no band: the spread is two-dimensional"
        );
    }
    assert!(matches!(c.x.scale, Scale::Log { .. }));
    assert!(matches!(c.x.unit, Unit::Nanos));
    assert!(drawn.svg.contains("a point per message size"));
    // A name that is neither a factor, nor size, nor a figure is refused with the choices.
    s.x = "rtt".into();
    let e = s.check(&d).unwrap_err();
    assert!(e.contains("or a figure's name"), "{e}");
}

/// `only` keeps the cells at the levels it names, and names the choices when it names none.
#[test]
fn only_draws_the_cells_at_the_levels_named() {
    let d = design(4);
    let data = observed(&d);
    let obs = observations(&d, &data);
    let mut s = spec("band", Some("load"));
    s.only = [("load".to_string(), vec!["loaded".to_string()])].into();
    s.only.insert("band".into(), vec!["1".into(), "3".into()]);
    s.check(&d).unwrap();
    let drawn = draw(&s, &d, &obs).unwrap();
    let c = &drawn.charts[0];
    let labels: Vec<&str> = c.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["band-0 stream"]);
    let xs: Vec<f64> = c.series[0].points.iter().map(|p| p.0).collect();
    assert_eq!(xs, [1.0, 3.0]);
    s.only.insert("load".into(), vec!["busy".into()]);
    let e = s.check(&d).unwrap_err();
    assert!(
        e.contains("no level \"busy\"") && e.contains("\"idle\""),
        "{e}"
    );
    s.only = [("nope".to_string(), vec!["x".to_string()])].into();
    let e = s.check(&d).unwrap_err();
    assert!(e.contains("only: no factor called \"nope\""), "{e}");
}
