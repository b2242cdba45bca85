//! A cell's figure over its repetitions: the median, the mean beside it (the seeds report
//! averages), min–max, and a distribution-free confidence interval of the median from order
//! statistics — and whether two cells differ by more than that spread (an effect).

use serde::{Deserialize, Serialize};

/// The confidence an interval of the median aims at.
pub const CONFIDENCE: f64 = 0.95;

/// One figure of one cell over its repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Repetitions with a value.
    pub n: u32,
    /// Median over the repetitions.
    pub median: f64,
    /// Mean over the repetitions.
    pub mean: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Lower end of the interval of the median.
    pub lo: f64,
    /// Upper end of the interval of the median.
    pub hi: f64,
    /// The interval's coverage: at least [`CONFIDENCE`] when the repetitions allow it (6 or
    /// more), else min–max's own (5: 0.94, 3: 0.75); 0 for one repetition.
    pub confidence: f64,
}

impl Spread {
    /// True when the intervals of `self` and `other` do not overlap: a difference larger
    /// than the spread. One repetition has no spread, so it never makes an effect.
    pub fn differs_from(&self, other: &Spread) -> bool {
        self.n > 1 && other.n > 1 && (self.lo > other.hi || other.lo > self.hi)
    }
}

/// The spread of `values` (non-finite values are left out); `None` when none is left.
pub fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let (lo, hi, confidence) = median_interval(&v);
    Some(Spread {
        n: n as u32,
        median,
        mean: v.iter().sum::<f64>() / n as f64,
        min: v[0],
        max: v[n - 1],
        lo,
        hi,
        confidence,
    })
}

/// The order-statistic interval of the median of sorted values: [x(k), x(n+1−k)] for the
/// largest k whose coverage 1 − 2·P(Binomial(n, ½) ≤ k−1) is at least [`CONFIDENCE`]; with
/// too few values for that, min–max and its own coverage.
fn median_interval(sorted: &[f64]) -> (f64, f64, f64) {
    let n = sorted.len();
    if n == 1 {
        return (sorted[0], sorted[0], 0.0);
    }
    // P(B ≤ i) for B ~ Binomial(n, 1/2), by the terms' ratio (n is at most a few thousand;
    // past 1000 the first term underflows, so cap the n used for the coverage).
    let m = n.min(1000);
    let mut term = 0.5f64.powi(m as i32);
    let mut cdf = Vec::with_capacity(m / 2 + 1);
    let mut acc = 0.0;
    for i in 0..=m / 2 {
        acc += term;
        cdf.push(acc);
        term *= (m - i) as f64 / (i + 1) as f64;
    }
    let coverage = |k: usize| 1.0 - 2.0 * if k == 0 { 0.0 } else { cdf[k - 1] };
    let mut k = 1;
    while k < m / 2 && coverage(k + 1) >= CONFIDENCE {
        k += 1;
    }
    // Scale k back to n when n was capped (a normal approximation would do as well).
    let k = if m == n { k } else { k * n / m };
    let k = k.clamp(1, n.div_ceil(2));
    (
        sorted[k - 1],
        sorted[n - k],
        coverage(k.min(m / 2)).max(0.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_repetitions_give_min_to_max_at_94_percent() {
        let s = spread(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (s.n, s.median, s.mean, s.min, s.max),
            (5, 3.0, 3.0, 1.0, 5.0)
        );
        assert_eq!((s.lo, s.hi), (1.0, 5.0));
        assert!((s.confidence - 0.9375).abs() < 1e-12, "{s:?}");
    }

    #[test]
    fn more_repetitions_narrow_the_interval() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        let s = spread(&v).unwrap();
        assert_eq!(s.median, 10.5);
        // n = 20: [x(6), x(15)] covers 95.9%.
        assert_eq!((s.lo, s.hi), (6.0, 15.0));
        assert!(s.confidence >= CONFIDENCE && s.confidence < 0.97, "{s:?}");
    }

    #[test]
    fn one_value_has_no_spread_and_nan_is_left_out() {
        let s = spread(&[f64::NAN, 7.0]).unwrap();
        assert_eq!((s.n, s.lo, s.hi, s.confidence), (1, 7.0, 7.0, 0.0));
        assert!(spread(&[f64::INFINITY]).is_none());
        let a = spread(&[1.0, 2.0, 3.0]).unwrap();
        let b = spread(&[3.5, 4.0, 5.0]).unwrap();
        assert!(a.differs_from(&b) && b.differs_from(&a));
        assert!(!a.differs_from(&spread(&[2.5, 3.0, 9.0]).unwrap()));
        assert!(!s.differs_from(&b), "one repetition makes no effect");
    }
}
