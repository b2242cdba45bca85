//! Unix-domain sockets (`unix-stream`, `unix-dgram`, `unix-seqpacket`) in a private directory
//! that is removed when the endpoints are dropped. Both ends must run on one host.
//!
//! `unix-seqpacket` is connection-oriented like a stream (accept, cookie first) but keeps
//! message boundaries and never loses: it is driven as a datagram transport whose loss is 0.

use crate::api::{self, Side};
use crate::basic::{Conn, ConnListener};
use crate::descriptor::{
    no_footprint, probe_socket, Descriptor, MessageLimit, Peer, CONNECTED_BIDIR, MESSAGES,
    MESSAGES_BIDIR,
};
use crate::{cookie, crr, knobs};
use netsweep_endpoint::{DataListener, Endpoint};
use netsweep_model::spec::{Api, Family, Transport};
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs, SessionSetup};
use socket2::{Domain, SockAddr, Socket, Type};
use std::io;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `unix-stream`: a connected SOCK_STREAM pair.
pub static UNIX_STREAM: Descriptor = Descriptor {
    transport: Transport::UnixStream,
    family: Some(Family::Unix),
    default_ceiling: 8 << 20,
    max_message: None,
    apis: &[Api::Basic, Api::Splice],
    patterns: CONNECTED_BIDIR,
    knobs: knobs::BUFFERS,
    polls: false,
    probe: || probe_socket(Transport::UnixStream, || socket(Transport::UnixStream)),
    listen: |s, _, _, api| listen_stream(Transport::UnixStream, s, api),
    footprint: no_footprint,
    connect: |p, cookie, api| connect_stream(Transport::UnixStream, p, cookie, api),
    crr: Some(|p| {
        let addr = SockAddr::unix(p.path()?)?;
        let t = Transport::UnixStream;
        Ok(Box::new(crr::Connector::new(t, addr, p.knobs, p.timeout)?))
    }),
    unbuilt: &[],
    api_limits: &[],
};

/// `unix-dgram`: SOCK_DGRAM between two bound socket files.
pub static UNIX_DGRAM: Descriptor = Descriptor {
    transport: Transport::UnixDgram,
    family: Some(Family::Unix),
    default_ceiling: DGRAM_CEILING,
    max_message: Some(DGRAM_LIMIT),
    apis: &[Api::Basic, Api::Mmsg],
    patterns: MESSAGES_BIDIR,
    knobs: knobs::BUFFERS,
    polls: false,
    probe: || probe_socket(Transport::UnixDgram, || socket(Transport::UnixDgram)),
    footprint: no_footprint,
    listen: |s, _, _, api| {
        Ok(api::listener(
            Box::new(UnixDgramListener::open(&s.server_knobs)?),
            api,
        ))
    },
    connect: |p, cookie, api| {
        let conn = dgram_connect(p.path()?, p.knobs, cookie, p.timeout)?;
        api::wrap(conn, api, Side::Client)
    },
    crr: None,
    unbuilt: &[],
    api_limits: &[],
};

/// `unix-seqpacket`: a connected SOCK_SEQPACKET pair.
pub static UNIX_SEQPACKET: Descriptor = Descriptor {
    transport: Transport::UnixSeqpacket,
    family: Some(Family::Unix),
    default_ceiling: DGRAM_CEILING,
    max_message: Some(DGRAM_LIMIT),
    apis: &[Api::Basic],
    patterns: MESSAGES,
    knobs: knobs::BUFFERS,
    polls: false,
    probe: || {
        probe_socket(Transport::UnixSeqpacket, || {
            socket(Transport::UnixSeqpacket)
        })
    },
    listen: |s, _, _, api| listen_stream(Transport::UnixSeqpacket, s, api),
    footprint: no_footprint,
    connect: |p, cookie, api| connect_stream(Transport::UnixSeqpacket, p, cookie, api),
    crr: None,
    unbuilt: &[],
    api_limits: &[],
};

/// The default sweep's ceiling for unix datagrams: the real bound follows
/// net.core.wmem_default; 64 KiB is safe.
const DGRAM_CEILING: u64 = 65_536;

/// The largest unix datagram: the default socket send buffer (net.core.wmem_default).
const DGRAM_LIMIT: MessageLimit = MessageLimit::same(212_992);

fn socket(t: Transport) -> io::Result<Socket> {
    Socket::new(Domain::UNIX, sock_type(t), None)
}

fn listen_stream(
    t: Transport,
    setup: &SessionSetup,
    api: Api,
) -> io::Result<Box<dyn DataListener>> {
    let inner = UnixStreamListener::open(t, &setup.server_knobs)?;
    Ok(api::listener(Box::new(inner), api))
}

fn connect_stream(
    t: Transport,
    p: &Peer<'_>,
    cookie: u64,
    api: Api,
) -> io::Result<Box<dyn Endpoint>> {
    let conn = stream_connect(t, p.path()?, p.knobs, cookie, p.timeout)?;
    api::wrap(conn, api, Side::Client)
}

/// A private directory for socket files, removed on drop.
#[derive(Debug)]
pub struct SocketDir(PathBuf);

impl SocketDir {
    /// Creates `$TMPDIR/netsweep-<pid>-<random>` with mode 0700.
    pub fn new() -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let r = netsweep_endpoint::random_u64()?;
        let p = std::env::temp_dir().join(format!("netsweep-{}-{r:016x}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&p)?;
        Ok(Self(p))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sock_err(e: io::Error, path: &Path) -> io::Error {
    if e.kind() == io::ErrorKind::NotFound {
        io::Error::new(
            e.kind(),
            format!(
                "{} does not exist: unix transports need client and server on one host",
                path.display()
            ),
        )
    } else {
        e
    }
}

fn conn(
    sock: Socket,
    t: Transport,
    knobs: &Knobs,
    notes: Vec<String>,
    dir: Arc<SocketDir>,
) -> Conn {
    let granted = knobs::granted(&sock, knobs, t, false, notes);
    Conn {
        sock,
        transport: t,
        v6: false,
        granted,
        guard: Some(dir),
    }
}

fn sock_type(t: Transport) -> Type {
    match t {
        Transport::UnixSeqpacket => Type::SEQPACKET,
        Transport::UnixDgram => Type::DGRAM,
        _ => Type::STREAM,
    }
}

/// The server's listener for `unix-stream` and `unix-seqpacket`.
#[derive(Debug)]
pub struct UnixStreamListener {
    sock: Socket,
    path: PathBuf,
    knobs: Knobs,
    notes: Vec<String>,
    dir: Arc<SocketDir>,
    t: Transport,
    crr: crr::Accepting,
}

impl UnixStreamListener {
    /// Binds and listens on a socket file in a fresh private directory.
    pub fn open(t: Transport, knobs: &Knobs) -> io::Result<Self> {
        let dir = Arc::new(SocketDir::new()?);
        let path = dir.path().join("data.sock");
        let sock = Socket::new(Domain::UNIX, sock_type(t), None)?;
        let notes = knobs::apply(&sock, knobs, t, false)?;
        sock.bind(&SockAddr::unix(&path)?)?;
        sock.listen(crate::descriptor::BACKLOG)?;
        Ok(Self {
            sock,
            path,
            knobs: knobs.clone(),
            notes,
            dir,
            t,
            crr: crr::Accepting::default(),
        })
    }
}

impl ConnListener for UnixStreamListener {
    /// Only the session's user can reach the socket (its directory is mode 0700): `client`
    /// has no unix address to check.
    fn prepare_crr(&mut self, _client: IpAddr, slice: Duration) -> io::Result<GrantedKnobs> {
        let (a, granted) = crr::Accepting::prepare(
            &self.sock,
            self.t,
            &self.knobs,
            self.notes.clone(),
            None,
            slice,
        )?;
        self.crr = a;
        Ok(granted)
    }

    #[inline]
    fn accept_crr(&mut self) -> io::Result<Option<OwnedFd>> {
        self.crr.accept(&self.sock)
    }

    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: 0,
            path: Some(self.path.to_string_lossy().into_owned()),
            mac: None,
            tls_fingerprint: None,
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Conn> {
        let deadline = Instant::now() + timeout;
        loop {
            self.sock.set_read_timeout(Some(cookie::left(
                deadline,
                "the client's unix data connection",
            )?))?;
            let (c, _) = match self.sock.accept() {
                Ok(c) => c,
                // A signal: the deadline decides.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client's unix data connection did not arrive",
                    ));
                }
                Err(e) => return Err(e),
            };
            let by = (Instant::now() + cookie::PRESENT_WITHIN).min(deadline);
            if cookie::read_by(&c, by).ok() == Some(want) {
                c.set_read_timeout(None)?;
                return Ok(conn(
                    c,
                    self.t,
                    &self.knobs,
                    self.notes.clone(),
                    self.dir.clone(),
                ));
            }
        }
    }
}

/// Connects the client's `unix-stream` or `unix-seqpacket` data path.
pub fn stream_connect(
    t: Transport,
    path: &Path,
    knobs: &Knobs,
    want: u64,
    timeout: Duration,
) -> io::Result<Conn> {
    let sock = Socket::new(Domain::UNIX, sock_type(t), None)?;
    let notes = knobs::apply(&sock, knobs, t, false)?;
    sock.connect_timeout(&SockAddr::unix(path)?, timeout)
        .map_err(|e| sock_err(e, path))?;
    sock.set_write_timeout(Some(timeout))?;
    let mut s: UnixStream = sock.try_clone()?.into();
    cookie::present(&mut s, want)?;
    let granted = knobs::granted(&sock, knobs, t, false, notes);
    Ok(Conn {
        sock,
        transport: t,
        v6: false,
        granted,
        guard: None,
    })
}

fn dgram_socket(path: &Path, knobs: &Knobs) -> io::Result<(Socket, Vec<String>)> {
    let sock = Socket::new(Domain::UNIX, Type::DGRAM, None)?;
    let notes = knobs::apply(&sock, knobs, Transport::UnixDgram, false)?;
    sock.bind(&SockAddr::unix(path)?)?;
    Ok((sock, notes))
}

/// The server's unix datagram socket, waiting for the client's cookie.
#[derive(Debug)]
pub struct UnixDgramListener {
    sock: Option<(Socket, Vec<String>)>,
    knobs: Knobs,
    path: PathBuf,
    dir: Arc<SocketDir>,
}

impl UnixDgramListener {
    /// Binds the server's datagram socket file in a fresh private directory.
    pub fn open(knobs: &Knobs) -> io::Result<Self> {
        let dir = Arc::new(SocketDir::new()?);
        let path = dir.path().join("data.sock");
        let sock = dgram_socket(&path, knobs)?;
        Ok(Self {
            sock: Some(sock),
            knobs: knobs.clone(),
            path,
            dir,
        })
    }
}

impl ConnListener for UnixDgramListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: 0,
            path: Some(self.path.to_string_lossy().into_owned()),
            mac: None,
            tls_fingerprint: None,
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Conn> {
        let (sock, notes) = self
            .sock
            .take()
            .ok_or_else(|| io::Error::other("the unix data socket was already handed out"))?;
        let deadline = Instant::now() + timeout;
        let d: UnixDatagram = sock.try_clone()?.into();
        let mut b = [0u8; 64];
        loop {
            d.set_read_timeout(Some(cookie::left(
                deadline,
                "the client's unix cookie datagram",
            )?))?;
            match d.recv_from(&mut b) {
                Ok((n, from)) if n == cookie::LEN && b[..n] == want.to_be_bytes() => {
                    let Some(p) = from.as_pathname() else {
                        continue;
                    };
                    d.connect(p)?;
                    d.send(&want.to_be_bytes())?;
                    d.set_read_timeout(None)?;
                    return Ok(conn(
                        sock,
                        Transport::UnixDgram,
                        &self.knobs,
                        notes,
                        self.dir.clone(),
                    ));
                }
                Ok(_) => {}
                Err(e) if cookie::is_wait(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Connects the client's unix datagram path: binds its own socket file, sends the cookie
/// until the server acknowledges it.
pub fn dgram_connect(path: &Path, knobs: &Knobs, want: u64, timeout: Duration) -> io::Result<Conn> {
    let dir = Arc::new(SocketDir::new()?);
    let (sock, notes) = dgram_socket(&dir.path().join("client.sock"), knobs)?;
    let d: UnixDatagram = sock.try_clone()?.into();
    d.connect(path).map_err(|e| sock_err(e, path))?;
    let deadline = Instant::now() + timeout;
    let mut b = [0u8; 64];
    loop {
        d.send(&want.to_be_bytes())?;
        d.set_read_timeout(Some(
            cookie::left(deadline, "the server's acknowledgement")?.min(Duration::from_millis(200)),
        ))?;
        match d.recv(&mut b) {
            Ok(n) if n == cookie::LEN && b[..n] == want.to_be_bytes() => break,
            Ok(_) => {}
            Err(e) if cookie::is_wait(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(conn(sock, Transport::UnixDgram, knobs, notes, dir))
}
