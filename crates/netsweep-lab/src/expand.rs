//! From a scenario's `[[run]]` tables and factors to what runs: each run's cells (the full
//! grid of the factors it varies, or the combinations it lists), then every cell `repeat`
//! times in rounds (interleaved, or each round shuffled with a seed), each a concrete run
//! with its arguments, client count, path and lab.

use crate::factors::{slug, variant};
use crate::scenario::ScenarioRun;
use crate::topology::Topology;
use netsweep_model::experiment::design::{full_grid, Design};
use netsweep_model::experiment::{Cell, Factor, FactorKind};
use std::collections::BTreeMap;

/// A `[[run]]` before expansion.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub run: ScenarioRun,
    /// Indices of the factors it varies, in factor order.
    pub factors: Vec<usize>,
    /// Listed combinations (a level index per factor of `factors`); `None`: the full grid.
    pub combinations: Option<Vec<Vec<usize>>>,
}

/// Where a lab factor's levels lead: the base topology as TOML and as checked.
pub(crate) struct LabBase<'a> {
    pub table: Option<&'a toml::Table>,
    pub topology: &'a Topology,
}

/// The cells of every template, in order; the name of a cell is its run's name and its
/// levels (`rtt-band1-loaded`).
pub(crate) fn cells(templates: &[Template], factors: &[Factor]) -> Vec<Cell> {
    let mut out: Vec<Cell> = Vec::new();
    for t in templates {
        let counts: Vec<usize> = t.factors.iter().map(|&f| factors[f].levels.len()).collect();
        let combos = t.combinations.clone().unwrap_or_else(|| full_grid(&counts));
        for combo in combos {
            let at: Vec<(usize, usize)> = t.factors.iter().copied().zip(combo).collect();
            let mut name = t.run.name.clone();
            for &(f, l) in &at {
                let level = &factors[f].levels[l];
                let part = slug(&level.name);
                if part.starts_with(|c: char| c.is_ascii_digit()) || part.is_empty() {
                    name.push_str(&format!("-{}{part}", slug(&factors[f].name)));
                } else {
                    name.push_str(&format!("-{part}"));
                }
            }
            if out.iter().any(|c| c.name == name) {
                name = format!("{name}-{}", out.len() + 1);
            }
            let levels: BTreeMap<String, String> = at
                .iter()
                .map(|&(f, l)| (factors[f].name.clone(), factors[f].levels[l].name.clone()))
                .collect();
            out.push(Cell {
                name,
                run: t.run.name.clone(),
                at,
                levels,
            });
        }
    }
    out
}

/// Every run in the order the design schedules it, and the labs they need (one topology
/// per combination of lab-property levels; just the base without lab factors).
pub(crate) fn runs(
    design: &Design,
    templates: &[Template],
    base: &LabBase<'_>,
) -> Result<(Vec<ScenarioRun>, Vec<Topology>), String> {
    let mut topologies: Vec<Topology> = Vec::new();
    let mut lab_keys: Vec<Vec<(usize, usize)>> = Vec::new();
    // Each cell's concrete run (repetition 1), built once.
    let mut per_cell: Vec<ScenarioRun> = Vec::new();
    for (ci, cell) in design.cells.iter().enumerate() {
        let Some(t) = templates.iter().find(|t| t.run.name == cell.run) else {
            return Err(format!("cell {} has no run", cell.name));
        };
        let mut run = t.run.clone();
        run.name = cell.name.clone();
        run.cell = ci;
        let mut key = Vec::new();
        for &(f, l) in &cell.at {
            let factor = &design.factors[f];
            let level = &factor.levels[l];
            run.args.extend(level.args.iter().cloned());
            match &factor.kind {
                FactorKind::Clients => {
                    if let Some(n) = level.value.as_ref().and_then(|v| v.as_u64()) {
                        run.clients = n as u32;
                    }
                }
                FactorKind::Via => {
                    let via = level.value.as_ref().and_then(|v| v.as_str()).unwrap_or("");
                    let reaches = base
                        .topology
                        .links
                        .iter()
                        .map(|l| (&l.name, &l.a, &l.b))
                        .chain(base.topology.tunnels.iter().map(|t| (&t.name, &t.a, &t.b)))
                        .any(|(n, a, b)| n == via && (a == &run.server || b == &run.server));
                    if !reaches {
                        return Err(format!(
                            "factor \"{}\" level \"{}\": \"{via}\" does not reach the server \"{}\" of run \"{}\": pick links or tunnels that end at it",
                            factor.name, level.name, run.server, t.run.name
                        ));
                    }
                    run.via = Some(via.to_string());
                }
                FactorKind::Lab { .. } => key.push((f, l)),
                FactorKind::Arg { .. } | FactorKind::Args => {}
            }
        }
        run.topology = match lab_keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                let topo = if key.is_empty() {
                    base.topology.clone()
                } else {
                    let table = base.table.ok_or("a lab factor needs the topology's text")?;
                    let values: Vec<(String, toml::Value)> = key
                        .iter()
                        .map(|&(f, l)| {
                            let path = match &design.factors[f].kind {
                                FactorKind::Lab { path } => path.clone(),
                                _ => String::new(),
                            };
                            let v = design.factors[f].levels[l]
                                .value
                                .as_ref()
                                .and_then(|v| toml::Value::try_from(v).ok())
                                .unwrap_or(toml::Value::Boolean(false));
                            (path, v)
                        })
                        .collect();
                    let sets: Vec<(&str, &toml::Value)> =
                        values.iter().map(|(p, v)| (p.as_str(), v)).collect();
                    variant(table, base.topology, &sets)?
                };
                topologies.push(topo);
                lab_keys.push(key);
                topologies.len() - 1
            }
        };
        per_cell.push(run);
    }
    let mut out = Vec::new();
    for (cell, rep) in design.schedule() {
        let mut run = per_cell[cell].clone();
        run.repetition = rep;
        if design.repeat > 1 {
            run.name = format!("{}-r{rep}", run.name);
        }
        out.push(run);
    }
    if topologies.is_empty() {
        topologies.push(base.topology.clone());
    }
    Ok((out, topologies))
}

/// A run's `via`: a link or tunnel that ends at the server.
pub(crate) fn check_via(topology: &Topology, n: &str, server: &str) -> Result<String, String> {
    let link = topology
        .links
        .iter()
        .find(|l| l.name == n)
        .map(|l| (&l.a, &l.b));
    let tunnel = topology
        .tunnels
        .iter()
        .find(|t| t.name == n)
        .map(|t| (&t.a, &t.b));
    match link.or(tunnel) {
        None => {
            let all = topology
                .links
                .iter()
                .map(|l| l.name.as_str())
                .chain(topology.tunnels.iter().map(|t| t.name.as_str()));
            Err(format!(
                "no link or tunnel called \"{n}\": the topology has {}",
                netsweep_model::experiment::design::quoted(all)
            ))
        }
        Some((a, b)) if a != server && b != server => Err(format!(
            "\"{n}\" does not reach the server \"{server}\": pick a link or tunnel that ends at it"
        )),
        Some(_) => Ok(n.to_string()),
    }
}
