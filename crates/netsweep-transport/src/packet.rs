//! `packet`: raw Ethernet frames over AF_PACKET (SOCK_RAW) with the experimental EtherType
//! 0x88B5 — no IP, no UDP: today's equivalent of DLPI.
//!
//! **Frame:** Ethernet header (destination MAC, source MAC, 0x88B5), then an 8-byte netsweep
//! header — session tag (low 32 bits of the session cookie, big-endian), kind (1 client→server
//! data, 2 server→client data, 3 client hello, 4 server acknowledgement), version (1), payload
//! length (u16, big-endian) — then the payload. The length field keeps received lengths honest
//! when the driver pads a short frame to the 60-byte Ethernet minimum. The payload is limited to
//! the interface MTU minus the 8-byte header (1492 bytes on a 1500-byte link); a larger size is an
//! error naming the MTU, raised when the data path opens (`listen`/`connect`, from the session's
//! largest size) and again in the client's `prepare()`.
//!
//! **Binding:** the server uses the interface that owns its control address (or `--interface`)
//! and sends its MAC in `DataEndpoint.mac`; the client finds its interface from the route to the
//! server (`ip -o route get`, or the interface holding the source address; `--interface`
//! overrides), then sends hello frames carrying the full 8-byte cookie to the server's MAC until
//! acknowledged. The server learns the client's MAC from the first hello's source address.
//!
//! **Filtering:** a classic BPF filter on each socket keeps only frames of its own session
//! flowing towards it (tag and kind), so concurrent sessions on one link do not mix and, on
//! loopback (`lo`, MAC 00:00:00:00:00:00, where every frame comes back as incoming), an endpoint
//! never receives its own frames. PACKET_IGNORE_OUTGOING also drops the outgoing copies.
//! Frames are datagrams: loss is counted exactly like UDP. Needs CAP_NET_RAW.

use crate::mmsg::Mmsg;
use crate::{cookie, knobs, sys};
use netsweep_core::endpoint::{DataListener, Endpoint};
use netsweep_core::spec::{Transport, PACKET_HEADER};
use netsweep_core::tool;
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs, SessionSetup};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// The experimental EtherType netsweep frames carry (IEEE 802 local experimental 1).
pub const ETHERTYPE: u16 = 0x88B5;
/// Ethernet header bytes.
const ETH: usize = 14;
/// Ethernet plus netsweep header bytes in front of every payload.
pub const FRAME_HEADER: usize = ETH + PACKET_HEADER as usize;

const KIND_C2S: u8 = 1;
const KIND_S2C: u8 = 2;
const KIND_HELLO: u8 = 3;
const KIND_ACK: u8 = 4;
const VERSION: u8 = 1;

/// Which end of the session an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

/// The largest payload an interface of `mtu` bytes carries.
pub fn max_payload(mtu: u32) -> usize {
    (mtu as usize)
        .saturating_sub(PACKET_HEADER as usize)
        .min(u16::MAX as usize)
}

fn too_big(size: u64, iface: &str, mtu: u32) -> io::Error {
    let max = max_payload(mtu);
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{size}-byte message does not fit one packet frame on {iface}: the MTU is {mtu}, \
             and {PACKET_HEADER} bytes go to the netsweep frame header, so the largest payload is \
             {max} bytes: lower --sizes to at most {max} (or raise the MTU)"
        ),
    )
}

/// Whether this process may open packet sockets.
pub fn probe() -> Result<(), String> {
    // SAFETY: plain socket(2); closed right away.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => {
                "needs CAP_NET_RAW: run as root or `setcap cap_net_raw+ep` on the binary"
                    .to_string()
            }
            Some(libc::EAFNOSUPPORT) => "this kernel has no AF_PACKET (CONFIG_PACKET)".to_string(),
            _ => format!("cannot open an AF_PACKET socket: {e}"),
        });
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    Ok(())
}

fn open_socket() -> io::Result<OwnedFd> {
    // Protocol 0: nothing is received until bind() names the EtherType, after the filter.
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(probe().err().map_or_else(io::Error::last_os_error, |why| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("packet transport: {why}"),
            )
        }));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Keeps only frames with session `tag` and kind `a` or `b` (offsets include the Ethernet header).
fn attach_filter(fd: RawFd, tag: u32, a: u8, b: u8) -> io::Result<()> {
    let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let mut prog = [
        ins(0x20, 0, 0, ETH as u32),     // ld  [14]       tag
        ins(0x15, 0, 4, tag),            // jeq #tag, else drop
        ins(0x30, 0, 0, ETH as u32 + 4), // ldb [18]       kind
        ins(0x15, 1, 0, u32::from(a)),   // jeq #a → accept
        ins(0x15, 0, 1, u32::from(b)),   // jeq #b → accept, else drop
        ins(0x06, 0, 0, u32::MAX),       // accept whole frame
        ins(0x06, 0, 0, 0),              // drop
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `prog`, live for the call; the kernel copies it.
    sys::cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            sys::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    })
    .map(drop)
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("attaching the packet session filter: {e}"),
        )
    })
}

fn bind(fd: RawFd, ifindex: u32, iface: &str) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETHERTYPE.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: a valid sockaddr_ll and its size.
    sys::cvt(unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("binding the packet socket to {iface}: {e}"),
        )
    })
}

/// The interface, its index, MAC and MTU.
#[derive(Debug, Clone)]
struct Link {
    name: String,
    index: u32,
    mac: [u8; 6],
    mtu: u32,
}

impl Link {
    fn new(name: &str) -> io::Result<Self> {
        Ok(Self {
            name: name.to_string(),
            index: sys::if_index(name)?,
            mac: sys::if_mac(name)?,
            mtu: sys::if_mtu(name)?,
        })
    }
}

/// The interface the route to `ip` leaves through: `ip -o route get`, else the interface that
/// holds the source address the kernel picks for it.
pub fn route_interface(ip: IpAddr) -> io::Result<String> {
    let fix = "name it with --interface";
    if let Some(text) = tool::query("ip", &["-o", "route", "get", &ip.to_string()]) {
        let mut words = text.split_whitespace();
        while let Some(w) = words.next() {
            if w == "dev" {
                if let Some(d) = words.next() {
                    return Ok(d.to_string());
                }
            }
        }
    }
    let any: IpAddr = if ip.is_ipv4() {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u16; 8])
    };
    let s = std::net::UdpSocket::bind((any, 0))?;
    s.connect((ip, 9)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("no route to {ip} for the packet transport ({e}): {fix}"),
        )
    })?;
    let local = s.local_addr()?.ip();
    sys::if_with_address(local)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("cannot tell which interface reaches {ip}: {fix}"),
        )
    })
}

fn header(dst: &[u8; 6], src: &[u8; 6], tag: u32, kind: u8) -> [u8; FRAME_HEADER] {
    let mut h = [0u8; FRAME_HEADER];
    h[0..6].copy_from_slice(dst);
    h[6..12].copy_from_slice(src);
    h[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    h[14..18].copy_from_slice(&tag.to_be_bytes());
    h[18] = kind;
    h[19] = VERSION;
    h
}

#[inline]
fn set_len(h: &mut [u8; FRAME_HEADER], len: usize) {
    h[20..22].copy_from_slice(&(len as u16).to_be_bytes());
}

/// Payload length of a received frame of `n` bytes (header included) whose header is `h`,
/// or `None` when the frame is not one this endpoint expects.
#[inline]
fn check(h: &[u8], n: usize, tag: u32, kind: u8) -> Option<usize> {
    if n < FRAME_HEADER || h[14..18] != tag.to_be_bytes() || h[18] != kind {
        return None;
    }
    let len = u16::from_be_bytes([h[20], h[21]]) as usize;
    Some(len.min(n - FRAME_HEADER))
}

/// One frame out: header iovec + payload iovec.
#[inline]
fn send_frame(fd: RawFd, h: &[u8; FRAME_HEADER], payload: &[u8]) -> io::Result<usize> {
    let mut iov = [
        libc::iovec {
            iov_base: h.as_ptr() as *mut libc::c_void,
            iov_len: FRAME_HEADER,
        },
        libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        },
    ];
    // SAFETY: msghdr is plain old data; all-zero is an empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = 2;
    // SAFETY: the iovecs point at `h` and `payload`, live for the call.
    let n = sys::cvt_size(unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) })?;
    Ok(n.saturating_sub(FRAME_HEADER))
}

/// One frame in: header into `h`, payload into `payload`. Returns the frame's length.
#[inline]
fn recv_frame(fd: RawFd, h: &mut [u8; FRAME_HEADER], payload: &mut [u8]) -> io::Result<usize> {
    let mut iov = [
        libc::iovec {
            iov_base: h.as_mut_ptr().cast(),
            iov_len: FRAME_HEADER,
        },
        libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        },
    ];
    // SAFETY: msghdr is plain old data; all-zero is an empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = 2;
    // SAFETY: the iovecs point at `h` and `payload`, live for the call.
    sys::cvt_size(unsafe { libc::recvmsg(fd, &mut msg, 0) })
}

fn set_timeout(fd: RawFd, t: Option<Duration>) -> io::Result<()> {
    let tv = match t {
        Some(d) if !d.is_zero() => libc::timeval {
            tv_sec: d.as_secs() as libc::time_t,
            tv_usec: d.subsec_micros() as libc::suseconds_t,
        },
        Some(_) => libc::timeval {
            tv_sec: 0,
            tv_usec: 1,
        },
        None => libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
    };
    // SAFETY: a valid timeval and its size.
    sys::cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn is_wait(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Opens the socket, applies the knobs, and returns it with the notes.
fn socket_with_knobs(knobs: &Knobs) -> io::Result<(socket2::Socket, Vec<String>)> {
    let sock = socket2::Socket::from(open_socket()?);
    // Frames this socket sends are not delivered back to it through the outgoing tap.
    let mut notes = knobs::apply(&sock, knobs, Transport::Packet, false)?;
    if sys::set_int(
        sock.as_raw_fd(),
        sys::SOL_PACKET,
        sys::PACKET_IGNORE_OUTGOING,
        1,
    )
    .is_err()
    {
        notes.push("packet: PACKET_IGNORE_OUTGOING unavailable (kernel < 4.20); the session filter drops own frames".into());
    }
    Ok((sock, notes))
}

fn granted(
    sock: &socket2::Socket,
    knobs: &Knobs,
    notes: Vec<String>,
    link: &Link,
    peer: &[u8; 6],
) -> GrantedKnobs {
    let mut g = knobs::granted(sock, knobs, Transport::Packet, false, notes);
    g.interface = Some(link.name.clone());
    g.local_mac = Some(sys::mac_string(&link.mac));
    g.peer_mac = Some(sys::mac_string(peer));
    g.path_mtu = Some(link.mtu);
    g.notes.push(format!(
        "packet: EtherType 0x{ETHERTYPE:04x} on {} (MTU {}); {PACKET_HEADER}-byte frame header, payload up to {} bytes",
        link.name,
        link.mtu,
        max_payload(link.mtu)
    ));
    g
}

/// A bound packet endpoint of one session.
#[derive(Debug)]
pub struct PacketEndpoint {
    sock: socket2::Socket,
    fd: RawFd,
    side: Side,
    /// Outgoing header template (length rewritten per frame).
    tx: [u8; FRAME_HEADER],
    /// Scratch for a received header.
    rx: [u8; FRAME_HEADER],
    tag: u32,
    want_kind: u8,
    link: Link,
    granted: GrantedKnobs,
    mmsg: Option<Mmsg>,
}

impl PacketEndpoint {
    #[cold]
    fn oversize(&self, len: usize) -> io::Error {
        too_big(len as u64, &self.link.name, self.link.mtu)
    }

    #[cold]
    fn send_error(&self, e: io::Error, len: usize) -> io::Error {
        match e.raw_os_error() {
            Some(libc::EMSGSIZE) => self.oversize(len),
            Some(libc::ENETDOWN) => io::Error::new(
                e.kind(),
                format!(
                    "interface {} is down: bring it up with `ip link set {} up`",
                    self.link.name, self.link.name
                ),
            ),
            _ => e,
        }
    }
}

impl Endpoint for PacketEndpoint {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > max_payload(self.link.mtu) {
            return Err(self.oversize(buf.len()));
        }
        set_len(&mut self.tx, buf.len());
        send_frame(self.fd, &self.tx, buf).map_err(|e| self.send_error(e, buf.len()))
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = recv_frame(self.fd, &mut self.rx, buf)?;
            if let Some(len) = check(&self.rx, n, self.tag, self.want_kind) {
                return Ok(len);
            }
        }
    }
    fn is_datagram(&self) -> bool {
        true
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        set_timeout(self.sock.as_raw_fd(), timeout)
    }
    fn granted(&self) -> GrantedKnobs {
        self.granted.clone()
    }
    fn prepare(&mut self, max_size: usize, batch: usize) -> io::Result<()> {
        // The server's buffers are sized generously (64 KiB and up): its limit was checked
        // against the session's largest size in listen().
        if self.side == Side::Client && max_size > max_payload(self.link.mtu) {
            return Err(self.oversize(max_size));
        }
        if let Some(m) = self.mmsg.as_mut() {
            m.prepare(batch, FRAME_HEADER);
        }
        Ok(())
    }
    #[inline]
    fn send_batch(&mut self, data: &[u8], size: usize, count: usize) -> io::Result<(usize, u64)> {
        if self.mmsg.is_none() {
            let mut calls = 0;
            for i in 0..count {
                self.send(&data[i * size..(i + 1) * size])?;
                calls += 1;
            }
            return Ok((count, calls));
        }
        if size > max_payload(self.link.mtu) {
            return Err(self.oversize(size));
        }
        set_len(&mut self.tx, size);
        let r = match self.mmsg.as_mut() {
            Some(m) => m.send(self.fd, data, size, count, &self.tx),
            None => Ok((0, 0)),
        };
        r.map_err(|e| self.send_error(e, size))
    }
    #[inline]
    fn recv_batch(
        &mut self,
        data: &mut [u8],
        slot: usize,
        lens: &mut [usize],
    ) -> io::Result<(usize, u64)> {
        let Some(m) = self.mmsg.as_mut() else {
            lens[0] = self.recv(&mut data[..slot])?;
            return Ok((1, 1));
        };
        let (k, calls) = m.recv(self.fd, data, slot, lens)?;
        for (i, l) in lens[..k].iter_mut().enumerate() {
            // A frame that is not ours (only possible before the filter was attached) shows
            // as an empty datagram: the stream receiver counts it as foreign.
            *l = check(m.prefix(i), *l + FRAME_HEADER, self.tag, self.want_kind).unwrap_or(0);
        }
        Ok((k, calls))
    }
    fn as_dyn(&mut self) -> &mut dyn Endpoint {
        self
    }
}

fn tag_of(cookie: u64) -> u32 {
    cookie as u32
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_and_check() {
        let mut h = header(&[1; 6], &[2; 6], 0xdead_beef, KIND_C2S);
        set_len(&mut h, 5);
        assert_eq!(&h[12..14], &[0x88, 0xb5]);
        // Padded to the Ethernet minimum: the length field wins.
        assert_eq!(check(&h, 60, 0xdead_beef, KIND_C2S), Some(5));
        assert_eq!(check(&h, 60, 0xdead_beef, KIND_S2C), None);
        assert_eq!(check(&h, 60, 1, KIND_C2S), None);
        assert_eq!(check(&h, 10, 0xdead_beef, KIND_C2S), None);
        // Truncated frame: the bytes actually there.
        assert_eq!(check(&h, FRAME_HEADER + 3, 0xdead_beef, KIND_C2S), Some(3));
    }

    #[test]
    fn mtu_error_names_the_mtu() {
        assert_eq!(max_payload(1500), 1492);
        let e = too_big(1500, "veth0", 1500).to_string();
        assert!(
            e.contains("MTU is 1500") && e.contains("at most 1492"),
            "{e}"
        );
    }
}
