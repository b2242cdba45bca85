//! `netsweep report`: re-renders saved results files — a format on stdout (or -o), and the
//! plots (`--svg DIR`, `--png DIR`) and self-contained HTML report (`--html OUT`) of one or
//! more runs overlaid.

use crate::cli::ReportArgs;
use crate::error::{Error, Result};
use netsweep_atomic::{replace_with, write_atomic};
use netsweep_model::anomaly;
use netsweep_model::results::{self, RunResult};
use netsweep_report::legend::{self, Named};
use netsweep_report::plot::{png, svg};
use netsweep_report::{figures, html, render, Format};
use std::path::Path;
use std::process::ExitCode;

/// Loads results files; the error (a usage error) names the file and the fix.
pub fn load_runs(files: &[String]) -> Result<Vec<(String, RunResult)>> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| Error::usage(format!("cannot read {f}: {e}")))?;
        let mut run = results::load(&text).map_err(|e| Error::usage(format!("{f}: {e}")))?;
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

/// The runs as [`Named`] references for the reporters, with the user's `--label`s: none, or
/// one per file (anything else is a usage error naming the counts).
pub fn named<'a>(runs: &'a [(String, RunResult)], given: &'a [String]) -> Result<Vec<Named<'a>>> {
    if !given.is_empty() && given.len() != runs.len() {
        return Err(Error::usage(format!(
            "{} --label for {} files: give one --label per FILE, in the files' order, or none",
            given.len(),
            runs.len()
        )));
    }
    Ok(runs
        .iter()
        .enumerate()
        .map(|(i, (name, run))| Named {
            name,
            run,
            label: given.get(i).map(String::as_str),
        })
        .collect())
}

/// Replaces `path` with `bytes` whole (an image), creating its directory.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    replace_with(path, |f| f.write_all(bytes))
}

/// Writes every chart of `runs` as SVG into `svg_dir` and/or PNG into `png_dir`.
pub fn write_plots(runs: &[Named<'_>], svg_dir: Option<&str>, png_dir: Option<&str>) -> Result<()> {
    let labels = legend::labels(runs);
    for chart in figures::all(runs, &labels) {
        let doc = svg::render(&chart);
        if let Some(d) = svg_dir {
            let p = Path::new(d).join(format!("{}.svg", chart.id));
            write_atomic(&p, &doc)
                .map_err(|e| Error::failed(format!("cannot write {}: {e}", p.display())))?;
            eprintln!("wrote {}", p.display());
        }
        if let Some(d) = png_dir {
            let p = Path::new(d).join(format!("{}.png", chart.id));
            let bytes = png::render(&doc, 1.5)
                .map_err(|e| Error::failed(format!("{}: {e}", p.display())))?;
            write_bytes(&p, &bytes)
                .map_err(|e| Error::failed(format!("cannot write {}: {e}", p.display())))?;
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(())
}

/// Writes the rendered text to `--output`, or to stdout.
fn emit(out: &str, output: Option<&str>) -> Result {
    match output {
        None => crate::output::write_stdout(out.as_bytes()),
        Some(p) => write_atomic(Path::new(p), out)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| Error::failed(format!("cannot write {p}: {e}"))),
    }
}

/// Renders the files as asked.
pub fn main(a: ReportArgs) -> Result {
    // As with `run -o`, the output file's extension implies the format unless --format says.
    let format = a
        .format
        .map(|f| f.0)
        .or_else(|| a.output.as_deref().map(Format::from_path))
        .unwrap_or(Format::Text);
    if a.files.len() > 1 && format != Format::Text {
        return Err(Error::usage(format!(
            "--format {format} renders one file: give one FILE, or use --html/--svg/--png to overlay several"
        )));
    }
    let runs = load_runs(&a.files)?;
    let named = named(&runs, &a.label)?;
    let visual = a.html.is_some() || a.svg.is_some() || a.png.is_some();
    if let Some(out) = &a.html {
        let page = html::page(&named);
        write_atomic(Path::new(out), &page)
            .map_err(|e| Error::failed(format!("cannot write {out}: {e}")))?;
        eprintln!("wrote {out}");
    }
    if a.svg.is_some() || a.png.is_some() {
        write_plots(&named, a.svg.as_deref(), a.png.as_deref())?;
    }
    if visual && a.format.is_none() && a.output.is_none() {
        return Ok(ExitCode::SUCCESS);
    }
    let out: Vec<String> = runs.iter().map(|(_, r)| render(r, format)).collect();
    emit(&out.join("\n"), a.output.as_deref())
}
