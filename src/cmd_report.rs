//! `netsweep report`: re-renders saved results files — a format on stdout (or -o), and the
//! plots (`--svg DIR`, `--png DIR`) and self-contained HTML report (`--html OUT`) of one or
//! more runs overlaid.

use crate::atomic_file::write_atomic;
use crate::cli::ReportArgs;
use crate::{failure, usage_error};
use netsweep_model::anomaly;
use netsweep_model::results::{self, RunResult};
use netsweep_report::legend::{self, Named};
use netsweep_report::plot::{png, svg};
use netsweep_report::{figures, html, render, Format};
use std::path::Path;
use std::process::ExitCode;

/// Loads results files; the error (a usage error) names the file and the fix.
pub fn load_runs(files: &[String]) -> Result<Vec<(String, RunResult)>, ExitCode> {
    let mut out = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(f).map_err(|e| usage_error(format!("cannot read {f}: {e}")))?;
        let mut run = results::load(&text).map_err(|e| usage_error(format!("{f}: {e}")))?;
        // Files written before detection existed get it now, so every report shows anomalies.
        if run.anomalies.is_empty() {
            anomaly::annotate(&mut run);
        }
        let name = Path::new(f)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| f.clone());
        out.push((name, run));
    }
    Ok(out)
}

/// The runs as [`Named`] references for the reporters.
pub fn named(runs: &[(String, RunResult)]) -> Vec<Named<'_>> {
    runs.iter().map(|(name, run)| Named { name, run }).collect()
}

/// Writes bytes to `path`, creating its directory.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, bytes)
}

/// Writes every chart of `runs` as SVG into `svg_dir` and/or PNG into `png_dir`.
pub fn write_plots(
    runs: &[Named<'_>],
    svg_dir: Option<&str>,
    png_dir: Option<&str>,
) -> Result<(), ExitCode> {
    let labels = legend::labels(runs);
    for chart in figures::all(runs, &labels) {
        let doc = svg::render(&chart);
        if let Some(d) = svg_dir {
            let p = Path::new(d).join(format!("{}.svg", chart.id));
            write_atomic(&p, &doc)
                .map_err(|e| failure(format!("cannot write {}: {e}", p.display())))?;
            eprintln!("wrote {}", p.display());
        }
        if let Some(d) = png_dir {
            let p = Path::new(d).join(format!("{}.png", chart.id));
            let bytes =
                png::render(&doc, 1.5).map_err(|e| failure(format!("{}: {e}", p.display())))?;
            write_bytes(&p, &bytes)
                .map_err(|e| failure(format!("cannot write {}: {e}", p.display())))?;
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(())
}

fn emit(out: &str, output: Option<&str>) -> ExitCode {
    match output {
        None => {
            use std::io::Write;
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = std::io::stdout().lock().write_all(out.as_bytes());
            ExitCode::SUCCESS
        }
        Some(p) => match write_atomic(Path::new(p), out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => failure(format!("cannot write {p}: {e}")),
        },
    }
}

pub fn main(a: ReportArgs) -> ExitCode {
    // As with `run -o`, the output file's extension implies the format unless --format says.
    let format = a
        .format
        .map(|f| f.0)
        .or_else(|| a.output.as_deref().map(Format::from_path))
        .unwrap_or(Format::Text);
    if a.files.len() > 1 && format != Format::Text {
        return usage_error(format!(
            "--format {format} renders one file: give one FILE, or use --html/--svg/--png to overlay several"
        ));
    }
    let runs = match load_runs(&a.files) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let named = named(&runs);
    let visual = a.html.is_some() || a.svg.is_some() || a.png.is_some();
    if let Some(out) = &a.html {
        let page = html::page(&named);
        if let Err(e) = write_atomic(Path::new(out), &page) {
            return failure(format!("cannot write {out}: {e}"));
        }
        eprintln!("wrote {out}");
    }
    if a.svg.is_some() || a.png.is_some() {
        if let Err(code) = write_plots(&named, a.svg.as_deref(), a.png.as_deref()) {
            return code;
        }
    }
    if visual && a.format.is_none() && a.output.is_none() {
        return ExitCode::SUCCESS;
    }
    let out: Vec<String> = runs.iter().map(|(_, r)| render(r, format)).collect();
    emit(&out.join("\n"), a.output.as_deref())
}
