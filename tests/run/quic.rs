//! `-t quic` through the real binary: pingpong and stream on loopback with what the
//! connection agreed recorded on both sides, and against a separate `netsweep serve`
//! process: its self-signed certificate, printed at start, pinned with `--tls-pin` (the
//! right pin runs, one digit off is refused by name, exit 1).

use crate::common::*;
use netsweep_testkit::exe::serve::Server;
use serde_json::Value;

fn quic_of<'a>(v: &'a Value, side: &str) -> &'a Value {
    &v["granted"][side]["quic"]
}

#[test]
fn quic_pingpong_and_stream_record_what_the_connection_agreed() {
    let dir = scratch("quic-loopback");
    for (pattern, sizes) in [("pingpong", "1,60k,1m"), ("stream", "1k,1m")] {
        let (o, v) = run_json(
            &dir.join(format!("{pattern}.json")),
            &["-t", "quic", "-p", pattern, "--sizes", sizes],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(v["status"], "complete", "{}", v["message"]);
        assert_eq!(v["spec"]["transport"], "quic");
        let (c, s) = (quic_of(&v, "client"), quic_of(&v, "server"));
        for q in [c, s] {
            assert_eq!(q["version"], "QUIC v1 (RFC 9000)", "{q}");
            assert_eq!(q["alpn"], "netsweep", "{q}");
            assert_eq!(q["congestion_control"], "cubic", "{q}");
            let payload = q["udp_payload"].as_u64().unwrap();
            assert!((1200..=1452).contains(&payload), "{q}");
            assert!(q["certificate"].as_str().unwrap().len() == 95, "{q}");
        }
        assert_eq!(
            c["certificate"], s["certificate"],
            "the client saw the certificate the server presented"
        );
        let points = v["points"].as_array().unwrap();
        assert_eq!(points.len(), sizes.split(',').count());
        for p in points {
            if pattern == "stream" {
                let sent = p["client"]["bytes_sent"].as_u64().unwrap();
                assert!(sent > 0 && sent == p["server"]["bytes_received"].as_u64().unwrap());
            } else {
                assert!(p["latency"]["half_rtt_ns"]["p50"].as_f64().unwrap() > 0.0);
            }
        }
    }
}

#[test]
fn quic_against_a_separate_server_holds_its_certificate_to_the_pin() {
    let dir = scratch("quic-serve");
    let srv = Server::start(&[]);
    let first = srv.log_first_line();
    let fp = first
        .split("tls certificate sha256 ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("the startup line names the certificate: {first}"))
        .to_string();
    assert_eq!(fp.len(), 95, "{first}");
    let out = dir.join("pinned.json");
    let mut args = vec![
        "run",
        &srv.addr,
        "--no-save",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["-t", "quic", "--sizes", "1,100k", "--tls-pin", &fp]);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(quic_of(&v, "client")["certificate"], fp.as_str());
    assert_eq!(quic_of(&v, "server")["certificate"], fp.as_str());
    assert_eq!(v["points"].as_array().unwrap().len(), 2);

    let last = if fp.ends_with('0') { "1" } else { "0" };
    let wrong = format!("{}{last}", &fp[..94]);
    let o = run(&[
        "run",
        &srv.addr,
        "--no-save",
        "-q",
        "--sizes",
        "1",
        "-t",
        "quic",
        "--tls-pin",
        &wrong,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("announced TLS certificate {fp}")),
        "{err}"
    );
}

/// The patterns tls and quic do not have yet are refused by name, with why and what to use.
#[test]
fn patterns_not_built_for_tls_or_quic_are_refused_by_name() {
    for t in ["tls", "quic"] {
        for (p, why) in [
            ("crr", "handshake per transaction"),
            ("bidir", "two threads"),
            ("rate", "two threads"),
        ] {
            let o = run(&["run", "--no-save", "-q", "--sizes", "1", "-t", t, "-p", p]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "-t {t} -p {p}: {err}");
            assert!(
                err.contains(&format!("--pattern {p} is not built for {t} yet"))
                    && err.contains(why),
                "-t {t} -p {p}: {err}"
            );
        }
    }
}

/// `--api datagram`: QUIC DATAGRAM frames (RFC 9221), counted as datagrams (sequence
/// numbers, loss); a message larger than one frame holds, or the api on another
/// transport, is refused by name (exit 2).
#[test]
fn quic_datagrams_run_as_datagrams_and_refuse_what_does_not_fit() {
    let dir = scratch("quic-datagram");
    for (pattern, sizes) in [("pingpong", "1,1162"), ("stream", "64,1162")] {
        let (o, v) = run_json(
            &dir.join(format!("{pattern}.json")),
            &[
                "-t", "quic", "--api", "datagram", "-p", pattern, "--sizes", sizes,
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(v["status"], "complete", "{}", v["message"]);
        let q = quic_of(&v, "server");
        assert!(
            q["streams"]
                .as_str()
                .unwrap()
                .starts_with("DATAGRAM frames"),
            "{q}"
        );
        let t = &v["datagram_totals"];
        let sent = t["to_server_sent"].as_u64().unwrap();
        let received = t["to_server_received"].as_u64().unwrap();
        assert!(sent > 0 && received <= sent, "{t}");
        // Every point's messages are accounted: received or lost, by sequence number.
        for p in v["points"].as_array().unwrap() {
            let l = &p["loss"];
            let n = |k: &str| l[k].as_u64().unwrap();
            assert_eq!(n("sent"), n("received") + n("lost"), "{pattern}: {l}");
            assert!(n("received") > 0, "{pattern}: {l}");
        }
        if pattern == "pingpong" {
            // One message in flight: nothing fills a buffer, every one is answered.
            assert_eq!(received, sent, "{t}");
        } else {
            // DATAGRAM frames are congestion-controlled: a loopback stream loses little.
            assert!(received * 2 >= sent, "{t}");
        }
    }
    for (t, api, size, needle) in [
        (
            "quic",
            "datagram",
            "1163",
            "larger than one quic datagram can carry (1162 bytes)",
        ),
        (
            "udp",
            "datagram",
            "100",
            "it is QUIC's DATAGRAM frames (RFC 9221): use -t quic",
        ),
    ] {
        let o = run(&[
            "run",
            "--no-save",
            "-q",
            "-t",
            t,
            "--api",
            api,
            "--sizes",
            size,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "-t {t} --api {api}: {err}");
        assert!(err.contains(needle), "-t {t} --api {api}: {err}");
    }
}

/// `--cc` with -t quic picks quinn-proto's congestion controller on both ends, recorded as
/// granted; a controller quinn-proto does not have is refused by name (exit 2).
#[test]
fn quic_congestion_control_is_quinns_and_recorded() {
    let dir = scratch("quic-cc");
    let (o, v) = run_json(
        &dir.join("newreno.json"),
        &[
            "-t", "quic", "-p", "stream", "--sizes", "64k", "--cc", "newreno",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for side in ["client", "server"] {
        assert_eq!(
            v["granted"][side]["congestion_control"], "newreno",
            "{side}"
        );
        assert_eq!(quic_of(&v, side)["congestion_control"], "newreno", "{side}");
    }
    let o = run(&[
        "run",
        "--no-save",
        "-q",
        "-t",
        "quic",
        "--cc",
        "vegas",
        "--sizes",
        "1",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("quic has no congestion controller \"vegas\""),
        "{err}"
    );
}
