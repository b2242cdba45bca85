//! netsweep speaking iperf3's control protocol, both roles. As client: one test (one stream,
//! TCP or UDP, forward or reverse) against an unmodified `iperf3 -s`, returning what this
//! client measured and what the server reported. As server ([`server`]): whole tests for
//! unmodified `iperf3 -c` clients, under bounds its caller sets. The protocol's bytes are in
//! [`wire`] and [`request`] (sans-IO, pure parsers), the results in [`outcome`], the client's
//! sockets in `control` (the state sequence) and `data` (the data loops). No policy lives
//! here: what a server allows is its caller's. docs/iperf3.md describes what is spoken.
#![warn(missing_docs)]

mod control;
mod data;
pub mod error;
// Only in cargo-fuzz builds (`--cfg fuzzing`): the fuzz targets' entry points are no part
// of the library a user links.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
pub mod outcome;
pub mod request;
pub mod server;
pub mod wire;

pub use control::run_test;
pub use error::Iperf3Error;
pub use outcome::{ClientMeasure, Role, ServerReport, ServerStream, TestOutcome};
pub use wire::Bound;

use std::time::Duration;

/// iperf3's default server port.
pub const DEFAULT_PORT: u16 = 5201;

/// One iperf3 test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestParams {
    /// UDP (else TCP).
    pub udp: bool,
    /// Message size: bytes per write (TCP) or per datagram including iperf3's 16-byte header
    /// (UDP); iperf3's `len`.
    pub len: usize,
    /// Bytes (iperf3's `num`) or a duration.
    pub bound: Bound,
    /// The server sends (iperf3's `-R`).
    pub reverse: bool,
    /// UDP sending rate in bit/s, whichever end sends; None: as fast as possible.
    pub udp_rate_bps: Option<u64>,
    /// The longest wait on the server, at every step (connect, each state, the data).
    pub timeout: Duration,
    /// After the last byte, how long the sender waits (TCP: once the kernel has every byte
    /// acknowledged) before TEST_END, so the server reads the tail before it closes its data
    /// sockets; as receiver, the quiet time that ends a UDP test short of its bytes.
    pub settle: Duration,
}

impl TestParams {
    /// A test with the default timeout (10 s) and settle time (20 ms).
    pub fn new(udp: bool, len: usize, bound: Bound, reverse: bool) -> TestParams {
        TestParams {
            udp,
            len,
            bound,
            reverse,
            udp_rate_bps: None,
            timeout: Duration::from_secs(10),
            settle: Duration::from_millis(20),
        }
    }

    /// Why iperf3 cannot run these parameters, if it cannot.
    pub fn check(&self) -> Result<(), Iperf3Error> {
        let bad = |m: String| Err(Iperf3Error::Params(m));
        if self.udp && !(wire::UDP_HEADER_64..=65507).contains(&self.len) {
            return bad(format!(
                "UDP message size {} is outside 16..=65507 bytes (iperf3's header takes 16)",
                self.len
            ));
        }
        if !self.udp && !(1..=(128 << 20)).contains(&self.len) {
            return bad(format!(
                "TCP message size {} is outside 1 B..=128 MiB",
                self.len
            ));
        }
        match self.bound {
            Bound::Bytes(0) => return bad("a test of 0 bytes".into()),
            Bound::Bytes(n) if n > wire::MAX_NUM => {
                return bad(format!(
                    "{n} bytes: iperf3 servers read the byte count as a C int, at most {}",
                    wire::MAX_NUM
                ))
            }
            Bound::Duration(d) if d.is_zero() || d > Duration::from_secs(86400) => {
                return bad(format!("duration {d:?} is outside (0, 24 h]"))
            }
            _ => {}
        }
        if self.timeout.is_zero() {
            return bad("a zero timeout".into());
        }
        Ok(())
    }
}
