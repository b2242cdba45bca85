//! `netsweep compare A.json B.json [...]`: each B against baseline A — per size the ratio of
//! throughput (and latency for pingpong) with its CI and significance, ranges summarised in
//! words, sizes only one run has, configuration and placement differences; text or JSON, and
//! a ratio plot as SVG or PNG.

use crate::atomic_file::write_atomic;
use crate::cli::CompareArgs;
use crate::cmd_report::{load_runs, named, write_bytes};
use crate::failure;
use crate::values::CompareFormat;
use netsweep_report::compare::{self, Metric};
use netsweep_report::legend;
use netsweep_report::plot::{png, svg};
use std::path::Path;
use std::process::ExitCode;

pub fn main(a: CompareArgs) -> ExitCode {
    let runs = match load_runs(&a.files) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let runs = named(&runs);
    let labels = legend::labels(&runs);
    let cs: Vec<compare::Comparison> = (1..runs.len())
        .map(|i| compare::compare(runs[0], runs[i], (&labels[0], &labels[i])))
        .collect();
    if a.svg.is_some() || a.png.is_some() {
        let doc = svg::render(&compare::plot::ratio_chart(&cs, Metric::Throughput));
        if let Some(p) = &a.svg {
            if let Err(e) = write_atomic(Path::new(p), &doc) {
                return failure(format!("cannot write {p}: {e}"));
            }
            eprintln!("wrote {p}");
        }
        if let Some(p) = &a.png {
            let bytes = match png::render(&doc, 1.5) {
                Ok(b) => b,
                Err(e) => return failure(format!("{p}: {e}")),
            };
            if let Err(e) = write_bytes(Path::new(p), &bytes) {
                return failure(format!("cannot write {p}: {e}"));
            }
            eprintln!("wrote {p}");
        }
    }
    let out = if a.format == CompareFormat::Json {
        let v = serde_json::json!({ "comparisons": cs });
        serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
    } else {
        compare::text::render_all(&cs)
    };
    match &a.output {
        None => {
            use std::io::Write;
            let _ = std::io::stdout().lock().write_all(out.as_bytes());
            ExitCode::SUCCESS
        }
        Some(p) => match write_atomic(Path::new(p), &out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => failure(format!("cannot write {p}: {e}")),
        },
    }
}
