//! Tests of the live text table: notes said once, tails shown from enough samples, the
//! summary of rate and empty runs.

use super::*;

#[test]
fn a_note_under_the_table_names_its_label_once() {
    let mut run: RunResult =
        serde_json::from_str(include_str!("../../../tests/golden/tcp-pingpong.json")).unwrap();
    run.points.truncate(2);
    run.points.iter_mut().for_each(|p| p.notes.clear());
    run.points[0].notes = vec!["memory: opening 4 flows took 12 KiB".into()];
    run.points[1].notes = vec!["a note without a colon".into()];
    let s = notes(&run);
    let (a, b) = (
        units::size(run.points[0].size),
        units::size(run.points[1].size),
    );
    assert_eq!(
        s,
        format!("* memory at {a}: opening 4 flows took 12 KiB\n* a note without a colon at {b}\n")
    );
}

#[test]
fn a_rate_runs_summary_latency_is_its_round_trip_and_says_so() {
    let mut run: RunResult =
        serde_json::from_str(include_str!("../../../tests/golden/tcp-pingpong.json")).unwrap();
    run.points.truncate(1);
    let l = run.points[0].latency.as_mut().unwrap();
    (l.rtt_ns.p50, l.half_rtt_ns.p50) = (27_900.0, 13_950.0);
    run.spec.pattern = Pattern::Rate;
    run.summarise(1);
    let s = summary(&run);
    assert!(
        s.contains("smallest latency 27.9 µs (round trip, p50)"),
        "{s}"
    );
    run.spec.pattern = Pattern::Pingpong;
    run.summarise(1);
    let s = summary(&run);
    assert!(s.contains("smallest latency 13.9"), "{s}");
    assert!(s.contains("(RTT/2, p50)"), "{s}");
}

#[test]
fn a_run_without_points_and_a_note_said_twice_make_no_junk() {
    let mut run: RunResult =
        serde_json::from_str(include_str!("../../../tests/golden/tcp-pingpong.json")).unwrap();
    let pts = std::mem::take(&mut run.points);
    run.summarise(2_000_000_000);
    let s = summary(&run);
    assert!(s.starts_with("no points measured · 2.0 s"), "{s}");
    assert!(!s.contains("peak"), "{s}");
    // Bidir's two directions each note an overflow at the same size.
    run.points = pts;
    run.points.truncate(1);
    let o = "receive buffer overflowed: the server's socket dropped 3 datagrams".to_string();
    run.points[0].notes = vec![o.clone(), o];
    let row = row(&run.spec, &run.points[0]);
    assert_eq!(row.matches("receive buffer overflowed").count(), 1, "{row}");
    let n = notes(&run);
    assert!(n.contains("* receive buffer overflowed at "), "{n}");
    assert!(!n.contains("2 sizes"), "{n}");
}

#[test]
fn a_tail_percentile_is_shown_once_a_sample_lies_above_it() {
    assert_eq!((tail_needs(0.99), tail_needs(0.999)), (100, 1000));
    assert_eq!(tail_us(99, 0.99, 25_000.0), "–");
    assert_eq!(tail_us(100, 0.99, 25_000.0), "25.0");
    assert_eq!(tail_us(999, 0.999, 1.5e6), "–");
    assert_eq!(tail_us(1000, 0.999, 1.5e6), "1500");
}

#[test]
fn refused_sends_get_a_note_per_errno() {
    assert_eq!(refused_note("client", &SendErrors::default()), None);
    let e = SendErrors {
        eperm: 12,
        enobufs: 3,
        ..Default::default()
    };
    assert_eq!(
        refused_note("client", &e).unwrap(),
        "client stack refused 15 sends (EPERM 12, ENOBUFS 3): not sent, not counted lost"
    );
}

/// Issue 39 items 5 and 6: what the measurements show about the directions is said after the
/// rows — live, where the header went out before any point, and in a saved run's rendering,
/// once — with the largest timed point's figures.
#[test]
fn measured_direction_warnings_follow_the_rows_once_with_the_figures() {
    use netsweep_model::symmetry::{Delay, DirectionRate, Directions, OneWay};
    let mut run: RunResult =
        serde_json::from_str(include_str!("../../../tests/golden/tcp-pingpong.json")).unwrap();
    run.points.truncate(2);
    run.warnings = vec!["from the start".into()];
    let live_header = header(&run);
    for p in &mut run.points {
        p.throughput_mbps.mean = 90.0;
        p.directions = Some(Directions {
            to_server: Some(DirectionRate {
                mbps: 45.0,
                messages: 9,
            }),
            to_client: None,
            one_way: Some(OneWay {
                to_server_ns: Delay {
                    min: 10e6,
                    mean: 10.2e6,
                },
                to_client_ns: Delay {
                    min: 1e6,
                    mean: 1.1e6,
                },
                messages: 9,
                clock_offset_ns: 4.5e6,
                clock_offset_bound_ns: 5.5e6,
            }),
        });
    }
    netsweep_model::symmetry::annotate(&mut run);
    assert_eq!(run.warnings.len(), 3, "{:?}", run.warnings);
    let s = summary(&run);
    assert!(s.contains("warning: the two directions differ"), "{s}");
    assert!(!s.contains("from the start"), "{s}");
    let size = units::size(run.points[1].size);
    assert!(
        s.contains(&format!(
            "directions, as each receiver timed them (2 of 2 sizes; all in the results): at \
             {size} client→server 45.0 Mbit/s, server→client not timed"
        )),
        "{s}"
    );
    assert!(
        s.contains("client→server 10000 / 10200, server→client 1000 / 1100"),
        "{s}"
    );
    assert!(live_header.contains("warning: from the start"));
    let saved = render(&run);
    assert_eq!(
        saved.matches("the two directions differ").count(),
        1,
        "{saved}"
    );
    assert_eq!(saved.matches("from the start").count(), 1, "{saved}");
}
