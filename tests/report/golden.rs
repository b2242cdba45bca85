//! Issue 5: golden outputs of every reporter (text, json, jsonl, csv, npout, svg, html, and
//! compare) on the archived results files in tests/data, and every archived file loads.
//! Regenerate the golden files with `NETSWEEP_BLESS=1 cargo test --test report golden::`.

use netsweep_model::{anomaly, results};
use netsweep_report::compare;
use netsweep_report::legend::{self, Named};
use netsweep_report::plot::svg;
use netsweep_report::{figures, html, render, Format};
use std::path::{Path, PathBuf};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Every archived results file, loaded as `netsweep report` loads it (anomalies detected
/// when the file holds none).
fn archived() -> Vec<(String, results::RunResult)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let mut run = results::load(&text)
                .unwrap_or_else(|e| panic!("{} does not load: {e}", p.display()));
            if run.anomalies.is_empty() {
                anomaly::annotate(&mut run);
            }
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, run)
        })
        .collect()
}

/// Compares `got` with the golden file, or rewrites it under NETSWEEP_BLESS=1.
fn golden(name: &str, got: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("NETSWEEP_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: create it with NETSWEEP_BLESS=1 cargo test --test report golden::",
            path.display()
        )
    });
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "{name} differs from the golden file at line {}: review, then NETSWEEP_BLESS=1 cargo test --test report golden::\nwant: {:?}\n got: {:?}",
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line)
        );
    }
}

#[test]
fn every_archived_results_file_loads() {
    let runs = archived();
    assert!(runs.len() >= 3, "tests/data holds the archived samples");
    for (name, run) in &runs {
        assert!(!run.points.is_empty(), "{name} has points");
        assert!(run.schema_version >= 1);
    }
}

#[test]
fn every_format_matches_its_golden_file() {
    for (name, run) in archived() {
        for f in Format::ALL {
            let ext = match f {
                Format::Text => "txt",
                Format::Json => "json",
                Format::Jsonl => "jsonl",
                Format::Csv => "csv",
                Format::Npout => "np.out",
                Format::Openmetrics => "prom",
            };
            let a = render(&run, f);
            assert_eq!(a, render(&run, f), "{name} {f}: deterministic");
            golden(&format!("{name}.{ext}"), &a);
        }
    }
}

#[test]
fn plots_and_html_match_their_golden_files() {
    let runs = archived();
    let named: Vec<Named<'_>> = runs
        .iter()
        .map(|(name, run)| Named::new(name, run))
        .collect();
    for n in &named {
        let one = [*n];
        let labels = legend::labels(&one);
        for chart in figures::all(&one, &labels) {
            golden(
                &format!("{}.{}.svg", n.name, chart.id),
                &svg::render(&chart),
            );
        }
    }
    let page = html::page(&named);
    assert_eq!(page, html::page(&named), "deterministic");
    assert!(page.matches("<svg").count() >= 6, "every figure is inline");
    for external in ["<script", "<link", "src=", "href=", "url(http", "@import"] {
        assert!(!page.contains(external), "self-contained: found {external}");
    }
    golden("all.html", &page);
    let labels = legend::labels(&named);
    let c = compare::compare(
        named[0],
        named[2],
        (&labels[0], &labels[2]),
        compare::DEFAULT_NOISE,
    );
    golden("compare.txt", &compare::text::render(&c));
    golden(
        "compare.json",
        &(serde_json::to_string_pretty(&c).unwrap() + "\n"),
    );
}
