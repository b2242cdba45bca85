//! Scenario files: a topology (inline `[topology]` or `topology = "file.toml"`), the runs to do
//! across it (`[[run]]`: client host, server host, `netsweep run` arguments, which link or
//! tunnel to target), what the experiment varies (`[[factor]]`, `repeat`, `order`), what it
//! claims (`[[claim]]`), the figures of its page (`[[figure]]`) and the comparisons to print
//! (`[[compare]]`). Parsing is a pure function of the text (and the topology file it names).

use crate::error::{LabError, SpecError};
use crate::expand::{self, LabBase, Template};
use crate::experiment::{parse_claims, parse_figures, prose_check, RawClaim, RawFigure};
use crate::factors::{factor, RawFactor};
use crate::names::is_simple_name;
use crate::parse::{from_raw, parse_text, read_spec_file};
use crate::raw::RawTopology;
use crate::tomlparse::{self, start};
use crate::topology::Topology;
use netsweep_model::experiment::{Claim, Design, FigureSpec, Order};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

pub use crate::command::{RunCommand, RPM_PORT};

/// The port `netsweep serve` listens on in a scenario unless a run says otherwise.
pub const DEFAULT_PORT: u16 = 7200;
/// Most `clients` of one run.
pub const MAX_CLIENTS: u32 = 64;
/// How long one run may take unless it says otherwise (seconds).
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;

/// A checked scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    /// Name (default: the file's stem).
    pub name: String,
    /// The page's title (prose).
    pub title: Option<String>,
    /// Free text (prose: no measured number).
    pub description: Option<String>,
    /// Longer prose for the page: why, and what to look at (no measured number).
    pub notes: Option<String>,
    /// The scenario file, when loaded from one.
    pub file: Option<PathBuf>,
    /// The topology file, when the topology is not inline.
    pub topology_file: Option<PathBuf>,
    /// The lab as the file describes it.
    pub topology: Topology,
    /// The labs the runs use: the topology itself, or one per combination of the levels of
    /// lab-property factors (`ScenarioRun::topology` indexes it).
    pub topologies: Vec<Topology>,
    /// Every run, in the order it runs: each cell's repetitions in rounds.
    pub runs: Vec<ScenarioRun>,
    /// Comparisons between runs.
    pub compare: Vec<Compare>,
    /// The factors, the cells, `repeat` and the order.
    pub design: Design,
    /// The claims, checked by `scenario run`.
    pub claims: Vec<Claim>,
    /// The figures of the page (none: the defaults).
    pub figures: Vec<FigureSpec>,
    /// The scenario's own text, so a results directory can keep it.
    #[serde(skip)]
    pub text: String,
}

/// One `[[run]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScenarioRun {
    /// Name; the results file is `<name>.json`.
    pub name: String,
    /// What the client runs.
    pub command: RunCommand,
    /// Host that runs `netsweep run`.
    pub client: String,
    /// Host that runs `netsweep serve`.
    pub server: String,
    /// Arguments appended to `netsweep run ADDR:PORT`.
    pub args: Vec<String>,
    /// Arguments appended to `netsweep serve --bind ADDR --port PORT`.
    pub server_args: Vec<String>,
    /// Link or tunnel whose server address the client targets (default: the server's address
    /// on the shortest path).
    pub via: Option<String>,
    /// Control port of the server.
    pub port: u16,
    /// Seconds the client may take before it is killed.
    pub timeout_secs: u64,
    /// `netsweep run` processes started at once against the one server (`clients = N`,
    /// default 1); with more than one, client i's results and log are `<name>-<i>`.
    pub clients: u32,
    /// The cell of [`Scenario::design`] this run measures.
    pub cell: usize,
    /// Which repetition of the cell, from 1.
    pub repetition: u32,
    /// The lab it runs in: an index into [`Scenario::topologies`].
    pub topology: usize,
}

/// One `[[compare]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    /// Names of the runs to draw together.
    pub runs: Vec<String>,
    /// Title of the comparison.
    pub title: Option<String>,
}

#[derive(Debug)]
enum TopologySource {
    Path(String),
    Inline(Box<RawTopology>),
}

impl<'de> Deserialize<'de> for TopologySource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopologySource;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a topology file path (topology = \"lab.toml\") or a [topology] table")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TopologySource, E> {
                Ok(TopologySource::Path(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TopologySource, A::Error> {
                RawTopology::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|t| TopologySource::Inline(Box::new(t)))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    title: Option<Spanned<String>>,
    description: Option<Spanned<String>>,
    notes: Option<Spanned<String>>,
    topology: Option<Spanned<TopologySource>>,
    repeat: Option<Spanned<u32>>,
    order: Option<Spanned<String>>,
    seed: Option<u64>,
    #[serde(default)]
    factor: Vec<Spanned<RawFactor>>,
    #[serde(default)]
    run: Vec<Spanned<RawRun>>,
    #[serde(default)]
    claim: Vec<Spanned<RawClaim>>,
    #[serde(default)]
    figure: Vec<Spanned<RawFigure>>,
    #[serde(default)]
    compare: Vec<Spanned<Compare>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    name: Spanned<String>,
    command: Option<Spanned<String>>,
    client: Spanned<String>,
    server: Spanned<String>,
    #[serde(default = "no_args")]
    args: Spanned<Vec<String>>,
    #[serde(default)]
    server_args: Vec<String>,
    via: Option<Spanned<String>>,
    port: Option<u16>,
    timeout: Option<Spanned<u64>>,
    clients: Option<Spanned<u32>>,
    factors: Option<Spanned<Vec<String>>>,
    combinations: Option<Spanned<Vec<BTreeMap<String, toml::Value>>>>,
}

/// Most repetitions of a cell.
pub const MAX_REPEAT: u32 = 1000;
/// Most runs a scenario may expand into.
pub const MAX_RUNS: usize = 10_000;

fn no_args() -> Spanned<Vec<String>> {
    Spanned::new(0..0, Vec::new())
}

/// Arguments the runner passes itself; a run may not repeat them.
const RESERVED_ARGS: &[&str] = &["-o", "--output", "--lab-meta"];

impl Scenario {
    /// Parses scenario text; a relative `topology = "…"` path is taken from the current
    /// directory.
    pub fn parse(text: &str) -> Result<Scenario, LabError> {
        parse_scenario(text, None)
    }

    /// Reads a scenario file; a relative `topology = "…"` path is taken from the scenario
    /// file's directory.
    pub fn load(path: &Path) -> Result<Scenario, LabError> {
        let text = read_spec_file(path, "scenario")?;
        parse_scenario(&text, Some(path))
    }

    /// The scenario's text with its topology inline, so a results directory that keeps it
    /// can be paged without the topology file.
    pub fn self_contained(&self) -> String {
        let Some(path) = &self.topology_file else {
            return self.text.clone();
        };
        let (Ok(mut doc), Some(topo)) = (
            self.text.parse::<toml::Table>(),
            std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.parse::<toml::Table>().ok()),
        ) else {
            return self.text.clone();
        };
        doc.insert("topology".into(), toml::Value::Table(topo));
        format!(
            "# {} with its topology ({}) inline, as `netsweep scenario run` kept it.\n{}",
            self.file
                .as_deref()
                .map(|f| f.display().to_string())
                .unwrap_or_default(),
            path.display(),
            toml::to_string(&doc).unwrap_or_else(|_| self.text.clone())
        )
    }

    /// The run called `name`.
    pub fn run(&self, name: &str) -> Option<&ScenarioRun> {
        self.runs.iter().find(|r| r.name == name)
    }
}

fn prefix_field(mut e: SpecError, prefix: &str) -> SpecError {
    if !e.field.is_empty() && !e.field.starts_with(prefix) {
        e.field = format!("{prefix}.{}", e.field);
    }
    e
}

fn parse_scenario(text: &str, file: Option<&Path>) -> Result<Scenario, LabError> {
    let raw: RawScenario = tomlparse::parse(text, file)?;
    let err = |field: String, offset: usize, msg: String| -> LabError {
        SpecError::new(field, msg)
            .at(text, offset)
            .in_file(file)
            .into()
    };
    // The topology, checked, and its text (a lab-property factor builds variants of it).
    let (topology, topology_file, topology_text) = match raw.topology {
        None => {
            return Err(SpecError::new(
                "topology",
                "the scenario has no topology: add a [topology] table, or topology = \"lab.toml\"",
            )
            .in_file(file)
            .into())
        }
        Some(src) => {
            let offset = start(&src);
            match src.into_inner() {
                TopologySource::Inline(t) => (
                    from_raw(*t, text, file).map_err(|e| prefix_field(e, "topology"))?,
                    None,
                    None,
                ),
                TopologySource::Path(p) => {
                    let base = file.and_then(Path::parent).unwrap_or(Path::new(""));
                    let path = base.join(&p);
                    let t_text = std::fs::read_to_string(&path).map_err(|e| {
                        err(
                            "topology".into(),
                            offset,
                            format!("cannot read topology file {}: {e}: check the path (relative paths start at the scenario's directory)", path.display()),
                        )
                    })?;
                    (parse_text(&t_text, Some(&path))?, Some(path), Some(t_text))
                }
            }
        }
    };
    if raw.run.is_empty() {
        return Err(SpecError::new(
            "run",
            "the scenario has no runs: add a [[run]] table with name, client, server and args",
        )
        .in_file(file)
        .into());
    }
    // Factors.
    let mut factors = Vec::new();
    for (i, f) in raw.factor.iter().enumerate() {
        let fac =
            factor(f.get_ref(), &topology).map_err(|(at, m)| err(format!("factor[{i}]"), at, m))?;
        if factors
            .iter()
            .any(|g: &netsweep_model::experiment::Factor| g.name == fac.name)
        {
            return Err(err(
                format!("factor[{i}].name"),
                start(&f.get_ref().name),
                format!(
                    "factor \"{}\" is defined twice: give each factor its own name",
                    fac.name
                ),
            ));
        }
        factors.push(fac);
    }
    let repeat = match &raw.repeat {
        Some(r) if !(1..=MAX_REPEAT).contains(r.get_ref()) => {
            return Err(err(
                "repeat".into(),
                start(r),
                format!(
                    "repeat = {} is out of range: give 1 to {MAX_REPEAT} (5 is a good start)",
                    r.get_ref()
                ),
            ))
        }
        Some(r) => *r.get_ref(),
        None => 1,
    };
    let order = match raw.order.as_ref().map(|o| (o.get_ref().as_str(), start(o))) {
        None | Some(("interleaved", _)) => {
            if raw.seed.is_some() {
                return Err(SpecError::new("seed", "seed shuffles each round: add order = \"random\", or drop seed").in_file(file).into());
            }
            Order::Interleaved
        }
        Some(("random", _)) => Order::Random {
            seed: raw.seed.unwrap_or(1),
        },
        Some((other, at)) => {
            return Err(err(
                "order".into(),
                at,
                format!("order = \"{other}\": give \"interleaved\" (ABCABC…) or \"random\" (each round shuffled; with seed = N)"),
            ))
        }
    };
    // The runs, as templates of cells.
    let hosts: Vec<&str> = topology.hosts.iter().map(|h| h.name.as_str()).collect();
    let host = |field: String, s: &Spanned<String>| -> Result<String, LabError> {
        if hosts.contains(&s.get_ref().as_str()) {
            Ok(s.get_ref().clone())
        } else {
            Err(err(
                field,
                start(s),
                format!(
                    "unknown host \"{}\": the topology's hosts are {}",
                    s.get_ref(),
                    netsweep_model::experiment::design::quoted(hosts.iter().copied())
                ),
            ))
        }
    };
    let mut templates = Vec::new();
    let mut names = BTreeSet::new();
    for (i, r) in raw.run.iter().enumerate() {
        let p = format!("run[{i}]");
        let rr = r.get_ref();
        let name = rr.name.get_ref();
        if !is_simple_name(name, 64) {
            return Err(err(
                format!("{p}.name"),
                start(&rr.name),
                format!("\"{name}\" cannot name a results file: use letters, digits, '-' or '_'"),
            ));
        }
        if !names.insert(name.clone()) {
            return Err(err(
                format!("{p}.name"),
                start(&rr.name),
                format!("run \"{name}\" is defined twice: give each run its own name"),
            ));
        }
        let client = host(format!("{p}.client"), &rr.client)?;
        let server = host(format!("{p}.server"), &rr.server)?;
        if client == server {
            return Err(err(
                format!("{p}.server"),
                start(&rr.server),
                format!("client and server are both \"{client}\": put them on two hosts joined by a path"),
            ));
        }
        if let Some(a) = rr.args.get_ref().iter().find(|a| {
            RESERVED_ARGS
                .iter()
                .any(|r| a == r || a.starts_with(&format!("{r}=")))
        }) {
            return Err(err(
                format!("{p}.args"),
                start(&rr.args),
                format!(
                    "remove \"{a}\": the runner writes <out>/{name}.json and <out>/lab.json itself"
                ),
            ));
        }
        let via = match &rr.via {
            None => None,
            Some(v) => Some(
                crate::expand::check_via(&topology, v.get_ref(), &server)
                    .map_err(|m| err(format!("{p}.via"), start(v), m))?,
            ),
        };
        let timeout_secs = match &rr.timeout {
            Some(t) if *t.get_ref() == 0 => {
                return Err(err(
                    format!("{p}.timeout"),
                    start(t),
                    "a timeout of 0 s stops every run: give seconds, e.g. timeout = 300".into(),
                ))
            }
            Some(t) => *t.get_ref(),
            None => DEFAULT_TIMEOUT_SECS,
        };
        let clients = match &rr.clients {
            Some(c) if !(1..=MAX_CLIENTS).contains(c.get_ref()) => {
                return Err(err(
                    format!("{p}.clients"),
                    start(c),
                    format!(
                        "clients = {} is out of range: give 1 to {MAX_CLIENTS}",
                        c.get_ref()
                    ),
                ))
            }
            Some(c) => *c.get_ref(),
            None => 1,
        };
        let command = crate::command::parse(rr.command.as_ref(), clients, &rr.server_args)
            .map_err(|(field, at, m)| err(format!("{p}.{field}"), at, m))?;
        let run = ScenarioRun {
            name: name.clone(),
            command,
            client,
            server,
            args: rr.args.get_ref().clone(),
            server_args: rr.server_args.clone(),
            via,
            port: rr.port.unwrap_or(DEFAULT_PORT),
            timeout_secs,
            clients,
            cell: 0,
            repetition: 1,
            topology: 0,
        };
        let (used, combinations) =
            crate::experiment::run_factors(rr.factors.as_ref(), rr.combinations.as_ref(), &factors)
                .map_err(|(at, field, m)| err(format!("{p}.{field}"), at, m))?;
        templates.push(Template {
            run,
            factors: used,
            combinations,
        });
    }
    // The grid's size before building it: a file may not ask for more cells than it may run.
    let planned = templates.iter().fold(0usize, |acc, t| {
        let n = match &t.combinations {
            Some(c) => c.len(),
            None => t
                .factors
                .iter()
                .fold(1usize, |p, &f| p.saturating_mul(factors[f].levels.len())),
        };
        acc.saturating_add(n)
    });
    if planned.saturating_mul(repeat as usize) > MAX_RUNS {
        return Err(SpecError::new(
            "factor",
            format!(
                "{planned} cells × {repeat} repetitions is more than {MAX_RUNS} runs: list fewer combinations or levels"
            ),
        )
        .in_file(file)
        .into());
    }
    let cells = expand::cells(&templates, &factors);
    let design = Design {
        factors,
        cells,
        repeat,
        order,
    };
    let table = crate::factors::topology_table(text, topology_text.as_deref());
    let (runs, topologies) = expand::runs(
        &design,
        &templates,
        &LabBase {
            table: table.as_ref(),
            topology: &topology,
        },
    )
    .map_err(|m| SpecError::new("factor", m).in_file(file))?;
    // Comparisons name concrete runs (and each client's results).
    let mut names = BTreeSet::new();
    for r in &runs {
        names.insert(r.name.clone());
        if r.clients > 1 {
            for i in 1..=r.clients {
                names.insert(format!("{}-{i}", r.name));
            }
        }
    }
    let mut compare = Vec::new();
    for (i, c) in raw.compare.iter().enumerate() {
        let cc = c.get_ref();
        if cc.runs.len() < 2 {
            return Err(err(
                format!("compare[{i}].runs"),
                start(c),
                "a comparison needs at least two runs".into(),
            ));
        }
        if let Some(missing) = cc.runs.iter().find(|r| !names.contains(*r)) {
            let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
            all.truncate(12);
            return Err(err(
                format!("compare[{i}].runs"),
                start(c),
                format!(
                    "no run called \"{missing}\": the runs are {}{}",
                    netsweep_model::experiment::design::quoted(all),
                    if names.len() > 12 { ", …" } else { "" }
                ),
            ));
        }
        compare.push(cc.clone());
    }
    // The cells of responsiveness tests: their figures are not a pattern's.
    let rpm_cells: Vec<bool> = (0..design.cells.len())
        .map(|c| {
            runs.iter()
                .any(|r| r.cell == c && r.command == RunCommand::Rpm)
        })
        .collect();
    let claims =
        parse_claims(&raw.claim, &design, &rpm_cells).map_err(|(f, at, m)| err(f, at, m))?;
    let figures = parse_figures(&raw.figure, &design).map_err(|(f, at, m)| err(f, at, m))?;
    let prose = [
        ("title", raw.title.as_ref()),
        ("description", raw.description.as_ref()),
        ("notes", raw.notes.as_ref()),
    ];
    prose_check(text, &prose, &raw.claim, &raw.figure, &raw.factor, &design)
        .map_err(|(f, at, m)| err(f, at, m))?;
    let name = raw
        .name
        .or_else(|| {
            file.and_then(|f| f.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "scenario".into());
    Ok(Scenario {
        name,
        title: raw.title.map(Spanned::into_inner),
        description: raw.description.map(Spanned::into_inner),
        notes: raw.notes.map(Spanned::into_inner),
        file: file.map(Path::to_path_buf),
        topology_file,
        topology,
        topologies,
        runs,
        compare,
        design,
        claims,
        figures,
        text: text.to_string(),
    })
}

#[cfg(test)]
#[path = "scenario_tests.rs"]
mod tests;
