//! Issue 3: scenarios and labs carry real netsweep runs, and what netsweep reports agrees
//! with the testbed's ground truth: goodput against the link's interface counters (and the
//! configured rate's arithmetic on an idle machine), loss against the nft drop counter. Needs root: ignored without it, run by
//! ./run-tests as root.

use crate::common::*;
use netsweep_lab::{Lab, Topology};
use netsweep_testkit::lab::{lab_test, run_id};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(p)
        .to_string_lossy()
        .into_owned()
}

fn load(p: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

/// What `netsweep scenario run` printed on stderr, each line with when it arrived, and
/// the link counters of its server host sampled from the moment its lab was up.
struct WatchedScenario {
    output: std::process::Output,
    lines: Vec<(Instant, String)>,
    series: netsweep_testkit::lab::link::Series,
}

/// Runs `netsweep scenario run FILE -o OUT`, sampling the server host's one link's counters
/// (the namespace `nsw-<run id>-server` of the lab it prints) while it runs.
fn watch_scenario(file: &str, out: &Path) -> WatchedScenario {
    use netsweep_testkit::lab::link::LinkSampler;
    use std::io::{BufRead, BufReader, Read};
    let mut child = Command::new(bin())
        .args(["scenario", "run", file, "-o", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        stdout.read_to_end(&mut v).unwrap();
        v
    });
    let mut lines = Vec::new();
    let mut sampler = None;
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        let at = Instant::now();
        // "lab RUN_ID (2 hosts, 1 links, 0 tunnels)" once the lab is up.
        let lab_up = line.strip_prefix("lab ").filter(|r| r.contains(" hosts, "));
        if let Some(run_id) = lab_up.and_then(|r| r.split(' ').next()) {
            let ns = netsweep_lab::names::netns(run_id, "server");
            sampler = Some(LinkSampler::start(&ns, None).expect("sampling the server's link"));
        }
        lines.push((at, line));
    }
    let status = child.wait().unwrap();
    let stdout = out_reader.join().unwrap();
    let stderr = lines
        .iter()
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let series = sampler
        .unwrap_or_else(|| panic!("the scenario printed no lab: {stderr}"))
        .stop()
        .unwrap();
    WatchedScenario {
        output: std::process::Output {
            status,
            stdout,
            stderr: stderr.into_bytes(),
        },
        lines,
        series,
    }
}

impl WatchedScenario {
    /// When run `name` started (its `[i/n] name:` line) and ended (the next line after it
    /// that gives its status).
    fn window(&self, name: &str) -> (Instant, Instant) {
        let start = self
            .lines
            .iter()
            .position(|(_, l)| l.starts_with('[') && l.contains(&format!("] {name}: ")))
            .unwrap_or_else(|| panic!("no start line for run {name}"));
        let end = self.lines[start..]
            .iter()
            .find(|(_, l)| l.trim_start().starts_with("Ok in "))
            .unwrap_or_else(|| panic!("run {name} did not complete"));
        (self.lines[start].0, end.0)
    }
}

/// The scenario's goodput (docs/lab.md: rate × payload / (payload + headers + 14)) against two
/// references: the server's interface counters over the run's stretches of traffic —
/// always — and the shaper's arithmetic, only when the machine was idle enough (a
/// busy machine delays the shaper and the path delivers less: the counters see it too).
#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn shaped_scenario_goodput_is_within_3_percent_of_the_rate_after_headers() {
    use netsweep_testkit::lab::idle::CpuWindow;
    let _l = lab_test("shaped_scenario_goodput");
    let out = scratch("shaped");
    let cpu = CpuWindow::start();
    let w = watch_scenario(&repo("scenarios/shaped.toml"), &out);
    let busy = cpu.finish();
    let o = &w.output;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let index = load(&out.join("index.json"));
    assert_eq!(index["runs"].as_array().unwrap().len(), 6);
    // The claims (goodput within 3% of netsweep's own arithmetic) hold on the repetitions —
    // held to them only on an idle machine, as the arithmetic below.
    for v in index["verdicts"].as_array().unwrap() {
        if busy.idle_enough() {
            assert_ne!(v["outcome"], "fails", "{v} ({busy})");
        } else if v["outcome"] == "fails" {
            eprintln!("SKIPPED the claim's verdict, the machine was not idle ({busy}): {v}");
        }
    }
    // Frame headers below the payload: Ethernet 14 + IPv4 20 + TCP 32 (with timestamps) or
    // UDP 8; TCP's MSS is 1448 and the UDP run's datagrams 1472 bytes.
    for (name, payload, header) in [("stream-tcp-r1", 1448.0, 66), ("stream-udp-r1", 1472.0, 42)] {
        let expected = 100.0 * payload / (payload + header as f64);
        let v = load(&out.join(format!("{name}.json")));
        assert_eq!(v["status"], "complete");
        assert!(
            v["lab"].is_object(),
            "{name}: the topology is recorded in the results"
        );
        let got = v["points"][0]["receiver_mbps"]["mean"].as_f64().unwrap();
        // The link's payload rate over every half second of the run (its trials are 1 s).
        let window = w.window(name);
        let what = format!("{name}: receiver goodput");
        // Datagrams the server's socket dropped (a busy machine) reached the host but not
        // netsweep: the kernel counts them.
        let t = &v["datagram_totals"];
        let drops = t["to_server_socket_drops"].as_f64().unwrap_or(0.0);
        let dropped = drops / t["to_server_sent"].as_f64().unwrap_or(0.0).max(1.0);
        assert_link_delivered(&what, got, &w.series, window, header, dropped);
        check_arithmetic_when_idle(&what, got, expected, 0.03, &busy);
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("stream-tcp-r1") && stdout.contains("stream-udp-r1"),
        "{stdout}"
    );
    // The scenario writes its HTML report and plots beside the results, every run in them.
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html written");
    assert!(stdout.contains(&format!("report: {}", out.join("report.html").display())));
    for name in ["stream-tcp-r1", "stream-udp-r3"] {
        assert!(html.contains(name), "{name} missing from report.html");
    }
    let mut plots: Vec<String> = std::fs::read_dir(out.join("plots"))
        .expect("plots/ written")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    plots.sort();
    for p in ["signature.svg", "throughput.svg", "loss.svg", "cpu.svg"] {
        assert!(plots.contains(&p.to_string()), "{p} not in {plots:?}");
    }
    // Both runs overlaid where both have figures (loss is udp's alone); legends name what
    // differs (the transport), each repetition by its run's name.
    for (p, runs) in [
        (
            "signature.svg",
            &[
                "data-label=\"tcp (stream-tcp-r1)\"",
                "data-label=\"udp (stream-udp-r3)\"",
            ][..],
        ),
        (
            "throughput.svg",
            &[
                "data-label=\"tcp (stream-tcp-r2)\"",
                "data-label=\"udp (stream-udp-r1)\"",
            ][..],
        ),
        ("loss.svg", &["data-label=\"udp (stream-udp-r2)\""][..]),
    ] {
        let svg = std::fs::read_to_string(out.join("plots").join(p)).unwrap();
        assert!(svg.contains("<svg"), "{p}");
        for r in runs {
            assert!(svg.contains(r), "{p} lacks the {r} run");
        }
    }
}

const LOSSY: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
rate = "100mbit"
loss = { probability = 0.02, protocol = "udp", direction = "a-to-b" }
"#;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn udp_loss_equals_the_nft_drop_counter_exactly() {
    let _l = lab_test("udp_loss_equals_the_nft_drop_counter_exactly");
    let topo = Topology::parse(LOSSY).unwrap();
    let lab = Lab::up(&topo, &run_id("loss")).unwrap();
    let server_addr = lab.address_for("client", "server").unwrap().to_string();
    let mut server = serve_in(&lab, "server", &server_addr, 7200);
    let out = scratch("lossy").join("udp.json");
    let o = lab
        .command(
            "client",
            &[
                bin(),
                "run",
                &format!("{server_addr}:7200"),
                "--no-save",
                "-q",
                "-o",
                out.to_str().unwrap(),
            ],
        )
        .unwrap()
        .args([
            "-t",
            "udp",
            "-p",
            "stream",
            "--sizes",
            "1472,1000",
            "--trial-time",
            "100ms",
            "--max-point-time",
            "400ms",
        ])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = load(&out);
    let link = &lab.layout().links[0].name;
    let (dropped, _) = lab.loss_dropped(link, "client").unwrap();
    let totals = &v["datagram_totals"];
    let lost =
        totals["to_server_sent"].as_u64().unwrap() - totals["to_server_received"].as_u64().unwrap();
    let handshake = v["granted"]["client"]["handshake_datagrams"]
        .as_u64()
        .unwrap_or(1);
    // Every drop nft counted is a datagram netsweep reports lost, or a resent handshake cookie;
    // the rest of the losses are the server socket's, which the kernel counts (19 of 123 on a
    // machine busy with other builds).
    let socket_drops = totals["to_server_socket_drops"].as_u64().unwrap_or(0);
    assert_eq!(
        dropped + socket_drops,
        lost + handshake.saturating_sub(1),
        "nft dropped {dropped}, the server's socket {socket_drops}, netsweep lost {lost}, \
         handshake {handshake}"
    );
    assert!(lost > 0, "2% loss over thousands of datagrams loses some");
    // The per-point figures are the timed trials' share of the same accounting.
    let point_lost: u64 = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["loss"]["lost"].as_u64().unwrap())
        .sum();
    assert!(point_lost <= lost);
    for p in v["points"].as_array().unwrap() {
        // Hundreds of datagrams per timed trial at 2%: every point saw some of the drops.
        assert!(p["loss"]["lost"].as_u64().unwrap() > 0, "{}", p["loss"]);
    }
    lab.down().unwrap();
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn routed_and_vxlan_paths_carry_runs() {
    let _l = lab_test("routed_and_vxlan_paths_carry_runs");
    let mut results = Vec::new();
    for (file, via) in [
        ("scenarios/routed.toml", None),
        ("scenarios/vxlan.toml", Some("direct")),
        ("scenarios/vxlan.toml", Some("vx")),
    ] {
        let text = std::fs::read_to_string(repo(file)).unwrap();
        let topo = netsweep_lab::Scenario::parse(&text).unwrap().topology;
        let lab = Lab::up(&topo, &run_id("paths")).unwrap();
        let addr = match via {
            Some(v) => lab.address("server", v).unwrap().to_string(),
            None => lab.address_for("client", "server").unwrap().to_string(),
        };
        let mut server = serve_in(&lab, "server", "0.0.0.0", 7200);
        let out = scratch("paths").join(format!("{}.json", results.len()));
        let o = lab
            .command(
                "client",
                &[
                    bin(),
                    "run",
                    &format!("{addr}:7200"),
                    "--no-save",
                    "-q",
                    "-o",
                    out.to_str().unwrap(),
                ],
            )
            .unwrap()
            .args(["-t", "tcp", "-p", "stream", "--sizes", "64k"])
            .args(QUICK)
            .output()
            .unwrap();
        let _ = server.kill();
        let _ = server.wait();
        assert!(
            o.status.success(),
            "{file} {via:?} {addr}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v = load(&out);
        assert_eq!(v["status"], "complete");
        assert_eq!(v["peer"], format!("{addr}:7200"));
        if via == Some("vx") {
            // The client recorded its tunnel interface with the encapsulation's smaller MTU.
            let ifs = v["client"]["interfaces"].as_array().unwrap();
            assert!(
                ifs.iter().any(|i| i["mtu"].as_u64().unwrap() == 1450),
                "{ifs:?}"
            );
        }
        results.push(v["points"][0]["receiver_mbps"]["mean"].as_f64().unwrap());
        lab.down().unwrap();
    }
    assert!(results.iter().all(|&r| r > 0.0), "{results:?}");
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn killed_scenario_then_lab_clean_leaves_nothing() {
    let _l = lab_test("killed_scenario_then_lab_clean_leaves_nothing");
    let out = scratch("killed-scn");
    let mut child = Command::new(bin())
        .args([
            "scenario",
            "run",
            &repo("scenarios/two-hosts.toml"),
            "-o",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let nsw = || {
        let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("nsw-"))
            .count()
    };
    // Wait until the lab is fully built (lab.json is written once it is up).
    while nsw() == 0 || !out.join("lab.json").exists() {
        assert!(
            Instant::now() < deadline,
            "the scenario's lab never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL: no cleanup runs
    let _ = child.wait();
    assert!(nsw() > 0, "kill -9 left the lab behind (as it must)");
    let o = run(&["lab", "clean"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(nsw(), 0, "lab clean removed every nsw- namespace");
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&links.stdout).contains("nsw"),
        "no nsw link left in the root namespace"
    );
    let tables = Command::new("nft")
        .args(["list", "tables"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&tables.stdout).contains("nsw"),
        "no nsw nft table left"
    );
}

const ONE_WAY: &str = r#"
name = "one-way"
description = "a link shaped in one direction only"
[topology]
[[topology.hosts]]
name = "client"
[[topology.hosts]]
name = "server"
[[topology.links]]
a = "client"
b = "server"
rate = "20mbit"
direction = "a-to-b"
[[run]]
name = "pingpong"
client = "client"
server = "server"
args = ["--sizes", "1k,8k", "--trial-time", "20ms", "--max-point-time", "300ms"]
[[run]]
name = "stream"
client = "client"
server = "server"
args = ["-p", "stream", "--sizes", "8k", "--trial-time", "50ms", "--max-point-time", "300ms"]
"#;

/// Issue 11 item 3 (DESIGN's symmetry rule): a pingpong across a link shaped one way says
/// RTT/2 is not a one-way time there — in its results and its table — and a stream does not.
#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn a_one_way_shaped_link_makes_pingpong_warn_about_rtt_halves() {
    let _l = lab_test("one_way_shaped_link_warning");
    let dir = scratch("one-way");
    let file = dir.join("one-way.toml");
    std::fs::write(&file, ONE_WAY).unwrap();
    let out = dir.join("out");
    let o = run(&[
        "scenario",
        "run",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pp = load(&out.join("pingpong.json"));
    let warnings = pp["warnings"].as_array().expect("warnings recorded");
    // The lab's description says so; the receivers' own timing (issue 39 item 5) may say so
    // too, from what they measured.
    let lab_said = warnings.iter().filter_map(Value::as_str).any(|w| {
        w.contains("client→server 20 Mbit/s, server→client unshaped")
            && w.contains("RTT/2 is not a one-way time")
    });
    assert!(lab_said, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .filter_map(Value::as_str)
            .all(|w| w.contains("directions")),
        "{warnings:?}"
    );
    let table = std::fs::read_to_string(out.join("pingpong.log")).unwrap();
    assert!(
        table.contains("warning: the lab shapes the two directions differently"),
        "{table}"
    );
    let st = load(&out.join("stream.json"));
    assert!(
        st.get("warnings").is_none(),
        "a stream measures one direction: {st}"
    );
}
