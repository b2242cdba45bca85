//! Issue 13 in namespaces: an open-loop rate sweep across a tbf-shaped veth. Below the shaped
//! rate the delivered rate equals the offered one within 1% and latency stays near the
//! unloaded round trip (at 80% of the rate: close to it, a sender's hiccup lets a burst
//! queue behind tbf's small bucket); above it latency grows with the queue and loss appears;
//! the knee is found within ±10% of the shaped rate's goodput arithmetic.
//! Needs root: ignored without it, run by ./run-tests as root.

use crate::common::*;
use netsweep_lab::{Lab, Topology};
use netsweep_testkit::lab::{lab_test, run_id};
use serde_json::Value;

/// Requests of 1208 bytes: + 8 (UDP) + 20 (IPv4) + 14 (Ethernet, which a veth's qdisc
/// counts) = 1250 bytes = 10,000 bits on the link, so 10 Mbit/s carries 1000 requests/s
/// (and as many echoes the other way).
const SIZE: &str = "1208";
const CAPACITY: f64 = 1000.0;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn a_rate_sweep_across_a_shaped_link_finds_the_knee_at_the_shaped_rate() {
    let _l = lab_test("a_rate_sweep_across_a_shaped_link");
    let lab = Lab::up(&Topology::parse(SHAPED_10MBIT).unwrap(), &run_id("rate")).unwrap();
    let addr = lab.address_for("client", "server").unwrap();
    let mut server = serve_in(&lab, "server", "0.0.0.0", 7200);
    // Both ends at real-time priority (the session threads inherit the server's): the claim
    // is the path's, and a busy shared machine's scheduling hiccups would otherwise send
    // bursts that queue behind tbf's small bucket (the sender's lateness shows them).
    let rt = std::process::Command::new("chrt")
        .args(["-f", "-p", "10", &server.id().to_string()])
        .status()
        .expect("chrt runs (util-linux)");
    assert!(rt.success(), "chrt -f -p 10 on the server");
    let out = scratch("rate-lab").join("r.json");
    let o = lab
        .command(
            "client",
            &[
                "chrt",
                "-f",
                "10",
                bin(),
                "run",
                &format!("{addr}:7200"),
                "--no-save",
                "-q",
                "-o",
                out.to_str().unwrap(),
                "-t",
                "udp",
                "-p",
                "rate",
                "--sizes",
                SIZE,
                "--rates",
                "500,800,950,1050,1200,1500",
                "--trial-time",
                "300ms",
                "--max-point-time",
                "1500ms",
                "--min-trials",
                "2",
                "--max-trials",
                "3",
                "--timeout",
                "5s",
            ],
        )
        .unwrap()
        .output()
        .unwrap();
    let _ = (server.kill(), server.wait());
    lab.down().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["status"], "complete", "{}", v["message"]);
    let pts = v["points"].as_array().unwrap();
    assert_eq!(pts.len(), 6);
    let p50 = |p: &Value| f(&p["latency"]["rtt_ns"]["p50"]);
    let base = p50(&pts[0]);
    for p in pts {
        let r = &p["rate"];
        let (offered, delivered) = (f(&r["offered_rate"]), f(&r["delivered_rate"]["mean"]));
        if offered < CAPACITY {
            // Every request is answered within its trial, and the path carried them as fast as
            // they were offered, less a backlog the sender itself made: a sender late by L
            // sends L × rate requests at once, which queue behind tbf and drain after the
            // schedule's last checkpoint at the spare rate (at 950/s a 7 ms hiccup cost 23/s
            // of a 300 ms trial's delivered rate, 2.4%, on an otherwise idle machine).
            let late_s = f(&r["lateness_ns"]["max"]) / 1e9;
            let shortfall = (offered - delivered) * 0.3;
            assert!(
                (delivered / offered - 1.0).abs() < 0.01 || shortfall <= late_s * offered + 1.0,
                "below the shaped rate: delivered {delivered} of {offered}/s, a shortfall of \
                 {shortfall:.1} requests a trial where the sender's worst lateness ({:.1} ms) \
                 explains {:.1}",
                late_s * 1e3,
                late_s * offered
            );
            assert_eq!(r["lost"], 0, "{r}");
            if offered <= 0.8 * CAPACITY {
                // Near the unloaded round trip: the median waits behind less than one request,
                // and behind those a late sender sends at once (a full ./run-tests on a noisy
                // host read p50 2.48 ms against 0.68 at 800/s: 1.4 requests queued).
                let queued = (p50(p) - base) / 1e9 * offered;
                assert!(
                    queued < 1.0 + late_s * offered,
                    "{offered}/s: p50 {} vs {base}, the sender at worst {:.1} ms late",
                    p50(p),
                    late_s * 1e3
                );
            }
        } else if offered >= 1.2 * CAPACITY {
            // The queue fills: latency grows well past the unloaded round trip, the link's
            // rate caps delivery, and the tbf limit drops the excess.
            assert!(p50(p) > 5.0 * base, "{offered}/s: p50 {} vs {base}", p50(p));
            assert!(
                delivered < 1.03 * CAPACITY,
                "{offered}/s: delivered {delivered}"
            );
        }
    }
    let last = &pts[5]["rate"];
    assert!(
        last["lost"].as_u64().unwrap() > 0,
        "1500/s over 1000/s: {last}"
    );
    let k = &v["knee"];
    let at = f(&k["offered_rate"]);
    assert!(
        (at / CAPACITY - 1.0).abs() <= 0.10,
        "knee at {at}/s, the shaped rate carries {CAPACITY}/s: {k}"
    );
    // The bracket: the highest load below the knee that was still fine.
    assert!(
        f(&k["below_rate"]) < at && f(&k["below_rate"]) >= 800.0,
        "{k}"
    );
}
