//! Each exported figure's 95 % interval as bounds (issue 39 item 7): a mean's (throughput,
//! latency) from its trials; a loss ratio's is the Wilson score interval of its counts
//! (`netsweep_model::stats::wilson95`).

/// `mean ± half`, as (lower, upper), the lower bound cut at 0 (every figure exported is a
/// rate or a time, never negative: a wide interval of a noisy point would otherwise claim one);
/// None when no interval was measured.
pub fn bounds(mean: f64, half: Option<f64>) -> Option<(f64, f64)> {
    half.filter(|h| h.is_finite())
        .map(|h| ((mean - h).max(0.0), mean + h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_the_mean_plus_and_minus_its_half_width_and_never_negative() {
        assert_eq!(bounds(10.0, Some(2.0)), Some((8.0, 12.0)));
        assert_eq!(bounds(10.0, None), None);
        assert_eq!(bounds(1.0, Some(1.5)), Some((0.0, 2.5)), "never below 0");
    }
}
