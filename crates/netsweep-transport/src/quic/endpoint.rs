//! The `quic` endpoint: one bidirectional QUIC stream, the connection under it turned by the
//! thread that sends or receives. A send hands the stream what its send window takes and
//! puts out the packets congestion control allows; a receive copies what arrived in order,
//! waiting (up to its timeout) for packets when nothing has. Between calls the connection
//! is the linger thread's (`linger.rs`).

use super::config;
use super::driver::{lost, Driver};
use super::linger::Linger;
use crate::tls::identity::fingerprint;
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_proto::messages::{GrantedKnobs, QuicGranted};
use quinn_proto::{ReadError, ReadableError, StreamId, WriteError};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// How long a send may wait for room in the stream's window when no receive timeout is set.
const SEND_WITHIN: Duration = Duration::from_secs(30);

/// One side of a `quic` data path after its handshake, on its stream.
#[derive(Debug)]
pub struct QuicEndpoint {
    linger: Linger,
    stream: StreamId,
    /// Messages travel as DATAGRAM frames (`--api datagram`); the stream carried the cookie.
    datagrams: bool,
    timeout: Option<Duration>,
    granted: GrantedKnobs,
    fd: RawFd,
}

impl QuicEndpoint {
    /// The endpoint on `stream` of the connection `d` drives; `granted` holds the socket's
    /// knobs, `presented` the server's own certificate (a client reports the one it saw).
    pub fn new(
        d: Driver,
        stream: StreamId,
        mut granted: GrantedKnobs,
        presented: Option<&str>,
        datagrams: bool,
    ) -> io::Result<Self> {
        let mut q = describe(&d, presented);
        if let Some(cc) = &granted.congestion_control {
            q.congestion_control = cc.clone();
        }
        if datagrams {
            q.streams = format!(
                "DATAGRAM frames (RFC 9221), {} KiB buffered each way; the session cookie on \
                 one bidirectional stream",
                config::DATAGRAM_BUFFER >> 10
            );
        }
        granted.quic = Some(q);
        let fd = d.sock.as_raw_fd();
        Ok(Self {
            linger: Linger::new(d)?,
            stream,
            datagrams,
            timeout: None,
            granted,
            fd,
        })
    }

    fn deadline(&self, default: Duration) -> Instant {
        Instant::now() + self.timeout.unwrap_or(default)
    }
}

/// Copies what `stream` has in order into `buf`: `Some(0)` when the peer finished it,
/// `None` when nothing has arrived.
fn read_into(d: &mut Driver, stream: StreamId, buf: &mut [u8]) -> io::Result<Option<usize>> {
    let mut rs = d.conn.recv_stream(stream);
    let mut chunks = match rs.read(true) {
        Ok(c) => c,
        Err(ReadableError::ClosedStream) => return Ok(Some(0)),
        Err(e) => return Err(io::Error::other(format!("QUIC stream: {e}"))),
    };
    let mut n = 0;
    let mut finished = false;
    let mut reset = None;
    while n < buf.len() {
        match chunks.next(buf.len() - n) {
            Ok(Some(c)) => {
                buf[n..n + c.bytes.len()].copy_from_slice(&c.bytes);
                n += c.bytes.len();
            }
            Ok(None) => {
                finished = true;
                break;
            }
            Err(ReadError::Blocked) => break,
            Err(ReadError::Reset(code)) => {
                reset = Some(code);
                break;
            }
        }
    }
    if chunks.finalize().should_transmit() {
        // Window updates the read earned go out now, not at the next send.
        d.flush()?;
    }
    if let Some(code) = reset.filter(|_| n == 0) {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            format!("the peer reset the QUIC stream (code {code})"),
        ));
    }
    Ok((n > 0 || finished).then_some(n))
}

fn segmentation(d: &Driver) -> String {
    let send = d.gso_refused.clone().unwrap_or_else(|| {
        format!(
            "on: up to {} datagrams per sendmsg (UDP_SEGMENT)",
            super::driver::GSO_SEGMENTS
        )
    });
    let recv = if d.gro {
        "receives coalesced by the kernel (UDP_GRO)"
    } else {
        "one datagram per receive (the kernel refused UDP_GRO)"
    };
    format!("{send}; {recv}")
}

/// What the connection agreed and runs with, read off it.
fn describe(d: &Driver, presented: Option<&str>) -> QuicGranted {
    let session = d.conn.crypto_session();
    let hd = session.handshake_data().and_then(|h| {
        h.downcast::<quinn_proto::crypto::rustls::HandshakeData>()
            .ok()
    });
    let certificate = match presented {
        Some(own) => own.to_string(),
        None => session
            .peer_identity()
            .and_then(|p| {
                p.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                    .ok()
            })
            .and_then(|c| c.first().map(|c| fingerprint(c)))
            .unwrap_or_default(),
    };
    QuicGranted {
        version: "QUIC v1 (RFC 9000)".into(),
        stack: "quinn-proto 0.11 (user space)".into(),
        tls: "TLS 1.3, rustls on ring (AES-GCM or ChaCha20-Poly1305 packet protection)".into(),
        alpn: hd
            .as_ref()
            .and_then(|h| h.protocol.as_deref())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default(),
        certificate,
        congestion_control: "cubic".into(),
        udp_payload: d.conn.current_mtu(),
        mtu_discovery: format!(
            "on: from {} B, probing up to {} B",
            config::INITIAL_UDP_PAYLOAD,
            config::MTU_CEILING
        ),
        segmentation_offload: segmentation(d),
        streams: "one bidirectional stream, opened by the client".into(),
        stream_window: u64::from(config::STREAM_WINDOW),
        send_window: config::SEND_WINDOW,
        lost_packets: d.conn.stats().path.lost_packets,
    }
}

impl QuicEndpoint {
    /// Sends one DATAGRAM frame of `buf`, waiting (up to the timeout) while congestion
    /// control holds the send buffer full.
    fn send_datagram(&mut self, buf: &[u8]) -> io::Result<usize> {
        let deadline = self.deadline(SEND_WITHIN);
        let mut d = self.linger.hold()?;
        d.poll_input()?;
        let max = d.conn.datagrams().max_size().unwrap_or(0);
        if buf.len() > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {}-byte message does not fit one QUIC DATAGRAM frame here (at most {max} \
                     bytes): lower --sizes",
                    buf.len()
                ),
            ));
        }
        let mut data = bytes::Bytes::copy_from_slice(buf);
        loop {
            match d.conn.datagrams().send(data, false) {
                Ok(()) => {
                    d.flush()?;
                    return Ok(buf.len());
                }
                Err(quinn_proto::SendDatagramError::Blocked(back)) => data = back,
                Err(e) => {
                    return Err(io::Error::other(format!("QUIC DATAGRAM: {e}")));
                }
            }
            if let Some(why) = &d.lost {
                return Err(lost(why, "a send"));
            }
            if !d.turn(deadline)? {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "the QUIC DATAGRAM send buffer stayed full",
                ));
            }
        }
    }

    /// Receives one DATAGRAM frame into `buf` (truncated to it), waiting up to the timeout.
    fn recv_datagram(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let deadline = self.timeout.map(|t| Instant::now() + t);
        let mut d = self.linger.hold()?;
        loop {
            if let Some(b) = d.conn.datagrams().recv() {
                let n = b.len().min(buf.len());
                buf[..n].copy_from_slice(&b[..n]);
                return Ok(n);
            }
            if let Some(why) = &d.lost {
                return Err(lost(why, "a receive"));
            }
            let until = deadline.unwrap_or_else(|| Instant::now() + SEND_WITHIN);
            if !d.turn(until)? && deadline.is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "no QUIC DATAGRAM arrived in time",
                ));
            }
        }
    }

    /// Sends on the stream, whatever the api (the session cookie).
    pub fn send_on_stream(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream_send(buf)
    }

    /// Receives from the stream, whatever the api (the session cookie).
    pub fn recv_on_stream(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream_recv(buf)
    }

    fn stream_send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let deadline = self.deadline(SEND_WITHIN);
        let mut d = self.linger.hold()?;
        // Acknowledgements that arrived since the last call open the congestion window.
        d.poll_input()?;
        loop {
            match d.conn.send_stream(self.stream).write(buf) {
                Ok(n) => {
                    d.flush()?;
                    return Ok(n);
                }
                Err(WriteError::Blocked) => {}
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        format!("the QUIC stream took no more data: {e}"),
                    ))
                }
            }
            if let Some(why) = &d.lost {
                return Err(lost(why, "a send"));
            }
            if !d.turn(deadline)? {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "the QUIC stream's window stayed full",
                ));
            }
        }
    }

    fn stream_recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let deadline = self.timeout.map(|t| Instant::now() + t);
        let mut d = self.linger.hold()?;
        loop {
            if let Some(n) = read_into(&mut d, self.stream, buf)? {
                return Ok(n);
            }
            match &d.lost {
                Some(quinn_proto::ConnectionError::ApplicationClosed(c))
                    if c.error_code == quinn_proto::VarInt::from_u32(0) =>
                {
                    return Ok(0)
                }
                Some(why) => return Err(lost(why, "a receive")),
                None => {}
            }
            let until = deadline.unwrap_or_else(|| Instant::now() + SEND_WITHIN);
            if !d.turn(until)? && deadline.is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "nothing arrived on the QUIC stream in time",
                ));
            }
        }
    }
}

impl Endpoint for QuicEndpoint {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.datagrams {
            self.send_datagram(buf)
        } else {
            self.stream_send(buf)
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.datagrams {
            self.recv_datagram(buf)
        } else {
            self.stream_recv(buf)
        }
    }

    fn is_datagram(&self) -> bool {
        self.datagrams
    }

    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.timeout = timeout;
        Ok(())
    }

    fn granted(&self) -> GrantedKnobs {
        let mut g = self.granted.clone();
        if let (Some(q), Ok(d)) = (&mut g.quic, self.linger.hold()) {
            q.udp_payload = d.conn.current_mtu();
            q.lost_packets = d.conn.stats().path.lost_packets;
            q.segmentation_offload = segmentation(&d);
        }
        g
    }

    fn stats(&mut self) -> EndpointStats {
        EndpointStats {
            socket_drops: crate::sys::socket_drops(self.fd),
            ..Default::default()
        }
    }

    fn socket_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }
}

impl Drop for QuicEndpoint {
    fn drop(&mut self) {
        // The close goes out once; the peer has it or ends on its own deadline.
        if let Ok(mut d) = self.linger.hold() {
            d.close(0, b"done");
        }
    }
}
