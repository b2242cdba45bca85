//! A server of protocol version 1 (an older netsweep) cannot do `--reverse`, `bidir` or
//! `--auth-key`; a run that needs them is refused at once with the reason, instead of waiting
//! for data an old server never sends. The old server is faked: it answers the preamble with
//! version 1 and its range 1..=1, as netsweep 0.1's did.

use crate::common::*;

#[test]
fn features_of_protocol_2_are_refused_by_name_against_an_old_server() {
    let addr = server_of_protocol(1);
    let key = scratch("old-server").join("key");
    std::fs::write(&key, "a key of at least sixteen bytes\n").unwrap();
    for (args, what) in [
        (vec!["-p", "stream", "-R"], "--reverse"),
        (vec!["-p", "bidir"], "the bidir pattern"),
        (vec!["--auth-key", key.to_str().unwrap()], "--auth-key"),
    ] {
        let mut all = vec!["run", addr.as_str(), "--sizes", "1k", "--no-save", "-q"];
        all.extend_from_slice(&args);
        all.extend_from_slice(QUICK);
        let o = run(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("protocol 1") && err.contains(what) && err.contains("upgrade"),
            "{args:?}: {err}"
        );
        // Refused on the version — not a timeout waiting for the old server.
        assert!(!err.contains("did not answer"), "{args:?}: {err}");
    }
}
