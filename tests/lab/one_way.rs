//! Issue 39 item 6: `--one-way` across an emulated path with 10 ms of delay one way and 1 ms
//! the other (the emulator's `delay_back`): each direction's delay within 5% + 100 µs of the
//! emulator's plus the plain path's own one-way time, while the round trips' clock-offset
//! estimate is 4.5 ms and bounds the true offset (0: both ends share one clock) — for
//! pingpong and for rate (requests on a schedule, irtt's case). Needs root: ignored without
//! it, run by ./run-tests as root.

use crate::emulator::{lab, run_in, server_addr, Quiet};
use netsweep_testkit::lab::lab_test;
use serde_json::Value;

/// The one-way figures of a `--one-way` run of 64 B datagrams across link `i`, of `pattern`
/// (pingpong; or rate, 200 requests/s: never more than three in flight on the 11 ms path).
fn one_way(lab: &netsweep_lab::Lab, i: usize, pattern: &[&str]) -> (Value, Value) {
    let addr = server_addr(lab, i);
    let mut args = vec![addr.as_str(), "-t", "udp", "--one-way", "--sizes", "64"];
    args.extend_from_slice(pattern);
    args.extend_from_slice(&["--trial-time", "400ms", "--max-point-time", "3s"]);
    let v = run_in(lab, &format!("emu-oneway-{i}-{}", pattern[1]), &args);
    let o = v["points"][0]["directions"]["one_way"].clone();
    assert!(o.is_object(), "no one-way figures: {v}");
    (o, v["warnings"].clone())
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn one_way_delays_across_an_asymmetric_emulated_path_match_the_emulator() {
    let _l = lab_test("one_way_delays_across_an_asymmetric_emulated_path");
    let lab = lab("emu-oneway", "", "delay = \"10ms\"\ndelay_back = \"1ms\"");
    for pattern in [&["-p", "pingpong"][..], &["-p", "rate", "--rate", "200"]] {
        across(&lab, pattern);
    }
}

/// One pattern's delays across the asymmetric link against the plain one's.
fn across(lab: &netsweep_lab::Lab, pattern: &[&str]) {
    let quiet = Quiet::start();
    let (plain, _) = one_way(lab, 1, pattern);
    let (o, warnings) = one_way(lab, 0, pattern);
    let quiet = quiet.finish();
    let name = pattern[1];
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
            "{name} {dir}: min {:.3} ms, mean {:.3} ms; the emulator's {:.3} ms + the plain \
             path's {:.3} ms",
            min / 1e6,
            mean / 1e6,
            delay / 1e6,
            base / 1e6
        );
        // The least delay is a floor a busy host only adds to: within 5% + 100 µs always.
        assert!(
            (min - want).abs() <= 0.05 * delay + 100e3,
            "{name} {dir}: min {min} vs {want}"
        );
        // The mean: within 5% + 300 µs on a quiet machine. A full ./run-tests read the 1 ms
        // direction's mean 184 µs high (1.211 vs 1.027 ms, its minimum on the mark) on a
        // machine the quiet probe called quiet, in one run of three; 100 µs was tighter
        // than the path holds its mean.
        match &quiet {
            None => assert!(
                (mean - want).abs() <= 0.05 * delay + 300e3,
                "{name} {dir}: mean {mean} vs {want} on a quiet machine"
            ),
            Some(why) => eprintln!("SKIPPED the mean's bound ({name} {dir}): {why}"),
        }
    }
    // Round trips alone: the offset estimate is half the asymmetry, and the true offset (0,
    // one clock) lies within its bound.
    let (est, bound) = (f(&o, "/clock_offset_ns"), f(&o, "/clock_offset_bound_ns"));
    assert!(
        (est - 4.5e6).abs() < 0.05 * 4.5e6 + 100e3,
        "{name}: offset {est}"
    );
    assert!(est.abs() <= bound && bound > 5e6, "{name}: {est} ± {bound}");
    // Both ends on one kernel: nothing to warn about the clocks.
    let w = format!("{warnings}");
    assert!(!w.contains("clock"), "{name}: {w}");
}
