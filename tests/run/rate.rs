//! Issue 13, the open-loop `rate` pattern through the real binaries (a `netsweep serve`
//! process and a `netsweep run` process over loopback): every request is answered and
//! counted exactly, the delivered rate follows the offered one, bit rates convert with the
//! size, the timeline adds up to the point, and a stall of the server (SIGSTOP) is charged
//! to every request it delayed — where pingpong records one slow sample.

use crate::common::serve::Server;
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Runs `netsweep run ADDR args…` writing JSON to `out` (no QUICK: rate points need their
/// own trial times).
fn run_to(addr: &str, out: &Path, args: &[&str]) -> (Output, Value) {
    let o = Command::new(bin())
        .args(["run", addr, "--no-save", "-q", "-o", out.to_str().unwrap()])
        .args(["--timeout", "5s"])
        .args(args)
        .output()
        .expect("netsweep runs");
    let text = std::fs::read_to_string(out).unwrap_or_else(|e| {
        panic!(
            "no results file ({e}); stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o, serde_json::from_str(&text).expect("JSON results"))
}

/// Runs `args` against a `netsweep serve --once` process; the run must complete.
fn served(tag: &str, args: &[&str]) -> Value {
    let (mut server, addr) = serve_once(bin());
    let dir = scratch(tag);
    let (o, v) = run_to(&addr, &dir.join("r.json"), args);
    let served = server.wait().expect("serve exits after its session");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(served.success(), "serve --once failed");
    assert_eq!(v["status"], "complete", "message: {}", v["message"]);
    v
}

const MODEST: &[&str] = &[
    "-p",
    "rate",
    "--rate",
    "2k",
    "--sizes",
    "64",
    "--trial-time",
    "250ms",
    "--max-point-time",
    "1s",
    "--min-trials",
    "2",
    "--max-trials",
    "3",
];

#[test]
fn every_request_is_answered_and_delivered_follows_offered() {
    for t in ["tcp", "udp", "unix-stream", "unix-dgram"] {
        let mut args = vec!["-t", t];
        args.extend_from_slice(MODEST);
        let cpu = netsweep_testkit::lab::idle::CpuWindow::start();
        let v = served(&format!("rate-{t}"), &args);
        let busy = cpu.finish();
        let p = &v["points"][0];
        let r = &p["rate"];
        let (sent, received, lost) = (u(&r["sent"]), u(&r["received"]), u(&r["lost"]));
        // Requests of 250 ms trials at 2k/s: 500 per trial.
        assert!(sent >= 1000 && sent % 500 == 0, "{t}: sent {sent}");
        assert_eq!(sent, received + lost, "{t}: {r}");
        assert_eq!(sent, u(&p["client"]["messages_sent"]), "{t}");
        // The server echoed what it got, exactly.
        let s = &p["server"];
        assert_eq!(s["messages_received"], s["messages_sent"], "{t}: {s}");
        assert_eq!(u(&s["messages_received"]), sent - lost, "{t}: {s}");
        if !t.ends_with("dgram") && t != "udp" {
            assert_eq!((lost, u(&r["late"])), (0, 0), "{t}: {r}");
        }
        assert_eq!(f(&r["offered_rate"]), 2000.0);
        // The delivered rate counts replies by when they arrived: never more than offered, and
        // all of it only when the host let the replies arrive on time (beside two busy loops
        // and a compile: 1777/s of 2000/s over tcp, every request still answered).
        let delivered = f(&r["delivered_rate"]["mean"]);
        assert!(
            delivered > 0.0 && delivered < 2000.0 * 1.05,
            "{t}: delivered {delivered}/s of 2000/s offered"
        );
        if busy.idle_enough() {
            assert!(
                (delivered / 2000.0 - 1.0).abs() < 0.05,
                "{t}: delivered {delivered}/s of 2000/s offered on an idle machine ({busy})"
            );
        } else {
            eprintln!(
                "{t}: SKIPPED the check that delivered ({delivered:.0}/s) follows offered \
                 (2000/s) within 5%: the machine was not idle: {busy}"
            );
        }
        // Every answered request within the grace period is in the latency histogram.
        let lat = &p["latency"]["rtt_ns"];
        let n = u(&lat["count"]);
        assert!(n <= received && n + u(&r["late"]) >= received, "{t}: {r}");
        assert!(
            f(&lat["p50"]) > 0.0 && f(&lat["p50"]) <= f(&lat["p99"]),
            "{t}"
        );
        assert_eq!(u(&r["lateness_ns"]["count"]), sent, "{t}");
        let late = &r["lateness_ns"];
        assert!(f(&late["min"]) <= f(&late["p50"]) && f(&late["p50"]) <= f(&late["p99"]));
        if t == "udp" || t == "unix-dgram" {
            assert_eq!(u(&p["loss"]["sent"]), sent, "{t}");
        }
    }
}

#[test]
fn bit_rates_convert_with_the_size_and_the_timeline_adds_up() {
    let v = served(
        "rate-bits",
        &[
            "-t",
            "udp",
            "-p",
            "rate",
            "--rate",
            "10mbit",
            "--sizes",
            "1250",
            "--arrivals",
            "poisson",
            "--seed",
            "7",
            "--interval",
            "50ms",
            "--trial-time",
            "200ms",
            "--max-point-time",
            "1s",
            "--min-trials",
            "2",
            "--max-trials",
            "2",
        ],
    );
    assert_eq!(v["spec"]["load"]["seed"], 7);
    assert_eq!(v["spec"]["load"]["arrivals"], "poisson");
    let p = &v["points"][0];
    let r = &p["rate"];
    // 10 Mbit/s of 1250-byte requests: 1000 requests/s.
    assert_eq!(f(&r["offered_rate"]), 1000.0);
    assert_eq!(r["arrivals"], "poisson");
    let sent = u(&r["sent"]);
    // Two 200 ms trials of a Poisson process of mean 200: 400 ± 6σ (σ = 20).
    assert!((280..=520).contains(&sent), "{sent}");
    let tl = r["timeline"].as_array().expect("a timeline");
    // Two trials of four 50 ms intervals, laid end to end.
    assert_eq!(tl.len(), 8, "{tl:?}");
    for (i, s) in tl.iter().enumerate() {
        assert_eq!(u(&s["t_ns"]), i as u64 * 50_000_000);
        assert_eq!(u(&s["sent"]), u(&s["received"]) + u(&s["lost"]));
    }
    let sum = |k: &str| tl.iter().map(|s| u(&s[k])).sum::<u64>();
    assert_eq!(sum("sent"), sent);
    assert_eq!(sum("received"), u(&r["received"]) - u(&r["late"]));
}

#[test]
fn a_rate_sweep_measures_each_offered_load_at_one_size() {
    let v = served(
        "rate-sweep",
        &[
            "-p",
            "rate",
            "--rates",
            "500..2k:*2",
            "--sizes",
            "100",
            "--trial-time",
            "100ms",
            "--max-point-time",
            "400ms",
        ],
    );
    let pts = v["points"].as_array().unwrap();
    let offered: Vec<f64> = pts.iter().map(|p| f(&p["rate"]["offered_rate"])).collect();
    assert_eq!(offered, [500.0, 1000.0, 2000.0]);
    assert!(pts.iter().all(|p| p["size"] == 100));
    assert_eq!(v["spec"]["load"]["rates_spec"], "500..2k:*2");
    // One size: no size anomalies are looked for.
    assert!(v.get("anomalies").is_none(), "{}", v["anomalies"]);
}

#[test]
fn misplaced_or_impossible_load_flags_are_usage_errors() {
    let cases: &[(&[&str], &str)] = &[
        (&["-p", "pingpong", "--rate", "1k"], "add -p rate"),
        (&["-p", "rate"], "--rate 10k"),
        (&["-p", "rate", "--rate", "fast"], "50mbit"),
        (
            &["-p", "rate", "--rate", "1k", "--sizes", "8"],
            "at least 20",
        ),
        (
            &["-p", "rate", "--rates", "1k..4k:*2", "--sizes", "64,128"],
            "one size",
        ),
        (
            &["-p", "rate", "--rates", "4k..1k:*2", "--sizes", "64"],
            "start is above",
        ),
        (
            &["-p", "rate", "--rate", "1k", "--arrivals", "bursty"],
            "poisson",
        ),
        (
            &["-p", "rate", "--rate", "1k", "-t", "udplite"],
            "tcp, mptcp",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["run", "--no-save", "-q"];
        all.extend_from_slice(args);
        let o = run(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?} should say {says:?}: {err}");
    }
}

/// Runs `args` against a `netsweep serve` that is stopped (SIGSTOP) for `STALL` every 900 ms
/// or more while it moves a trial's data (at fixed times after the session began, both stalls missed the
/// pingpong trials beside two busy loops: a pingpong trial is sized in round trips, and on a
/// busy machine it took 0.3 s, not 1 s); returns the results.
fn stalled(tag: &str, args: &[&str]) -> Value {
    const STALL: Duration = Duration::from_millis(100);
    let server = Server::start(&[]);
    let dir = scratch(tag);
    let out = dir.join("r.json");
    let addr = server.addr.clone();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let client = std::thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        run_to(&addr, &out, &a)
    });
    server.stall_during_traffic(STALL, || client.is_finished());
    let (o, v) = client.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["status"], "complete", "message: {}", v["message"]);
    v
}

/// The stall: a 100 ms pause of the server every 900 ms of traffic or more. Rate's
/// requests keep leaving during the pause and every one of them waits for it: at 2k/s some
/// 100 requests per pause are delayed by more than half of it, over 1% of the point's, so its
/// p99 is above that. Pingpong waits for each reply before sending: a pause is one slow round
/// trip (its max), fewer than 0.1% of its samples. Pingpong keeps its warm-up: its trials are
/// sized in round trips from the warm-up's median, which two round trips alone (--no-warmup)
/// did not give on a busy machine (182 round trips in two trials, a stall 0.5% of them).
#[test]
fn a_stall_is_charged_to_every_request_it_delayed_but_is_one_pingpong_sample() {
    const HALF_STALL_NS: f64 = 50e6;
    let trials = [
        "--trial-time",
        "1s",
        "--max-point-time",
        "3s",
        "--min-trials",
        "2",
        "--max-trials",
        "2",
        "--sizes",
        "64",
    ];
    let mut rate = vec!["-p", "rate", "--rate", "2k", "--no-warmup"];
    rate.extend_from_slice(&trials);
    let v = stalled("rate-stall", &rate);
    let p = &v["points"][0];
    let lat = &p["latency"]["rtt_ns"];
    let n = u(&lat["count"]);
    assert_eq!(n, 4000, "{p}");
    assert!(f(&lat["max"]) > 90e6, "the stall was not seen: {lat}");
    // p99 above half the stall: at least 1% (40) of the samples waited that long.
    assert!(f(&lat["p99"]) > HALF_STALL_NS, "rate p99 {lat}");
    assert_eq!(u(&p["rate"]["lost"]), 0);

    let mut pp = vec!["-p", "pingpong"];
    pp.extend_from_slice(&trials);
    let v = stalled("pingpong-stall", &pp);
    let lat = &v["points"][0]["latency"]["rtt_ns"];
    let n = u(&lat["count"]);
    // Enough round trips that the stalls' slow ones (one per 900 ms or more of trials) are
    // under 0.1% (a busy machine makes each round trip slower, so no more than that is
    // assumed).
    assert!(n > 3_000, "{lat}");
    assert!(f(&lat["max"]) > 90e6, "the stall was not seen: {lat}");
    // p99.9 below half the stall: fewer than 0.1% of the samples saw it.
    assert!(f(&lat["p999"]) < HALF_STALL_NS, "pingpong p99.9 {lat}");
}

/// A rate sender close to its next send looks for replies without waiting, and yields the
/// CPU between looks: with both ends pinned to one CPU the server's echo runs when its
/// request arrives, not once the sender's time slice runs out. Before the yield, a few
/// percent of the requests waited that slice (p99 ≈ 3 ms against a p50 of 15 µs: 200×).
///
/// What distinguishes that starvation from a busy machine is whose time the wait was: other
/// work that takes the CPU from both ends makes the sender late as well (each request's
/// latency counts from its intended send time, so the sender's lateness is in it), while a
/// starved server leaves the sender on time and only the replies late. So the test holds the
/// latency's p99 to the sender lateness's p99 measured in the same run, plus 10% of it and
/// 1 ms (a third of a time slice). Measured on this 2-CPU VM, p99 latency − p99 lateness:
/// with the yield 0.05–0.10 ms idle, 0.03–0.32 ms beside two busy loops (whose p50 reached
/// 3.3 ms, which the old "p99 ≤ 20 × p50" rule could not bear) and up to 1.6 ms past a
/// lateness p99 of 27–38 ms when a compile joined them; without it 2.1–3.7 ms idle and
/// 3.1–16 ms beside the loops (60–200% of the lateness p99).
#[test]
fn a_rate_sender_sharing_its_cpu_with_the_server_does_not_starve_it() {
    let one_cpu = &[
        "-p",
        "rate",
        "--rate",
        "10k",
        "--sizes",
        "64",
        "--cpu",
        "0,0",
        "--trial-time",
        "50ms",
        "--min-trials",
        "3",
        "--max-trials",
        "3",
        // Room for all three trials on a busy machine (the default budget is 3 × 50 ms).
        "--max-point-time",
        "5s",
    ];
    // One of three runs must hold: a sender that holds the CPU spoils all three.
    let mut seen = Vec::new();
    for attempt in 0..3 {
        let v = served(&format!("rate-one-cpu-{attempt}"), one_cpu);
        let p = &v["points"][0];
        let pl = &p["placement"];
        assert_eq!(u(&p["trials"]), 3, "{p}");
        assert_eq!(
            (u(&pl["same_cpu_trials"]), u(&pl["observed_trials"])),
            (3, 3),
            "both ends must share CPU 0 in every trial: {pl}"
        );
        let (rtt, late) = (&p["latency"]["rtt_ns"], &p["rate"]["lateness_ns"]);
        assert_eq!(u(&rtt["count"]), u(&p["rate"]["received"]));
        assert_eq!(u(&late["count"]), u(&p["rate"]["sent"]));
        assert!(u(&rtt["count"]) >= 1000, "{rtt}");
        let (p99, late_p99) = (f(&rtt["p99"]), f(&late["p99"]));
        eprintln!(
            "attempt {attempt}: latency p50 {:.0} p99 {p99:.0} ns, sender lateness p99 \
             {late_p99:.0} ns",
            f(&rtt["p50"])
        );
        if p99 <= late_p99 * 1.1 + 1e6 {
            return;
        }
        seen.push((p99, late_p99));
    }
    panic!(
        "the replies waited over 1 ms and 10% beyond the sender's own lateness at the p99 in \
         every run (the server starved beside its sender), (latency p99, lateness p99) ns: \
         {seen:?}"
    );
}

/// Without --trial-time a rate trial carries 1000 requests at the offered load (4k/s: 250
/// ms) and the point's budget lets three of them run; the percentiles rest on every reply.
/// With a short trial the table leaves out a percentile the replies cannot support.
#[test]
fn a_rate_trial_defaults_to_a_thousand_requests_and_the_table_hides_unsupported_tails() {
    let v = served(
        "rate-default-trial",
        &["-p", "rate", "--rate", "4k", "--sizes", "64", "--no-warmup"],
    );
    let s = &v["spec"];
    assert_eq!(u(&s["trial_time_ns"]), 250_000_000);
    assert_eq!(u(&s["max_point_time_ns"]), 750_000_000);
    let p = &v["points"][0];
    let trials = u(&p["trials"]);
    assert!(trials >= 3, "{p}");
    assert_eq!(
        u(&p["rate"]["sent"]),
        1000 * trials,
        "constant arrivals: 1000 a trial"
    );
    assert_eq!(
        u(&p["latency"]["rtt_ns"]["count"]),
        u(&p["rate"]["received"])
    );

    // 2k/s for 20 ms: 40 replies a trial, 120 in the point — a p99, not a p99.9.
    let short = "run --no-save -p rate --rate 2k --sizes 64 --trial-time 20ms --min-trials 3 \
                 --max-trials 3 --no-warmup";
    let o = Command::new(bin())
        .args(short.split_whitespace())
        .output()
        .expect("netsweep runs");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("trials: 20 ms each, 3–3 per point"), "{text}");
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.trim_start().starts_with("64 "))
        .unwrap_or_else(|| panic!("no row for 64 B: {text}"))
        .split_whitespace()
        .collect();
    // bytes, offered/s, deliv/s, p50, p99, p99.9, …
    assert_ne!(row[4], "–", "{row:?}");
    assert_eq!(row[5], "–", "{row:?}");
}
