//! Unix-domain sockets (stream and datagram) in a private directory that is removed when
//! the endpoints are dropped. Both ends must run on one host.

use crate::{cookie, knobs};
use netsweep_core::endpoint::{DataListener, Endpoint};
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs};
use socket2::{Domain, SockAddr, Socket, Type};
use std::io::{self, Read, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A private directory for socket files, removed on drop.
#[derive(Debug)]
pub struct SocketDir(PathBuf);

impl SocketDir {
    /// Creates `$TMPDIR/netsweep-<pid>-<random>` with mode 0700.
    pub fn new() -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let r = netsweep_core::server::random_u64();
        let p = std::env::temp_dir().join(format!("netsweep-{}-{r:016x}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&p)?;
        Ok(Self(p))
    }

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

/// A connected unix stream endpoint.
#[derive(Debug)]
pub struct UnixStreamEndpoint {
    stream: UnixStream,
    granted: GrantedKnobs,
    _dir: Option<Arc<SocketDir>>,
}

impl Endpoint for UnixStreamEndpoint {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }
    fn is_datagram(&self) -> bool {
        false
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(timeout)
    }
    fn granted(&self) -> GrantedKnobs {
        self.granted.clone()
    }
    fn as_dyn(&mut self) -> &mut dyn Endpoint {
        self
    }
}

/// The server's unix stream listener.
#[derive(Debug)]
pub struct UnixStreamListener {
    sock: Socket,
    path: PathBuf,
    knobs: Knobs,
    dir: Arc<SocketDir>,
}

impl UnixStreamListener {
    pub fn open(knobs: &Knobs) -> io::Result<Self> {
        let dir = Arc::new(SocketDir::new()?);
        let path = dir.path().join("data.sock");
        let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
        knobs::apply_buffers(&sock, knobs)?;
        sock.bind(&SockAddr::unix(&path)?)?;
        sock.listen(4)?;
        Ok(Self {
            sock,
            path,
            knobs: knobs.clone(),
            dir,
        })
    }
}

impl DataListener for UnixStreamListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: 0,
            path: Some(self.path.to_string_lossy().into_owned()),
            mac: None,
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let deadline = Instant::now() + timeout;
        loop {
            self.sock.set_read_timeout(Some(cookie::left(
                deadline,
                "the client's unix data connection",
            )?))?;
            let (conn, _) = match self.sock.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client's unix data connection did not arrive",
                    ));
                }
                Err(e) => return Err(e),
            };
            conn.set_read_timeout(Some(Duration::from_secs(2)))?;
            let mut s: UnixStream = conn.try_clone()?.into();
            if cookie::read(&mut s).ok() == Some(want) {
                conn.set_read_timeout(None)?;
                let granted = knobs::granted(&conn, &self.knobs, false);
                return Ok(Box::new(UnixStreamEndpoint {
                    stream: conn.into(),
                    granted,
                    _dir: Some(self.dir.clone()),
                }));
            }
        }
    }
}

/// Connects the client's unix stream data path.
pub fn stream_connect(
    path: &Path,
    knobs: &Knobs,
    want: u64,
    timeout: Duration,
) -> io::Result<Box<dyn Endpoint>> {
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    knobs::apply_buffers(&sock, knobs)?;
    sock.connect_timeout(&SockAddr::unix(path)?, timeout)
        .map_err(|e| sock_err(e, path))?;
    sock.set_write_timeout(Some(timeout))?;
    let granted = knobs::granted(&sock, knobs, false);
    let mut stream: UnixStream = sock.into();
    cookie::present(&mut stream, want)?;
    Ok(Box::new(UnixStreamEndpoint {
        stream,
        granted,
        _dir: None,
    }))
}

/// A connected unix datagram endpoint.
#[derive(Debug)]
pub struct UnixDgramEndpoint {
    sock: UnixDatagram,
    granted: GrantedKnobs,
    _dir: Arc<SocketDir>,
}

impl Endpoint for UnixDgramEndpoint {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.send(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.recv(buf)
    }
    fn is_datagram(&self) -> bool {
        true
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(timeout)
    }
    fn granted(&self) -> GrantedKnobs {
        self.granted.clone()
    }
    fn as_dyn(&mut self) -> &mut dyn Endpoint {
        self
    }
}

fn dgram_socket(path: &Path, knobs: &Knobs) -> io::Result<(UnixDatagram, GrantedKnobs)> {
    let sock = Socket::new(Domain::UNIX, Type::DGRAM, None)?;
    knobs::apply_buffers(&sock, knobs)?;
    sock.bind(&SockAddr::unix(path)?)?;
    let granted = knobs::granted(&sock, knobs, false);
    Ok((sock.into(), granted))
}

/// The server's unix datagram socket, waiting for the client's cookie.
#[derive(Debug)]
pub struct UnixDgramListener {
    sock: Option<(UnixDatagram, GrantedKnobs)>,
    path: PathBuf,
    dir: Arc<SocketDir>,
}

impl UnixDgramListener {
    pub fn open(knobs: &Knobs) -> io::Result<Self> {
        let dir = Arc::new(SocketDir::new()?);
        let path = dir.path().join("data.sock");
        let sock = dgram_socket(&path, knobs)?;
        Ok(Self {
            sock: Some(sock),
            path,
            dir,
        })
    }
}

impl DataListener for UnixDgramListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: 0,
            path: Some(self.path.to_string_lossy().into_owned()),
            mac: None,
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let (sock, granted) = self
            .sock
            .take()
            .ok_or_else(|| io::Error::other("the unix data socket was already handed out"))?;
        let deadline = Instant::now() + timeout;
        let mut b = [0u8; 64];
        loop {
            sock.set_read_timeout(Some(cookie::left(
                deadline,
                "the client's unix cookie datagram",
            )?))?;
            match sock.recv_from(&mut b) {
                Ok((n, from)) if n == cookie::LEN && b[..n] == want.to_be_bytes() => {
                    let Some(p) = from.as_pathname() else {
                        continue;
                    };
                    sock.connect(p)?;
                    sock.send(&want.to_be_bytes())?;
                    sock.set_read_timeout(None)?;
                    return Ok(Box::new(UnixDgramEndpoint {
                        sock,
                        granted,
                        _dir: self.dir.clone(),
                    }));
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Connects the client's unix datagram path: binds its own socket file, sends the cookie
/// until the server acknowledges it.
pub fn dgram_connect(
    path: &Path,
    knobs: &Knobs,
    want: u64,
    timeout: Duration,
) -> io::Result<Box<dyn Endpoint>> {
    let dir = Arc::new(SocketDir::new()?);
    let (sock, granted) = dgram_socket(&dir.path().join("client.sock"), knobs)?;
    sock.connect(path).map_err(|e| sock_err(e, path))?;
    let deadline = Instant::now() + timeout;
    let mut b = [0u8; 64];
    loop {
        sock.send(&want.to_be_bytes())?;
        sock.set_read_timeout(Some(
            cookie::left(deadline, "the server's acknowledgement")?.min(Duration::from_millis(200)),
        ))?;
        match sock.recv(&mut b) {
            Ok(n) if n == cookie::LEN && b[..n] == want.to_be_bytes() => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Box::new(UnixDgramEndpoint {
        sock,
        granted,
        _dir: dir,
    }))
}
