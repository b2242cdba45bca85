//! Stream: the client sends messages one way for the trial's duration; the server receives.
//! Each side accounts for itself: the sender the bytes its stack accepted, the receiver the
//! bytes it got (and, for datagrams, exactly which ones). The end of a trial is agreed over
//! the control connection, never in-band. With `--reverse` the same loops swap ends: the
//! server's data thread runs [`sender_trial`], the client receives (`reverse.rs`).

mod direction;
pub(crate) mod flow;

use super::dgram::{stamp, trial_cookie, DgramAccount, DGRAM_QUIET};
use super::intervals::Intervals;
use super::reverse::Receiver;
use super::{
    count_send_error, slices, Accepted, ClientOpen, ClientPattern, IdleSlices, PointFigures,
    Registration, ServerBuffers, ServerOpen, ServerPattern, ServerTrial, Sizing, TrialOutcome,
    TrialSignals, SLICE,
};
use crate::error::NetError;
use crate::point::Tally;
pub(crate) use direction::Direction;
use netsweep_endpoint::{is_timeout, send_message, DataListener, Endpoint, MessageBuffer};
use netsweep_model::results::{PointResult, StopReason};
use netsweep_model::spec::{Pattern, RunSpec, DGRAM_HEADER, MAX_INTERVAL_BUCKETS};
use netsweep_model::timeline::StreamTimeline;
use netsweep_proto::messages::MAX_BATCH;
use netsweep_proto::messages::{SideCounters, TrialSpec};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Stream's entry points.
pub const REGISTRATION: Registration = Registration {
    pattern: Pattern::Stream,
    client: Client::open,
    server: Server::open,
    check_trial,
    server_memory: super::session_buffers,
    flows: Some(&flow::FLOWS),
};

/// The server's check of a trial: datagram messages must hold the sequence header.
pub(super) fn check_trial(spec: &TrialSpec, datagrams: bool) -> Result<(), String> {
    if datagrams && spec.size < DGRAM_HEADER {
        return Err(format!(
            "datagram stream messages need at least {DGRAM_HEADER} bytes"
        ));
    }
    Ok(())
}

/// Sends `size`-byte messages for `duration`, `batch` per call (`buf` holds `batch` messages
/// back to back). Datagrams get the sequence header (trial cookie, sequence, send time).
///
/// A datagram the local stack refuses (see [`count_send_error`]) is counted in
/// `send_errors`, not sent: its sequence number is reused by the next datagram, so the
/// numbers the receiver sees are exactly 0..`messages_sent` and its loss (sent − received)
/// counts only what the network lost. Any other send error ends the trial with that error.
///
/// `iv` (armed for the trial, or inactive) counts each accepted send in the interval of the
/// time taken before it — the time a datagram's header carries — so the receiver's count
/// of datagrams per send interval matches this side's exactly. `stop` ends the trial early
/// (looked at after every send): a server's session that is over.
#[allow(clippy::too_many_arguments)]
pub fn sender_trial(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    size: usize,
    batch: usize,
    duration: Duration,
    cookie: u32,
    iv: &mut Intervals,
    stop: &AtomicBool,
) -> io::Result<SideCounters> {
    let mut c = sender_loop(ep, buf, size, batch, duration, cookie, iv, || {
        stop.load(Ordering::Relaxed)
    })?;
    c.intervals = iv.report();
    Ok(c)
}

/// [`sender_trial`] that also stops once `stop` is set (checked after every send): a
/// background flow's trial, ended by the engine when the measured trial is over.
pub fn sender_until(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    size: usize,
    duration: Duration,
    cookie: u32,
    stop: &AtomicBool,
) -> io::Result<SideCounters> {
    let mut none = Intervals::default();
    sender_loop(ep, buf, size, 1, duration, cookie, &mut none, || {
        stop.load(Ordering::Relaxed)
    })
}

/// The sender's loop; `stopped` is inlined (a constant `false` for a measured trial).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sender_loop(
    ep: &mut dyn Endpoint,
    buf: &mut [u8],
    size: usize,
    batch: usize,
    duration: Duration,
    cookie: u32,
    iv: &mut Intervals,
    stopped: impl Fn() -> bool,
) -> io::Result<SideCounters> {
    let datagram = ep.is_datagram();
    let batch = batch.max(1);
    let mut c = SideCounters::default();
    let start = Instant::now();
    let mut seq = 0u64;
    // Time since the start, taken at the end of the previous send (the loop's one clock
    // read): the datagrams' stamp and the interval the send counts in.
    let mut elapsed = Duration::ZERO;
    loop {
        let ts = elapsed.as_nanos() as u64;
        if batch == 1 {
            if datagram {
                stamp(buf, cookie, seq, ts);
            }
            match send_message(ep, &buf[..size]) {
                Ok(calls) => {
                    c.send_calls += calls;
                    seq += 1;
                    iv.add(ts, size as u64, 1);
                }
                Err(e) if datagram && count_send_error(&mut c.send_errors, &e) => {
                    c.send_calls += 1;
                }
                Err(e) => return Err(e),
            }
        } else {
            if datagram {
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
            iv.add(ts, (done * size) as u64, done as u64);
        }
        elapsed = start.elapsed();
        if elapsed >= duration || stopped() {
            break;
        }
    }
    c.messages_sent = seq;
    c.bytes_sent = seq * size as u64;
    c.active_ns = elapsed.as_nanos() as u64;
    Ok(c)
}

/// Receives until the client's announced bytes (stream) have all arrived, or (datagrams)
/// every announced datagram arrived or none came for [`DGRAM_QUIET`] after the end; gives up
/// after `idle` without data. `buf` holds `lens.len()` slots of `slot` bytes, each the
/// largest message plus one byte; more than one slot receives in batches (recvmmsg).
/// The endpoint's receive timeout must be [`SLICE`](super::SLICE). `account` must be reset for the trial
/// (and carry its cookie) before `epoch`, the moment this side was armed: the caller takes
/// it, then tells the client it is ready, so no byte can arrive before it. `iv` (armed for
/// the trial, or inactive) counts bytes by arrival since `epoch`, and datagrams received by
/// their send time.
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
    iv: &mut Intervals,
) -> io::Result<SideCounters> {
    let datagram = ep.is_datagram();
    let batched = lens.len() > 1;
    let mut c = SideCounters::default();
    let mut received_any = false;
    let mut last = epoch;
    let mut idle_slices = IdleSlices::new(idle);
    let quiet_slices = slices(DGRAM_QUIET);
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
                idle_slices.reset();
                c.recv_calls += calls;
                let got: usize = lens[..count].iter().sum();
                c.bytes_received += got as u64;
                if !received_any {
                    received_any = true;
                    c.first_recv_bytes = got as u64;
                }
                last = now;
                iv.add_arrival(now, epoch, got as u64);
                if datagram {
                    c.messages_received += count as u64;
                    let at = now.duration_since(epoch).as_nanos() as u64;
                    for (i, &n) in lens[..count].iter().enumerate() {
                        if let Some(sent) = account.on_datagram(&buf[i * slot..i * slot + n], at) {
                            iv.add(sent, 0, 1);
                        }
                    }
                }
                // The session's end too, on every pass: a trickling client never lets a
                // receive time out.
                let ended = signals.is_ended() && done(datagram, &c, account, signals);
                if ended || signals.is_aborted() {
                    break;
                }
            }
            Err(e) if is_timeout(&e) => {
                if signals.is_aborted() {
                    break;
                }
                let exceeded = idle_slices.tick();
                if signals.is_ended()
                    && (done(datagram, &c, account, signals)
                        || (datagram && idle_slices.count() >= quiet_slices))
                {
                    break;
                }
                if exceeded {
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
    c.intervals = iv.report();
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

/// The client's side of a stream session: its endpoint, and the point being measured.
struct Client {
    ep: Box<dyn Endpoint>,
    datagram: bool,
    cookie: u64,
    size: usize,
    batch: usize,
    /// `batch` messages back to back.
    tx: MessageBuffer,
    /// The point's figures (the receiver's rate per trial is the stop rule's sample).
    dir: Direction,
    /// `--reverse`: the client receives, the server sends.
    reverse: Option<Receiver>,
    /// The sender's counts per interval (`--interval`).
    iv: Intervals,
    /// The point's timeline (`--interval`).
    timeline: StreamTimeline,
    /// The run's `--interval`, ns (0: none).
    interval_ns: u64,
}

impl Client {
    fn open(o: &ClientOpen<'_>) -> Result<Box<dyn ClientPattern>, NetError> {
        let ep = o.connect()?;
        Ok(Box::new(Self {
            reverse: o.spec.reverse.then(|| Receiver::new(o.timeout)),
            datagram: ep.is_datagram(),
            ep,
            cookie: o.cookie,
            size: 0,
            batch: 1,
            tx: MessageBuffer::new(0, 0),
            dir: Direction::default(),
            iv: Intervals::default(),
            timeline: StreamTimeline::default(),
            interval_ns: 0,
        }))
    }
}

impl PointFigures for Client {
    fn sizing(&self) -> Sizing {
        Sizing::Duration
    }

    fn begin_point(&mut self, spec: &RunSpec, size: u64) -> Result<(), NetError> {
        let offset = spec.client_knobs.buffer_offset.unwrap_or(0) as usize;
        self.batch = spec.client_knobs.batch.unwrap_or(1).clamp(1, MAX_BATCH) as usize;
        self.size = size as usize;
        self.ep
            .prepare(self.size, self.batch)
            .map_err(|e| NetError::io("preparing the data endpoint", e))?;
        if let Some(rx) = &mut self.reverse {
            rx.begin_point(self.size, self.batch, offset);
            self.ep
                .set_recv_timeout(Some(SLICE))
                .map_err(|e| NetError::io("preparing the data endpoint", e))?;
        } else {
            self.tx = MessageBuffer::new(self.size * self.batch, offset);
        }
        self.dir = Direction::default();
        self.timeline.take();
        self.interval_ns = spec.interval_ns;
        Ok(())
    }

    fn fold(&mut self, out: &TrialOutcome) -> Result<(), NetError> {
        // (sender, receiver): the client and the server, or the other way with --reverse.
        let (c, s) = match self.reverse {
            None => (&out.client, &out.server),
            Some(_) => (&out.server, &out.client),
        };
        self.dir.fold(c, s);
        self.timeline
            .add_trial(c, s, self.interval_ns, self.datagram);
        Ok(())
    }

    fn samples(&self) -> &[f64] {
        &self.dir.receiver
    }

    fn server_timeout_note(&self) -> &'static str {
        "the server timed out waiting for data"
    }

    fn finish(
        &mut self,
        spec: &RunSpec,
        timed: &TrialSpec,
        tally: Tally,
        stop_reason: StopReason,
    ) -> PointResult {
        let reverse = self.reverse.is_some();
        let mut p = self
            .dir
            .point(spec, timed, tally, stop_reason, reverse, self.datagram);
        p.timeline = self.timeline.take();
        if std::mem::take(&mut self.timeline.receiver_missing) {
            p.notes.push(
                "no timeline: the receiving side kept no per-interval counts (a netsweep \
                 server older than --interval for streams); upgrade it"
                    .into(),
            );
        }
        let excess = std::mem::take(&mut self.timeline.excess_ignored);
        if excess > 0 {
            p.notes.push(format!(
                "timeline: the peer reported {excess} more intervals in a trial than the \
                 {MAX_INTERVAL_BUCKETS} any side keeps; they were ignored (a broken or \
                 hostile server)"
            ));
        }
        p
    }
}

impl ClientPattern for Client {
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        Some(self.ep.as_mut())
    }

    fn arm(&mut self, trial: u64) {
        if let Some(rx) = &mut self.reverse {
            rx.arm(trial_cookie(self.cookie, trial));
        }
    }

    fn run_trial(&mut self, trial: u64, spec: &TrialSpec) -> io::Result<SideCounters> {
        let duration = Duration::from_nanos(spec.duration_ns);
        if let Some(rx) = &mut self.reverse {
            return rx.run(self.ep.as_mut(), duration, spec.interval_ns);
        }
        self.iv.arm(spec.interval_ns, spec.duration_ns);
        sender_trial(
            self.ep.as_mut(),
            self.tx.as_mut(),
            self.size,
            self.batch,
            duration,
            trial_cookie(self.cookie, trial),
            &mut self.iv,
            &AtomicBool::new(false),
        )
    }

    fn complete(&mut self, server: &SideCounters, client: &mut SideCounters) -> io::Result<()> {
        match &mut self.reverse {
            Some(rx) => rx.complete(self.ep.as_mut(), server, client),
            None => Ok(()),
        }
    }
}

/// The server's side of a stream session: the accepted endpoint receives, and datagrams are
/// accounted exactly; with `--reverse` it sends.
struct Server {
    data: Accepted,
    cookie: u64,
    /// Allocated once per session, reset per trial.
    account: DgramAccount,
    reverse: bool,
    /// The trial armed last.
    trial: u64,
    /// This side's counts per interval (`--interval`).
    iv: Intervals,
}

impl Server {
    fn open(
        listener: Box<dyn DataListener>,
        o: &ServerOpen,
    ) -> Result<Box<dyn ServerPattern>, String> {
        Ok(Box::new(Self {
            data: o.accept(listener)?,
            cookie: o.cookie,
            account: DgramAccount::new(0),
            reverse: o.reverse,
            trial: 0,
            iv: Intervals::default(),
        }))
    }
}

impl ServerPattern for Server {
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        Some(self.data.ep.as_mut())
    }

    fn arm(&mut self, trial: u64) {
        self.trial = trial;
        self.account.arm(self.cookie, trial);
    }

    fn run_trial(
        &mut self,
        t: &ServerTrial<'_>,
        b: &mut ServerBuffers,
    ) -> io::Result<SideCounters> {
        let (interval, duration) = (t.spec.interval_ns, t.spec.duration_ns);
        if self.reverse {
            self.iv.arm(interval, duration);
            return sender_trial(
                self.data.ep.as_mut(),
                b.buf.as_mut(),
                t.spec.size as usize,
                b.lens.len(),
                Duration::from_nanos(duration),
                trial_cookie(self.cookie, self.trial),
                &mut self.iv,
                // The session's end stops the server's sender (checked after every send).
                &t.signals.abort,
            );
        }
        let drain = DGRAM_QUIET.as_nanos() as u64;
        self.iv.arm_receiver(interval, duration, drain);
        receiver_trial(
            self.data.ep.as_mut(),
            b.buf.as_mut(),
            b.slot,
            &mut b.lens,
            t.signals,
            t.idle,
            &mut self.account,
            t.epoch,
            &mut self.iv,
        )
    }
}
