//! Stream: the client sends messages one way for the trial's duration; the server receives.
//! Each side accounts for itself: the sender the bytes its stack accepted, the receiver the
//! bytes it got (and, for datagrams, exactly which ones). The end of a trial is agreed over
//! the control connection, never in-band.

use super::dgram::{stamp, DgramAccount};
use super::{TrialSignals, SLICE};
use crate::endpoint::{is_timeout, send_message, Endpoint};
use netsweep_proto::messages::SideCounters;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Sends `size`-byte messages for `duration`, `batch` per call (`buf` holds `batch` messages
/// back to back). Datagrams get the sequence header (trial cookie, sequence, send time).
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
            c.send_calls += send_message(ep, &buf[..size])?;
            seq += 1;
        } else {
            if datagram {
                let ts = now.duration_since(start).as_nanos() as u64;
                for i in 0..batch {
                    stamp(&mut buf[i * size..], cookie, seq + i as u64, ts);
                }
            }
            let mut done = 0;
            while done < batch {
                let (n, calls) = ep.send_batch(&buf[done * size..], size, batch - done)?;
                c.send_calls += calls;
                done += n;
            }
            seq += batch as u64;
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
/// The endpoint's receive timeout must be [`SLICE`].
pub fn receiver_trial(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    slot: usize,
    lens: &mut [usize],
    signals: &TrialSignals,
    idle: Duration,
    account: &mut DgramAccount,
) -> io::Result<SideCounters> {
    let datagram = ep.is_datagram();
    let batched = lens.len() > 1;
    account.reset();
    let mut c = SideCounters::default();
    let epoch = Instant::now();
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
        let sent = signals.sent_messages.load(Ordering::Relaxed);
        c.datagrams = Some(account.counters(sent));
    }
    Ok(c)
}

/// True once everything the sender announced has arrived.
#[inline]
fn done(datagram: bool, c: &SideCounters, account: &DgramAccount, signals: &TrialSignals) -> bool {
    if datagram {
        account.received >= signals.sent_messages.load(Ordering::Relaxed)
    } else {
        c.bytes_received >= signals.sent_bytes.load(Ordering::Relaxed)
    }
}
