//! Unit tests of the detector on synthetic sweeps: dips, cliffs, unstable bands, refinement.

use super::*;

/// A clean pingpong-like curve: throughput = size / (lat0 + size/bw), with ±1% CIs and
/// deterministic ±2% wiggle.
fn clean(sizes: &[u64]) -> Vec<SeriesPoint> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let t = s as f64 * 8.0 / (20_000.0 + s as f64 * 8.0 / 30_000.0);
            let wiggle = 1.0 + 0.02 * ((i * 7919 % 13) as f64 / 6.0 - 1.0);
            SeriesPoint {
                size: s,
                mean: t * wiggle,
                ci95: t * 0.01,
                trials: 5,
                placement: PlacementClass::Same,
            }
        })
        .collect()
}

fn geometric(from: u64, n: usize, ratio: f64) -> Vec<u64> {
    (0..n)
        .map(|i| (from as f64 * ratio.powi(i as i32)).round() as u64)
        .collect()
}

fn kinds(v: &[Anomaly]) -> Vec<AnomalyKind> {
    v.iter().map(|a| a.kind).collect()
}

#[test]
fn clean_curves_have_nothing() {
    for sizes in [
        geometric(1, 40, 1.5),
        geometric(1024, 60, 1.1),
        (1..=80).map(|i| i * 512).collect(),
    ] {
        let a = detect_series(&clean(&sizes), &DetectConfig::default());
        assert!(a.is_empty(), "{a:?}");
    }
}

#[test]
fn a_chasm_of_3_to_10_points_is_one_dip_with_its_range() {
    let sizes: Vec<u64> = (1..=60).map(|i| 40_000 + i * 512).collect();
    for width in 3..=10 {
        for depth in [0.5, 0.1, 0.01] {
            let mut s = clean(&sizes);
            let start = 25;
            for p in &mut s[start..start + width] {
                p.mean *= depth;
                p.ci95 *= depth;
            }
            let a = detect_series(&s, &DetectConfig::default());
            assert_eq!(kinds(&a), vec![AnomalyKind::Dip], "width {width}: {a:?}");
            assert_eq!(a[0].from_size, sizes[start], "width {width}");
            assert_eq!(a[0].to_size, sizes[start + width - 1], "width {width}");
            assert!((a[0].magnitude - (1.0 - depth)).abs() < 0.05, "{a:?}");
            assert!(a[0].confidence >= 0.95);
            assert_eq!(a[0].points as usize, width);
        }
    }
}

#[test]
fn a_chasm_with_a_lone_high_point_inside_stays_one_dip() {
    let sizes: Vec<u64> = (1..=60).map(|i| 40_000 + i * 512).collect();
    let mut s = clean(&sizes);
    for (i, p) in s[20..30].iter_mut().enumerate() {
        if i != 5 {
            p.mean *= 0.05;
        }
    }
    let a = detect_series(&s, &DetectConfig::default());
    assert_eq!(kinds(&a), vec![AnomalyKind::Dip], "{a:?}");
    assert_eq!((a[0].from_size, a[0].to_size), (sizes[20], sizes[29]));
}

#[test]
fn a_coarse_dip_says_where_to_sweep() {
    let sizes = geometric(1, 30, 2.0);
    let mut s = clean(&sizes);
    s[20].mean *= 0.2;
    s[21].mean *= 0.2;
    let a = detect_series(&s, &DetectConfig::default());
    assert_eq!(kinds(&a), vec![AnomalyKind::Dip], "{a:?}");
    let r = a[0].refine.unwrap();
    assert_eq!((r.from, r.to), (sizes[19], sizes[22]));
    assert!(a[0].hint.as_deref().unwrap().contains(&r.spec()));
    let sizes = r.sizes();
    assert!(sizes.len() >= 32 && sizes.len() <= 66, "{}", sizes.len());
}

#[test]
fn a_step_is_a_cliff_at_the_right_size() {
    let sizes: Vec<u64> = (1..=50).map(|i| i * 100).collect();
    for drop in [0.4, 0.7] {
        let mut s = clean(&sizes);
        for p in &mut s[30..] {
            p.mean *= 1.0 - drop;
            p.ci95 *= 1.0 - drop;
        }
        let a = detect_series(&s, &DetectConfig::default());
        assert_eq!(kinds(&a), vec![AnomalyKind::Cliff], "{a:?}");
        assert_eq!((a[0].from_size, a[0].to_size), (sizes[29], sizes[30]));
        assert!((a[0].magnitude - drop).abs() < 0.06, "{a:?}");
    }
}

#[test]
fn small_steps_and_dips_are_not_reported() {
    let sizes: Vec<u64> = (1..=50).map(|i| i * 100).collect();
    let mut s = clean(&sizes);
    for p in &mut s[30..] {
        p.mean *= 0.85;
    }
    for p in &mut s[10..14] {
        p.mean *= 0.85;
    }
    assert!(detect_series(&s, &DetectConfig::default()).is_empty());
}

#[test]
fn a_noisy_band_is_unstable() {
    let sizes: Vec<u64> = (1..=40).map(|i| i * 1000).collect();
    let mut s = clean(&sizes);
    for p in &mut s[15..20] {
        p.ci95 = p.mean * 0.3;
    }
    let a = detect_series(&s, &DetectConfig::default());
    assert_eq!(kinds(&a), vec![AnomalyKind::Unstable], "{a:?}");
    assert_eq!((a[0].from_size, a[0].to_size), (sizes[15], sizes[19]));
    assert!((a[0].magnitude - 0.3).abs() < 1e-9);
}

#[test]
fn a_wide_ci_does_not_make_a_dip() {
    let sizes: Vec<u64> = (1..=40).map(|i| i * 1000).collect();
    let mut s = clean(&sizes);
    for p in &mut s[15..18] {
        p.mean *= 0.6;
        p.ci95 = p.mean * 0.9;
    }
    assert!(!kinds(&detect_series(&s, &DetectConfig::default())).contains(&AnomalyKind::Dip));
}

#[test]
fn placement_changes_are_not_anomalies() {
    let sizes: Vec<u64> = (1..=40).map(|i| i * 1000).collect();
    let mut s = clean(&sizes);
    for p in &mut s[15..18] {
        p.mean *= 0.12;
        p.placement = PlacementClass::Different;
    }
    let a = detect_series(&s, &DetectConfig::default());
    assert!(a.is_empty(), "{a:?}");
}

#[test]
fn degenerate_input_never_panics() {
    let cfg = DetectConfig::default();
    assert!(detect_series(&[], &cfg).is_empty());
    let one = clean(&[1]);
    assert!(detect_series(&one, &cfg).is_empty());
    let mut odd = clean(&geometric(1, 20, 2.0));
    odd[3].mean = 0.0;
    odd[4].mean = f64::NAN;
    odd[5].ci95 = f64::INFINITY;
    odd[6].trials = 0;
    let _ = detect_series(&odd, &cfg);
    let same = vec![odd[0]; 10];
    let _ = detect_series(&same, &cfg);
}

#[test]
fn refine_spec_and_sizes() {
    let r = Refine {
        from: 59 * 1024,
        to: 72 * 1024,
        step: 256,
    };
    assert_eq!(r.spec(), "59k..72k:+256");
    assert_eq!(r.sizes().len(), 53);
    let a = Anomaly {
        kind: AnomalyKind::Dip,
        from_size: 0,
        to_size: 0,
        magnitude: 0.5,
        confidence: 1.0,
        points: 1,
        metric: "throughput".into(),
        detail: String::new(),
        hint: None,
        refine: Some(r),
    };
    let v = refine_sizes(&[a], &[59 * 1024]);
    assert_eq!(v.len(), 52);
    assert!(v.windows(2).all(|w| w[0] < w[1]));
    assert!((phi(1.959_964) - 0.975).abs() < 1e-6);
}

/// `--refine` measures a dip finely where its edges lie, not across its measured inside (seed
/// 004's injected band: coarse points 1024 and 1152 inside, 896 and 1280 outside); a cliff's
/// one gap is measured whole.
#[test]
fn refine_measures_a_dips_edges_not_its_inside() {
    let coarse: Vec<u64> = (1..=16).map(|i| i * 128).collect();
    let anomaly = |kind, from_size, to_size, from, to, step| Anomaly {
        kind,
        from_size,
        to_size,
        magnitude: 0.97,
        confidence: 1.0,
        points: 2,
        metric: "throughput".into(),
        detail: String::new(),
        hint: None,
        refine: Some(Refine { from, to, step }),
    };
    let dip = anomaly(AnomalyKind::Dip, 1024, 1152, 896, 1280, 8);
    let v = refine_sizes(&[dip], &coarse);
    let left: Vec<u64> = (113..=127).map(|i| i * 8).collect(); // 904..=1016
    let right: Vec<u64> = (145..=159).map(|i| i * 8).collect(); // 1160..=1272
    assert_eq!(v, [left, right].concat());
    let cliff = anomaly(AnomalyKind::Cliff, 1152, 1280, 1152, 1280, 4);
    let v = refine_sizes(&[cliff], &coarse);
    assert_eq!(v, (289..=319).map(|i| i * 4).collect::<Vec<u64>>()); // 1156..=1276
}
