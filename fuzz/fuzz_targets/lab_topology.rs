//! Lab topology files (TOML) on arbitrary text: an error naming the field, or a topology —
//! never a panic. Parsing and validation only: nothing is built.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = netsweep_lab::Topology::parse(text);
    }
});
