//! The `mpi` transport (issue 14): without the `mpi` feature it is a usage error naming the
//! build; with it, outside `mpirun` or with the wrong world size it is a usage error naming
//! the launch; under `mpirun -np 2` (Open MPI) pingpong and stream runs count every message on
//! both ranks, the results name the library and the carrier, and a run forced onto the TCP
//! BTL moves its bytes over loopback (the interface's own counters, an independent count)
//! while the default (shared memory) does not. `./run-tests` builds with `--features mpi`.

use common::*;
use netsweep_testkit::exe as common;
#[cfg(feature = "mpi")]
use serde_json::Value;
#[cfg(feature = "mpi")]
use std::process::Command;

#[cfg(not(feature = "mpi"))]
#[test]
fn without_the_feature_mpi_is_a_usage_error_naming_the_build() {
    let o = run(&["run", "-t", "mpi", "--no-save", "-q", "--sizes", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--features mpi") && err.contains("libopenmpi-dev"),
        "{err}"
    );
}

/// A scenario whose runs use `--transport mpi` is refused before any lab is built, naming the
/// run and the build.
#[cfg(not(feature = "mpi"))]
#[test]
fn without_the_feature_an_mpi_scenario_is_a_usage_error_naming_the_build() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/seeds/004-mpi-vs-tcp.toml");
    let out = scratch("mpi-scenario-unbuilt");
    let o = run(&[
        "scenario",
        "run",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("\"signature-mpi") && err.contains("--features mpi"),
        "{err}"
    );
}

#[cfg(not(feature = "mpi"))]
#[test]
fn without_the_feature_mesh_is_a_usage_error_naming_the_build() {
    let o = run(&["mesh", "--sizes", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--features mpi") && err.contains("netsweep mesh"),
        "{err}"
    );
}

#[test]
fn mesh_with_a_host_or_the_mpi_transport_is_a_usage_error() {
    for (args, needle) in [
        (&["mesh", "127.0.0.1"][..], "drop HOST"),
        (
            &["mesh", "-t", "mpi"][..],
            "mpirun -np 2 netsweep run -t mpi",
        ),
        (
            &["mesh", "--layout", "star"][..],
            "pairs, ring, incast, bisection",
        ),
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn mpi_with_a_host_is_a_usage_error() {
    let o = run(&["run", "127.0.0.1", "-t", "mpi", "--no-save", "-q"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("drop HOST"), "{err}");
}

#[cfg(feature = "mpi")]
#[test]
fn outside_mpirun_mpi_is_a_usage_error_naming_the_launch() {
    let o = Command::new(bin())
        .args(["run", "-t", "mpi", "--no-save", "-q", "--sizes", "1"])
        .env_remove("OMPI_COMM_WORLD_SIZE")
        .env_remove("PMI_SIZE")
        .env_remove("PMIX_RANK")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("mpirun -np 2"), "{err}");
}

/// `mpirun -np <n> [mca…] netsweep run -t mpi <args>` as root (Open MPI needs its consent).
#[cfg(feature = "mpi")]
fn mpirun(n: u32, mca: &[&str], args: &[&str]) -> std::process::Output {
    Command::new("mpirun")
        .args([
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
            &n.to_string(),
        ])
        .args(mca)
        .arg(bin())
        .args(["run", "-t", "mpi", "--no-save", "-q"])
        .args(QUICK)
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun runs")
}

/// One mpirun at a time: the loopback byte count of the carrier test must see its own run
/// only (a concurrent mesh over loopback would add to it).
#[cfg(feature = "mpi")]
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(feature = "mpi")]
fn require_mpirun(test: &str) -> std::sync::MutexGuard<'static, ()> {
    require_tool(test, "mpirun", "openmpi-bin");
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(feature = "mpi")]
fn load(out: &std::path::Path, o: &std::process::Output) -> Value {
    let text = std::fs::read_to_string(out).unwrap_or_else(|e| {
        panic!(
            "no results ({e}); stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    serde_json::from_str(&text).unwrap()
}

/// Bytes the loopback interface has carried (its receive counter).
#[cfg(feature = "mpi")]
fn lo_bytes() -> u64 {
    std::fs::read_to_string("/sys/class/net/lo/statistics/rx_bytes")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[cfg(feature = "mpi")]
#[test]
#[ignore = "needs Open MPI (openmpi-bin): ./run-tests builds --features mpi and runs it"]
fn pingpong_and_stream_count_every_message_on_both_ranks() {
    let _one = require_mpirun("pingpong_and_stream_count_every_message_on_both_ranks");
    let dir = scratch("mpi");
    let out = dir.join("pingpong.json");
    let o = mpirun(
        2,
        &[],
        &[
            "-p",
            "pingpong",
            "--sizes",
            "1,1000,65536",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = load(&out, &o);
    assert_eq!(v["status"], "complete");
    assert_eq!(v["spec"]["transport"], "mpi");
    assert_eq!(v["spec"]["family"], "mpi");
    let notes = v["granted"]["client"]["notes"].to_string();
    assert!(
        notes.contains("Open MPI") && notes.contains("rank 0"),
        "{notes}"
    );
    let notes = v["granted"]["server"]["notes"].to_string();
    assert!(notes.contains("rank 1"), "{notes}");
    let pts = v["points"].as_array().unwrap();
    assert_eq!(pts.len(), 3);
    for p in pts {
        let (c, s) = (&p["client"], &p["server"]);
        assert!(c["messages_sent"].as_u64().unwrap() > 0);
        // Every request the client sent came back: the server received and echoed each.
        assert_eq!(c["messages_sent"], s["messages_received"], "{p}");
        assert_eq!(s["messages_sent"], c["messages_received"], "{p}");
        assert_eq!(c["bytes_sent"], s["bytes_received"], "{p}");
    }

    let out = dir.join("stream.json");
    let o = mpirun(
        2,
        &[],
        &[
            "-p",
            "stream",
            "--sizes",
            "64,65536,1048576",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = load(&out, &o);
    for p in v["points"].as_array().unwrap() {
        let sent = p["client"]["bytes_sent"].as_u64().unwrap();
        assert!(sent > 0);
        assert_eq!(p["server"]["bytes_received"].as_u64(), Some(sent), "{p}");
        assert_eq!(sent % p["size"].as_u64().unwrap(), 0, "whole messages only");
    }
}

#[cfg(feature = "mpi")]
#[test]
#[ignore = "needs Open MPI (openmpi-bin): ./run-tests builds --features mpi and runs it"]
fn the_carrier_is_recorded_and_the_tcp_btl_moves_bytes_over_loopback() {
    let _one = require_mpirun("the_carrier_is_recorded_and_the_tcp_btl_moves_bytes_over_loopback");
    let dir = scratch("mpi-btl");
    let mut moved = Vec::new();
    for (name, mca) in [
        ("tcp", &["--mca", "btl", "tcp,self"][..]),
        ("default", &[][..]),
    ] {
        let out = dir.join(format!("{name}.json"));
        let before = lo_bytes();
        let o = mpirun(
            2,
            mca,
            &[
                "-p",
                "stream",
                "--sizes",
                "1048576",
                "-o",
                out.to_str().unwrap(),
            ],
        );
        let lo = lo_bytes() - before;
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v = load(&out, &o);
        let data: u64 = v["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["server"]["bytes_received"].as_u64().unwrap())
            .sum();
        let notes = v["granted"]["client"]["notes"].to_string();
        moved.push((name, data, lo, notes));
    }
    let (_, data, lo, notes) = &moved[0];
    assert!(notes.contains("btl=tcp,self"), "{notes}");
    // Over the TCP BTL every data byte crossed loopback (with headers: at least as many).
    assert!(
        *data > 2_000_000 && lo >= data,
        "tcp btl: {data} data bytes, lo {lo}"
    );
    let (_, data, lo, notes) = &moved[1];
    assert!(notes.contains("chosen by the library"), "{notes}");
    // Shared memory between ranks on one host: loopback carried the control traffic only
    // (tens of kB), far from the data.
    assert!(
        *data > 2_000_000 && lo * 2 < *data,
        "default: {data} data bytes, lo {lo}"
    );
}

#[cfg(feature = "mpi")]
#[test]
#[ignore = "needs Open MPI (openmpi-bin): ./run-tests builds --features mpi and runs it"]
fn three_ranks_are_refused_with_the_launch_to_use() {
    let _one = require_mpirun("three_ranks_are_refused_with_the_launch_to_use");
    let o = mpirun(3, &[], &["--sizes", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("exactly two ranks"), "{err}");
}

/// Four hosts, every pair on its own link (six links), the 1–3 link shaped to 30 Mbit/s.
#[cfg(feature = "mpi")]
const FULL_MESH_4: &str = include_str!("../scenarios/topologies/mesh4.toml");

#[cfg(feature = "mpi")]
#[test]
#[ignore = "needs root and Open MPI: ./run-tests builds --features mpi and runs it"]
fn a_mesh_across_a_lab_flags_exactly_the_slow_link() {
    use netsweep_lab::{Lab, Topology};
    use netsweep_testkit::lab::{lab_test, run_id};
    let _one = require_mpirun("a_mesh_across_a_lab_flags_exactly_the_slow_link");
    let _l = lab_test("a_mesh_across_a_lab_flags_exactly_the_slow_link");
    let lab = Lab::up(&Topology::parse(FULL_MESH_4).unwrap(), &run_id("mesh")).unwrap();
    let dir = scratch("mpi-mesh");
    let out = dir.join("mesh.json");
    let o = Command::new("mpirun")
        .args(["--oversubscribe", "--bind-to", "none", "-np", "4"])
        .arg(bin())
        .args([
            "mesh",
            "--lab",
            lab.run_id(),
            "-q",
            "-o",
            out.to_str().unwrap(),
        ])
        .args(QUICK)
        .args(["-p", "stream", "--sizes", "16k,64k"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .unwrap();
    let v = load(&out, &o);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["schema"], "netsweep-mesh");
    assert_eq!(v["status"], "complete");
    assert_eq!(v["rounds"], 3);
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 6, "every pair once");
    for p in pairs {
        assert!(p["error"].is_null(), "{p}");
        // Each rank measured from its lab host: the peer is the server's address on their link.
        let peer = p["result"]["peer"].as_str().unwrap();
        assert!(peer.contains("198.18."), "{peer}");
        for pt in p["result"]["points"].as_array().unwrap() {
            assert_eq!(pt["client"]["bytes_sent"], pt["server"]["bytes_received"]);
        }
    }
    // The shaped link stands out, and nothing else: 30 Mbit/s against veth's gigabits.
    let flagged = v["flagged"].as_array().unwrap();
    assert_eq!(flagged.len(), 1, "{flagged:#?}");
    assert_eq!(flagged[0]["what"], "pair");
    assert_eq!(flagged[0]["flow"]["client"], 1);
    assert_eq!(flagged[0]["flow"]["server"], 3);
    let m = &v["matrices"][0]["throughput_mbps"];
    let slow = m[1][3].as_f64().unwrap();
    assert!(slow < 31.0, "shaped pair at {slow} Mbit/s");
    // The report beside it draws the heatmaps.
    let html = std::fs::read_to_string(out.with_extension("html")).unwrap();
    assert!(
        html.matches("<svg").count() >= 2 && html.contains("pair 1 → 3"),
        "{html}"
    );
    drop(lab);
}

/// The pid of the `netsweep mesh` process of MPI rank `rank`, once it runs.
#[cfg(feature = "mpi")]
fn rank_pid(rank: u32) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let has = |hay: &[u8], needle: &[u8]| hay.split(|b| *b == 0).any(|s| s == needle);
        (has(&cmd, b"mesh") && has(&env, want.as_bytes()) && cmd.starts_with(bin().as_bytes()))
            .then_some(pid)
    })
}

#[cfg(feature = "mpi")]
#[test]
#[ignore = "needs Open MPI (openmpi-bin): ./run-tests builds --features mpi and runs it"]
fn a_mesh_rank_that_dies_ends_the_run_and_keeps_what_was_measured() {
    let _one = require_mpirun("a_mesh_rank_that_dies_ends_the_run_and_keeps_what_was_measured");
    let dir = scratch("mpi-mesh-die");
    let out = dir.join("mesh.json");
    let child = Command::new("mpirun")
        .args(["--oversubscribe", "--bind-to", "none", "-np", "3"])
        .arg(bin())
        .args(["mesh", "-q", "-o", out.to_str().unwrap()])
        .args([
            "--trial-time",
            "5ms",
            "--max-point-time",
            "100ms",
            "--timeout",
            "5s",
        ])
        .args(["-p", "pingpong", "--sizes", "1..4096:*2"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The file appears after the first of three rounds: then rank 2 dies.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !out.exists() {
        assert!(std::time::Instant::now() < deadline, "no mesh file");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = rank_pid(2).expect("rank 2 runs");
    // SAFETY: kill(2) on a pid we found running our binary.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success());
    let v = load(&out, &o);
    assert_eq!(v["status"], "failed", "{v}");
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("measured and saved"), "{msg}");
    let pairs = v["pairs"].as_array().unwrap();
    assert!(
        !pairs.is_empty() && pairs.len() < 3,
        "{} pairs",
        pairs.len()
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("a rank died") || stderr.contains("rank 2"),
        "{stderr}"
    );
}

/// Seed 004's MPI page, short: the scenario runs MPI across a lab link beside netsweep's tcp,
/// blocking and busy-polled. Rank 1 served from the server's namespace at its address on the
/// link; MPI was held to its TCP transport, and its bytes arrived by IP in rank 1's namespace
/// (that namespace's own IP counters over the point, an independent count); every claim of
/// the page was evaluated.
#[cfg(feature = "mpi")]
#[test]
#[ignore = "needs root and Open MPI: ./run-tests builds --features mpi and runs it"]
fn seed_004_mpi_vs_tcp_runs_mpi_across_a_lab_link() {
    use netsweep_testkit::lab::lab_test;
    let _one = require_mpirun("seed_004_mpi_vs_tcp_runs_mpi_across_a_lab_link");
    let _l = lab_test("seed_004_mpi_vs_tcp_runs_mpi_across_a_lab_link");
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/seeds/004-mpi-vs-tcp.toml");
    let text = std::fs::read_to_string(file).unwrap();
    let long = r#""--sizes", "1..4m:*2""#;
    assert!(text.contains(long), "the scenario's sizes changed");
    assert!(text.contains("repeat = 9"), "the scenario's repeat changed");
    let text = text
        .replace(long, r#""--sizes", "1,64k,4m", "--trial-time", "5ms""#)
        .replace("repeat = 9", "repeat = 1");
    let dir = scratch("seed004mpi");
    let short = dir.join("scenario.toml");
    std::fs::write(&short, text).unwrap();
    let out = dir.join("out");
    let o = Command::new(bin())
        .args(["scenario", "run", short.to_str().unwrap(), "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let lab: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("lab.json")).unwrap()).unwrap();
    let server_addr = lab["links"][0]["b"]["addr"].as_str().unwrap().to_string();
    assert!(server_addr.starts_with("198.18."), "{server_addr}");
    for (cell, transport) in [
        ("mpi", "mpi"),
        ("tcp-blocking", "tcp"),
        ("tcp-busy-poll", "tcp"),
    ] {
        let v = load(&out.join(format!("signature-{cell}.json")), &o);
        assert_eq!(v["status"], "complete", "{cell}");
        assert_eq!(v["spec"]["transport"], transport, "{cell}");
        let points = v["points"].as_array().unwrap();
        let sizes: Vec<u64> = points.iter().map(|p| p["size"].as_u64().unwrap()).collect();
        assert_eq!(sizes, [1, 65536, 4194304], "{cell}");
        for p in points {
            assert_eq!(
                p["client"]["bytes_sent"], p["server"]["bytes_received"],
                "{cell}"
            );
        }
        if cell == "mpi" {
            // Rank 1 served in the server's namespace, at its address on the link.
            let peer = v["peer"].as_str().unwrap();
            assert!(peer.contains(&format!("{server_addr}:")), "{peer}");
            for side in ["client", "server"] {
                let notes = v["granted"][side]["notes"].to_string();
                assert!(notes.contains("pml=ob1 btl=tcp,self"), "{side}: {notes}");
            }
            // What MPI carried arrived by IP in rank 1's namespace: its IP counters over
            // the 64 KiB point hold at least the payload rank 1 received.
            let p = &points[1];
            let received = p["server"]["bytes_received"].as_u64().unwrap();
            let ip_in = p["server"]["kernel"]["IpExt.InOctets"].as_u64().unwrap();
            assert!(
                received > 1_000_000 && ip_in >= received,
                "rank 1 received {received} B, its namespace's IP {ip_in} B"
            );
        }
        if cell == "tcp-busy-poll" {
            for side in ["client", "server"] {
                assert_eq!(v["granted"][side]["busy_poll"], 50, "{side}");
            }
        }
    }
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    assert_eq!(
        index["runs"][0]["target"],
        format!("mpi rank 1 at {server_addr}")
    );
    assert_eq!(index["verdicts"].as_array().unwrap().len(), 7);
}
