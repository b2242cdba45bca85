//! Entry points for the cargo-fuzz targets in `fuzz/`, not an API: what this client reads
//! from an iperf3 server (the control connection's state bytes and results frame, the UDP
//! data datagrams), driven without sockets. The sans-IO pieces are public in [`crate::wire`].

use crate::control::Control;
use crate::data::UdpAccount;
use crate::error::Iperf3Error;
use crate::outcome::ServerReport;
use crate::wire::State;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// A server's control bytes, handed out `piece` bytes per read; what the client writes is
/// dropped.
#[derive(Debug)]
struct Script<'a> {
    bytes: &'a [u8],
    piece: usize,
}

impl Read for Script<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.piece.max(1)).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

impl Write for Script<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The client's reads of one test's control connection, in `run_test`'s order, over the
/// server's bytes `server` (`piece` bytes per read; no data phase): the server's report, or
/// the error the client would stop with.
pub fn control_replies(server: &[u8], piece: usize) -> Result<ServerReport, Iperf3Error> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, crate::DEFAULT_PORT));
    let mut c = Control::over(
        Script {
            bytes: server,
            piece,
        },
        addr,
        Duration::from_secs(1),
    );
    for s in [
        State::ParamExchange,
        State::CreateStreams,
        State::TestStart,
        State::TestRunning,
        State::ExchangeResults,
    ] {
        c.expect(s, "a state")?;
    }
    let frame = c.read_frame("the server's results JSON")?;
    let report = ServerReport::parse(&frame).map_err(Iperf3Error::BadResults)?;
    c.expect(State::DisplayResults, "DISPLAY_RESULTS")?;
    Ok(report)
}

/// The UDP receiver's accounting (reverse UDP tests) of the server's datagrams.
#[derive(Debug, Default)]
pub struct UdpReceiver(UdpAccount);

impl UdpReceiver {
    /// Accounts one datagram arrived at the wall-clock time (seconds, microseconds).
    pub fn on_datagram(&mut self, d: &[u8], arrival: (u32, u32)) {
        self.0.on_datagram(d, arrival);
    }

    /// (highest sequence number, lost, out of order, jitter in seconds).
    pub fn counts(&self) -> (u64, u64, u64, f64) {
        let a = &self.0;
        (a.highest, a.lost, a.out_of_order, a.jitter_s)
    }
}
