//! Stream: the client sends messages one way for the trial's duration; the server receives.
//! Each side accounts for itself: the sender the bytes its stack accepted, the receiver the
//! bytes it got (and, for datagrams, exactly which ones). The end of a trial is agreed over
//! the control connection, never in-band.

use super::dgram::{stamp, DgramAccount};
use super::{TrialSignals, SLICE};
use crate::endpoint::{is_timeout, send_message, Endpoint};
use netsweep_proto::messages::SideCounters;
use std::io;
use std::time::{Duration, Instant};

/// Sends `buf` repeatedly for `duration`. Datagrams get the sequence header (cookie low 32 bits).
pub fn sender_trial(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    duration: Duration,
    cookie: u32,
) -> io::Result<SideCounters> {
    let datagram = ep.is_datagram();
    let size = buf.len() as u64;
    let mut c = SideCounters::default();
    let start = Instant::now();
    let mut seq = 0u64;
    let mut now = start;
    loop {
        if datagram {
            stamp(
                buf,
                cookie,
                seq,
                now.duration_since(start).as_nanos() as u64,
            );
        }
        c.send_calls += send_message(ep, buf)?;
        seq += 1;
        now = Instant::now();
        if now.duration_since(start) >= duration {
            break;
        }
    }
    c.messages_sent = seq;
    c.bytes_sent = seq * size;
    c.active_ns = now.duration_since(start).as_nanos() as u64;
    Ok(c)
}

/// How long a datagram receiver waits, once the sender has ended, for stragglers.
pub const DGRAM_QUIET: Duration = Duration::from_millis(60);

/// Receives until the client's announced bytes (stream) have all arrived, or (datagrams)
/// every announced datagram arrived or none came for [`DGRAM_QUIET`] after the end; gives up
/// after `idle` without data. `buf` must hold the largest message (plus one byte for
/// datagrams). The endpoint's receive timeout must be [`SLICE`].
pub fn receiver_trial(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    signals: &TrialSignals,
    idle: Duration,
    account: &mut DgramAccount,
) -> io::Result<SideCounters> {
    let datagram = ep.is_datagram();
    account.reset();
    let mut c = SideCounters::default();
    let epoch = Instant::now();
    let mut first: Option<Instant> = None;
    let mut last = epoch;
    let max_idle_slices = (idle.as_nanos() / SLICE.as_nanos()).max(1) as u32;
    let quiet_slices = (DGRAM_QUIET.as_nanos() / SLICE.as_nanos()).max(1) as u32;
    let mut idle_slices = 0u32;
    loop {
        match ep.recv(buf) {
            Ok(0) if !datagram => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "client closed the data connection",
                ));
            }
            Ok(n) => {
                let now = Instant::now();
                idle_slices = 0;
                c.recv_calls += 1;
                c.bytes_received += n as u64;
                if first.is_none() {
                    first = Some(now);
                    c.first_recv_bytes = n as u64;
                }
                last = now;
                if datagram {
                    c.messages_received += 1;
                    account.on_datagram(&buf[..n], now.duration_since(epoch).as_nanos() as u64);
                }
                if signals.is_ended() {
                    let done = if datagram {
                        account.received
                            >= signals
                                .sent_messages
                                .load(std::sync::atomic::Ordering::Relaxed)
                    } else {
                        c.bytes_received
                            >= signals
                                .sent_bytes
                                .load(std::sync::atomic::Ordering::Relaxed)
                    };
                    if done {
                        break;
                    }
                }
            }
            Err(e) if is_timeout(&e) => {
                if signals.is_aborted() {
                    break;
                }
                idle_slices += 1;
                if signals.is_ended() {
                    let sent_b = signals
                        .sent_bytes
                        .load(std::sync::atomic::Ordering::Relaxed);
                    let sent_m = signals
                        .sent_messages
                        .load(std::sync::atomic::Ordering::Relaxed);
                    if (!datagram && c.bytes_received >= sent_b)
                        || (datagram && (account.received >= sent_m || idle_slices >= quiet_slices))
                    {
                        break;
                    }
                }
                if idle_slices > max_idle_slices {
                    c.timed_out = true;
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    if let Some(f) = first {
        c.recv_span_ns = last.duration_since(f).as_nanos() as u64;
        c.active_ns = last.duration_since(epoch).as_nanos() as u64;
    }
    if datagram {
        let sent = signals
            .sent_messages
            .load(std::sync::atomic::Ordering::Relaxed);
        c.datagrams = Some(account.counters(sent));
    }
    Ok(c)
}
