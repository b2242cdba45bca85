//! `netsweep run iperf3://HOST[:PORT]` (issue 15 item 1): a sweep of stream points against
//! Debian's unmodified `iperf3 -s`. On loopback every byte netsweep sent is the byte count the
//! iperf3 server reports (forward) and netsweep received what the server says it sent less what
//! was in flight (reverse); across a lab link shaped to 100 Mbit/s the receiver rate agrees
//! with the link's interface counters (and with the shaper's arithmetic on an idle machine).
//! What iperf3 cannot do is a usage error, before any connection. The other tests here hold the
//! lab test lock shared: none runs beside the lab test.

use crate::common::iperf3::{free_port, wait_listening, Killed};
use crate::common::*;
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// `iperf3 -s` on a free loopback port (or inside a lab host, through `cmd`), once it listens.
fn iperf3_server(mut cmd: Command, port: u16) -> Child {
    let child = cmd
        .args(["-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 starts");
    wait_listening(child.id(), port);
    child
}

fn sweep(url: &str, out: &std::path::Path, extra: &[&str]) -> Value {
    let o = Command::new(bin())
        .args(["run", url, "-p", "stream", "--no-save", "-q", "-o"])
        .arg(out)
        .args(["--trial-time", "1s", "--max-point-time", "2s"])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

#[test]
fn what_iperf3_cannot_do_is_a_usage_error() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    for (args, needle) in [
        (&["run", "iperf3://127.0.0.1:9"][..], "add -p stream"),
        (
            &["run", "iperf3://127.0.0.1:9", "-p", "crr"][..],
            "streams only",
        ),
        (
            &["run", "iperf3://127.0.0.1:9", "-p", "stream", "-t", "unix"][..],
            "tcp and udp",
        ),
        (
            &[
                "run",
                "iperf3://127.0.0.1:9",
                "-p",
                "stream",
                "--api",
                "zerocopy",
            ][..],
            "--api basic",
        ),
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Every option an iperf3 server cannot honour is refused by name before anything is
/// measured — never accepted and recorded in the results' spec as if it had applied.
#[test]
fn every_option_an_iperf3_peer_cannot_honour_is_refused_by_name() {
    let cases: &[(&[&str], &str)] = &[
        (&["--flows", "2"], "--flows"),
        (&["--threads", "2"], "--threads"),
        (&["--background", "stream"], "--background"),
        (&["--sndbuf", "64k"], "--sndbuf"),
        (&["--rcvbuf", "64k"], "--rcvbuf"),
        (&["--offset", "1"], "--offset"),
        (&["--batch", "4"], "--batch"),
        (&["--cc", "cubic"], "--cc"),
        (&["--notsent-lowat", "16k"], "--notsent-lowat"),
        (&["--pacing-rate", "100mbit"], "--pacing-rate"),
        (&["--tos", "0x10"], "--tos"),
        (&["--dscp", "10"], "--tos/--dscp"),
        (&["--priority", "1"], "--priority"),
        (&["-t", "udp", "--no-check"], "--no-check"),
        (&["--busy-poll", "50"], "--busy-poll"),
        (&["--pmtu", "do"], "--pmtu"),
        (&["--cpu", "0"], "--cpu"),
        (&["--invalidate-cache"], "--invalidate-cache"),
        (&["--interface", "lo"], "--interface"),
    ];
    for (extra, flag) in cases {
        let mut args = vec!["run", "iperf3://127.0.0.1:9", "-p", "stream", "--no-save"];
        args.extend_from_slice(extra);
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains("cannot apply") && err.contains(flag),
            "{extra:?} is refused naming {flag}: {err}"
        );
    }
}

#[test]
#[ignore = "needs iperf3 (Debian package iperf3): ./run-tests installs it and runs this"]
fn a_sweep_against_iperf3_counts_what_the_iperf3_server_counts() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    require_tool("a_sweep_against_iperf3", "iperf3", "iperf3");
    let port = free_port();
    let mut cmd = Command::new("iperf3");
    cmd.args(["-s", "-B", "127.0.0.1"]);
    let _srv = Killed(iperf3_server(cmd, port));
    let url = format!("iperf3://127.0.0.1:{port}");
    let dir = scratch("iperf3-run");

    let v = sweep(&url, &dir.join("tcp.json"), &["--sizes", "16k,128k"]);
    assert_eq!(v["status"], "complete");
    // Only what applied is recorded: no socket option was set on either side, and the
    // warm-up test that --warmup (the default) asked for ran.
    for side in ["client_knobs", "server_knobs"] {
        assert!(v["spec"][side]["nodelay"].is_null(), "{}", v["spec"][side]);
        assert!(
            v["spec"][side]["buffer_offset"].is_null(),
            "{}",
            v["spec"][side]
        );
    }
    assert!(
        v["points"][0]["notes"]
            .to_string()
            .contains("after a warm-up test"),
        "{}",
        v["points"][0]["notes"]
    );
    assert_eq!(v["server"]["tool"], "iperf3");
    assert_eq!(v["peer"], url);
    let pts = v["points"].as_array().unwrap();
    assert_eq!(pts.len(), 2);
    for p in pts {
        let sent = p["client"]["bytes_sent"].as_u64().unwrap();
        assert!(p["trials"].as_u64().unwrap() >= 2);
        assert!(sent > 0);
        // The server's own count, from its results JSON: every byte arrived.
        assert_eq!(p["server"]["bytes_received"].as_u64(), Some(sent), "{p}");
        let (tx, rx) = (
            p["sender_mbps"]["mean"].as_f64().unwrap(),
            p["receiver_mbps"]["mean"].as_f64().unwrap(),
        );
        assert!(rx > 0.0 && rx <= tx * 1.1, "sender {tx}, receiver {rx}");
        assert!(p["server"]["cpu_utilisation"].as_f64().unwrap() > 0.0);
    }

    let v = sweep(&url, &dir.join("tcp-r.json"), &["--sizes", "64k", "-R"]);
    let p = &v["points"][0];
    let got = p["client"]["bytes_received"].as_u64().unwrap();
    let sent = p["server"]["bytes_sent"].as_u64().unwrap();
    assert!(got > 0 && got <= sent, "received {got}, server sent {sent}");

    // The engine's point loop runs an iperf3 peer too: --refine applies (one size, nothing
    // to refine around), and the spec records the trial time that applied (a whole test, at
    // least 1 s), not the 0.1 s default asked for.
    let v = sweep(
        &url,
        &dir.join("udp.json"),
        &["-t", "udp", "--sizes", "1400", "--refine"],
    );
    assert_eq!(v["status"], "complete");
    assert_eq!(v["spec"]["refine"], true);
    assert!(v["spec"]["trial_time_ns"].as_u64().unwrap() >= 1_000_000_000);
    let p = &v["points"][0];
    let loss = &p["loss"];
    let sent = loss["sent"].as_u64().unwrap();
    assert_eq!(sent, p["client"]["messages_sent"].as_u64().unwrap());
    assert!(loss["received"].as_u64().unwrap() + loss["lost"].as_u64().unwrap() <= sent);
    assert!(loss["received"].as_u64().unwrap() > 0);
}

#[test]
#[ignore = "needs root (lab namespaces) and iperf3: ./run-tests runs it as root"]
fn across_a_shaped_link_the_receiver_rate_is_the_shapers_arithmetic() {
    use netsweep_lab::{Lab, Topology};
    use netsweep_testkit::lab::idle::CpuWindow;
    use netsweep_testkit::lab::link::LinkSampler;
    use netsweep_testkit::lab::{lab_test, run_id};
    require_tool("across_a_shaped_link", "iperf3", "iperf3");
    let _l = lab_test("iperf3_run_across_a_shaped_link");
    let topo = "[[hosts]]\nname = \"client\"\n[[hosts]]\nname = \"server\"\n[[links]]\n\
                a = \"client\"\nb = \"server\"\nmtu = 1500\nrate = \"100mbit\"\n";
    let lab = Lab::up(&Topology::parse(topo).unwrap(), &run_id("ip3run")).unwrap();
    let ip = lab.layout().links[0].b.addr.to_string();
    let cmd = lab.command("server", &["iperf3", "-s", "-B", &ip]).unwrap();
    let srv = iperf3_server(cmd, 5201);
    let _srv = Killed(srv);
    let dir = scratch("iperf3-lab");
    let out = dir.join("shaped.json");
    let mut cmd = lab
        .command(
            "client",
            &[
                bin(),
                "run",
                &format!("iperf3://{ip}"),
                "-p",
                "stream",
                "--sizes",
                "128k",
                "--trial-time",
                "2s",
                "--max-point-time",
                "5s",
                "--no-save",
                "-q",
                "-o",
                out.to_str().unwrap(),
            ],
        )
        .unwrap();
    // The server's interface counts what the path delivered while the run went on.
    let sampler = LinkSampler::start(lab.netns("server").unwrap(), None).unwrap();
    let cpu = CpuWindow::start();
    let t0 = Instant::now();
    let o = cmd.output().unwrap();
    let t1 = Instant::now();
    let busy = cpu.finish();
    let series = sampler.stop().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let p = &v["points"][0];
    assert_eq!(p["server"]["bytes_received"], p["client"]["bytes_sent"]);
    // TCP/IPv4 at MTU 1500 carries 1448 payload bytes per 1514-byte frame (docs/lab.md).
    let expected = 100.0 * 1448.0 / 1514.0;
    let rx = p["receiver_mbps"]["mean"].as_f64().unwrap();
    // The link's payload rate (frames less Ethernet 14 + IPv4 20 + TCP 32 bytes each) over
    // every half second of the run.
    assert_link_delivered("receiver", rx, &series, (t0, t1), 66, 0.0);
    check_arithmetic_when_idle("receiver", rx, expected, 0.03, &busy);
    drop(lab);
}

/// The iperf3 path keeps results as a netsweep run does (issue 26 item 5): a saved results
/// file that cannot be written fails the run at once — before any connection — with the
/// path and the fix, and no "results saved" line.
#[test]
fn an_unwritable_save_dir_fails_an_iperf3_run_before_it_connects() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    let port = free_port();
    let url = format!("iperf3://127.0.0.1:{port}");
    let o = Command::new(bin())
        .args(["run", &url, "-p", "stream", "--sizes", "1k"])
        .args(["--save-dir", "/dev/null/x"])
        .output()
        .unwrap();
    assert_failed_on_unwritable_save_dir(&o);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !e.contains(&format!("127.0.0.1:{port}, size")),
        "it never connected: {e}"
    );
}
