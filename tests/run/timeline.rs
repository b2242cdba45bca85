//! Issue 13, stream timelines (`--interval`) through the real binaries (a `netsweep serve`
//! process and a `netsweep run` process over loopback): each interval's bytes and datagrams
//! add up exactly to the point's totals both sides counted, each interval's datagram loss is
//! exact, intervals are laid end to end, and a stall of the server (SIGSTOP) shows as
//! intervals in which nothing arrived.

use crate::common::serve::Server;
use crate::common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Runs `netsweep run ADDR args…` writing JSON to `out`; the run must complete.
fn run_to(addr: &str, tag: &str, args: &[&str]) -> Value {
    let out = scratch(tag).join("r.json");
    let o = Command::new(bin())
        .args(["run", addr, "--no-save", "-q", "-o", out.to_str().unwrap()])
        .args(["--timeout", "5s", "--no-warmup"])
        .args(args)
        .output()
        .expect("netsweep runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["status"], "complete", "message: {}", v["message"]);
    v
}

const INTERVAL_NS: u64 = 50_000_000;

#[test]
fn stream_timelines_add_up_to_what_both_sides_counted() {
    for (t, size, reverse) in [
        ("tcp", "64k", false),
        ("tcp", "64k", true),
        ("udp", "1472", false),
        ("udp", "1472", true),
        ("unix-dgram", "1k", false),
    ] {
        let (mut server, addr) = serve_once(bin());
        let mut args = vec![
            "-t",
            t,
            "-p",
            "stream",
            "--sizes",
            size,
            "--interval",
            "50ms",
        ];
        args.extend(["--trial-time", "300ms", "--max-point-time", "2s"]);
        args.extend(["--min-trials", "2", "--max-trials", "2"]);
        if reverse {
            args.push("-R");
        }
        let what = format!("{t} {size} reverse={reverse}");
        let v = run_to(&addr, &format!("timeline-{t}-{reverse}"), &args);
        assert!(server.wait().unwrap().success(), "{what}: serve failed");
        assert_eq!(u(&v["spec"]["interval_ns"]), INTERVAL_NS, "{what}");
        let p = &v["points"][0];
        let tl = p["timeline"].as_array().expect("a timeline");
        // Two trials of six 50 ms intervals each, and the receiver's tail: laid end to end.
        assert!(tl.len() >= 12, "{what}: {} intervals", tl.len());
        for (i, s) in tl.iter().enumerate() {
            assert_eq!(u(&s["t_ns"]), i as u64 * INTERVAL_NS, "{what}");
        }
        let sum = |k: &str| tl.iter().map(|s| u(&s[k])).sum::<u64>();
        let (tx, rx) = match reverse {
            false => (&p["client"], &p["server"]),
            true => (&p["server"], &p["client"]),
        };
        assert_eq!(sum("sent_bytes"), u(&tx["bytes_sent"]), "{what}");
        assert_eq!(sum("received_bytes"), u(&rx["bytes_received"]), "{what}");
        // Both sides are busy all the time: bytes in every whole interval of both trials.
        for k in ["sent_bytes", "received_bytes"] {
            let busy = tl.iter().filter(|s| u(&s[k]) > 0).count();
            assert!(busy >= 10, "{what}: {busy} intervals with {k}");
        }
        // An interval's rate is its bytes over its length (a whole one here).
        let s = &tl[1];
        let mbps = u(&s["sent_bytes"]) as f64 * 8.0 / INTERVAL_NS as f64 * 1e3;
        let got = s["sender_mbps"].as_f64().unwrap();
        assert!((got / mbps - 1.0).abs() < 1e-9, "{what}: {got} vs {mbps}");
        if t == "tcp" {
            assert!(tl.iter().all(|s| s.get("datagrams").is_none()), "{what}");
            continue;
        }
        // Datagrams: each interval's loss is exact, and they add up to the point's.
        let d = |s: &Value, k: &str| u(&s["datagrams"][k]);
        for s in tl {
            assert_eq!(d(s, "sent"), d(s, "received") + d(s, "lost"), "{what}: {s}");
        }
        let loss = &p["loss"];
        for k in ["sent", "received", "lost"] {
            let total = tl.iter().map(|s| d(s, k)).sum::<u64>();
            assert_eq!(total, u(&loss[k]), "{what}: {k}");
        }
    }
}

/// A 300 ms pause of the server (SIGSTOP) during a 1 s trial: nothing arrives while it lasts,
/// so the receiver's timeline has intervals without a byte — at 50 ms, at least three in a
/// row — while the totals still add up.
#[test]
fn a_stalled_server_shows_as_intervals_in_which_nothing_arrived() {
    let server = Server::start(&[]);
    let addr = server.addr.clone();
    let args = [
        "-p",
        "stream",
        "--sizes",
        "64k",
        "--interval",
        "50ms",
        "--trial-time",
        "1s",
        "--max-point-time",
        "4s",
        "--min-trials",
        "2",
        "--max-trials",
        "2",
    ];
    let client = std::thread::spawn(move || run_to(&addr, "timeline-stall", &args));
    server.stall_twice(Duration::from_millis(300), Duration::from_millis(400));
    let v = client.join().unwrap();
    let p = &v["points"][0];
    let tl = p["timeline"].as_array().expect("a timeline");
    let empty: Vec<bool> = tl.iter().map(|s| u(&s["received_bytes"]) == 0).collect();
    let longest = empty.split(|e| !e).map(|run| run.len()).max().unwrap_or(0);
    assert!(
        longest >= 3,
        "longest run of empty intervals: {longest}: {empty:?}"
    );
    // Two trials of twenty intervals, at most twelve of them stalled.
    let full = empty.iter().filter(|e| !**e).count();
    assert!(full >= 20, "{full} intervals with bytes: {empty:?}");
    let sum = |k: &str| tl.iter().map(|s| u(&s[k])).sum::<u64>();
    assert_eq!(sum("received_bytes"), u(&p["server"]["bytes_received"]));
    assert_eq!(sum("sent_bytes"), u(&p["client"]["bytes_sent"]));
}
