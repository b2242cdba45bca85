//! Statistics for points: latency histograms and their summaries, running mean and variance, 95% confidence intervals and Welch's t-test.

use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize};

/// Lowest latency a [`LatencyHistogram`] tells apart: 1 ns.
pub const LOWEST_NS: u64 = 1;
/// Highest latency a [`LatencyHistogram`] tracks: 3600 s, in nanoseconds.
pub const HIGHEST_NS: u64 = 3_600_000_000_000;
/// Significant decimal digits a [`LatencyHistogram`] keeps.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Errors from the statistics module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatsError {
    /// The other histogram holds values this one cannot store.
    #[error("cannot merge latency histograms: the other histogram holds values out of range")]
    MergeOutOfRange,
}

/// The relative resolution of a [`LatencyHistogram`]'s values (3 significant digits): a
/// median or mean read from it is within this fraction of the true one, so no interval built
/// from such values is narrower.
pub const RELATIVE_RESOLUTION: f64 = 1e-3;

/// An HDR histogram of latencies in nanoseconds (1 ns to 3600 s, 3 significant digits).
///
/// Allocate one per point and [`reset`](Self::reset) it between trials: recording never
/// allocates. Values outside the range are clamped into it and counted (see [`clamped`](Self::clamped)).
/// Statistics of an empty histogram are 0.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    clamped: u64,
}

impl LatencyHistogram {
    /// Allocates an empty histogram.
    pub fn new() -> Self {
        // The bounds are constants that satisfy hdrhistogram's rules
        // (low >= 1, high >= 2 * low, sigfig <= 5), so creation cannot fail.
        let hist = Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        Self { hist, clamped: 0 }
    }

    /// Empties the histogram, keeping its allocation.
    pub fn reset(&mut self) {
        self.hist.reset();
        self.clamped = 0;
    }

    /// Records one latency in nanoseconds; values outside 1 ns..=3600 s are clamped and counted.
    pub fn record(&mut self, ns: u64) {
        let value = ns.clamp(LOWEST_NS, HIGHEST_NS);
        if value != ns {
            self.clamped += 1;
        }
        self.hist.saturating_record(value);
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Number of recorded values that were clamped into range.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    /// Smallest recorded value (lowest equivalent within histogram precision), in ns.
    pub fn min(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.min()
        }
    }

    /// Largest recorded value (highest equivalent within histogram precision), in ns.
    pub fn max(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.max()
        }
    }

    /// Mean of the recorded values, in ns.
    pub fn mean(&self) -> f64 {
        self.hist.mean()
    }

    /// Population standard deviation of the recorded values, in ns.
    pub fn stddev(&self) -> f64 {
        self.hist.stdev()
    }

    /// Value at quantile `q` (0.0..=1.0, clamped; NaN counts as 0), in ns.
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            return 0;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        self.hist.value_at_quantile(q)
    }

    /// Adds every value of `other` to this histogram.
    pub fn merge(&mut self, other: &LatencyHistogram) -> Result<(), StatsError> {
        self.hist
            .add(&other.hist)
            .map_err(|_| StatsError::MergeOutOfRange)?;
        self.clamped += other.clamped;
        Ok(())
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

/// Summary of a latency distribution. Latencies are f64 nanoseconds; `count` is a plain number.
///
/// `stddev` is the population standard deviation. Every field is 0 when `count` is 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Smallest value, ns.
    pub min: f64,
    /// Mean, ns.
    pub mean: f64,
    /// Median, ns.
    pub p50: f64,
    /// 90th percentile, ns.
    pub p90: f64,
    /// 99th percentile, ns.
    pub p99: f64,
    /// 99.9th percentile, ns.
    pub p999: f64,
    /// Largest value, ns.
    pub max: f64,
    /// Population standard deviation, ns.
    pub stddev: f64,
}

impl Summary {
    /// Summarises a histogram.
    pub fn from_histogram(h: &LatencyHistogram) -> Self {
        let q = |q: f64| h.value_at_quantile(q) as f64;
        Self {
            count: h.count(),
            min: h.min() as f64,
            mean: h.mean(),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: h.max() as f64,
            stddev: h.stddev(),
        }
    }
}

impl From<&LatencyHistogram> for Summary {
    fn from(h: &LatencyHistogram) -> Self {
        Self::from_histogram(h)
    }
}

/// Welford's running mean and variance.
///
/// Non-finite values propagate into the results.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Welford {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Welford {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one value.
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Number of values pushed.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Mean of the values (0 when empty).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Sample variance (divides by n - 1); 0 for fewer than 2 values.
    pub fn variance(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            self.m2 / (self.n - 1) as f64
        }
    }

    /// Sample standard deviation; 0 for fewer than 2 values.
    pub fn stddev(&self) -> f64 {
        self.variance().sqrt()
    }
}

/// Two-sided 95% critical values of Student's t for 1..=30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706_204_736,
    4.302_652_730,
    3.182_446_305,
    2.776_445_105,
    2.570_581_836,
    2.446_911_851,
    2.364_624_252,
    2.306_004_135,
    2.262_157_163,
    2.228_138_852,
    2.200_985_160,
    2.178_812_830,
    2.160_368_656,
    2.144_786_688,
    2.131_449_546,
    2.119_905_299,
    2.109_815_578,
    2.100_922_040,
    2.093_024_054,
    2.085_963_447,
    2.079_613_845,
    2.073_873_068,
    2.068_657_610,
    2.063_898_562,
    2.059_538_553,
    2.055_529_439,
    2.051_830_516,
    2.048_407_142,
    2.045_229_642,
    2.042_272_456,
];

/// The 97.5% quantile of the standard normal distribution.
const Z_975: f64 = 1.959_963_984_540_054;

/// Two-sided 95% critical value of Student's t with `df` degrees of freedom.
///
/// Exact (tabulated) for df 1..=30; above that, the Cornish–Fisher expansion around the
/// normal quantile (error below 1e-5), tending to 1.95996 as df grows. df 0 gives infinity.
pub fn student_t_975(df: u64) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[(df - 1) as usize],
        _ => {
            let v = df as f64;
            let z = Z_975;
            let (z2, z3) = (z * z, z * z * z);
            let (z5, z7, z9) = (z3 * z2, z3 * z2 * z2, z3 * z3 * z3);
            z + (z3 + z) / (4.0 * v)
                + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * v * v)
                + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * v * v * v)
                + (79.0 * z9 + 776.0 * z7 + 1482.0 * z5 - 1920.0 * z3 - 945.0 * z)
                    / (92_160.0 * v * v * v * v)
        }
    }
}

/// A 95% confidence interval of a mean: `mean ± half_width`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfidenceInterval {
    /// Sample mean.
    pub mean: f64,
    /// Half-width of the interval, in the unit of the samples.
    pub half_width: f64,
    /// `half_width / |mean|`; infinity when the mean is 0 (stored as null in JSON).
    #[serde(deserialize_with = "null_as_infinity")]
    #[schemars(with = "Option<f64>")]
    pub relative: f64,
    /// Number of samples.
    pub n: u64,
}

/// Reads an f64 that JSON may hold as null (how serde_json writes infinity).
fn null_as_infinity<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// The Wilson score 95% interval of the proportion `lost` ÷ `sent` (a binomial one: it stays
/// inside [0, 1] and is not empty at 0, where the normal approximation claims exactly 0); it
/// assumes independent events, so bursty loss makes the true interval wider. None with
/// nothing sent.
pub fn wilson95(lost: u64, sent: u64) -> Option<(f64, f64)> {
    if sent == 0 {
        return None;
    }
    let n = sent as f64;
    let p = (lost.min(sent)) as f64 / n;
    let z2 = Z_975 * Z_975;
    let d = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / d;
    let half = Z_975 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / d;
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

/// 95% confidence interval of the mean of `samples` (Student's t, sample standard deviation).
///
/// None for fewer than 2 samples or when a sample is not finite.
pub fn ci95(samples: &[f64]) -> Option<ConfidenceInterval> {
    if samples.len() < 2 || samples.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut w = Welford::new();
    samples.iter().for_each(|&x| w.push(x));
    let n = w.count();
    let half_width = student_t_975(n - 1) * w.stddev() / (n as f64).sqrt();
    let mean = w.mean();
    let relative = if mean == 0.0 {
        f64::INFINITY
    } else {
        half_width / mean.abs()
    };
    Some(ConfidenceInterval {
        mean,
        half_width,
        relative,
        n,
    })
}

/// Mean, sample variance and count of one sample: the input of [`welch_t_test`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleStats {
    /// Sample mean.
    pub mean: f64,
    /// Sample variance (n - 1 denominator).
    pub variance: f64,
    /// Number of values.
    pub n: u64,
}

impl From<&Welford> for SampleStats {
    fn from(w: &Welford) -> Self {
        Self {
            mean: w.mean(),
            variance: w.variance(),
            n: w.count(),
        }
    }
}

impl From<&Summary> for SampleStats {
    /// Converts the summary's population standard deviation into a sample variance.
    fn from(s: &Summary) -> Self {
        let n = s.count;
        let correction = if n < 2 {
            1.0
        } else {
            n as f64 / (n - 1) as f64
        };
        Self {
            mean: s.mean,
            variance: s.stddev * s.stddev * correction,
            n,
        }
    }
}

/// Result of Welch's unequal-variance t-test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WelchResult {
    /// t statistic, (mean a - mean b) / standard error.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Whether |t| exceeds the two-sided 95% critical value for df rounded down.
    pub significant_at_95: bool,
}

/// Welch's t-test: do samples `a` and `b` have different means (two-sided, 95%)?
///
/// None when a sample has fewer than 2 values or a non-finite or negative statistic.
/// When both variances are 0, t is 0 (equal means) or infinite, and df is n_a + n_b - 2.
pub fn welch_t_test(a: &SampleStats, b: &SampleStats) -> Option<WelchResult> {
    let valid = |s: &SampleStats| {
        s.n >= 2 && s.mean.is_finite() && s.variance.is_finite() && s.variance >= 0.0
    };
    if !valid(a) || !valid(b) {
        return None;
    }
    let (na, nb) = (a.n as f64, b.n as f64);
    let (ea, eb) = (a.variance / na, b.variance / nb);
    let se2 = ea + eb;
    let diff = a.mean - b.mean;
    let (t, df) = if se2 == 0.0 {
        let t = if diff == 0.0 {
            0.0
        } else {
            f64::INFINITY.copysign(diff)
        };
        (t, na + nb - 2.0)
    } else {
        let df = se2 * se2 / (ea * ea / (na - 1.0) + eb * eb / (nb - 1.0));
        (diff / se2.sqrt(), df)
    };
    let critical = student_t_975((df.floor() as u64).max(1));
    Some(WelchResult {
        t,
        df,
        significant_at_95: t.abs() > critical,
    })
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
