//! Output formats and rendering a whole saved run in any of them.

use crate::{csv, npout, openmetrics, text};
use netsweep_model::results::{PointResult, RunResult};
use std::fmt;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The live text table (`.txt` or anything else).
    Text,
    /// The whole run as one pretty-printed JSON document (`.json`).
    Json,
    /// JSON Lines: a `run` header, one `point` record per point, an `end` record (`.jsonl`).
    Jsonl,
    /// CSV, one row per point (`.csv`).
    Csv,
    /// NetPIPE's np.out: bytes, Mbit/s, seconds per transfer (`.out`).
    Npout,
    /// OpenMetrics / Prometheus text exposition of the run's figures (`.prom`).
    Openmetrics,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 6] = [
        Format::Text,
        Format::Json,
        Format::Jsonl,
        Format::Csv,
        Format::Npout,
        Format::Openmetrics,
    ];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Jsonl => "jsonl",
            Format::Csv => "csv",
            Format::Npout => "npout",
            Format::Openmetrics => "openmetrics",
        }
    }

    /// The format of that name; `None` for any other text.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The format a file name implies: .json, .jsonl, .csv, .out (np.out), .prom
    /// (OpenMetrics); text otherwise.
    pub fn from_path(path: &str) -> Self {
        let lower = path.to_ascii_lowercase();
        if lower.ends_with(".jsonl") {
            Format::Jsonl
        } else if lower.ends_with(".json") {
            Format::Json
        } else if lower.ends_with(".csv") {
            Format::Csv
        } else if lower.ends_with(".out") {
            Format::Npout
        } else if lower.ends_with(".prom") {
            Format::Openmetrics
        } else {
            Format::Text
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The run header line of the JSON Lines format (every field but the points).
pub fn jsonl_header(run: &RunResult) -> String {
    let mut v = serde_json::to_value(run).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("points");
        o.insert("record".into(), "run".into());
    }
    format!("{v}\n")
}

/// One JSON Lines record for a point.
pub fn jsonl_point(p: &PointResult) -> String {
    let mut v = serde_json::to_value(p).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("record".into(), "point".into());
    }
    format!("{v}\n")
}

/// The JSON Lines closing record (status and summary).
pub fn jsonl_footer(run: &RunResult) -> String {
    let v = serde_json::json!({
        "record": "end",
        "status": run.status,
        "message": run.message,
        "finished_at": run.finished_at,
        "summary": run.summary,
    });
    format!("{v}\n")
}

/// Renders a whole run.
pub fn render(run: &RunResult, format: Format) -> String {
    match format {
        Format::Text => text::render(run),
        Format::Json => serde_json::to_string_pretty(run).unwrap_or_default() + "\n",
        Format::Jsonl => {
            let mut out = jsonl_header(run);
            for p in &run.points {
                out.push_str(&jsonl_point(p));
            }
            out.push_str(&jsonl_footer(run));
            out
        }
        Format::Csv => {
            let mut out = csv::header(&run.spec);
            for p in &run.points {
                out.push_str(&csv::row(p));
            }
            out
        }
        Format::Npout => run.points.iter().map(npout::row).collect(),
        Format::Openmetrics => openmetrics::render(run),
    }
}
