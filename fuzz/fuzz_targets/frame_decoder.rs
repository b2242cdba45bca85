//! The frame decoder on arbitrary bytes, fed in arbitrary pieces: never a panic, never a
//! frame over MAX_FRAME (the length is refused before anything is allocated).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_proto::{FrameDecoder, MAX_FRAME};

fuzz_target!(|data: &[u8]| {
    let (cuts, bytes) = data.split_at(data.len().min(4));
    let mut d = FrameDecoder::new();
    let mut rest = bytes;
    let mut i = 0;
    while !rest.is_empty() {
        let step = 1 + usize::from(cuts.get(i % cuts.len().max(1)).copied().unwrap_or(255));
        let (piece, tail) = rest.split_at(step.min(rest.len()));
        rest = tail;
        i += 1;
        if d.push(piece).is_err() {
            return;
        }
        while let Some(frame) = d.pop() {
            assert!(frame.len() <= MAX_FRAME);
        }
    }
    let _ = d.finish();
});
