//! The experiment tables of a scenario file: which factors a `[[run]]` varies and the
//! combinations it lists, the `[[claim]]`s (parsed and resolved to cells, so one that could
//! never fail is an error before anything runs), the `[[figure]]`s, and the rule that prose
//! carries no measured number. Every error is (field, byte offset, message).

use crate::factors::{scalar_text, RawFactor};
use netsweep_model::experiment::claim::{self, Claim};
use netsweep_model::experiment::design::quoted;
use netsweep_model::experiment::{prose, Design, Factor, FigureSpec};
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::{Spanned, Value};

/// An error: field path, byte offset in the scenario text, message.
pub(crate) type Located = (String, usize, String);

/// A `[[claim]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClaim {
    check: Spanned<String>,
    says: Option<Spanned<String>>,
    seed: Option<String>,
}

/// A `[[figure]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFigure {
    name: Option<Spanned<String>>,
    title: Option<Spanned<String>>,
    y: Spanned<String>,
    dashed: Option<Spanned<String>>,
    x: Spanned<String>,
    series: Option<Spanned<String>>,
    panels: Option<Spanned<String>>,
    size: Option<Spanned<Value>>,
    log_x: Option<bool>,
    log_y: Option<bool>,
    run: Option<String>,
    only: Option<BTreeMap<String, Vec<String>>>,
    y_zero: Option<bool>,
}

/// The factors a run varies (its `factors`, or all of them) and the combinations it lists
/// (`None`: the full grid). Error: (offset, field, message).
#[allow(clippy::type_complexity)]
pub(crate) fn run_factors(
    names: Option<&Spanned<Vec<String>>>,
    combos: Option<&Spanned<Vec<BTreeMap<String, Value>>>>,
    all: &[Factor],
) -> Result<(Vec<usize>, Option<Vec<Vec<usize>>>), (usize, &'static str, String)> {
    let used: Vec<usize> = match names {
        None => (0..all.len()).collect(),
        Some(n) => {
            let mut v = Vec::new();
            for name in n.get_ref() {
                let i = all.iter().position(|f| &f.name == name).ok_or_else(|| {
                    (
                        n.span().start,
                        "factors",
                        format!(
                            "no factor called \"{name}\": the factors are {}",
                            quoted(all.iter().map(|f| f.name.as_str()))
                        ),
                    )
                })?;
                if !v.contains(&i) {
                    v.push(i);
                }
            }
            v.sort_unstable();
            v
        }
    };
    let Some(c) = combos else {
        return Ok((used, None));
    };
    let at = c.span().start;
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (k, combo) in c.get_ref().iter().enumerate() {
        let mut levels = Vec::new();
        for &f in &used {
            let factor = &all[f];
            let v = combo.get(&factor.name).ok_or_else(|| {
                (
                    at,
                    "combinations",
                    format!(
                        "combinations[{k}] names no level of \"{}\": every combination gives each factor the run varies a level",
                        factor.name
                    ),
                )
            })?;
            let text = scalar_text(v).unwrap_or_default();
            let l = factor.level(&text).ok_or_else(|| {
                (
                    at,
                    "combinations",
                    format!(
                        "combinations[{k}]: factor \"{}\" has no level \"{text}\": its levels are {}",
                        factor.name,
                        factor.level_list()
                    ),
                )
            })?;
            levels.push(l);
        }
        if let Some(extra) = combo
            .keys()
            .find(|k| !used.iter().any(|&f| &&all[f].name == k))
        {
            return Err((
                at,
                "combinations",
                format!("combinations[{k}] names \"{extra}\", which this run does not vary: add it to the run's factors or drop it"),
            ));
        }
        if out.contains(&levels) {
            return Err((
                at,
                "combinations",
                format!("combinations[{k}] is listed twice"),
            ));
        }
        out.push(levels);
    }
    if out.is_empty() {
        return Err((
            at,
            "combinations",
            "no combinations listed: list some, or drop combinations for the full grid".into(),
        ));
    }
    Ok((used, Some(out)))
}

/// Parses and resolves every claim against the design (`rpm_cells[c]`: cell c is a
/// responsiveness test's, whose figures no pattern measures).
pub(crate) fn parse_claims(
    raw: &[Spanned<RawClaim>],
    design: &Design,
    rpm_cells: &[bool],
) -> Result<Vec<Claim>, Located> {
    let facts = |c: usize| {
        rpm_cells
            .get(c)
            .copied()
            .unwrap_or(false)
            .then(|| claim::CellFacts {
                measures: claim::Measures::Rpm,
                sizes: Vec::new(),
            })
    };
    let mut out = Vec::new();
    for (i, c) in raw.iter().enumerate() {
        let rc = c.get_ref();
        let field = format!("claim[{i}].check");
        // The check's text starts one byte after its opening quote.
        let base = rc.check.span().start + 1;
        let expr = claim::parse(rc.check.get_ref()).map_err(|e| {
            let offset = rc
                .check
                .get_ref()
                .char_indices()
                .nth(e.column - 1)
                .map_or(rc.check.get_ref().len(), |(o, _)| o);
            (field.clone(), base + offset, e.message)
        })?;
        claim::resolve(&expr, design, &facts).map_err(|m| (field.clone(), base, m))?;
        out.push(Claim {
            check: rc.check.get_ref().clone(),
            says: rc.says.as_ref().map(|s| s.get_ref().clone()),
            seed: rc.seed.clone(),
            expr: Some(expr),
        });
    }
    Ok(out)
}

/// Converts and checks every figure; ids are unique.
pub(crate) fn parse_figures(
    raw: &[Spanned<RawFigure>],
    design: &Design,
) -> Result<Vec<FigureSpec>, Located> {
    let mut out: Vec<FigureSpec> = Vec::new();
    for (i, f) in raw.iter().enumerate() {
        let rf = f.get_ref();
        let at = f.span().start;
        let field = format!("figure[{i}]");
        let size = match &rf.size {
            None => None,
            Some(s) => {
                let text = scalar_text(s.get_ref()).unwrap_or_default();
                match netsweep_model::sizes::parse_sizes(&text) {
                    Ok(v) if v.len() == 1 => Some(v[0]),
                    _ => {
                        return Err((
                            format!("{field}.size"),
                            s.span().start,
                            format!(
                                "size = {} is not one message size: write e.g. \"64k\"",
                                s.get_ref()
                            ),
                        ))
                    }
                }
            }
        };
        let id = match &rf.name {
            Some(n) if crate::names::is_simple_name(n.get_ref(), 64) => n.get_ref().clone(),
            Some(n) => {
                return Err((
                    format!("{field}.name"),
                    n.span().start,
                    format!(
                        "\"{}\" cannot name a file: use letters, digits, '-' or '_'",
                        n.get_ref()
                    ),
                ))
            }
            None => format!("{}-by-{}", rf.y.get_ref(), rf.x.get_ref()),
        };
        if out.iter().any(|o| o.id == id) {
            return Err((
                format!("{field}.name"),
                at,
                format!("two figures are called \"{id}\": give each a name"),
            ));
        }
        let spec = FigureSpec {
            id,
            title: rf.title.as_ref().map(|t| t.get_ref().clone()),
            y: rf.y.get_ref().clone(),
            dashed: rf.dashed.as_ref().map(|d| d.get_ref().clone()),
            x: rf.x.get_ref().clone(),
            series: rf.series.as_ref().map(|s| s.get_ref().clone()),
            panels: rf.panels.as_ref().map(|s| s.get_ref().clone()),
            size,
            log_x: rf.log_x,
            log_y: rf.log_y,
            run: rf.run.clone(),
            only: rf.only.clone().unwrap_or_default(),
            y_zero: rf.y_zero,
        };
        spec.check(design).map_err(|m| (field.clone(), at, m))?;
        out.push(spec);
    }
    Ok(out)
}

/// Keys whose strings are prose, not configuration.
const PROSE_KEYS: &[&str] = &[
    "title",
    "description",
    "notes",
    "says",
    "seed",
    "label",
    "labels",
];

fn collect_config(v: &Value, key: &str, out: &mut Vec<String>) {
    if PROSE_KEYS.contains(&key) {
        return;
    }
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Integer(i) => out.push(i.to_string()),
        Value::Float(f) => out.push(f.to_string()),
        Value::Array(a) => a.iter().for_each(|x| collect_config(x, key, out)),
        Value::Table(t) => t.iter().for_each(|(k, x)| collect_config(x, k, out)),
        _ => {}
    }
}

/// Refuses a measured number in any prose field: the title, description and notes, each
/// claim's words, each figure's title, each factor's and level's label.
pub(crate) fn prose_check(
    text: &str,
    top: &[(&str, Option<&Spanned<String>>)],
    claims: &[Spanned<RawClaim>],
    figures: &[Spanned<RawFigure>],
    factors: &[Spanned<RawFactor>],
    design: &Design,
) -> Result<(), Located> {
    let mut config = Vec::new();
    if let Ok(t) = text.parse::<toml::Table>() {
        collect_config(&Value::Table(t), "", &mut config);
    }
    let configured = prose::configured_numbers(config.iter().map(String::as_str));
    let check = |field: String, s: &Spanned<String>| {
        prose::check(&field, s.get_ref(), &configured)
            .map_err(|m| (field.clone(), s.span().start, m))
    };
    for (field, s) in top {
        if let Some(s) = s {
            check(field.to_string(), s)?;
        }
    }
    for (i, c) in claims.iter().enumerate() {
        if let Some(s) = &c.get_ref().says {
            check(format!("claim[{i}].says"), s)?;
        }
    }
    for (i, f) in figures.iter().enumerate() {
        if let Some(s) = &f.get_ref().title {
            check(format!("figure[{i}].title"), s)?;
        }
    }
    for (i, (rf, f)) in factors.iter().zip(&design.factors).enumerate() {
        let at = rf.get_ref().name.span().start;
        let mut texts = vec![(format!("factor[{i}].label"), f.label.clone())];
        texts.extend(
            f.levels
                .iter()
                .enumerate()
                .map(|(j, l)| (format!("factor[{i}].levels[{j}].label"), l.label.clone())),
        );
        for (field, t) in texts {
            prose::check(&field, &t, &configured).map_err(|m| (field.clone(), at, m))?;
        }
    }
    Ok(())
}
