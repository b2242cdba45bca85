//! The client's state machine fed what a hostile server could send: sometimes a valid
//! preamble reply first, then arbitrary bytes in arbitrary pieces. Never a panic; after an
//! error every later input is refused too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_proto::{encode_server_preamble, Client, ServerReply, VersionRange, PROTOCOL_MAX};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut c = Client::new();
    while c.poll_transmit().is_some() {}
    let mut input = Vec::new();
    if mode & 1 == 1 {
        input.extend_from_slice(&encode_server_preamble(ServerReply {
            chosen: PROTOCOL_MAX,
            server: VersionRange::SUPPORTED,
        }));
    }
    input.extend_from_slice(rest);
    let step = 1 + usize::from(mode >> 1);
    let mut failed = false;
    for piece in input.chunks(step) {
        let r = c.handle_input(piece);
        if failed {
            assert!(r.is_err(), "a failed machine accepted more input");
        }
        failed |= r.is_err();
        while c.poll_event().is_some() {}
        while c.poll_transmit().is_some() {}
    }
    let _ = c.handle_eof();
});
