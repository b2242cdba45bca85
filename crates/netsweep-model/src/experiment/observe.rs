//! What the runs of an experiment measured, arranged by cell and repetition: a figure's value
//! per repetition (the clients of one cell combined), its spread over the repetitions, the
//! claims' verdicts, and the effects — differences between neighbouring cells larger than the
//! spread — that a page reports.

use super::arithmetic::link_of;
use super::claim::{ClaimExpr, Resolved};
use super::design::Design;
use super::metric::{Combine, Metric, MetricUnit, PointContext};
use super::spread::{spread, Spread};
use super::verdict::{evaluate, Outcome, Verdict};
use crate::results::{PointResult, RunResult};
use crate::rpm::result::RpmResult;
use crate::window;
use serde::{Deserialize, Serialize};

/// The results of every cell's repetitions: `runs[cell][rep − 1]` holds each client's results
/// of `netsweep run`, `rpm[cell][rep − 1]` each client's of `netsweep rpm`.
#[derive(Debug, Clone)]
pub struct Observations<'a> {
    repeat: u32,
    runs: Vec<Vec<Vec<&'a RunResult>>>,
    rpm: Vec<Vec<Vec<&'a RpmResult>>>,
}

impl<'a> Observations<'a> {
    /// No results yet for `cells` cells of `repeat` repetitions.
    pub fn new(cells: usize, repeat: u32) -> Self {
        Observations {
            repeat,
            runs: vec![vec![Vec::new(); repeat as usize]; cells],
            rpm: vec![vec![Vec::new(); repeat as usize]; cells],
        }
    }

    /// Adds one client's responsiveness test of `cell`'s repetition `rep` (from 1);
    /// out-of-range is ignored.
    pub fn add_rpm(&mut self, cell: usize, rep: u32, result: &'a RpmResult) {
        if let Some(slot) = slot(&mut self.rpm, cell, rep) {
            slot.push(result);
        }
    }

    /// Adds one client's results of `cell`'s repetition `rep` (from 1); out-of-range is ignored.
    pub fn add(&mut self, cell: usize, rep: u32, result: &'a RunResult) {
        if let Some(slot) = slot(&mut self.runs, cell, rep) {
            slot.push(result);
        }
    }

    /// Repetitions per cell.
    pub fn repeat(&self) -> u32 {
        self.repeat
    }

    /// Results of one repetition of a cell.
    pub fn results(&self, cell: usize, rep: u32) -> &[&'a RunResult] {
        self.runs
            .get(cell)
            .and_then(|c| c.get(rep.wrapping_sub(1) as usize))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Responsiveness tests of one repetition of a cell.
    pub fn rpm_results(&self, cell: usize, rep: u32) -> &[&'a RpmResult] {
        self.rpm
            .get(cell)
            .and_then(|c| c.get(rep.wrapping_sub(1) as usize))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// True when one repetition of a cell measured anything: a point, or a responsiveness
    /// test with a direction.
    pub fn measured(&self, cell: usize, rep: u32) -> bool {
        self.results(cell, rep).iter().any(|r| !r.points.is_empty())
            || self
                .rpm_results(cell, rep)
                .iter()
                .any(|r| !r.directions.is_empty())
    }

    /// Every size any repetition of `cell` measured, ascending.
    pub fn sizes(&self, cell: usize) -> Vec<u64> {
        let mut s: Vec<u64> = self
            .runs
            .get(cell)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|r| r.points.iter().map(|p| p.size))
            .collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    /// Each client's point at `size` (or its one point when `size` is `None`) in one
    /// repetition; `None` when a client did not measure it.
    fn points(&self, cell: usize, rep: u32, size: Option<u64>) -> Option<Vec<&'a PointResult>> {
        self.results(cell, rep)
            .iter()
            .map(|r| match size {
                Some(s) => r.points.iter().find(|p| p.size == s),
                None if r.points.len() == 1 => r.points.first(),
                None => None,
            })
            .collect()
    }

    /// Why the clients of one repetition cannot be summed (their points did not run at
    /// once, [`window::together`]); `None` for one client, or clients that ran together.
    pub fn apart(&self, cell: usize, rep: u32, size: Option<u64>) -> Option<String> {
        let points = self.points(cell, rep, size)?;
        let windows: Vec<_> = points.iter().map(|p| p.window).collect();
        window::together(&windows).err()
    }

    /// The figure in one repetition: each client's value at `size` (or at its one point when
    /// `size` is `None`), combined over the clients; `None` when a client did not measure it,
    /// or when several clients did not measure at once ([`Self::apart`]). Summed over several
    /// clients, a rate is each one's over its window ([`window::MeasuredWindow::duty`]): the
    /// sum is what they moved together, not rates taken while others were between trials.
    pub fn value(&self, cell: usize, rep: u32, m: &Metric, size: Option<u64>) -> Option<f64> {
        if let Some(read) = m.rpm {
            // A responsiveness test's figure: each client's, no sizes, no windows to align.
            let tests = self.rpm_results(cell, rep);
            let values: Option<Vec<f64>> = tests
                .iter()
                .map(|r| read(r).filter(|v| v.is_finite()))
                .collect();
            return combine(m.combine, &values?);
        }
        let clients = self.results(cell, rep);
        let points = self.points(cell, rep, size)?;
        if points.is_empty() || self.apart(cell, rep, size).is_some() {
            return None;
        }
        let several = clients.len() > 1;
        let mut values = Vec::with_capacity(points.len());
        for (r, p) in clients.iter().zip(points) {
            let link = r.lab.as_ref().and_then(|l| link_of(l, &r.peer, &r.spec));
            let ctx = PointContext {
                spec: &r.spec,
                link: link.as_ref(),
                lab: r.lab.as_ref(),
            };
            let mut v = (m.read)(p, &ctx).filter(|v| v.is_finite())?;
            if several && m.combine == Combine::Sum && m.unit == MetricUnit::Mbps {
                // Over its window, its gaps between trials idle: the others ran through them.
                v *= p.window.map_or(1.0, |w| w.duty());
            }
            values.push(v);
        }
        combine(m.combine, &values)
    }

    /// The figure in every repetition (index r − 1).
    pub fn values(&self, cell: usize, m: &Metric, size: Option<u64>) -> Vec<Option<f64>> {
        (1..=self.repeat)
            .map(|r| self.value(cell, r, m, size))
            .collect()
    }

    /// The figure's spread over the repetitions.
    pub fn spread(&self, cell: usize, m: &Metric, size: Option<u64>) -> Option<Spread> {
        let v: Vec<f64> = self.values(cell, m, size).into_iter().flatten().collect();
        spread(&v)
    }

    /// The within-run 95% confidence interval of the throughput, relative, median over the
    /// repetitions (what one run alone would have claimed).
    pub fn within_run_ci(&self, cell: usize, size: Option<u64>) -> Option<f64> {
        let mut v: Vec<f64> = (1..=self.repeat)
            .filter_map(|rep| {
                let r = self.results(cell, rep).first()?;
                let p = match size {
                    Some(s) => r.points.iter().find(|p| p.size == s)?,
                    None => r.points.first()?,
                };
                p.throughput_mbps.relative_ci()
            })
            .filter(|x| x.is_finite())
            .collect();
        spread(&std::mem::take(&mut v)).map(|s| s.median)
    }

    /// Evaluates a resolved claim on these results.
    pub fn verdict(&self, claim: &ClaimExpr, resolved: &[Resolved]) -> Verdict {
        let values: Vec<Vec<Option<f64>>> = resolved
            .iter()
            .map(|r| self.values(r.cell, r.metric, r.size))
            .collect();
        let mut v = evaluate(claim, resolved, &values, self.repeat);
        if let Some(why) = self.invalid(resolved, &values) {
            v.outcome = Outcome::Invalid;
            v.reason = why;
        }
        v
    }

    /// Why a claim's figures cannot all hold, whatever the comparison says: a repetition
    /// whose clients did not measure at once, or a figure of what crossed the link above the
    /// link's rate ([`CARRIED`], by more than [`OVER_LINK`]).
    fn invalid(&self, resolved: &[Resolved], values: &[Vec<Option<f64>>]) -> Option<String> {
        let link_rate = super::metric::metric("link_rate")?;
        for (r, vals) in resolved.iter().zip(values) {
            for rep in 1..=self.repeat {
                if let Some(why) = self.apart(r.cell, rep, r.size) {
                    return Some(format!("`{}`, repetition {rep}: {why}", r.metric.name));
                }
                if !CARRIED.contains(&r.metric.name) {
                    continue;
                }
                let v = vals.get(rep as usize - 1).copied().flatten();
                let link = self.value(r.cell, rep, link_rate, r.size);
                if let (Some(v), Some(l)) = (v, link) {
                    if v > l * OVER_LINK {
                        return Some(format!(
                            "`{}` is {} in repetition {rep}, more than the link's {} carries: \
                             the figures cannot all hold (rates over different windows, or \
                             a shaper's burst)",
                            r.metric.name,
                            r.metric.unit.format(v),
                            r.metric.unit.format(l)
                        ));
                    }
                }
            }
        }
        None
    }
}

/// The results of `cell`'s repetition `rep` (from 1), if both are in range.
fn slot<T>(all: &mut [Vec<Vec<T>>], cell: usize, rep: u32) -> Option<&mut Vec<T>> {
    all.get_mut(cell)?.get_mut(rep.wrapping_sub(1) as usize)
}

/// The clients' values of one repetition combined as `how` says; `None` for no clients.
fn combine(how: Combine, values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let acc: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    Some(match how {
        Combine::Sum => acc,
        Combine::Mean => acc / n,
        Combine::Jain if squares > 0.0 => acc * acc / (n * squares),
        Combine::Jain => return None,
    })
}

/// Figures of what crossed the link one way, which cannot exceed its rate.
pub const CARRIED: &[&str] = &["wire_mbps", "receiver_mbps", "delivered_mbps"];

/// How far over the link's rate a [`CARRIED`] figure may read before it is impossible: a
/// shaper's burst lets a short window read a few percent high.
pub const OVER_LINK: f64 = 1.05;

/// A difference between two cells that differ in one factor's neighbouring levels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// The factor that differs.
    pub factor: String,
    /// The cell at the lower level.
    pub from: usize,
    /// The cell at the next level.
    pub to: usize,
    /// Their spreads.
    pub from_spread: Spread,
    /// Their spreads.
    pub to_spread: Spread,
    /// Median of `to` ÷ median of `from`.
    pub ratio: f64,
    /// True when the intervals do not overlap: an effect, not noise.
    pub effect: bool,
}

/// The differences between neighbouring levels of every factor, the other factors held
/// fixed, for figure `m` at `size`.
pub fn effects(
    design: &Design,
    obs: &Observations<'_>,
    m: &Metric,
    size: Option<u64>,
) -> Vec<Effect> {
    let mut out = Vec::new();
    for (fi, f) in design.factors.iter().enumerate() {
        for (a, ca) in design.cells.iter().enumerate() {
            let Some(la) = ca.level_of(fi) else { continue };
            let Some(b) = design.cells.iter().position(|cb| {
                cb.run == ca.run
                    && cb.level_of(fi) == Some(la + 1)
                    && cb
                        .at
                        .iter()
                        .all(|&(g, l)| g == fi || ca.level_of(g) == Some(l))
            }) else {
                continue;
            };
            let (Some(sa), Some(sb)) = (obs.spread(a, m, size), obs.spread(b, m, size)) else {
                continue;
            };
            out.push(Effect {
                factor: f.name.clone(),
                from: a,
                to: b,
                from_spread: sa,
                to_spread: sb,
                ratio: if sa.median != 0.0 {
                    sb.median / sa.median
                } else {
                    f64::NAN
                },
                effect: sa.differs_from(&sb),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::claim;
    use crate::window::MeasuredWindow;

    /// A one-point tcp pingpong client across a 100 Mbit/s link, its receiver rate `mbps`,
    /// its timed trials from `from` to `to` seconds.
    fn client(mbps: f64, from: f64, to: f64) -> RunResult {
        let text = include_str!("../../../../tests/data/tcp-pingpong.json");
        let mut r = crate::results::load(text).unwrap();
        r.points.truncate(1);
        r.peer = "198.18.1.2:7200".into();
        r.lab = Some(serde_json::json!({
            "links": [{
                "name": "shared", "mtu": 1500,
                "a": {"host": "client", "addr": "198.18.1.1"},
                "b": {"host": "server", "addr": "198.18.1.2"},
                "shapers": [{"toward": "server", "rate": 100_000_000u64}]
            }]
        }));
        let p = &mut r.points[0];
        p.receiver_mbps = Some(crate::results::Estimate {
            mean: mbps,
            ci95: None,
            max: mbps,
            trials: 1,
        });
        p.window = Some(MeasuredWindow {
            from_unix_ns: (from * 1e9) as u64,
            to_unix_ns: (to * 1e9) as u64,
            trials_ns: 0,
        });
        r
    }

    fn verdict(obs: &Observations<'_>, check: &str) -> Verdict {
        let expr = claim::parse(check).unwrap();
        let resolved: Vec<Resolved> = expr
            .figures()
            .into_iter()
            .map(|f| Resolved {
                cell: 0,
                metric: super::super::metric::metric(&f.metric).unwrap(),
                size: None,
            })
            .collect();
        obs.verdict(&expr, &resolved)
    }

    #[test]
    fn clients_that_measured_at_once_sum_and_clients_one_after_another_do_not() {
        let m = super::super::metric::metric("receiver_mbps").unwrap();
        let (a, b) = (client(40.0, 0.0, 1.0), client(50.0, 0.05, 1.04));
        let mut obs = Observations::new(1, 1);
        obs.add(0, 1, &a);
        obs.add(0, 1, &b);
        assert_eq!(obs.apart(0, 1, None), None);
        assert_eq!(obs.value(0, 1, m, None), Some(90.0));

        // Each in its trials 90% of its window: while one is between trials the other runs
        // faster, so the sum counts each rate over its whole window.
        let (mut a, mut b) = (client(60.0, 0.0, 1.0), client(60.0, 0.0, 1.0));
        for r in [&mut a, &mut b] {
            r.points[0].window.as_mut().unwrap().trials_ns = 900_000_000;
        }
        let mut obs = Observations::new(1, 1);
        obs.add(0, 1, &a);
        obs.add(0, 1, &b);
        let sum = obs.value(0, 1, m, None).unwrap();
        assert!((sum - 108.0).abs() < 1e-9, "{sum}");
        // One client alone: its rate over its trials, as every single run reports it.
        let mut obs = Observations::new(1, 1);
        obs.add(0, 1, &a);
        assert_eq!(obs.value(0, 1, m, None), Some(60.0));

        // Seed 002's many-clients run as it was: each client alone for part of its point.
        let (a, b) = (client(60.0, 0.0, 1.0), client(60.0, 0.6, 1.6));
        let mut obs = Observations::new(1, 1);
        obs.add(0, 1, &a);
        obs.add(0, 1, &b);
        let why = obs.apart(0, 1, None).unwrap();
        assert!(why.contains("only 40%"), "{why}");
        assert_eq!(obs.value(0, 1, m, None), None);
    }

    #[test]
    fn a_claim_on_clients_apart_or_on_more_than_the_link_carries_is_invalid() {
        // Three repetitions, each two clients apart: a sum of 120 Mbit/s over a 100 Mbit/s
        // link that a plain comparison would call `holds`.
        // Three repetitions of two clients each: client i's results.
        let decide = |runs: &[RunResult], check: &str| {
            let mut obs = Observations::new(1, 3);
            for (i, r) in runs.iter().enumerate() {
                obs.add(0, 1 + i as u32 / 2, r);
            }
            verdict(&obs, check)
        };
        let apart: Vec<RunResult> = (0..6)
            .map(|i| client(60.0, f64::from(i % 2) * 0.6, 1.0 + f64::from(i % 2) * 0.6))
            .collect();
        let v = decide(&apart, "receiver_mbps[run=x] > 0.9 * link_rate[run=x]");
        assert_eq!(v.outcome, Outcome::Invalid, "{v:?}");
        assert!(v.reason.contains("did not measure at once"), "{}", v.reason);

        // At once, but 120 Mbit/s received through a 100 Mbit/s link: impossible.
        let over: Vec<RunResult> = (0..6).map(|_| client(60.0, 0.0, 1.0)).collect();
        let v = decide(&over, "receiver_mbps[run=x] > 0.9 * link_rate[run=x]");
        assert_eq!(v.outcome, Outcome::Invalid, "{v:?}");
        assert!(v.reason.contains("more than the link"), "{}", v.reason);

        // 45 + 45 at once through 100 Mbit/s: decided as usual.
        let fits: Vec<RunResult> = (0..6).map(|_| client(45.0, 0.0, 1.0)).collect();
        let v = decide(&fits, "receiver_mbps[run=x] > 0.8 * link_rate[run=x]");
        assert_eq!(v.outcome, Outcome::Holds, "{v:?}");
    }
}
