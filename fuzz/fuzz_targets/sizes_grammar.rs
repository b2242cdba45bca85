//! The `--sizes` grammar on arbitrary text: an error or a list within the limit — never a
//! panic, never an endless or huge expansion. (Size 0 is grammatical; whether a transport
//! can carry it is checked later, per run.)
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(sizes) = netsweep_model::sizes::parse_sizes(text) {
            assert!(sizes.len() <= netsweep_model::sizes::MAX_SIZES);
        }
    }
});
