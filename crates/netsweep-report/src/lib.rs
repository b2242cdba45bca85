//! netsweep-report: renders results — the live text table, JSON, JSON Lines, CSV and
//! NetPIPE's np.out — from the one results model.

pub mod csv;
pub mod format;
pub mod npout;
pub mod text;
pub mod units;

pub use format::{render, Format};
