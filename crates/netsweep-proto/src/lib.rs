//! netsweep-proto: the control protocol between a netsweep client and server, sans-IO.
//!
//! No sockets, threads or clocks live here: the caller moves bytes in and out and decides
//! about timeouts. A session on the wire is:
//!
//! 1. [`preamble`]: the client sends `NSWP` + its version range, the server answers with the
//!    chosen version (0 = mismatch) and its own range;
//! 2. [`frame`]s: a u32 big-endian length (capped at [`MAX_FRAME`] before any allocation)
//!    followed by a JSON body ([`codec`]) holding one typed message ([`messages`]);
//! 3. the order `hello → welcome`, `data_ready → data_bound`, then
//!    `trial_start → ready`, `trial_end → trial_report` pairs, and `bye → bye`, enforced by the
//!    [`Client`] and [`Server`] state machines.
//!
//! Driving a machine: feed received bytes with `handle_input`, write out whatever
//! `poll_transmit` returns, handle each `poll_event`, queue messages with `send`, and call
//! `handle_eof` when the peer closes. An error from `handle_input` or `handle_eof` closes the
//! machine for good and further calls return the same error; a refused `send` (out of order,
//! or a frame too large) leaves the machine as it was.

#![warn(missing_docs)]

pub mod arrival;
pub mod auth;
pub mod client;
pub mod codec;
pub mod error;
pub mod frame;
pub mod messages;
pub mod preamble;
pub mod server;
pub mod stamps;
pub mod text;
pub mod version;

#[cfg(test)]
mod test_alloc;
#[cfg(test)]
mod test_util;

pub use client::{Client, ClientEvent, ClientState};
pub use codec::{decode_message, encode_message};
pub use error::ProtoError;
pub use frame::{encode_frame, FrameDecoder, LEN_BYTES, MAX_FRAME};
pub use messages::*;
pub use preamble::{
    decode_client_preamble, decode_server_preamble, encode_client_preamble, encode_server_preamble,
    ServerReply, CLIENT_PREAMBLE_LEN, SERVER_PREAMBLE_LEN,
};
pub use server::{Server, ServerEvent, ServerState};
pub use version::{negotiate, VersionMismatch, VersionRange, MAGIC, PROTOCOL_MAX, PROTOCOL_MIN};
