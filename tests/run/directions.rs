//! Issue 11, directions: `--reverse` and the `bidir` pattern through the real binaries (a
//! `netsweep serve` process and a `netsweep run` process over loopback), asserting that what
//! one end sent is exactly what the other received, per direction; `--reverse` where it
//! means nothing is a usage error; archived results (without the new fields) still load.

use crate::common::*;
use serde_json::Value;

fn points(v: &Value) -> &Vec<Value> {
    v["points"].as_array().expect("points array")
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
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

/// Runs `args` reversed against a separate `netsweep serve --once` process.
fn reversed(tag: &str, args: &[&str]) -> Value {
    let mut all = vec!["-R"];
    all.extend_from_slice(args);
    let v = served(tag, &all);
    assert_eq!(v["spec"]["reverse"], true);
    assert_eq!(v["spec"]["pattern"], "stream");
    v
}

#[test]
fn reverse_tcp_stream_the_server_sends_every_byte_the_client_receives() {
    let v = reversed(
        "rev-tcp",
        &["-t", "tcp", "-p", "stream", "--sizes", "1,1k,64k,1M"],
    );
    assert_eq!(points(&v).len(), 4);
    for p in points(&v) {
        let (c, s) = (&p["client"], &p["server"]);
        // The server sent, the client received: exactly the same bytes, and none the other way.
        assert!(u(&s["bytes_sent"]) > 0, "{p}");
        assert_eq!(s["bytes_sent"], c["bytes_received"], "{p}");
        assert_eq!(u(&s["bytes_sent"]), u(&s["messages_sent"]) * u(&p["size"]));
        assert_eq!(
            (u(&c["bytes_sent"]), u(&s["bytes_received"])),
            (0, 0),
            "{p}"
        );
        assert!(u(&s["send_calls"]) > 0 && u(&c["recv_calls"]) > 0);
        assert_eq!(p["repetitions"], s["messages_sent"]);
        // The sender's rate is the server's, the receiver's the client's; the figure is the
        // receiver's.
        let (tx, rx) = (
            p["sender_mbps"]["mean"].as_f64().unwrap(),
            p["receiver_mbps"]["mean"].as_f64().unwrap(),
        );
        assert!(tx > 0.0 && rx > 0.0, "{p}");
        assert_eq!(p["throughput_mbps"]["mean"].as_f64(), Some(rx));
        assert!(p["loss"].is_null());
    }
}

#[test]
fn reverse_udp_stream_every_datagram_the_server_sent_is_received_or_lost() {
    let v = reversed(
        "rev-udp",
        &["-t", "udp", "-p", "stream", "--sizes", "20,1000,1472"],
    );
    assert_eq!(points(&v).len(), 3);
    for p in points(&v) {
        let (c, s, l) = (&p["client"], &p["server"], &p["loss"]);
        let sent = u(&s["messages_sent"]);
        assert!(sent > 0, "{p}");
        assert_eq!(u(&l["sent"]), sent, "loss.sent is the server's count: {p}");
        assert_eq!(u(&l["received"]) + u(&l["lost"]), sent, "{p}");
        assert!(u(&l["received"]) > 0, "{p}");
        assert_eq!(u(&l["foreign"]), 0, "no datagram of another trial: {p}");
        // Distinct datagrams received, plus duplicates, are what the client's socket gave.
        assert_eq!(
            u(&l["received"]) + u(&l["duplicates"]),
            u(&c["messages_received"]),
            "{p}"
        );
        assert_eq!(
            u(&c["bytes_received"]),
            u(&c["messages_received"]) * u(&p["size"])
        );
        assert_eq!((u(&c["messages_sent"]), u(&s["messages_received"])), (0, 0));
    }
    // The run's datagram totals count the server-to-client direction.
    let t = &v["datagram_totals"];
    assert!(
        u(&t["to_client_sent"]) > 0 && u(&t["to_client_received"]) > 0,
        "{t}"
    );
    assert_eq!(u(&t["to_server_sent"]), 0, "{t}");
}

/// Both directions' rates of a bidir point: (sender, receiver) for client to server, then
/// for server to client; all must be above zero.
fn bidir_rates(p: &Value) -> [f64; 4] {
    let f = |v: &Value| v["mean"].as_f64().unwrap_or_else(|| panic!("no rate: {p}"));
    let r = &p["reverse"];
    let rates = [
        f(&p["sender_mbps"]),
        f(&p["receiver_mbps"]),
        f(&r["sender_mbps"]),
        f(&r["receiver_mbps"]),
    ];
    assert!(rates.iter().all(|&x| x > 0.0), "{rates:?}: {p}");
    let sum = rates[1] + rates[3];
    let figure = p["throughput_mbps"]["mean"].as_f64().unwrap();
    assert!(
        (figure - sum).abs() <= 1e-6 * sum,
        "throughput {figure} is the sum {sum}"
    );
    rates
}

#[test]
fn bidir_tcp_each_direction_receives_exactly_what_the_other_end_sent() {
    let v = served(
        "bidir-tcp",
        &["-t", "tcp", "-p", "bidir", "--sizes", "1,1k,64k,1M"],
    );
    assert_eq!(v["spec"]["pattern"], "bidir");
    assert_eq!(points(&v).len(), 4);
    for p in points(&v) {
        let (c, s) = (&p["client"], &p["server"]);
        assert!(u(&c["bytes_sent"]) > 0 && u(&s["bytes_sent"]) > 0, "{p}");
        assert_eq!(
            c["bytes_sent"], s["bytes_received"],
            "client to server: {p}"
        );
        assert_eq!(
            s["bytes_sent"], c["bytes_received"],
            "server to client: {p}"
        );
        assert!(u(&c["send_calls"]) > 0 && u(&c["recv_calls"]) > 0, "{p}");
        assert!(u(&s["send_calls"]) > 0 && u(&s["recv_calls"]) > 0, "{p}");
        assert_eq!(
            u(&p["repetitions"]),
            u(&c["messages_sent"]) + u(&s["messages_sent"])
        );
        bidir_rates(p);
        assert!(p["loss"].is_null() && p["reverse"]["loss"].is_null());
    }
}

#[test]
fn bidir_udp_each_direction_accounts_every_datagram() {
    let v = served(
        "bidir-udp",
        &["-t", "udp", "-p", "bidir", "--sizes", "20,1000,1472"],
    );
    assert_eq!(points(&v).len(), 3);
    for p in points(&v) {
        let (c, s) = (&p["client"], &p["server"]);
        // (sending side, receiving side, that direction's loss)
        for (tx, rx, l) in [(c, s, &p["loss"]), (s, c, &p["reverse"]["loss"])] {
            let sent = u(&tx["messages_sent"]);
            assert!(sent > 0, "{p}");
            assert_eq!(u(&l["sent"]), sent, "{p}");
            assert_eq!(u(&l["received"]) + u(&l["lost"]), sent, "{p}");
            assert!(u(&l["received"]) > 0, "{p}");
            assert_eq!(u(&l["foreign"]), 0, "no datagram of another trial: {p}");
            assert_eq!(
                u(&l["received"]) + u(&l["duplicates"]),
                u(&rx["messages_received"]),
                "{p}"
            );
            assert_eq!(
                u(&rx["bytes_received"]),
                u(&rx["messages_received"]) * u(&p["size"])
            );
        }
        bidir_rates(p);
    }
    let t = &v["datagram_totals"];
    assert!(
        u(&t["to_server_sent"]) > 0 && u(&t["to_client_sent"]) > 0,
        "{t}"
    );
}

#[test]
fn bidir_unix_stream_in_process() {
    let dir = scratch("bidir-unix");
    let (o, v) = run_json(
        &dir.join("r.json"),
        &["-t", "unix", "-p", "bidir", "--sizes", "1k,64k"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for p in points(&v) {
        let (c, s) = (&p["client"], &p["server"]);
        assert_eq!(c["bytes_sent"], s["bytes_received"], "{p}");
        assert_eq!(s["bytes_sent"], c["bytes_received"], "{p}");
        bidir_rates(p);
    }
}

#[test]
fn bidir_refuses_apis_and_transports_that_cannot_send_both_ways() {
    let o = run(&[
        "run",
        "--no-save",
        "-q",
        "-t",
        "udp",
        "--api",
        "mmsg",
        "-p",
        "bidir",
        "--sizes",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pattern bidir uses --api basic"));
    let o = run(&[
        "run",
        "--no-save",
        "-q",
        "-t",
        "shm",
        "-p",
        "bidir",
        "--sizes",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pattern bidir needs"));
}

#[test]
fn reverse_with_pingpong_or_crr_is_a_usage_error() {
    for pattern in ["pingpong", "crr"] {
        let o = run(&[
            "run",
            "--no-save",
            "-q",
            "-R",
            "-p",
            pattern,
            "--sizes",
            "1",
        ]);
        assert_eq!(o.status.code(), Some(2), "-R -p {pattern}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--reverse applies to the stream pattern only") && err.contains(pattern),
            "{err}"
        );
    }
}

#[test]
fn archived_results_without_the_field_load_as_forward() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(!text.contains("\"reverse\""), "{path:?} predates --reverse");
            let run = netsweep_model::results::load(&text)
                .unwrap_or_else(|e| panic!("{path:?} does not load: {e}"));
            assert!(!run.spec.reverse, "{path:?}");
            n += 1;
        }
    }
    assert!(n >= 3, "the archive holds {n} files");
}

/// Issue 39 item 6 over loopback, a real `serve` process at the other end: `--one-way` gives
/// each direction's delay at sizes with room for the stamps (tcp and udp, pingpong and rate),
/// a note where there is none, both delays positive and within the round trip, the offset
/// estimate within its bound, and the clocks' assumption said. Elsewhere a usage error.
#[test]
fn one_way_delays_over_loopback_fit_in_the_round_trip() {
    let pingpong: &[&str] = &["--sizes", "16,64,4k"];
    // Rate's stamps follow its 20-byte header: 43 B has no room for them.
    let rate: &[&str] = &["-p", "rate", "--rate", "1k", "--sizes", "43,64,4k"];
    for (t, pattern) in [
        ("tcp", pingpong),
        ("udp", pingpong),
        ("tcp", rate),
        ("udp", rate),
    ] {
        let mut args = vec!["-t", t, "--one-way"];
        args.extend_from_slice(pattern);
        let v = served(&format!("one-way-{t}-{}", pattern.len()), &args);
        let p = points(&v);
        assert!(p[0]["directions"]["one_way"].is_null(), "{}", p[0]);
        assert!(
            p[0]["notes"]
                .as_array()
                .is_some_and(|n| n.iter().any(|n| n.as_str().unwrap().contains("at least"))),
            "{}",
            p[0]
        );
        for q in &p[1..] {
            let o = &q["directions"]["one_way"];
            let f = |k: &str| {
                o.pointer(k)
                    .and_then(Value::as_f64)
                    .unwrap_or_else(|| panic!("{q}"))
            };
            let rtt_max = q["latency"]["rtt_ns"]["max"].as_f64().unwrap();
            let (up, down) = (f("/to_server_ns/min"), f("/to_client_ns/min"));
            assert!(up > 0.0 && down > 0.0 && up + down <= rtt_max, "{t}: {o}");
            assert!(
                f("/clock_offset_ns").abs() <= f("/clock_offset_bound_ns"),
                "{o}"
            );
            // Pingpong times every round trip; rate its replies on time (a datagram
            // lost or later than the grace period is not timed).
            let (timed, reps) = (u(&o["messages"]), u(&q["repetitions"]));
            if pattern == rate {
                assert!(timed > 0 && timed <= reps, "{o}");
            } else {
                assert!(timed >= reps, "{o}");
            }
        }
        // This server withholds its host's facts (no --allow host-facts), its boot id among
        // them: the run cannot know the two ends share a clock, and says what the delays
        // assume. (In one process, or with the facts shared, it says nothing: tests/lab.)
        let w = format!("{}", v["warnings"]);
        assert!(
            w.contains("one-way delays assume the two ends' clocks agree"),
            "{w}"
        );
    }
    for refused in [
        &["-p", "stream"][..],
        &["-p", "rate", "--rate", "1k", "--flows", "2"],
    ] {
        let mut args = vec!["run", "--no-save", "-q", "--one-way"];
        args.extend_from_slice(refused);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{refused:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--one-way times the round trips of pingpong or rate on one flow"),
            "{err}"
        );
    }
}
