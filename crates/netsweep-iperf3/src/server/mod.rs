//! The server side of iperf3's control protocol, so that unmodified `iperf3 -c` clients can run
//! their tests against a netsweep server: the cookie, the parameters (read with a size cap,
//! parsed by [`crate::request`]), the refusals iperf3 clients understand (`ACCESS_DENIED`,
//! `SERVER_ERROR` with iperf3's error code), and one whole test ([`run`]): the data streams, the
//! state sequence to TEST_END, the results exchange, the text `--get-server-output` asks for.
//!
//! Sans policy: the caller decides whether a [`Request`] may run and with what bounds (it
//! builds the [`Config`] — every size already checked), and supplies the test's data
//! connections ([`StreamSource`]): TCP ones arrive on its listener with the test's cookie, UDP
//! ones as connect datagrams on its UDP socket of the same port.

mod report;
pub(crate) mod sockets;
mod streams;
mod test;

pub use report::{bytes_text, rate_text, results_json, text_output};
pub use report::{Interval, StreamFigures, TextHeader};
pub use sockets::is_udp_connect;
pub use test::run;

use crate::outcome::ServerReport;
use crate::request::Request;
use crate::wire::{self, State, COOKIE_SIZE};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// iperf3's error codes (iperf_api.h) that a server sends after `SERVER_ERROR`; the client
/// prints its own text for each.
pub mod codes {
    /// "test duration too long".
    pub const IEDURATION: i32 = 5;
    /// "number of parallel streams too large".
    pub const IENUMSTREAMS: i32 = 6;
    /// "block size too large".
    pub const IEBLOCKSIZE: i32 = 7;
    /// "socket buffer size too large".
    pub const IEBUFSIZE: i32 = 8;
    /// "TCP MSS too large".
    pub const IEMSS: i32 = 10;
    /// "bogus value for --omit".
    pub const IEOMIT: i32 = 12;
    /// "an option you are trying to set is not implemented yet".
    pub const IEUNIMP: i32 = 13;
    /// "invalid burst count".
    pub const IEBURST: i32 = 15;
    /// "no SCTP support available".
    pub const IENOSCTP: i32 = 18;
    /// "block size invalid" (UDP).
    pub const IEUDPBLOCKSIZE: i32 = 20;
    /// "bad TOS value".
    pub const IEBADTOS: i32 = 21;
    /// "cannot be both reverse and bidirectional".
    pub const IEREVERSEBIDIR: i32 = 25;
    /// "total required bandwidth is larger than server limit".
    pub const IETOTALRATE: i32 = 27;
    /// "unable to create a new test" (the server's resources).
    pub const IENEWTEST: i32 = 100;
    /// "unable to receive parameters from client".
    pub const IERECVPARAMS: i32 = 114;
    /// "unable to receive results".
    pub const IERECVRESULTS: i32 = 117;
    /// "unable to set TCP/SCTP NODELAY".
    pub const IESETNODELAY: i32 = 122;
    /// "unable to set TCP/SCTP MSS".
    pub const IESETMSS: i32 = 123;
    /// "unable to set IP TOS".
    pub const IESETTOS: i32 = 125;
    /// "unable to set socket window size".
    pub const IESETWINDOWSIZE: i32 = 130;
    /// "unable to set CPU affinity".
    pub const IEAFFINITY: i32 = 132;
    /// "unable to set TCP_CONGESTION".
    pub const IESETCONGESTION: i32 = 134;
    /// "unable to set socket pacing".
    pub const IESETPACING: i32 = 140;
    /// "test authorization failed".
    pub const IEAUTHTEST: i32 = 142;
    /// "unable to set IP Do-Not-Fragment".
    pub const IESETDONTFRAGMENT: i32 = 145;
    /// "unable to initialize stream".
    pub const IEINITSTREAM: i32 = 201;
    /// "unable to start stream listener".
    pub const IESTREAMLISTEN: i32 = 202;
    /// "unable to accept stream connection".
    pub const IESTREAMACCEPT: i32 = 204;
    /// "unable to write to stream socket".
    pub const IESTREAMWRITE: i32 = 205;
    /// "unable to read from stream".
    pub const IESTREAMREAD: i32 = 206;
}

/// How a server turns a client away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `ACCESS_DENIED`: "the server is busy running a test. try again later".
    Busy,
    /// `SERVER_ERROR` with iperf3's error code and an errno (0: none).
    Error {
        /// iperf3's `i_errno`.
        code: i32,
        /// The errno shown beside it, 0 for none.
        errno: i32,
    },
}

/// Sends `r` on the control connection (best effort: the client may be gone already).
pub fn refuse(ctl: &mut TcpStream, r: Refusal) {
    let mut b = Vec::with_capacity(9);
    match r {
        Refusal::Busy => b.push(State::AccessDenied.to_byte()),
        Refusal::Error { code, errno } => {
            b.push(State::ServerError.to_byte());
            b.extend_from_slice(&code.to_be_bytes());
            b.extend_from_slice(&errno.to_be_bytes());
        }
    }
    let _ = ctl.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = ctl.write_all(&b);
}

/// A data connection of a test, as the caller's listeners received it.
#[derive(Debug)]
pub enum DataSocket {
    /// A TCP connection that sent the test's cookie.
    Tcp(TcpStream),
    /// The sender of a UDP connect datagram on the server's port.
    Udp(SocketAddr),
}

/// Where a test's data connections come from.
pub trait StreamSource {
    /// Called before CREATE_STREAMS: from now on the test's connections are expected.
    fn open(&mut self) -> io::Result<()>;
    /// The next data connection, waiting at most until `until`.
    fn next(&mut self, until: Instant) -> io::Result<DataSocket>;
    /// Called once every data connection arrived: no more are expected.
    fn done(&mut self) {}
}

/// The socket options a client asked for, as the server will set them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SocketOptions {
    /// SO_SNDBUF and SO_RCVBUF (`-w`).
    pub window: Option<u32>,
    /// TCP_NODELAY (`-N`).
    pub nodelay: bool,
    /// TCP_MAXSEG (`-M`).
    pub mss: Option<u32>,
    /// IP_TOS / IPV6_TCLASS (`-S`).
    pub tos: Option<u8>,
    /// TCP_CONGESTION (`-C`).
    pub congestion: Option<String>,
    /// IP_MTU_DISCOVER = DO (`--dont-fragment`).
    pub dont_fragment: bool,
    /// SO_MAX_PACING_RATE in bits per second (`--fq-rate`).
    pub fqrate: Option<u64>,
}

/// One test as the server runs it: every number checked by the caller.
#[derive(Debug, Clone)]
pub struct Config {
    /// UDP (else TCP).
    pub udp: bool,
    /// Bytes per write or datagram.
    pub len: usize,
    /// Streams the client sends on.
    pub to_server: u32,
    /// Streams the server sends on.
    pub from_server: u32,
    /// Bits per second per sending stream (0: as fast as it goes).
    pub rate_bps: u64,
    /// Blocks sent back to back between pauses (0 or 1: none).
    pub burst: u32,
    /// TCP senders: blocks to send across all streams (`-n` rounded up to whole blocks, or
    /// `-k`); None: until TEST_END. UDP senders always send until TEST_END, as iperf3's do,
    /// so that a client bounded by bytes still gets them when datagrams are lost.
    pub blocks: Option<u64>,
    /// Seconds at the start whose figures are discarded (`-O`).
    pub omit: Duration,
    /// 64-bit UDP sequence numbers.
    pub counters_64bit: bool,
    /// TCP senders use sendfile (`-Z`).
    pub zerocopy: bool,
    /// Buffers hold iperf3's repeating digits (else random bytes).
    pub repeating_payload: bool,
    /// Options on every data socket.
    pub sockets: SocketOptions,
    /// Longest the client may stay silent: on the control connection outside the data
    /// phase, and on a stream during it.
    pub idle: Duration,
    /// When the test must be over, whatever the client does.
    pub deadline: Instant,
    /// Send the text output with the results (`--get-server-output`).
    pub output: Option<TextHeader>,
    /// Keep a figure per second.
    pub keep_intervals: bool,
}

/// A test that ran to its results exchange.
#[derive(Debug, Clone)]
pub struct Served {
    /// Every stream's figures, as sent to the client.
    pub streams: Vec<StreamFigures>,
    /// A figure per second (when asked; at most [`MAX_INTERVALS`]).
    pub intervals: Vec<Interval>,
    /// The CPU of the test's threads, percent of its wall time (total, user, system).
    pub cpu: [f64; 3],
    /// The congestion control of the TCP streams.
    pub congestion_used: Option<String>,
    /// The client's results, as it sent them.
    pub client: ServerReport,
    /// Seconds from TEST_RUNNING to TEST_END.
    pub seconds: f64,
}

/// The most per-second figures kept for one test.
pub const MAX_INTERVALS: usize = 3600;

/// The largest client results frame read (iperf3's are ~150 bytes per stream).
pub const MAX_CLIENT_RESULTS: u32 = 256 << 10;

/// Why a test did not reach its results.
#[derive(Debug)]
pub enum Failure {
    /// The client closed or reset the control connection.
    ClientGone(String),
    /// The client stopped the test (CLIENT_TERMINATE: its Ctrl-C).
    ClientTerminated,
    /// The client said nothing for the idle timeout.
    Timeout(String),
    /// The client sent what iperf3 does not.
    Protocol(String),
    /// A data stream failed, or the test reached its deadline.
    Test(String),
    /// The server could not set the test up (memory, a thread, a socket option).
    Server(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::ClientGone(w) => write!(f, "the client went away {w}"),
            Failure::ClientTerminated => {
                write!(f, "the client stopped the test (CLIENT_TERMINATE)")
            }
            Failure::Timeout(w) => write!(f, "timed out waiting for {w}"),
            Failure::Protocol(w) => write!(f, "iperf3 protocol: {w}"),
            Failure::Test(w) => write!(f, "{w}"),
            Failure::Server(w) => write!(f, "{w}"),
        }
    }
}

/// Reads exactly `buf` by `deadline` (a trickling client cannot stretch it).
pub(crate) fn read_by(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads the 37-byte cookie that opens every iperf3 connection, control or data.
pub fn read_cookie(s: &mut TcpStream, timeout: Duration) -> io::Result<[u8; COOKIE_SIZE]> {
    let mut c = [0u8; COOKIE_SIZE];
    read_by(s, &mut c, Instant::now() + timeout)?;
    Ok(c)
}

fn io_failure(e: io::Error, waiting_for: &str) -> Failure {
    use io::ErrorKind::*;
    match e.kind() {
        WouldBlock | TimedOut => Failure::Timeout(waiting_for.to_string()),
        _ => Failure::ClientGone(format!("while the server waited for {waiting_for} ({e})")),
    }
}

/// One length-prefixed JSON frame, refused before anything is allocated when it announces
/// more than `max` bytes.
pub(crate) fn read_frame(
    s: &mut TcpStream,
    max: u32,
    timeout: Duration,
    what: &str,
) -> Result<Vec<u8>, Failure> {
    let deadline = Instant::now() + timeout;
    let mut h = [0u8; 4];
    read_by(s, &mut h, deadline).map_err(|e| io_failure(e, what))?;
    let n = wire::frame_len(h);
    if n > max {
        return Err(Failure::Protocol(format!(
            "{what} announces {n} bytes, more than the {max} this server reads"
        )));
    }
    let mut body = vec![0u8; n as usize];
    read_by(s, &mut body, deadline).map_err(|e| io_failure(e, what))?;
    Ok(body)
}

/// After the cookie of a new test: PARAM_EXCHANGE, then the client's parameters (at most
/// `max_json` bytes, within `timeout`), parsed.
pub fn read_request(
    ctl: &mut TcpStream,
    max_json: u32,
    timeout: Duration,
) -> Result<Request, Failure> {
    ctl.set_write_timeout(Some(timeout))
        .map_err(|e| io_failure(e, "PARAM_EXCHANGE to go out"))?;
    // Each state byte goes out at once: with Nagle, TEST_START waited for the client's delayed
    // ACK of CREATE_STREAMS (~40 ms), so the server's test window began that long before the
    // client's, and every rate the client printed from it was low (issue 41).
    ctl.set_nodelay(true)
        .map_err(|e| io_failure(e, "TCP_NODELAY on the control connection"))?;
    ctl.write_all(&[State::ParamExchange.to_byte()])
        .map_err(|e| io_failure(e, "PARAM_EXCHANGE to go out"))?;
    let text = read_frame(ctl, max_json, timeout, "the test parameters")?;
    Request::parse(&text).map_err(Failure::Protocol)
}
