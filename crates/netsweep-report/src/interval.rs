//! Each exported figure's 95 % interval as bounds (issue 39 item 7): a mean's (throughput,
//! latency) from its trials, and a loss ratio's from its counts — the Wilson score interval of
//! a binomial proportion, which stays inside [0, 1] and is not empty at 0 losses (with
//! `sent` datagrams and none lost the upper bound is about 3.84 / `sent`, where the normal
//! approximation would claim exactly 0). It assumes independent losses; bursty loss makes the
//! true interval wider.

/// z for a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// `mean ± half`, as (lower, upper), the lower bound cut at 0 (every figure exported is a
/// rate or a time, never negative: a wide interval of a noisy point would otherwise claim one);
/// None when no interval was measured.
pub fn bounds(mean: f64, half: Option<f64>) -> Option<(f64, f64)> {
    half.filter(|h| h.is_finite())
        .map(|h| ((mean - h).max(0.0), mean + h))
}

/// The Wilson score 95 % interval of `lost` ÷ `sent`; None with nothing sent.
pub fn loss_wilson95(lost: u64, sent: u64) -> Option<(f64, f64)> {
    if sent == 0 {
        return None;
    }
    let n = sent as f64;
    let p = (lost.min(sent)) as f64 / n;
    let z2 = Z95 * Z95;
    let d = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / d;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / d;
    // At p = 0 (or 1) a bound is exactly 0 (or 1): rounding would leave 1e-19.
    let lo = if lost == 0 {
        0.0
    } else {
        (centre - half).max(0.0)
    };
    let hi = if lost >= sent {
        1.0
    } else {
        (centre + half).min(1.0)
    };
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_bounds_match_the_textbook_and_are_not_empty_at_zero() {
        // 10 of 100: Wilson 95 % is [0.0552, 0.1744] (Newcombe 1998, method 3).
        let (lo, hi) = loss_wilson95(10, 100).unwrap();
        assert!(
            (lo - 0.0552).abs() < 5e-4 && (hi - 0.1744).abs() < 5e-4,
            "{lo} {hi}"
        );
        let (lo, hi) = loss_wilson95(0, 1000).unwrap();
        assert_eq!(lo, 0.0);
        assert!(hi > 0.003 && hi < 0.004, "{hi}");
        let (lo, hi) = loss_wilson95(1000, 1000).unwrap();
        assert!(lo > 0.996 && hi == 1.0);
        assert_eq!(loss_wilson95(0, 0), None);
        assert_eq!(bounds(10.0, Some(2.0)), Some((8.0, 12.0)));
        assert_eq!(bounds(10.0, None), None);
        assert_eq!(bounds(1.0, Some(1.5)), Some((0.0, 2.5)), "never below 0");
    }
}
