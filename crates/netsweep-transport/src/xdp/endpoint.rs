//! A bound `xdp` session: the program on the interface and the AF_XDP socket on its queue
//! (a [`Path`]), the server's listener that waits for the client's hello on it, the client's
//! connect, and the data endpoint both get.

use super::program::Program;
use super::ring::{Xsk, MAX_FRAME};
use super::{max_payload, QUEUE};
use crate::knobs;
use crate::packet::frame::{check, header, set_len, Link, FRAME_HEADER};
use crate::packet::frame::{KIND_C2S, KIND_S2C};
use crate::packet::handshake::{self, FramePath};
use crate::packet::session::{client_target, server_interface};
use crate::packet::{tag_of, ETHERTYPE, HEADER};
use crate::sys;
use netsweep_endpoint::{DataListener, Endpoint, EndpointStats};
use netsweep_model::spec::Transport;
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs, SessionSetup, XdpGranted};
use std::io;
use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

/// The XDP program on an interface and the AF_XDP socket on its queue.
#[derive(Debug)]
struct Path {
    xsk: Xsk,
    program: Program,
    link: Link,
}

impl Path {
    /// Attaches the program to `name`, opens the socket and registers it with the program.
    fn open(name: &str, max_size: u64) -> io::Result<Self> {
        if name == "lo" {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "xdp needs a link between two hosts or namespaces (a veth pair from `netsweep \
                 lab`): on loopback both ends would share one queue; use -t packet there",
            ));
        }
        let link = Link::new(name)?;
        let max = max_payload(link.mtu);
        if max_size as usize > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{max_size}-byte message does not fit one xdp frame on {name}: the MTU is \
                     {}, and {HEADER} bytes go to the netsweep frame header, so the largest \
                     payload is {max} bytes: lower --sizes to at most {max}",
                    link.mtu
                ),
            ));
        }
        let mut program = Program::attach(link.index, name)?;
        let xsk = Xsk::open(link.index, QUEUE)?;
        // SAFETY: the socket's descriptor stays open while `xsk` lives; the map keeps its own
        // reference.
        program.redirect(QUEUE, unsafe { BorrowedFd::borrow_raw(xsk.fd()) })?;
        Ok(Self { xsk, program, link })
    }

    /// What the kernel granted, for the results.
    fn granted(&self, knobs: &Knobs, peer: &[u8; 6]) -> io::Result<GrantedKnobs> {
        let mut notes = knobs::plan(knobs, Transport::Xdp, false)?.1;
        for (set, name) in [(knobs.sndbuf, "sndbuf"), (knobs.rcvbuf, "rcvbuf")] {
            if set.is_some() {
                notes.push(format!(
                    "{name} does not apply to xdp: its rings hold a fixed number of frames"
                ));
            }
        }
        let (attach, bind) = (
            self.program.attach.name(),
            if self.xsk.zero_copy {
                "zero-copy"
            } else {
                "copy"
            },
        );
        notes.push(format!(
            "xdp: EtherType 0x{ETHERTYPE:04x} on {} (MTU {}), XDP {attach}, {bind} mode, \
             queue {QUEUE}, sent past the interface's qdisc (no shaper on it applies); \
             {HEADER}-byte frame header, payload up to {} bytes",
            self.link.name,
            self.link.mtu,
            max_payload(self.link.mtu)
        ));
        let queues = rx_queues(&self.link.name);
        if queues > 1 {
            notes.push(format!(
                "{} has {queues} receive queues and the socket serves queue {QUEUE} only: \
                 frames the driver steers elsewhere miss it (`ethtool -L {} combined 1`)",
                self.link.name, self.link.name
            ));
        }
        if let Some(us) = knobs.busy_poll.filter(|us| *us > 0) {
            notes.push(format!(
                "xdp: a receive polls its empty ring for up to {us} µs before it sleeps: the \
                 receiving side's CPU time includes the polling"
            ));
        }
        Ok(GrantedKnobs {
            batch: knobs.batch,
            busy_poll: knobs.busy_poll,
            buffer_offset: knobs.buffer_offset,
            interface: Some(self.link.name.clone()),
            local_mac: Some(sys::mac_string(&self.link.mac)),
            peer_mac: Some(sys::mac_string(peer)),
            path_mtu: Some(self.link.mtu),
            xdp: Some(XdpGranted {
                attach: attach.into(),
                bind: bind.into(),
                queue: QUEUE,
            }),
            notes,
            ..GrantedKnobs::default()
        })
    }
}

/// Receive queues of an interface, from sysfs (1 when it cannot tell).
fn rx_queues(name: &str) -> usize {
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

impl FramePath for Path {
    fn send_frame(&mut self, h: &[u8; FRAME_HEADER], payload: &[u8]) -> io::Result<()> {
        self.xsk
            .send(1, |_, chunk| {
                chunk[..FRAME_HEADER].copy_from_slice(h);
                chunk[FRAME_HEADER..FRAME_HEADER + payload.len()].copy_from_slice(payload);
                FRAME_HEADER + payload.len()
            })
            .map(drop)
    }

    fn recv_frame(
        &mut self,
        h: &mut [u8; FRAME_HEADER],
        payload: &mut [u8],
        wait: Duration,
    ) -> io::Result<Option<usize>> {
        self.xsk.set_timeout(Some(wait));
        let mut n = 0;
        let r = self.xsk.recv(1, |_, f| {
            if f.len() >= FRAME_HEADER {
                h.copy_from_slice(&f[..FRAME_HEADER]);
                let body = (f.len() - FRAME_HEADER).min(payload.len());
                payload[..body].copy_from_slice(&f[FRAME_HEADER..FRAME_HEADER + body]);
                n = FRAME_HEADER + body;
            }
        });
        match r {
            Ok(_) => Ok(Some(n)),
            Err(e) if crate::cookie::is_wait(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The server's xdp path, waiting for the client's hello.
#[derive(Debug)]
pub struct XdpListener {
    path: Option<Path>,
    knobs: Knobs,
}

impl XdpListener {
    /// Opens on the interface that owns `bind` (or the `interface` knob).
    pub fn open(setup: &SessionSetup, bind: IpAddr) -> io::Result<Self> {
        let knobs = &setup.server_knobs;
        let name = server_interface(knobs, bind)?;
        Ok(Self {
            path: Some(Path::open(&name, setup.max_size)?),
            knobs: knobs.clone(),
        })
    }
}

impl DataListener for XdpListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: 0,
            path: None,
            mac: self.path.as_ref().map(|p| sys::mac_string(&p.link.mac)),
            tls_fingerprint: None,
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let mut path = self
            .path
            .take()
            .ok_or_else(|| io::Error::other("the xdp socket was already handed out"))?;
        let peer = handshake::await_hello(&mut path, want, Instant::now() + timeout)?;
        let link = path.link.clone();
        handshake::acknowledge(&mut path, &link, &peer, want)?;
        let granted = path.granted(&self.knobs, &peer)?;
        Ok(Box::new(XdpEndpoint::new(
            path, &peer, want, KIND_S2C, KIND_C2S, granted,
        )))
    }
}

/// Connects the client's xdp path to the server at `server` whose MAC is in `data`.
pub fn connect(
    setup: &SessionSetup,
    knobs: &Knobs,
    server: IpAddr,
    data: &DataEndpoint,
    want: u64,
    timeout: Duration,
) -> io::Result<Box<dyn Endpoint>> {
    let (peer, name) = client_target(knobs, server, data, "xdp")?;
    let mut path = Path::open(&name, setup.max_size)?;
    let link = path.link.clone();
    let hellos = handshake::hello(&mut path, &link, &peer, want, Instant::now() + timeout)?;
    let mut granted = path.granted(knobs, &peer)?;
    granted.handshake_datagrams = Some(hellos);
    Ok(Box::new(XdpEndpoint::new(
        path, &peer, want, KIND_C2S, KIND_S2C, granted,
    )))
}

/// A bound xdp endpoint of one session.
#[derive(Debug)]
pub struct XdpEndpoint {
    path: Path,
    /// Outgoing header template (length rewritten per frame).
    tx: [u8; FRAME_HEADER],
    tag: u32,
    want_kind: u8,
    max: usize,
    granted: GrantedKnobs,
    client: bool,
}

impl XdpEndpoint {
    fn new(
        mut path: Path,
        peer: &[u8; 6],
        want: u64,
        send_kind: u8,
        want_kind: u8,
        granted: GrantedKnobs,
    ) -> Self {
        path.xsk.set_timeout(None);
        path.xsk
            .set_busy_poll(granted.busy_poll.map(|us| Duration::from_micros(us.into())));
        let tag = tag_of(want);
        Self {
            tx: header(peer, &path.link.mac, tag, send_kind),
            max: max_payload(path.link.mtu),
            path,
            tag,
            want_kind,
            granted,
            client: send_kind == KIND_C2S,
        }
    }

    #[cold]
    fn oversize(&self, len: usize) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{len}-byte message does not fit one xdp frame on {}: the largest payload is \
                 {} bytes",
                self.path.link.name, self.max
            ),
        )
    }
}

/// Writes the frame header `h` and `payload` into `chunk`; returns the frame's length.
#[inline]
fn frame(chunk: &mut [u8], h: &[u8; FRAME_HEADER], payload: &[u8]) -> usize {
    chunk[..FRAME_HEADER].copy_from_slice(h);
    chunk[FRAME_HEADER..FRAME_HEADER + payload.len()].copy_from_slice(payload);
    FRAME_HEADER + payload.len()
}

impl Endpoint for XdpEndpoint {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > self.max {
            return Err(self.oversize(buf.len()));
        }
        set_len(&mut self.tx, buf.len());
        let h = &self.tx;
        self.path.xsk.send(1, |_, chunk| frame(chunk, h, buf))?;
        Ok(buf.len())
    }

    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (tag, kind) = (self.tag, self.want_kind);
        loop {
            let mut got = None;
            self.path.xsk.recv(1, |_, f| {
                got = check(f, f.len(), tag, kind).map(|len| {
                    let n = len.min(buf.len());
                    buf[..n].copy_from_slice(&f[FRAME_HEADER..FRAME_HEADER + n]);
                    n
                });
            })?;
            if let Some(n) = got {
                return Ok(n);
            }
        }
    }

    fn is_datagram(&self) -> bool {
        true
    }

    fn stats(&mut self) -> EndpointStats {
        EndpointStats {
            socket_drops: self.path.xsk.counters().map(|c| c.rx_dropped),
            ..EndpointStats::default()
        }
    }

    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.path.xsk.set_timeout(timeout);
        Ok(())
    }

    fn granted(&self) -> GrantedKnobs {
        self.granted.clone()
    }

    fn prepare(&mut self, max_size: usize, _batch: usize) -> io::Result<()> {
        // The server's buffers are sized generously (64 KiB and up): its limit was checked
        // against the session's largest size when its path opened.
        if self.client && max_size > self.max {
            return Err(self.oversize(max_size));
        }
        Ok(())
    }

    /// Queues all `count` frames (waiting for transmit chunks as needed), kicking the kernel
    /// once per ring-full: a frame is never refused here, only dropped later and counted.
    #[inline]
    fn send_batch(&mut self, data: &[u8], size: usize, count: usize) -> io::Result<(usize, u64)> {
        if size > self.max {
            return Err(self.oversize(size));
        }
        set_len(&mut self.tx, size);
        let h = &self.tx;
        let (mut done, mut calls) = (0, 0);
        while done < count {
            let (n, c) = self.path.xsk.send(count - done, |i, chunk| {
                let at = (done + i) * size;
                frame(chunk, h, &data[at..at + size])
            })?;
            done += n;
            calls += c;
        }
        Ok((count, calls))
    }

    #[inline]
    fn recv_batch(
        &mut self,
        data: &mut [u8],
        slot: usize,
        lens: &mut [usize],
    ) -> io::Result<(usize, u64)> {
        let (tag, kind) = (self.tag, self.want_kind);
        self.path.xsk.recv(lens.len(), |i, f| {
            // A frame of another session shows as an empty datagram: the stream receiver
            // counts it as foreign.
            lens[i] = check(f, f.len(), tag, kind).map_or(0, |len| {
                let n = len.min(slot);
                data[i * slot..i * slot + n].copy_from_slice(&f[FRAME_HEADER..FRAME_HEADER + n]);
                n
            });
        })
    }
}

const _: () = assert!(MAX_FRAME >= FRAME_HEADER + 1500);
