//! netsweep-report: renders results — the live text table, JSON, JSON Lines, CSV, NetPIPE's
//! np.out, SVG/PNG plots and the HTML report — compares runs, and shows anomalies, all from
//! the one results model.

#![warn(missing_docs)]

pub mod compare;
pub mod csv;
pub mod experiment;
pub mod figures;
pub mod format;
pub mod html;
pub mod interval;
pub mod legend;
pub mod load_figures;
pub mod mesh;
pub mod npout;
pub mod openmetrics;
pub(crate) mod parts;
pub mod plot;
pub mod scenario;
pub mod stream_timeline;
pub mod text;
pub mod units;

pub use format::{render, Format};
