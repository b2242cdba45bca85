//! A bound packet endpoint of one session: sends and receives frames of its session, one
//! per call or a batch per call with `--api mmsg`.

use super::frame::{check, recv_frame, send_frame, set_len, set_timeout, Link, FRAME_HEADER};
use super::{max_payload, too_big, Side, ETHERTYPE, HEADER};
use crate::mmsg::Mmsg;
use crate::{knobs, sys};
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_model::spec::Transport;
use netsweep_proto::messages::{GrantedKnobs, Knobs};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

pub(super) fn granted(
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
        "packet: EtherType 0x{ETHERTYPE:04x} on {} (MTU {}); {HEADER}-byte frame header, payload up to {} bytes",
        link.name,
        link.mtu,
        max_payload(link.mtu)
    ));
    g
}

/// A bound packet endpoint of one session.
#[derive(Debug)]
pub struct PacketEndpoint {
    pub(super) sock: socket2::Socket,
    pub(super) fd: RawFd,
    pub(super) side: Side,
    /// Outgoing header template (length rewritten per frame).
    pub(super) tx: [u8; FRAME_HEADER],
    /// Scratch for a received header.
    pub(super) rx: [u8; FRAME_HEADER],
    pub(super) tag: u32,
    pub(super) want_kind: u8,
    pub(super) link: Link,
    pub(super) granted: GrantedKnobs,
    pub(super) mmsg: Option<Mmsg>,
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
    fn socket_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.fd)
    }

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
    fn stats(&mut self) -> EndpointStats {
        EndpointStats {
            socket_drops: sys::socket_drops(self.fd),
            ..EndpointStats::default()
        }
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
}
