//! Connect/request/response/close (netperf TCP_CRR): every transaction opens a new
//! connection, sends a request, waits for the response and closes. The client times only
//! what any client of a real service pays — socket(2), the socket options it asked for,
//! connect(2), send(2), recv(2), close(2) — and the connection setup inside it; the server
//! counts the connections it served. Everything else (the address, the options' values,
//! the timeouts) is prepared once by the [`CrrConnector`], and the knobs are read back on the
//! first connection of each point, inside a warm-up trial whose times are discarded.
//!
//! Binding to the session: the session cookie rides in the request itself — its first
//! 8 bytes, or for a request shorter than 8 bytes the cookie's first `size` bytes — and the
//! server checks it on the request it reads anyway, so no byte or call is added to any
//! transaction. A short request carries a short cookie, so the server also serves only
//! connections from the session's client address (tcp, mptcp) or through the session's
//! private socket directory, mode 0700 (unix-stream); padding short requests to 8 bytes
//! would measure a different size than the one asked for.

use super::{
    any_trial, ClientOpen, ClientPattern, IdleSlices, PointFigures, Registration, ServerBuffers,
    ServerOpen, ServerPattern, ServerTrial, Sizing, TrialOutcome, TrialSignals, SLICE,
};
use crate::error::NetError;
use crate::point::{distribution, estimate, rate_from_times, Tally};
use netsweep_endpoint::{is_timeout, CrrConnector, DataListener, Endpoint, MessageBuffer};
use netsweep_model::results::{Crr, PointResult, StopReason};
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::{GrantedKnobs, SideCounters, TrialSpec};
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// crr's entry points: its data path is a [`CrrConnector`] on the client and the session's
/// [`DataListener`], readied for crr, on the server.
pub const REGISTRATION: Registration = Registration {
    pattern: Pattern::Crr,
    client: Client::open,
    server: Server::open,
    check_trial: any_trial,
    server_memory: super::session_buffers,
    flows: None,
};

/// Writes the session cookie into the front of a request (once per point).
pub fn stamp(request: &mut [u8], cookie: u64) {
    let n = request.len().min(8);
    request[..n].copy_from_slice(&cookie.to_be_bytes()[..n]);
}

/// True when a request carries the session cookie (as much of it as fits).
#[inline]
pub fn carries(request: &[u8], cookie: u64) -> bool {
    let n = request.len().min(8);
    request[..n] == cookie.to_be_bytes()[..n]
}

/// One send(2) or recv(2) on a connected socket; EINTR is retried.
#[inline]
fn io_once(fd: RawFd, buf: *mut u8, len: usize, sending: bool) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for `len` bytes (reads when sending, writes when receiving)
        // for the duration of the call; callers pass a live slice.
        let rc = unsafe {
            if sending {
                libc::send(fd, buf.cast_const().cast(), len, libc::MSG_NOSIGNAL)
            } else {
                libc::recv(fd, buf.cast(), len, 0)
            }
        };
        if rc >= 0 {
            return Ok(rc as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Sends all of `buf`; returns the calls it took.
#[inline]
fn send_all(fd: RawFd, buf: &[u8]) -> io::Result<u64> {
    let (mut off, mut calls) = (0, 0);
    while off < buf.len() {
        let n = io_once(fd, buf[off..].as_ptr().cast_mut(), buf.len() - off, true)?;
        calls += 1;
        off += n;
    }
    Ok(calls)
}

/// Receives exactly `buf.len()` bytes; returns the calls it took.
#[inline]
fn recv_exact(fd: RawFd, buf: &mut [u8]) -> io::Result<u64> {
    let (mut off, mut calls) = (0, 0);
    while off < buf.len() {
        let n = io_once(fd, buf[off..].as_mut_ptr(), buf.len() - off, false)?;
        calls += 1;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer closed a crr connection before the whole message arrived",
            ));
        }
        off += n;
    }
    Ok(calls)
}

/// What the client saw in one crr trial.
#[derive(Debug, Clone, Default)]
pub struct ClientTrial {
    /// The client's counters.
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

/// Runs `reps` transactions of `tx.len()` bytes each way (`tx` already carries the cookie,
/// see [`stamp`]), each on a connection from `connector`. Connection setup times go to
/// `connect_hist`, whole transactions to `txn_hist`. When `granted` is `None` the knobs are
/// read back on the first connection before it closes, so that transaction's time includes
/// the readback: callers pass `None` only to a warm-up trial.
pub fn client_trial(
    connector: &mut dyn CrrConnector,
    tx: &[u8],
    rx: &mut [u8],
    reps: u64,
    granted: &mut Option<GrantedKnobs>,
    (connect_hist, txn_hist): (&mut LatencyHistogram, &mut LatencyHistogram),
) -> io::Result<ClientTrial> {
    let size = tx.len();
    let rx = &mut rx[..size];
    let mut t = ClientTrial::default();
    let start = Instant::now();
    for _ in 0..reps {
        let t0 = Instant::now();
        let conn = connector
            .connect()
            .map_err(|e| explain_connect_error(e, t.completed))?;
        let t1 = Instant::now();
        let fd = conn.as_raw_fd();
        t.counters.send_calls += send_all(fd, tx)?;
        t.counters.recv_calls += recv_exact(fd, rx)?;
        if granted.is_none() {
            *granted = Some(connector.granted(conn.as_fd()));
        }
        drop(conn);
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

/// Why the server stopped waiting on a connection.
enum Stop {
    Idle,
    Aborted,
}

/// Runs one send or receive of a whole buffer on a connection whose calls time out after
/// a [`SLICE`], giving up once `idle` (fresh) is exceeded without progress, or on abort.
fn whole(
    fd: RawFd,
    buf: &mut [u8],
    sending: bool,
    signals: &TrialSignals,
    mut idle: IdleSlices,
) -> io::Result<Result<u64, Stop>> {
    let (mut off, mut calls) = (0, 0u64);
    while off < buf.len() {
        match io_once(fd, buf[off..].as_mut_ptr(), buf.len() - off, sending) {
            Ok(0) if !sending => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the client closed a crr connection before its request arrived",
                ))
            }
            Ok(n) => {
                calls += 1;
                off += n;
                idle.reset();
                // A client trickling a request never lets a wait time out: the end of the
                // session is looked for on every pass too.
                if signals.is_aborted() {
                    return Ok(Err(Stop::Aborted));
                }
            }
            Err(e) if is_timeout(&e) => {
                let exceeded = idle.tick();
                if signals.is_aborted() {
                    return Ok(Err(Stop::Aborted));
                }
                if exceeded {
                    return Ok(Err(Stop::Idle));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Ok(calls))
}

/// The server's side of one crr trial: accepts the session client's connections, reads
/// each request of `size` bytes, checks that it carries `cookie` (others are closed
/// uncounted), answers, and waits for the client to close. Ends once the client has ended
/// the trial and every connection it opened was served, or after `idle` without progress.
/// `messages_received` counts the connections served. The listener was readied with
/// [`DataListener::prepare_crr`]: every wait here lasts at most a [`SLICE`].
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
    // Per connection, a fresh copy of `idle_slices`.
    let fresh = IdleSlices::new(idle);
    let mut idle_slices = fresh;
    // The request, and a byte beyond it to wait for the client's close with.
    let (buf, spare) = buf.split_at_mut(size);
    let keep = spare.len().min(1);
    let spare = &mut spare[..keep];
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
        let Some(conn) = listener.accept_crr()? else {
            if idle_slices.tick() {
                c.timed_out = true;
                break;
            }
            continue;
        };
        idle_slices.reset();
        let fd = conn.as_raw_fd();
        let calls = match whole(fd, buf, false, signals, fresh)? {
            Ok(n) => n,
            Err(stop) => {
                c.timed_out = matches!(stop, Stop::Idle);
                break;
            }
        };
        if !carries(buf, cookie) {
            continue;
        }
        c.recv_calls += calls;
        c.messages_received += 1;
        c.bytes_received += size as u64;
        match whole(fd, buf, true, signals, fresh)? {
            Ok(n) => c.send_calls += n,
            Err(stop) => {
                c.timed_out = matches!(stop, Stop::Idle);
                break;
            }
        }
        c.bytes_sent += size as u64;
        c.messages_sent += 1;
        // The client closes first (it holds the TIME_WAIT, as with netperf).
        let _ = io_once(fd, spare.as_mut_ptr(), spare.len(), false);
    }
    c.active_ns = start.elapsed().as_nanos() as u64;
    Ok(c)
}

/// The client's side of a crr session: the connector that opens one connection per
/// transaction (prepared once, with the session), and the point being measured.
struct Client {
    connector: Box<dyn CrrConnector>,
    cookie: u64,
    tx: MessageBuffer,
    rx: MessageBuffer,
    /// The knobs read back on the point's first connection.
    granted: Option<GrantedKnobs>,
    /// The knobs read back on the session's first connection.
    session_granted: Option<GrantedKnobs>,
    connect_hist: LatencyHistogram,
    txn_hist: LatencyHistogram,
    last: ClientTrial,
    /// Each timed trial's mean transaction time: its figure.
    means: Vec<f64>,
    connect_means: Vec<f64>,
    best: f64,
    /// Mean transaction time of the last point.
    prev_rep_ns: Option<f64>,
}

impl Client {
    fn open(o: &ClientOpen<'_>) -> Result<Box<dyn ClientPattern>, NetError> {
        let connector = o
            .factory
            .crr_connector(o.setup, o.knobs, o.server, o.data, o.timeout)
            .map_err(|e| {
                NetError::io(
                    format!(
                        "preparing {} crr connections to {}",
                        o.spec.transport, o.server
                    ),
                    e,
                )
            })?;
        Ok(Box::new(Self {
            connector,
            cookie: o.cookie,
            tx: MessageBuffer::new(0, 0),
            rx: MessageBuffer::new(0, 0),
            granted: None,
            session_granted: None,
            connect_hist: LatencyHistogram::new(),
            txn_hist: LatencyHistogram::new(),
            last: ClientTrial::default(),
            means: Vec::new(),
            connect_means: Vec::new(),
            best: f64::INFINITY,
            prev_rep_ns: None,
        }))
    }
}

impl PointFigures for Client {
    fn sizing(&self) -> Sizing {
        Sizing::Repetitions { max_reps: 1e7 }
    }

    fn learnt_granted(&mut self) -> Option<GrantedKnobs> {
        self.session_granted.take()
    }

    fn begin_point(&mut self, spec: &RunSpec, size: u64) -> Result<(), NetError> {
        let offset = spec.client_knobs.buffer_offset.unwrap_or(0) as usize;
        self.tx = MessageBuffer::new(size as usize, offset);
        self.rx = MessageBuffer::new(size as usize, offset);
        // The cookie rides in every request: no extra write, no extra round trip.
        stamp(self.tx.as_mut(), self.cookie);
        // Read back on the point's first connection, in its first warm-up trial.
        self.granted = None;
        self.connect_hist = LatencyHistogram::new();
        self.txn_hist = LatencyHistogram::new();
        self.means.clear();
        self.connect_means.clear();
        self.best = f64::INFINITY;
        Ok(())
    }

    fn start_timed(&mut self, _tally: &mut Tally) {
        self.connect_hist.reset();
        self.txn_hist.reset();
    }

    fn fold(&mut self, _out: &TrialOutcome) -> Result<(), NetError> {
        let t = &self.last;
        if t.completed > 0 {
            let m = t.txn_sum_ns as f64 / t.completed as f64;
            self.means.push(m);
            self.best = self.best.min(m);
            self.connect_means
                .push(t.connect_sum_ns as f64 / t.completed as f64);
        }
        Ok(())
    }

    fn samples(&self) -> &[f64] {
        &self.means
    }

    fn server_timeout_note(&self) -> &'static str {
        "the server timed out waiting for a connection"
    }

    fn finish(
        &mut self,
        spec: &RunSpec,
        timed: &TrialSpec,
        mut tally: Tally,
        stop_reason: StopReason,
    ) -> PointResult {
        self.prev_rep_ns = Some(self.txn_hist.mean());
        let (done, accepted) = (tally.client.messages_sent, tally.server.messages_received);
        if done != accepted {
            tally.notes.push(format!(
                "the client completed {done} connections but the server accepted {accepted}"
            ));
        }
        // Throughput as for pingpong: request bytes per half transaction.
        let throughput = rate_from_times(timed.size as f64, &self.means, self.best);
        let per_sec: Vec<f64> = self.means.iter().map(|m| 1e9 / m).collect();
        let moved = tally.client.bytes_sent + tally.client.bytes_received;
        let reps = timed.repetitions;
        let mut p = tally.point(
            spec,
            timed.size,
            reps,
            throughput,
            stop_reason,
            (moved, moved),
        );
        p.crr = Some(Crr {
            connect_ns: distribution(&self.connect_hist, &self.connect_means, 1.0),
            transaction_ns: distribution(&self.txn_hist, &self.means, 1.0),
            transactions_per_sec: estimate(&per_sec),
            connections: done,
            server_accepted: accepted,
            granted: self.granted.clone(),
        });
        if self.session_granted.is_none() {
            self.session_granted = self.granted.take();
        }
        p
    }

    fn typical_rep_ns(&self) -> Option<f64> {
        self.prev_rep_ns
    }
}

impl ClientPattern for Client {
    /// None: the data path is the connector. The knobs are unknown until the first
    /// connection (see [`learnt_granted`](Self::learnt_granted)).
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        None
    }

    fn run_trial(&mut self, _trial: u64, spec: &TrialSpec) -> io::Result<SideCounters> {
        let t = client_trial(
            self.connector.as_mut(),
            self.tx.as_ref(),
            self.rx.as_mut(),
            spec.repetitions,
            &mut self.granted,
            (&mut self.connect_hist, &mut self.txn_hist),
        )?;
        let counters = t.counters.clone();
        self.last = t;
        Ok(counters)
    }
}

/// The server's side of a crr session: the session's listener, readied for crr once.
struct Server {
    listener: Box<dyn DataListener>,
    cookie: u64,
    /// The knobs the listener grants to the connections it accepts.
    granted: GrantedKnobs,
}

impl Server {
    fn open(
        mut listener: Box<dyn DataListener>,
        o: &ServerOpen,
    ) -> Result<Box<dyn ServerPattern>, String> {
        // Ready the listener once (timeouts, the client's address); its connections inherit
        // the knobs it grants.
        let granted = listener
            .prepare_crr(o.client, SLICE)
            .map_err(|e| format!("cannot prepare the {} crr listener: {e}", o.transport))?;
        Ok(Box::new(Self {
            listener,
            cookie: o.cookie,
            granted,
        }))
    }
}

impl ServerPattern for Server {
    /// None: each transaction's connection comes from the listener.
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        None
    }

    fn bound(&mut self) -> io::Result<GrantedKnobs> {
        Ok(self.granted.clone())
    }

    fn run_trial(
        &mut self,
        t: &ServerTrial<'_>,
        b: &mut ServerBuffers,
    ) -> io::Result<SideCounters> {
        server_trial(
            self.listener.as_mut(),
            self.cookie,
            &mut b.buf.as_mut()[..b.slot],
            t.spec.size as usize,
            t.signals,
            t.idle,
        )
    }
}
