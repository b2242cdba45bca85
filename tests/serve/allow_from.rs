//! Issue 41 item 8: `serve --allow-from` serves only the listed prefixes. A client from any
//! other address is closed at accept — on the control port and on the iperf3 port — and the
//! server logs the refusal with the address; a listed client runs as before. Real processes
//! on loopback (127.0.0.1 is outside 198.18.0.0/15, inside 127.0.0.0/8).

use crate::common::iperf3::*;
use crate::common::serve::Server;
use crate::common::*;
use netsweep_testkit::wait_for;
use std::time::{Duration, Instant};

const QUICK_RUN: &[&str] = &[
    "--sizes",
    "1k",
    "--max-point-time",
    "100ms",
    "--no-save",
    "-q",
];

#[test]
fn a_client_outside_allow_from_is_refused_and_a_listed_one_is_served() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    let server = Server::start(&["--allow-from", "198.18.0.0/15,2001:db8::/32"]);
    let t0 = Instant::now();
    let mut args = vec!["run", server.addr.as_str()];
    args.extend_from_slice(QUICK_RUN);
    let o = run(&args);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    // The client says what may have happened, not only "connection reset".
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--allow-from"), "{err}");
    assert!(
        wait_for(Duration::from_secs(5), || server
            .log()
            .contains("not in --allow-from")),
        "{}",
        server.log()
    );
    assert!(server.log().contains("127.0.0.1"), "{}", server.log());
    // Listed: served.
    let ok = Server::start(&["--allow-from", "127.0.0.0/8"]);
    let mut args = vec!["run", ok.addr.as_str()];
    args.extend_from_slice(QUICK_RUN);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!ok.log().contains("not in --allow-from"), "{}", ok.log());
}

#[test]
#[ignore = "needs iperf3 (Debian package iperf3): ./run-tests installs it and runs this"]
fn an_iperf3_client_outside_allow_from_is_refused_on_the_iperf3_port() {
    require_tool("an_iperf3_client_outside_allow_from", "iperf3", "iperf3");
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    let dir = scratch("allow-from-iperf3");
    let (server, port) = netsweep_iperf3(&dir, &["--allow-from", "198.18.0.0/15"]);
    let o = std::process::Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        wait_for(Duration::from_secs(5), || server
            .log()
            .contains("iperf3 port: the address is not in --allow-from")),
        "{}",
        server.log()
    );
    let (_ok, port) = netsweep_iperf3(&dir, &["--allow-from", "127.0.0.1"]);
    let o = std::process::Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}
