//! The client's receiving side of a reversed stream (`--reverse`): the server's data thread
//! runs stream's sender loop, the client receives. The client takes its epoch before it asks
//! the server to start (so no byte can arrive before its clock, as on the server in the
//! forward direction), receives until the trial's time is up and the server has gone quiet,
//! and once the server's report gives its exact count, takes whatever is still on its way:
//! every byte the server sent is received (stream), every datagram is received or lost.

use super::dgram::DgramAccount;
use super::intervals::Intervals;
use super::{slices, IdleSlices, SLICE};
use netsweep_endpoint::{is_timeout, Endpoint, MessageBuffer};
use netsweep_proto::messages::SideCounters;
use std::io;
use std::time::{Duration, Instant};

/// How long the client's loop waits, past the trial's time, for the server to go quiet.
/// The server's sender started a control message later than the client's clock and ends as
/// late; a server still sending keeps the loop going, and whatever arrives after the quiet
/// is taken once the server's count is known ([`Receiver::complete`]).
pub const QUIET: Duration = Duration::from_millis(5);

/// How long the client waits, once the server's count is known, for datagrams still on
/// their way (the rest are lost).
const DGRAM_DRAIN: Duration = super::dgram::DGRAM_QUIET;

/// The client's receiver: its buffers, allocated per point, and the trial's accounting.
#[derive(Debug)]
pub struct Receiver {
    buf: MessageBuffer,
    slot: usize,
    lens: Vec<usize>,
    account: DgramAccount,
    epoch: Instant,
    last: Option<Instant>,
    idle: Duration,
    /// The trial's counts per interval (`--interval`).
    iv: Intervals,
}

impl Receiver {
    /// A receiver giving up after `idle` without data.
    pub fn new(idle: Duration) -> Self {
        Self {
            buf: MessageBuffer::new(0, 0),
            slot: 0,
            lens: vec![0],
            account: DgramAccount::new(0),
            epoch: Instant::now(),
            last: None,
            idle,
            iv: Intervals::default(),
        }
    }

    /// Buffers for `size`-byte messages, `batch` per call, at `offset` from a page: slots of
    /// the largest message plus one byte, as on the server, so an oversize datagram shows.
    pub fn begin_point(&mut self, size: usize, batch: usize, offset: usize) {
        self.slot = size.max(64 * 1024) + 1;
        self.lens = vec![0; batch.max(1)];
        self.buf = MessageBuffer::new(self.slot * self.lens.len(), offset);
    }

    /// Resets the accounting for a trial whose datagrams carry `cookie`, and takes the epoch:
    /// call before asking the server to start the trial.
    pub fn arm(&mut self, cookie: u32) {
        self.account.set_cookie(cookie);
        self.account.reset();
        self.last = None;
        self.epoch = Instant::now();
    }

    /// The timed loop: receives until `duration` after the epoch has passed and then
    /// nothing came for [`QUIET`]. The endpoint's receive timeout must be [`SLICE`]; it is
    /// [`QUIET`] when this returns ([`complete`](Self::complete) restores it). With an
    /// `interval_ns`, bytes are counted per interval by arrival, datagrams by send time.
    pub fn run(
        &mut self,
        ep: &mut dyn Endpoint,
        duration: Duration,
        interval_ns: u64,
    ) -> io::Result<SideCounters> {
        let drain = DGRAM_DRAIN.as_nanos() as u64;
        self.iv
            .arm_receiver(interval_ns, duration.as_nanos() as u64, drain);
        let datagram = ep.is_datagram();
        let batched = self.lens.len() > 1;
        let deadline = self.epoch + duration;
        let mut c = SideCounters::default();
        let mut idle = IdleSlices::new(self.idle);
        let mut tail = false;
        let buf = self.buf.as_mut();
        let slot = self.slot;
        loop {
            let r = if batched {
                ep.recv_batch(buf, slot, &mut self.lens)
            } else {
                ep.recv(&mut buf[..slot]).map(|n| {
                    self.lens[0] = n;
                    (1, 1)
                })
            };
            match r {
                Ok((1, _)) if !datagram && self.lens[0] == 0 => return Err(closed()),
                Ok((count, calls)) => {
                    let now = Instant::now();
                    idle.reset();
                    c.recv_calls += calls;
                    let got: usize = self.lens[..count].iter().sum();
                    if self.last.is_none() {
                        c.first_recv_bytes = got as u64;
                    }
                    c.bytes_received += got as u64;
                    self.last = Some(now);
                    self.iv.add_arrival(now, self.epoch, got as u64);
                    if datagram {
                        c.messages_received += count as u64;
                        let at = now.duration_since(self.epoch).as_nanos() as u64;
                        for (i, &n) in self.lens[..count].iter().enumerate() {
                            let d = &buf[i * slot..i * slot + n];
                            if let Some(sent) = self.account.on_datagram(d, at) {
                                self.iv.add(sent, 0, 1);
                            }
                        }
                    }
                    if !tail && now >= deadline {
                        tail = true;
                        ep.set_recv_timeout(Some(QUIET))?;
                    }
                }
                Err(e) if is_timeout(&e) => {
                    if tail {
                        break;
                    }
                    if Instant::now() >= deadline {
                        tail = true;
                        ep.set_recv_timeout(Some(QUIET))?;
                    } else if idle.tick() {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "no data from the server",
                        ));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(c)
    }

    /// The server's count is known: receives what it sent beyond the timed loop (every byte
    /// of a stream; datagrams until all arrived or none came for a while) and completes the
    /// client's counters: its receive span and, for datagrams, the loss accounting.
    pub fn complete(
        &mut self,
        ep: &mut dyn Endpoint,
        server: &SideCounters,
        c: &mut SideCounters,
    ) -> io::Result<()> {
        ep.set_recv_timeout(Some(SLICE))?;
        let datagram = ep.is_datagram();
        let slot = self.slot;
        let buf = self.buf.as_mut();
        let mut idle = IdleSlices::new(if datagram { DGRAM_DRAIN } else { self.idle });
        let quiet = slices(DGRAM_DRAIN);
        loop {
            let pending = if datagram {
                self.account.received < server.messages_sent
            } else {
                c.bytes_received < server.bytes_sent
            };
            if !pending {
                break;
            }
            // One message at a time: what is left is at most the socket's buffers.
            match ep.recv(&mut buf[..slot]) {
                Ok(0) if !datagram => return Err(closed()),
                Ok(n) => {
                    let now = Instant::now();
                    idle.reset();
                    c.recv_calls += 1;
                    c.bytes_received += n as u64;
                    self.last = Some(now);
                    self.iv.add_arrival(now, self.epoch, n as u64);
                    if datagram {
                        c.messages_received += 1;
                        let at = now.duration_since(self.epoch).as_nanos() as u64;
                        if let Some(sent) = self.account.on_datagram(&buf[..n], at) {
                            self.iv.add(sent, 0, 1);
                        }
                    }
                }
                Err(e) if is_timeout(&e) => {
                    let exceeded = idle.tick();
                    if datagram && idle.count() >= quiet {
                        break;
                    }
                    if exceeded {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the server's last bytes did not arrive",
                        ));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if let Some(last) = self.last {
            // From the epoch (before the server could send) to the last byte: the rate can
            // only be understated, by the time the server took to start.
            c.recv_span_ns = last.duration_since(self.epoch).as_nanos() as u64;
            c.active_ns = c.recv_span_ns;
        }
        if datagram {
            c.datagrams = Some(self.account.counters(server.messages_sent));
        }
        c.intervals = self.iv.report();
        Ok(())
    }
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the server closed the data connection",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::dgram::stamp;
    use crate::testing::Sock;
    use std::io::Write;
    use std::os::unix::net::{UnixDatagram, UnixStream};

    #[test]
    fn complete_takes_every_byte_the_server_counted_after_the_timed_loop() {
        let (mut server, client) = UnixStream::pair().unwrap();
        let mut ep = Sock::Stream(client);
        let mut rx = Receiver::new(Duration::from_secs(2));
        rx.begin_point(1000, 1, 0);
        rx.arm(7);
        // The timed loop took 3000 bytes; 5000 more were still on their way.
        let mut c = SideCounters {
            bytes_received: 3000,
            ..Default::default()
        };
        server.write_all(&[1u8; 5000]).unwrap();
        let sent = SideCounters {
            bytes_sent: 8000,
            ..Default::default()
        };
        rx.complete(&mut ep, &sent, &mut c).unwrap();
        assert_eq!(c.bytes_received, 8000);
        assert!(c.recv_calls >= 1 && c.recv_span_ns > 0 && c.active_ns == c.recv_span_ns);
        assert!(c.datagrams.is_none());
    }

    #[test]
    fn complete_counts_late_datagrams_received_and_the_rest_lost() {
        let (server, client) = UnixDatagram::pair().unwrap();
        let mut ep = Sock::Dgram(client);
        let mut rx = Receiver::new(Duration::from_secs(2));
        rx.begin_point(64, 1, 0);
        rx.arm(9);
        // Datagrams 0..5 sent after the timed loop ended; 2 was lost, and one of an earlier
        // trial (another cookie) arrives too.
        let mut d = [0u8; 64];
        for seq in [0u64, 1, 3, 4] {
            stamp(&mut d, 9, seq, 0);
            server.send(&d).unwrap();
        }
        stamp(&mut d, 8, 5, 0);
        server.send(&d).unwrap();
        let sent = SideCounters {
            messages_sent: 5,
            ..Default::default()
        };
        let mut c = SideCounters::default();
        rx.complete(&mut ep, &sent, &mut c).unwrap();
        let g = c.datagrams.unwrap();
        assert_eq!((g.received, g.lost, g.foreign), (4, 1, 1));
        assert_eq!(c.messages_received, 5);
    }
}
