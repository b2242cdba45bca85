//! Scenario files: a topology (inline `[topology]` or `topology = "file.toml"`), the runs to do
//! across it (`[[run]]`: client host, server host, `netsweep run` arguments, which link or
//! tunnel to target) and the comparisons to draw (`[[compare]]`).

use crate::error::{LabError, SpecError};
use crate::names::is_simple_name;
use crate::parse::{from_raw, parse_text, read_spec_file};
use crate::raw::RawTopology;
use crate::tomlparse::{self, start};
use crate::topology::Topology;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

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
    /// Free text.
    pub description: Option<String>,
    /// The scenario file, when loaded from one.
    pub file: Option<PathBuf>,
    /// The topology file, when the topology is not inline.
    pub topology_file: Option<PathBuf>,
    /// The lab to build.
    pub topology: Topology,
    /// The runs, in order.
    pub runs: Vec<ScenarioRun>,
    /// Comparisons between runs.
    pub compare: Vec<Compare>,
}

/// One `[[run]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScenarioRun {
    /// Name; the results file is `<name>.json`.
    pub name: String,
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
    description: Option<String>,
    topology: Option<Spanned<TopologySource>>,
    #[serde(default)]
    run: Vec<Spanned<RawRun>>,
    #[serde(default)]
    compare: Vec<Spanned<Compare>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    name: Spanned<String>,
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
}

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
    let (topology, topology_file) = match raw.topology {
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
                    (parse_text(&t_text, Some(&path))?, Some(path))
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
                    hosts
                        .iter()
                        .map(|h| format!("\"{h}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ))
        }
    };
    let mut runs = Vec::new();
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
            Some(v) => {
                let n = v.get_ref();
                let link = topology
                    .links
                    .iter()
                    .find(|l| &l.name == n)
                    .map(|l| (&l.a, &l.b));
                let tunnel = topology
                    .tunnels
                    .iter()
                    .find(|t| &t.name == n)
                    .map(|t| (&t.a, &t.b));
                match link.or(tunnel) {
                    None => {
                        let all: Vec<String> = topology
                            .links
                            .iter()
                            .map(|l| format!("\"{}\"", l.name))
                            .chain(topology.tunnels.iter().map(|t| format!("\"{}\"", t.name)))
                            .collect();
                        return Err(err(
                            format!("{p}.via"),
                            start(v),
                            format!(
                                "no link or tunnel called \"{n}\": the topology has {}",
                                all.join(", ")
                            ),
                        ));
                    }
                    Some((a, b)) if a != &server && b != &server => {
                        return Err(err(
                            format!("{p}.via"),
                            start(v),
                            format!("\"{n}\" does not reach the server \"{server}\": pick a link or tunnel that ends at it"),
                        ));
                    }
                    Some(_) => Some(n.clone()),
                }
            }
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
        if clients > 1 {
            // Comparisons may name each client's results.
            for i in 1..=clients {
                names.insert(format!("{name}-{i}"));
            }
        }
        runs.push(ScenarioRun {
            name: name.clone(),
            client,
            server,
            args: rr.args.get_ref().clone(),
            server_args: rr.server_args.clone(),
            via,
            port: rr.port.unwrap_or(DEFAULT_PORT),
            timeout_secs,
            clients,
        });
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
            return Err(err(
                format!("compare[{i}].runs"),
                start(c),
                format!(
                    "no run called \"{missing}\": the runs are {}",
                    names
                        .iter()
                        .map(|n| format!("\"{n}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        compare.push(cc.clone());
    }
    let name = raw
        .name
        .or_else(|| {
            file.and_then(|f| f.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "scenario".into());
    Ok(Scenario {
        name,
        description: raw.description,
        file: file.map(Path::to_path_buf),
        topology_file,
        topology,
        runs,
        compare,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "demo"
description = "two hosts"

[topology]
[[topology.hosts]]
name = "client"
[[topology.hosts]]
name = "server"
[[topology.links]]
a = "client"
b = "server"
rate = "100mbit"

[[run]]
name = "tcp"
client = "client"
server = "server"
args = ["--transport", "tcp", "--pattern", "stream"]

[[run]]
name = "udp"
client = "client"
server = "server"
via = "client-server"
port = 7300
timeout = 60
args = ["--transport", "udp"]

[[compare]]
runs = ["tcp", "udp"]
title = "tcp vs udp"
"#;

    fn err(text: &str) -> SpecError {
        match Scenario::parse(text) {
            Err(LabError::Spec(e)) => e,
            other => panic!("expected a spec error, got {other:?}"),
        }
    }

    #[test]
    fn several_clients_against_one_server() {
        let many = GOOD.replace("port = 7300", "port = 7300\nclients = 3")
            + "\n[[compare]]\nruns = [\"udp-1\", \"udp-3\"]\n";
        let s = Scenario::parse(&many).unwrap();
        assert_eq!((s.runs[0].clients, s.runs[1].clients), (1, 3));
        assert_eq!(s.compare[1].runs, ["udp-1", "udp-3"]);
        let e = err(&GOOD.replace("port = 7300", "port = 7300\nclients = 0"));
        assert!(e.to_string().contains("give 1 to 64"), "{e}");
        let e = err(&(many.replace("clients = 3", "clients = 2")));
        assert!(e.to_string().contains("no run called \"udp-3\""), "{e}");
    }

    #[test]
    fn parses_a_scenario() {
        let s = Scenario::parse(GOOD).unwrap();
        assert_eq!(s.name, "demo");
        assert_eq!(s.topology.links[0].name, "client-server");
        assert_eq!(s.runs.len(), 2);
        assert_eq!(s.runs[0].port, DEFAULT_PORT);
        assert_eq!(s.runs[0].timeout_secs, DEFAULT_TIMEOUT_SECS);
        assert_eq!(s.runs[1].via.as_deref(), Some("client-server"));
        assert_eq!((s.runs[1].port, s.runs[1].timeout_secs), (7300, 60));
        assert_eq!(s.compare[0].title.as_deref(), Some("tcp vs udp"));
    }

    #[test]
    fn inline_topology_errors_carry_the_topology_prefix_and_line() {
        let e = err(&GOOD.replace("b = \"server\"\nrate", "b = \"srv\"\nrate"));
        assert_eq!(e.field, "topology.links[0].b");
        assert_eq!(e.line, Some(12));
        let e = err(&GOOD.replace("rate = \"100mbit\"", "rate = 100"));
        assert_eq!(e.field, "topology.links[0].rate");
        assert_eq!(e.line, Some(13));
    }

    #[test]
    fn run_errors() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("client = \"client\"\nserver = \"server\"\nargs = [\"--transport\", \"tcp\", \"--pattern\"",
             "client = \"nobody\"\nserver = \"server\"\nargs = [\"--transport\", \"tcp\", \"--pattern\"",
             "run[0].client", "unknown host \"nobody\""),
            ("name = \"udp\"", "name = \"tcp\"", "run[1].name", "defined twice"),
            ("name = \"udp\"", "name = \"u/dp\"", "run[1].name", "results file"),
            ("via = \"client-server\"", "via = \"vx9\"", "run[1].via", "no link or tunnel"),
            ("timeout = 60", "timeout = 0", "run[1].timeout", "timeout of 0"),
            ("args = [\"--transport\", \"udp\"]", "args = [\"-o\", \"x.json\"]", "run[1].args", "remove \"-o\""),
            ("runs = [\"tcp\", \"udp\"]", "runs = [\"tcp\", \"sctp\"]", "compare[0].runs", "no run called \"sctp\""),
            ("runs = [\"tcp\", \"udp\"]", "runs = [\"tcp\"]", "compare[0].runs", "at least two"),
            ("timeout = 60", "timeout = 60\ncolour = \"red\"", "run[1].colour", "unknown field `colour`"),
        ];
        for (from, to, field, needle) in cases {
            let text = GOOD.replacen(from, to, 1);
            assert_ne!(text, GOOD, "case {to:?} did not apply");
            let e = err(&text);
            assert_eq!(&e.field, field, "{to:?}: {e}");
            assert!(e.message.contains(needle), "{to:?}: {e}");
            assert!(e.line.is_some(), "{to:?}: {e}");
        }
    }

    #[test]
    fn missing_topology_or_runs() {
        assert!(
            err("[[run]]\nname = \"a\"\nclient = \"a\"\nserver = \"b\"\n")
                .message
                .contains("no topology")
        );
        let only_topo = GOOD.split("[[run]]").next().unwrap_or_default();
        assert!(err(only_topo).message.contains("no runs"));
    }

    #[test]
    fn topology_from_a_file_relative_to_the_scenario() {
        let dir = std::env::temp_dir().join(format!("nsw-scn-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("lab.toml"),
            "[[hosts]]\nname = \"c\"\n[[hosts]]\nname = \"s\"\n[[links]]\na = \"c\"\nb = \"s\"\n",
        )
        .unwrap();
        let scn = dir.join("x.toml");
        std::fs::write(
            &scn,
            "topology = \"lab.toml\"\n[[run]]\nname = \"r\"\nclient = \"c\"\nserver = \"s\"\n",
        )
        .unwrap();
        let s = Scenario::load(&scn).unwrap();
        assert_eq!(s.name, "x");
        assert_eq!(
            s.topology_file.as_deref(),
            Some(dir.join("lab.toml").as_path())
        );
        std::fs::write(
            dir.join("lab.toml"),
            "[[hosts]]\nname = \"c\"\nrouter = 1\n",
        )
        .unwrap();
        let e = Scenario::load(&scn).unwrap_err().to_string();
        assert!(e.contains("lab.toml:3:10: hosts[0].router"), "{e}");
        std::fs::write(&scn, "topology = \"missing.toml\"\n").unwrap();
        let e = Scenario::load(&scn).unwrap_err().to_string();
        assert!(e.contains("cannot read topology file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
