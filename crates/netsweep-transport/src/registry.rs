//! The transport registry: makes endpoints for a session by transport name and says whether
//! each transport works on this host (and if not, why).

use crate::{ip, unix};
use netsweep_core::endpoint::{DataListener, Endpoint, TransportFactory};
use netsweep_core::spec::Transport;
use netsweep_proto::messages::{DataEndpoint, Knobs, SessionSetup};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

/// Every transport this build implements, behind one [`TransportFactory`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Registry;

fn parse(setup: &SessionSetup) -> io::Result<Transport> {
    Transport::parse(&setup.transport).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "unknown transport {:?}: `netsweep list` shows the ones this build has",
                setup.transport
            ),
        )
    })
}

impl TransportFactory for Registry {
    fn listen(&self, setup: &SessionSetup, bind: IpAddr) -> io::Result<Box<dyn DataListener>> {
        let k = &setup.server_knobs;
        Ok(match parse(setup)? {
            Transport::Tcp => Box::new(ip::TcpDataListener::open(bind, k)?),
            Transport::Udp => Box::new(ip::UdpDataListener::open(bind, k)?),
            Transport::UnixStream => Box::new(unix::UnixStreamListener::open(k)?),
            Transport::UnixDgram => Box::new(unix::UnixDgramListener::open(k)?),
        })
    }

    fn connect(
        &self,
        setup: &SessionSetup,
        knobs: &Knobs,
        server: IpAddr,
        data: &DataEndpoint,
        cookie: u64,
        timeout: Duration,
    ) -> io::Result<Box<dyn Endpoint>> {
        let t = parse(setup)?;
        let path = || {
            data.path.as_deref().map(Path::new).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the server sent no socket path for a unix transport",
                )
            })
        };
        match t {
            Transport::Tcp => {
                ip::tcp_connect(SocketAddr::new(server, data.port), knobs, cookie, timeout)
            }
            Transport::Udp => {
                ip::udp_connect(SocketAddr::new(server, data.port), knobs, cookie, timeout)
            }
            Transport::UnixStream => unix::stream_connect(path()?, knobs, cookie, timeout),
            Transport::UnixDgram => unix::dgram_connect(path()?, knobs, cookie, timeout),
        }
    }
}

/// Whether a transport works here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub transport: Transport,
    pub available: bool,
    /// Why not, when unavailable.
    pub reason: Option<String>,
}

/// Tries to open a socket of the transport's kind.
pub fn probe(t: Transport) -> Probe {
    use socket2::{Domain, Protocol, Socket, Type};
    let r = match t {
        Transport::Tcp => Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).map(drop),
        Transport::Udp => Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map(drop),
        Transport::UnixStream => Socket::new(Domain::UNIX, Type::STREAM, None).map(drop),
        Transport::UnixDgram => Socket::new(Domain::UNIX, Type::DGRAM, None).map(drop),
    };
    Probe {
        transport: t,
        available: r.is_ok(),
        reason: r.err().map(|e| format!("cannot open a socket: {e}")),
    }
}
