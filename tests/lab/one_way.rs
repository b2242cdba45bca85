//! Issue 39 item 6: `--one-way` across an emulated path with 10 ms of delay one way and 1 ms
//! the other (the emulator's `delay_back`): each direction's delay within 5% + 100 µs of the
//! emulator's plus the plain path's own one-way time, while the round trips' clock-offset
//! estimate is 4.5 ms and bounds the true offset (0: both ends share one clock). Needs root:
//! ignored without it, run by ./run-tests as root.

use crate::emulator::{lab, run_in, server_addr, Quiet};
use netsweep_testkit::lab::lab_test;
use serde_json::Value;

/// The one-way figures of a `--one-way` pingpong of 64 B datagrams across link `i`.
fn one_way(lab: &netsweep_lab::Lab, i: usize) -> (Value, Value) {
    let v = run_in(
        lab,
        &format!("emu-oneway-{i}"),
        &[
            &server_addr(lab, i),
            "-t",
            "udp",
            "-p",
            "pingpong",
            "--one-way",
            "--sizes",
            "64",
            "--trial-time",
            "400ms",
            "--max-point-time",
            "3s",
        ],
    );
    let o = v["points"][0]["directions"]["one_way"].clone();
    assert!(o.is_object(), "no one-way figures: {v}");
    (o, v["warnings"].clone())
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn one_way_delays_across_an_asymmetric_emulated_path_match_the_emulator() {
    let _l = lab_test("one_way_delays_across_an_asymmetric_emulated_path");
    let lab = lab("emu-oneway", "", "delay = \"10ms\"\ndelay_back = \"1ms\"");
    let quiet = Quiet::start();
    let (plain, _) = one_way(&lab, 1);
    let (o, warnings) = one_way(&lab, 0);
    let quiet = quiet.finish();
    let f = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_f64).unwrap();
    for (dir, delay) in [("to_server_ns", 10e6), ("to_client_ns", 1e6)] {
        // The emulator's delay on top of the path's own one-way time (its two relays).
        let base = f(&plain, &format!("/{dir}/min"));
        let (min, mean) = (
            f(&o, &format!("/{dir}/min")),
            f(&o, &format!("/{dir}/mean")),
        );
        let want = delay + base;
        eprintln!(
            "{dir}: min {:.3} ms, mean {:.3} ms; the emulator's {:.3} ms + the plain path's \
             {:.3} ms",
            min / 1e6,
            mean / 1e6,
            delay / 1e6,
            base / 1e6
        );
        // The least delay is a floor a busy host only adds to: within 5% + 100 µs always.
        assert!(
            (min - want).abs() <= 0.05 * delay + 100e3,
            "{dir}: min {min} vs {want}"
        );
        // The mean: within 5% + 300 µs on a quiet machine. A full ./run-tests read the 1 ms
        // direction's mean 184 µs high (1.211 vs 1.027 ms, its minimum on the mark) on a
        // machine the quiet probe called quiet, in one run of three; 100 µs was tighter
        // than the path holds its mean.
        match &quiet {
            None => assert!(
                (mean - want).abs() <= 0.05 * delay + 300e3,
                "{dir}: mean {mean} vs {want} on a quiet machine"
            ),
            Some(why) => eprintln!("SKIPPED the mean's bound ({dir}): {why}"),
        }
    }
    // Round trips alone: the offset estimate is half the asymmetry, and the true offset (0,
    // one clock) lies within its bound.
    let (est, bound) = (f(&o, "/clock_offset_ns"), f(&o, "/clock_offset_bound_ns"));
    assert!((est - 4.5e6).abs() < 0.05 * 4.5e6 + 100e3, "offset {est}");
    assert!(est.abs() <= bound && bound > 5e6, "{est} ± {bound}");
    // Both ends on one kernel: nothing to warn about the clocks.
    let w = format!("{warnings}");
    assert!(!w.contains("clock"), "{w}");
}
