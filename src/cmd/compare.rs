//! `netsweep compare A.json B.json [...]`: each B against baseline A — a headline per metric,
//! per point both swept the ratio of throughput (and latency for pingpong) with its interval
//! and verdict, ranges summarised in words, sizes only one run has, configuration and
//! placement differences; text or JSON, and a ratio plot as SVG or PNG. Runs that share no
//! point are a usage error (exit 2).

use crate::cli::values::CompareFormat;
use crate::cli::CompareArgs;
use crate::cmd::report::{load_runs, named, write_bytes};
use crate::error::{Error, Result};
use netsweep_atomic::write_atomic;
use netsweep_report::compare::{self, Metric};
use netsweep_report::legend;
use netsweep_report::plot::{png, svg};
use std::path::Path;
use std::process::ExitCode;

/// Compares each run with the first and writes the comparison where asked.
pub fn main(a: CompareArgs) -> Result {
    let runs = load_runs(&a.files)?;
    let runs = named(&runs, &a.label)?;
    let labels = legend::labels(&runs);
    let noise = a.noise / 100.0;
    let cs: Vec<compare::Comparison> = (1..runs.len())
        .map(|i| compare::compare(runs[0], runs[i], (&labels[0], &labels[i]), noise))
        .collect();
    if let Some(i) = cs.iter().position(|c| c.metrics.is_empty()) {
        let c = &cs[i];
        return Err(Error::usage(format!(
            "{} and {} share no measured point, so there is nothing to compare: {}; compare runs of the same sweep (the same --sizes, and the same --rates for rate runs)",
            c.a_file,
            c.b_file,
            compare::swept(runs[0].run, runs[i + 1].run)
        )));
    }
    if a.svg.is_some() || a.png.is_some() {
        let doc = svg::render(&compare::plot::ratio_chart(&cs, Metric::Throughput));
        if let Some(p) = &a.svg {
            write_atomic(Path::new(p), &doc)
                .map_err(|e| Error::failed(format!("cannot write {p}: {e}")))?;
            eprintln!("wrote {p}");
        }
        if let Some(p) = &a.png {
            let bytes = png::render(&doc, 1.5).map_err(|e| Error::failed(format!("{p}: {e}")))?;
            write_bytes(Path::new(p), &bytes)
                .map_err(|e| Error::failed(format!("cannot write {p}: {e}")))?;
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
        None => crate::output::write_stdout(out.as_bytes()),
        Some(p) => write_atomic(Path::new(p), &out)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| Error::failed(format!("cannot write {p}: {e}"))),
    }
}
