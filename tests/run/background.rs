//! `--background` (issue 11 item 4) on loopback: the grammar's errors are usage errors that
//! name what is allowed; a run with background flows records, for every point, each flow's
//! trials (one per timed trial of the point) and bytes, equal on both ends of a stream; the
//! server sees one session per flow besides the measured one; and a background flow the
//! server refuses ends the run with exit 1, its message, and a valid partial results file.

use crate::common::serve::Server;
use crate::common::*;

#[test]
fn background_grammar_errors_are_usage_errors_naming_what_is_allowed() {
    for (spec, needle) in [
        ("pingpong", "one of: stream"),
        (
            "stream,colour=red",
            "keys: size, transport, priority, tos, cc, cpu, start",
        ),
        ("stream,size=0", "above 0"),
        ("stream,start=soon", "not a time"),
        // The default trial time is 300 ms: a flow starting later never runs in it.
        ("stream,start=400ms", "below --trial-time"),
        ("stream,priority=high", "give a number"),
        ("stream,transport=carrier-pigeon", "not a transport"),
        // An MPI run has one session (rank 1 serves it): no MPI flow in the background.
        ("stream,transport=mpi", "-t mpi has one"),
    ] {
        let o = run(&["run", "--no-save", "--sizes", "1", "--background", spec]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{spec}: {err}");
        assert!(err.contains(needle), "{spec}: {err}");
    }
    // A spec the flow's transport cannot carry is refused before anything runs.
    let o = run(&[
        "run",
        "--no-save",
        "--sizes",
        "1",
        "--background",
        "stream,transport=udp,size=70000",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--background stream,transport=udp,size=70000") && err.contains("65507"),
        "{err}"
    );
}

#[test]
fn every_point_records_its_background_flows() {
    let dir = scratch("bg-loopback");
    let out = dir.join("r.json");
    let (o, v) = run_json(
        &out,
        &[
            "-p",
            "pingpong",
            "--sizes",
            "1000,4000",
            "--background",
            "stream,size=64k",
            "--background",
            "stream,transport=udp,size=1200",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["status"], "complete");
    assert_eq!(v["spec"]["background"].as_array().unwrap().len(), 2);
    assert_eq!(v["spec"]["background"][1]["transport"], "udp");
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        let bg = p["background"].as_array().expect("background figures");
        assert_eq!(bg.len(), 2, "{p}");
        assert_eq!(bg[0]["flow"], "stream,size=64k");
        assert_eq!(bg[1]["flow"], "stream,transport=udp,size=1200");
        for b in bg {
            // One background trial per timed trial of the point (warm-ups not counted).
            assert_eq!(b["trials"], p["trials"], "{b}");
            let sent = b["bytes_sent"].as_u64().unwrap();
            let got = b["bytes_received"].as_u64().unwrap();
            assert!(got > 0 && b["receiver_mbps"].as_f64().unwrap() > 0.0, "{b}");
            assert!(got <= sent, "{b}");
        }
        // A TCP stream delivers every byte its sender's stack accepted.
        assert_eq!(bg[0]["bytes_sent"], bg[0]["bytes_received"]);
        // UDP: whole datagrams.
        assert_eq!(bg[1]["bytes_received"].as_u64().unwrap() % 1200, 0);
    }
}

#[test]
fn background_figures_in_csv_and_not_in_runs_without_it() {
    let dir = scratch("bg-csv");
    let out = dir.join("r.csv");
    let mut args = vec!["run", "--no-save", "-q", "-o", out.to_str().unwrap()];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--sizes", "100", "--background", "stream,size=16k"]);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.len(), row.len());
    assert_eq!(
        &header[header.len() - 2..],
        ["background_bytes", "background_mbps"]
    );
    assert!(row[row.len() - 2].parse::<u64>().unwrap() > 0, "{text}");
    let plain = dir.join("plain.csv");
    let mut args = vec!["run", "--no-save", "-q", "-o", plain.to_str().unwrap()];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--sizes", "100"]);
    assert!(run(&args).status.success());
    assert!(!std::fs::read_to_string(&plain)
        .unwrap()
        .contains("background"));
}

#[test]
fn a_refused_background_flow_ends_the_run_with_a_partial_file() {
    // One session at a time: the measured run gets it, its background flow is refused.
    let server = Server::start(&["--max-sessions", "1"]);
    let dir = scratch("bg-refused");
    let out = dir.join("r.json");
    let (o, v) = run_json(
        &out,
        &[&server.addr, "--sizes", "100", "--background", "stream"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(v["status"], "failed");
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains("background flow 'stream' failed") && msg.contains("--max-sessions"),
        "{msg}"
    );
    assert!(err.contains("background flow 'stream' failed"), "{err}");
    assert_eq!(v["points"].as_array().unwrap().len(), 0);
    // With room for both, the same run completes and the server logged two sessions.
    let server = Server::start(&["--max-sessions", "2"]);
    let out = dir.join("ok.json");
    let (o, v) = run_json(
        &out,
        &[&server.addr, "--sizes", "100", "--background", "stream"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        v["points"][0]["background"][0]["trials"],
        v["points"][0]["trials"]
    );
}

#[test]
fn the_seed_002_scenario_checks_and_loads_every_band_under_load() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/seeds/002-priority-bands.toml"
    );
    let o = run(&["scenario", "check", file]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("with 125 runs is valid: 25 cells × 5 repetitions"),
        "{out}"
    );
    let s = netsweep_lab::Scenario::load(std::path::Path::new(file)).unwrap();
    let loaded: Vec<&str> = s
        .runs
        .iter()
        .filter(|r| r.repetition == 1 && r.args.iter().any(|a| a == "--background"))
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        loaded,
        [
            "compete-prio-high-r1",
            "compete-prio-low-r1",
            "compete-fifo-high-r1",
            "compete-fifo-low-r1"
        ]
    );
    let many = s
        .runs
        .iter()
        .find(|r| r.name == "many-clients8-r1")
        .unwrap();
    assert_eq!(many.clients, 8);
    // Each of the seed's fourteen band numbers has its own htb class on the idle link.
    let classes: Vec<u32> = s.topology.links[0]
        .classes
        .iter()
        .map(|c| c.priority)
        .collect();
    assert_eq!(
        classes,
        [1, 2, 20, 40, 50, 60, 80, 100, 120, 140, 160, 180, 200, 255]
    );
}
