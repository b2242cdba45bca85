//! The run's sink: prints the live table (and a progress line on a terminal) and rewrites
//! the results files after every point, so nothing measured is lost — and when an output
//! cannot be written, says so at once, fails the run, and stops it once nothing is written.
//!
//! The outputs: the text table on stdout (best effort: a reader going away costs nothing),
//! another format on stdout, `-o FILE` and the saved JSON results file. Each of the last three
//! is a *results output*: its first failed write is printed at once (naming the path and the
//! fix), it is written no more (a file keeps its last good copy: it is only ever replaced
//! whole), and the run exits 1. Measuring goes on while another results output is still
//! written, and stops before the next point once none is.

use crate::output::path::{self, Opened};
use crate::output::progress::ProgressLine;
use netsweep_atomic::write_atomic;
use netsweep_engine::engine::RunSink;
use netsweep_model::results::RunResult;
use netsweep_report::format::{jsonl_footer, jsonl_header, jsonl_point};
use netsweep_report::{csv, npout, render, text, Format};
use std::fs;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};

/// What an output is, for its messages and its fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The saved JSON results file (`--save-dir`).
    Saved,
    /// `-o FILE`.
    Output,
    /// stdout.
    Stdout,
}

/// How an output is written.
enum How {
    /// Not written yet: `-o` decides at its first write what the path is.
    Unopened,
    /// A file rewritten whole after every point ([`write_atomic`]).
    Replace,
    /// A stream written as the run goes (the table's header, a row per point, the summary;
    /// whole-run formats at the end): stdout, or a FIFO, a character device or this process's
    /// own stdout/stderr named by `-o` (`/dev/stdout`, `/dev/null`), which a rename over
    /// would replace instead of writing to.
    Stream(Box<dyn Write>),
    /// Its write failed: nothing more is written to it.
    Failed(String),
}

/// One output of the run.
struct Output {
    role: Role,
    /// The file (none for stdout).
    path: Option<PathBuf>,
    format: Format,
    how: How,
    /// Its failure fails the run: every output but the text table on stdout.
    results: bool,
    /// Points in its last good write (a replaced file), or written to it so far (a stream).
    points: Option<usize>,
    /// A regular file was there before the run.
    existed: bool,
    /// It is written as a stream (`How::Stream`), not replaced whole.
    stream: bool,
}

/// Where output goes.
pub struct Sink {
    outputs: Vec<Output>,
    /// The progress line on stderr (drawn only on a terminal).
    progress: ProgressLine,
    /// Writes a whole file: [`write_atomic`] (tests make it fail).
    replace: Box<Replace>,
}

/// How a file is written whole.
type Replace = dyn FnMut(&Path, &str) -> io::Result<()>;

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o: Vec<_> = self
            .outputs
            .iter()
            .map(|o| (o.role, &o.path, o.format))
            .collect();
        f.debug_struct("Sink").field("outputs", &o).finish()
    }
}

impl Sink {
    /// `stdout`: the format printed on stdout (None when quiet, or when `-o` is stdout
    /// itself); `file`: `-o`; `saved`: the saved JSON results file.
    pub fn new(
        stdout: Option<Format>,
        file: Option<(PathBuf, Format)>,
        saved: Option<PathBuf>,
        quiet: bool,
    ) -> Self {
        let mut outputs = Vec::new();
        if let Some(format) = stdout {
            let out: Box<dyn Write> = Box::new(anstream::stdout());
            outputs.push(Output::new(Role::Stdout, None, format, How::Stream(out)));
        }
        if let Some(p) = saved {
            outputs.push(Output::new(
                Role::Saved,
                Some(p),
                Format::Json,
                How::Replace,
            ));
        }
        if let Some((p, format)) = file {
            outputs.push(Output::new(Role::Output, Some(p), format, How::Unopened));
        }
        Self {
            outputs,
            progress: ProgressLine::new(!quiet && io::stderr().is_terminal()),
            replace: Box::new(write_atomic),
        }
    }

    /// The saved results file, when it was written in full.
    pub fn saved(&self) -> Option<&Path> {
        self.written(Role::Saved)
    }

    /// `-o`'s file, when it was written in full.
    pub fn output(&self) -> Option<&Path> {
        self.written(Role::Output)
    }

    fn written(&self, role: Role) -> Option<&Path> {
        self.outputs
            .iter()
            .find(|o| o.role == role && o.points.is_some() && !o.failed())
            .and_then(|o| o.path.as_deref())
    }

    /// One line per results output whose write failed, for the end of the run: what it holds.
    pub fn failures(&self) -> Vec<String> {
        self.outputs
            .iter()
            .filter(|o| o.results)
            .filter_map(|o| match &o.how {
                How::Failed(e) => Some(format!("{}: {} (a write failed: {e})", o.name(), o.kept())),
                _ => None,
            })
            .collect()
    }

    /// Hands `run` to every output still written at `event`.
    fn emit(&mut self, run: &RunResult, event: Event) {
        for i in 0..self.outputs.len() {
            let o = &mut self.outputs[i];
            if let How::Unopened = o.how {
                o.how = match o.path.as_deref().map(path::open) {
                    Some(Ok(Opened::Replace)) => How::Replace,
                    Some(Ok(Opened::Stream(f))) => {
                        o.stream = true;
                        How::Stream(Box::new(anstream::AutoStream::auto(f)))
                    }
                    Some(Err(e)) => {
                        self.fail(i, e, event);
                        continue;
                    }
                    None => How::Replace,
                };
            }
            let o = &mut self.outputs[i];
            let done = match &mut o.how {
                How::Replace => {
                    let path = o.path.as_deref().unwrap_or(Path::new(""));
                    (self.replace)(path, &render(run, o.format))
                }
                How::Stream(out) => match chunk(o.format, event, run) {
                    Some(s) if o.format == Format::Text => {
                        crate::output::colour::write_table(out, &s)
                    }
                    Some(s) => out.write_all(s.as_bytes()).and_then(|()| out.flush()),
                    None => Ok(()),
                },
                How::Unopened | How::Failed(_) => continue,
            };
            match done {
                Ok(()) => o.points = Some(run.points.len()),
                Err(e) => self.fail(i, e, event),
            }
        }
    }

    /// Output `i` failed with `e` at `event`: it is written no more; a results output says so
    /// now.
    fn fail(&mut self, i: usize, e: io::Error, event: Event) {
        let hint = hint(&self.outputs[i], &e);
        self.outputs[i].how = How::Failed(e.to_string());
        let o = &self.outputs[i];
        if !o.results {
            return;
        }
        let still: Vec<String> = self
            .outputs
            .iter()
            .filter(|o| o.results && !o.failed())
            .map(Output::name)
            .collect();
        let next = if event == Event::Finished {
            String::new()
        } else if still.is_empty() {
            "; nothing else keeps the results: measuring stops".to_string()
        } else {
            format!("; measuring goes on into {}", still.join(" and "))
        };
        self.progress.clear();
        eprintln!(
            "netsweep: cannot write {}: {e}; {} — {hint}{next}",
            o.name(),
            o.kept()
        );
    }
}

/// A moment of the run at which the outputs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Started,
    Point,
    Finished,
}

/// What a stream of `format` gets at `event`.
fn chunk(format: Format, event: Event, run: &RunResult) -> Option<String> {
    let last = run.points.last();
    match (format, event) {
        (Format::Text, Event::Started) => Some(text::header(run)),
        (Format::Text, Event::Point) => last.map(|p| text::row(&run.spec, p)),
        (Format::Text, Event::Finished) => Some(text::summary(run)),
        (Format::Csv, Event::Started) => Some(csv::header(&run.spec)),
        (Format::Csv, Event::Point) => last.map(csv::row),
        (Format::Jsonl, Event::Started) => Some(jsonl_header(run)),
        (Format::Jsonl, Event::Point) => last.map(jsonl_point),
        (Format::Jsonl, Event::Finished) => Some(jsonl_footer(run)),
        (Format::Npout, Event::Point) => last.map(npout::row),
        // Whole-run documents: once, when the run ends.
        (Format::Json | Format::Openmetrics, Event::Finished) => Some(render(run, format)),
        _ => None,
    }
}

impl Output {
    fn new(role: Role, path: Option<PathBuf>, format: Format, how: How) -> Self {
        let existed = path
            .as_deref()
            .is_some_and(|p| fs::metadata(p).is_ok_and(|m| m.is_file()));
        let stream = matches!(how, How::Stream(_));
        Self {
            role,
            path,
            format,
            how,
            results: role != Role::Stdout || format != Format::Text,
            points: None,
            existed,
            stream,
        }
    }

    fn failed(&self) -> bool {
        matches!(self.how, How::Failed(_))
    }

    /// How the messages name it.
    fn name(&self) -> String {
        match (self.role, &self.path) {
            (Role::Saved, Some(p)) => format!("the results file {}", p.display()),
            (Role::Output, Some(p)) => format!("{} (-o)", p.display()),
            _ => format!("the {} output on stdout", self.format),
        }
    }

    /// What it holds after its write failed.
    fn kept(&self) -> String {
        let points = |n: usize| format!("{n} point{}", if n == 1 { "" } else { "s" });
        match (&self.path, self.points) {
            (Some(_), Some(n)) if !self.stream => {
                format!("it keeps its last good copy, with {}", points(n))
            }
            (Some(_), None) if !self.stream && self.existed => {
                "it is left as it was before the run".into()
            }
            (Some(_), None) if !self.stream => "nothing was written there".into(),
            (_, Some(1)) => "1 point was written to it before".into(),
            (_, Some(n)) => format!("{} were written to it before", points(n)),
            (_, None) => "nothing was written to it".into(),
        }
    }
}

/// The fix for output `o`'s error `e`.
fn hint(o: &Output, e: &io::Error) -> String {
    let full = !o.stream
        && (e.kind() == io::ErrorKind::StorageFull || e.raw_os_error() == Some(libc::EDQUOT));
    let free = if full {
        "free space on that filesystem, or "
    } else {
        ""
    };
    match o.role {
        Role::Saved => format!("{free}give --save-dir a directory you can write (or --no-save)"),
        Role::Output if e.raw_os_error() == Some(libc::ENXIO) => {
            "a FIFO needs its reader running before the run starts".into()
        }
        Role::Output => format!("{free}give -o a file you can write"),
        Role::Stdout => "keep stdout's reader going, or give -o FILE".into(),
    }
}

impl RunSink for Sink {
    fn started(&mut self, run: &RunResult) {
        self.progress.start(run.spec.sizes.len());
        self.emit(run, Event::Started);
    }

    fn measuring(&mut self, index: usize, size: u64) {
        self.progress.measuring(index, size);
    }

    fn point(&mut self, run: &RunResult) {
        self.progress.clear();
        self.emit(run, Event::Point);
    }

    fn finished(&mut self, run: &RunResult) {
        self.progress.clear();
        self.emit(run, Event::Finished);
    }

    fn stop(&self) -> Option<String> {
        let mut results = self.outputs.iter().filter(|o| o.results).peekable();
        results.peek()?;
        results.all(Output::failed).then(|| {
            "no results output can be written any more (see above): measuring stopped".into()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_atomic::names;
    use netsweep_atomic::replace_with;
    use netsweep_model::results;

    fn fixture() -> RunResult {
        let run = results::load(include_str!("../../tests/data/tcp-pingpong.json")).unwrap();
        assert!(run.points.len() >= 4);
        run
    }

    fn sink(
        outputs: Vec<Output>,
        replace: impl FnMut(&Path, &str) -> io::Result<()> + 'static,
    ) -> Sink {
        Sink {
            outputs,
            progress: ProgressLine::new(false),
            replace: Box::new(replace),
        }
    }

    /// Hands `sink` the first `points` points of `full` as the engine would, after `started`.
    fn feed(sink: &mut Sink, full: &RunResult, run: &mut RunResult, points: usize) {
        for _ in 0..points {
            run.points.push(full.points[run.points.len()].clone());
            sink.point(run);
        }
    }

    /// A writer that takes `left` bytes, then fails as a closed pipe does.
    struct FailAfter(usize);
    impl Write for FailAfter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.0);
            self.0 -= n;
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_file_whose_write_fails_after_two_points_keeps_them_byte_identical_and_stops_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        // Three writes succeed (the start, two points); then the disk fills up half-way
        // through each write, on the real atomic path.
        let mut writes = 0;
        let replace = move |p: &Path, text: &str| {
            writes += 1;
            if writes <= 3 {
                return write_atomic(p, text);
            }
            replace_with(p, |f| {
                f.write_all(&text.as_bytes()[..text.len() / 2])?;
                Err(io::ErrorKind::StorageFull.into())
            })
        };
        let saved = Output::new(Role::Saved, Some(path.clone()), Format::Json, How::Replace);
        let mut s = sink(vec![saved], replace);
        let full = fixture();
        let mut run = RunResult {
            points: Vec::new(),
            ..full.clone()
        };
        s.started(&run);
        feed(&mut s, &full, &mut run, 2);
        let good = fs::read(&path).unwrap();
        assert_eq!(s.stop(), None);
        feed(&mut s, &full, &mut run, 1);
        assert!(
            s.stop().is_some(),
            "the only results file failed: the run stops"
        );
        s.finished(&run);
        assert_eq!(
            fs::read(&path).unwrap(),
            good,
            "the last good copy is intact"
        );
        let kept = results::load(std::str::from_utf8(&good).unwrap()).unwrap();
        assert_eq!(kept.points.len(), 2);
        assert_eq!(names(dir.path()), ["run.json"], "no temporary file is left");
        assert_eq!(s.saved(), None);
        let lost = s.failures();
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(
            lost[0].contains("last good copy, with 2 points"),
            "{lost:?}"
        );
    }

    #[test]
    fn a_failed_stream_is_dropped_and_measuring_goes_on_while_a_file_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        let full = fixture();
        let mut run = RunResult {
            points: Vec::new(),
            ..full.clone()
        };
        // CSV on stdout takes the header and one row, then its reader goes away.
        let csv_bytes = csv::header(&run.spec).len() + csv::row(&full.points[0]).len();
        let stdout = Output::new(
            Role::Stdout,
            None,
            Format::Csv,
            How::Stream(Box::new(FailAfter(csv_bytes))),
        );
        let saved = Output::new(Role::Saved, Some(path.clone()), Format::Json, How::Replace);
        let mut s = sink(vec![stdout, saved], write_atomic);
        s.started(&run);
        feed(&mut s, &full, &mut run, full.points.len());
        assert_eq!(s.stop(), None, "the results file is still written");
        s.finished(&run);
        let saved = results::load(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(saved.points.len(), full.points.len());
        assert_eq!(s.saved(), Some(path.as_path()));
        let lost = s.failures();
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(lost[0].contains("1 point was written to it"), "{lost:?}");
    }

    #[test]
    fn the_table_on_stdout_is_best_effort() {
        let table = Output::new(
            Role::Stdout,
            None,
            Format::Text,
            How::Stream(Box::new(FailAfter(0))),
        );
        let mut s = sink(vec![table], write_atomic);
        let full = fixture();
        s.started(&full);
        s.point(&full);
        s.finished(&full);
        assert_eq!((s.stop(), s.failures().len()), (None, 0));
    }
}
