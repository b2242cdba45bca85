//! Connect/request/response/close (netperf TCP_CRR): every transaction opens a new
//! connection, sends a request, waits for the response and closes. The client times the
//! connection setup (socket, knobs, handshake) and the whole transaction; the server counts
//! the connections it accepted. Opening a connection allocates (a socket, a boxed endpoint):
//! that cost is part of what this pattern measures.

use super::{TrialSignals, SLICE};
use crate::endpoint::{is_timeout, recv_message, send_message, DataListener, Endpoint};
use crate::stats::LatencyHistogram;
use netsweep_proto::messages::SideCounters;
use std::io;
use std::time::{Duration, Instant};

/// What the client saw in one crr trial.
#[derive(Debug, Clone, Default)]
pub struct ClientTrial {
    pub counters: SideCounters,
    /// Transactions completed.
    pub completed: u64,
    /// Sum of transaction times, nanoseconds.
    pub txn_sum_ns: u64,
    /// Sum of connection setup times, nanoseconds.
    pub connect_sum_ns: u64,
}

/// Explains a connect failure that means the host ran out of ports.
pub fn explain_connect_error(e: io::Error, done: u64) -> io::Error {
    if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
        io::Error::new(
            e.kind(),
            format!(
                "out of ephemeral ports after {done} connections in this trial (TIME_WAIT holds each \
                 closed one for 60 s): widen net.ipv4.ip_local_port_range, set net.ipv4.tcp_tw_reuse=1, \
                 or lower --trial-time"
            ),
        )
    } else {
        e
    }
}

/// Runs `reps` transactions of `tx.len()` bytes each way, opening each connection with
/// `connect`. Connection setup times go to `connect_hist`, whole transactions to `txn_hist`.
pub fn client_trial(
    connect: &mut dyn FnMut() -> io::Result<Box<dyn Endpoint>>,
    tx: &[u8],
    rx: &mut [u8],
    reps: u64,
    connect_hist: &mut LatencyHistogram,
    txn_hist: &mut LatencyHistogram,
) -> io::Result<ClientTrial> {
    let size = tx.len();
    let mut t = ClientTrial::default();
    let start = Instant::now();
    for _ in 0..reps {
        let t0 = Instant::now();
        let mut ep = connect().map_err(|e| explain_connect_error(e, t.completed))?;
        let t1 = Instant::now();
        t.counters.send_calls += send_message(ep.as_mut(), tx)?;
        t.counters.recv_calls += recv_message(ep.as_mut(), &mut rx[..size])?;
        drop(ep);
        let t2 = Instant::now();
        let c = t1.duration_since(t0).as_nanos() as u64;
        let x = t2.duration_since(t0).as_nanos() as u64;
        connect_hist.record(c);
        txn_hist.record(x);
        t.connect_sum_ns += c;
        t.txn_sum_ns += x;
        t.completed += 1;
        t.counters.bytes_sent += size as u64;
        t.counters.bytes_received += size as u64;
        t.counters.messages_sent += 1;
        t.counters.messages_received += 1;
    }
    t.counters.active_ns = start.elapsed().as_nanos() as u64;
    Ok(t)
}

/// The server's side of one crr trial: accepts connections bound to `cookie`, reads each
/// request of `size` bytes, answers, and waits for the client to close. Ends once the client
/// has ended the trial and every connection it opened was served, or after `idle` without one.
/// `messages_received` counts the connections accepted.
pub fn server_trial(
    listener: &mut dyn DataListener,
    cookie: u64,
    buf: &mut [u8],
    size: usize,
    signals: &TrialSignals,
    idle: Duration,
) -> io::Result<SideCounters> {
    let mut c = SideCounters::default();
    let start = Instant::now();
    let max_idle_slices = (idle.as_nanos() / SLICE.as_nanos()).max(1) as u32;
    let mut idle_slices = 0u32;
    loop {
        if signals.is_aborted() {
            break;
        }
        if signals.is_ended()
            && c.messages_received
                >= signals
                    .sent_messages
                    .load(std::sync::atomic::Ordering::Relaxed)
        {
            break;
        }
        match listener.accept(cookie, SLICE) {
            Ok(mut conn) => {
                idle_slices = 0;
                c.messages_received += 1;
                conn.set_recv_timeout(Some(idle))?;
                c.recv_calls += recv_message(conn.as_mut(), &mut buf[..size])?;
                c.bytes_received += size as u64;
                c.send_calls += send_message(conn.as_mut(), &buf[..size])?;
                c.bytes_sent += size as u64;
                c.messages_sent += 1;
                // The client closes first (it holds the TIME_WAIT, as with netperf).
                let _ = conn.recv(&mut buf[..1]);
            }
            Err(e) if is_timeout(&e) => {
                idle_slices += 1;
                if idle_slices > max_idle_slices {
                    c.timed_out = true;
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    c.active_ns = start.elapsed().as_nanos() as u64;
    Ok(c)
}
