//! What the runs of an experiment measured, arranged by cell and repetition: a figure's value
//! per repetition (the clients of one cell combined), its spread over the repetitions, the
//! claims' verdicts, and the effects — differences between neighbouring cells larger than the
//! spread — that a page reports.

use super::arithmetic::link_of;
use super::claim::{ClaimExpr, Resolved};
use super::design::Design;
use super::metric::{Combine, Metric, PointContext};
use super::spread::{spread, Spread};
use super::verdict::{evaluate, Verdict};
use crate::results::RunResult;
use serde::{Deserialize, Serialize};

/// The results of every cell's repetitions: `runs[cell][rep − 1]` holds each client's results.
#[derive(Debug, Clone)]
pub struct Observations<'a> {
    repeat: u32,
    runs: Vec<Vec<Vec<&'a RunResult>>>,
}

impl<'a> Observations<'a> {
    /// No results yet for `cells` cells of `repeat` repetitions.
    pub fn new(cells: usize, repeat: u32) -> Self {
        Observations {
            repeat,
            runs: vec![vec![Vec::new(); repeat as usize]; cells],
        }
    }

    /// Adds one client's results of `cell`'s repetition `rep` (from 1); out-of-range is ignored.
    pub fn add(&mut self, cell: usize, rep: u32, result: &'a RunResult) {
        if let Some(slot) = self
            .runs
            .get_mut(cell)
            .and_then(|c| c.get_mut(rep.wrapping_sub(1) as usize))
        {
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

    /// The figure in one repetition: each client's value at `size` (or at its one point when
    /// `size` is `None`), combined over the clients; `None` when a client did not measure it.
    pub fn value(&self, cell: usize, rep: u32, m: &Metric, size: Option<u64>) -> Option<f64> {
        let clients = self.results(cell, rep);
        if clients.is_empty() {
            return None;
        }
        let mut acc = 0.0;
        let mut squares = 0.0;
        for r in clients {
            let p = match size {
                Some(s) => r.points.iter().find(|p| p.size == s)?,
                None if r.points.len() == 1 => &r.points[0],
                None => return None,
            };
            let link = r.lab.as_ref().and_then(|l| link_of(l, &r.peer, &r.spec));
            let ctx = PointContext {
                spec: &r.spec,
                link: link.as_ref(),
                lab: r.lab.as_ref(),
            };
            let v = (m.read)(p, &ctx).filter(|v| v.is_finite())?;
            acc += v;
            squares += v * v;
        }
        Some(match m.combine {
            Combine::Sum => acc,
            Combine::Mean => acc / clients.len() as f64,
            Combine::Jain if squares > 0.0 => acc * acc / (clients.len() as f64 * squares),
            Combine::Jain => return None,
        })
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
        evaluate(claim, resolved, &values, self.repeat)
    }
}

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
