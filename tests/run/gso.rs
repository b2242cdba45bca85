//! Issue 17 item 1: `--api gso` (UDP_SEGMENT sends, UDP_GRO receives) through the real binary.
//! On loopback every datagram is accounted (received + lost = sent, per point) while one call
//! moves many; across a lab veth the loss reported equals the datagrams an nft rule dropped,
//! counted independently from the bytes of the super-datagrams it dropped (root).

use crate::common::*;
use netsweep_lab::{Lab, Topology};
use netsweep_testkit::lab::{lab_test, run_id, udp_snmp, InducedDrops, UDP_DATA};
use serde_json::Value;

fn points(v: &Value) -> &Vec<Value> {
    v["points"].as_array().expect("points array")
}

/// Each point's datagrams are all accounted for, and the calls really carried batches.
fn check_points(v: &Value, sizes: &[u64]) {
    assert_eq!(v["status"], "complete", "message: {}", v["message"]);
    assert_eq!(v["spec"]["api"], "gso");
    let got: Vec<u64> = points(v)
        .iter()
        .map(|p| p["size"].as_u64().unwrap())
        .collect();
    assert_eq!(got, sizes);
    for p in points(v) {
        let l = &p["loss"];
        let (sent, received, lost) = (
            l["sent"].as_u64().unwrap(),
            l["received"].as_u64().unwrap(),
            l["lost"].as_u64().unwrap(),
        );
        assert!(sent > 0 && received > 0, "{p}");
        assert_eq!(received + lost, sent, "received + lost = sent: {l}");
        assert_eq!(sent, p["client"]["messages_sent"].as_u64().unwrap(), "{p}");
        assert_eq!(
            received,
            p["server"]["messages_received"].as_u64().unwrap(),
            "{p}"
        );
        assert_eq!(l["duplicates"], 0, "{l}");
        assert_eq!(l["foreign"], 0, "{l}");
        // One sendmsg carries several datagrams (at most 64, at most 64 KiB).
        let size = p["size"].as_u64().unwrap();
        let per_call = (65_507 / size).min(64);
        let calls = p["client"]["send_calls"].as_u64().unwrap();
        assert!(
            calls >= sent.div_ceil(per_call) && calls * 2 <= sent,
            "{sent} datagrams in {calls} sends"
        );
    }
}

#[test]
fn loopback_gso_stream_accounts_every_datagram() {
    let dir = scratch("gso");
    let (o, v) = run_json(
        &dir.join("g.json"),
        &[
            "-t", "udp", "-p", "stream", "--api", "gso", "--sizes", "64,1472",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_points(&v, &[64, 1472]);
    for side in ["client", "server"] {
        let g = &v["granted"][side];
        assert_eq!(g["batch"], 64, "gso's default batch: {g}");
        assert!(g["notes"].to_string().contains("UDP_GRO"), "{g}");
    }
    // Loopback hands the receiver whole super-datagrams: receives are coalesced too.
    for p in points(&v) {
        let (n, calls) = (
            p["server"]["messages_received"].as_u64().unwrap(),
            p["server"]["recv_calls"].as_u64().unwrap(),
        );
        assert!(calls * 2 <= n, "{n} datagrams in {calls} receives");
    }
}

#[test]
fn gso_refuses_what_it_cannot_do_and_names_what_works() {
    for (args, expect) in [
        (&["-t", "udp", "-p", "pingpong"][..], "--pattern stream"),
        (&["-t", "tcp", "-p", "stream"][..], "it supports basic"),
        (&["-t", "udplite", "-p", "stream"][..], "EIO"),
    ] {
        let o = run(&[
            &["run", "--no-save", "-q"],
            args,
            &["--api", "udp-gso", "--sizes", "64"],
        ]
        .concat());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    let o = std::process::Command::new(bin())
        .arg("list")
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(
        list.lines()
            .any(|l| l.contains("gso") && l.contains("UDP-Lite") && l.contains("EIO")),
        "{list}"
    );
}

const VETH: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
mtu = 1500
rate = "100mbit"
"#;

/// Across a 100 Mbit/s veth pair, every 10th frame arriving at the server is dropped by nft.
/// A GSO super-datagram within the shaper's burst crosses veth whole, so one dropped frame can
/// be many datagrams: the datagrams dropped are its bytes less 28 bytes of IP/UDP header per
/// frame, over the size.
#[test]
#[ignore = "needs root (lab namespaces, nft): ./run-tests runs it as root"]
fn veth_gso_loss_equals_the_datagrams_nft_dropped() {
    let _l = lab_test("veth_gso_loss_equals_the_datagrams_nft_dropped");
    let lab = Lab::up(&Topology::parse(VETH).unwrap(), &run_id("gso")).unwrap();
    let addr = lab.address_for("client", "server").unwrap();
    let server_ns = lab.netns("server").unwrap().to_string();
    let server_if = lab
        .interface("server", &lab.layout().links[0].name)
        .unwrap()
        .to_string();
    let dir = scratch("gso-veth");
    for size in [64u64, 1472] {
        let drops = InducedDrops::install(&server_ns, &server_if, UDP_DATA, 10).unwrap();
        let before = udp_snmp(&server_ns).unwrap();
        let mut s = serve_in(&lab, "server", "0.0.0.0", 7200);
        let out = dir.join(format!("{size}.json"));
        let target = format!("{addr}:7200");
        let o = lab
            .command("client", &[bin(), "run", &target, "--no-save", "-q", "-o"])
            .unwrap()
            .arg(&out)
            .args(QUICK)
            .args(["-t", "udp", "-p", "stream", "--api", "gso"])
            .args(["--sizes", &size.to_string(), "--rcvbuf", "4m"])
            .output()
            .unwrap();
        let _ = (s.kill(), s.wait());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        check_points(&v, &[size]);
        let (frames, bytes) = drops.dropped_with_bytes().unwrap();
        let after = udp_snmp(&server_ns).unwrap();
        assert!(frames > 0, "{size} B: the rule dropped nothing");
        let payload = bytes - 28 * frames;
        assert_eq!(
            payload % size,
            0,
            "{size} B: {frames} frames, {bytes} bytes"
        );
        let dropped = payload / size;
        // The link's tbf cuts super-datagrams larger than its burst into datagrams, so
        // the receiving stack's own drops (RcvbufErrors, one per packet) are datagrams.
        let overflow = after["RcvbufErrors"] - before["RcvbufErrors"];
        let t = &v["datagram_totals"];
        let lost =
            t["to_server_sent"].as_u64().unwrap() - t["to_server_received"].as_u64().unwrap();
        eprintln!("{size} B: {frames} frames dropped, {dropped} datagrams; overflow {overflow}");
        assert_eq!(
            lost,
            dropped + overflow,
            "{size} B: netsweep lost {lost}; nft dropped {dropped} datagrams in {frames} \
             frames, the UDP stack {overflow}"
        );
    }
    lab.down().unwrap();
}
