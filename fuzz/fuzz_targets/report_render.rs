//! `netsweep report` on what the results loader accepts: anomaly detection for files that
//! carry none, then the HTML page (every figure as SVG, the tables, the comparisons) and
//! every text format — never a panic, an endless loop or a huge allocation, whatever numbers
//! a file holds.
//!
//! Input: a results file, or two separated by a NUL byte (overlaid and compared).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_model::{anomaly, results};
use netsweep_report::legend::Named;
use netsweep_report::{html, render, Format};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut runs = Vec::new();
    for (i, part) in text.splitn(2, '\0').enumerate() {
        let Ok(mut run) = results::load(part) else {
            return;
        };
        if run.anomalies.is_empty() {
            anomaly::annotate(&mut run);
        }
        runs.push((format!("run{i}"), run));
    }
    let named: Vec<Named<'_>> = runs.iter().map(|(name, run)| Named::new(name, run)).collect();
    let page = html::page(&named);
    assert!(page.starts_with("<!DOCTYPE html>"));
    for (_, run) in &runs {
        for f in Format::ALL {
            let _ = render(run, f);
        }
    }
});
