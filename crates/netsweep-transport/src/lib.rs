//! netsweep-transport: the transport registry and one file per transport and api. Each
//! transport opens real kernel sockets, applies the knobs, reads them back, and binds its data
//! path to a session cookie; each api decides how data crosses into the stack.
//!
//! Transports: `ip.rs` (tcp, udp; with `mptcp.rs`, `udplite.rs`), `unix.rs` (stream, dgram,
//! seqpacket), `packet.rs` (raw Ethernet), `shm.rs` (shared-memory rings, no socket). Apis: `basic.rs`,
//! `mmsg.rs`, `zerocopy.rs`, `sendfile.rs`, `splice.rs`, `uring.rs`. See docs/transports.md.

pub mod basic;
pub mod cookie;
pub mod crr;
pub mod ip;
pub mod knobs;
pub mod mmsg;
pub mod mptcp;
pub mod packet;
pub mod registry;
pub mod sendfile;
pub mod shm;
pub mod splice;
pub mod sys;
pub mod tcpinfo;
pub mod udplite;
pub mod unix;
pub mod uring;
pub mod zerocopy;

pub use registry::{check, probe, probe_api, supported_apis, wrap, Probe, Registry, Side};
