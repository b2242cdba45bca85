//! The transport registry: makes endpoints for a session by transport and api name, says which
//! apis each transport supports, and whether each transport and api works on this host (and if
//! not, why: missing privilege, kernel feature, sysctl).

use crate::basic::{BasicEndpoint, Conn, ConnListener};
use crate::mmsg::MmsgEndpoint;
use crate::sendfile::SendfileEndpoint;
use crate::splice::SpliceEndpoint;
use crate::uring::UringEndpoint;
use crate::zerocopy::ZerocopyEndpoint;
use crate::{ip, packet, shm, unix};
use netsweep_core::endpoint::{CrrConnector, DataListener, Endpoint, TransportFactory};
use netsweep_core::spec::{Api, Pattern, Transport};
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs, SessionSetup};
use socket2::SockAddr;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

/// Every transport this build implements, behind one [`TransportFactory`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Registry;

/// The apis `t` supports, `basic` first.
pub fn supported_apis(t: Transport) -> &'static [Api] {
    t.apis()
}

/// Checks a transport × api × pattern combination; the error lists what `t` supports.
pub fn check(t: Transport, api: Api, pattern: Pattern) -> Result<(), String> {
    t.check_api(api, pattern)
}

fn unsupported(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, msg)
}

/// Parses and checks the session's transport, api and pattern.
fn parse(setup: &SessionSetup) -> io::Result<(Transport, Api)> {
    let t = Transport::parse(&setup.transport).ok_or_else(|| {
        unsupported(format!(
            "unknown transport {:?}: `netsweep list` shows the ones this build has",
            setup.transport
        ))
    })?;
    let api = if setup.api.is_empty() {
        Api::Basic
    } else {
        Api::parse(&setup.api).ok_or_else(|| {
            unsupported(format!(
                "unknown api {:?}: `netsweep list` shows the ones this build has",
                setup.api
            ))
        })?
    };
    let pattern = Pattern::parse(&setup.pattern).unwrap_or(Pattern::Stream);
    check(t, api, pattern).map_err(unsupported)?;
    Ok((t, api))
}

/// Which end an endpoint serves: some apis act on one side only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// Wraps a connected socket in the endpoint of `api`.
pub fn wrap(conn: Conn, api: Api, side: Side) -> io::Result<Box<dyn Endpoint>> {
    Ok(match (api, side) {
        (Api::Basic, _) => Box::new(BasicEndpoint::new(conn)),
        (Api::Mmsg, _) => Box::new(MmsgEndpoint::new(conn)),
        (Api::Zerocopy, _) => Box::new(ZerocopyEndpoint::new(conn)?),
        (Api::Uring, _) => Box::new(UringEndpoint::new(conn)?),
        (Api::Sendfile, Side::Client) => Box::new(SendfileEndpoint::new(conn)),
        (Api::Splice, Side::Server) => Box::new(SpliceEndpoint::new(conn)),
        (Api::Sendfile, Side::Server) => {
            let mut conn = conn;
            conn.granted
                .notes
                .push("sendfile acts on the client's sends; this side uses send(2)".into());
            Box::new(BasicEndpoint::new(conn))
        }
        (Api::Splice, Side::Client) => {
            let mut conn = conn;
            conn.granted.notes.push(
                "splice acts on the server's (receiver's) side; this side uses send(2)".into(),
            );
            Box::new(BasicEndpoint::new(conn))
        }
    })
}

/// A socket listener whose accepted connection is wrapped in the session's api.
#[derive(Debug)]
struct ApiListener {
    inner: Box<dyn ConnListener>,
    api: Api,
}

impl DataListener for ApiListener {
    fn endpoint(&self) -> DataEndpoint {
        self.inner.endpoint()
    }
    fn accept(&mut self, cookie: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        wrap(self.inner.accept(cookie, timeout)?, self.api, Side::Server)
    }
    fn prepare_crr(&mut self, client: IpAddr, slice: Duration) -> io::Result<GrantedKnobs> {
        self.inner.prepare_crr(client, slice)
    }
    #[inline]
    fn accept_crr(&mut self) -> io::Result<Option<OwnedFd>> {
        self.inner.accept_crr()
    }
}

impl TransportFactory for Registry {
    fn listen(&self, setup: &SessionSetup, bind: IpAddr) -> io::Result<Box<dyn DataListener>> {
        let (t, api) = parse(setup)?;
        let k = &setup.server_knobs;
        let inner: Box<dyn ConnListener> = match t {
            Transport::Tcp | Transport::Mptcp => Box::new(ip::StreamListener::open(t, bind, k)?),
            Transport::Udp | Transport::Udplite => Box::new(ip::DgramListener::open(t, bind, k)?),
            Transport::UnixStream | Transport::UnixSeqpacket => {
                Box::new(unix::UnixStreamListener::open(t, k)?)
            }
            Transport::UnixDgram => Box::new(unix::UnixDgramListener::open(k)?),
            Transport::Packet => {
                return Ok(Box::new(packet::PacketListener::open(
                    setup,
                    bind,
                    api == Api::Mmsg,
                )?))
            }
            Transport::Shm => return Ok(Box::new(shm::ShmListener::open(setup)?)),
        };
        Ok(Box::new(ApiListener { inner, api }))
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
        let (t, api) = parse(setup)?;
        let path = || {
            data.path.as_deref().map(Path::new).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the server sent no path for a unix or shm transport",
                )
            })
        };
        let addr = SocketAddr::new(server, data.port);
        let conn = match t {
            Transport::Tcp | Transport::Mptcp => {
                ip::stream_connect(t, addr, knobs, cookie, timeout)?
            }
            Transport::Udp | Transport::Udplite => {
                ip::dgram_connect(t, addr, knobs, cookie, timeout)?
            }
            Transport::UnixStream | Transport::UnixSeqpacket => {
                unix::stream_connect(t, path()?, knobs, cookie, timeout)?
            }
            Transport::UnixDgram => unix::dgram_connect(path()?, knobs, cookie, timeout)?,
            Transport::Packet => {
                return packet::connect(
                    setup,
                    knobs,
                    server,
                    data,
                    cookie,
                    timeout,
                    api == Api::Mmsg,
                )
            }
            Transport::Shm => return shm::connect(path()?, knobs, cookie, timeout),
        };
        wrap(conn, api, Side::Client)
    }

    fn crr_connector(
        &self,
        setup: &SessionSetup,
        knobs: &Knobs,
        server: IpAddr,
        data: &DataEndpoint,
        timeout: Duration,
    ) -> io::Result<Box<dyn CrrConnector>> {
        let (t, _) = parse(setup)?;
        let addr = match t {
            Transport::Tcp | Transport::Mptcp => SockAddr::from(SocketAddr::new(server, data.port)),
            Transport::UnixStream => {
                let p = data.path.as_deref().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the server sent no path for a unix transport",
                    )
                })?;
                SockAddr::unix(p)?
            }
            _ => {
                return Err(unsupported(format!(
                    "--pattern crr needs a connection-oriented transport (tcp, mptcp, unix-stream), not {t}"
                )))
            }
        };
        Ok(Box::new(crate::crr::Connector::new(
            t, addr, knobs, timeout,
        )?))
    }
}

/// Whether a transport (or a transport × api) works here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub transport: Transport,
    /// The api probed; `basic` for [`probe`].
    pub api: Api,
    pub available: bool,
    /// Why not, when unavailable.
    pub reason: Option<String>,
}

fn result(t: Transport, api: Api, r: Result<(), String>) -> Probe {
    Probe {
        transport: t,
        api,
        available: r.is_ok(),
        reason: r.err(),
    }
}

fn try_socket(t: Transport) -> Result<socket2::Socket, String> {
    use socket2::{Domain, Socket, Type};
    let r = match t {
        Transport::Tcp | Transport::Udp | Transport::Mptcp | Transport::Udplite => {
            ip::open(t, IpAddr::from([127, 0, 0, 1]))
        }
        Transport::UnixStream => Socket::new(Domain::UNIX, Type::STREAM, None),
        Transport::UnixDgram => Socket::new(Domain::UNIX, Type::DGRAM, None),
        Transport::UnixSeqpacket => Socket::new(Domain::UNIX, Type::SEQPACKET, None),
        Transport::Packet => {
            packet::probe()?;
            // Opened only to check; never bound, so it receives nothing.
            Socket::new(Domain::PACKET, Type::RAW, None)
        }
        Transport::Shm => {
            return Err("shm has no socket (an internal error: probe it with shm::probe)".into())
        }
    };
    r.map_err(|e| match t {
        Transport::Mptcp | Transport::Udplite => e.to_string(),
        _ => format!("cannot open a {t} socket: {e}"),
    })
}

/// Tries to open a socket of the transport's kind (AF_PACKET checks CAP_NET_RAW; MPTCP
/// reports net.mptcp.enabled).
pub fn probe(t: Transport) -> Probe {
    if t == Transport::Shm {
        return result(t, Api::Basic, shm::probe());
    }
    result(t, Api::Basic, try_socket(t).map(drop))
}

/// Tries the api on the transport: opens the socket and sets what the api needs
/// (SO_ZEROCOPY, a memfd, a pipe and /dev/null, an io_uring with its opcodes; for shm, a
/// mapped shared-memory file).
pub fn probe_api(t: Transport, api: Api) -> Probe {
    let r = (|| {
        if !t.apis().contains(&api) {
            return Err(format!(
                "{t} does not support {}: it supports {}",
                api.name(),
                t.apis()
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if t == Transport::Shm {
            return shm::probe();
        }
        let sock = try_socket(t)?;
        match api {
            Api::Basic | Api::Mmsg => Ok(()),
            Api::Uring => crate::uring::probe(),
            Api::Zerocopy => {
                use std::os::fd::AsRawFd;
                crate::zerocopy::enable(sock.as_raw_fd()).map_err(|e| e.to_string())
            }
            Api::Sendfile => crate::sendfile::pattern_file(1)
                .map(drop)
                .map_err(|e| e.to_string()),
            Api::Splice => {
                let mut s = SpliceEndpointProbe;
                s.run().map_err(|e| e.to_string())
            }
        }
    })();
    result(t, api, r)
}

/// Checks that a pipe and /dev/null are available for splice.
struct SpliceEndpointProbe;

impl SpliceEndpointProbe {
    fn run(&mut self) -> io::Result<()> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors we close below.
        crate::sys::cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
        // SAFETY: closing the pipe opened above.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .map(drop)
            .map_err(|e| io::Error::new(e.kind(), format!("/dev/null: {e}")))
    }
}
