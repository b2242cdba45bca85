//! Issue 41 items 1–2: the results `netsweep serve --iperf3` sends cover one test window for
//! every stream, as `iperf3 -s`'s do, because Debian's `iperf3 -c` divides each summary (both
//! directions of `--bidir`) by the first stream's time. With a window per stream, `-P 128`
//! sums exceeded the link and `--bidir` understated the download.

use crate::common::iperf3::*;
use crate::common::*;
use serde_json::Value;

/// The `seconds` of each stream of a record: the `end_time` the server sent for it.
fn record_seconds(rec: &Value) -> Vec<f64> {
    rec["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seconds"].as_f64().unwrap())
        .collect()
}

#[test]
#[ignore = "needs iperf3 (Debian package iperf3): ./run-tests installs it and runs this"]
fn every_stream_reports_one_window_and_the_clients_sums_divide_by_it() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    require_tool("every_stream_reports_one_window", "iperf3", "iperf3");
    let dir = scratch("iperf3-serve-window");
    let (server, port) = netsweep_iperf3(&dir, &[]);
    let cases: [&[&str]; 4] = [
        &["-t", "1", "-P", "8"],
        &["-t", "1", "-P", "2", "--bidir"],
        &["-t", "1", "-P", "4", "--bidir", "-w", "64K"],
        &["-t", "1", "-P", "3", "-R"],
    ];
    for (i, args) in cases.iter().enumerate() {
        let j = iperf3_c(port, args);
        assert!(j.get("error").is_none(), "{args:?}: {}", j["error"]);
        let rec = &wait_records(&dir, i + 1)[i];
        let secs = record_seconds(rec);
        assert!(
            secs.iter().all(|s| *s == secs[0]),
            "{args:?}: one window for every stream, got {secs:?}"
        );
        let w = secs[0];
        let end = &j["end"];
        // The server's window is the client's own (within a control message's way): it
        // began ~40 ms early while Nagle held TEST_START for the client's delayed ACK.
        let reverse = args.contains(&"-R");
        let own = end[if reverse { "sum_received" } else { "sum_sent" }]["seconds"]
            .as_f64()
            .unwrap();
        assert!(
            (w - own).abs() < 0.025,
            "{args:?}: the server's window {w} s, the client's {own} s"
        );
        let server_keys: &[&str] = if reverse {
            &["sum_sent"]
        } else {
            &["sum_received", "sum_received_bidir_reverse"]
        };
        for &key in server_keys {
            let Some(s) = end.get(key) else { continue };
            let (bytes, seconds) = (s["bytes"].as_f64().unwrap(), s["seconds"].as_f64().unwrap());
            assert!(
                (seconds - w).abs() < 1e-6,
                "{args:?} {key}: {seconds} s, window {w} s"
            );
            let bps = s["bits_per_second"].as_f64().unwrap();
            let want = bytes * 8.0 / w;
            assert!(
                (bps - want).abs() <= want * 1e-6,
                "{args:?} {key}: {bps} against {want}"
            );
        }
        // What the server received is what the client's receiver sum counts.
        if !reverse {
            assert_eq!(
                end["sum_received"]["bytes"].as_u64(),
                Some(record_bytes(rec, "to_server")),
                "{args:?}"
            );
        }
        if args.contains(&"--bidir") {
            // The download over the server's window is within 3 % of the client's own rate
            // over its own time (a window stretched over the upload's tail understated it).
            let d = &end["sum_received_bidir_reverse"];
            let got = d["bits_per_second"].as_f64().unwrap();
            let own = d["bytes"].as_f64().unwrap() * 8.0
                / end["sum_sent_bidir_reverse"]["seconds"].as_f64().unwrap();
            eprintln!("{args:?}: download {got:.0} bit/s over the window, {own:.0} over the client's time");
            assert!(got >= own * 0.97, "{args:?}: download {got} against {own}");
        }
    }
    drop(server);
}
