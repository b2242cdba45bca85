//! netsweep-model: what a run is and what it found, without IO — run specs, size schedules,
//! statistics, the results model and its loader, the anomaly detector, and timestamp
//! formatting. Nothing here opens a socket, a file or a thread, or reads a clock: the engine,
//! the reporters and the CLI share these types and every function here is testable on values.

#![warn(missing_docs)]

pub mod anomaly;
pub mod background;
pub mod directions;
pub mod experiment;
pub mod flows;
pub mod kernel;
pub mod load;
pub mod mesh;
pub mod passes;
pub mod placement;
pub mod results;
pub mod rpm;
pub mod schema;
pub mod sizes;
pub mod spec;
pub mod stats;
pub mod symmetry;
pub mod time;
pub mod timeline;
pub mod window;
