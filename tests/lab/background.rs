//! Issue 11 item 4 in namespaces (seed 002): a background stream across a shaped link raises
//! the round trip of a pingpong in the same band well above its idle value, a pingpong in a
//! higher band (its own htb class, served first) beats it under the same load, and the
//! background's figures are in the results and agree with the kernel's class counter.
//! Needs root: ignored without it, run by ./run-tests as root.

use crate::common::*;
use netsweep_lab::{ClassStats, Lab, Topology};
use netsweep_testkit::lab::{lab_test, run_id};
use serde_json::Value;
use std::path::Path;

const BANDS: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
rate = "50mbit"
[[links.classes]]
priority = 1
rate = "20mbit"
prio = 0
"#;

/// Runs a 1000-byte pingpong at `priority` from the client, with `extra` flags; its results.
/// Three trials of 300 ms: behind a full queue a round trip takes ~40 ms, and trials sized for
/// a short budget held one round trip each on a busy machine (a p50 of two samples, 79 µs:
/// taken before the stream filled the queue).
fn pingpong(lab: &Lab, target: &str, out: &Path, priority: &str, extra: &[&str]) -> Value {
    let o = lab
        .command(
            "client",
            &[
                bin(),
                "run",
                target,
                "--no-save",
                "-q",
                "-o",
                out.to_str().unwrap(),
                "-p",
                "pingpong",
                "--sizes",
                "1000",
                "--priority",
                priority,
                "--trial-time",
                "300ms",
                "--min-trials",
                "3",
                "--max-trials",
                "3",
                "--max-point-time",
                "3s",
            ],
        )
        .unwrap()
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

/// The p50 round trip, from at least 15 of them.
fn rtt_p50(v: &Value) -> f64 {
    let rtt = &v["points"][0]["latency"]["rtt_ns"];
    assert!(
        rtt["count"].as_u64().unwrap() >= 15,
        "too few round trips: {rtt}"
    );
    rtt["p50"].as_f64().unwrap()
}

fn class_bytes(stats: &[ClassStats], id: &str) -> u64 {
    stats
        .iter()
        .find(|c| c.classid == id)
        .map_or(0, |c| c.bytes)
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn background_load_raises_its_bands_rtt_and_a_higher_band_beats_it() {
    let _l = lab_test("background_load_raises_its_bands_rtt");
    let lab = Lab::up(&Topology::parse(BANDS).unwrap(), &run_id("bgload")).unwrap();
    let addr = lab.address_for("client", "server").unwrap();
    let target = format!("{addr}:7311");
    let dir = scratch("bgload");
    let mut server = serve_in(&lab, "server", "0.0.0.0", 7311);
    let link = lab.layout().links[0].name.clone();
    let load = ["--background", "stream,size=64k,priority=0"];

    // The same band (priority 0: the default class 1:2), idle and then under the stream.
    let idle = pingpong(&lab, &target, &dir.join("idle.json"), "0", &[]);
    let before = lab.class_stats(&link, "client").unwrap();
    let low = pingpong(&lab, &target, &dir.join("low.json"), "0", &load);
    let after = lab.class_stats(&link, "client").unwrap();
    // Band 1 (class 1:10, htb prio 0) under the same load.
    let high = pingpong(&lab, &target, &dir.join("high.json"), "1", &load);
    let _ = (server.kill(), server.wait());
    lab.down().unwrap();

    let (idle_us, low_us, high_us) = (
        rtt_p50(&idle) / 1e3,
        rtt_p50(&low) / 1e3,
        rtt_p50(&high) / 1e3,
    );
    eprintln!("rtt p50: idle {idle_us:.0} µs, band 0 loaded {low_us:.0} µs, band 1 loaded {high_us:.0} µs");
    // Measured here: ~170 µs idle, ~40 ms behind the stream, ~420 µs in band 1.
    assert!(
        low_us >= 2.0 * idle_us,
        "the stream should queue ahead of its band's round trips: idle {idle_us:.0} µs, \
         loaded {low_us:.0} µs"
    );
    assert!(
        low_us >= 3.0 * high_us,
        "band 1 should beat band 0 under the same load: band 0 {low_us:.0} µs, band 1 \
         {high_us:.0} µs"
    );
    assert!(idle["points"][0]["background"].is_null());
    for v in [&low, &high] {
        let p = &v["points"][0];
        let bg = &p["background"][0];
        assert_eq!(bg["flow"], "stream,size=64k,priority=0");
        assert_eq!(bg["trials"], p["trials"], "{bg}");
        let got = bg["bytes_received"].as_u64().unwrap();
        assert!(got > 0 && bg["bytes_sent"].as_u64() == Some(got), "{bg}");
        // Not faster than the 50 Mbit/s link: htb charges a GSO super-packet's headers once
        // and its 1 ms burst may add ~1% over a trial, hence 5% of slack. (Rated over the
        // sender's time instead of the receiver's span it read 2x the link.)
        let mbps = bg["receiver_mbps"].as_f64().unwrap();
        assert!(mbps > 0.0 && mbps <= 52.5, "{bg}");
    }
    // The stream went through the default class: its counter grew by at least the bytes the
    // flow moved in the timed trials (warm-ups and headers only add to it).
    let grew = class_bytes(&after, "1:2") - class_bytes(&before, "1:2");
    let moved = low["points"][0]["background"][0]["bytes_received"]
        .as_u64()
        .unwrap();
    assert!(
        grew >= moved,
        "class 1:2 carried {grew} bytes, the flow {moved}"
    );
}

/// Strict priority by DSCP class at 100 Mbit/s, as seed 002's `prio` link.
const PRIO: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
rate = "100mbit"
[links.emulate]
qdisc = "prio"
bands = 8
cpu = 1
"#;

/// A run's control connection travels in the run's class. A pingpong in DSCP class 2 beside
/// its own class-1 background stream, through strict priority, exchanges its control
/// messages around forty short trials, each within a second, without waiting behind the
/// stream: in the default class (0) they waited for as long as the stream kept class 1 busy
/// (a seed-002 run timed out so, waiting for the server to arm a trial), and this test failed
/// 3 of 3 times.
#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn the_control_connection_is_not_starved_behind_a_higher_class() {
    let _l = lab_test("the_control_connection_is_not_starved");
    // The link's emulator is `netsweep lab emulate`, not this test binary.
    netsweep_lab::emulation::set_emulator_exe(bin());
    let lab = Lab::up(&Topology::parse(PRIO).unwrap(), &run_id("ctlclass")).unwrap();
    let addr = lab.address_for("client", "server").unwrap().to_string();
    let mut server = serve_in(&lab, "server", &addr, 7200);
    let out = scratch("ctlclass").join("pingpong.json");
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
                "-p",
                "pingpong",
                "--sizes",
                "1000",
                "--tos",
                "0x40",
                "--background",
                "stream,size=64k,tos=0x20",
                "--trial-time",
                "10ms",
                "--min-trials",
                "40",
                "--max-trials",
                "40",
                "--max-point-time",
                "20s",
                "--timeout",
                "1s",
            ],
        )
        .unwrap()
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let p = &v["points"][0];
    assert_eq!(p["trials"], 40, "{p}");
    // The premise: the stream kept class 1 busy, so class 0 would have waited.
    let bg = p["background"][0]["receiver_mbps"].as_f64().unwrap();
    assert!(bg > 50.0, "the class-1 stream ran at only {bg} Mbit/s");
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn the_seed_002_scenario_measures_every_band_precedence_and_eight_clients_at_once() {
    let _l = lab_test("the_seed_002_scenario");
    let out = scratch("seed002");
    // One repetition of each cell, shorter points: the design, not the statistics, is under
    // test here (the committed page is the statistics).
    let mut text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/seeds/002-priority-bands.toml"
    ))
    .unwrap()
    .replace("repeat = 5", "repeat = 1");
    for (from, to) in [
        (
            r#""--trial-time", "100ms", "--max-point-time", "1s""#,
            r#""--trial-time", "20ms", "--max-point-time", "100ms""#,
        ),
        // Three of the fourteen bands (the claims read 1 and 255), 1 and 8 clients.
        (
            "levels = [1, 2, 20, 40, 50, 60, 80, 100, 120, 140, 160, 180, 200, 255]",
            "levels = [1, 20, 255]",
        ),
        ("levels = [1, 2, 4, 8]", "levels = [1, 8]"),
        (
            r#""--trial-time", "200ms", "--max-point-time", "2s""#,
            r#""--trial-time", "50ms", "--max-point-time", "500ms""#,
        ),
        (
            r#""--trial-time", "100ms", "--min-trials", "10", "--max-point-time", "2s""#,
            r#""--trial-time", "20ms", "--min-trials", "3", "--max-point-time", "300ms""#,
        ),
    ] {
        assert!(text.contains(from), "{from} no longer in the scenario");
        text = text.replace(from, to);
    }
    let file = out.join("scenario.toml");
    std::fs::write(&file, text).unwrap();
    let o = run(&[
        "scenario",
        "run",
        file.to_str().unwrap(),
        "-o",
        out.join("out").to_str().unwrap(),
    ]);
    let out = out.join("out");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let load = |n: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(out.join(format!("{n}.json"))).unwrap())
            .unwrap()
    };
    let index = load("index");
    let runs = index["runs"].as_array().unwrap();
    // 3 bands idle, the classless link, 2 queues × 3 loads, then 1 + 8 clients.
    assert_eq!(runs.len(), 3 + 1 + 6 + 9, "{runs:?}");
    assert!(runs.iter().all(|r| r["status"] == "ok"), "{runs:?}");
    // Each band is its own SO_PRIORITY, as both ends set it.
    for band in [1, 20, 255] {
        let v = load(&format!("idle-band{band}"));
        for side in ["client", "server"] {
            assert_eq!(v["granted"][side]["priority"], band, "band {band}");
        }
    }
    // Strict priority at the 100 Mbit/s bottleneck: the class behind the other class's
    // stream waits for it; the class ahead of it does not. A FIFO makes both wait.
    // (A round trip behind the stream takes a good part of a short trial: a few suffice.)
    let p50 = |n: &str| {
        let v = load(n);
        let rtt = &v["points"][0]["latency"]["rtt_ns"];
        assert!(rtt["count"].as_u64().unwrap() >= 1, "{n}: {rtt}");
        rtt["p50"].as_f64().unwrap()
    };
    let (high, low, fifo) = (
        p50("compete-prio-high"),
        p50("compete-prio-low"),
        p50("compete-fifo-high"),
    );
    assert!(
        low >= 3.0 * high && fifo >= 3.0 * high,
        "prio: high {high} low {low}; fifo high {fifo}"
    );
    // One repetition decides no claim; the page says so.
    assert!(stdout.contains("too few for a spread"), "{stdout}");
    assert!(out.join("figures/table-5-3.svg").exists());
    // Eight clients, one server: eight sessions, all admitted before any ended, each client
    // with its own complete results.
    let log = std::fs::read_to_string(out.join("many-clients8.server.log")).unwrap();
    let events: Vec<&str> = log.lines().filter(|l| l.contains(" session ")).collect();
    assert_eq!(events.len(), 16, "{log}");
    assert!(events[..8].iter().all(|l| !l.ends_with("ended")), "{log}");
    // They began their timed trials at one `--start-at` and ran them over one window
    // (issue 39 item 8): their sum is one window's, which the page checks.
    let mut windows = Vec::new();
    let mut starts = Vec::new();
    for i in 1..=8 {
        let v = load(&format!("many-clients8-{i}"));
        assert_eq!(v["status"], "complete");
        starts.push(
            v["spec"]["start_at_unix_ns"]
                .as_u64()
                .expect("a --start-at"),
        );
        let w: netsweep_model::window::MeasuredWindow =
            serde_json::from_value(v["points"][0]["window"].clone()).unwrap();
        windows.push(w);
    }
    assert!(starts.iter().all(|s| *s == starts[0]), "{starts:?}");
    // The barrier lines up the starts (4 ms apart here). These 300 ms points end up to a
    // trial apart (a measured 75% overlap in a debug build: 8 clients' control exchanges
    // on 2 CPUs), the seed's 2 s points within a few percent; the page calls a sum over
    // them an error exactly when the overlap is short of SIMULTANEOUS.
    let first = windows.iter().map(|w| w.from_unix_ns).min().unwrap();
    let last = windows.iter().map(|w| w.from_unix_ns).max().unwrap();
    assert!(last - first < 100_000_000, "{windows:?}");
    let together = netsweep_model::window::simultaneity(&windows).unwrap();
    assert!(together > 0.5, "{:.0}%: {windows:?}", together * 100.0);
    let page = std::fs::read_to_string(out.join("page.md")).unwrap();
    // The invalid verdict's own words (every page's claims section explains INVALID as "a
    // sum over clients that did not measure at once": a needle that matched that passed
    // whenever the overlap was short and failed when it was not).
    assert_eq!(
        page.contains("the clients did not measure at once"),
        together < netsweep_model::window::SIMULTANEOUS,
        "{:.0}%: {page}",
        together * 100.0
    );
}
