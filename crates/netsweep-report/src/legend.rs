//! Legend labels for several runs, built from what differs between them (transport, api,
//! pattern, family, flows, knobs, hosts, peer, lab), so overlaid curves say what was varied.

use netsweep_model::results::RunResult;

/// A run to label, with the name of the file it came from.
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    /// File name without directory and extension.
    pub name: &'a str,
    /// The run.
    pub run: &'a RunResult,
}

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

/// One label per run: the fields whose values differ between the runs; file names when
/// nothing differs; the file name appended where two labels would still be equal.
pub fn labels(runs: &[Named<'_>]) -> Vec<String> {
    if runs.len() == 1 {
        return vec![describe(runs[0].run)];
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
    let differing: Vec<&(String, bool)> = keys
        .iter()
        .filter(|(k, _)| (1..runs.len()).any(|i| value(i, k) != value(0, k)))
        .collect();
    let mut out: Vec<String> = (0..runs.len())
        .map(|i| {
            let parts: Vec<String> = differing
                .iter()
                .filter_map(|(k, show)| match (value(i, k), show) {
                    (Some(v), false) => Some(v),
                    (Some(v), true) => Some(format!("{k}={v}")),
                    // Only mpi runs have a carrier: the others need no word for its absence.
                    (None, _) if k == "carrier" => None,
                    (None, _) => Some(format!("{k}=default")),
                })
                .collect();
            if parts.is_empty() {
                runs[i].name.to_string()
            } else {
                parts.join(" · ")
            }
        })
        .collect();
    for i in 0..out.len() {
        if (0..out.len()).any(|j| j != i && out[j] == out[i]) {
            let dup = out[i].clone();
            for (j, l) in out.iter_mut().enumerate() {
                if *l == dup && !l.ends_with(&format!("({})", runs[j].name)) {
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
        let l = labels(&[Named { name: "a", run: &a }, Named { name: "b", run: &b }]);
        assert_eq!(l, vec!["tcp", "unix-stream"]);
        let (a, b) = (run("tcp", None), run("tcp", Some(262144)));
        let l = labels(&[Named { name: "a", run: &a }, Named { name: "b", run: &b }]);
        assert_eq!(l, vec!["sndbuf=default", "sndbuf=262144"]);
        let l = labels(&[Named { name: "a", run: &a }, Named { name: "c", run: &a }]);
        assert_eq!(l, vec!["a", "c"]);
        assert_eq!(
            labels(&[Named { name: "a", run: &a }]),
            vec!["tcp pingpong"]
        );
        // A run under background load beside the same run idle.
        let mut loaded = a.clone();
        loaded.spec.background =
            vec![netsweep_model::background::BackgroundSpec::parse("stream,priority=0").unwrap()];
        let l = labels(&[
            Named { name: "a", run: &a },
            Named {
                name: "b",
                run: &loaded,
            },
        ]);
        assert_eq!(l, vec!["background=none", "background=stream,priority=0"]);
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
            Named { name: "a", run: &a },
            Named { name: "b", run: &b },
            Named { name: "t", run: &t },
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
