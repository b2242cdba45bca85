//! netsweep-transport: the transport registry and one file per transport. Each transport
//! opens real kernel sockets, applies the knobs, reads them back, and binds its data path
//! to a session cookie.

pub mod cookie;
pub mod ip;
pub mod knobs;
pub mod registry;
pub mod unix;

pub use registry::{probe, Probe, Registry};
