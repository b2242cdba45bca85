//! `netsweep report`: re-renders a saved results file.

use crate::cli::ReportArgs;
use crate::sink::write_atomic;
use crate::{failure, usage_error};
use netsweep_core::results;
use netsweep_report::{render, Format};
use std::process::ExitCode;

pub fn main(a: ReportArgs) -> ExitCode {
    let Some(format) = Format::parse(&a.format) else {
        return usage_error(format!(
            "unknown --format '{}': choose one of {}",
            a.format,
            Format::ALL.map(|f| f.name()).join(", ")
        ));
    };
    let text = match std::fs::read_to_string(&a.file) {
        Ok(t) => t,
        Err(e) => return usage_error(format!("cannot read {}: {e}", a.file)),
    };
    let run = match results::load(&text) {
        Ok(r) => r,
        Err(e) => return usage_error(format!("{}: {e}", a.file)),
    };
    let out = render(&run, format);
    match &a.output {
        None => {
            use std::io::Write;
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = std::io::stdout().lock().write_all(out.as_bytes());
            ExitCode::SUCCESS
        }
        Some(p) => match write_atomic(std::path::Path::new(p), &out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => failure(format!("cannot write {p}: {e}")),
        },
    }
}
