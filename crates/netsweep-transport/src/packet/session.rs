//! The packet session handshake: the server waits for the client's hello frame carrying the
//! cookie and acknowledges it; both then keep only their session's data frames.

use super::endpoint::granted;
use super::frame::{
    attach_filter, bind, check, header, is_wait, recv_frame, route_interface, send_frame, set_len,
    set_timeout, socket_with_knobs, Link, FRAME_HEADER, KIND_ACK, KIND_C2S, KIND_HELLO, KIND_S2C,
};
use super::{max_payload, tag_of, too_big, PacketEndpoint, Side};
use crate::mmsg::Mmsg;
use crate::{cookie, sys};
use netsweep_endpoint::{DataListener, Endpoint};
use netsweep_proto::messages::{DataEndpoint, Knobs, SessionSetup};
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
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
        let name = match knobs.interface.as_deref() {
            Some(n) => n.to_string(),
            None => sys::if_with_address(bind)?.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no interface holds {bind}, the server's address: name one with --interface"),
                )
            })?,
        };
        let link = Link::new(&name)?;
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
        let deadline = Instant::now() + timeout;
        let mut h = [0u8; FRAME_HEADER];
        let mut b = [0u8; 64];
        let peer = loop {
            set_timeout(
                fd,
                Some(cookie::left(deadline, "the client's packet hello frame")?),
            )?;
            match recv_frame(fd, &mut h, &mut b) {
                Ok(n) => {
                    if check(&h, n, tag, KIND_HELLO) == Some(cookie::LEN)
                        && b[..8] == want.to_be_bytes()
                    {
                        let mut mac = [0u8; 6];
                        mac.copy_from_slice(&h[6..12]);
                        break mac;
                    }
                }
                Err(e) if is_wait(&e) => {}
                Err(e) => return Err(e),
            }
        };
        // From now on only data frames of this session.
        attach_filter(fd, tag, KIND_C2S, KIND_C2S)?;
        let mut ack = header(&peer, &self.link.mac, tag, KIND_ACK);
        set_len(&mut ack, cookie::LEN);
        send_frame(fd, &ack, &want.to_be_bytes())?;
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
    let peer = data
        .mac
        .as_deref()
        .and_then(sys::parse_mac)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "the server sent no MAC address for the packet transport (an older server?)",
            )
        })?;
    let name = match knobs.interface.as_deref() {
        Some(n) => n.to_string(),
        None => route_interface(server)?,
    };
    let link = Link::new(&name)?;
    if setup.max_size as usize > max_payload(link.mtu) {
        return Err(too_big(setup.max_size, &link.name, link.mtu));
    }
    let (sock, notes) = socket_with_knobs(knobs)?;
    let fd = sock.as_raw_fd();
    let tag = tag_of(want);
    attach_filter(fd, tag, KIND_ACK, KIND_S2C)?;
    bind(fd, link.index, &link.name)?;
    let mut hello = header(&peer, &link.mac, tag, KIND_HELLO);
    set_len(&mut hello, cookie::LEN);
    let deadline = Instant::now() + timeout;
    let mut h = [0u8; FRAME_HEADER];
    let mut b = [0u8; 64];
    'outer: loop {
        send_frame(fd, &hello, &want.to_be_bytes()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("sending the packet hello on {}: {e}", link.name),
            )
        })?;
        let until = Instant::now()
            + cookie::left(deadline, "the server's packet acknowledgement")?
                .min(Duration::from_millis(200));
        loop {
            let Ok(wait) = cookie::left(until, "") else {
                continue 'outer;
            };
            set_timeout(fd, Some(wait))?;
            match recv_frame(fd, &mut h, &mut b) {
                Ok(n) => {
                    if check(&h, n, tag, KIND_ACK) == Some(cookie::LEN)
                        && b[..8] == want.to_be_bytes()
                    {
                        break 'outer;
                    }
                }
                Err(e) if is_wait(&e) => continue 'outer,
                Err(e) => return Err(e),
            }
        }
    }
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
