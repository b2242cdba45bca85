//! Issue 11, flows: `--flows N` (`-P`) and `--threads T` through the real binaries (a
//! `netsweep serve --once` process and a `netsweep run` process over loopback), asserting
//! that both ends count the same bytes and transactions on every flow, that equal flows
//! share fairly, that a thousand flows on two threads complete, and that what the flows path
//! does not support is refused by name — by the spec check or by an older server.

use crate::common;
use crate::common::*;
use serde_json::Value;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn points(v: &Value) -> &Vec<Value> {
    v["points"].as_array().expect("points array")
}

/// Runs `args` against a separate `netsweep serve --once` process.
fn served(tag: &str, args: &[&str]) -> Value {
    let (mut server, addr) = serve_once(bin());
    let dir = scratch(tag);
    let mut all = vec![addr.as_str()];
    all.extend_from_slice(args);
    let (o, v) = run_json(&dir.join("r.json"), &all);
    let served = server.wait().expect("serve exits after its session");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(served.success(), "serve --once failed");
    assert_eq!(v["status"], "complete", "message: {}", v["message"]);
    v
}

/// Checks what every flows point must hold, and returns its per-flow figures.
fn flows_of(p: &Value, n: u64, threads: u64) -> &Vec<Value> {
    let f = &p["flows"];
    assert_eq!(u(&f["count"]), n, "{f}");
    let per = f["per_flow"].as_array().expect("per_flow");
    assert_eq!(per.len() as u64, n);
    for side in ["client_threads", "server_threads"] {
        let ts = f[side].as_array().expect("threads");
        assert_eq!(ts.len() as u64, threads, "{side}: {f}");
        // Every flow is served by exactly one thread.
        assert_eq!(ts.iter().map(|t| u(&t["flows"])).sum::<u64>(), n, "{side}");
        let cpu: u64 = ts
            .iter()
            .map(|t| u(&t["cpu_user_ns"]) + u(&t["cpu_sys_ns"]))
            .sum();
        assert!(cpu > 0, "{side} used no CPU: {f}");
    }
    assert!(f["client_start_skew_ns"].is_u64() && f["server_start_skew_ns"].is_u64());
    let fair = f["fairness"].as_f64().unwrap();
    assert!(fair > 0.0 && fair <= 1.0, "{fair}");
    per
}

/// A request/response flow's counts: every request the client sent of `size` bytes was
/// received, answered and its answer received. Returns the requests.
fn answered_on_both_ends(f: &Value, size: u64) -> u64 {
    let (c, s) = (&f["client"], &f["server"]);
    let n = u(&c["messages_sent"]);
    assert_eq!(
        (
            u(&c["messages_received"]),
            u(&s["messages_received"]),
            u(&s["messages_sent"])
        ),
        (n, n, n),
        "{f}"
    );
    assert_eq!(u(&c["bytes_sent"]), n * size);
    assert_eq!(c["bytes_sent"], s["bytes_received"]);
    n
}

/// Four stream flows on `threads` threads per side (None: the default, a thread per flow,
/// each blocking in its calls; 2: two flows per thread in epoll).
fn stream_counts_match(tag: &str, transport: &str, threads: Option<u64>) {
    let t = threads.map(|t| t.to_string());
    let mut args = vec![
        "-t", transport, "-p", "stream", "-P", "4", "--sizes", "1,64k",
    ];
    if let Some(t) = &t {
        args.extend(["--threads", t.as_str()]);
    }
    let v = served(tag, &args);
    assert_eq!(v["spec"]["flows"], 4);
    assert_eq!(points(&v).len(), 2);
    for p in points(&v) {
        let per = flows_of(p, 4, threads.unwrap_or(4));
        let (mut sent, mut got) = (0, 0);
        for f in per {
            let (c, s) = (&f["client"], &f["server"]);
            // tcp and unix-stream deliver every byte the stack accepted: exactly equal.
            assert!(u(&c["bytes_sent"]) > 0, "{f}");
            assert_eq!(c["bytes_sent"], s["bytes_received"], "{f}");
            sent += u(&c["bytes_sent"]);
            got += u(&s["bytes_received"]);
        }
        assert_eq!(sent, u(&p["client"]["bytes_sent"]), "{p}");
        assert_eq!(got, u(&p["server"]["bytes_received"]), "{p}");
        let agg = p["flows"]["aggregate"].as_f64().unwrap();
        assert!(agg > 0.0 && agg == p["throughput_mbps"]["mean"].as_f64().unwrap());
    }
    // The memory the flows took is said once, on the first point.
    let notes = points(&v)[0]["notes"].to_string();
    assert!(
        notes.contains("memory") && notes.contains("per flow"),
        "{notes}"
    );
}

#[test]
fn tcp_stream_flows_count_the_same_bytes_on_both_ends_per_flow() {
    stream_counts_match("flows-tcp", "tcp", Some(2));
}

#[test]
fn tcp_stream_flows_default_to_a_blocking_thread_each_and_count_every_byte() {
    stream_counts_match("flows-tcp-own", "tcp", None);
}

#[test]
fn unix_stream_flows_count_the_same_bytes_on_both_ends_per_flow() {
    stream_counts_match("flows-unix", "unix-stream", Some(2));
}

#[test]
fn unix_stream_flows_on_a_thread_each_count_every_byte() {
    stream_counts_match("flows-unix-own", "unix-stream", None);
}

#[test]
fn equal_flows_on_loopback_share_fairly() {
    // One thread per side serves the four flows in turn: nothing but the loop decides.
    let v = served(
        "flows-fair",
        &[
            "-p",
            "stream",
            "-P",
            "4",
            "--threads",
            "1",
            "--sizes",
            "16k",
        ],
    );
    let p = &points(&v)[0];
    flows_of(p, 4, 1);
    let fair = p["flows"]["fairness"].as_f64().unwrap();
    assert!(
        fair >= 0.8,
        "Jain's index {fair} for four equal flows: {}",
        p["flows"]
    );
}

#[test]
fn pingpong_flows_answer_every_request_on_every_flow() {
    let v = served(
        "flows-rr",
        &[
            "-p",
            "pingpong",
            "-P",
            "8",
            "--threads",
            "2",
            "--sizes",
            "1,4k",
        ],
    );
    for p in points(&v) {
        let per = flows_of(p, 8, 2);
        let mut done = 0;
        for f in per {
            // One request outstanding per flow, all answered before the trial ended.
            let n = answered_on_both_ends(f, u(&p["size"]));
            assert!(n > 0, "{f}");
            done += n;
        }
        // Every transaction's round trip is in the point's one histogram.
        assert_eq!(u(&p["latency"]["rtt_ns"]["count"]), done, "{p}");
        assert_eq!(p["flows"]["unit"], "transactions_per_s");
        assert!(p["flows"]["aggregate"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn a_thousand_flows_on_two_threads_complete_a_point() {
    let v = served(
        "flows-1000",
        &[
            "-p",
            "stream",
            "-P",
            "1000",
            "--threads",
            "2",
            "--sizes",
            "1k",
        ],
    );
    let p = &points(&v)[0];
    for f in flows_of(p, 1000, 2) {
        let (c, s) = (&f["client"], &f["server"]);
        assert!(u(&s["bytes_received"]) > 0, "{f}");
        assert_eq!(c["bytes_sent"], s["bytes_received"], "{f}");
    }
}

/// Rate with flows over `transport`: 6 flows on 2 threads share 60 000 requests/s (5 ms
/// trials: 300 requests each).
fn rate_flows_account_every_request(tag: &str, transport: &str, arrivals: &str) {
    let v = served(
        tag,
        &[
            "-t",
            transport,
            "-p",
            "rate",
            "--rate",
            "60k",
            "--arrivals",
            arrivals,
            "-P",
            "6",
            "--threads",
            "2",
            "--sizes",
            "64,8k",
            "--min-trials",
            "2",
            "--max-trials",
            "3",
        ],
    );
    for p in points(&v) {
        let r = &p["rate"];
        let sent = u(&r["sent"]);
        // A stream loses no request: every one sent was answered, on time or late.
        assert_eq!((u(&r["received"]), u(&r["lost"])), (sent, 0), "{r}");
        // 300 requests a trial (constant arrivals exactly; Poisson within its noise), warm-up
        // and calibration trials apart.
        let trials = u(&p["trials"]);
        if arrivals == "constant" {
            assert_eq!(sent, 300 * trials, "{r}");
        } else {
            let expect = 300.0 * trials as f64;
            assert!((sent as f64 - expect).abs() < 0.15 * expect, "{r}");
        }
        let per = flows_of(p, 6, 2);
        let mut total = 0;
        for f in per {
            // Each flow's requests: sent, echoed and answered, the same on both ends.
            let n = answered_on_both_ends(f, u(&p["size"]));
            if arrivals == "constant" {
                // One schedule per flow at a sixth of the load: equal shares.
                assert_eq!(n, sent / 6, "{f}");
            }
            total += n;
        }
        assert_eq!(total, sent);
        assert_eq!(u(&p["client"]["messages_sent"]), sent);
        // Every answered request's latency and every request's lateness were recorded.
        let on_time = sent - u(&r["late"]);
        assert_eq!(u(&p["latency"]["rtt_ns"]["count"]), on_time, "{p}");
        assert_eq!(u(&r["lateness_ns"]["count"]), sent, "{r}");
        assert_eq!(p["flows"]["unit"], "requests_per_s");
        let delivered = r["delivered_rate"]["mean"].as_f64().unwrap();
        assert_eq!(p["flows"]["aggregate"].as_f64().unwrap(), delivered);
        assert_eq!(r["offered_rate"].as_f64().unwrap(), 60000.0);
    }
}

#[test]
fn rate_flows_over_tcp_account_every_request_on_every_flow() {
    rate_flows_account_every_request("flows-rate-tcp", "tcp", "constant");
}

#[test]
fn rate_flows_over_unix_stream_with_poisson_arrivals_account_every_request() {
    rate_flows_account_every_request("flows-rate-unix", "unix-stream", "poisson");
}

#[test]
fn what_flows_do_not_support_is_a_usage_error_naming_what_works() {
    let cases: [&[&str]; 5] = [
        &["-p", "crr", "-P", "2"],
        &["-t", "udp", "-P", "2"],
        &["--api", "zerocopy", "-P", "2"],
        // Timelines are per single flow.
        &["-p", "stream", "--interval", "100ms", "-P", "2"],
        &[
            "-p",
            "rate",
            "--rate",
            "1k",
            "--interval",
            "100ms",
            "-P",
            "2",
        ],
    ];
    for args in cases {
        let mut all = vec!["run", "--no-save", "-q", "--sizes", "1k"];
        all.extend_from_slice(args);
        let o = run(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--flows") && err.contains("works with"),
            "{err}"
        );
    }
    let o = run(&[
        "run",
        "--no-save",
        "-q",
        "--sizes",
        "1k",
        "-p",
        "stream",
        "-P",
        "5000",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--flows 5000 is out of range: give 1 to 4096"),
        "{err}"
    );
}

#[test]
fn a_server_before_flows_refuses_them_by_name() {
    // Protocol 2: the netsweep before flows.
    let addr = server_of_protocol(2);
    let mut all = vec!["run", addr.as_str(), "--sizes", "1k", "--no-save", "-q"];
    all.extend_from_slice(&["-p", "stream", "-P", "4"]);
    all.extend_from_slice(QUICK);
    let o = run(&all);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("protocol 2") && err.contains("--flows") && err.contains("upgrade"),
        "{err}"
    );
}

#[test]
fn reports_show_the_flows_figures_in_text_and_csv() {
    let dir = scratch("flows-report");
    let file = dir.join("r.json");
    let (o, v) = run_json(&file, &["-p", "stream", "-P", "3", "--sizes", "1k,8k"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = file.to_str().unwrap();
    let csv = run(&["report", "-f", "csv", f]);
    let text = String::from_utf8(csv.stdout).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    // One row per point × flow: each point's three rows in flow order.
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 3 * points(&v).len(), "{text}");
    for (i, row) in rows.iter().enumerate() {
        let p = &points(&v)[i / 3];
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{row}");
        assert_eq!(cells[col("flow")], (i % 3).to_string());
        assert_eq!(
            cells[col("flow_server_bytes_received")],
            p["flows"]["per_flow"][i % 3]["server"]["bytes_received"].to_string()
        );
        assert_eq!(cells[col("flows")], "3");
        assert_eq!(cells[col("flows_unit")], "mbps");
        let fair: f64 = cells[col("fairness")].parse().unwrap();
        let want = p["flows"]["fairness"].as_f64().unwrap();
        assert!((fair - want).abs() < 1e-4, "{fair} vs {want}");
        assert_eq!(
            cells[col("client_start_skew_ns")],
            p["flows"]["client_start_skew_ns"].to_string()
        );
    }
    let table = String::from_utf8(run(&["report", f]).stdout).unwrap();
    // A stream's default: a data thread per flow on each side, said in the header.
    assert!(
        table.contains("flows: 3 at once (--threads one per flow)"),
        "{table}"
    );
    for p in points(&v) {
        flows_of(p, 3, 3);
    }
    assert_eq!(table.matches(" · fair ").count(), 2, "{table}");
    // The fairness plot is drawn for flows runs only.
    let svg = dir.join("svg");
    let o = run(&["report", f, "--svg", svg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plot = std::fs::read_to_string(svg.join("fairness.svg")).expect("fairness.svg");
    assert!(plot.contains("Fairness of the flows"), "{plot}");
    let one = dir.join("one.json");
    let (o, _) = run_json(&one, &["-p", "stream", "--sizes", "1k"]);
    assert!(o.status.success());
    let svg1 = dir.join("svg1");
    run(&[
        "report",
        one.to_str().unwrap(),
        "--svg",
        svg1.to_str().unwrap(),
    ]);
    assert!(svg1.join("throughput.svg").exists() && !svg1.join("fairness.svg").exists());
}

#[test]
fn compare_says_when_the_flows_differ() {
    let dir = scratch("flows-compare");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    let (o, _) = run_json(&a, &["-p", "stream", "--sizes", "8k"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (o, _) = run_json(&b, &["-p", "stream", "-P", "2", "--sizes", "8k"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("configuration differs: flows 1 (A) vs 2 (B)"),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A server that stops reading (SIGSTOP) while 4 flows send 256 KiB requests at 2000/s: the
/// sockets fill, every flow's request is cut short, and after `--timeout` without progress
/// the run ends with an error naming it (exit 1) and a results file — not a wait for the
/// whole trial's collection bound.
#[test]
fn rate_flows_whose_server_stops_reading_end_with_an_error() {
    let server = common::serve::Server::start(&[]);
    let pid = server.child.id().to_string();
    let out = scratch("flows-rate-stopped").join("r.json");
    let (addr, path) = (server.addr.clone(), out.to_str().unwrap().to_string());
    let client = std::thread::spawn(move || {
        run(&[
            "run",
            &addr,
            "--no-save",
            "-q",
            "-o",
            &path,
            "-p",
            "rate",
            "--rate",
            "2k",
            "-P",
            "4",
            "--sizes",
            "256k",
            "--trial-time",
            "3s",
            "--timeout",
            "1s",
            "--no-warmup",
        ])
    });
    server.wait_log("session 1 from");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    let o = client.join().unwrap();
    signal("-CONT");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("socket stayed full"), "{err}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_ne!(v["status"], "complete", "{v}");
}

/// A trial longer than `--timeout` is no dead peer: the server waits for the client's end
/// of a time-bounded trial its duration more than the timeout, and of a count-bounded one
/// (single-flow pingpong, crr) for as long as its data thread still moves data (it gave up
/// after the timeout alone, so `--trial-time 1s --timeout 300ms` failed every run).
#[test]
fn a_trial_longer_than_the_timeout_completes() {
    for pattern in [
        &["-P", "2", "-p", "stream"][..],
        &["-P", "2", "-p", "rate", "--rate", "1k"][..],
        &["-p", "pingpong"][..],
        &["-p", "crr"][..],
    ] {
        let (mut server, addr) = serve_once(bin());
        let out = scratch("flows-long-trial").join("r.json");
        let mut args = vec![
            "run",
            addr.as_str(),
            "--no-save",
            "-q",
            "-o",
            out.to_str().unwrap(),
            "--sizes",
            "1k",
            "--no-warmup",
            "--trial-time",
            "1s",
            "--timeout",
            "300ms",
            "--max-point-time",
            "2s",
        ];
        args.extend_from_slice(pattern);
        let o = run(&args);
        assert!(
            server.wait().unwrap().success(),
            "{pattern:?}: serve failed"
        );
        assert!(
            o.status.success(),
            "{pattern:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(v["status"], "complete", "{pattern:?}: {}", v["message"]);
        assert_eq!(points(&v).len(), 1);
    }
}
