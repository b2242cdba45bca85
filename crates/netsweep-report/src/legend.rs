//! Legend labels for several runs, built from what differs between them (transport, api,
//! pattern, family, flows, knobs, hosts, peer, lab), so overlaid curves say what was varied.

use netsweep_model::results::RunResult;
use netsweep_model::spec::Family;

/// A run to label, with the name of the file it came from.
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    /// File name without directory and extension.
    pub name: &'a str,
    /// The run.
    pub run: &'a RunResult,
    /// The label the user gave it (`--label`), used as given.
    pub label: Option<&'a str>,
}

impl<'a> Named<'a> {
    /// A run from the file `name`, labelled by [`labels`]' rules.
    pub fn new(name: &'a str, run: &'a RunResult) -> Self {
        Named {
            name,
            run,
            label: None,
        }
    }
}

/// A legend of more parts than this, or longer, is not read: the file's name says it better.
const MAX_PARTS: usize = 3;
const MAX_CHARS: usize = 40;

/// The describing fields of a run, in legend order: (key, value, show key in label).
pub fn fields(run: &RunResult) -> Vec<(String, String, bool)> {
    let s = &run.spec;
    let mut v = vec![
        ("transport".into(), s.transport.name().to_string(), false),
        ("api".into(), s.api.name().to_string(), false),
        ("pattern".into(), s.pattern.name().to_string(), false),
        ("family".into(), s.family.name().to_string(), false),
        ("flows".into(), s.flows.to_string(), true),
    ];
    for (side, knobs) in [("", &s.client_knobs), ("server ", &s.server_knobs)] {
        if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(knobs) {
            for (k, val) in m {
                let text = match val {
                    serde_json::Value::Null => continue,
                    serde_json::Value::Object(o) if o.is_empty() => continue,
                    serde_json::Value::String(t) => t,
                    other => other.to_string(),
                };
                v.push((format!("{side}{k}"), text, true));
            }
        }
    }
    // Background load (`--background`): "none" beside a loaded run says which one is idle.
    let flows: Vec<&str> = s.background.iter().map(|b| b.text.as_str()).collect();
    let load = if flows.is_empty() {
        "none".to_string()
    } else {
        flows.join(" + ")
    };
    v.push(("background".into(), load, true));
    v.push(("host".into(), run.client.hostname.clone(), true));
    v.push(("server".into(), run.server.hostname.clone(), true));
    // An mpi peer's data port is picked at run time: the rank is what tells runs apart.
    let peer = match run.peer.split_once(" at ") {
        Some((rank, _)) if s.transport == netsweep_model::spec::Transport::Mpi => rank.to_string(),
        _ => run.peer.clone(),
    };
    v.push(("peer".into(), peer, true));
    // What carried an mpi run's bytes (its TCP BTL, or the library's choice: shared memory on
    // one host), from the note the run recorded.
    if let Some(carrier) = mpi_carrier(run) {
        v.push(("carrier".into(), carrier, false));
    }
    if let Some(name) = run
        .lab
        .as_ref()
        .and_then(|l| l.get("name"))
        .and_then(|n| n.as_str())
    {
        v.push(("lab".into(), name.to_string(), true));
    }
    v
}

/// The carrier an mpi run recorded in its notes ("carrier: btl=tcp,self; …"), shortened.
fn mpi_carrier(run: &RunResult) -> Option<String> {
    let note = run
        .granted
        .client
        .notes
        .iter()
        .find(|n| n.starts_with("mpi:"))?;
    let carrier = note.split("carrier: ").nth(1)?.split(';').next()?.trim();
    Some(if carrier.starts_with("chosen by the library") {
        "MPI's choice".to_string()
    } else {
        carrier.to_string()
    })
}

/// A short name of one run on its own: "tcp pingpong".
pub fn describe(run: &RunResult) -> String {
    format!("{} {}", run.spec.transport, run.spec.pattern)
}

/// One label per run: the user's (`--label`) where given; otherwise the fields whose values
/// differ between the runs — a knob only among the runs whose transport it applies to (no
/// "nodelay=default" for a unix socket beside tcp) — when that is short (at most three parts,
/// 40 characters), else the file's name; file names too when nothing differs; the file name
/// appended where two labels would still be equal.
pub fn labels(runs: &[Named<'_>]) -> Vec<String> {
    if runs.len() == 1 {
        return vec![runs[0]
            .label
            .map_or_else(|| describe(runs[0].run), str::to_string)];
    }
    let all: Vec<Vec<(String, String, bool)>> = runs.iter().map(|r| fields(r.run)).collect();
    let mut keys: Vec<(String, bool)> = Vec::new();
    for f in &all {
        for (k, _, show) in f {
            if !keys.iter().any(|(x, _)| x == k) {
                keys.push((k.clone(), *show));
            }
        }
    }
    let value = |i: usize, k: &str| {
        all[i]
            .iter()
            .find(|(x, _, _)| x == k)
            .map(|(_, v, _)| v.clone())
    };
    // A field applies to a run when some run of its transport has it (a knob set on tcp
    // says nothing about a unix socket); the always-present fields apply to every run.
    let applies = |i: usize, k: &str| {
        // Only an IP transport has a family to choose; the others' is their transport's.
        if k == "family" {
            return matches!(runs[i].run.spec.family, Family::Ipv4 | Family::Ipv6);
        }
        let t = runs[i].run.spec.transport;
        (0..runs.len()).any(|j| runs[j].run.spec.transport == t && value(j, k).is_some())
    };
    // The server's knob is named apart only where it differs from the client's in some run
    // (the CLI sets both ends alike unless told otherwise).
    let mirrors = |k: &str| {
        k.strip_prefix("server ")
            .is_some_and(|c| (0..runs.len()).all(|i| value(i, k) == value(i, c)))
    };
    let differing: Vec<&(String, bool)> = keys
        .iter()
        .filter(|(k, _)| {
            let of: Vec<usize> = (0..runs.len()).filter(|&i| applies(i, k)).collect();
            !mirrors(k) && of.iter().any(|&i| value(i, k) != value(of[0], k))
        })
        .collect();
    let mut out: Vec<String> = (0..runs.len())
        .map(|i| {
            if let Some(l) = runs[i].label {
                return l.to_string();
            }
            let parts: Vec<String> = differing
                .iter()
                .filter(|(k, _)| applies(i, k))
                .map(|(k, show)| match (value(i, k), show) {
                    (Some(v), false) => v,
                    (Some(v), true) => format!("{k}={v}"),
                    (None, _) => format!("{k}=default"),
                })
                .collect();
            let text = parts.join(" · ");
            if parts.is_empty() || parts.len() > MAX_PARTS || text.chars().count() > MAX_CHARS {
                runs[i].name.to_string()
            } else {
                text
            }
        })
        .collect();
    for i in 0..out.len() {
        if runs[i].label.is_some() {
            continue;
        }
        if (0..out.len()).any(|j| j != i && out[j] == out[i]) {
            let dup = out[i].clone();
            for (j, l) in out.iter_mut().enumerate() {
                if *l == dup
                    && runs[j].label.is_none()
                    && !l.ends_with(&format!("({})", runs[j].name))
                {
                    *l = format!("{l} ({})", runs[j].name);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(transport: &str, sndbuf: Option<u64>) -> RunResult {
        let mut r: RunResult =
            netsweep_model::results::load(include_str!("../../../tests/data/tcp-pingpong.json"))
                .unwrap();
        r.spec.transport = netsweep_model::spec::Transport::parse(transport).unwrap();
        r.spec.client_knobs.sndbuf = sndbuf;
        r
    }

    #[test]
    fn labels_name_what_differs() {
        let (a, b) = (run("tcp", None), run("unix", None));
        let l = labels(&[Named::new("a", &a), Named::new("b", &b)]);
        assert_eq!(l, vec!["tcp", "unix-stream"]);
        let (a, b) = (run("tcp", None), run("tcp", Some(262144)));
        let l = labels(&[Named::new("a", &a), Named::new("b", &b)]);
        assert_eq!(l, vec!["sndbuf=default", "sndbuf=262144"]);
        let l = labels(&[Named::new("a", &a), Named::new("c", &a)]);
        assert_eq!(l, vec!["a", "c"]);
        assert_eq!(labels(&[Named::new("a", &a)]), vec!["tcp pingpong"]);
        // A run under background load beside the same run idle.
        let mut loaded = a.clone();
        loaded.spec.background =
            vec![netsweep_model::background::BackgroundSpec::parse("stream,priority=0").unwrap()];
        let l = labels(&[Named::new("a", &a), Named::new("b", &loaded)]);
        assert_eq!(l, vec!["background=none", "background=stream,priority=0"]);
    }

    #[test]
    fn knobs_a_transport_has_not_are_not_named_and_long_labels_give_way_to_the_file() {
        // The finding: "tcp · pingpong · ipv4 · nodelay=true · server nodelay=true" beside
        // "unix-stream · stream · unix · nodelay=default · …".
        let mut tcp = run("tcp", None);
        tcp.spec.client_knobs.nodelay = Some(true);
        tcp.spec.server_knobs.nodelay = Some(true);
        let mut unix = run("unix", None);
        unix.spec.family = Family::Unix;
        unix.spec.pattern = netsweep_model::spec::Pattern::Stream;
        let big = {
            let mut r = tcp.clone();
            r.spec.client_knobs.sndbuf = Some(262144);
            r.spec.server_knobs.sndbuf = Some(262144);
            r
        };
        let l = labels(&[
            Named::new("t", &tcp),
            Named::new("u", &unix),
            Named::new("b", &big),
        ]);
        assert_eq!(
            l,
            vec![
                "tcp · pingpong · sndbuf=default",
                "unix-stream · stream",
                "tcp · pingpong · sndbuf=262144"
            ]
        );
        // The server's knob set apart from the client's is named.
        let mut odd = big.clone();
        odd.spec.server_knobs.sndbuf = None;
        let l = labels(&[Named::new("b", &big), Named::new("o", &odd)]);
        assert_eq!(l, vec!["server sndbuf=262144", "server sndbuf=default"]);
        // Four differing fields are not a legend: the files' names are.
        let mut many = odd.clone();
        many.spec.flows = 4;
        many.spec.client_knobs.rcvbuf = Some(1 << 20);
        many.spec.pattern = netsweep_model::spec::Pattern::Stream;
        let l = labels(&[Named::new("before", &tcp), Named::new("after", &many)]);
        assert_eq!(l, vec!["before", "after"]);
        // The user's labels win, as given.
        let l = labels(&[
            Named {
                label: Some("kernel 6.1"),
                ..Named::new("before", &tcp)
            },
            Named {
                label: Some("kernel 6.12"),
                ..Named::new("after", &many)
            },
        ]);
        assert_eq!(l, vec!["kernel 6.1", "kernel 6.12"]);
    }

    #[test]
    fn mpi_runs_are_told_apart_by_their_carrier_not_their_port() {
        let mpi = |port: u16, carrier: &str| {
            let mut r = run("mpi", None);
            r.peer = format!("mpi rank 1 at 127.0.0.1:{port}");
            r.granted.client.notes = vec![format!(
                "mpi: Open MPI v4.1.4; carrier: {carrier}; rank 0 on vm"
            )];
            r
        };
        let a = mpi(43371, "btl=tcp,self");
        let b = mpi(34779, "chosen by the library (no --mca pml/btl/mtl given)");
        let mut t = run("tcp", None);
        t.peer = "in-process".into();
        let l = labels(&[
            Named::new("a", &a),
            Named::new("b", &b),
            Named::new("t", &t),
        ]);
        assert_eq!(
            l,
            vec![
                "mpi · peer=mpi rank 1 · btl=tcp,self",
                "mpi · peer=mpi rank 1 · MPI's choice",
                "tcp · peer=in-process"
            ]
        );
    }
}
