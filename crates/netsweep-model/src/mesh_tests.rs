//! Tests of the mesh schedule, matrices and flags, on values.

use super::*;

fn sample() -> RunResult {
    crate::results::load(include_str!("../../../tests/data/tcp-pingpong.json")).unwrap()
}

/// A pair whose every point has throughput `mbps`.
fn pair(client: u32, server: u32, mbps: f64) -> PairResult {
    let mut r = sample();
    for p in &mut r.points {
        p.throughput_mbps.mean = mbps;
    }
    PairResult {
        round: 0,
        flow: Flow { client, server },
        result: Some(r),
        error: None,
    }
}

#[test]
fn pairs_meet_every_pair_once_and_no_rank_twice_in_a_round() {
    for n in 2..=9u32 {
        let rounds = schedule(Layout::Pairs, n);
        assert_eq!(
            rounds.len() as u32,
            if n % 2 == 0 { n - 1 } else { n },
            "n={n}"
        );
        let mut seen = Vec::new();
        for round in &rounds {
            let mut busy = Vec::new();
            for f in round {
                assert!(f.client < f.server && f.server < n, "{f:?}");
                for r in [f.client, f.server] {
                    assert!(!busy.contains(&r), "n={n}: rank {r} twice in {round:?}");
                    busy.push(r);
                }
                seen.push((f.client, f.server));
            }
            assert_eq!(round.len() as u32, n / 2, "n={n}: a full round");
        }
        seen.sort_unstable();
        let all: Vec<(u32, u32)> = (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .collect();
        assert_eq!(seen, all, "n={n}: every pair exactly once");
    }
}

#[test]
fn ring_incast_and_bisection_are_one_round_each() {
    let f = |c, s| Flow {
        client: c,
        server: s,
    };
    assert_eq!(
        schedule(Layout::Ring, 4),
        vec![vec![f(0, 1), f(1, 2), f(2, 3), f(3, 0)]]
    );
    assert_eq!(schedule(Layout::Incast, 3), vec![vec![f(1, 0), f(2, 0)]]);
    assert_eq!(schedule(Layout::Bisection, 4), vec![vec![f(0, 2), f(1, 3)]]);
    assert!(schedule(Layout::Pairs, 1).is_empty());
}

#[test]
fn matrices_put_each_pair_in_its_cell() {
    let pairs = [pair(0, 1, 100.0), pair(1, 2, 50.0)];
    let m = matrices(3, &pairs);
    let sizes: Vec<u64> = sample().points.iter().map(|p| p.size).collect();
    assert_eq!(m.len(), sizes.len());
    for sm in &m {
        assert_eq!(sm.throughput_mbps[0][1], Some(100.0));
        assert_eq!(sm.throughput_mbps[1][2], Some(50.0));
        assert_eq!(sm.throughput_mbps[1][0], None);
        assert!(sm.latency_us[0][1].is_some_and(|l| l > 0.0));
    }
}

#[test]
fn one_slow_link_flags_that_pair_only() {
    let mut pairs: Vec<PairResult> = schedule(Layout::Pairs, 4)
        .concat()
        .into_iter()
        .map(|f| pair(f.client, f.server, 1000.0 + f.client as f64))
        .collect();
    for p in &mut pairs {
        if (p.flow.client, p.flow.server) == (1, 3) {
            *p = pair(1, 3, 100.0);
        }
    }
    let flags = flag(4, &matrices(4, &pairs));
    assert_eq!(flags.len(), 1, "{flags:#?}");
    assert_eq!((flags[0].flow.client, flags[0].flow.server), (1, 3));
    assert_eq!(flags[0].what, "pair");
    assert_eq!(flags[0].sizes_flagged, flags[0].sizes_measured);
    assert!(flags[0].worst_ratio < 0.11);
}

#[test]
fn a_slow_host_is_flagged_as_a_host() {
    let pairs: Vec<PairResult> = schedule(Layout::Pairs, 4)
        .concat()
        .into_iter()
        .map(|f| {
            let slow = f.client == 2 || f.server == 2;
            pair(f.client, f.server, if slow { 80.0 } else { 1000.0 })
        })
        .collect();
    let flags = flag(4, &matrices(4, &pairs));
    let hosts: Vec<u32> = flags
        .iter()
        .filter(|f| f.what == "host")
        .map(|f| f.flow.client)
        .collect();
    assert_eq!(hosts, vec![2], "{flags:#?}");
    assert_eq!(flags.iter().filter(|f| f.what == "pair").count(), 3);
}

#[test]
fn equal_pairs_flag_nothing() {
    let pairs: Vec<PairResult> = schedule(Layout::Pairs, 6)
        .concat()
        .into_iter()
        .map(|f| pair(f.client, f.server, 900.0 + 10.0 * f.server as f64))
        .collect();
    assert!(flag(6, &matrices(6, &pairs)).is_empty());
}

#[test]
fn a_pair_at_forty_percent_is_noise_not_a_flag() {
    // Measured on one shared 2-CPU host: disjoint pairs differ by up to 2.7× with nothing wrong.
    let pairs: Vec<PairResult> = schedule(Layout::Pairs, 4)
        .concat()
        .into_iter()
        .map(|f| {
            let x = if (f.client, f.server) == (0, 2) {
                400.0
            } else {
                1000.0
            };
            pair(f.client, f.server, x)
        })
        .collect();
    assert!(flag(4, &matrices(4, &pairs)).is_empty());
}

#[test]
fn the_median_of_the_others_leaves_out_one_element() {
    let v = [1.0, 2.0, 3.0, 10.0];
    assert_eq!(median_without(&v, 0), Some(3.0));
    assert_eq!(median_without(&v, 3), Some(2.0));
    assert_eq!(median_without(&v, 1), Some(3.0));
    assert_eq!(median_without(&[1.0, 5.0, 9.0], 1), Some(5.0));
    assert_eq!(median_without(&[4.0], 0), None);
}
