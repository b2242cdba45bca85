//! Issue 41 item 5: refusals reach Debian's `iperf3 -c` with a reason after the colon, and
//! the server's log names the fix and the real limit. iperf3's protocol carries a code and an
//! errno only (the client prints its own text for the code, and strerror of the errno where
//! that text ends in ": "), so the words naming the fix can only be in the server's log.

use crate::common::iperf3::*;
use crate::common::*;

#[test]
#[ignore = "needs iperf3 (Debian package iperf3): ./run-tests installs it and runs this"]
fn tos_affinity_and_duration_refusals_say_why() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    require_tool("tos_affinity_and_duration_refusals", "iperf3", "iperf3");
    let dir = scratch("iperf3-serve-refusal-reasons");
    let (server, port) = netsweep_iperf3(&dir, &[]);
    let error = |args: &[&str]| -> String {
        let j = iperf3_c(port, args);
        j["error"].as_str().unwrap_or_default().to_string()
    };
    let e = error(&["-t", "1", "-S", "16"]);
    assert!(
        e.contains("unable to set IP TOS: Operation not permitted"),
        "{e:?}"
    );
    assert!(
        server.wait_log("--allow tos").contains("serve --allow tos"),
        "{}",
        server.log()
    );
    let e = error(&["-t", "1", "-A", "0,0"]);
    assert!(
        e.contains("unable to set CPU affinity: Operation not permitted"),
        "{e:?}"
    );
    server.wait_log("does not pin iperf3 tests");
    // The client's text for a duration is its own ("maximum = 86400 seconds"); the log has
    // the server's limit.
    let e = error(&["-t", "4000"]);
    assert!(e.contains("test duration too long"), "{e:?}");
    assert!(
        server.wait_log("-t 4000").contains("limit of 3600 s"),
        "{}",
        server.log()
    );
}
