//! Message-size schedules (the sweep): NetPIPE's perturbed exponential schedule and explicit `--sizes` lists and ranges.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Most sizes a [`SizeSpec`] may expand to.
pub const MAX_SIZES: usize = 100_000;

/// NetPIPE's default perturbation, in bytes.
pub const DEFAULT_PERTURBATION: u64 = 3;

/// Why a `--sizes` value was rejected; each message names the offending item and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Nothing was given.
    #[error("--sizes is empty: give sizes or ranges, e.g. 1,1k..8k:+1k")]
    Empty,
    /// Two commas in a row, or a comma at either end.
    #[error("empty item in --sizes: remove the extra comma")]
    EmptyItem,
    /// A size that is not a number with an optional suffix.
    #[error("bad size '{0}' in --sizes: use a number with optional k, M or G suffix, e.g. 8k")]
    BadSize(String),
    /// A size beyond 64 bits.
    #[error("size '{0}' in --sizes is too large: it must fit in 64 bits")]
    TooLarge(String),
    /// A range that is not `START..END:STEP`.
    #[error("bad range '{0}' in --sizes: write START..END:STEP, e.g. 1k..8k:+1k")]
    BadRange(String),
    /// A range without `:STEP`.
    #[error("range '{0}' in --sizes has no step: add ':+N' to add N bytes (e.g. {0}:+1k) or ':*2' to double")]
    MissingStep(String),
    /// A step that is neither `+N` nor `*F`.
    #[error("bad step '{step}' in range '{item}': use +N to add N bytes (e.g. +1k) or *F to multiply by F > 1 (e.g. *2)")]
    BadStep {
        /// The whole range.
        item: String,
        /// The step as written.
        step: String,
    },
    /// A step of `+0` or a factor of at most 1.
    #[error("step {step} in range '{item}' would never end: use +N with N > 0 or *F with F > 1")]
    StepNeverEnds {
        /// The whole range.
        item: String,
        /// The step as written.
        step: String,
    },
    /// A multiplicative range that starts at 0.
    #[error(
        "range '{0}' cannot grow from 0 by a factor: start at 1, or list 0 apart, e.g. 0,1..8k:*2"
    )]
    FactorFromZero(String),
    /// A range whose start is above its end.
    #[error("range '{0}' in --sizes: start is above end; put the smaller size first")]
    StartAboveEnd(String),
    /// The expansion is too long.
    #[error("more than {MAX_SIZES} sizes in --sizes: use larger steps or fewer ranges")]
    TooMany,
}

/// An explicit sweep, as given to `--sizes`: comma-separated sizes and ranges.
///
/// - A size is an integer with an optional binary suffix `k`, `M` or `G` (any case, ×1024,
///   ×1024², ×1024³), optionally followed by `B` or `iB`: `1472`, `1k`, `8M`, `64KiB`.
/// - A range is `START..END:STEP`, where STEP is `+N` (add the size N) or `*F` (multiply by
///   the integer or decimal F > 1, rounding, always growing by at least one byte). END is
///   included when the steps hit it exactly: `1k..8k:+1k`, `64k..8M:*2`, `59k..72k:+512`.
///
/// The sizes keep the order given; repeats are dropped, keeping the first. Zero is allowed.
/// Serialises as its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "String", into = "String")]
pub struct SizeSpec {
    text: String,
    sizes: Vec<u64>,
}

impl SizeSpec {
    /// Parses and expands a `--sizes` value.
    pub fn parse(text: &str) -> Result<Self, SizeError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SizeError::Empty);
        }
        let mut all = Vec::new();
        for item in text.split(',') {
            expand_item(item.trim(), &mut all)?;
        }
        let mut seen = HashSet::with_capacity(all.len());
        all.retain(|&size| seen.insert(size));
        Ok(Self {
            text: text.to_owned(),
            sizes: all,
        })
    }

    /// The sizes, in bytes, in the order given and without repeats.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// The text this spec was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for SizeSpec {
    type Err = SizeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for SizeSpec {
    type Error = SizeError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<SizeSpec> for String {
    fn from(spec: SizeSpec) -> Self {
        spec.text
    }
}

impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses and expands a `--sizes` value into sizes in bytes (see [`SizeSpec`]).
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, SizeError> {
    SizeSpec::parse(text).map(|spec| spec.sizes)
}

/// Appends a size, refusing to grow past [`MAX_SIZES`].
fn push(out: &mut Vec<u64>, size: u64) -> Result<(), SizeError> {
    if out.len() >= MAX_SIZES {
        return Err(SizeError::TooMany);
    }
    out.push(size);
    Ok(())
}

/// Appends the sizes of one item: a size or a range.
fn expand_item(item: &str, out: &mut Vec<u64>) -> Result<(), SizeError> {
    if item.is_empty() {
        return Err(SizeError::EmptyItem);
    }
    if !item.contains("..") && !item.contains(':') {
        return push(out, parse_size(item)?);
    }
    let (bounds, step) = match item.split_once(':') {
        Some((b, s)) => (b, Some(s)),
        None => (item, None),
    };
    let Some((start, end)) = bounds.split_once("..") else {
        return Err(SizeError::BadRange(item.to_owned()));
    };
    let (start, end) = (start.trim(), end.trim());
    if start.is_empty() || end.is_empty() {
        return Err(SizeError::BadRange(item.to_owned()));
    }
    let (start, end) = (parse_size(start)?, parse_size(end)?);
    // The bounds before the step: `10..1` is first of all backwards (a step would not help).
    if start > end {
        return Err(SizeError::StartAboveEnd(item.to_owned()));
    }
    let Some(step) = step.map(str::trim) else {
        return Err(SizeError::MissingStep(item.to_owned()));
    };
    let bad_step = || SizeError::BadStep {
        item: item.to_owned(),
        step: step.to_owned(),
    };
    let never_ends = || SizeError::StepNeverEnds {
        item: item.to_owned(),
        step: step.to_owned(),
    };
    if let Some(n) = step.strip_prefix('+') {
        let n = parse_size(n).map_err(|_| bad_step())?;
        if n == 0 {
            return Err(never_ends());
        }
        let mut size = start;
        loop {
            push(out, size)?;
            match size.checked_add(n) {
                Some(next) if next <= end => size = next,
                _ => return Ok(()),
            }
        }
    }
    if let Some(f) = step.strip_prefix('*') {
        let numeric = !f.is_empty() && f.chars().all(|c| c.is_ascii_digit() || c == '.');
        let factor: f64 = match f.parse() {
            Ok(x) if numeric => x,
            _ => return Err(bad_step()),
        };
        if factor <= 1.0 {
            return Err(never_ends());
        }
        if start == 0 {
            return Err(SizeError::FactorFromZero(item.to_owned()));
        }
        let mut size = start;
        loop {
            push(out, size)?;
            // u64::MAX as f64 is 2^64: anything at or above it is past every END.
            let grown = size as f64 * factor;
            if grown >= u64::MAX as f64 {
                return Ok(());
            }
            // Growing by at least one byte guarantees an end.
            let next = (grown.round() as u64).max(size.saturating_add(1));
            if next > end {
                return Ok(());
            }
            size = next;
        }
    }
    Err(bad_step())
}

/// Binary suffixes a size may carry, matched case-insensitively.
const SUFFIXES: [(&str, u64); 11] = [
    ("", 1),
    ("b", 1),
    ("k", 1 << 10),
    ("kb", 1 << 10),
    ("kib", 1 << 10),
    ("m", 1 << 20),
    ("mb", 1 << 20),
    ("mib", 1 << 20),
    ("g", 1 << 30),
    ("gb", 1 << 30),
    ("gib", 1 << 30),
];

/// Parses one size: digits and an optional suffix from [`SUFFIXES`].
fn parse_size(token: &str) -> Result<u64, SizeError> {
    let token = token.trim();
    let digits = token
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(token.len());
    let (number, suffix) = token.split_at(digits);
    let multiplier = SUFFIXES
        .iter()
        .find(|(s, _)| s.eq_ignore_ascii_case(suffix))
        .map(|&(_, m)| m);
    let (false, Some(multiplier)) = (number.is_empty(), multiplier) else {
        return Err(SizeError::BadSize(token.to_owned()));
    };
    // Only digits remain, so parsing fails on overflow alone.
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| SizeError::TooLarge(token.to_owned()))
}

/// NetPIPE's default schedule: sizes growing exponentially, each perturbed by ± `perturbation`.
///
/// As NPtcp does, base sizes start at 1 byte and grow by an increment that starts at 1 and
/// doubles every other step from the fourth: 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96,
/// 128… (each power of two and 1.5× it). When the increment to the next base size exceeds
/// `perturbation + 1`, the schedule measures b − perturbation, b and b + perturbation; before
/// that, b alone (so small sizes are not measured twice). Sizes below `start` (or 1) or above
/// `ceiling` are dropped, `ceiling` itself is always last, and the result is ascending without
/// repeats. Empty when `start > ceiling` or `ceiling` is 0.
///
/// ```
/// use netsweep_model::sizes::netpipe_schedule;
/// assert_eq!(
///     netpipe_schedule(1, 64, 3),
///     [1, 2, 3, 4, 6, 8, 12, 13, 16, 19, 21, 24, 27, 29, 32, 35, 45, 48, 51, 61, 64]
/// );
/// ```
pub fn netpipe_schedule(start: u64, ceiling: u64, perturbation: u64) -> Vec<u64> {
    let low = start.max(1);
    if low > ceiling {
        return Vec::new();
    }
    let mut sizes = Vec::new();
    let (mut base, mut inc) = (1u64, 1u64);
    for step in 0u32.. {
        if base > ceiling {
            break;
        }
        if step > 2 && step % 2 == 1 {
            inc = inc.saturating_mul(2);
        }
        if perturbation > 0 && inc > perturbation.saturating_add(1) {
            sizes.extend(base.checked_sub(perturbation));
            sizes.push(base);
            sizes.extend(base.checked_add(perturbation));
        } else {
            sizes.push(base);
        }
        match base.checked_add(inc) {
            Some(next) => base = next,
            None => break,
        }
    }
    sizes.retain(|size| (low..=ceiling).contains(size));
    sizes.push(ceiling);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse_sizes(text).unwrap_err().to_string()
    }

    #[test]
    fn single_sizes_and_suffixes() {
        assert_eq!(parse_sizes("1472").unwrap(), [1472]);
        assert_eq!(parse_sizes("0").unwrap(), [0]);
        assert_eq!(
            parse_sizes("1k, 1K,2kb,3KiB,8M,1mib,1G,7B,5b").unwrap(),
            [1024, 2048, 3072, 8 << 20, 1 << 20, 1 << 30, 7, 5]
        );
    }

    #[test]
    fn additive_ranges() {
        assert_eq!(
            parse_sizes("1k..8k:+1k").unwrap(),
            (1..=8).map(|k| k * 1024).collect::<Vec<u64>>()
        );
        let r = parse_sizes("59k..72k:+512").unwrap();
        assert_eq!(r.len(), 27);
        assert_eq!((r[0], r[26]), (60416, 73728));
        // END not hit exactly: stop below it.
        assert_eq!(parse_sizes("1..10:+4").unwrap(), [1, 5, 9]);
        assert_eq!(parse_sizes("5..5:+1").unwrap(), [5]);
    }

    #[test]
    fn multiplicative_ranges() {
        let r = parse_sizes("64k..8M:*2").unwrap();
        assert_eq!(r, (16..=23).map(|p| 1u64 << p).collect::<Vec<_>>());
        assert_eq!(parse_sizes("2..20:*1.5").unwrap(), [2, 3, 5, 8, 12, 18]);
        // A small factor still grows by at least one byte.
        assert_eq!(parse_sizes("1..4:*1.01").unwrap(), [1, 2, 3, 4]);
        assert_eq!(
            parse_sizes("1G..16G:*2").unwrap(),
            [1 << 30, 2 << 30, 4 << 30, 8 << 30, 16 << 30]
        );
    }

    #[test]
    fn keeps_order_and_drops_repeats() {
        assert_eq!(
            parse_sizes("1,1k..8k:+1k").unwrap(),
            [1, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192]
        );
        assert_eq!(
            parse_sizes("4k,1k..4k:+1k,2048,7").unwrap(),
            [4096, 1024, 2048, 3072, 7]
        );
    }

    #[test]
    fn spec_round_trips_as_text() {
        let spec: SizeSpec = " 1,64k..8M:*2 ".parse().unwrap();
        assert_eq!(spec.as_str(), "1,64k..8M:*2");
        assert_eq!(spec.to_string(), "1,64k..8M:*2");
        assert_eq!(spec.sizes().len(), 9);
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(json, "\"1,64k..8M:*2\"");
        assert_eq!(serde_json::from_str::<SizeSpec>(&json).unwrap(), spec);
        assert!(serde_json::from_str::<SizeSpec>("\"8x\"").is_err());
    }

    #[test]
    fn error_messages_name_the_item_and_the_fix() {
        let e = err("1,8x");
        assert!(e.contains("'8x'") && e.contains("e.g. 8k"), "{e}");
        assert!(err("1.5k").contains("'1.5k'"));
        assert!(err("-1").contains("'-1'"));
        assert!(err("+1").contains("'+1'"));
        let e = err("8k..1k:+1k");
        assert!(
            e.contains("8k..1k") && e.contains("start is above end"),
            "{e}"
        );
        let e = err("1..8:+0");
        assert!(
            e.contains("step +0") && e.contains("would never end"),
            "{e}"
        );
        assert!(err("1..8:*1").contains("would never end"));
        assert!(err("1..8:*0.5").contains("would never end"));
        let e = err("1k..8k");
        assert!(
            e.contains("'1k..8k'") && e.contains(":+N") && e.contains(":*2"),
            "{e}"
        );
        let e = err("1..8:/2");
        assert!(e.contains("'/2'") && e.contains("+N"), "{e}");
        assert!(err("1..8:*inf").contains("'*inf'"));
        assert!(err("1..8:+x").contains("'+x'"));
        assert!(err("0..8:*2").contains("0,1..8k:*2"));
        assert!(err("..8:+1").contains("START..END:STEP"));
        assert!(err("8:+1").contains("'8:+1'"));
        assert!(err("99999999999999999999").contains("too large"));
        assert!(err("17179869184G").contains("too large"));
        assert_eq!(parse_sizes(" "), Err(SizeError::Empty));
        assert_eq!(parse_sizes("1,,2"), Err(SizeError::EmptyItem));
        assert_eq!(parse_sizes("1,"), Err(SizeError::EmptyItem));
    }

    #[test]
    fn too_many_sizes() {
        assert_eq!(parse_sizes("1..100000:+1").unwrap().len(), MAX_SIZES);
        // A backwards range is said to be backwards, with or without a step.
        assert_eq!(
            parse_sizes("10..1"),
            Err(SizeError::StartAboveEnd("10..1".into()))
        );
        assert_eq!(
            parse_sizes("1..10"),
            Err(SizeError::MissingStep("1..10".into()))
        );
        assert_eq!(parse_sizes("0..100000:+1"), Err(SizeError::TooMany));
        assert!(err("0..18446744073709551615:+1").contains("more than 100000 sizes"));
    }

    #[test]
    fn extreme_ranges_end() {
        let max = u64::MAX.to_string();
        let r = parse_sizes(&format!("{max}..{max}:*2")).unwrap();
        assert_eq!(r, [u64::MAX]);
        let r = parse_sizes(&format!("1..{max}:*2")).unwrap();
        assert_eq!(r.len(), 64);
        let r = parse_sizes(&format!("1..{max}:*1000000")).unwrap();
        assert_eq!(r.last(), Some(&1_000_000_000_000_000_000));
    }

    #[test]
    fn netpipe_ceiling_64() {
        assert_eq!(
            netpipe_schedule(1, 64, 3),
            [1, 2, 3, 4, 6, 8, 12, 13, 16, 19, 21, 24, 27, 29, 32, 35, 45, 48, 51, 61, 64]
        );
        assert_eq!(
            netpipe_schedule(1, 64, 0),
            [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
        );
        // The ceiling closes the schedule; start drops smaller sizes.
        assert_eq!(
            netpipe_schedule(20, 50, 3),
            [21, 24, 27, 29, 32, 35, 45, 48, 50]
        );
        assert_eq!(netpipe_schedule(0, 1, 3), [1]);
        assert!(netpipe_schedule(10, 5, 3).is_empty());
        assert!(netpipe_schedule(0, 0, 3).is_empty());
    }

    #[test]
    fn netpipe_8mib_is_ascending_and_in_range() {
        let ceiling = 8 << 20;
        for perturbation in [0, 1, 3, 7, 100, u64::MAX] {
            let s = netpipe_schedule(1, ceiling, perturbation);
            assert!(s.windows(2).all(|w| w[0] < w[1]), "p {perturbation}");
            assert!(s.iter().all(|&x| (1..=ceiling).contains(&x)));
            assert_eq!(s.last(), Some(&ceiling));
        }
        // Perturbation 0 gives the base sizes alone: 1, p and 3p/2 for p = 2..=2^22, then 2^23.
        let s = netpipe_schedule(1, ceiling, 0);
        assert_eq!(s.len(), 1 + 2 * 22 + 1);
        let s = netpipe_schedule(1, ceiling, 3);
        assert!(s.contains(&(ceiling - 3)) && !s.contains(&(ceiling + 3)));
        let huge = netpipe_schedule(1, u64::MAX, 3);
        assert_eq!(huge.last(), Some(&u64::MAX));
        assert!(huge.windows(2).all(|w| w[0] < w[1]));
    }
}
