//! Issue 4 through the real binary on loopback: knobs are applied and read back, apis record
//! what the kernel did, and crr counts match the server's accepted connections.

use crate::common::*;
use serde_json::Value;

fn ok(o: &std::process::Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn pt(v: &Value) -> &Value {
    &v["points"][0]
}

#[test]
fn crr_counts_match_the_servers_accepted_connections() {
    let dir = scratch("crr");
    for t in ["tcp", "unix-stream"] {
        let (o, v) = run_json(
            &dir.join(format!("{t}.json")),
            &["-t", t, "-p", "crr", "--sizes", "1,1k"],
        );
        ok(&o);
        for p in v["points"].as_array().unwrap() {
            let c = &p["crr"];
            let n = c["connections"].as_u64().unwrap();
            assert!(n > 0);
            assert_eq!(
                n,
                c["server_accepted"].as_u64().unwrap(),
                "{t}: every connection was accepted once"
            );
            assert_eq!(n, p["server"]["messages_received"].as_u64().unwrap());
            let (conn, txn) = (
                c["connect_ns"]["p50"].as_f64().unwrap(),
                c["transaction_ns"]["p50"].as_f64().unwrap(),
            );
            assert!(
                conn > 0.0 && conn < txn,
                "{t}: connect {conn} within transaction {txn}"
            );
            assert_eq!(
                c["transaction_ns"]["count"].as_u64().unwrap(),
                n,
                "one sample per transaction"
            );
            assert!(c["transactions_per_sec"]["mean"].as_f64().unwrap() > 0.0);
        }
    }
    let o = run(&["run", "-p", "crr", "-t", "udp", "--sizes", "1", "--no-save"]);
    assert_eq!(o.status.code(), Some(2), "crr over udp is a usage error");
}

#[test]
fn socket_knobs_are_read_back_as_granted() {
    let dir = scratch("knobs");
    let (o, v) = run_json(
        &dir.join("tcp.json"),
        &[
            "-t",
            "tcp",
            "--sizes",
            "64",
            "--tos",
            "0x10",
            "--priority",
            "3,4",
            "--cc",
            "reno",
            "--busy-poll",
            "50",
            "--nodelay",
            "off",
            "--offset",
            "1,2",
        ],
    );
    ok(&o);
    let (c, s) = (&v["granted"]["client"], &v["granted"]["server"]);
    assert_eq!(c["tos"], 16);
    assert_eq!(s["tos"], 16);
    assert_eq!(c["priority"], 3);
    assert_eq!(s["priority"], 4);
    assert_eq!(c["congestion_control"], "reno");
    assert_eq!(s["congestion_control"], "reno");
    assert_eq!(c["busy_poll"], 50);
    assert_eq!(c["nodelay"], false);
    assert_eq!(v["spec"]["client_knobs"]["buffer_offset"], 1);
    assert_eq!(v["spec"]["server_knobs"]["buffer_offset"], 2);
    // TCP_INFO: retransmits (and DSACKs) are reported, never as loss.
    assert!(pt(&v)["client"]["tcp_retransmits"].is_u64());
    assert!(pt(&v).get("loss").is_none());
}

/// TCP_INFO's chrono counters say what held a sender back. Messages six times the receive
/// window a 16 KiB SO_RCVBUF leaves must wait on the window; 1 KB messages into an autotuned
/// buffer never do. Structural, not timing: a busy machine changes how long, not whether.
#[test]
fn the_receive_window_is_named_when_it_holds_the_sender_back() {
    let dir = scratch("chrono");
    let side = |v: &Value, k: &str| pt(v)["client"][k].as_u64();
    let (o, small) = run_json(
        &dir.join("small.json"),
        &[
            "-t", "tcp", "-p", "pingpong", "--sizes", "96k", "--sndbuf", "16k", "--rcvbuf", "16k",
        ],
    );
    ok(&o);
    let busy = side(&small, "tcp_busy_us").expect("tcp_busy_us");
    let rwnd = side(&small, "tcp_rwnd_limited_us").expect("tcp_rwnd_limited_us");
    let sndbuf = side(&small, "tcp_sndbuf_limited_us").expect("tcp_sndbuf_limited_us");
    assert!(
        busy > 0 && rwnd > 0,
        "busy {busy} µs, rwnd-limited {rwnd} µs"
    );
    assert!(
        rwnd + sndbuf <= busy,
        "parts {rwnd} + {sndbuf} of busy {busy}"
    );
    let (o, roomy) = run_json(
        &dir.join("roomy.json"),
        &["-t", "tcp", "-p", "pingpong", "--sizes", "1k"],
    );
    ok(&o);
    assert_eq!(
        side(&roomy, "tcp_rwnd_limited_us"),
        Some(0),
        "{}",
        pt(&roomy)["client"]
    );
}

#[test]
fn dscp_no_check_and_pmtu_are_recorded() {
    let dir = scratch("udpknobs");
    let (o, v) = run_json(
        &dir.join("u.json"),
        &[
            "-t",
            "udp",
            "--sizes",
            "100",
            "--dscp",
            "46",
            "--no-check",
            "--pmtu",
            "do",
        ],
    );
    ok(&o);
    let c = &v["granted"]["client"];
    assert_eq!(c["tos"], 46 << 2);
    assert_eq!(c["no_check"], true);
    assert_eq!(c["pmtu"], "do");
    assert!(c["path_mtu"].as_u64().unwrap() >= 1280);
}

#[test]
fn zerocopy_completions_are_counted() {
    let dir = scratch("zc");
    let (o, v) = run_json(
        &dir.join("zc.json"),
        &[
            "-t", "tcp", "-p", "pingpong", "--api", "zerocopy", "--sizes", "16k",
        ],
    );
    ok(&o);
    let c = &pt(&v)["client"];
    let done = c["zerocopy_completions"].as_u64().unwrap();
    assert!(done > 0, "zero-copy sends completed");
    // Every timed send completes; on loopback the kernel copies them all and says so.
    assert!(done <= c["send_calls"].as_u64().unwrap());
    assert!(c["zerocopy_copied"].as_u64().unwrap() <= done);
}

#[test]
fn mmsg_batches_sends() {
    let dir = scratch("mmsg");
    let (o, v) = run_json(
        &dir.join("m.json"),
        &[
            "-t", "udp", "-p", "stream", "--api", "mmsg", "--batch", "16", "--sizes", "64",
        ],
    );
    ok(&o);
    let c = &pt(&v)["client"];
    let (msgs, calls) = (
        c["messages_sent"].as_u64().unwrap(),
        c["send_calls"].as_u64().unwrap(),
    );
    assert!(
        calls * 16 >= msgs && calls <= msgs.div_ceil(16) + 8,
        "{msgs} messages in {calls} calls"
    );
    // The loss figures agree with each side's own count (loss itself is checked against
    // induced drops in run_transports::udp_stream_loss_equals_induced_and_kernel_drops).
    let l = &pt(&v)["loss"];
    assert_eq!(l["sent"], c["messages_sent"]);
    let got = pt(&v)["server"]["messages_received"].as_u64().unwrap();
    assert!(
        l["received"].as_u64().unwrap() <= got,
        "{l} vs {got} received"
    );
}

#[test]
fn pinned_and_cache_invalidating_runs_record_it() {
    let dir = scratch("pin");
    let (o, v) = run_json(
        &dir.join("p.json"),
        &["--sizes", "1k", "--cpu", "0", "--invalidate-cache", "8M"],
    );
    ok(&o);
    assert_eq!(v["granted"]["client"]["cpu"], 0);
    assert_eq!(v["granted"]["server"]["cpu"], 0);
    assert_eq!(pt(&v)["placement"]["client_cpus"], serde_json::json!([0]));
    assert_eq!(pt(&v)["placement"]["server_cpus"], serde_json::json!([0]));
    assert_eq!(v["spec"]["client_knobs"]["cache_pool"], 8 << 20);
    let o = run(&["run", "--cpu", "999", "--sizes", "1", "--no-save"]);
    assert_eq!(o.status.code(), Some(1));
    // Refused at admission, before either end pins itself: the plan names the CPU and the
    // ones the server may use.
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--cpu 999") && e.contains("may run on CPUs"),
        "{e}"
    );
}

/// Issue 41 item 8 (the probe's `bitrate`): `--pacing-rate` is SO_MAX_PACING_RATE on both
/// ends, read back, and the sender's TCP keeps to it: a loopback stream that runs at
/// gigabits per second unpaced receives no more than the rate asked.
#[test]
fn a_paced_tcp_stream_keeps_to_its_pacing_rate() {
    let out = scratch("pacing").join("paced.json");
    let o = run(&[
        "run",
        "--no-save",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "-t",
        "tcp",
        "-p",
        "stream",
        "--sizes",
        "64k",
        "--trial-time",
        "200ms",
        "--max-point-time",
        "1s",
        "--pacing-rate",
        "200mbit",
    ]);
    ok(&o);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for side in ["client", "server"] {
        assert_eq!(v["granted"][side]["pacing_rate"], 200_000_000u64, "{side}");
    }
    let got = pt(&v)["receiver_mbps"]["mean"].as_f64().unwrap();
    // Headers ride inside the paced rate; a busy host can only send less.
    assert!(got <= 200.0 * 1.05, "{got} Mbit/s paced to 200");
    assert!(got >= 50.0, "{got} Mbit/s paced to 200");
}
