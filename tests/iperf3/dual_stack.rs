//! Issue 41 item 4: with no `--bind`, `netsweep serve` listens on `[::]` for IPv4 and IPv6
//! clients both, as `iperf3 -s` does (it listened on 0.0.0.0 and refused IPv6 clients), on
//! its own port and the iperf3 port; v4-mapped clients' tests and runs complete, and their
//! TOS is IPv4's: nft counts, on the wire, the marked packets the server sends a v4-mapped
//! `-S -R` client (0 of 8453 were before; the unit tests in netsweep-iperf3's `sockets` check
//! don't-fragment).

use crate::common::iperf3::*;
use crate::common::serve::Server;
use crate::common::*;
use std::process::Command;
use std::time::Duration;

/// nft counters in this host's output for TCP packets from `port`, and those of them marked
/// DSCP AF11 (`-S 40`: TOS 0x28); the table is deleted on drop.
struct Marked(String);

impl Marked {
    fn new(port: u16) -> Self {
        let table = format!("nsw_marked_{}", std::process::id());
        let rules = format!(
            "table inet {table} {{\n counter sent {{}}\n counter marked {{}}\n chain output {{\n  \
             type filter hook output priority 0;\n  tcp sport {port} counter name \"sent\"\n  \
             tcp sport {port} ip dscp af11 counter name \"marked\"\n }}\n}}\n"
        );
        let mut nft = Command::new("nft");
        nft.args(["-f", "-"]);
        nft_load(nft, &rules);
        Marked(table)
    }

    /// (packets sent from the port, packets marked).
    fn counts(&self) -> (u64, u64) {
        let read = |name: &str| {
            let o = Command::new("nft")
                .args(["-j", "list", "counter", "inet", &self.0, name])
                .output()
                .unwrap();
            netsweep_lab::counters::parse_nft_counter(&String::from_utf8_lossy(&o.stdout))
                .expect("the nft counter")
                .0
        };
        (read("sent"), read("marked"))
    }
}

impl Drop for Marked {
    fn drop(&mut self) {
        let _ = Command::new("nft")
            .args(["delete", "table", "inet", &self.0])
            .status();
    }
}

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
    // A v4-mapped client's TOS on the wire: the server's data to a `-S 40 -R` client carries
    // it (its control connection does not, as iperf3 -s's does not).
    let marked = Marked::new(port);
    let j = iperf3_to("127.0.0.1", port, &["-t", "1", "-S", "40", "-R"]);
    assert!(j.get("error").is_none(), "-S 40 -R: {}", j["error"]);
    let (sent, tos) = marked.counts();
    eprintln!("-S 40 -R from a v4-mapped client: {tos} of the server's {sent} packets marked");
    assert!(
        sent > 100 && tos as f64 >= 0.9 * sent as f64,
        "{tos} of {sent} packets the server sent a v4-mapped -S 40 client were marked"
    );
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
