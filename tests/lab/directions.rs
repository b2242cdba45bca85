//! Issue 39 item 5 (DESIGN's directions rule): each direction of a round trip as its receiver
//! timed it, on a path the run knows nothing about. Across a veth shaped by tbf one way only,
//! `netsweep run` — given no lab description — reports the slow direction's delivery rate
//! (within 5% of tbf's arithmetic when the machine is idle) and warns that size ÷ (RTT/2) is
//! neither direction's rate. Needs root: ignored without it, run by ./run-tests as root.

use crate::common::*;
use netsweep_lab::Lab;
use netsweep_testkit::lab::idle::CpuWindow;
use netsweep_testkit::lab::{client_server, lab_test, run_id};

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn pingpong_across_a_one_way_shaped_path_reports_each_direction_and_warns() {
    let _l = lab_test("pingpong_directions");
    let lab = Lab::up(
        &client_server(
            r#"
mtu = 1500
rate = "47mbit"
direction = "a-to-b"
"#,
        ),
        &run_id("dirs"),
    )
    .unwrap();
    let addr = lab.address_for("client", "server").unwrap();
    let mut s = serve_in(&lab, "server", "0.0.0.0", 7300);
    let out = scratch("directions").join("pp.json");
    let cpu = CpuWindow::start();
    let o = run_in(
        &lab,
        &format!("{addr}:7300"),
        &out,
        &[
            "--sizes",
            "256k,1M",
            "--trial-time",
            "400ms",
            "--max-point-time",
            "4s",
        ],
    )
    .output()
    .unwrap();
    let busy = cpu.finish();
    let _ = (s.kill(), s.wait());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(
        v.get("lab").is_none(),
        "the run was told nothing of the path"
    );
    // tbf counts whole frames: TCP/IPv4 with timestamps carries 1448 B of every 1514.
    let expected = 47.0 * 1448.0 / 1514.0;
    for p in v["points"].as_array().unwrap() {
        let d = &p["directions"];
        let up = d["to_server"]["mbps"]
            .as_f64()
            .unwrap_or_else(|| panic!("{p}"));
        // The fast direction often lands in one receive and cannot be timed.
        let down = d["to_client"]["mbps"].as_f64().unwrap_or(f64::INFINITY);
        let rtt_rate = p["throughput_mbps"]["mean"].as_f64().unwrap();
        let size = p["size"].as_u64().unwrap();
        eprintln!(
            "{size} B: size/(RTT/2) {rtt_rate:.2}, client→server {up:.2}, server→client \
             {down:.2} Mbit/s"
        );
        // Always: the shaped direction is the slow one, near the shaper, and RTT/2 hides it
        // (about twice the slow rate, the harmonic mean of a fast and a slow direction).
        assert!(down > 3.0 * up, "{size} B: {up} vs {down}");
        assert!(
            up > 0.7 * expected && up < 1.05 * expected,
            "{size} B: {up}"
        );
        assert!(rtt_rate > 1.5 * up, "{size} B: {rtt_rate} vs {up}");
        check_arithmetic_when_idle(
            &format!("{size} B client→server"),
            up,
            expected,
            0.05,
            &busy,
        );
    }
    let w = v["warnings"].as_array().expect("a warning");
    assert!(
        w.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.contains("the two directions differ") && w.contains("at 2 of 2 sizes")
        }),
        "{w:?}"
    );
}
