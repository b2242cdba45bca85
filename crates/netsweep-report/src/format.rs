//! Output formats and rendering a whole saved run in any of them.

use crate::{csv, npout, text};
use netsweep_core::results::{PointResult, RunResult};
use std::fmt;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Jsonl,
    Csv,
    Npout,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Text,
        Format::Json,
        Format::Jsonl,
        Format::Csv,
        Format::Npout,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Jsonl => "jsonl",
            Format::Csv => "csv",
            Format::Npout => "npout",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The format a file name implies: .json, .jsonl, .csv, .out (np.out); text otherwise.
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
            let mut out = csv::HEADER.to_string();
            for p in &run.points {
                out.push_str(&csv::row(p));
            }
            out
        }
        Format::Npout => run.points.iter().map(npout::row).collect(),
    }
}
