//! Issue 43: `netsweep rpm` across the path emulator's 100 Mbit/s bottleneck with 5 ms each
//! way and a 256 KiB drop-tail queue, against the arithmetic: the load fills the queue, so a
//! foreign probe's TCP handshake takes the path's 10 ms plus the queue's Q/R = 262144 B × 8 /
//! 100 Mbit/s = 21.0 ms, and the goodput is the link's rate less its framing. Needs root:
//! ignored without it, run by ./run-tests as root.

use crate::common::*;
use crate::emulator::{lab, server_addr, Quiet};
use netsweep_testkit::lab::lab_test;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn rpm_across_a_bottleneck_queue_adds_its_q_over_r_to_the_foreign_round_trip() {
    let _l = lab_test("rpm_across_a_bottleneck_queue");
    let lab = lab(
        "emu-rpm",
        "rate = \"100mbit\"",
        "delay = \"5ms\"\nqueue = \"256KiB\"",
    );
    let addr = server_addr(&lab, 0);
    let mut serve = lab
        .command(
            "server",
            &[
                bin(),
                "serve",
                "--bind",
                &addr,
                "--port",
                "7301",
                "--rpm",
                "4043",
            ],
        )
        .unwrap()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let at = line
        .find("sha256 ")
        .expect("the startup line's fingerprint")
        + 7;
    let fp = line[at..].split(' ').next().unwrap().to_string();
    let out = scratch("emu-rpm").join("rpm.json");
    let quiet = Quiet::start();
    let o = lab
        .command(
            "client",
            &[
                bin(),
                "rpm",
                &format!("{addr}:4043"),
                "--tls-pin",
                &fp,
                "--download-only",
                "--max-time",
                "10s",
                "--quiet",
                "-o",
                out.to_str().unwrap(),
            ],
        )
        .unwrap()
        .output()
        .unwrap();
    let quiet = quiet.finish();
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let d = &r["directions"][0];
    let f = |p: &str| {
        d.pointer(p)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("{p}: {d}"))
    };
    let (tcp, goodput) = (f("/responsiveness/tcp_ms"), f("/goodput_bps"));
    let idle = r["idle"]["tcp_ms"].as_f64().unwrap();
    let want = 10.0 + 262_144.0 * 8.0 / 100e6 * 1e3;
    eprintln!(
        "foreign TCP handshake {tcp:.2} ms loaded, {idle:.2} ms idle; the arithmetic {want:.2} \
         ms; goodput {:.1} Mbit/s; RPM {:.0} ({})",
        goodput / 1e6,
        f("/responsiveness/rpm"),
        d["outcome"]
    );
    // The idle path: the delay alone; loaded, at least half the queue's Q/R on top (the load
    // keeps the queue nearer full than empty), and no more than 30 % over the arithmetic on
    // a quiet machine (a busy one only adds).
    assert!(
        (9.5..=12.0).contains(&idle) || quiet.is_some(),
        "idle {idle}"
    );
    assert!(
        tcp > 10.0 + 0.5 * (want - 10.0),
        "loaded {tcp} ms: the queue was not filling"
    );
    match &quiet {
        None => assert!(tcp < want * 1.3, "loaded {tcp} ms against {want:.2}"),
        Some(why) => eprintln!("SKIPPED the upper bound: {why}"),
    }
    // 100 Mbit/s of Ethernet frames carry at most 100 × 1448/1514 Mbit/s of TLS records.
    assert!(
        (80e6..=96e6).contains(&goodput),
        "goodput {goodput} against 95.6 Mbit/s at most"
    );
}
