//! Pingpong: the client sends a message and waits for the server's echo; every round trip
//! is timed. Datagram transports number each request so a lost one is counted after the
//! loss timeout and a late echo is recognised, never waited on forever.

use super::{count_send_error, TrialSignals, SLICE};
use crate::endpoint::{is_timeout, recv_message, send_message, Endpoint, Slots};
use crate::stats::LatencyHistogram;
use netsweep_proto::messages::SideCounters;
use std::io;
use std::time::{Duration, Instant};

/// What the client saw in one pingpong trial.
#[derive(Debug, Clone, Default)]
pub struct ClientTrial {
    pub counters: SideCounters,
    /// Round trips that completed.
    pub completed: u64,
    /// Requests whose echo did not come within the loss timeout (datagrams only).
    pub lost: u64,
    /// Echoes that arrived after their request had been counted lost.
    pub late: u64,
    /// Echoes whose payload differed from the request (checked only when asked).
    pub corrupt: u64,
    /// Datagram requests the local stack refused (counted per errno in
    /// `counters.send_errors`): not sent, so neither completed nor lost.
    pub refused: u64,
    /// Sum of completed round-trip times, nanoseconds.
    pub rtt_sum_ns: u64,
}

/// Writes the low bytes of `seq` into the first min(len, 8) bytes of a datagram request.
#[inline]
fn tag(buf: &mut [u8], seq: u64) {
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
}

#[inline]
fn tag_matches(buf: &[u8], seq: u64) -> bool {
    let n = buf.len().min(8);
    buf[..n] == seq.to_le_bytes()[..n]
}

/// Runs `reps` round trips of `size` bytes (a datagram request the local stack refuses is
/// counted in `refused` and `send_errors` and takes its turn: no retry), numbering datagram requests from
/// `first_seq` (numbers continue across trials so a straggler is never taken for an echo). Round-trip times go into `hist`.
/// On datagram endpoints the caller has set the receive timeout to the loss timeout; `rx`
/// slots are `size` bytes (plus one for datagrams, to see oversize echoes). With more than
/// one slot, each round trip uses the next slot of each pool (NetPIPE's cache invalidation).
/// With `verify`, every echo is compared with its request (for untimed warm-ups).
pub fn client_trial(
    ep: &mut dyn Endpoint,
    txs: &mut Slots<'_>,
    rxs: &mut Slots<'_>,
    first_seq: u64,
    reps: u64,
    hist: &mut LatencyHistogram,
    verify: bool,
) -> io::Result<ClientTrial> {
    let size = txs.size;
    let pools = txs.count.max(rxs.count);
    let datagram = ep.is_datagram();
    let mut t = ClientTrial::default();
    let start = Instant::now();
    for i in 0..reps {
        let seq = first_seq + i;
        let k = if pools > 1 {
            (i % pools as u64) as usize
        } else {
            0
        };
        let tx = txs.get(k);
        let rx = rxs.get(k);
        if datagram {
            tag(&mut tx[..size], seq);
        }
        let t0 = Instant::now();
        match send_message(ep, &tx[..size]) {
            Ok(calls) => t.counters.send_calls += calls,
            Err(e) if datagram && count_send_error(&mut t.counters.send_errors, &e) => {
                // Not sent: no echo to wait for, and not a loss in the network.
                t.counters.send_calls += 1;
                t.refused += 1;
                continue;
            }
            Err(e) => return Err(e),
        }
        t.counters.bytes_sent += size as u64;
        t.counters.messages_sent += 1;
        if datagram {
            loop {
                match ep.recv(rx) {
                    Ok(n) => {
                        t.counters.recv_calls += 1;
                        if n == size && tag_matches(&rx[..n], seq) {
                            break;
                        }
                        t.late += 1;
                    }
                    Err(e) if is_timeout(&e) => {
                        t.lost += 1;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            if t.lost + t.completed + t.refused > i {
                // This request was counted lost: no round trip to record.
                continue;
            }
        } else {
            t.counters.recv_calls += recv_message(ep, &mut rx[..size])?;
        }
        let rtt = t0.elapsed().as_nanos() as u64;
        hist.record(rtt);
        t.rtt_sum_ns += rtt;
        t.completed += 1;
        t.counters.bytes_received += size as u64;
        t.counters.messages_received += 1;
        if verify && rx[..size] != tx[..size] {
            t.corrupt += 1;
        }
    }
    t.counters.active_ns = start.elapsed().as_nanos() as u64;
    Ok(t)
}

/// The server's side of one pingpong trial: echoes `size`-byte messages until `reps` echoes
/// were sent, the client ends the trial (`signals`), or nothing arrives for `idle`.
/// The endpoint's receive timeout must be [`SLICE`].
pub fn server_trial(
    ep: &mut dyn Endpoint,
    bufs: &mut Slots<'_>,
    size: usize,
    reps: u64,
    signals: &TrialSignals,
    idle: Duration,
) -> io::Result<SideCounters> {
    let datagram = ep.is_datagram();
    let mut c = SideCounters::default();
    let start = Instant::now();
    let max_idle_slices = (idle.as_nanos() / SLICE.as_nanos()).max(1) as u32;
    let mut idle_slices = 0u32;
    let mut done = 0u64;
    let mut off = 0usize;
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
            Ok(n) => {
                idle_slices = 0;
                c.recv_calls += 1;
                c.bytes_received += n as u64;
                if datagram {
                    c.messages_received += 1;
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
                    off += n;
                    if off == size {
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
                if signals.is_aborted() || (signals.is_ended() && datagram) {
                    break;
                }
                idle_slices += 1;
                if idle_slices > max_idle_slices {
                    c.timed_out = true;
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    c.active_ns = start.elapsed().as_nanos() as u64;
    Ok(c)
}
