//! The echo server: the server's side of pingpong (a trial's repetitions, through the cache
//! pool when `--cache-pool` asks for one) and of rate (every request until the client ends
//! the trial). The `--flows` variants echo with `flow.rs`, a state machine the flows driver runs.

pub(crate) mod flow;

use super::oneway::{self, WallClock};
use super::{
    count_send_error, Accepted, IdleSlices, ServerBuffers, ServerOpen, ServerPattern, ServerTrial,
    TrialSignals,
};
use netsweep_endpoint::{is_timeout, pool_stride, send_message, DataListener, Endpoint, Slots};
use netsweep_proto::messages::SideCounters;
use netsweep_proto::stamps;
use std::io;
use std::time::{Duration, Instant};

/// Opens the echo server of a pingpong session.
pub(super) fn open_pingpong(
    listener: Box<dyn DataListener>,
    o: &ServerOpen,
) -> Result<Box<dyn ServerPattern>, String> {
    open(listener, o, false)
}

/// Opens the echo server of a rate session.
pub(super) fn open_rate(
    listener: Box<dyn DataListener>,
    o: &ServerOpen,
) -> Result<Box<dyn ServerPattern>, String> {
    open(listener, o, true)
}

fn open(
    listener: Box<dyn DataListener>,
    o: &ServerOpen,
    until_ended: bool,
) -> Result<Box<dyn ServerPattern>, String> {
    let accepted = o.accept(listener)?;
    Ok(Box::new(Echo {
        accepted,
        until_ended,
        one_way: o.one_way,
    }))
}

/// The accepted endpoint, echoing.
struct Echo {
    accepted: Accepted,
    /// Rate: echo until the client ends the trial, whatever the repetitions, from one slot.
    /// Pingpong: the trial's repetitions, through the cache pool.
    until_ended: bool,
    /// `--one-way`: stamp each echo.
    one_way: bool,
}

impl ServerPattern for Echo {
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        Some(self.accepted.ep.as_mut())
    }

    fn run_trial(
        &mut self,
        t: &ServerTrial<'_>,
        b: &mut ServerBuffers,
    ) -> io::Result<SideCounters> {
        let size = t.spec.size as usize;
        let (mut slots, reps) = if self.until_ended {
            let slots = Slots::new(&mut b.buf.as_mut()[..b.slot], size + 1, b.slot);
            (slots, u64::MAX)
        } else {
            let stride = if b.cache_pool > b.slot {
                pool_stride(size + 1, b.offset)
            } else {
                b.slot
            };
            let slots = Slots::new(&mut b.buf.as_mut()[..b.pool_len], size + 1, stride);
            (slots, t.spec.repetitions)
        };
        // `--one-way`: a rate request's stamps follow its sequence header.
        let datagram = self.accepted.ep.is_datagram();
        let base = if self.until_ended {
            stamps::RATE_OFFSET
        } else {
            stamps::offset(datagram)
        };
        server_trial(
            self.accepted.ep.as_mut(),
            &mut slots,
            size,
            reps,
            t.signals,
            t.idle,
            self.one_way.then_some(base),
        )
    }
}

/// One trial of the echo server: echoes `size`-byte messages until `reps` echoes were sent,
/// the client ends the trial (`signals`; on a stream, once every message it announced was
/// echoed), or nothing arrives for `idle`. Rate's server runs it with unlimited `reps`.
/// The endpoint's receive timeout must be [`SLICE`](super::SLICE). With `stamp_at` (where the
/// stamps start), each echo with room for them carries the server's `--one-way` stamps.
pub fn server_trial(
    ep: &mut dyn Endpoint,
    bufs: &mut Slots<'_>,
    size: usize,
    reps: u64,
    signals: &TrialSignals,
    idle: Duration,
    stamp_at: Option<usize>,
) -> io::Result<SideCounters> {
    let datagram = ep.is_datagram();
    let mut c = SideCounters::default();
    let base = stamp_at.unwrap_or(0);
    let stamping = stamp_at.is_some_and(|b| stamps::fits(size, b));
    let wall = WallClock::now();
    // The current request's first receive (a stream's message may take several).
    let mut received = Instant::now();
    let start = Instant::now();
    let mut idle_slices = IdleSlices::new(idle);
    let mut done = 0u64;
    let mut off = 0usize;
    let mut first = None::<(Instant, usize)>;
    let mut arrivals = super::arrival::Arrivals::default();
    while done < reps {
        let buf = bufs.get(if bufs.count > 1 {
            (done % bufs.count as u64) as usize
        } else {
            0
        });
        let r = if datagram {
            ep.recv(buf)
        } else {
            ep.recv(&mut buf[off..size])
        };
        match r {
            Ok(0) if !datagram => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "client closed the data connection",
                ));
            }
            // A client that keeps sending never lets a receive time out: the end of the
            // session is looked for on every pass too (one relaxed load).
            Ok(_) if signals.is_aborted() => break,
            Ok(n) => {
                idle_slices.reset();
                c.recv_calls += 1;
                c.bytes_received += n as u64;
                if datagram {
                    c.messages_received += 1;
                    if stamping && stamps::fits(n, base) {
                        // Received and echoed at once: one clock read for both.
                        let now = wall.at(Instant::now());
                        oneway::stamp_echo(&mut buf[..n], base, now, now);
                    }
                    match send_message(ep, &buf[..n]) {
                        Ok(calls) => {
                            c.send_calls += calls;
                            c.bytes_sent += n as u64;
                            c.messages_sent += 1;
                        }
                        // The echo was refused by this host's stack: counted, not sent.
                        Err(e) if count_send_error(&mut c.send_errors, &e) => c.send_calls += 1,
                        Err(e) => return Err(e),
                    }
                    done += 1;
                } else {
                    // A request's arrival, first receive to last (the client→server
                    // direction): one clock read when its first receive returns short.
                    if off == 0 && (n < size || stamping) {
                        received = Instant::now();
                        if n < size {
                            first = Some((received, n));
                        }
                    }
                    off += n;
                    if off == size {
                        let mut last = None;
                        if let Some((t, n0)) = first.take() {
                            let now = Instant::now();
                            last = Some(now);
                            let span = now.duration_since(t).as_nanos() as u64;
                            arrivals.record_span((size - n0) as u64, span, size);
                        }
                        if stamping {
                            let sent = last.unwrap_or_else(Instant::now);
                            let (r, s) = (wall.at(received), wall.at(sent));
                            oneway::stamp_echo(&mut buf[..size], base, r, s);
                        }
                        c.messages_received += 1;
                        c.send_calls += send_message(ep, &buf[..size])?;
                        c.bytes_sent += size as u64;
                        c.messages_sent += 1;
                        done += 1;
                        off = 0;
                    }
                }
            }
            Err(e) if is_timeout(&e) => {
                // Ended: a datagram's echoes are done; a stream's once every message the
                // client announced was echoed (the rate pattern's trials end so).
                let echoed = || datagram || c.messages_received >= signals.sent().1;
                if signals.is_aborted() || (signals.is_ended() && echoed()) {
                    break;
                }
                if idle_slices.tick() {
                    c.timed_out = true;
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    c.active_ns = start.elapsed().as_nanos() as u64;
    c.arrival = arrivals.finish();
    Ok(c)
}
