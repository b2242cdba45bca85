//! `quic`: QUIC v1 (RFC 9000) over UDP — streams, loss recovery, congestion control and the
//! TLS 1.3 handshake all in this process (quinn-proto, rustls on ring), driven on the
//! thread that sends or receives. One connection per session, its messages on one
//! bidirectional stream the client opens; the client's first bytes on it are the session
//! cookie. The server binds one UDP socket per session, answers only the session's control
//! peer (other sources are ignored and counted), presents the process's TLS identity (the
//! fingerprint the session announced; `--tls-pin` holds it to the operator's), and holds
//! packets to the 3× anti-amplification limit until the client's address is validated
//! (quinn-proto enforces RFC 9000 §8.1).

pub mod config;
pub mod driver;
pub mod endpoint;
pub mod linger;
pub mod perf;

use crate::descriptor::{probe_socket, Descriptor, Peer, MESSAGES};
use crate::ip;
use crate::knobs::{self, Knob};
use crate::tls::identity::{self, SERVER_NAME};
use crate::{cookie, tls};
use driver::Driver;
use endpoint::QuicEndpoint;
use netsweep_endpoint::{DataListener, Endpoint, Footprint};
use netsweep_model::spec::{Api, Transport};
use netsweep_proto::messages::{DataEndpoint, Knobs, SessionSetup};
use quinn_proto::{Dir, StreamId};
use socket2::{SockAddr, Socket};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The knobs of a `quic` socket: IP's (its buffers, TOS, priority, busy polling), and the
/// congestion controller (quinn-proto's, not the kernel's).
pub const QUIC_KNOBS: &[Knob] = &[
    Knob::CongestionControl,
    Knob::Sndbuf,
    Knob::Rcvbuf,
    Knob::Tos,
    Knob::BusyPoll,
    Knob::Priority,
];

/// `quic`: QUIC v1 in user space over the kernel's UDP.
pub static QUIC: Descriptor = Descriptor {
    transport: Transport::Quic,
    family: None,
    default_ceiling: 8 << 20,
    max_message: None,
    apis: &[Api::Basic, Api::Datagram],
    patterns: MESSAGES,
    knobs: QUIC_KNOBS,
    polls: false,
    probe,
    listen,
    footprint,
    connect,
    crr: None,
    unbuilt: crate::descriptor::USER_SPACE_UNBUILT,
    api_limits: &[(Api::Datagram, DATAGRAM_MAX)],
};

/// The largest message one DATAGRAM frame carries in a 1200-byte packet, the size QUIC
/// starts with and never goes below: 1200 less the short header (flags, an 8-byte
/// connection ID, up to 4 bytes of packet number), the frame's type and length (9 bytes at
/// most) and the 16-byte AEAD tag.
pub const DATAGRAM_MAX: u64 = 1200 - (1 + 8 + 4) - 9 - 16;

fn probe() -> Result<Option<socket2::Socket>, String> {
    config::server(false, None)?;
    probe_socket(Transport::Quic, || {
        ip::open(Transport::Udp, IpAddr::V4(Ipv4Addr::LOCALHOST))
    })
}

/// What one session's connection holds: the send window's data, one stream's receive
/// window, and the datagram buffers.
fn footprint(_: &SessionSetup) -> Footprint {
    Footprint {
        memory: config::SEND_WINDOW + u64::from(config::STREAM_WINDOW) + 3 * 65_536,
        tmpfs: 0,
    }
}

/// How long a client has, from its first packet, to finish the handshake and present the
/// cookie.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(5);

fn listen(
    setup: &SessionSetup,
    bind: IpAddr,
    peer: IpAddr,
    api: Api,
) -> io::Result<Box<dyn DataListener>> {
    let datagrams = api == Api::Datagram;
    let cc = setup.server_knobs.congestion_control.as_deref();
    let server = config::server(datagrams, cc)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let id = identity::server().map_err(io::Error::other)?;
    let (sock, notes) = driver::socket(SocketAddr::new(bind, 0), &setup.server_knobs)?;
    let port = sock.local_addr()?.as_socket().map_or(0, |a| a.port());
    Ok(Box::new(QuicListener {
        sock: Some((sock, notes)),
        knobs: setup.server_knobs.clone(),
        port,
        peer,
        server,
        fingerprint: id.fingerprint.clone(),
        datagrams,
    }))
}

/// The server's `quic` data socket for one session, waiting for its client's handshake.
#[derive(Debug)]
struct QuicListener {
    sock: Option<(Socket, Vec<String>)>,
    knobs: Knobs,
    port: u16,
    peer: IpAddr,
    server: std::sync::Arc<quinn_proto::ServerConfig>,
    fingerprint: String,
    datagrams: bool,
}

impl DataListener for QuicListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: self.port,
            tls_fingerprint: Some(self.fingerprint.clone()),
            ..Default::default()
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let (sock, notes) = self
            .sock
            .take()
            .ok_or_else(|| io::Error::other("the quic data socket was already handed out"))?;
        let deadline = Instant::now() + timeout;
        let first =
            driver::first_connection(&sock, self.server.clone(), Some(self.peer), deadline)?;
        let (ep, handle, conn, from, strangers) = first;
        let v6 = from.is_ipv6();
        let mut granted = knobs::granted(&sock, &self.knobs, Transport::Quic, v6, notes);
        granted.congestion_control = Some(controller_name(&self.knobs));
        if strangers > 0 {
            granted.notes.push(format!(
                "{strangers} datagram(s) to the data port from addresses other than the \
                 client's ({}) were ignored",
                self.peer
            ));
        }
        let mut d = Driver::new(sock, ep, handle, conn);
        let by = (Instant::now() + HANDSHAKE_WITHIN).min(deadline);
        d.until(by, "the QUIC handshake", |d| d.connected)?;
        let mut stream = None;
        d.until(by, "the client's QUIC stream", |d| {
            stream = d.conn.streams().accept(Dir::Bi);
            stream.is_some()
        })?;
        let stream = stream.ok_or_else(|| io::Error::other("no QUIC stream"))?;
        let mut got = [0u8; cookie::LEN];
        let mut have = 0;
        let mut ep =
            QuicEndpoint::new(d, stream, granted, Some(&self.fingerprint), self.datagrams)?;
        ep.set_recv_timeout(Some(cookie::left(by, "the client's session cookie")?))?;
        while have < got.len() {
            match ep.recv_on_stream(&mut got[have..])? {
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the QUIC client closed its stream before its session cookie",
                    ))
                }
                n => have += n,
            }
        }
        if got != want.to_be_bytes() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the QUIC client presented another session's cookie",
            ));
        }
        ep.set_recv_timeout(None)?;
        Ok(Box::new(ep))
    }
}

/// The name of the congestion controller `k` asks for (checked when its configuration was
/// made).
fn controller_name(k: &Knobs) -> String {
    config::controller(k.congestion_control.as_deref()).map_or_else(|e| e, |(_, n)| n.to_string())
}

fn connect(p: &Peer<'_>, cookie: u64, api: Api) -> io::Result<Box<dyn Endpoint>> {
    let want = tls::announced(p)?;
    let datagrams = api == Api::Datagram;
    let cc = p.knobs.congestion_control.as_deref();
    let config = config::client(want, datagrams, cc)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let server = p.addr();
    let any: IpAddr = if server.is_ipv4() {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u16; 8])
    };
    let (sock, notes) = driver::socket(SocketAddr::new(any, 0), p.knobs)?;
    sock.connect(&SockAddr::from(server))?;
    let mut granted = knobs::granted(&sock, p.knobs, Transport::Quic, server.is_ipv6(), notes);
    granted.congestion_control = Some(controller_name(p.knobs));
    let mut ep = quinn_proto::Endpoint::new(config::endpoint(), None, true, None);
    let (handle, conn) = ep
        .connect(Instant::now(), config, server, SERVER_NAME)
        .map_err(|e| io::Error::other(format!("QUIC connect: {e}")))?;
    let mut d = Driver::new(sock, ep, handle, conn);
    let deadline = Instant::now() + p.timeout.min(HANDSHAKE_WITHIN);
    d.until(deadline, "the QUIC handshake", |d| d.connected)?;
    let stream: StreamId = d
        .conn
        .streams()
        .open(Dir::Bi)
        .ok_or_else(|| io::Error::other("the QUIC server allows no stream"))?;
    let mut ep = QuicEndpoint::new(d, stream, granted, None, datagrams)?;
    let c = cookie.to_be_bytes();
    let mut sent = 0;
    while sent < c.len() {
        sent += ep.send_on_stream(&c[sent..])?;
    }
    Ok(Box::new(ep))
}
