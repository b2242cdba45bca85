//! The interval a comparison prints and decides on: the 95% interval of a ratio B ÷ A from
//! each side's mean, interval and count (Welch on the log scale).

use netsweep_model::stats::student_t_975;

/// The 95% interval of B ÷ A, with the statistic it was decided on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioInterval {
    /// Lower end of the interval of B ÷ A.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// ln(B ÷ A) over its standard error (infinite when both sides have no spread).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom of the log ratio.
    pub df: f64,
}

/// One side of a ratio: mean, 95% half-width of the mean, and how many samples it is from.
pub type Side = (f64, f64, u32);

/// The 95% interval of `b.0 ÷ a.0`. Each side's relative standard error is its half-width
/// ÷ t(0.975, n−1) ÷ mean; on the log scale the ratio's error is the two in quadrature, with
/// Welch–Satterthwaite's degrees of freedom, and the interval `ratio · e^(±t·se)` is the one
/// the verdict reads (so no pair is called different while its interval holds 1). `None`
/// when a side has fewer than two samples, no interval, or a mean that is not positive.
pub fn ratio(a: Side, b: Side) -> Option<RatioInterval> {
    let rel_se = |s: Side| -> Option<(f64, f64)> {
        let (mean, ci, n) = s;
        if n < 2 || !mean.is_finite() || mean <= 0.0 || !ci.is_finite() || ci < 0.0 {
            return None;
        }
        let t = student_t_975(n as u64 - 1);
        Some((ci / t / mean, n as f64))
    };
    let ((sa, na), (sb, nb)) = (rel_se(a)?, rel_se(b)?);
    let r = b.0 / a.0;
    let v = sa * sa + sb * sb;
    if v == 0.0 {
        let t = if r == 1.0 {
            0.0
        } else {
            f64::INFINITY.copysign(r.ln())
        };
        return Some(RatioInterval {
            low: r,
            high: r,
            t,
            df: na + nb - 2.0,
        });
    }
    let df = v * v / (sa.powi(4) / (na - 1.0) + sb.powi(4) / (nb - 1.0));
    let h = student_t_975((df.floor() as u64).max(1)) * v.sqrt();
    Some(RatioInterval {
        low: r * (-h).exp(),
        high: r * h.exp(),
        t: r.ln() / v.sqrt(),
        df,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_interval_is_the_verdicts_interval() {
        // Equal means and spread: the interval holds 1 and t is 0.
        let r = ratio((100.0, 2.0, 5), (100.0, 2.0, 5)).unwrap();
        assert!(r.low < 1.0 && r.high > 1.0 && r.t == 0.0, "{r:?}");
        // A 10% change with ±1% intervals: excluded, and the ends bracket 1.1.
        let r = ratio((100.0, 1.0, 5), (110.0, 1.1, 5)).unwrap();
        assert!(r.low > 1.08 && r.high < 1.12 && r.t > 5.0, "{r:?}");
        // The interval is symmetric on the log scale.
        assert!(((1.1f64 / r.low).ln() - (r.high / 1.1).ln()).abs() < 1e-12);
        assert!(ratio((100.0, 1.0, 1), (100.0, 1.0, 5)).is_none());
        assert!(ratio((0.0, 1.0, 3), (100.0, 1.0, 5)).is_none());
        assert!(ratio((100.0, f64::NAN, 3), (100.0, 1.0, 5)).is_none());
        let r = ratio((100.0, 0.0, 3), (120.0, 0.0, 3)).unwrap();
        assert_eq!((r.low, r.high, r.t), (1.2, 1.2, f64::INFINITY));
    }
}
