//! The experiment half of `netsweep scenario`: what a check knows of each cell before it runs
//! (its spec, so every claim resolves to a size the cell measures), the scenario kept beside
//! its results (self-contained), and, from a results directory, the verdicts, the figures
//! (SVG and PNG) and the page — written together, so they cannot disagree.

use super::bundle;
use netsweep_atomic::write_atomic;
use netsweep_lab::{RunCommand, Scenario};
use netsweep_model::experiment::claim::{self, CellFacts, Measures};
use netsweep_model::experiment::{figure, metric, Observations, Outcome, Verdict};
use netsweep_model::results::{self, RunResult};
use netsweep_model::rpm::result::{self as rpm_result, RpmResult};
use netsweep_report::experiment::figures::{self, Drawn};
use netsweep_report::experiment::page::{self, Page};
use netsweep_report::plot::png;
use std::path::Path;

/// Each cell's pattern and sizes, from its arguments as `netsweep run` would parse them (or
/// a responsiveness test's, as `netsweep rpm` would).
pub fn cell_facts(s: &Scenario) -> Result<Vec<CellFacts>, String> {
    let mut facts = Vec::new();
    for (ci, cell) in s.design.cells.iter().enumerate() {
        let Some(run) = s.runs.iter().find(|r| r.cell == ci) else {
            return Err(format!("cell {} has no run", cell.name));
        };
        let at = |e: String| format!("run {:?} (cell {}): {e}", cell.run, cell.name);
        facts.push(match run.command {
            RunCommand::Run => {
                let spec = crate::cli::spec::check_args(&run.args).map_err(at)?;
                CellFacts {
                    measures: Measures::Pattern(spec.pattern),
                    sizes: spec.sizes,
                }
            }
            RunCommand::Rpm => {
                crate::cli::spec::check_rpm_args(&run.args).map_err(at)?;
                CellFacts {
                    measures: Measures::Rpm,
                    sizes: Vec::new(),
                }
            }
        });
    }
    Ok(facts)
}

/// Resolves every claim with the cells' facts: a claim naming a size a cell does not measure,
/// or a figure its pattern does not, is an error here, before anything runs.
pub fn check_claims(s: &Scenario, facts: &[CellFacts]) -> Result<(), String> {
    for (i, c) in s.claims.iter().enumerate() {
        if let Some(expr) = &c.expr {
            claim::resolve(expr, &s.design, &|cell| facts.get(cell).cloned())
                .map_err(|e| format!("claim[{i}] `{}`: {e}", c.check))?;
        }
    }
    for (i, f) in s.figures.iter().enumerate() {
        // Its y, and its x when that is a figure (a signature graph).
        for m in metric::metric(&f.y)
            .into_iter()
            .chain(f.x_figure(&s.design))
        {
            if !facts.iter().any(|x| m.measured_by(x.measures)) {
                return Err(format!(
                    "figure[{i}] ({}): no cell measures {} (only {} does): pick a figure the cells measure",
                    f.id,
                    m.name,
                    m.pattern_list()
                ));
            }
        }
    }
    Ok(())
}

/// The results file names of the scenario's runs: (cell, repetition, file name), one per
/// client of a run with several.
pub fn run_files(s: &Scenario) -> Vec<(usize, u32, String)> {
    let mut out = Vec::new();
    for r in &s.runs {
        if r.clients > 1 {
            out.extend(
                (1..=r.clients).map(|i| (r.cell, r.repetition, format!("{}-{i}.json", r.name))),
            );
        } else {
            out.push((r.cell, r.repetition, format!("{}.json", r.name)));
        }
    }
    out
}

/// What one run's results file holds: a `netsweep run`'s or a `netsweep rpm`'s.
#[derive(Debug)]
pub enum Loaded {
    /// `netsweep run`.
    Run(Box<RunResult>),
    /// `netsweep rpm`.
    Rpm(Box<RpmResult>),
}

/// Reads a results file of either kind, by its `schema`.
fn load_any(text: &str) -> Result<Loaded, String> {
    let schema = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("schema")?.as_str().map(str::to_string));
    if schema.as_deref() == Some(rpm_result::SCHEMA) {
        return serde_json::from_str(text)
            .map(|r| Loaded::Rpm(Box::new(r)))
            .map_err(|e| e.to_string());
    }
    results::load(text)
        .map(|r| Loaded::Run(Box::new(r)))
        .map_err(|e| e.to_string())
}

/// Every results file of the scenario's runs that exists, from its own file or else from
/// the directory's bundle (`scenario pack`): (cell, repetition, results). A run that left
/// no results (it failed) is absent; one whose results do not load is an error.
pub fn load_results(dir: &Path, s: &Scenario) -> Result<Vec<(usize, u32, Loaded)>, String> {
    let bundle = bundle::read(dir)?;
    let mut out = Vec::new();
    for (cell, repetition, n) in run_files(s) {
        let p = dir.join(&n);
        let loaded = match std::fs::read_to_string(&p) {
            Ok(text) => load_any(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match bundle.get(&n) {
                Some(v) => load_any(&v.to_string()),
                None => continue,
            },
            Err(e) => return Err(format!("cannot read {}: {e}", p.display())),
        };
        let res = loaded.map_err(|e| {
            format!(
                "the results of {n} in {} do not load ({e}): rerun the scenario",
                dir.display()
            )
        })?;
        out.push((cell, repetition, res));
    }
    Ok(out)
}

/// What writing a page produced.
#[derive(Debug)]
pub struct Written {
    /// The claims' verdicts.
    pub verdicts: Vec<Verdict>,
    /// The page.
    pub page: std::path::PathBuf,
    /// Figure files written.
    pub figures: Vec<std::path::PathBuf>,
    /// Each cell's headline line for the terminal.
    pub cells: Vec<String>,
}

/// Evaluates the claims, draws the figures and writes the page of `dir`'s results.
pub fn write_page(
    dir: &Path,
    s: &Scenario,
    failures: &[(String, String)],
) -> Result<Written, String> {
    let all = load_results(dir, s)?;
    let mut obs = Observations::new(s.design.cells.len(), s.design.repeat);
    let mut loaded: Vec<(usize, u32, &RunResult)> = Vec::new();
    let mut tests: Vec<(usize, u32, &RpmResult)> = Vec::new();
    for (cell, rep, r) in &all {
        match r {
            Loaded::Run(r) => {
                obs.add(*cell, *rep, r);
                loaded.push((*cell, *rep, r));
            }
            Loaded::Rpm(r) => {
                obs.add_rpm(*cell, *rep, r);
                tests.push((*cell, *rep, r));
            }
        }
    }
    let facts: Vec<Option<CellFacts>> = (0..s.design.cells.len())
        .map(|ci| {
            if s.runs
                .iter()
                .any(|r| r.cell == ci && r.command == RunCommand::Rpm)
            {
                return Some(CellFacts {
                    measures: Measures::Rpm,
                    sizes: Vec::new(),
                });
            }
            let r = loaded.iter().find(|(c, _, _)| *c == ci).map(|x| x.2)?;
            Some(CellFacts {
                measures: Measures::Pattern(r.spec.pattern),
                sizes: obs.sizes(ci),
            })
        })
        .collect();
    let verdicts: Vec<Verdict> = s
        .claims
        .iter()
        .map(|c| {
            let resolved = c
                .expr
                .as_ref()
                .map(|e| claim::resolve(e, &s.design, &|ci| facts.get(ci).cloned().flatten()));
            let mut v = match (resolved, &c.expr) {
                (Some(Ok(r)), Some(e)) => obs.verdict(e, &r),
                (Some(Err(why)), _) => {
                    undecided(format!("cannot be evaluated on these results: {why}"))
                }
                _ => undecided("not parsed".into()),
            };
            v.check = c.check.clone();
            v.says = c.says.clone();
            v.seed = c.seed.clone();
            v
        })
        .collect();
    // What the first results measured: a pattern, or (with none of `netsweep run`'s) RPM.
    let pattern = match (loaded.first(), tests.first()) {
        (Some(x), _) => Measures::Pattern(x.2.spec.pattern),
        (None, Some(_)) => Measures::Rpm,
        (None, None) => Measures::Pattern(netsweep_model::spec::Pattern::Pingpong),
    };
    let several_sizes = (0..s.design.cells.len()).any(|c| obs.sizes(c).len() > 1);
    let specs = if s.figures.is_empty() {
        figure::defaults(&s.design, pattern, several_sizes)
    } else {
        s.figures.clone()
    };
    let fig_dir = dir.join("figures");
    let mut drawn: Vec<Drawn> = Vec::new();
    let mut files = Vec::new();
    for spec in &specs {
        let Some(d) = figures::draw(spec, &s.design, &obs) else {
            continue;
        };
        let svg_path = fig_dir.join(format!("{}.svg", d.id));
        write_atomic(&svg_path, &d.svg)
            .map_err(|e| format!("cannot write {}: {e}", svg_path.display()))?;
        let png_path = fig_dir.join(format!("{}.png", d.id));
        let bytes = png::render(&d.svg, 1.5).map_err(|e| format!("{}: {e}", png_path.display()))?;
        std::fs::write(&png_path, bytes)
            .map_err(|e| format!("cannot write {}: {e}", png_path.display()))?;
        files.extend([svg_path, png_path]);
        drawn.push(d);
    }
    // The figures the cell table lists: each figure's y (against a factor), then the claims'.
    let one_size = |ci: usize| match obs.sizes(ci)[..] {
        [s] => Some(s),
        _ => None,
    };
    // Over the cells with a sweep (a responsiveness test's cell has none).
    let swept: Vec<usize> = (0..s.design.cells.len())
        .filter(|&c| !obs.sizes(c).is_empty())
        .collect();
    let common = swept
        .first()
        .and_then(|&c0| one_size(c0))
        .filter(|s0| swept.iter().all(|&c| one_size(c) == Some(*s0)));
    let mut headline: Vec<(&'static metric::Metric, Option<u64>)> = Vec::new();
    for spec in specs.iter().filter(|f| s.design.factor(&f.x).is_some()) {
        if let Some(m) = metric::metric(&spec.y) {
            let size = if m.rpm.is_some() {
                None
            } else {
                spec.size.or(common)
            };
            if (size.is_some() || m.rpm.is_some())
                && !headline.iter().any(|(h, z)| h.name == m.name && *z == size)
            {
                headline.push((m, size));
            }
        }
    }
    if headline.is_empty() {
        match metric::metric(figure::headline(pattern)) {
            Some(m) if m.rpm.is_some() => headline.push((m, None)),
            Some(m) if common.is_some() => headline.push((m, common)),
            _ => {}
        }
    }
    let cells = terminal_cells(s, &obs, &headline);
    let setup = setup(s);
    let mut runs: Vec<(String, String)> = Vec::new();
    for c in &s.design.cells {
        if runs.iter().any(|(n, _)| *n == c.run) {
            continue;
        }
        if let Some(r) = s.runs.iter().find(|r| s.design.cells[r.cell].run == c.run) {
            let base: Vec<String> = r
                .args
                .iter()
                .take(
                    r.args.len()
                        - s.design.cells[r.cell]
                            .at
                            .iter()
                            .map(|&(f, l)| s.design.factors[f].levels[l].args.len())
                            .sum::<usize>(),
                )
                .cloned()
                .collect();
            let command = match r.command {
                RunCommand::Run => "run",
                RunCommand::Rpm => "rpm",
            };
            runs.push((
                c.run.clone(),
                format!("{command} SERVER {}", base.join(" ")),
            ));
        }
    }
    let provenance = provenance(&loaded, tests.len());
    let mut warnings: Vec<(usize, u32, String)> = loaded
        .iter()
        .flat_map(|(c, rep, r)| r.warnings.iter().map(move |w| (*c, *rep, w.clone())))
        .chain(
            tests
                .iter()
                .flat_map(|(c, rep, r)| r.warnings.iter().map(move |w| (*c, *rep, w.clone()))),
        )
        .collect();
    // By cell and repetition; a run's own warnings keep their order.
    warnings.sort_by_key(|w| (w.0, w.1));
    let regenerate = format!("netsweep scenario page {}", dir.display());
    let text = page::render(&Page {
        name: &s.name,
        title: s.title.as_deref(),
        description: s.description.as_deref(),
        notes: s.notes.as_deref(),
        setup: &setup,
        runs: &runs,
        design: &s.design,
        obs: &obs,
        verdicts: &verdicts,
        figures: &drawn,
        figure_dir: "figures",
        headline,
        failures,
        warnings: &warnings,
        regenerate: &regenerate,
        provenance: &provenance,
    });
    let page_path = dir.join("page.md");
    write_atomic(&page_path, &text)
        .map_err(|e| format!("cannot write {}: {e}", page_path.display()))?;
    Ok(Written {
        verdicts,
        page: page_path,
        figures: files,
        cells,
    })
}

fn undecided(reason: String) -> Verdict {
    Verdict {
        check: String::new(),
        says: None,
        seed: None,
        outcome: Outcome::Undecided,
        reason,
        left: None,
        right: None,
        statistic: None,
        statistic_is: String::new(),
        threshold: String::new(),
        unit: metric::MetricUnit::Plain,
    }
}

/// One line per cell: its headline figure's median and spread.
fn terminal_cells(
    s: &Scenario,
    obs: &Observations<'_>,
    headline: &[(&'static metric::Metric, Option<u64>)],
) -> Vec<String> {
    let Some(&(first, first_size)) = headline.first() else {
        return Vec::new();
    };
    (0..s.design.cells.len())
        .map(|ci| {
            // The first headline figure the cell measured.
            let (m, size) = headline
                .iter()
                .copied()
                .find(|(m, z)| obs.spread(ci, m, *z).is_some())
                .unwrap_or((first, first_size));
            let what = match obs.spread(ci, m, size) {
                Some(sp) => format!(
                    "{} median {} (mean {}, {} – {}, n = {})",
                    m.name,
                    m.unit.format(sp.median),
                    m.unit.format(sp.mean),
                    m.unit.format(sp.min),
                    m.unit.format(sp.max),
                    sp.n
                ),
                None => format!("{}: not measured", m.name),
            };
            format!("{:<28} {what}", s.design.cells[ci].name)
        })
        .collect()
}

/// The lab in lines: hosts, links with MTU, rate and classes, tunnels.
fn setup(s: &Scenario) -> Vec<String> {
    let t = &s.topology;
    let mut out = vec![format!(
        "hosts: {}",
        t.hosts
            .iter()
            .map(|h| if h.router {
                format!("{} (router)", h.name)
            } else {
                h.name.clone()
            })
            .collect::<Vec<_>>()
            .join(", ")
    )];
    for l in &t.links {
        let mut line = format!("link `{}`: {} — {}, MTU {}", l.name, l.a, l.b, l.mtu);
        match (&l.emulate, l.rate) {
            // The path emulator carries the link, at the link's rate when it has one.
            (Some(e), rate) => line.push_str(&format!(
                ", carried by the path emulator (a userspace relay{}){}",
                e.cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default(),
                rate.map(|r| format!(" at {r}").to_lowercase())
                    .unwrap_or_default()
            )),
            (None, Some(r)) => line.push_str(
                &format!(", shaped to {} ({:?}, {:?})", r, l.shaper, l.direction).to_lowercase(),
            ),
            (None, None) => {}
        }
        for c in &l.classes {
            line.push_str(&format!(
                "; class for SO_PRIORITY {}: rate {}, ceil {}, htb prio {}",
                c.priority, c.rate, c.ceil, c.prio
            ));
        }
        if let Some(loss) = &l.loss {
            line.push_str(&format!(", random loss {}", loss.probability));
        }
        if !l.offloads.is_empty() {
            let set = netsweep_lab::topology::offloads_text(&l.offloads);
            line.push_str(&format!(", offloads {set}"));
        }
        out.push(line);
    }
    for tu in &s.topology.tunnels {
        out.push(format!(
            "tunnel `{}`: {} — {} (VXLAN){}{}",
            tu.name,
            tu.a,
            tu.b,
            tu.mtu.map(|m| format!(", MTU {m}")).unwrap_or_default(),
            if tu.pmtu_discovery {
                ""
            } else {
                "; hosts reach it without path MTU discovery (their route locked at their MTU)"
            }
        ));
    }
    for f in &s.design.factors {
        if let netsweep_model::experiment::FactorKind::Lab { path } = &f.kind {
            out.push(format!("`{path}` varies with the factor \"{}\"", f.label));
        }
    }
    out
}

/// Tool, hosts and times the results record (`rpm` responsiveness tests beside them).
fn provenance(loaded: &[(usize, u32, &RunResult)], rpm: usize) -> Vec<String> {
    let Some((_, _, r)) = loaded.first() else {
        return vec!["no results were found".into()];
    };
    let first = loaded
        .iter()
        .map(|x| x.2.started_at.as_str())
        .min()
        .unwrap_or("");
    let last = loaded
        .iter()
        .filter_map(|x| x.2.finished_at.as_deref())
        .max()
        .unwrap_or("");
    vec![
        format!(
            "measured by {} {}, {first} to {last}",
            r.tool.name, r.tool.version
        ),
        format!(
            "client host: {} ({} CPUs, {}), kernel {}",
            r.client.hostname, r.client.cpu_count, r.client.cpu_model, r.client.kernel
        ),
        if rpm == 0 {
            format!("{} results files", loaded.len())
        } else {
            format!(
                "{} results files: {} of `netsweep run`, {rpm} of `netsweep rpm`",
                loaded.len() + rpm,
                loaded.len()
            )
        },
    ]
}
