//! Resolving a claim's figures to the cells of a design (and to one size of each cell's
//! sweep), refusing a claim that could never fail: a figure, factor, level or size that does
//! not exist, a selector that picks no cell or several, a figure the cell's pattern does not
//! measure, a number without the figure's unit, or a side compared with itself.

use super::claim::{CellFacts, ClaimExpr, FigureRef, Operand, Resolved, Side, Test};
use super::design::Design;
use super::metric::{self, MetricUnit};

/// Resolves every figure of `claim` to a cell of `design` (and a size, using `facts` when
/// given), or says why the claim could never fail: a figure, factor, level or size that does
/// not exist, a selector that picks no cell or several, a figure the cell's pattern does not
/// measure, a side compared with itself, or a claim without a measured figure.
pub fn resolve(
    claim: &ClaimExpr,
    design: &Design,
    facts: &dyn Fn(usize) -> Option<CellFacts>,
) -> Result<Vec<Resolved>, String> {
    let mut out = Vec::new();
    for f in claim.figures() {
        let Some(m) = metric::metric(&f.metric) else {
            return Err(format!(
                "no figure called \"{}\": the figures are {}",
                f.metric,
                metric::names()
            ));
        };
        let mut cells = design.select(&f.selector)?;
        // Of the cells the selector picks, those that measure the figure: a scenario whose
        // runs measure different things (a pingpong and an rpm test) names the figure, not
        // the run. A cell without facts is a `netsweep run`'s, of a pattern not known yet.
        if cells.len() > 1 {
            let measuring: Vec<usize> = cells
                .iter()
                .copied()
                .filter(|&c| match facts(c) {
                    Some(x) => m.measured_by(x.measures),
                    None => m.rpm.is_none(),
                })
                .collect();
            if !measuring.is_empty() {
                cells = measuring;
            }
        }
        let cell = match cells[..] {
            [c] => c,
            [] => {
                return Err(format!(
                    "{} picks no cell: no run has all of those levels",
                    show(f)
                ))
            }
            _ => {
                let free: Vec<&str> = design
                    .factors
                    .iter()
                    .filter(|fa| !f.selector.iter().any(|(k, _)| *k == fa.name))
                    .map(|fa| fa.name.as_str())
                    .collect();
                return Err(format!(
                    "{} picks {} cells: name a level of {} too",
                    show(f),
                    cells.len(),
                    if free.is_empty() {
                        "run".to_string()
                    } else {
                        super::design::quoted(free)
                    }
                ));
            }
        };
        let mut size = f.size;
        if let Some(facts) = facts(cell) {
            if !m.measured_by(facts.measures) {
                return Err(format!(
                    "{}: {} does not measure {} (only {} does)",
                    show(f),
                    facts.measures.name(),
                    f.metric,
                    m.pattern_list()
                ));
            }
            match (size, &facts.sizes[..]) {
                (Some(s), sizes) if !sizes.contains(&s) => {
                    return Err(format!(
                        "{}: the cell's sweep has no {s}-byte point: pick one of its sizes",
                        show(f)
                    ))
                }
                (None, [one]) => size = Some(*one),
                (None, many) if many.len() > 1 => {
                    return Err(format!(
                        "{}: the cell measures {} sizes: add size=… (e.g. size={})",
                        show(f),
                        many.len(),
                        many[0]
                    ))
                }
                _ => {}
            }
        }
        out.push(Resolved {
            cell,
            metric: m,
            size,
        });
    }
    if out.is_empty() {
        return Err("compares numbers only: name a measured figure, e.g. rtt_p50[band=1]".into());
    }
    check_units(claim, &out)?;
    let key = |r: &Resolved| (r.cell, r.metric.name, r.size);
    // Two sides that select the same figures of the same cells are decided by their
    // constants alone (`x <= 2 * x`, `x <= x + 1mbit`), whatever was measured.
    let same_figures = |a: &Side, b: &Side, ra: &[Resolved], rb: &[Resolved]| {
        let keys = |r: &[Resolved]| {
            let mut k: Vec<_> = r.iter().map(key).collect();
            k.sort_unstable();
            k
        };
        a.den.is_some() == b.den.is_some() && keys(ra) == keys(rb)
    };
    let nl = claim.left.figures().count();
    let (rl, rr) = out.split_at(nl);
    match &claim.test {
        Test::Compare(_, right) | Test::Within(_, right)
            if same_figures(&claim.left, right, rl, rr) =>
        {
            let what = if claim.left.times == right.times && claim.left.plus == right.plus {
                ""
            } else {
                " (only the constants differ, and they decide it)"
            };
            return Err(format!(
                "compares a figure with itself{what}: it can never fail — pick another cell for \
                 one side"
            ));
        }
        _ => {}
    }
    if let (Some(Operand::Figure(_)), Operand::Figure(_)) = (&claim.left.den, &claim.left.num) {
        if rl.len() == 2 && key(&rl[0]) == key(&rl[1]) {
            return Err("divides a figure by itself: the ratio is always 1 — pick another cell for one side".into());
        }
    }
    Ok(out)
}

/// A lone number held against a lone figure must carry the figure's unit (`100us`, not `100`).
fn check_units(claim: &ClaimExpr, resolved: &[Resolved]) -> Result<(), String> {
    fn lone(s: &Side) -> Option<&Operand> {
        s.den.is_none().then_some(&s.num)
    }
    let right = match &claim.test {
        Test::Compare(_, r) => r,
        _ => return Ok(()),
    };
    let (Some(l), Some(r)) = (lone(&claim.left), lone(right)) else {
        return Ok(());
    };
    let (figure, unit, value) = match (l, r) {
        (Operand::Figure(f), Operand::Constant { unit, value }) => (f, unit, value),
        (Operand::Constant { unit, value }, Operand::Figure(f)) => (f, unit, value),
        _ => return Ok(()),
    };
    let Some(m) = resolved.iter().find(|x| x.metric.name == figure.metric) else {
        return Ok(());
    };
    let hint = match m.metric.unit {
        MetricUnit::Nanos => "us",
        MetricUnit::Mbps => "mbit",
        MetricUnit::Fraction => "%",
        _ => return Ok(()),
    };
    match unit {
        Some(u) if *u == m.metric.unit => Ok(()),
        _ => Err(format!(
            "{} is in {}: write the number with that unit, e.g. {value}{hint}",
            show(figure),
            m.metric.unit.format(1.0).trim_start_matches('1').trim()
        )),
    }
}

/// `rtt_p50[load=loaded, band=0]`.
pub fn show(f: &FigureRef) -> String {
    let mut sel: Vec<String> = f.selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if let Some(s) = f.size {
        sel.push(format!("size={s}"));
    }
    if sel.is_empty() {
        f.metric.clone()
    } else {
        format!("{}[{}]", f.metric, sel.join(", "))
    }
}
