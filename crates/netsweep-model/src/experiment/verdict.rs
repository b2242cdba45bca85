//! Evaluating a claim on the repetitions: each side is computed per repetition (repetition r
//! of every cell ran in the same round, so they pair), and the claim is decided on the
//! interval of the median of the paired difference (`>`/`<`) or ratio (`in`, `within`):
//! `holds` when the whole interval is on the claim's side of the threshold, `fails` when the
//! whole interval is on the other side, `undecided` when the spread straddles it.

use super::claim::{ClaimExpr, Cmp, Operand, Resolved, Side, Test};
use super::metric::{sig, MetricUnit};
use super::spread::{spread, Spread};
use serde::{Deserialize, Serialize};

/// Fewest repetitions a verdict other than `undecided` needs.
pub const MIN_REPETITIONS: u32 = 3;

/// A claim's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The whole interval is on the claim's side.
    Holds,
    /// The whole interval is on the other side.
    Fails,
    /// The spread straddles the threshold, or too few repetitions measured it.
    Undecided,
    /// The figures cannot all hold: a sum over clients that did not measure at once, or a
    /// rate above what the link carries. An error the page shows, and `--check` fails on.
    Invalid,
}

impl Outcome {
    /// `holds`, `fails`, `undecided`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Holds => "holds",
            Outcome::Fails => "fails",
            Outcome::Undecided => "undecided",
            Outcome::Invalid => "invalid",
        }
    }
}

/// A claim with its verdict and the numbers behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The claim as written (`check`).
    pub check: String,
    /// The scenario's words for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub says: Option<String>,
    /// The seed's own words, quoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// holds, fails, undecided or invalid.
    pub outcome: Outcome,
    /// Why, with the numbers.
    pub reason: String,
    /// The left side over the repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left: Option<Spread>,
    /// The right side over the repetitions (comparisons and `within`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub right: Option<Spread>,
    /// What is decided on: left − right, left ÷ right, or left, per repetition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistic: Option<Spread>,
    /// What `statistic` is, in words.
    pub statistic_is: String,
    /// The threshold(s) the statistic is held against.
    pub threshold: String,
    /// The unit of the sides.
    pub unit: MetricUnit,
}

/// A side's value in repetition `r`, from the resolved figures' values (`values[i][r]` for
/// the i-th figure of the claim, `None` where a repetition did not measure it).
fn side_value(
    side: &Side,
    figs: &mut std::slice::Iter<'_, Vec<Option<f64>>>,
    r: usize,
) -> (Option<f64>, usize) {
    let mut used = 0;
    let mut get = |o: &Operand| match o {
        Operand::Constant { value, .. } => Some(*value),
        Operand::Figure(_) => {
            used += 1;
            figs.next().and_then(|v| v.get(r).copied().flatten())
        }
    };
    let num = get(&side.num);
    let den = side.den.as_ref().map(&mut get);
    let v = match (num, den) {
        (Some(n), None) => Some(side.times * n + side.plus),
        (Some(n), Some(Some(d))) if d != 0.0 => Some(side.times * n / d + side.plus),
        _ => None,
    };
    (v, used)
}

/// The unit of a side: a figure's unit, a ratio of figures is plain.
fn side_unit(side: &Side, units: &mut std::slice::Iter<'_, MetricUnit>) -> MetricUnit {
    let mut next = |o: &Operand| match o {
        Operand::Figure(_) => units.next().copied(),
        Operand::Constant { unit, .. } => *unit,
    };
    let num = next(&side.num);
    let den = side.den.as_ref().and_then(&mut next);
    match (num, den, &side.den) {
        (Some(u), None, None) => u,
        (Some(u), None, Some(Operand::Constant { unit: None, .. })) => u,
        _ => MetricUnit::Plain,
    }
}

/// Evaluates `claim` on `values[i]` — the per-repetition values of its i-th resolved figure
/// (`resolved[i]`) — over `repeat` repetitions.
pub fn evaluate(
    claim: &ClaimExpr,
    resolved: &[Resolved],
    values: &[Vec<Option<f64>>],
    repeat: u32,
) -> Verdict {
    let units: Vec<MetricUnit> = resolved.iter().map(|r| r.metric.unit).collect();
    let mut ui = units.iter();
    let unit = side_unit(&claim.left, &mut ui);
    let right_side = match &claim.test {
        Test::Compare(_, s) | Test::Within(_, s) => Some(s),
        Test::Range(..) => None,
    };
    let (mut ls, mut rs, mut stat) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..repeat as usize {
        let mut it = values.iter();
        let (l, _) = side_value(&claim.left, &mut it, r);
        let rv = right_side.map(|s| side_value(s, &mut it, r).0);
        if let Some(l) = l {
            ls.push(l);
        }
        if let Some(Some(x)) = rv {
            rs.push(x);
        }
        let s = match (&claim.test, l, rv) {
            (Test::Compare(..), Some(l), Some(Some(x))) => Some(l - x),
            (Test::Within(..), Some(l), Some(Some(x))) if x != 0.0 => Some(l / x),
            (Test::Range(..), Some(l), None) => Some(l),
            _ => None,
        };
        stat.extend(s);
    }
    let (left, right, statistic) = (spread(&ls), spread(&rs), spread(&stat));
    let fmt = |u: MetricUnit, v: f64| u.format(v);
    let (statistic_is, threshold, stat_unit, lo_t, hi_t) = match &claim.test {
        Test::Compare(op, _) => (
            "left − right".to_string(),
            format!("{} 0", op.symbol()),
            unit,
            0.0,
            0.0,
        ),
        Test::Range(lo, hi) => (
            "left".to_string(),
            format!("{} … {}", fmt(unit, *lo), fmt(unit, *hi)),
            unit,
            *lo,
            *hi,
        ),
        Test::Within(p, _) => (
            "left ÷ right".to_string(),
            format!("{}× … {}×", sig(1.0 - p), sig(1.0 + p)),
            MetricUnit::Plain,
            1.0 - p,
            1.0 + p,
        ),
    };
    let mut v = Verdict {
        check: String::new(),
        says: None,
        seed: None,
        outcome: Outcome::Undecided,
        reason: String::new(),
        left,
        right,
        statistic,
        statistic_is,
        threshold,
        unit,
    };
    let Some(s) = statistic else {
        v.reason = "no repetition measured every figure the claim names".into();
        return v;
    };
    let interval = format!(
        "{} is {} … {} (median {}; {}% interval over {} repetitions)",
        v.statistic_is,
        fmt(stat_unit, s.lo),
        fmt(stat_unit, s.hi),
        fmt(stat_unit, s.median),
        sig(s.confidence * 100.0),
        s.n
    );
    if s.n < MIN_REPETITIONS {
        v.reason = format!(
            "{} repetition{} measured it: too few for a spread — set repeat = {MIN_REPETITIONS} or more",
            s.n,
            if s.n == 1 { "" } else { "s" }
        );
        return v;
    }
    let (outcome, how) = match &claim.test {
        Test::Compare(op, _) => {
            let above = match op {
                Cmp::Gt => s.lo > 0.0,
                Cmp::Ge => s.lo >= 0.0,
                Cmp::Lt => s.hi < 0.0,
                Cmp::Le => s.hi <= 0.0,
            };
            let below = match op {
                Cmp::Gt => s.hi <= 0.0,
                Cmp::Ge => s.hi < 0.0,
                Cmp::Lt => s.lo >= 0.0,
                Cmp::Le => s.lo > 0.0,
            };
            if above {
                (Outcome::Holds, format!("wholly {} 0", op.symbol()))
            } else if below {
                (
                    Outcome::Fails,
                    format!("wholly on the other side of 0 than {}", op.symbol()),
                )
            } else {
                (Outcome::Undecided, "the spread straddles 0".to_string())
            }
        }
        Test::Range(..) | Test::Within(..) => {
            if s.lo >= lo_t && s.hi <= hi_t {
                (Outcome::Holds, format!("inside {}", v.threshold))
            } else if s.hi < lo_t || s.lo > hi_t {
                (Outcome::Fails, format!("outside {}", v.threshold))
            } else {
                (
                    Outcome::Undecided,
                    format!("the spread straddles an end of {}", v.threshold),
                )
            }
        }
    };
    v.outcome = outcome;
    v.reason = format!("{interval}: {how}");
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::claim::{parse, resolve};
    use crate::experiment::design::{Cell, Design, Factor, FactorKind, Level};

    fn design() -> Design {
        let level = |n: &str| Level {
            name: n.into(),
            label: n.into(),
            args: vec![],
            value: None,
            x: None,
        };
        let cell = |l: usize, n: &str| Cell {
            name: n.into(),
            run: "rtt".into(),
            at: vec![(0, l)],
            levels: [("load".to_string(), n.to_string())].into(),
        };
        Design {
            factors: vec![Factor {
                name: "load".into(),
                label: "load".into(),
                kind: FactorKind::Args,
                levels: vec![level("idle"), level("loaded")],
            }],
            cells: vec![cell(0, "idle"), cell(1, "loaded")],
            repeat: 5,
            order: Default::default(),
        }
    }

    fn verdict(check: &str, idle: &[f64], loaded: &[f64]) -> Verdict {
        let d = design();
        let c = parse(check).unwrap();
        let r = resolve(&c, &d, &|_| None).unwrap();
        let values: Vec<Vec<Option<f64>>> = r
            .iter()
            .map(|r| {
                let v = if r.cell == 0 { idle } else { loaded };
                v.iter().map(|x| Some(*x)).collect()
            })
            .collect();
        evaluate(&c, &r, &values, idle.len() as u32)
    }

    const IDLE: [f64; 5] = [84e3, 85e3, 84.5e3, 86e3, 84.2e3];
    const LOADED: [f64; 5] = [22e6, 23e6, 22.5e6, 25e6, 21e6];

    #[test]
    fn a_large_paired_difference_holds_and_its_opposite_fails() {
        let v = verdict(
            "rtt_p50[load=loaded] > 10 * rtt_p50[load=idle]",
            &IDLE,
            &LOADED,
        );
        assert_eq!(v.outcome, Outcome::Holds, "{}", v.reason);
        assert_eq!(v.left.unwrap().median, 22.5e6);
        assert_eq!(v.right.unwrap().median, 845e3);
        let v = verdict("rtt_p50[load=loaded] < rtt_p50[load=idle]", &IDLE, &LOADED);
        assert_eq!(v.outcome, Outcome::Fails, "{}", v.reason);
        assert!(v.reason.contains("5 repetitions"), "{}", v.reason);
    }

    #[test]
    fn a_spread_across_the_threshold_is_undecided() {
        // Loaded is 1.0–1.04× idle, repetition by repetition: the claim "within 1%" straddles.
        let loaded: Vec<f64> = IDLE
            .iter()
            .zip([1.0, 1.005, 1.02, 1.04, 1.001])
            .map(|(a, f)| a * f)
            .collect();
        let v = verdict(
            "rtt_p50[load=loaded] within 1% of rtt_p50[load=idle]",
            &IDLE,
            &loaded,
        );
        assert_eq!(v.outcome, Outcome::Undecided, "{}", v.reason);
        assert!(v.reason.contains("straddles"), "{}", v.reason);
        let v = verdict(
            "rtt_p50[load=loaded] within 5% of rtt_p50[load=idle]",
            &IDLE,
            &loaded,
        );
        assert_eq!(v.outcome, Outcome::Holds, "{}", v.reason);
        let v = verdict(
            "rtt_p50[load=loaded] / rtt_p50[load=idle] in 1.1..1.2",
            &IDLE,
            &loaded,
        );
        assert_eq!(v.outcome, Outcome::Fails, "{}", v.reason);
    }

    #[test]
    fn too_few_repetitions_leave_it_undecided() {
        let v = verdict(
            "rtt_p50[load=loaded] > rtt_p50[load=idle]",
            &IDLE[..2],
            &LOADED[..2],
        );
        assert_eq!(v.outcome, Outcome::Undecided);
        assert!(v.reason.contains("repeat = 3"), "{}", v.reason);
        let v = verdict("rtt_p50[load=idle] < 100us", &IDLE, &LOADED);
        assert_eq!(v.outcome, Outcome::Holds, "{}", v.reason);
        assert!(v.reason.contains("µs"), "{}", v.reason);
    }
}
