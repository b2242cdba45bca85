//! Offered load, for the open-loop `rate` pattern: the `--rate` value (messages/s or a bit
//! rate), the `--rates` sweep of offered loads, the arrival process and its seeded schedule,
//! a point's load figures (offered and delivered rates, sender lateness, the timeline), and
//! the knee of a load sweep ([`knee`]). No IO: the engine reads clocks, this file does the
//! arithmetic.

mod knee;
mod timeline;

pub use knee::{annotate, find_knee, Knee, KneeConfig};
pub use timeline::{CoarseHistogram, TimelineSample};

use crate::results::{Distribution, Estimate};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How requests are spaced in time.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Arrivals {
    /// Evenly spaced: one request every 1/rate seconds.
    #[default]
    Constant,
    /// A Poisson process: exponential gaps of mean 1/rate, from a seeded generator.
    Poisson,
}

impl Arrivals {
    /// Both processes, in listing order.
    pub const ALL: [Arrivals; 2] = [Arrivals::Constant, Arrivals::Poisson];

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Constant => "constant",
            Arrivals::Poisson => "poisson",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == s)
    }
}

impl fmt::Display for Arrivals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An offered load as the user gave it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rate {
    /// Requests per second.
    MessagesPerSec(f64),
    /// Request bits per second (`50mbit`): messages/s = bits ÷ (8 × message size).
    BitsPerSec(f64),
}

impl Rate {
    /// Requests per second for messages of `size` bytes.
    pub fn per_second(self, size: u64) -> f64 {
        match self {
            Rate::MessagesPerSec(r) => r,
            Rate::BitsPerSec(b) => b / (8.0 * size.max(1) as f64),
        }
    }

    /// Parses `10k` (messages/s, decimal suffixes k, M, G) or a bit rate `50mbit`, `1gbit`,
    /// `800kbps` (bit, bps, bit/s; decimal prefixes).
    pub fn parse(text: &str) -> Result<Rate, String> {
        let t = text.trim().to_ascii_lowercase();
        let bits = ["bit/s", "bps", "bit"]
            .iter()
            .find_map(|u| t.strip_suffix(u));
        let (num, is_bits) = match bits {
            Some(n) => (n, true),
            None => (t.as_str(), false),
        };
        let what = if is_bits { "bit rate" } else { "rate" };
        let v = decimal(num).ok_or_else(|| {
            format!(
                "bad {what} '{text}': give messages per second (10k, 2500) or a bit rate \
                 (50mbit, 1gbit)"
            )
        })?;
        if !(v > 0.0 && v.is_finite()) {
            return Err(format!("{what} '{text}' must be above zero"));
        }
        Ok(if is_bits {
            Rate::BitsPerSec(v)
        } else {
            Rate::MessagesPerSec(v)
        })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::MessagesPerSec(r) => write!(f, "{} msg/s", si(*r)),
            Rate::BitsPerSec(b) => write!(f, "{}bit/s", si(*b)),
        }
    }
}

/// `v` with a decimal prefix: 12500 → "12.5k".
pub fn si(v: f64) -> String {
    let (d, p) = match v.abs() {
        x if x >= 1e9 => (1e9, "G"),
        x if x >= 1e6 => (1e6, "M"),
        x if x >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    let s = format!("{:.3}", v / d);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{p}")
}

/// A number with an optional decimal suffix k, m (mega) or g (lower-cased input).
fn decimal(s: &str) -> Option<f64> {
    let s = s.trim();
    let (n, mult) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1e3),
        'm' => (&s[..s.len() - 1], 1e6),
        'g' => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = n.trim().parse().ok()?;
    Some(v * mult)
}

/// Most offered loads one `--rates` may expand to.
pub const MAX_RATES: usize = 1000;

/// Parses a `--rates` sweep in the grammar of `--sizes` (a list of values and
/// `START..END:STEP` ranges, step `+N` or `*F`), in messages per second with decimal
/// suffixes: `1k..64k:*2` is 1000, 2000, … 64000.
pub fn parse_rates(text: &str) -> Result<Vec<f64>, String> {
    let bad = |item: &str| {
        format!(
            "bad item '{item}' in --rates: give rates in messages/s or ranges START..END:STEP, \
             e.g. 1k..64k:*2 or 5k..50k:+5k"
        )
    };
    let mut out = Vec::new();
    if text.trim().is_empty() {
        return Err("--rates is empty: give e.g. 1k..64k:*2".into());
    }
    for item in text.split(',').map(str::trim) {
        let Some((range, step)) = item.split_once(':') else {
            if item.contains("..") {
                return Err(format!(
                    "range '{item}' in --rates has no step: add ':*2' to double or ':+1k' to add"
                ));
            }
            out.push(one_rate(item).ok_or_else(|| bad(item))?);
            continue;
        };
        let (a, b) = range.split_once("..").ok_or_else(|| bad(item))?;
        let (start, end) = (
            one_rate(a).ok_or_else(|| bad(item))?,
            one_rate(b).ok_or_else(|| bad(item))?,
        );
        if start > end {
            return Err(format!(
                "range '{item}' in --rates: start is above end; put the smaller rate first"
            ));
        }
        let grow: Box<dyn Fn(f64) -> f64> = match (step.strip_prefix('+'), step.strip_prefix('*')) {
            (Some(n), _) => {
                let n = decimal(&n.to_ascii_lowercase()).filter(|n| *n > 0.0);
                let n = n.ok_or_else(|| bad(item))?;
                Box::new(move |x| x + n)
            }
            (_, Some(f)) => {
                let f: f64 = f
                    .trim()
                    .parse()
                    .ok()
                    .filter(|f| *f > 1.0)
                    .ok_or_else(|| bad(item))?;
                Box::new(move |x| x * f)
            }
            _ => return Err(bad(item)),
        };
        let mut x = start;
        // A tolerance of one part in 10^9 keeps a range's end despite rounding.
        while x <= end * (1.0 + 1e-9) {
            out.push(x);
            if out.len() > MAX_RATES {
                return Err(format!("--rates expands to more than {MAX_RATES} rates"));
            }
            x = grow(x);
        }
    }
    Ok(out)
}

fn one_rate(s: &str) -> Option<f64> {
    decimal(&s.to_ascii_lowercase()).filter(|v| *v > 0.0 && v.is_finite())
}

/// The offered load of a rate run (`RunSpec.load`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadSpec {
    /// `--rate`: one offered load for every size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// `--rates`: offered loads swept at one size, messages/s, in the order measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<f64>,
    /// How `--rates` was written.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rates_spec: String,
    /// The arrival process.
    #[serde(default)]
    pub arrivals: Arrivals,
    /// Seed of the Poisson schedule (each trial's generator is derived from it and the trial).
    #[serde(default)]
    pub seed: u64,
}

/// Requests a rate trial carries at the run's lowest offered load when `--trial-time` is
/// not given: three trials then hold 3000 replies, enough for a p99.9 with replies beyond
/// it (a 20 ms trial at 100 requests/s would hold two).
pub const TRIAL_REQUESTS: f64 = 1000.0;

/// The shortest default rate trial, ns (a fast load still runs long enough for the
/// scheduler's and the queues' slower effects to show).
pub const TRIAL_NS_MIN: u64 = 200_000_000;

/// The longest default rate trial, ns: below 100 requests/s the trial holds fewer than
/// [`TRIAL_REQUESTS`] rather than lasting longer.
pub const TRIAL_NS_MAX: u64 = 10_000_000_000;

impl LoadSpec {
    /// The lowest offered load of the run over `sizes`, requests/s (a bit rate makes the
    /// largest size the slowest); `None` without a load.
    pub fn lowest_per_second(&self, sizes: &[u64]) -> Option<f64> {
        let from_rate = self.rate.map(|r| {
            sizes
                .iter()
                .map(|&s| r.per_second(s))
                .fold(f64::INFINITY, f64::min)
        });
        let lowest = from_rate
            .into_iter()
            .chain(self.rates.iter().copied())
            .fold(f64::INFINITY, f64::min);
        (lowest.is_finite() && lowest > 0.0).then_some(lowest)
    }

    /// The trial time of a rate run that did not set one: [`TRIAL_REQUESTS`] requests at
    /// its lowest offered load, within [`TRIAL_NS_MIN`]..=[`TRIAL_NS_MAX`].
    pub fn default_trial_ns(&self, sizes: &[u64]) -> u64 {
        let ns = self
            .lowest_per_second(sizes)
            .map_or(TRIAL_NS_MAX as f64, |r| TRIAL_REQUESTS / r * 1e9);
        (ns.ceil() as u64).clamp(TRIAL_NS_MIN, TRIAL_NS_MAX)
    }

    /// Checks the load against the sizes; the error says the fix.
    pub fn validate(&self, sizes: &[u64]) -> Result<(), String> {
        match (&self.rate, self.rates.is_empty()) {
            (None, true) => {
                return Err(
                    "the rate pattern needs an offered load: give --rate 10k (messages/s), \
                            --rate 50mbit, or sweep with --rates 1k..64k:*2"
                        .into(),
                )
            }
            (Some(_), false) => {
                return Err("give --rate or --rates, not both".into());
            }
            _ => {}
        }
        if !self.rates.is_empty() && sizes.len() != 1 {
            return Err(format!(
                "--rates sweeps the offered load at one message size, but --sizes gives {}: \
                 give one size, e.g. --sizes 64",
                sizes.len()
            ));
        }
        Ok(())
    }
}

/// splitmix64: the schedule's seeded generator (small, fast, reproducible).
#[derive(Debug, Clone, Copy)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    #[inline]
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// The send schedule of one trial: intended send times, ns after the trial's epoch.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    mean_gap_ns: f64,
    poisson: bool,
    rng: SplitMix,
    next_ns: f64,
}

impl Schedule {
    /// `rate` requests/s with `arrivals`; `seed` drives the Poisson gaps. The first request
    /// is due at 0.
    pub fn new(rate: f64, arrivals: Arrivals, seed: u64) -> Self {
        Self {
            mean_gap_ns: 1e9 / rate.max(1e-9),
            poisson: arrivals == Arrivals::Poisson,
            rng: SplitMix::new(seed),
            next_ns: 0.0,
        }
    }

    /// The same schedule with its first request due at `ns` (a flow's place among flows
    /// that share an offered load).
    pub fn starting_at(mut self, ns: f64) -> Self {
        self.next_ns = ns;
        self
    }

    /// The seed of trial number `trial` of a run seeded with `seed`.
    pub fn trial_seed(seed: u64, trial: u64) -> u64 {
        SplitMix::new(seed ^ trial.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
    }

    /// The mean gap between requests, ns.
    pub fn mean_gap_ns(&self) -> f64 {
        self.mean_gap_ns
    }

    /// The intended send time of the next request, ns after the epoch.
    #[inline]
    pub fn next_due(&mut self) -> u64 {
        let due = self.next_ns;
        let gap = if self.poisson {
            -self.rng.unit().ln() * self.mean_gap_ns
        } else {
            self.mean_gap_ns
        };
        self.next_ns += gap;
        due as u64
    }
}

/// A point's offered load and what came of it (`PointResult.rate`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct RateFigures {
    /// Offered load, requests per second.
    pub offered_rate: f64,
    /// Replies received per second of schedule, per timed trial (mean, CI, best).
    pub delivered_rate: Estimate,
    /// The arrival process.
    pub arrivals: Arrivals,
    /// Requests sent in the timed trials.
    pub sent: u64,
    /// Replies received (distinct requests answered) before each trial's end.
    pub received: u64,
    /// Requests never answered within the trial's grace period (sent − received).
    pub lost: u64,
    /// Replies that came after the grace period (tcp: waited for, not in the latency
    /// histogram) or after their trial ended (datagrams: an earlier trial's echo).
    pub late: u64,
    /// Sender lateness: actual send time − intended send time, ns.
    pub lateness_ns: Distribution,
    /// The sender could not keep the schedule (median lateness above 10% of the mean gap):
    /// the offered load was not what was asked; see the point's notes.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub schedule_missed: bool,
    /// Per-interval samples (`--interval`), over the timed trials end to end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineSample>,
}

#[cfg(test)]
mod tests;
