//! The run's sink: prints the live table (and a progress line on a terminal) and rewrites
//! the results files after every point, so nothing measured is lost.

use crate::atomic_file::write_atomic;
use crate::progress::ProgressLine;
use netsweep_engine::engine::RunSink;
use netsweep_model::results::RunResult;
use netsweep_report::format::{jsonl_footer, jsonl_header, jsonl_point};
use netsweep_report::{csv, npout, render, text, Format};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// Where output goes.
#[derive(Debug)]
pub struct Sink {
    /// Format printed on stdout (None when quiet, or when stdout output went to a file).
    pub stdout: Option<Format>,
    /// A file in some format, rewritten after every point.
    pub file: Option<(PathBuf, Format)>,
    /// The saved JSON results file.
    pub saved: Option<PathBuf>,
    /// The progress line on stderr (drawn only on a terminal).
    progress: ProgressLine,
    /// Errors writing files (reported at the end, never fatal mid-run).
    pub write_errors: Vec<String>,
}

impl Sink {
    pub fn new(
        stdout: Option<Format>,
        file: Option<(PathBuf, Format)>,
        saved: Option<PathBuf>,
        quiet: bool,
    ) -> Self {
        Self {
            stdout,
            file,
            saved,
            progress: ProgressLine::new(!quiet && std::io::stderr().is_terminal()),
            write_errors: Vec::new(),
        }
    }

    fn save(&mut self, run: &RunResult) {
        let targets: Vec<(PathBuf, Format)> = self
            .saved
            .iter()
            .map(|p| (p.clone(), Format::Json))
            .chain(self.file.iter().cloned())
            .collect();
        for (path, format) in targets {
            if let Err(e) = write_atomic(&path, &render(run, format)) {
                self.write_errors
                    .push(format!("cannot write {}: {e}", path.display()));
            }
        }
    }

    fn print(&self, s: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(s.as_bytes());
        let _ = out.flush();
    }
}

impl RunSink for Sink {
    fn started(&mut self, run: &RunResult) {
        self.progress.start(run.spec.sizes.len());
        match self.stdout {
            Some(Format::Text) => crate::colour::print_table(&text::header(run)),
            Some(Format::Csv) => self.print(&csv::header(&run.spec)),
            Some(Format::Jsonl) => self.print(&jsonl_header(run)),
            _ => {}
        }
        self.save(run);
    }

    fn measuring(&mut self, index: usize, size: u64) {
        self.progress.measuring(index, size);
    }

    fn point(&mut self, run: &RunResult) {
        self.progress.clear();
        if let Some(p) = run.points.last() {
            match self.stdout {
                Some(Format::Text) => crate::colour::print_table(&text::row(&run.spec, p)),
                Some(Format::Csv) => self.print(&csv::row(p)),
                Some(Format::Jsonl) => self.print(&jsonl_point(p)),
                Some(Format::Npout) => self.print(&npout::row(p)),
                _ => {}
            }
        }
        self.save(run);
    }

    fn finished(&mut self, run: &RunResult) {
        self.progress.clear();
        match self.stdout {
            Some(Format::Text) => crate::colour::print_table(&text::summary(run)),
            Some(Format::Jsonl) => self.print(&jsonl_footer(run)),
            Some(Format::Json) => self.print(&render(run, Format::Json)),
            _ => {}
        }
        self.save(run);
    }
}
