//! The server's state machine fed what a hostile client could send: sometimes a valid
//! preamble first (so the fuzzer reaches the frames), then arbitrary bytes in arbitrary
//! pieces. Never a panic; after an error every later input is refused too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_proto::{encode_client_preamble, Server, VersionRange};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut s = Server::new();
    let mut input = Vec::new();
    if mode & 1 == 1 {
        input.extend_from_slice(&encode_client_preamble(VersionRange::SUPPORTED));
    }
    input.extend_from_slice(rest);
    let step = 1 + usize::from(mode >> 1);
    let mut failed = false;
    for piece in input.chunks(step) {
        let r = s.handle_input(piece);
        if failed {
            assert!(r.is_err(), "a failed machine accepted more input");
        }
        failed |= r.is_err();
        while s.poll_event().is_some() {}
        while s.poll_transmit().is_some() {}
    }
    let _ = s.handle_eof();
});
