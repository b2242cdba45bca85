//! Control messages decoded from arbitrary bodies (both directions): never a panic, and a
//! message that decodes re-encodes (as a whole frame) to a body that decodes and re-encodes
//! to the same bytes. Bytes, not the decoded value: a field may have two spellings of one
//! meaning (`flows` 0 and 1 are one flow, and 1 is left off the wire), and the wire is what
//! the peer sees.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_proto::{decode_message, encode_message, ClientMsg, ServerMsg, LEN_BYTES};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = decode_message::<ClientMsg>(data) {
        if let Ok(bytes) = encode_message(&m) {
            let again: ClientMsg =
                decode_message(&bytes[LEN_BYTES..]).expect("a re-encoded message decodes");
            let twice = encode_message(&again).expect("a decoded message encodes");
            assert_eq!(twice, bytes, "{m:?} re-encodes to other bytes as {again:?}");
        }
    }
    if let Ok(m) = decode_message::<ServerMsg>(data) {
        if let Ok(bytes) = encode_message(&m) {
            let again: ServerMsg =
                decode_message(&bytes[LEN_BYTES..]).expect("a re-encoded message decodes");
            let twice = encode_message(&again).expect("a decoded message encodes");
            assert_eq!(twice, bytes, "{m:?} re-encodes to other bytes as {again:?}");
        }
    }
});
