//! Tests of the claim grammar and of resolution against a design.

use super::*;
use crate::experiment::design::Design;
use crate::experiment::design::{Cell, Factor, FactorKind, Level};
use crate::spec::Pattern;

fn design() -> Design {
    let level = |n: &str, l: &str| Level {
        name: n.into(),
        label: l.into(),
        args: vec![],
        value: None,
        x: None,
    };
    let mut cells = Vec::new();
    for (bi, b) in ["0", "1"].iter().enumerate() {
        for (li, l) in ["idle", "loaded"].iter().enumerate() {
            cells.push(Cell {
                name: format!("rtt-band{b}-{l}"),
                run: "rtt".into(),
                at: vec![(0, bi), (1, li)],
                levels: [
                    ("band".to_string(), b.to_string()),
                    ("load".to_string(), l.to_string()),
                ]
                .into(),
            });
        }
    }
    Design {
        factors: vec![
            Factor {
                name: "band".into(),
                label: "SO_PRIORITY band".into(),
                kind: FactorKind::Arg {
                    flag: "--priority".into(),
                },
                levels: vec![level("0", "band 0"), level("1", "band 1")],
            },
            Factor {
                name: "load".into(),
                label: "background load".into(),
                kind: FactorKind::Args,
                levels: vec![level("idle", "idle"), level("loaded", "loaded")],
            },
        ],
        cells,
        repeat: 5,
        order: Default::default(),
    }
}

fn one_size(_: usize) -> Option<CellFacts> {
    Some(CellFacts {
        measures: Measures::Pattern(Pattern::Pingpong),
        sizes: vec![1000],
    })
}

fn error(check: &str) -> String {
    let c = match parse(check) {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    resolve(&c, &design(), &one_size).unwrap_err()
}

#[test]
fn parses_the_three_forms() {
    let c = parse("rtt_p50[load=loaded, band=0] > 10 * rtt_p50[load=idle, band=0]").unwrap();
    let Test::Compare(Cmp::Gt, right) = &c.test else {
        panic!("{c:?}")
    };
    assert_eq!(right.times, 10.0);
    assert_eq!(c.figures().len(), 2);
    let r = resolve(&c, &design(), &one_size).unwrap();
    assert_eq!((r[0].cell, r[1].cell), (1, 0));
    assert_eq!(r[0].size, Some(1000), "the cell's one size is implied");

    let c = parse("throughput[band=1, load=idle, size=1000] / throughput[band=0,load=idle,size=1000] in 1.0..1.2").unwrap();
    assert_eq!(c.test, Test::Range(1.0, 1.2));
    assert_eq!(c.figures()[0].size, Some(1000));

    let c = parse("rtt_mean[band=1,load=idle] within 3% of rtt_mean[band=0,load=idle]").unwrap();
    assert!(matches!(c.test, Test::Within(p, _) if (p - 0.03).abs() < 1e-12));

    let c = parse("rtt_p50[band=1, load=idle] <= 2.5ms").unwrap();
    let Test::Compare(Cmp::Le, s) = &c.test else {
        panic!()
    };
    assert_eq!(
        s.num,
        Operand::Constant {
            value: 2.5e6,
            unit: Some(MetricUnit::Nanos)
        }
    );
    let c = parse("rtt_p50[band=1, load=idle] < rtt_p50[band=0, load=idle] + 0.1ms").unwrap();
    let Test::Compare(Cmp::Lt, s) = &c.test else {
        panic!()
    };
    assert_eq!(s.plus, 1e5);
    let c = parse("rtt_p50[band=\"band 1\", load=idle] × 2 >= rtt_p50[band=0, load=idle]");
    assert!(c.is_err(), "the factor goes in front: {c:?}");
}

#[test]
fn a_claim_that_can_never_fail_is_refused() {
    let cases = [
        (
            "rtt_p99[band=0, load=idle] > rtt_p50[band=0, load=idle]",
            "",
        ),
        (
            "rtt_p50[band=0, load=idle] > rtt_p50[band=0, load=idle]",
            "with itself",
        ),
        (
            "rtt_p50[band=0,load=idle] / rtt_p50[band=0,load=idle] in 0.5..2",
            "by itself",
        ),
        // The same cell and figure on both sides, whatever the constants.
        (
            "rtt_p50[band=0, load=idle] <= 2 * rtt_p50[band=0, load=idle]",
            "only the constants differ",
        ),
        (
            "rtt_p50[band=0, load=idle] <= rtt_p50[band=0, load=idle] + 1us",
            "only the constants differ",
        ),
        (
            "rtt_p50[band=0, load=idle] < 2 * rtt_p50[band=1, load=idle]",
            "",
        ),
        ("5 > 3", "numbers only"),
        (
            "rttp50[band=0, load=idle] > 1us",
            "no figure called \"rttp50\"",
        ),
        (
            "rtt_p50[bnad=0, load=idle] > 1us",
            "no factor called \"bnad\"",
        ),
        ("rtt_p50[band=7, load=idle] > 1us", "no level \"7\""),
        (
            "rtt_p50[band=0] > 1us",
            "picks 2 cells: name a level of \"load\"",
        ),
        (
            "rtt_p50[band=0, load=idle, size=64k] > 1us",
            "no 65536-byte point",
        ),
        (
            "receiver_mbps[band=0, load=idle] > 1mbit",
            "does not measure receiver_mbps",
        ),
        ("rtt_p50[band=0, load=idle] > 100", "e.g. 100us"),
        ("rtt_p50[band=0, load=idle] in 2..1", "empty"),
        (
            "rtt_p50[band=0, load=idle] within 0% of rtt_p50[band=1, load=idle]",
            "above 0",
        ),
        ("rtt_p50[band=0, load=idle] ~ 3", "expected a comparison"),
        ("rtt_p50[band=0 load=idle] > 1us", "expected ',' or ']'"),
        (
            "rtt_p50[band=0, load=idle] > 1us and more",
            "unexpected text",
        ),
        ("", "expected a figure"),
    ];
    for (check, needle) in cases {
        if needle.is_empty() {
            let c = parse(check).unwrap();
            resolve(&c, &design(), &one_size).unwrap();
            continue;
        }
        let e = error(check);
        assert!(e.contains(needle), "{check}: {e}");
    }
}

#[test]
fn no_text_makes_it_panic() {
    for t in [
        "[",
        "]]",
        "a[",
        "a[b",
        "a[b=",
        "a[b=\"",
        "1e",
        "1e+",
        "1..",
        "x in",
        "x in 1",
        "x in 1..",
        "x within",
        "x within 5",
        "x within 5%",
        "x within 5% of",
        "µ",
        "×",
        "1 ×",
        "a / ",
        "∞ > 1",
        "x[size=0k] > 1",
        "x[size=1..3:+1] > 1",
        "1e999 > x",
    ] {
        let _ = parse(t).map(|c| resolve(&c, &design(), &one_size));
    }
}
