//! Axis scales (linear or logarithmic), their domains and readable tick positions and labels.

use crate::units;

/// Linear or base-10 logarithmic (the base only matters for tick placement).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    /// Linear from `min` to `max`, in data units.
    Linear {
        /// Lowest value shown.
        min: f64,
        /// Highest value shown.
        max: f64,
    },
    /// Logarithmic from `min` to `max`, in data units (both positive).
    Log {
        /// Lowest value shown.
        min: f64,
        /// Highest value shown.
        max: f64,
    },
}

/// What the values on an axis are: it formats the tick labels, units included.
#[derive(Debug, Clone, PartialEq)]
pub enum Unit {
    /// Bytes: 1 B, 1 KiB, 64 KiB, 1 MiB; log ticks at powers of two.
    Bytes,
    /// Nanoseconds: 850 ns, 3 µs, 1.5 ms.
    Nanos,
    /// Mbit/s: 500 kbit/s, 12 Mbit/s, 1.5 Gbit/s.
    Mbps,
    /// A fraction shown as a percentage: 0.05 → 5%.
    Percent,
    /// A ratio: 1.1×.
    Ratio,
    /// Events per second with a decimal prefix: 500/s, 64k/s.
    PerSecond,
    /// A plain number followed by this unit text.
    Plain(String),
    /// Categories at 0, 1, 2…: each tick is labelled with its category.
    Category(Vec<String>),
    /// Ticks at given positions with given labels (a numeric factor's levels).
    Ticks(Vec<(f64, String)>),
}

impl Unit {
    /// The tick label of `v`.
    pub fn label(&self, v: f64) -> String {
        match self {
            Unit::Bytes => units::size_tick(v),
            Unit::Nanos => units::time_tick(v),
            Unit::Mbps => units::rate_tick(v),
            Unit::Percent => format!("{}%", units::short(v * 100.0)),
            Unit::Ratio => format!("{}×", units::short(v)),
            Unit::PerSecond => format!("{}/s", netsweep_model::load::si(v)),
            Unit::Plain(u) if u.is_empty() => units::short(v),
            Unit::Plain(u) => format!("{} {u}", units::short(v)),
            Unit::Ticks(t) => t
                .iter()
                .find(|(x, _)| (x - v).abs() <= 1e-9 * x.abs().max(1.0))
                .map(|(_, l)| l.clone())
                .unwrap_or_default(),
            Unit::Category(c) => {
                let i = v.round();
                if (v - i).abs() < 1e-9 && i >= 0.0 {
                    c.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            }
        }
    }
}

/// The divisor and name of the one unit a linear axis of `unit` is labelled in, chosen by
/// the largest tick: `None` for units without prefixes (or an axis without ticks).
fn common_unit(unit: &Unit, largest: f64) -> Option<(f64, &'static str)> {
    const K: f64 = 1024.0;
    let m = largest;
    Some(match unit {
        Unit::Mbps if m >= 1e3 => (1e3, "Gbit/s"),
        Unit::Mbps if m >= 1.0 || m == 0.0 => (1.0, "Mbit/s"),
        Unit::Mbps => (1e-3, "kbit/s"),
        Unit::Nanos if m >= 1e9 => (1e9, "s"),
        Unit::Nanos if m >= 1e6 => (1e6, "ms"),
        Unit::Nanos if m >= 1e3 => (1e3, "µs"),
        Unit::Nanos => (1.0, "ns"),
        // Under 10 KiB a byte axis stays in bytes (1500, not 1.46 KiB).
        Unit::Bytes if m >= K * K * K => (K * K * K, "GiB"),
        Unit::Bytes if m >= K * K => (K * K, "MiB"),
        Unit::Bytes if m >= 10.0 * K => (K, "KiB"),
        Unit::Bytes => (1.0, "bytes"),
        Unit::PerSecond if m >= 1e9 => (1e9, "G/s"),
        Unit::PerSecond if m >= 1e6 => (1e6, "M/s"),
        Unit::PerSecond if m >= 1e3 => (1e3, "k/s"),
        Unit::PerSecond => (1.0, "/s"),
        _ => return None,
    })
}

impl Unit {
    /// The labels of an axis's ticks, and the unit its title names. On a linear axis of a
    /// quantity with prefixes (bytes, time, rate, events/s) every tick is in the unit of the
    /// largest and the unit is said once, in the title ("throughput (Gbit/s)"), so "0 Mbit/s"
    /// never sits under "20 Gbit/s"; on a log axis, whose ticks are decades apart, each tick
    /// carries its own unit.
    pub fn axis_labels(&self, scale: &Scale, ticks: &[f64]) -> (Vec<String>, Option<String>) {
        let largest = ticks.iter().fold(0f64, |m, t| m.max(t.abs()));
        match (scale, common_unit(self, largest)) {
            (Scale::Linear { .. }, Some((div, name))) if !ticks.is_empty() => (
                ticks.iter().map(|t| units::short(t / div)).collect(),
                Some(name.to_string()),
            ),
            _ => (ticks.iter().map(|t| self.label(*t)).collect(), None),
        }
    }
}

/// An axis title with the unit its ticks are in: "throughput (Gbit/s)".
pub fn titled(title: &str, unit: Option<&str>) -> String {
    match unit {
        Some(u) => format!("{title} ({u})"),
        None => title.to_string(),
    }
}

impl Scale {
    /// A scale fitting `values`: log (positive values only) or linear (from 0 when
    /// `from_zero`), padded a little. Falls back to 1..10 (log) or 0..1 when nothing fits.
    pub fn fit(values: impl IntoIterator<Item = f64>, log: bool, from_zero: bool) -> Scale {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            if v.is_finite() && (!log || v > 0.0) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if log {
            if !lo.is_finite() {
                return Scale::Log {
                    min: 1.0,
                    max: 10.0,
                };
            }
            if hi / lo < 1.5 {
                let mid = (hi * lo).sqrt();
                return Scale::Log {
                    min: mid / 1.5,
                    max: mid * 1.5,
                };
            }
            // Over ~300 decades `hi / lo` overflows and the padding with it: the values' own
            // ends are the domain then (never 0 or infinity, whose ticks do not end).
            let pad = (hi / lo).powf(0.04);
            let (min, max) = (lo / pad, hi * pad);
            Scale::Log {
                min: if min > 0.0 { min } else { lo },
                max: if max.is_finite() { max } else { hi },
            }
        } else {
            if !lo.is_finite() {
                return Scale::Linear { min: 0.0, max: 1.0 };
            }
            if from_zero {
                lo = lo.min(0.0);
                hi = hi.max(0.0);
            }
            if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
                let d = if hi == 0.0 { 1.0 } else { hi.abs() * 0.1 };
                return Scale::Linear {
                    min: lo - d,
                    max: hi + d,
                };
            }
            let pad = (hi - lo) * 0.05;
            Scale::Linear {
                min: if from_zero && lo == 0.0 {
                    0.0
                } else {
                    lo - pad
                },
                max: hi + pad,
            }
        }
    }

    /// Maps a value to 0..1 along the axis (outside for values off the domain; NaN for
    /// non-positive values on a log scale).
    pub fn frac(&self, v: f64) -> f64 {
        match *self {
            Scale::Linear { min, max } => (v - min) / (max - min),
            Scale::Log { min, max } => {
                if v <= 0.0 {
                    f64::NAN
                } else {
                    (v.ln() - min.ln()) / (max.ln() - min.ln())
                }
            }
        }
    }

    /// Tick positions inside the domain for an axis of this unit.
    pub fn ticks(&self, unit: &Unit) -> Vec<f64> {
        if let Unit::Category(c) = unit {
            return (0..c.len()).map(|i| i as f64).collect();
        }
        if let Unit::Ticks(t) = unit {
            let (lo, hi) = match *self {
                Scale::Linear { min, max } | Scale::Log { min, max } => (min, max),
            };
            return t
                .iter()
                .map(|(x, _)| *x)
                .filter(|x| *x >= lo && *x <= hi)
                .collect();
        }
        match *self {
            Scale::Linear { min, max } if *unit == Unit::Bytes => byte_ticks(min, max),
            Scale::Linear { min, max } => linear_ticks(min, max, 6),
            Scale::Log { min, max } => {
                if *unit == Unit::Bytes {
                    pow2_ticks(min, max)
                } else {
                    decade_ticks(min, max)
                }
            }
        }
    }
}

/// 1, 2 or 5 × 10^k steps giving about `target` ticks.
pub fn linear_ticks(min: f64, max: f64, target: usize) -> Vec<f64> {
    let span = max - min;
    if span.is_nan() || span <= 0.0 || !span.is_finite() {
        return vec![];
    }
    let raw = span / target as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    // Under ~1e-323 the step underflows to 0 (and `max / step` to i64::MAX ticks).
    if !(step > 0.0 && step.is_finite()) {
        return vec![];
    }
    let first = (min / step).ceil() as i64;
    let last = (max / step).floor() as i64;
    if last.saturating_sub(first) > 10 * target as i64 {
        return vec![];
    }
    (first..=last)
        .map(|i| {
            let v = i as f64 * step;
            if v.abs() < step * 1e-9 {
                0.0
            } else {
                v
            }
        })
        .collect()
}

/// Ticks of a linear size axis: decimal steps under 8 KiB (0, 500 B, 1000 B… where the sizes
/// are Ethernet's), above that a power-of-two step (32 KiB, 48 KiB, 64 KiB…), so that no tick
/// reads "48.8 KiB".
fn byte_ticks(min: f64, max: f64) -> Vec<f64> {
    let span = max - min;
    if !(span.is_finite() && span > 0.0) {
        return vec![];
    }
    if span < 8192.0 {
        return linear_ticks(min, max, 6);
    }
    let step = 2f64.powi((span / 7.0).log2().ceil() as i32);
    let (first, last) = ((min / step).ceil() as i64, (max / step).floor() as i64);
    if last.saturating_sub(first) > 60 {
        return vec![];
    }
    (first..=last).map(|i| i as f64 * step).collect()
}

/// Powers of two every 1, 2, 5 or 10 doublings (1 B, 32 B, 1 KiB, 32 KiB, 1 MiB…), at most 11.
fn pow2_ticks(min: f64, max: f64) -> Vec<f64> {
    if !(min > 0.0 && max.is_finite()) {
        return vec![];
    }
    // Exponents of finite positive doubles: -1074..=1024, so `b - a` fits an i32.
    let (a, b) = (min.log2().ceil() as i32, max.log2().floor() as i32);
    // Under two doublings (600 B–1500 B) powers of two leave one tick or none: decimal
    // steps then.
    if b - a < 2 {
        return linear_ticks(min, max, 5);
    }
    // Beyond 100 doublings (only absurd values span that), every so many tens.
    let wide = (b - a).div_euclid(100) * 10 + 10;
    for step in [1, 2, 5, 10, wide] {
        let first = a.div_euclid(step) * step + if a.rem_euclid(step) == 0 { 0 } else { step };
        let v: Vec<f64> = (first..=b)
            .step_by(step as usize)
            .map(|e| 2f64.powi(e))
            .filter(|t| *t >= min && *t <= max)
            .collect();
        if v.len() <= 11 {
            return v;
        }
    }
    vec![]
}

/// Decades, with 2 and 5 between them when the axis spans under three decades.
fn decade_ticks(min: f64, max: f64) -> Vec<f64> {
    if !(min > 0.0 && max.is_finite()) {
        return vec![];
    }
    // Exponents of finite positive doubles: -324..=309, so `b - a` fits an i32.
    let (a, b) = (min.log10().floor() as i32, max.log10().ceil() as i32);
    if b - a <= 1 && max / min < 8.0 {
        return linear_ticks(min, max, 5)
            .into_iter()
            .filter(|&v| v > 0.0)
            .collect();
    }
    let mults: &[f64] = if b - a <= 3 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let every = ((b - a) as usize / 10).max(1);
    let mut v = Vec::new();
    for (i, e) in (a..=b).enumerate() {
        if i % every != 0 {
            continue;
        }
        for m in mults {
            let t = m * 10f64.powi(e);
            if t >= min && t <= max {
                v.push(t);
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linear_size_axis_ticks_in_binary_steps_above_8_kib() {
        let kib = |v: &[f64]| v.iter().map(|x| x / 1024.0).collect::<Vec<_>>();
        // 32–128 KiB, padded: every 16 KiB.
        let t = Scale::Linear {
            min: 27.0 * 1024.0,
            max: 133.0 * 1024.0,
        }
        .ticks(&Unit::Bytes);
        assert_eq!(kib(&t), [32.0, 48.0, 64.0, 80.0, 96.0, 112.0, 128.0]);
        assert!(t.iter().all(|&v| !Unit::Bytes.label(v).contains('.')));
        // 1 B–8 KiB: every 2 KiB.
        let t = Scale::Linear {
            min: 0.0,
            max: 8600.0,
        }
        .ticks(&Unit::Bytes);
        assert_eq!(kib(&t), [0.0, 2.0, 4.0, 6.0, 8.0]);
        // 0–1500 B: decimal.
        let t = Scale::Linear {
            min: 0.0,
            max: 1550.0,
        }
        .ticks(&Unit::Bytes);
        assert_eq!(t, [0.0, 500.0, 1000.0, 1500.0]);
    }

    #[test]
    fn byte_ticks_are_powers_of_two() {
        let s = Scale::Log {
            min: 1.0,
            max: 8.0 * 1024.0 * 1024.0,
        };
        let t = s.ticks(&Unit::Bytes);
        assert_eq!(t.first(), Some(&1.0));
        assert!(t.len() <= 11 && t.len() >= 4, "{t:?}");
        assert!(t.contains(&1024.0) && t.contains(&1048576.0));
        let labels: Vec<String> = t.iter().map(|&v| Unit::Bytes.label(v)).collect();
        assert!(labels.contains(&"1 KiB".to_string()), "{labels:?}");
    }

    #[test]
    fn decades_and_linear() {
        let s = Scale::Log {
            min: 2000.0,
            max: 3e7,
        };
        let t = s.ticks(&Unit::Nanos);
        assert_eq!(t, vec![1e4, 1e5, 1e6, 1e7]);
        assert_eq!(linear_ticks(0.0, 31_000.0, 6), vec![0.0, 10e3, 20e3, 30e3]);
        assert!(Scale::Log { min: 3.0, max: 5.0 }.ticks(&Unit::Nanos).len() >= 2);
    }

    #[test]
    fn a_log_axis_over_the_whole_f64_range_has_a_few_ticks() {
        // Issue 26 (security review §4): values from 5e-324 to 1e308 padded the domain to
        // 0..inf, whose decade exponents i32::MIN..i32::MAX overflowed `b - a` (a panic in
        // debug; in release a loop of 4.3e9 steps per chart).
        let s = Scale::fit([5e-324, 1e308], true, false);
        let Scale::Log { min, max } = s else {
            panic!("{s:?}")
        };
        assert!(
            min > 0.0 && max.is_finite() && min <= 5e-324 && max >= 1e308,
            "{s:?}"
        );
        for unit in [Unit::Nanos, Unit::Bytes] {
            let t = s.ticks(&unit);
            assert!(!t.is_empty() && t.len() <= 12, "{unit:?}: {t:?}");
            assert!(t.iter().all(|v| *v >= min && *v <= max), "{t:?}");
        }
        // A domain given directly that no fit makes: no ticks, no endless loop.
        for (min, max) in [
            (0.0, f64::INFINITY),
            (0.0, 1.0),
            (f64::NAN, 1.0),
            (1.0, f64::NAN),
        ] {
            let s = Scale::Log { min, max };
            assert!(s.ticks(&Unit::Nanos).len() <= 12);
            assert!(s.ticks(&Unit::Bytes).len() <= 12);
        }
    }

    #[test]
    fn a_linear_axis_narrower_than_the_smallest_step_has_no_ticks() {
        // 0..5e-324 (a from-zero axis over one subnormal value): span ÷ 6 is 0, so the step
        // was 0 and the tick range 0..=i64::MAX.
        let s = Scale::fit([5e-324], false, true);
        assert!(s.ticks(&Unit::Ratio).len() <= 12, "{s:?}");
        assert!(linear_ticks(0.0, 5e-324, 6).len() <= 12);
    }

    #[test]
    fn fit_handles_empty_and_flat() {
        assert_eq!(
            Scale::fit([], true, false),
            Scale::Log {
                min: 1.0,
                max: 10.0
            }
        );
        let s = Scale::fit([5.0, 5.0], false, false);
        assert!(matches!(s, Scale::Linear { min, max } if min < 5.0 && max > 5.0));
        let s = Scale::fit([f64::NAN, -1.0, 0.0], true, false);
        assert_eq!(
            s,
            Scale::Log {
                min: 1.0,
                max: 10.0
            }
        );
    }
}
