//! netsweep-core: specs, size schedules, statistics, patterns over an endpoint trait, the
//! engine that runs points with the peer over the control protocol, and the results model.

pub mod anomaly;
pub mod control;
pub mod cpu;
pub mod endpoint;
pub mod engine;
pub mod error;
pub mod hostinfo;
pub mod meter;
pub mod pattern;
pub mod results;
pub mod server;
pub mod sizes;
pub mod spec;
pub mod stats;
pub mod tool;
