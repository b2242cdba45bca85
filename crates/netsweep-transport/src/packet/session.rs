//! The packet session handshake: the server waits for the client's hello frame carrying the
//! cookie and acknowledges it; both then keep only their session's data frames.

use super::endpoint::granted;
use super::frame::{
    attach_filter, bind, header, is_wait, recv_frame, route_interface, send_frame, set_timeout,
    socket_with_knobs, Link, FRAME_HEADER, KIND_ACK, KIND_C2S, KIND_HELLO, KIND_S2C,
};
use super::handshake::{self, FramePath};
use super::{max_payload, tag_of, too_big, PacketEndpoint, Side};
use crate::mmsg::Mmsg;
use crate::sys;
use netsweep_endpoint::{DataListener, Endpoint};
use netsweep_proto::messages::{DataEndpoint, Knobs, SessionSetup};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// The server's packet data endpoint, waiting for the client's hello frame.
#[derive(Debug)]
pub struct PacketListener {
    sock: Option<(socket2::Socket, Vec<String>)>,
    knobs: Knobs,
    link: Link,
    mmsg: bool,
}

impl PacketListener {
    /// Opens on the interface that owns `bind` (or the `interface` knob).
    pub fn open(setup: &SessionSetup, bind: IpAddr, mmsg: bool) -> io::Result<Self> {
        let knobs = &setup.server_knobs;
        let link = Link::new(&server_interface(knobs, bind)?)?;
        if setup.max_size as usize > max_payload(link.mtu) {
            return Err(too_big(setup.max_size, &link.name, link.mtu));
        }
        let sock = socket_with_knobs(knobs)?;
        Ok(Self {
            sock: Some(sock),
            knobs: knobs.clone(),
            link,
            mmsg,
        })
    }
}

impl DataListener for PacketListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: 0,
            path: None,
            mac: Some(sys::mac_string(&self.link.mac)),
            tls_fingerprint: None,
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let (sock, notes) = self
            .sock
            .take()
            .ok_or_else(|| io::Error::other("the packet data socket was already handed out"))?;
        let fd = sock.as_raw_fd();
        let tag = tag_of(want);
        attach_filter(fd, tag, KIND_HELLO, KIND_C2S)?;
        bind(fd, self.link.index, &self.link.name)?;
        let peer = handshake::await_hello(&mut Fd(fd), want, Instant::now() + timeout)?;
        // From now on only data frames of this session.
        attach_filter(fd, tag, KIND_C2S, KIND_C2S)?;
        handshake::acknowledge(&mut Fd(fd), &self.link, &peer, want)?;
        set_timeout(fd, None)?;
        let granted = granted(&sock, &self.knobs, notes, &self.link, &peer);
        Ok(Box::new(PacketEndpoint {
            fd,
            sock,
            side: Side::Server,
            tx: header(&peer, &self.link.mac, tag, KIND_S2C),
            rx: [0; FRAME_HEADER],
            tag,
            want_kind: KIND_C2S,
            link: self.link.clone(),
            granted,
            mmsg: self.mmsg.then(Mmsg::default),
        }))
    }
}

/// Connects the client's packet data path to the server at `server` whose MAC is in `data`.
pub fn connect(
    setup: &SessionSetup,
    knobs: &Knobs,
    server: IpAddr,
    data: &DataEndpoint,
    want: u64,
    timeout: Duration,
    mmsg: bool,
) -> io::Result<Box<dyn Endpoint>> {
    let (peer, name) = client_target(knobs, server, data, "packet")?;
    let link = Link::new(&name)?;
    if setup.max_size as usize > max_payload(link.mtu) {
        return Err(too_big(setup.max_size, &link.name, link.mtu));
    }
    let (sock, notes) = socket_with_knobs(knobs)?;
    let fd = sock.as_raw_fd();
    let tag = tag_of(want);
    attach_filter(fd, tag, KIND_ACK, KIND_S2C)?;
    bind(fd, link.index, &link.name)?;
    handshake::hello(&mut Fd(fd), &link, &peer, want, Instant::now() + timeout)?;
    // From now on only the server's data frames.
    attach_filter(fd, tag, KIND_S2C, KIND_S2C)?;
    set_timeout(fd, None)?;
    let granted = granted(&sock, knobs, notes, &link, &peer);
    Ok(Box::new(PacketEndpoint {
        fd,
        sock,
        side: Side::Client,
        tx: header(&peer, &link.mac, tag, KIND_C2S),
        rx: [0; FRAME_HEADER],
        tag,
        want_kind: KIND_S2C,
        link,
        granted,
        mmsg: mmsg.then(Mmsg::default),
    }))
}

/// The server's interface for a raw-frame session: the `interface` knob, or the one that holds
/// `bind`, the server's address.
pub(crate) fn server_interface(knobs: &Knobs, bind: IpAddr) -> io::Result<String> {
    match knobs.interface.as_deref() {
        Some(n) => Ok(n.to_string()),
        None => sys::if_with_address(bind)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no interface holds {bind}, the server's address: name one with --interface"
                ),
            )
        }),
    }
}

/// The client's target of a raw-frame session of `transport`: the server's MAC (from its data
/// endpoint) and the interface to reach it by (the `interface` knob, else the route's).
pub(crate) fn client_target(
    knobs: &Knobs,
    server: IpAddr,
    data: &DataEndpoint,
    transport: &str,
) -> io::Result<([u8; 6], String)> {
    let peer = data
        .mac
        .as_deref()
        .and_then(sys::parse_mac)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the server sent no MAC address for the {transport} transport (an older \
                     server?)"
                ),
            )
        })?;
    let name = match knobs.interface.as_deref() {
        Some(n) => n.to_string(),
        None => route_interface(server)?,
    };
    Ok((peer, name))
}

/// A bound AF_PACKET socket as a [`FramePath`] for the handshake.
struct Fd(RawFd);

impl FramePath for Fd {
    fn send_frame(&mut self, h: &[u8; FRAME_HEADER], payload: &[u8]) -> io::Result<()> {
        send_frame(self.0, h, payload).map(drop)
    }
    fn recv_frame(
        &mut self,
        h: &mut [u8; FRAME_HEADER],
        payload: &mut [u8],
        wait: Duration,
    ) -> io::Result<Option<usize>> {
        set_timeout(self.0, Some(wait))?;
        match recv_frame(self.0, h, payload) {
            Ok(n) => Ok(Some(n)),
            Err(e) if is_wait(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
