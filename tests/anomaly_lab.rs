//! Issue 5: a fine sweep across a lab link that throttles one band of packet sizes finds
//! that band as a dip, with its size range, and marks it on the plot. Needs root: ignored
//! without it, run by ./run-tests as root.

mod common;
use common::*;
use netsweep_lab::testing::{lab_test, run_id};
use netsweep_lab::{Lab, Topology};

// IP total lengths 1000..=1300 go through a 5 Mbit/s class (UDP payloads 972..=1272); the
// rest of the 200 Mbit/s link is the sender-limited trend around it.
const BAND: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
rate = "200mbit"
shape_band = { lo = 1000, hi = 1300, rate = "5mbit" }
"#;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn a_shaped_size_band_is_found_as_a_dip_and_marked() {
    let _l = lab_test("a_shaped_size_band_is_found_as_a_dip_and_marked");
    let lab = Lab::up(&Topology::parse(BAND).unwrap(), &run_id("band")).unwrap();
    let addr = lab.address_for("client", "server").unwrap();
    let mut server = serve_in(&lab, "server", "0.0.0.0", 7200);
    let dir = scratch("band");
    let out = dir.join("band.json");
    let o = lab
        .command(
            "client",
            &[
                bin(),
                "run",
                &format!("{addr}:7200"),
                "--no-save",
                "-q",
                "-o",
                out.to_str().unwrap(),
            ],
        )
        .unwrap()
        .args([
            "-t",
            "udp",
            "-p",
            "stream",
            "--sizes",
            "800..1472:+16",
            "--trial-time",
            "40ms",
            "--max-point-time",
            "200ms",
            "--cpu",
            "0,1",
        ])
        .output()
        .unwrap();
    let _ = (server.kill(), server.wait());
    lab.down().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let anomalies = v["anomalies"].as_array().expect("anomalies recorded");
    let dips: Vec<_> = anomalies.iter().filter(|a| a["kind"] == "dip").collect();
    assert_eq!(dips.len(), 1, "exactly one dip: {anomalies:?}");
    let (from, to) = (
        dips[0]["from_size"].as_u64().unwrap(),
        dips[0]["to_size"].as_u64().unwrap(),
    );
    assert!(
        from.abs_diff(972) <= 16 && to.abs_diff(1272) <= 16,
        "dip {from}..{to} vs band 972..1272"
    );
    assert!(dips[0]["magnitude"].as_f64().unwrap() >= 0.5);
    // The plot marks it.
    let svg_dir = dir.join("svg");
    let r = run(&[
        "report",
        out.to_str().unwrap(),
        "--svg",
        svg_dir.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let marked = std::fs::read_dir(&svg_dir)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .any(|s| s.contains(r#"class="anomaly""#));
    assert!(marked, "a plot shades the dip");
}
