//! Tests of scenario files: runs, comparisons, factors, repetitions, claims and figures.
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
fn a_run_may_be_a_responsiveness_test_and_nothing_else() {
    let rpm = GOOD.replace("port = 7300", "port = 7300\ncommand = \"rpm\"");
    let s = Scenario::parse(&rpm).unwrap();
    assert_eq!(
        (s.runs[0].command, s.runs[1].command),
        (RunCommand::Run, RunCommand::Rpm)
    );
    let e = err(&GOOD.replace("port = 7300", "port = 7300\ncommand = \"perf\""));
    assert!(e.to_string().contains("give \"run\""), "{e}");
    let e = err(&rpm.replace("port = 7300", "port = 7300\nclients = 2"));
    assert!(e.to_string().contains("one responsiveness test"), "{e}");
    let e = err(&rpm.replace("port = 7300", "port = 7300\nserver_args = [\"-q\"]"));
    assert!(e.to_string().contains("drop -q"), "{e}");
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

/// Seed 002 as factors: a band over four levels, idle or loaded, five repetitions.
const BANDS: &str = r#"
name = "bands"
description = "1000-byte round trips per band on a 100 Mbit/s link"
repeat = 3

[topology]
[[topology.hosts]]
name = "client"
[[topology.hosts]]
name = "server"
[[topology.links]]
a = "client"
b = "server"
rate = "100mbit"

[[factor]]
name = "band"
label = "SO_PRIORITY band"
arg = "--priority"
levels = [1, 2, 6, 0]
labels = ["band 1", "band 2", "band 6", "band 0"]

[[factor]]
name = "load"
label = "competing load"
levels = [
  { name = "idle", label = "idle" },
  { name = "loaded", label = "band-0 stream", args = ["--background", "stream,size=64k,priority=0"] },
]

[[run]]
name = "rtt"
client = "client"
server = "server"
args = ["-p", "pingpong", "--sizes", "1000"]

[[claim]]
check = "rtt_p50[band=0, load=loaded] > 10 * rtt_p50[band=0, load=idle]"
says = "a loaded band 0 waits far longer than an idle one"
seed = "Under competition the higher band should take precedence"

[[figure]]
y = "rtt_p50"
x = "band"
series = "load"
"#;

#[test]
fn factors_expand_into_the_full_grid_run_in_rounds() {
    let s = Scenario::parse(BANDS).unwrap();
    let d = &s.design;
    assert_eq!(d.cells.len(), 8);
    let names: Vec<&str> = d.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "rtt-band1-idle",
            "rtt-band1-loaded",
            "rtt-band2-idle",
            "rtt-band2-loaded",
            "rtt-band6-idle",
            "rtt-band6-loaded",
            "rtt-band0-idle",
            "rtt-band0-loaded"
        ]
    );
    assert_eq!(s.runs.len(), 24);
    // Round after round, every cell once per round.
    let order: Vec<(usize, u32)> = s.runs.iter().map(|r| (r.cell, r.repetition)).collect();
    assert_eq!(
        &order[..9],
        &[
            (0, 1),
            (1, 1),
            (2, 1),
            (3, 1),
            (4, 1),
            (5, 1),
            (6, 1),
            (7, 1),
            (0, 2)
        ]
    );
    assert_eq!(s.runs[9].name, "rtt-band1-loaded-r2");
    assert_eq!(
        s.runs[1].args,
        [
            "-p",
            "pingpong",
            "--sizes",
            "1000",
            "--priority",
            "1",
            "--background",
            "stream,size=64k,priority=0"
        ]
    );
    assert_eq!(
        s.runs[6].args,
        ["-p", "pingpong", "--sizes", "1000", "--priority", "0"]
    );
    assert_eq!(d.factors[0].levels[2].label, "band 6");
    assert_eq!(d.factors[0].levels[2].x, Some(6.0));
    assert!(d.factors[0].is_numeric() && !d.factors[1].is_numeric());
    assert_eq!(s.claims.len(), 1);
    assert_eq!(s.figures[0].id, "rtt_p50-by-band");
    assert_eq!(s.topologies.len(), 1);
}

#[test]
fn random_order_and_listed_combinations() {
    let text = BANDS.replace("repeat = 3", "repeat = 2\norder = \"random\"\nseed = 9").replace(
        "args = [\"-p\", \"pingpong\", \"--sizes\", \"1000\"]",
        "args = [\"-p\", \"pingpong\", \"--sizes\", \"1000\"]\ncombinations = [{ band = 1, load = \"idle\" }, { band = \"band 0\", load = \"loaded\" }, { band = 0, load = \"idle\" }]",
    );
    let s = Scenario::parse(&text).unwrap();
    assert_eq!(s.design.cells.len(), 3);
    assert_eq!(s.design.cells[1].name, "rtt-band0-loaded");
    let mut first: Vec<usize> = s.runs[..3].iter().map(|r| r.cell).collect();
    assert_ne!(first, [0, 1, 2], "seed 9 shuffles the first round");
    first.sort_unstable();
    assert_eq!(first, [0, 1, 2]);
    // The claim names cells that are still there.
    let e = err(&text.replace(
        "[[claim]]",
        "[[claim]]\ncheck = \"rtt_p50[band=2, load=idle] > 1us\"\n[[claim]]",
    ));
    assert!(e.message.contains("picks no cell"), "{e}");
}

#[test]
fn experiment_errors_name_the_field_and_the_fix() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "check = \"rtt_p50[band=0, load=loaded] > 10 * rtt_p50[band=0, load=idle]\"",
            "check = \"rtt_p50[band=0, load=loaded] > 10 * rtt_p99[band=9, load=idle]\"",
            "claim[0].check",
            "no level \"9\"",
        ),
        (
            "check = \"rtt_p50[band=0, load=loaded] > 10 * rtt_p50[band=0, load=idle]\"",
            "check = \"rtt_p5O[band=0, load=loaded] > 1ms\"",
            "claim[0].check",
            "no figure called \"rtt_p5O\"",
        ),
        (
            "check = \"rtt_p50[band=0, load=loaded] > 10 * rtt_p50[band=0, load=idle]\"",
            "check = \"rtt_p50[band=0, load=idle] < rtt_p50[band=0, load=idle]\"",
            "claim[0].check",
            "with itself",
        ),
        (
            "check = \"rtt_p50[band=0, load=loaded] > 10 * rtt_p50[band=0, load=idle]\"",
            "check = \"rtt_p50[band=0, load=idle] <= 2 * rtt_p50[band=0, load=idle]\"",
            "claim[0].check",
            "only the constants differ",
        ),
        (
            "check = \"rtt_p50[band=0, load=loaded] > 10 * rtt_p50[band=0, load=idle]\"",
            "check = \"rtt_p50[band=0, load=idle] <= rtt_p50[band=0, load=idle] + 1ms\"",
            "claim[0].check",
            "only the constants differ",
        ),
        (
            "says = \"a loaded band 0 waits far longer than an idle one\"",
            "says = \"a loaded band 0 waits 22.8 ms\"",
            "claim[0].says",
            "measured number",
        ),
        ("repeat = 3", "repeat = 0", "repeat", "1 to 1000"),
        ("repeat = 3", "order = \"shuffled\"", "order", "\"random\""),
        (
            "arg = \"--priority\"",
            "arg = \"priority\"",
            "factor[0]",
            "not a flag",
        ),
        (
            "labels = [\"band 1\", \"band 2\", \"band 6\", \"band 0\"]",
            "labels = [\"band 1\"]",
            "factor[0]",
            "1 labels for 4 levels",
        ),
        (
            "x = \"band\"",
            "x = \"bands\"",
            "figure[0]",
            "no factor called \"bands\"",
        ),
        (
            "y = \"rtt_p50\"",
            "y = \"rtt\"",
            "figure[0]",
            "no figure called \"rtt\"",
        ),
        (
            "series = \"load\"",
            "series = \"band\"",
            "figure[0]",
            "already on another axis",
        ),
        (
            "description = \"1000-byte round trips per band on a 100 Mbit/s link\"",
            "description = \"idle bands cost 84 µs\"",
            "description",
            "84 µs",
        ),
        (
            "name = \"band\"\nlabel",
            "name = \"size\"\nlabel",
            "factor[0]",
            "is taken",
        ),
    ];
    for (from, to, field, needle) in cases {
        let text = BANDS.replacen(from, to, 1);
        assert_ne!(text, BANDS, "case {to:?} did not apply");
        let e = err(&text);
        assert!(e.field.starts_with(field), "{to:?}: {e}");
        assert!(e.message.contains(needle), "{to:?}: {e}");
        assert!(e.line.is_some(), "{to:?}: {e}");
    }
}

#[test]
fn a_lab_factor_builds_one_lab_per_level_and_clients_and_via_factors_apply() {
    let text = GOOD
        .replace("[[run]]\nname = \"udp\"", "[[factor]]\nname = \"rate\"\nlab = \"links.client-server.rate\"\nlevels = [\"10mbit\", \"50mbit\"]\n\n[[factor]]\nname = \"n\"\nclients = true\nlevels = [1, 3]\n\n[[run]]\nname = \"udp\"")
        .replace("runs = [\"tcp\", \"udp\"]", "runs = [\"tcp-rate10mbit-n1\", \"udp-rate50mbit-n3-1\"]");
    let s = Scenario::parse(&text).unwrap();
    assert_eq!(s.design.cells.len(), 8);
    assert_eq!(s.topologies.len(), 2);
    let rate = |i: usize| s.topologies[i].links[0].rate.map(|r| r.bits_per_sec);
    assert_eq!((rate(0), rate(1)), (Some(10_000_000), Some(50_000_000)));
    let r = s
        .runs
        .iter()
        .find(|r| r.name == "udp-rate50mbit-n3")
        .unwrap();
    assert_eq!(
        (r.clients, r.topology, r.via.as_deref()),
        (3, 1, Some("client-server"))
    );
    assert_eq!(s.design.factors[0].levels[1].x, Some(5e7));
    let e = err(&text.replace(
        "levels = [\"10mbit\", \"50mbit\"]",
        "levels = [\"10mbit\", \"fast\"]",
    ));
    assert!(
        e.message.contains("links.client-server.rate = \"fast\""),
        "{e}"
    );
    let e = err(&text.replace(
        "lab = \"links.client-server.rate\"",
        "lab = \"links.nowhere.rate\"",
    ));
    assert!(e.message.contains("no link called \"nowhere\""), "{e}");
}

#[test]
fn a_grid_too_large_to_run_is_refused_before_it_is_built() {
    let mut text = BANDS.replace("repeat = 3", "repeat = 1000");
    for i in 0..8 {
        text.push_str(&format!(
            "\n[[factor]]\nname = \"f{i}\"\narg = \"--x{i}\"\nlevels = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        ));
    }
    let e = err(&text);
    assert!(e.message.contains("more than 10000 runs"), "{e}");
}
