//! The QUIC performance protocol (draft-banks-quic-performance, ALPN `perf`), which msquic's
//! secnetperf and quinn's perf tool speak: a client opens one bidirectional stream per
//! request, writes the response size it wants (8 bytes, big-endian), then any upload, and
//! finishes its side; the server discards the upload and answers with that many bytes,
//! then finishes its side. Both ends, on the `quic` transport's driver, so that netsweep's
//! QUIC can be checked against stacks it did not write (aioquic, in the tests).

use super::config;
use super::driver::{first_connection, lost, socket, Driver};
use crate::tls::identity::{fingerprint, SERVER_NAME};
use quinn_proto::{Dir, ReadError, StreamId};
use socket2::{SockAddr, Socket};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

pub use config::PERF_ALPN as ALPN;
/// The largest response a netsweep `perf` server sends for one request.
pub const MAX_RESPONSE: u64 = 1 << 30;
/// Zeros a response or an upload is written from.
static ZEROS: [u8; 65_536] = [0; 65_536];

/// One request's outcome, as the client saw it.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Response bytes received (the stream's data after the request).
    pub received: u64,
    /// From the first packet to the handshake's end.
    pub handshake: Duration,
    /// From the request's first byte to the response's last.
    pub transfer: Duration,
    /// The SHA-256 fingerprint of the certificate the server presented.
    pub certificate: String,
}

/// Requests `response` bytes after uploading `upload` from the `perf` server at `server`,
/// whose certificate has the fingerprint `pin`; every wait ends by `timeout` from now.
pub fn fetch(
    server: SocketAddr,
    pin: String,
    response: u64,
    upload: u64,
    timeout: Duration,
) -> io::Result<Fetched> {
    let deadline = Instant::now() + timeout;
    let any = SocketAddr::new(
        if server.is_ipv4() {
            IpAddr::from([0u8; 4])
        } else {
            IpAddr::from([0u16; 8])
        },
        0,
    );
    let (sock, _) = socket(any, &Default::default())?;
    sock.connect(&SockAddr::from(server))?;
    let config = config::client_for(pin, ALPN, false, None).map_err(io::Error::other)?;
    let mut ep = quinn_proto::Endpoint::new(config::endpoint(), None, true, None);
    let (handle, conn) = ep
        .connect(Instant::now(), config, server, SERVER_NAME)
        .map_err(|e| io::Error::other(format!("QUIC connect: {e}")))?;
    let mut d = Driver::new(sock, ep, handle, conn);
    let started = Instant::now();
    d.until(deadline, "the QUIC handshake", |d| d.connected)?;
    let handshake = started.elapsed();
    let certificate = d
        .conn
        .crypto_session()
        .peer_identity()
        .and_then(|p| {
            p.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                .ok()
        })
        .and_then(|c| c.first().map(|c| fingerprint(c)))
        .unwrap_or_default();
    let id = d
        .conn
        .streams()
        .open(Dir::Bi)
        .ok_or_else(|| io::Error::other("the perf server allows no stream"))?;
    let asked = Instant::now();
    let mut head = response.to_be_bytes().to_vec();
    let mut left = upload;
    let mut finished = false;
    let mut received = 0u64;
    let mut done = false;
    while !done {
        // The request: the size, the upload, the end of the client's side.
        while !finished {
            let n = if !head.is_empty() {
                write(&mut d, id, &head)?
            } else if left > 0 {
                write(&mut d, id, &ZEROS[..left.min(ZEROS.len() as u64) as usize])?
            } else {
                d.conn
                    .send_stream(id)
                    .finish()
                    .map_err(|e| io::Error::other(format!("QUIC stream: {e}")))?;
                finished = true;
                break;
            };
            if n == 0 {
                break;
            }
            if !head.is_empty() {
                head.drain(..n);
            } else {
                left -= n as u64;
            }
        }
        let (got, fin) = discard(&mut d, id)?;
        received += got;
        done = fin;
        if !done {
            if let Some(why) = &d.lost {
                return Err(lost(why, "the perf response"));
            }
            if !d.turn(deadline)? {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the perf response stopped at {received} of {response} bytes"),
                ));
            }
        }
    }
    let transfer = asked.elapsed();
    d.close(0, b"done");
    Ok(Fetched {
        received,
        handshake,
        transfer,
        certificate,
    })
}

/// Writes what the stream takes of `data`: 0 when its window is full.
fn write(d: &mut Driver, id: StreamId, data: &[u8]) -> io::Result<usize> {
    match d.conn.send_stream(id).write(data) {
        Ok(n) => Ok(n),
        Err(quinn_proto::WriteError::Blocked) => Ok(0),
        Err(e) => Err(io::Error::other(format!("QUIC stream: {e}"))),
    }
}

/// Reads and drops what `id` has: (bytes, whether the peer finished it).
fn discard(d: &mut Driver, id: StreamId) -> io::Result<(u64, bool)> {
    let mut keep = |_: &[u8]| {};
    consume(d, id, &mut keep)
}

/// Reads what `id` has in order, handing each chunk to `each`: (bytes, finished).
fn consume(d: &mut Driver, id: StreamId, each: &mut dyn FnMut(&[u8])) -> io::Result<(u64, bool)> {
    let mut rs = d.conn.recv_stream(id);
    let mut chunks = match rs.read(true) {
        Ok(c) => c,
        Err(quinn_proto::ReadableError::ClosedStream) => return Ok((0, true)),
        Err(e) => return Err(io::Error::other(format!("QUIC stream: {e}"))),
    };
    let mut n = 0u64;
    let fin = loop {
        match chunks.next(usize::MAX) {
            Ok(Some(c)) => {
                n += c.bytes.len() as u64;
                each(&c.bytes);
            }
            Ok(None) => break true,
            Err(ReadError::Blocked) => break false,
            Err(ReadError::Reset(code)) => {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    format!("the peer reset the QUIC stream (code {code})"),
                ))
            }
        }
    };
    if chunks.finalize().should_transmit() {
        d.flush()?;
    }
    Ok((n, fin))
}

/// What a `perf` server did for one connection.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// Requests answered in full.
    pub requests: u64,
    /// Response bytes sent.
    pub sent: u64,
    /// Upload bytes received (and discarded).
    pub received: u64,
}

/// One request on the server: the size read so far, then what is left to send.
#[derive(Debug, Default)]
struct Request {
    head: Vec<u8>,
    upload: u64,
    finished: bool,
    left: Option<u64>,
}

/// Serves one connection of the performance protocol on `sock` (bound, not connected),
/// from `peer` when given, until the client closes it; every wait ends by `deadline`.
pub fn serve(sock: Socket, peer: Option<IpAddr>, deadline: Instant) -> io::Result<Served> {
    let server = config::perf_server().map_err(io::Error::other)?;
    let (ep, handle, conn, _, _) = first_connection(&sock, server, peer, deadline)?;
    let mut d = Driver::new(sock, ep, handle, conn);
    d.until(deadline, "the QUIC handshake", |d| d.connected)?;
    let mut open: HashMap<StreamId, Request> = HashMap::new();
    let mut out = Served::default();
    loop {
        while let Some(id) = d.conn.streams().accept(Dir::Bi) {
            open.insert(id, Request::default());
        }
        let mut answered = Vec::new();
        for (id, r) in open.iter_mut() {
            if !r.finished {
                let head = &mut r.head;
                let (n, fin) = consume(&mut d, *id, &mut |c: &[u8]| {
                    let take = (8 - head.len()).min(c.len());
                    head.extend_from_slice(&c[..take]);
                })?;
                r.upload += n;
                r.finished = fin;
                if fin {
                    let want = <[u8; 8]>::try_from(&r.head[..])
                        .map(u64::from_be_bytes)
                        .map_err(|_| {
                            io::Error::new(
                                io::ErrorKind::InvalidData,
                                "a perf request shorter than its 8-byte size",
                            )
                        })?;
                    if want > MAX_RESPONSE {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("a perf request for {want} bytes (at most {MAX_RESPONSE})"),
                        ));
                    }
                    r.left = Some(want);
                    out.received += r.upload.saturating_sub(8);
                }
            }
            while let Some(left) = r.left.filter(|l| *l > 0) {
                let n = write(&mut d, *id, &ZEROS[..left.min(ZEROS.len() as u64) as usize])?;
                if n == 0 {
                    break;
                }
                r.left = Some(left - n as u64);
                out.sent += n as u64;
            }
            if r.left == Some(0) {
                d.conn
                    .send_stream(*id)
                    .finish()
                    .map_err(|e| io::Error::other(format!("QUIC stream: {e}")))?;
                answered.push(*id);
            }
        }
        for id in answered {
            open.remove(&id);
            out.requests += 1;
        }
        match &d.lost {
            Some(quinn_proto::ConnectionError::ApplicationClosed(_)) => return Ok(out),
            Some(quinn_proto::ConnectionError::ConnectionClosed(c))
                if c.error_code == quinn_proto::TransportErrorCode::NO_ERROR =>
            {
                return Ok(out)
            }
            Some(why) => return Err(lost(why, "a perf connection")),
            None => {}
        }
        if !d.turn(deadline)? {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the perf client did not close its connection in time",
            ));
        }
    }
}
