//! Tests of the statistics: histograms, Welford, Student t, Wilson and Welch, on values.

use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn welford_known_sample() {
    let mut w = Welford::new();
    for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
        w.push(x);
    }
    assert_eq!(w.count(), 8);
    assert!(close(w.mean(), 5.0, 1e-12));
    // Sum of squared deviations is 32: sample variance 32/7, population 32/8 = 4.
    assert!(close(w.variance(), 32.0 / 7.0, 1e-12));
    assert!(close(w.stddev(), 2.138, 5e-4));
    assert!(close((w.variance() * 7.0 / 8.0).sqrt(), 2.0, 1e-12));
}

#[test]
fn welford_small() {
    let mut w = Welford::new();
    assert_eq!((w.count(), w.mean(), w.variance()), (0, 0.0, 0.0));
    w.push(3.0);
    assert_eq!((w.count(), w.mean(), w.variance()), (1, 3.0, 0.0));
}

#[test]
fn t_table_matches_standard_values() {
    for (df, t) in [
        (1, 12.706),
        (2, 4.303),
        (5, 2.571),
        (10, 2.228),
        (30, 2.042),
        (60, 2.000),
        (120, 1.980),
    ] {
        let got = student_t_975(df);
        assert!(close(got, t, 5e-4), "df {df}: {got} vs {t}");
    }
    // 31 continues smoothly from 30; large df tends to z.
    assert!(student_t_975(31) < student_t_975(30));
    assert!(close(student_t_975(31), 2.0395, 1e-4));
    assert!(close(student_t_975(u64::MAX), 1.95996, 1e-5));
    assert!(student_t_975(0).is_infinite());
}

#[test]
fn ci95_of_three() {
    let ci = ci95(&[10.0, 12.0, 14.0]).unwrap();
    // s = 2, t(2) = 4.303: half-width 4.303 * 2 / sqrt(3) = 4.969
    // (4.968 with the unrounded t(2) = 4.3027).
    assert!(close(ci.mean, 12.0, 1e-12));
    assert!(close(ci.half_width, 4.969, 1e-3));
    assert!(close(
        ci.half_width,
        4.302_652_730 * 2.0 / 3f64.sqrt(),
        1e-9
    ));
    assert!(close(ci.relative, ci.half_width / 12.0, 1e-12));
    assert_eq!(ci.n, 3);
}

#[test]
fn ci95_edge_cases() {
    assert!(ci95(&[]).is_none());
    assert!(ci95(&[1.0]).is_none());
    assert!(ci95(&[1.0, f64::NAN]).is_none());
    let ci = ci95(&[-1.0, 1.0]).unwrap();
    assert!(ci.relative.is_infinite());
    // Infinity goes to JSON as null and comes back as infinity.
    let json = serde_json::to_string(&ci).unwrap();
    let back: ConfidenceInterval = serde_json::from_str(&json).unwrap();
    assert_eq!(back, ci);
}

#[test]
fn histogram_of_one_to_thousand_microseconds() {
    let mut h = LatencyHistogram::new();
    for us in 1..=1000u64 {
        h.record(us * 1000);
    }
    let s = Summary::from_histogram(&h);
    assert_eq!(s.count, 1000);
    // 3 significant digits: values are within 0.1% of the true ones.
    assert_eq!(
        RELATIVE_RESOLUTION,
        10f64.powi(-i32::from(SIGNIFICANT_DIGITS))
    );
    let within = |got: f64, want: f64| close(got, want, want * RELATIVE_RESOLUTION);
    assert!(within(s.min, 1_000.0), "min {}", s.min);
    assert!(within(s.max, 1_000_000.0), "max {}", s.max);
    assert!(within(s.p50, 500_000.0), "p50 {}", s.p50);
    assert!(within(s.p90, 900_000.0), "p90 {}", s.p90);
    assert!(within(s.p99, 990_000.0), "p99 {}", s.p99);
    assert!(within(s.p999, 999_000.0), "p999 {}", s.p999);
    assert!(within(s.mean, 500_500.0), "mean {}", s.mean);
    // Population stddev of 1..=1000 µs: sqrt((1000² - 1) / 12) µs = 288.675 µs.
    assert!(within(s.stddev, 288_675.0), "stddev {}", s.stddev);
}

#[test]
fn histogram_clamps_reset_merge() {
    let mut h = LatencyHistogram::new();
    assert_eq!((h.min(), h.max(), h.value_at_quantile(0.5)), (0, 0, 0));
    h.record(0);
    h.record(u64::MAX);
    h.record(500);
    assert_eq!((h.count(), h.clamped()), (3, 2));
    assert_eq!(h.min(), 1);
    assert!(h.max() >= HIGHEST_NS);
    assert_eq!(h.value_at_quantile(f64::NAN), 1);
    assert_eq!(h.value_at_quantile(-3.0), 1);

    let mut other = LatencyHistogram::new();
    other.record(700);
    h.merge(&other).unwrap();
    assert_eq!((h.count(), h.clamped()), (4, 2));

    h.reset();
    assert_eq!((h.count(), h.clamped()), (0, 0));
    let s = Summary::from(&h);
    assert_eq!((s.count, s.min, s.max, s.mean), (0, 0.0, 0.0, 0.0));
}

#[test]
fn welch_by_hand() {
    // a = [1,2,3,4,5]: mean 3, s² 2.5; b = [2,4,6,8,10]: mean 6, s² 10.
    // se² = 2.5/5 + 10/5 = 2.5, t = -3 / sqrt(2.5) = -1.8974,
    // df = 2.5² / (0.5²/4 + 2²/4) = 6.25 / 1.0625 = 5.8824; t(5) = 2.571 > 1.897.
    let w = |xs: &[f64]| {
        let mut w = Welford::new();
        xs.iter().for_each(|&x| w.push(x));
        SampleStats::from(&w)
    };
    let a = w(&[1.0, 2.0, 3.0, 4.0, 5.0]);
    let b = w(&[2.0, 4.0, 6.0, 8.0, 10.0]);
    let r = welch_t_test(&a, &b).unwrap();
    assert!(close(r.t, -1.8974, 1e-4));
    assert!(close(r.df, 5.8824, 1e-4));
    assert!(!r.significant_at_95);

    // c = [11..=15]: mean 13, s² 2.5. se² = 0.5 + 0.5 = 1, t = -10,
    // df = 1 / (0.25/4 + 0.25/4) = 8; t(8) = 2.306 < 10.
    let c = w(&[11.0, 12.0, 13.0, 14.0, 15.0]);
    let r = welch_t_test(&a, &c).unwrap();
    assert!(close(r.t, -10.0, 1e-9));
    assert!(close(r.df, 8.0, 1e-9));
    assert!(r.significant_at_95);
}

#[test]
fn welch_edge_cases() {
    let s = |mean, variance, n| SampleStats { mean, variance, n };
    assert!(welch_t_test(&s(1.0, 1.0, 1), &s(1.0, 1.0, 5)).is_none());
    assert!(welch_t_test(&s(f64::NAN, 1.0, 5), &s(1.0, 1.0, 5)).is_none());
    assert!(welch_t_test(&s(1.0, -1.0, 5), &s(1.0, 1.0, 5)).is_none());
    let same = welch_t_test(&s(2.0, 0.0, 3), &s(2.0, 0.0, 3)).unwrap();
    assert_eq!((same.t, same.df, same.significant_at_95), (0.0, 4.0, false));
    let apart = welch_t_test(&s(2.0, 0.0, 3), &s(3.0, 0.0, 3)).unwrap();
    assert!(apart.t.is_infinite() && apart.significant_at_95);
}

#[test]
fn sample_stats_from_summary() {
    let summary = Summary {
        count: 8,
        min: 2.0,
        mean: 5.0,
        p50: 4.5,
        p90: 9.0,
        p99: 9.0,
        p999: 9.0,
        max: 9.0,
        stddev: 2.0,
    };
    let st = SampleStats::from(&summary);
    assert!(close(st.variance, 32.0 / 7.0, 1e-12));
}

#[test]
fn wilson_bounds_match_the_textbook_and_are_not_empty_at_zero() {
    // 10 of 100: Wilson 95% is [0.0552, 0.1744] (Newcombe 1998, method 3).
    let (lo, hi) = wilson95(10, 100).unwrap();
    assert!(
        close(lo, 0.0552, 5e-4) && close(hi, 0.1744, 5e-4),
        "{lo} {hi}"
    );
    let (lo, hi) = wilson95(0, 1000).unwrap();
    assert_eq!(lo, 0.0);
    assert!(hi > 0.003 && hi < 0.004, "{hi}");
    let (lo, hi) = wilson95(1000, 1000).unwrap();
    assert!(lo > 0.996 && hi == 1.0);
    assert_eq!(wilson95(0, 0), None);
}
