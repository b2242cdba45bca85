//! Control messages decoded from arbitrary bodies (both directions): never a panic, and a
//! message that decodes re-encodes (as a whole frame) and its body decodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_proto::{decode_message, encode_message, ClientMsg, ServerMsg, LEN_BYTES};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = decode_message::<ClientMsg>(data) {
        if let Ok(bytes) = encode_message(&m) {
            let again: ClientMsg =
                decode_message(&bytes[LEN_BYTES..]).expect("a re-encoded message decodes");
            assert_eq!(format!("{again:?}"), format!("{m:?}"));
        }
    }
    if let Ok(m) = decode_message::<ServerMsg>(data) {
        if let Ok(bytes) = encode_message(&m) {
            let again: ServerMsg =
                decode_message(&bytes[LEN_BYTES..]).expect("a re-encoded message decodes");
            assert_eq!(format!("{again:?}"), format!("{m:?}"));
        }
    }
});
