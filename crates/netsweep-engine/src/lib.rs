//! netsweep-engine: the part of netsweep that does IO — the control session with the peer,
//! the server, the patterns' timed loops and the engine that runs points with them, the CPU
//! meters and the host facts. The model it fills in lives in netsweep-model; the transports
//! it drives implement netsweep-endpoint's traits.

#![warn(missing_docs)]

pub mod auth;
pub mod control;
pub mod cpu;
pub mod engine;
pub mod error;
// Only in cargo-fuzz builds (`--cfg fuzzing`): the fuzz targets' entry points are no part
// of the library a user links.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
pub mod hostinfo;
pub mod iperf3;
pub mod kernel;
pub mod meter;
pub mod pattern;
pub mod point;
pub mod server;
pub mod stop;
pub mod target;
#[cfg(test)]
pub(crate) mod testing;
