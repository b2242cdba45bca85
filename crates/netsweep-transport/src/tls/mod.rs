//! `tls`: TLS 1.3 over TCP (api basic only: the registry refuses others before `listen`
//! and `connect` are reached), records sealed and opened in this process by rustls (ring's
//! AES-GCM and ChaCha20-Poly1305) on the kernel's TCP socket. The client presents the
//! session cookie in the clear, as `tcp` does, then shakes hands; it accepts the certificate
//! whose fingerprint the session announced (and `--tls-pin`, when given, must match that).
//! The server presents one identity per process (`identity.rs`). What the handshake agreed,
//! and whether the kernel could seal records itself (kTLS), is in each side's granted knobs.

pub mod endpoint;
pub mod identity;
pub mod pin;
pub mod trust;

use crate::basic::ConnListener as _;
use crate::descriptor::{probe_socket, Descriptor, Peer, MESSAGES};
use crate::ip::{self, StreamListener};
use crate::knobs;
use endpoint::TlsEndpoint;
use netsweep_endpoint::{DataListener, Endpoint, Footprint};
use netsweep_model::spec::{Api, Transport};
use netsweep_proto::messages::{DataEndpoint, SessionSetup};
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

/// `tls`: TLS 1.3 over the kernel's TCP, in user space.
pub static TLS: Descriptor = Descriptor {
    transport: Transport::Tls,
    family: None,
    default_ceiling: 8 << 20,
    max_message: None,
    apis: &[Api::Basic],
    patterns: MESSAGES,
    knobs: knobs::TCP,
    polls: false,
    probe,
    listen,
    footprint,
    connect,
    crr: None,
    unbuilt: crate::descriptor::USER_SPACE_UNBUILT,
    api_limits: &[],
};

fn probe() -> Result<Option<socket2::Socket>, String> {
    identity::server()?;
    probe_socket(Transport::Tls, || {
        ip::open(Transport::Tcp, IpAddr::V4(Ipv4Addr::LOCALHOST))
    })
}

/// What one session's TLS state holds: the records in flight each way and the plaintext
/// buffered on both sides, with room for rustls' own state.
fn footprint(_: &SessionSetup) -> Footprint {
    Footprint {
        memory: 4 * endpoint::SEND_BUFFER as u64,
        tmpfs: 0,
    }
}

/// How long a client has, after presenting the cookie, to finish the handshake.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(5);

fn listen(
    setup: &SessionSetup,
    bind: IpAddr,
    _peer: IpAddr,
    _api: Api,
) -> io::Result<Box<dyn DataListener>> {
    let id = identity::server().map_err(io::Error::other)?;
    Ok(Box::new(TlsListener {
        inner: StreamListener::open(Transport::Tcp, bind, &setup.server_knobs)?,
        id,
    }))
}

/// The server's `tls` listener: a TCP listener whose connection, once it presented the
/// cookie, shakes hands with the process's identity.
#[derive(Debug)]
struct TlsListener {
    inner: StreamListener,
    id: &'static identity::Identity,
}

impl DataListener for TlsListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            tls_fingerprint: Some(self.id.fingerprint.clone()),
            ..self.inner.endpoint()
        }
    }

    fn accept(&mut self, cookie: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let deadline = Instant::now() + timeout;
        let conn = self.inner.accept(cookie, timeout)?;
        let by = (Instant::now() + HANDSHAKE_WITHIN).min(deadline);
        Ok(Box::new(TlsEndpoint::server(conn, self.id, by)?))
    }
}

/// The certificate fingerprint the session announced for a `tls` or `quic` data path.
pub fn announced(p: &Peer<'_>) -> io::Result<String> {
    let want = p.data.tls_fingerprint.clone().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the server announced no certificate for its tls or quic data path (an older \
             netsweep?): upgrade it, or use -t tcp or -t udp",
        )
    })?;
    identity::parse_pin(&want).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the server's announced certificate: {e}"),
        )
    })
}

fn connect(p: &Peer<'_>, cookie: u64, _api: Api) -> io::Result<Box<dyn Endpoint>> {
    let config = pin::client_config(announced(p)?).map_err(io::Error::other)?;
    let deadline = Instant::now() + p.timeout;
    let conn = ip::stream_connect(Transport::Tcp, p.addr(), p.knobs, cookie, p.timeout)?;
    Ok(Box::new(TlsEndpoint::client(conn, config, deadline)?))
}
