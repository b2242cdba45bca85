//! The `xdp` transport (issue 17): without the `xdp` feature it is a usage error naming the
//! build; with it, across a veth pair between two lab namespaces, a stream and a pingpong run
//! through AF_XDP sockets, the results say how (native XDP, copy mode: what veth offers), every
//! frame sent is received or counted by the kernel (the receiving socket's XDP_STATISTICS, which
//! must equal the receiving veth's own redirect-failure count from `ethtool -S`, an independent
//! source; the sending veth's drops), and no XDP program is left on either interface after the
//! run. `./run-tests` builds with `--features xdp` (as root).

use common::*;
use netsweep_testkit::exe as common;

#[cfg(not(feature = "xdp"))]
#[test]
fn without_the_feature_xdp_is_a_usage_error_naming_the_build() {
    let o = run(&["run", "198.18.0.1", "-t", "xdp", "--no-save", "-q"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--features xdp") && err.contains("libbpf-dev"),
        "{err}"
    );
    let o = run(&["list"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("xdp ")).unwrap_or("");
    assert!(
        line.contains("unavailable") && line.contains("--features xdp"),
        "{out}"
    );
}

#[test]
fn xdp_without_a_host_is_a_usage_error() {
    let o = run(&["run", "-t", "xdp", "--no-save", "-q"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    // Whichever the build: it names the fix.
    assert!(
        err.contains("--features xdp") || err.contains("-t packet"),
        "{err}"
    );
}

#[cfg(feature = "xdp")]
mod lab {
    use super::common::*;
    use netsweep_lab::{Lab, Topology};
    use netsweep_testkit::lab::{lab_test, run_id};
    use serde_json::Value;
    use std::collections::BTreeMap;
    use std::process::Command;

    /// One unshaped 1500-byte veth pair: AF_XDP's copy-mode transmit leaves past the qdisc,
    /// so a shaper would not apply to its frames anyway.
    const PAIR: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
mtu = 1500
"#;

    /// `ethtool -S` counters of `iface` in `ns`.
    fn ethtool(ns: &str, iface: &str) -> BTreeMap<String, u64> {
        let o = Command::new("ip")
            .args(["netns", "exec", ns, "ethtool", "-S", iface])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((k.trim().to_string(), v.trim().parse().ok()?))
            })
            .collect()
    }

    /// `ip -s -j link` of `iface` in `ns`: its JSON object.
    fn link(ns: &str, iface: &str) -> Value {
        let o = Command::new("ip")
            .args(["-n", ns, "-s", "-j", "link", "show", iface])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v[0].clone()
    }

    fn tx_dropped(ns: &str, iface: &str) -> u64 {
        link(ns, iface)["stats64"]["tx"]["dropped"]
            .as_u64()
            .unwrap()
    }

    #[test]
    #[ignore = "needs root (lab namespaces, BPF): ./run-tests runs it as root"]
    fn xdp_across_a_veth_pair_accounts_for_every_frame() {
        let _l = lab_test("xdp_across_a_veth_pair_accounts_for_every_frame");
        let lab = Lab::up(&Topology::parse(PAIR).unwrap(), &run_id("xdp")).unwrap();
        let addr = lab.address_for("client", "server").unwrap();
        let dir = scratch("xdp");
        let server_ns = lab.netns("server").unwrap().to_string();
        let client_ns = lab.netns("client").unwrap().to_string();
        let link_name = lab.layout().links[0].name.clone();
        let server_if = lab.interface("server", &link_name).unwrap().to_string();
        let client_if = lab.interface("client", &link_name).unwrap().to_string();
        let target = format!("{addr}:7210");
        let client = |out: &std::path::Path, args: &[&str]| {
            let mut c = lab
                .command(
                    "client",
                    &[
                        bin(),
                        "run",
                        &target,
                        "--no-save",
                        "-q",
                        "-o",
                        out.to_str().unwrap(),
                    ],
                )
                .unwrap();
            c.args(args).args(QUICK);
            c.output().unwrap()
        };

        // Stream: every frame sent is received, dropped at the receiving socket, or dropped
        // by the sending veth (its peer's queue full).
        let before = ethtool(&server_ns, &server_if);
        let veth_before = tx_dropped(&client_ns, &client_if);
        let mut s = serve_in(&lab, "server", "0.0.0.0", 7210);
        let out = dir.join("stream.json");
        let o = client(&out, &["-t", "xdp", "-p", "stream", "--sizes", "64,1472"]);
        let _ = (s.kill(), s.wait());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let after = ethtool(&server_ns, &server_if);
        let delta = |k: &str| after[k] - before[k];
        let veth = tx_dropped(&client_ns, &client_if) - veth_before;
        let t = &v["datagram_totals"];
        let sent = t["to_server_sent"].as_u64().unwrap();
        let received = t["to_server_received"].as_u64().unwrap();
        let socket = t["to_server_socket_drops"].as_u64().unwrap_or(0);
        assert!(sent > 1000 && received > 0, "{t}");
        assert_eq!(
            sent - received,
            socket + veth,
            "lost {} of {sent}: the receiving AF_XDP socket dropped {socket}, the sending veth \
             {veth}",
            sent - received
        );
        // The kernel's XSK drop count and the veth's redirect failures are one count seen
        // from two places.
        assert_eq!(socket, delta("rx_queue_0_drops"), "{after:?}");
        // Every frame the program redirected reached the socket: the data frames received
        // plus the handshake's hello.
        let redirected = delta("rx_queue_0_xdp_redirect");
        assert!(
            redirected >= received && redirected <= received + 8,
            "redirected {redirected}, received {received}"
        );
        for side in ["client", "server"] {
            let x = &v["granted"][side]["xdp"];
            assert_eq!(x["attach"], "native", "{side}: {x}");
            assert_eq!(x["bind"], "copy", "{side}: {x}");
        }
        assert_eq!(v["spec"]["transport"], "xdp");
        for p in v["points"].as_array().unwrap() {
            assert!(p["receiver_mbps"]["mean"].as_f64().unwrap() > 0.0, "{p}");
        }

        // Pingpong: round trips through both sockets, the server's receive polling its ring.
        let mut s = serve_in(&lab, "server", "0.0.0.0", 7210);
        let out = dir.join("pingpong.json");
        let o = client(
            &out,
            &[
                "-t",
                "xdp",
                "-p",
                "pingpong",
                "--sizes",
                "1,1492",
                "--busy-poll",
                "0,1000",
            ],
        );
        let _ = (s.kill(), s.wait());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        // The server polled its ring (1 ms before sleeping), the client slept at once.
        assert_eq!(v["granted"]["server"]["busy_poll"], 1000);
        assert_eq!(v["granted"]["client"]["busy_poll"], 0);
        let notes = v["granted"]["server"]["notes"].to_string();
        assert!(
            notes.contains("polls its empty ring for up to 1000"),
            "{notes}"
        );
        let points = v["points"].as_array().unwrap();
        assert_eq!(points.len(), 2);
        for p in points {
            assert!(p["repetitions"].as_u64().unwrap() > 0, "{p}");
            let l = &p["latency"]["half_rtt_ns"];
            let (p50, p99) = (l["p50"].as_f64().unwrap(), l["p99"].as_f64().unwrap());
            assert!(p50 > 0.0 && p50 <= p99, "{p}");
        }

        // The programs went with the processes: nothing attached to either end.
        for (ns, iface) in [(&server_ns, &server_if), (&client_ns, &client_if)] {
            let l = link(ns, iface);
            assert!(l.get("xdp").is_none(), "{iface} still has XDP: {l}");
        }

        // One byte past the payload limit is refused, naming it.
        let mut s = serve_in(&lab, "server", "0.0.0.0", 7210);
        let o = client(&dir.join("x.json"), &["-t", "xdp", "--sizes", "1493"]);
        let _ = (s.kill(), s.wait());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("1492"), "{err}");
        lab.down().unwrap();
    }

    /// Seed 000's AF_XDP scenario, short: every run measured, xdp beside packet.
    #[test]
    #[ignore = "needs root (lab namespaces, BPF): ./run-tests runs it as root"]
    fn seed_000_xdp_scenario_runs() {
        let _l = lab_test("seed_000_xdp_scenario_runs");
        let file =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/seeds/000-xdp.toml");
        let text = std::fs::read_to_string(file).unwrap();
        let long = r#""--max-point-time", "300ms""#;
        assert!(text.contains(long), "the scenario's point time changed");
        let text = text
            .replace(long, r#""--max-point-time", "60ms", "--trial-time", "5ms""#)
            .replace("repeat = 5", "repeat = 1");
        let dir = scratch("seed000xdp");
        let short = dir.join("scenario.toml");
        std::fs::write(&short, text).unwrap();
        let out = dir.join("out");
        let o = run(&[
            "scenario",
            "run",
            short.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        for name in [
            "small-xdp",
            "small-xdp-busy",
            "small-packet",
            "small-packet-mmsg",
            "small-udp-gso",
            "pingpong-xdp",
            "pingpong-packet",
        ] {
            let p = out.join(format!("{name}.json"));
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let points = v["points"].as_array().unwrap();
            assert_eq!(points.len(), 3, "{name}");
            for p in points {
                assert!(
                    p["throughput_mbps"]["mean"].as_f64().unwrap() > 0.0,
                    "{name}: {p}"
                );
            }
            // Both ends of an xdp run name how their socket was bound (a veth: native, copy).
            if name.contains("-xdp") {
                for side in ["client", "server"] {
                    assert_eq!(v["granted"][side]["xdp"]["attach"], "native", "{name}");
                    assert_eq!(v["granted"][side]["xdp"]["bind"], "copy", "{name}");
                }
            }
        }
        // The page's claims were all evaluated (one repetition: undecided, but there).
        let index: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap())
                .unwrap();
        assert_eq!(
            index["verdicts"].as_array().unwrap().len(),
            5,
            "{}",
            index["verdicts"]
        );
    }
}
