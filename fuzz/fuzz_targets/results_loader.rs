//! The results loader (`netsweep report`, `compare`) on arbitrary text: an error or a run,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = netsweep_model::results::load(text);
    }
});
