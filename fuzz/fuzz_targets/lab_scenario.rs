//! Scenario files (TOML) on arbitrary text: an error or a scenario — never a panic. Parsing
//! and validation only: nothing is built or run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = netsweep_lab::Scenario::parse(text);
    }
});
