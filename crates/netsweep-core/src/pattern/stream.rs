//! Stream: the client sends messages one way for the trial's duration; the server receives.
//! Each side accounts for itself: the sender the bytes its stack accepted, the receiver the
//! bytes it got (and, for datagrams, exactly which ones). The end of a trial is agreed over
//! the control connection, never in-band.

use super::dgram::{stamp, DgramAccount};
use super::{count_send_error, TrialSignals, SLICE};
use crate::endpoint::{is_timeout, send_message, Endpoint};
use netsweep_proto::messages::SideCounters;
use std::io;
use std::time::{Duration, Instant};

/// Sends `size`-byte messages for `duration`, `batch` per call (`buf` holds `batch` messages
/// back to back). Datagrams get the sequence header (trial cookie, sequence, send time).
///
/// A datagram the local stack refuses (see [`count_send_error`]) is counted in
/// `send_errors`, not sent: its sequence number is reused by the next datagram, so the
/// numbers the receiver sees are exactly 0..`messages_sent` and its loss (sent − received)
/// counts only what the network lost. Any other send error ends the trial with that error.
pub fn sender_trial(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    size: usize,
    batch: usize,
    duration: Duration,
    cookie: u32,
) -> io::Result<SideCounters> {
    let datagram = ep.is_datagram();
    let batch = batch.max(1);
    let mut c = SideCounters::default();
    let start = Instant::now();
    let mut seq = 0u64;
    let mut now = start;
    loop {
        if batch == 1 {
            if datagram {
                stamp(
                    buf,
                    cookie,
                    seq,
                    now.duration_since(start).as_nanos() as u64,
                );
            }
            match send_message(ep, &buf[..size]) {
                Ok(calls) => {
                    c.send_calls += calls;
                    seq += 1;
                }
                Err(e) if datagram && count_send_error(&mut c.send_errors, &e) => {
                    c.send_calls += 1;
                }
                Err(e) => return Err(e),
            }
        } else {
            if datagram {
                let ts = now.duration_since(start).as_nanos() as u64;
                for i in 0..batch {
                    stamp(&mut buf[i * size..], cookie, seq + i as u64, ts);
                }
            }
            let mut done = 0;
            while done < batch {
                match ep.send_batch(&buf[done * size..], size, batch - done) {
                    Ok((n, calls)) => {
                        c.send_calls += calls;
                        done += n;
                        if datagram && done < batch {
                            // A short batch: message `done` was refused. Count it, retry it.
                            match ep.take_send_error() {
                                Some(e) if count_send_error(&mut c.send_errors, &e) => {}
                                Some(e) => return Err(e),
                                None => c.send_errors.unreported += 1,
                            }
                            if start.elapsed() >= duration {
                                break;
                            }
                        }
                    }
                    // Message `done` was refused: retry it (same number) until accepted or
                    // the trial's time is up.
                    Err(e) if datagram && count_send_error(&mut c.send_errors, &e) => {
                        c.send_calls += 1;
                        if start.elapsed() >= duration {
                            break;
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            seq += done as u64;
        }
        now = Instant::now();
        if now.duration_since(start) >= duration {
            break;
        }
    }
    c.messages_sent = seq;
    c.bytes_sent = seq * size as u64;
    c.active_ns = now.duration_since(start).as_nanos() as u64;
    Ok(c)
}

/// How long a datagram receiver waits, once the sender has ended, for stragglers.
pub const DGRAM_QUIET: Duration = Duration::from_millis(60);

/// Receives until the client's announced bytes (stream) have all arrived, or (datagrams)
/// every announced datagram arrived or none came for [`DGRAM_QUIET`] after the end; gives up
/// after `idle` without data. `buf` holds `lens.len()` slots of `slot` bytes, each the
/// largest message plus one byte; more than one slot receives in batches (recvmmsg).
/// The endpoint's receive timeout must be [`SLICE`]. `account` must be reset for the trial
/// (and carry its cookie) before `epoch`, the moment this side was armed: the caller takes
/// it, then tells the client it is ready, so no byte can arrive before it.
#[allow(clippy::too_many_arguments)]
pub fn receiver_trial(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    slot: usize,
    lens: &mut [usize],
    signals: &TrialSignals,
    idle: Duration,
    account: &mut DgramAccount,
    epoch: Instant,
) -> io::Result<SideCounters> {
    let datagram = ep.is_datagram();
    let batched = lens.len() > 1;
    let mut c = SideCounters::default();
    let mut received_any = false;
    let mut last = epoch;
    let max_idle_slices = (idle.as_nanos() / SLICE.as_nanos()).max(1) as u32;
    let quiet_slices = (DGRAM_QUIET.as_nanos() / SLICE.as_nanos()).max(1) as u32;
    let mut idle_slices = 0u32;
    loop {
        let r = if batched {
            ep.recv_batch(buf, slot, lens)
        } else {
            ep.recv(&mut buf[..slot]).map(|n| {
                lens[0] = n;
                (1, 1)
            })
        };
        match r {
            Ok((1, _)) if !datagram && lens[0] == 0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "client closed the data connection",
                ));
            }
            Ok((count, calls)) => {
                let now = Instant::now();
                idle_slices = 0;
                c.recv_calls += calls;
                let got: usize = lens[..count].iter().sum();
                c.bytes_received += got as u64;
                if !received_any {
                    received_any = true;
                    c.first_recv_bytes = got as u64;
                }
                last = now;
                if datagram {
                    c.messages_received += count as u64;
                    let at = now.duration_since(epoch).as_nanos() as u64;
                    for (i, &n) in lens[..count].iter().enumerate() {
                        account.on_datagram(&buf[i * slot..i * slot + n], at);
                    }
                }
                if signals.is_ended() && done(datagram, &c, account, signals) {
                    break;
                }
            }
            Err(e) if is_timeout(&e) => {
                if signals.is_aborted() {
                    break;
                }
                idle_slices += 1;
                if signals.is_ended()
                    && (done(datagram, &c, account, signals)
                        || (datagram && idle_slices >= quiet_slices))
                {
                    break;
                }
                if idle_slices > max_idle_slices {
                    c.timed_out = true;
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    if received_any {
        // From the moment this side was armed (before the sender could start) to the last
        // receive. Starting at the first receive instead would count whatever queued in the
        // socket buffer before the receiver ran against too short a time, and overstate
        // the rate; this way the rate can only be understated, by the time the client's
        // first bytes took to arrive after the server said it was ready.
        c.recv_span_ns = last.duration_since(epoch).as_nanos() as u64;
        c.active_ns = last.duration_since(epoch).as_nanos() as u64;
    }
    if datagram {
        // Acquire (is_ended) before reading the count; 0 when the client never ended.
        let sent = if signals.is_ended() {
            signals.sent().1
        } else {
            0
        };
        c.datagrams = Some(account.counters(sent));
    }
    Ok(c)
}

/// True once everything the sender announced has arrived (call only after `is_ended`).
#[inline]
fn done(datagram: bool, c: &SideCounters, account: &DgramAccount, signals: &TrialSignals) -> bool {
    let (bytes, messages) = signals.sent();
    if datagram {
        account.received >= messages
    } else {
        c.bytes_received >= bytes
    }
}
