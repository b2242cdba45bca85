//! Issue 41 item 4: with no `--bind`, `netsweep serve` listens on `[::]` for IPv4 and IPv6
//! clients both, as `iperf3 -s` does (it listened on 0.0.0.0 and refused IPv6 clients), on
//! its own port and the iperf3 port; v4-mapped clients' tests and runs complete (their
//! TOS and don't-fragment are IPv4's: the unit tests in netsweep-iperf3's `sockets` check
//! the marking).

use crate::common::iperf3::*;
use crate::common::serve::Server;
use crate::common::*;
use std::process::Command;
use std::time::Duration;

fn iperf3_to(host: &str, port: u16, args: &[&str]) -> serde_json::Value {
    let mut c = Command::new("iperf3");
    c.args(["-c", host, "-p", &port.to_string(), "-J"])
        .args(args);
    client_json(c, Duration::from_secs(60))
}

#[test]
#[ignore = "needs iperf3 (Debian package iperf3): ./run-tests installs it and runs this"]
fn the_default_listener_serves_ipv4_and_ipv6_clients() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    require_tool("the_default_listener_serves", "iperf3", "iperf3");
    let dir = scratch("iperf3-serve-dual-stack");
    let mut c = Command::new(bin());
    c.args(["serve", "--port", "0", "--iperf3", "0", "--allow", "tos"])
        .args(["--iperf3-results", dir.to_str().unwrap()]);
    let server = Server::spawn(c);
    let line = server.log_first_line();
    if line.contains("IPv4 only") {
        eprintln!("no IPv6 on this host; the fallback said so: {line}");
        assert!(server.addr.starts_with("0.0.0.0:"), "{line}");
        return;
    }
    assert!(server.addr.starts_with("[::]:"), "{line}");
    let port = iperf3_port(&line);
    let ctl_port = server.addr.rsplit(':').next().unwrap().to_string();
    let mut n = 0;
    for (host, args) in [
        ("::1", &["-t", "1"][..]),
        ("127.0.0.1", &["-t", "1", "-S", "40"]),
        ("127.0.0.1", &["-t", "1", "-u", "-b", "10M", "-R"]),
        ("::1", &["-t", "1", "-u", "-b", "10M", "--dont-fragment"]),
    ] {
        let j = iperf3_to(host, port, args);
        assert!(j.get("error").is_none(), "{host} {args:?}: {}", j["error"]);
        n += 1;
        let rec = &wait_records(&dir, n)[n - 1];
        assert_eq!(rec["status"], "complete", "{host} {args:?}: {rec}");
        // An IPv4 client is shown as IPv4, not as ::ffff:127.0.0.1.
        let client = rec["client"].as_str().unwrap_or_default();
        let want = if host == "::1" {
            "[::1]:"
        } else {
            "127.0.0.1:"
        };
        assert!(client.starts_with(want), "{host}: {client}");
    }
    for host in ["127.0.0.1", "[::1]"] {
        let out = dir.join(format!("run-{}.json", host.trim_matches(['[', ']'])));
        let mut args = vec!["run", "--sizes", "1,1k", "--no-save", "-q", "-o"];
        let (target, o) = (
            format!("{host}:{ctl_port}"),
            out.to_str().unwrap().to_string(),
        );
        args.push(&o);
        args.insert(1, &target);
        args.extend_from_slice(QUICK);
        let r = run(&args);
        assert!(
            r.status.success(),
            "netsweep run {target}: {}\n{}",
            String::from_utf8_lossy(&r.stderr),
            server.log()
        );
    }
    let log = server.log();
    assert!(
        log.contains("from 127.0.0.1:") && log.contains("from [::1]:"),
        "{log}"
    );
    assert!(
        !log.contains("::ffff:"),
        "IPv4 clients shown as IPv4: {log}"
    );
}
