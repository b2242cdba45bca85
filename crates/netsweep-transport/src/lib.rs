//! netsweep-transport: the transport registry and one file per transport and api. Each
//! transport opens real kernel sockets, applies the knobs, reads them back, and binds its data
//! path to a session cookie; each api decides how data crosses into the stack.
//!
//! Every transport is described by one [`Descriptor`] in its own file, and `registry.rs`
//! is the table of them (its `//!` says how to add one). Transports: `ip.rs` (tcp, udp; with
//! `mptcp.rs`, `udplite.rs`), `unix.rs` (stream, dgram, seqpacket), `packet/` (raw Ethernet),
//! `shm/` (shared-memory rings, no socket), `mpi/` (MPI, feature `mpi`), `xdp/` (AF_XDP, feature
//! `xdp`). Apis: `api.rs` picks one for a connection;
//! `basic.rs`, `mmsg.rs`, `gso.rs`, `zerocopy.rs`, `sendfile.rs`, `splice.rs`, `uring/`. See
//! docs/transports.md.

#![warn(missing_docs)]

pub mod api;
pub mod basic;
pub mod cookie;
pub mod crr;
pub mod descriptor;
pub mod gso;
pub mod ip;
pub mod knobs;
pub mod mmsg;
pub mod mpi;
pub mod mptcp;
pub mod packet;
pub mod quic;
pub mod registry;
pub mod sendfile;
pub mod shm;
pub mod splice;
pub mod sys;
pub mod tcpinfo;
pub mod tls;
pub mod udplite;
pub mod unix;
pub mod uring;
pub mod xdp;
pub mod zerocopy;

pub use api::{wrap, Side};
pub use descriptor::{why_not, Descriptor};
pub use registry::{
    check, descriptor, probe, probe_api, supported_apis, Probe, Registry, TRANSPORTS,
};
