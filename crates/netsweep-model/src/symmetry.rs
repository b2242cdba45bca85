//! Whether a round trip's two directions differ — when they do, a pingpong's RTT/2 is not a
//! one-way time and its throughput (size ÷ RTT/2) is neither direction's rate (NPtcp reported
//! 182 Mbit/s across a link shaped to 100 Mbit/s one way). Found on any path from each
//! direction's delivery rate as its receiver timed it ([`Directions`]), and read from the lab
//! description a run records (`--lab-meta`: links with their shapers, `toward` a host, `rate`
//! in bit/s).

pub use crate::directions::{Delay, DirectionRate, Directions, OneWay};
use crate::results::RunResult;
use serde_json::Value;

/// By how much size ÷ (RTT/2) may exceed the slower direction's delivery rate before the run
/// says the directions differ.
pub const ASYMMETRY_MARGIN: f64 = 0.10;

/// Warns, on any path, when a pingpong's throughput (size ÷ RTT/2) exceeds the slower timed
/// direction's delivery rate by more than [`ASYMMETRY_MARGIN`]: that direction took more than
/// half the round trip, so the two differ and RTT/2 is neither one's time. One timed
/// direction suffices (a fast one often arrives in one receive and cannot be timed).
pub fn annotate(run: &mut RunResult) {
    let w = measured_warnings(run);
    run.warnings.extend(w);
}

/// The warnings [`annotate`] adds, from the run's measured points: what a live table says
/// after its rows (and a saved run's rendering there too, not in its header).
pub fn measured_warnings(run: &RunResult) -> Vec<String> {
    rates_warning(run)
        .into_iter()
        .chain(one_way_warning(run))
        .collect()
}

/// Says what `--one-way` delays rest on: the clocks of the two ends. Nothing when both ran
/// on one kernel (the same boot id: one clock); otherwise how far the round trips let the
/// clocks be apart, or that they disagree when a delay read negative.
fn one_way_warning(run: &RunResult) -> Option<String> {
    let timed: Vec<OneWay> = run
        .points
        .iter()
        .filter_map(|p| p.directions?.one_way)
        .collect();
    let best = timed
        .iter()
        .min_by(|a, b| a.clock_offset_bound_ns.total_cmp(&b.clock_offset_bound_ns))?;
    let least = timed
        .iter()
        .map(|o| o.to_server_ns.min.min(o.to_client_ns.min))
        .fold(f64::INFINITY, f64::min);
    let one_clock = !run.client.boot_id.is_empty() && run.client.boot_id == run.server.boot_id;
    let us = |ns: f64| ns / 1e3;
    if least < 0.0 {
        Some(format!(
            "the two ends' clocks disagree: a one-way delay read {:.1} µs, so they are at \
             least that far apart and the one-way delays are not the path's; synchronise the \
             clocks (NTP, PTP) or rely on the round trips",
            us(least)
        ))
    } else if !one_clock {
        Some(format!(
            "one-way delays assume the two ends' clocks agree (NTP, PTP): the round trips put \
             the server's clock {:+.1} ± {:.1} µs from the client's, so an asymmetry under \
             {:.1} µs cannot be told from a clock offset",
            us(best.clock_offset_ns),
            us(best.clock_offset_bound_ns),
            us(2.0 * best.clock_offset_bound_ns)
        ))
    } else {
        None
    }
}

/// The delivery rates' warning (see [`annotate`]).
fn rates_warning(run: &RunResult) -> Option<String> {
    let over: Vec<_> = run
        .points
        .iter()
        .filter_map(|p| {
            let d = p.directions?;
            let (up, down) = (d.to_server.map(|r| r.mbps), d.to_client.map(|r| r.mbps));
            // A direction that takes more than half the round trip: the other one took less.
            let slow = up.into_iter().chain(down).reduce(f64::min)?;
            let rtt_rate = p.throughput_mbps.mean;
            (rtt_rate > slow * (1.0 + ASYMMETRY_MARGIN)).then_some((p.size, rtt_rate, up, down))
        })
        .collect();
    let (first, &(size, rtt_rate, up, down)) = (over.first()?, over.last()?);
    let sizes = if over.len() == 1 {
        shown_size(size)
    } else {
        format!("{}–{}", shown_size(first.0), shown_size(size))
    };
    let shown = |r: Option<f64>| r.map_or("not timed".into(), |r| format!("{r:.1} Mbit/s"));
    Some(format!(
        "the two directions differ: size ÷ (RTT/2) exceeds the slower direction's delivery \
         rate by more than {:.0}% at {} of {} sizes ({sizes}; at {}: {rtt_rate:.1} Mbit/s, \
         client→server {}, server→client {} as each receiver timed it), so RTT/2 is not a \
         one-way time and pingpong throughput is neither direction's rate",
        ASYMMETRY_MARGIN * 100.0,
        over.len(),
        run.points.len(),
        shown_size(size),
        shown(up),
        shown(down),
    ))
}

fn shown_size(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// One description per link whose directions are shaped differently, e.g.
/// `link client-server: client→server 100 Mbit/s, server→client unshaped`.
pub fn lab_asymmetries(lab: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for link in lab["links"].as_array().into_iter().flatten() {
        let (Some(a), Some(b)) = (link["a"]["host"].as_str(), link["b"]["host"].as_str()) else {
            continue;
        };
        let rate_toward = |to: &str| -> Option<u64> {
            link["shapers"]
                .as_array()?
                .iter()
                .find(|s| s["toward"].as_str() == Some(to))
                .and_then(|s| s["rate"].as_u64())
        };
        let (ab, ba) = (rate_toward(b), rate_toward(a));
        if ab != ba {
            let name = link["name"].as_str().unwrap_or("?");
            found.push(format!(
                "link {name}: {a}→{b} {}, {b}→{a} {}",
                shown(ab),
                shown(ba)
            ));
        }
    }
    found
}

fn shown(rate: Option<u64>) -> String {
    match rate {
        None => "unshaped".into(),
        Some(r) if r % 1_000_000 == 0 => format!("{} Mbit/s", r / 1_000_000),
        Some(r) => format!("{:.3} Mbit/s", r as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn link(shapers: Value) -> Value {
        json!({"links": [{"name": "c-s", "a": {"host": "c"}, "b": {"host": "s"}, "shapers": shapers}]})
    }

    #[test]
    fn one_way_and_unequal_shaping_are_found_equal_is_not() {
        let one_way = link(json!([{"toward": "s", "rate": 100_000_000}]));
        assert_eq!(
            lab_asymmetries(&one_way),
            ["link c-s: c→s 100 Mbit/s, s→c unshaped"]
        );
        let unequal = link(json!([
            {"toward": "s", "rate": 100_000_000},
            {"toward": "c", "rate": 2_500_000}
        ]));
        assert_eq!(
            lab_asymmetries(&unequal),
            ["link c-s: c→s 100 Mbit/s, s→c 2.500 Mbit/s"]
        );
        let equal = link(json!([
            {"toward": "s", "rate": 5_000_000},
            {"toward": "c", "rate": 5_000_000}
        ]));
        assert!(lab_asymmetries(&equal).is_empty());
        assert!(lab_asymmetries(&link(json!([]))).is_empty());
        assert!(lab_asymmetries(&json!({"anything": 1})).is_empty());
    }

    fn run(points: &[(u64, f64, Option<f64>, Option<f64>)]) -> RunResult {
        let mut r =
            crate::results::load(include_str!("../../../tests/data/udp-stream.json")).unwrap();
        let p0 = r.points[0].clone();
        r.points = points
            .iter()
            .map(|&(size, rtt_rate, up, down)| {
                let mut p = p0.clone();
                p.size = size;
                p.throughput_mbps.mean = rtt_rate;
                let rate = |m: Option<f64>| m.map(|mbps| DirectionRate { mbps, messages: 9 });
                p.directions = Some(Directions {
                    to_server: rate(up),
                    to_client: rate(down),
                    one_way: None,
                });
                p
            })
            .collect();
        r.warnings.clear();
        r
    }

    #[test]
    fn size_over_half_the_round_trip_beyond_the_slower_direction_warns_once() {
        // 47 Mbit/s one way, 900 the other: RTT/2 makes about 89; at 256 KiB and 1 MiB.
        let mut r = run(&[
            (65536, 40.0, None, Some(900.0)),
            (262144, 89.0, Some(45.0), Some(900.0)),
            (1 << 20, 89.9, Some(44.9), Some(910.0)),
        ]);
        annotate(&mut r);
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        let w = &r.warnings[0];
        assert!(
            w.contains("at 2 of 3 sizes (256 KiB–1 MiB; at 1 MiB: 89.9 Mbit/s"),
            "{w}"
        );
        assert!(
            w.contains("client→server 44.9 Mbit/s, server→client 910.0 Mbit/s"),
            "{w}"
        );
        // Within the margin (10%), either way round, or nothing timed: no warning.
        for pts in [
            [(1 << 20, 49.0, Some(45.0), Some(46.0))],
            [(1 << 20, 49.0, Some(900.0), Some(45.0))],
            [(1 << 20, 49.0, None, Some(45.0))],
            [(1 << 20, 89.0, None, None)],
        ] {
            let mut r = run(&pts);
            annotate(&mut r);
            assert!(r.warnings.is_empty(), "{pts:?}: {:?}", r.warnings);
        }
        // The slow direction alone timed (the fast one arrived in one receive): enough.
        let mut one = run(&[(1000, 89.0, Some(45.0), None)]);
        annotate(&mut one);
        let w = &one.warnings[0];
        assert!(w.contains("at 1 of 1 sizes (1000 B;"), "{w}");
        assert!(w.contains("server→client not timed"), "{w}");
    }

    #[test]
    fn one_way_delays_say_what_they_rest_on_unless_one_clock_served_both_ends() {
        let with = |up: f64, boots: (&str, &str)| {
            let mut r = run(&[(64, 1.0, None, None)]);
            let d = |min| Delay { min, mean: min };
            r.points[0].directions.as_mut().unwrap().one_way = Some(OneWay {
                to_server_ns: d(up),
                to_client_ns: d(1e6),
                messages: 10,
                clock_offset_ns: (up - 1e6) / 2.0,
                clock_offset_bound_ns: (up + 1e6) / 2.0,
            });
            r.client.boot_id = boots.0.into();
            r.server.boot_id = boots.1.into();
            annotate(&mut r);
            r.warnings
        };
        assert!(with(10e6, ("b1", "b1")).is_empty());
        let w = with(10e6, ("b1", "b2"));
        assert!(
            w[0].contains("+4500.0 ± 5500.0 µs") && w[0].contains("11000.0 µs"),
            "{w:?}"
        );
        // Withheld facts (no boot id) cannot show one clock either.
        assert_eq!(with(10e6, ("", "")).len(), 1);
        let w = with(-3e6, ("b1", "b1"));
        assert!(
            w[0].contains("clocks disagree") && w[0].contains("-3000.0 µs"),
            "{w:?}"
        );
    }
}
