//! Issue 9, items 2–4: a point claims only the precision it measured, a bare time is
//! seconds, the in-process pingpong's default placement, and a stalled round trip that
//! cannot move a pingpong trial's figure.

use crate::common::{bin, run, scratch, serve_once};
use serde_json::Value;
use std::time::Duration;

fn load(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("results file")).expect("JSON")
}

#[test]
fn a_point_of_one_trial_claims_no_interval_and_no_precision() {
    let d = scratch("one-trial");
    let out = d.join("r.json");
    // The first timed trial (20 ms) spends four 1 ms budgets: the point stops after it.
    let o = run(&[
        "run",
        "--no-save",
        "-o",
        out.to_str().unwrap(),
        "--sizes",
        "1",
        "--trial-time",
        "20ms",
        "--max-point-time",
        "1ms",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = load(&out);
    let p = &r["points"][0];
    assert_eq!(p["trials"], 1, "{p}");
    assert!(p["throughput_mbps"]["ci95"].is_null(), "{p}");
    assert!(p["latency"]["rtt_ns"]["ci95"].is_null(), "{p}");
    assert!(p["precision_achieved"].is_null(), "{p}");
    assert_eq!(p["precision_met"], false);
    let table = String::from_utf8_lossy(&o.stdout);
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .expect("a row for size 1");
    assert!(
        row.contains("n/a") && row.contains("~ time budget spent"),
        "{row}"
    );
    assert!(table.contains("1 of 1 points did not reach"), "{table}");
}

#[test]
fn a_bare_time_is_seconds_on_every_time_flag() {
    let d = scratch("bare-seconds");
    let out = d.join("r.json");
    let o = run(&[
        "run",
        "--no-save",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--sizes",
        "1",
        "--trial-time",
        "0.005",
        "--max-point-time",
        "0.05",
        "--timeout",
        "3",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spec = &load(&out)["spec"];
    assert_eq!(spec["trial_time_ns"], 5_000_000);
    assert_eq!(spec["max_point_time_ns"], 50_000_000);
    assert_eq!(spec["timeout_ns"], 3_000_000_000u64);
    for flag in ["--trial-time", "--max-point-time", "--timeout"] {
        let o = run(&["run", "--no-save", flag, "5h"]);
        assert_eq!(o.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(flag) && err.contains("a bare number is seconds"),
            "{flag}: {err}"
        );
    }
}

#[test]
fn in_process_pingpong_puts_both_ends_on_one_cpu_unless_told_otherwise() {
    let d = scratch("placement");
    let quick = [
        "--sizes",
        "1,1k",
        "--trial-time",
        "5ms",
        "--max-point-time",
        "100ms",
    ];
    let pinned = d.join("pinned.json");
    let mut args = vec!["run", "--no-save", "-q", "-o", pinned.to_str().unwrap()];
    args.extend_from_slice(&quick);
    assert!(run(&args).status.success());
    let r = load(&pinned);
    let spec = &r["spec"];
    assert_eq!(spec["default_placement"], true);
    let cpu = spec["client_knobs"]["cpu"].as_u64().expect("client pinned");
    assert_eq!(spec["server_knobs"]["cpu"].as_u64(), Some(cpu));
    assert_eq!(r["granted"]["client"]["cpu"].as_u64(), Some(cpu));
    assert_eq!(r["granted"]["server"]["cpu"].as_u64(), Some(cpu));
    for p in r["points"].as_array().unwrap() {
        let pl = &p["placement"];
        assert!(pl["observed_trials"].as_u64().unwrap() > 0, "{pl}");
        assert_eq!(pl["same_cpu_trials"], pl["observed_trials"], "{pl}");
        assert_eq!(pl["client_cpus"], serde_json::json!([cpu]), "{pl}");
        assert_eq!(pl["server_cpus"], serde_json::json!([cpu]), "{pl}");
    }

    // --cpu free: no pinning, and the spec says so; a stream stays free by default.
    for (extra, name) in [
        (&["--cpu", "free"][..], "free"),
        (&["-p", "stream"][..], "stream"),
    ] {
        let out = d.join(format!("{name}.json"));
        let mut args = vec!["run", "--no-save", "-q", "-o", out.to_str().unwrap()];
        args.extend_from_slice(&quick);
        args.extend_from_slice(extra);
        assert!(run(&args).status.success(), "{name}");
        let spec = &load(&out)["spec"];
        assert!(spec.get("default_placement").is_none(), "{name}: {spec}");
        assert!(spec["client_knobs"]["cpu"].is_null(), "{name}");
        assert!(spec["server_knobs"]["cpu"].is_null(), "{name}");
    }
}

/// Stops the server process for 30 ms every 60 ms while a pingpong point runs: a few round
/// trips take milliseconds. Each trial's figure is its median round trip, so the headline
/// throughput stays at the typical round trip (the histogram's p50), while the mean RTT,
/// which carries the stalls, moves far off it.
#[test]
fn stalled_round_trips_do_not_move_a_pingpong_trial_figure() {
    let (mut server, host) = serve_once(bin());
    let d = scratch("stalls");
    let out = d.join("r.json");
    let out_s = out.to_str().unwrap().to_string();
    let client = std::thread::spawn(move || {
        run(&[
            "run",
            &host,
            "--no-save",
            "-q",
            "-o",
            &out_s,
            "--sizes",
            "1",
            "--cpu",
            "0",
            "--trial-time",
            "50ms",
            "--min-trials",
            "8",
            "--max-point-time",
            "2s",
        ])
    });
    let pid = server.id() as libc::pid_t;
    while !client.is_finished() {
        std::thread::sleep(Duration::from_millis(30));
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(30));
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
    let o = client.join().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = &load(&out)["points"][0];
    let rtt = &p["latency"]["rtt_ns"];
    let (p50, mean, max) = (
        rtt["p50"].as_f64().unwrap(),
        rtt["mean"].as_f64().unwrap(),
        rtt["max"].as_f64().unwrap(),
    );
    assert!(
        max > 5e6,
        "no round trip was stalled (max {max} ns): the test did not test"
    );
    // The RTT the headline throughput implies: 1 byte each way per RTT/2.
    let implied_rtt = 2.0 * 8.0 * 1e3 / p["throughput_mbps"]["mean"].as_f64().unwrap();
    assert!(
        mean > 1.5 * p50,
        "stalls should show in the mean: {mean} vs p50 {p50}"
    );
    // The headline follows the median, not the stalled mean: within a third of the way from
    // p50 to the mean (a sibling test on the same CPU moves trial medians by ±25%, as a
    // 26% miss of a fixed ±25% bound showed; the stalls alone would put it at the mean).
    assert!(
        (implied_rtt - p50).abs() < (mean - p50) / 3.0,
        "headline implies RTT {implied_rtt:.0} ns, p50 {p50:.0}, mean {mean:.0}"
    );
}

#[test]
fn passes_visit_every_size_again_and_their_spread_is_in_the_interval() {
    // Issue 39 item 1: --passes 3 visits each size three times (down, then up again); every
    // point's note lists its three means, and its interval is at least their spread.
    let d = scratch("passes");
    let out = d.join("r.json");
    let (o, r) = crate::common::run_json(&out, &["--sizes", "1,1k,64k", "--passes", "3"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(r["spec"]["passes"], 3);
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "passes add no points");
    for p in points {
        let note = p["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find(|n| n.starts_with("3 passes: "))
            .unwrap_or_else(|| panic!("no passes note: {p}"));
        let means: Vec<f64> = note["3 passes: ".len()..]
            .split(" Mbit/s")
            .next()
            .unwrap()
            .split(", ")
            .map(|m| m.parse().unwrap())
            .collect();
        assert_eq!(means.len(), 3, "{note}");
        assert!(means.iter().all(|m| *m > 0.0), "{note}");
        let spread = netsweep_model::stats::ci95(&means).unwrap().half_width;
        let ci = p["throughput_mbps"]["ci95"].as_f64().unwrap();
        // The note prints four decimals: allow for its rounding.
        assert!(
            ci >= spread * 0.99,
            "ci {ci} below the passes' {spread}: {p}"
        );
    }
    // An impossible count is a usage error.
    let o = run(&["run", "--no-save", "--passes", "0"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Issue 39 item 8: `--start-at` holds the first point's timed trials until that time and
/// runs them for the point's budget; every point records its window; a time too far ahead,
/// past `--timeout`, or not a time is a usage error.
#[test]
fn start_at_begins_the_timed_trials_together_and_every_point_records_its_window() {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let d = scratch("start-at");
    let out = d.join("r.json");
    let at = now() + 1.5;
    let o = run(&[
        "run",
        "--no-save",
        "-o",
        out.to_str().unwrap(),
        "--sizes",
        "64,128",
        "--trial-time",
        "20ms",
        "--max-point-time",
        "300ms",
        "--start-at",
        &format!("{at:.3}"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = load(&out);
    let at_ns = format!("{at:.3}").replace('.', "").parse::<u64>().unwrap() * 1_000_000;
    assert_eq!(v["spec"]["start_at_unix_ns"].as_u64(), Some(at_ns));
    let window = |i: usize| {
        let w = &v["points"][i]["window"];
        let f = |k: &str| w[k].as_u64().unwrap_or_else(|| panic!("{k}: {w}"));
        (f("from_unix_ns"), f("to_unix_ns"), f("trials_ns"))
    };
    let (from, to, trials) = window(0);
    // Not before the time; at it, unless this machine woke the sleeper late.
    assert!(
        from >= at_ns,
        "began {} ms early",
        (at_ns - from) as f64 / 1e6
    );
    // The point ran to its budget, precision or not: 300 ms and up to one trial more.
    let len = to - from;
    assert!((300_000_000..1_000_000_000).contains(&len), "{len} ns");
    assert!(trials > 0 && trials <= len, "{trials} of {len} ns");
    assert_eq!(v["points"][0]["stop_reason"], "time-budget");
    // The second point measures as any: its window follows the first's.
    let (from2, _, _) = window(1);
    assert!(from2 >= to, "{from2} < {to}");

    for (args, says) in [
        (vec!["--start-at", "not-a-time"], "not a time in seconds"),
        (
            vec!["--start-at", &format!("{:.0}", now() + 400.0)],
            "at most 300 s ahead",
        ),
        (
            vec!["--start-at", &format!("{:.0}", now() + 60.0)],
            "raise --timeout",
        ),
    ] {
        let mut all = vec!["run", "--no-save", "--sizes", "64"];
        all.extend(args.iter().map(|s| &**s));
        let o = run(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
