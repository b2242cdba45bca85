//! Issue 9, item 7: a datagram the sending host's own netfilter drops (output hook) makes
//! `send` fail with EPERM. netsweep counts it per errno as a send error, keeps going, and
//! keeps its loss exact: a refused datagram was never sent, so it is not lost. Checked
//! against the nft counter of the dropping rule. Needs root; prints a loud SKIPPED line
//! otherwise.

use crate::common::*;
use netsweep_lab::counters::parse_nft_counter;
use netsweep_lab::{Lab, Topology};
use netsweep_testkit::lab::{lab_test, run_id};
use serde_json::Value;

const LINK: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
rate = "100mbit"
"#;

/// Payload size of the data datagrams; the rule matches only these (UDP length = 8 + payload),
/// never the small handshake datagrams.
const SIZE: u64 = 1000;
const TABLE: &str = "nsw-refuse";

/// Installs, in the client's namespace, an output rule that drops every 7th data datagram
/// to `addr`, counting each drop in the named counter `refused`.
fn install_rule(lab: &Lab, addr: &str) {
    let script = format!(
        "table inet {TABLE} {{\n\
           counter refused {{}}\n\
           chain out {{\n\
             type filter hook output priority 0; policy accept;\n\
             ip daddr {addr} udp length {} numgen inc mod 7 == 0 counter name \"refused\" drop\n\
           }}\n\
         }}\n",
        SIZE + 8
    );
    nft_load(lab.command("client", &["nft", "-f", "-"]).unwrap(), &script);
}

fn refused_by_nft(lab: &Lab) -> u64 {
    let o = lab
        .command(
            "client",
            &["nft", "-j", "list", "counter", "inet", TABLE, "refused"],
        )
        .unwrap()
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    parse_nft_counter(&String::from_utf8_lossy(&o.stdout))
        .expect("nft prints the counter")
        .0
}

fn reset_counter(lab: &Lab) {
    let o = lab
        .command(
            "client",
            &["nft", "reset", "counter", "inet", TABLE, "refused"],
        )
        .unwrap()
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Runs a udp `pattern` run to the lab's server; returns (stdout, results).
fn udp_run(lab: &Lab, server: &str, pattern: &str, extra: &[&str]) -> (String, Value) {
    let out = scratch(&format!("refused-{pattern}-{}", extra.len())).join("r.json");
    let o = lab
        .command(
            "client",
            &[
                bin(),
                "run",
                server,
                "--no-save",
                "-o",
                out.to_str().unwrap(),
            ],
        )
        .unwrap()
        .args([
            "-t",
            "udp",
            "-p",
            pattern,
            "--sizes",
            &SIZE.to_string(),
            "--trial-time",
            "50ms",
            "--max-point-time",
            "300ms",
            "--timeout",
            "5s",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{pattern}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    (String::from_utf8_lossy(&o.stdout).into_owned(), v)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn local_firewall_drops_are_counted_send_errors_not_losses() {
    let _l = lab_test("local_firewall_drops_are_counted_send_errors_not_losses");
    let lab = Lab::up(&Topology::parse(LINK).unwrap(), &run_id("refused")).unwrap();
    let addr = lab.address_for("client", "server").unwrap().to_string();
    let port = 7230;
    let mut server = serve_in(&lab, "server", &addr, port);
    install_rule(&lab, &addr);
    let target = format!("{addr}:{port}");

    // sendmmsg batches too: a refused datagram mid-batch ends that call short.
    let batched: &[&str] = &["--api", "mmsg", "--batch", "8"];
    for (pattern, extra) in [
        ("stream", &[][..]),
        ("stream", batched),
        ("pingpong", &[][..]),
    ] {
        reset_counter(&lab);
        let (stdout, v) = udp_run(&lab, &target, pattern, extra);
        let refused = refused_by_nft(&lab);
        assert_eq!(v["status"], "complete", "{pattern}: {v}");
        assert!(refused > 0, "{pattern}: the rule dropped nothing");
        let t = &v["datagram_totals"];
        // Every datagram nft dropped is a send error netsweep counted, warm-ups included…
        assert_eq!(u(&t["to_server_send_errors"]), refused, "{pattern}: {t}");
        // …and none of them is a loss: nothing else drops on this link but, on a busy machine,
        // the receiving socket's full buffer, which the kernel counts (2 of 3057 beside two
        // busy loops).
        let socket_drops = u(&t["to_server_socket_drops"]);
        assert_eq!(
            u(&t["to_server_sent"]),
            u(&t["to_server_received"]) + socket_drops,
            "{pattern}: {t}"
        );
        let (mut point_errors, mut point_lost) = (0, 0);
        for p in v["points"].as_array().unwrap() {
            let l = &p["loss"];
            assert_eq!(
                u(&l["sent"]),
                u(&l["received"]) + u(&l["lost"]),
                "{pattern}: {l}"
            );
            point_lost += u(&l["lost"]);
            // EPERM, or "unreported" for a datagram after a sendmmsg batch's first (the
            // kernel drops that errno); nothing else refuses sends here.
            let by = &p["client"]["send_errors"];
            let eperm = u(&by["EPERM"]) + u(&by["unreported"]);
            assert_eq!(u(&l["send_errors"]), eperm, "{pattern}: {p}");
            // Sends accepted plus sends refused: one in 7 data datagrams refused (±1 per
            // trial where the counting phase straddles a trial boundary).
            let accepted = u(&p["client"]["messages_sent"]);
            assert!(
                eperm * 7 >= accepted / 2 && eperm * 7 <= 2 * (accepted + eperm),
                "{pattern}: {eperm} refused of {accepted} accepted"
            );
            point_errors += eperm;
        }
        assert!(point_errors > 0 && point_errors <= refused);
        // Every loss is one the receiving socket dropped, none a refused send (one in 7).
        assert!(
            point_lost <= socket_drops,
            "{pattern}: {point_lost} lost, the socket dropped {socket_drops}: {t}"
        );
        assert!(
            stdout.contains("client stack refused") && stdout.contains("EPERM"),
            "{pattern}: the table notes the refused sends:\n{stdout}"
        );
    }
    let _ = server.kill();
    let _ = server.wait();
    lab.down().unwrap();
}
