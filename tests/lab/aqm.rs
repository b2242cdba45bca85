//! Issue 43 item 4: the path emulator's AQM in a lab. A 20 Mbit/s link with a 500 KiB
//! bottleneck queue, loaded by a cubic TCP stream (`--background`), carries a pingpong's
//! round trips: behind drop-tail they wait for the standing queue (Q/R = 205 ms at most);
//! under CoDel the queue is held near its 5 ms target by drops the emulator counts
//! (`dropped_aqm`); under FQ-CoDel the pingpong's flow is a sparse one, served before the bulk
//! flow's queue, and its round trip stays near the idle one. Needs root: ignored without it,
//! run by ./run-tests as root.

use super::emulator::{direction, lab, run_in, server_addr};
use netsweep_lab::emulation::Window;
use netsweep_testkit::lab::lab_test;

/// Q/R: 500 KiB at 20 Mbit/s, ms.
const QUEUE_MS: f64 = 512_000.0 * 8.0 / 20e6 * 1e3;

/// The loaded round trip's p50 (ms) and the emulator's AQM drops client → server.
fn loaded_rtt(aqm: &str) -> (f64, u64) {
    let emulate = match aqm {
        "" => "queue = \"500KiB\"".to_string(),
        a => format!("queue = \"500KiB\"\naqm = \"{a}\""),
    };
    let tag = format!("aqm-{}", if aqm.is_empty() { "droptail" } else { aqm });
    let lab = lab(&tag, "rate = \"20mbit\"", &emulate);
    let target = format!("{}:7200", server_addr(&lab, 0));
    let w = Window::open(lab.layout());
    let v = run_in(
        &lab,
        &tag,
        &[
            &target,
            "-p",
            "pingpong",
            "--sizes",
            "64",
            "--trial-time",
            "1s",
            "--max-point-time",
            "3s",
            "--min-trials",
            "2",
            "--background",
            // A loss-based sender fills a drop-tail queue (BBR, this kernel's default,
            // would not).
            "stream,size=64k,cc=cubic",
        ],
    );
    let (window, _) = w.close();
    let (emu, _) = direction(&window, 0);
    let rtt = &v["points"][0]["latency"]["rtt_ns"];
    assert!(rtt["count"].as_u64().unwrap() >= 10, "{rtt}");
    (rtt["p50"].as_f64().unwrap() / 1e6, emu.dropped_aqm)
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn codel_and_fq_codel_cure_the_round_trip_a_drop_tail_queue_bloats() {
    let _l = lab_test("aqm");
    let (tail, tail_drops) = loaded_rtt("");
    let (codel, codel_drops) = loaded_rtt("codel");
    let (fq, fq_drops) = loaded_rtt("fq_codel");
    eprintln!(
        "loaded RTT p50: drop-tail {tail:.1} ms (Q/R {QUEUE_MS:.0} ms), CoDel {codel:.1} ms \
         ({codel_drops} AQM drops), FQ-CoDel {fq:.1} ms ({fq_drops} AQM drops)"
    );
    assert_eq!(tail_drops, 0);
    // The standing queue: most of Q/R (cubic backs off to 70% of its window after a loss).
    assert!(
        tail > 0.4 * QUEUE_MS && tail < 1.2 * QUEUE_MS,
        "drop-tail {tail:.1} ms vs Q/R {QUEUE_MS:.0} ms"
    );
    assert!(codel_drops > 0, "CoDel never dropped");
    assert!(
        codel < tail / 3.0,
        "CoDel {codel:.1} ms vs drop-tail {tail:.1} ms"
    );
    assert!(
        fq < tail / 10.0 && fq < 15.0,
        "FQ-CoDel {fq:.1} ms vs drop-tail {tail:.1} ms"
    );
}
