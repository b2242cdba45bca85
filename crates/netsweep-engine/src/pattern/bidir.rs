//! Bidir: both ends send and receive at once on the same data path (iperf3 --bidir), each
//! direction accounted on its own. Each side runs two threads over one socket (a duplicated
//! descriptor, [`Endpoint::try_clone`]): its own thread runs stream's sender loop, a scoped
//! thread the receiver — the server's the forward receiver (ended by the client's count over
//! the control connection), the client's the reversed one (`reverse.rs`: its clock starts
//! before the trial does; the server's exact count, in its report, settles what is still on
//! its way). The point's `sender_mbps`, `receiver_mbps` and `loss` are the client-to-server
//! direction's, `reverse` the server-to-client one's, and its throughput their sum.

use super::dgram::{trial_cookie, DgramAccount};
use super::intervals::Intervals;
use super::reverse::Receiver;
use super::stream::{check_trial, receiver_trial, sender_trial, Direction};
use super::{
    Accepted, ClientOpen, ClientPattern, PointFigures, Registration, ServerBuffers, ServerOpen,
    ServerPattern, ServerTrial, Sizing, TrialOutcome, SLICE,
};
use crate::cpu::ThreadCpu;
use crate::error::NetError;
use crate::point::{estimate, Tally};
use netsweep_endpoint::{DataListener, Endpoint, MessageBuffer};
use netsweep_model::results::{PointResult, StopReason};
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_proto::messages::MAX_BATCH;
use netsweep_proto::messages::{SideCounters, TrialSpec};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

/// Bidir's entry points.
pub const REGISTRATION: Registration = Registration {
    pattern: Pattern::Bidir,
    client: Client::open,
    server: Server::open,
    check_trial,
    server_memory,
    flows: None,
};

/// The session's buffers for receiving, and a batch of slots to send from.
fn server_memory(s: &super::BufferSizes) -> u64 {
    super::session_buffers(s).saturating_add(super::buffer_bytes(s.batch_bytes(), s.offset))
}

/// One side's counters of a trial from its sending and its receiving thread: what was sent
/// (the sender's active time is the sending rate's), and what was received, with the
/// receiving thread's CPU time (the trial meter adds the sending thread's, its caller's).
pub(super) fn merge(sent: SideCounters, got: SideCounters) -> SideCounters {
    SideCounters {
        cpu_user_ns: got.cpu_user_ns,
        cpu_sys_ns: got.cpu_sys_ns,
        bytes_received: got.bytes_received,
        messages_received: got.messages_received,
        recv_calls: got.recv_calls,
        first_recv_bytes: got.first_recv_bytes,
        recv_span_ns: got.recv_span_ns,
        datagrams: got.datagrams,
        timed_out: got.timed_out,
        ..sent
    }
}

pub(super) fn joined(r: thread::Result<io::Result<SideCounters>>) -> io::Result<SideCounters> {
    r.unwrap_or_else(|_| Err(io::Error::other("the receiving thread panicked")))
}

/// Stream's sender loop for one direction of a bidir trial (no timeline).
fn send(
    ep: &mut dyn Endpoint,
    tx: &mut [u8],
    size: usize,
    batch: usize,
    duration: Duration,
    cookie: u32,
    stop: &AtomicBool,
) -> io::Result<SideCounters> {
    let none = &mut Intervals::default();
    sender_trial(ep, tx, size, batch, duration, cookie, none, stop)
}

/// Runs `f` (a receiving loop) and records the CPU time of the thread it runs on.
pub(super) fn metered(f: impl FnOnce() -> io::Result<SideCounters>) -> io::Result<SideCounters> {
    let before = ThreadCpu::now();
    let mut c = f()?;
    let used = ThreadCpu::now().since(before);
    c.cpu_user_ns = used.user_ns;
    c.cpu_sys_ns = used.sys_ns;
    Ok(c)
}

/// The client's side: the session's endpoint sends, its duplicate receives.
struct Client {
    ep: Box<dyn Endpoint>,
    rx_ep: Box<dyn Endpoint>,
    datagram: bool,
    cookie: u64,
    size: usize,
    batch: usize,
    tx: MessageBuffer,
    rx: Receiver,
    /// Client to server.
    there: Direction,
    /// Server to client.
    back: Direction,
    /// Each timed trial's receiver rates of both directions, summed: the stop rule's sample.
    both: Vec<f64>,
}

impl Client {
    fn open(o: &ClientOpen<'_>) -> Result<Box<dyn ClientPattern>, NetError> {
        let ep = o.connect()?;
        let rx_ep = ep
            .try_clone()
            .map_err(|e| NetError::io("duplicating the data socket for bidir", e))?;
        Ok(Box::new(Self {
            datagram: ep.is_datagram(),
            ep,
            rx_ep,
            cookie: o.cookie,
            size: 0,
            batch: 1,
            tx: MessageBuffer::new(0, 0),
            rx: Receiver::new(o.timeout),
            there: Direction::default(),
            back: Direction::default(),
            both: Vec::new(),
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
        self.tx = MessageBuffer::new(self.size * self.batch, offset);
        self.rx.begin_point(self.size, self.batch, offset);
        let prepare = |e| NetError::io("preparing the data endpoint", e);
        self.ep.prepare(self.size, self.batch).map_err(prepare)?;
        // The socket's receive timeout, shared by both descriptors (only this one receives).
        self.rx_ep.set_recv_timeout(Some(SLICE)).map_err(prepare)?;
        self.there = Direction::default();
        self.back = Direction::default();
        self.both.clear();
        Ok(())
    }

    fn fold(&mut self, out: &TrialOutcome) -> Result<(), NetError> {
        let there = self.there.fold(&out.client, &out.server);
        let back = self.back.fold(&out.server, &out.client);
        self.both.push(there + back);
        Ok(())
    }

    fn samples(&self) -> &[f64] {
        &self.both
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
        let (c, s) = (&tally.client, &tally.server);
        let messages = c.messages_sent + s.messages_sent;
        let moved = (
            c.bytes_sent + c.bytes_received,
            s.bytes_sent + s.bytes_received,
        );
        let there = self.there.figures(self.datagram);
        let both = estimate(&self.both);
        let mut p = tally.point(spec, timed.size, messages, both, stop_reason, moved);
        p.sender_mbps = Some(there.sender_mbps);
        p.receiver_mbps = Some(there.receiver_mbps);
        p.loss = there.loss;
        p.reverse = Some(self.back.figures(self.datagram));
        p
    }
}

impl ClientPattern for Client {
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        Some(self.ep.as_mut())
    }

    fn arm(&mut self, trial: u64) {
        self.rx.arm(trial_cookie(self.cookie, trial));
    }

    fn run_trial(&mut self, trial: u64, spec: &TrialSpec) -> io::Result<SideCounters> {
        let duration = Duration::from_nanos(spec.duration_ns);
        let cookie = trial_cookie(self.cookie, trial);
        let (size, batch) = (self.size, self.batch);
        let (ep, rx_ep, rx, tx) = (&mut self.ep, &mut self.rx_ep, &mut self.rx, &mut self.tx);
        thread::scope(|s| {
            let receiving = s.spawn(|| metered(|| rx.run(rx_ep.as_mut(), duration, 0)));
            let sent = send(
                ep.as_mut(),
                tx.as_mut(),
                size,
                batch,
                duration,
                cookie,
                &AtomicBool::new(false),
            );
            let got = joined(receiving.join());
            Ok(merge(sent?, got?))
        })
    }

    fn complete(&mut self, server: &SideCounters, client: &mut SideCounters) -> io::Result<()> {
        // The receiver completes its span and loss; the active time stays the sender's.
        let sending = client.active_ns;
        self.rx.complete(self.rx_ep.as_mut(), server, client)?;
        client.active_ns = sending;
        Ok(())
    }
}

/// The server's side: the accepted endpoint sends, its duplicate receives.
struct Server {
    data: Accepted,
    rx_ep: Box<dyn Endpoint>,
    cookie: u64,
    /// Allocated once per session, reset per trial.
    account: DgramAccount,
    /// The sender's messages, allocated on the first trial.
    tx: MessageBuffer,
    /// The trial armed last.
    trial: u64,
}

impl Server {
    fn open(
        listener: Box<dyn DataListener>,
        o: &ServerOpen,
    ) -> Result<Box<dyn ServerPattern>, String> {
        let data = o.accept(listener)?;
        let rx_ep = data
            .ep
            .try_clone()
            .map_err(|e| format!("cannot duplicate the data socket for bidir: {e}"))?;
        Ok(Box::new(Self {
            data,
            rx_ep,
            cookie: o.cookie,
            account: DgramAccount::new(0),
            tx: MessageBuffer::new(0, 0),
            trial: 0,
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
        let (size, batch) = (t.spec.size as usize, b.lens.len());
        if self.tx.as_ref().len() < b.slot * batch {
            // Once per session: every trial's messages fit a slot.
            self.tx = MessageBuffer::new(b.slot * batch, b.offset);
        }
        let duration = Duration::from_nanos(t.spec.duration_ns);
        let cookie = trial_cookie(self.cookie, self.trial);
        let (ep, rx_ep, account, tx) = (
            &mut self.data.ep,
            &mut self.rx_ep,
            &mut self.account,
            &mut self.tx,
        );
        thread::scope(|s| {
            let receiving = s.spawn(|| {
                metered(|| {
                    receiver_trial(
                        rx_ep.as_mut(),
                        b.buf.as_mut(),
                        b.slot,
                        &mut b.lens,
                        t.signals,
                        t.idle,
                        account,
                        t.epoch,
                        &mut Intervals::default(),
                    )
                })
            });
            let sent = send(
                ep.as_mut(),
                tx.as_mut(),
                size,
                batch,
                duration,
                cookie,
                &t.signals.abort,
            );
            if sent.is_err() {
                // The session is over: the receiving thread must not wait for the client.
                t.signals.abort.store(true, Ordering::Relaxed);
            }
            let got = joined(receiving.join());
            Ok(merge(sent?, got?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The receiving thread's CPU time reaches the side's counters: `metered` records it and
    /// `merge` keeps it (the trial meter then adds the sending thread's).
    #[test]
    fn the_receiving_threads_cpu_is_counted() {
        const BURN_NS: u64 = 20_000_000;
        let got = metered(|| {
            // Spin until this thread has used BURN_NS of CPU: its reading must show at least that.
            let start = ThreadCpu::now();
            loop {
                let used = ThreadCpu::now().since(start);
                if used.user_ns + used.sys_ns >= BURN_NS {
                    break;
                }
            }
            Ok(SideCounters {
                bytes_received: 7,
                ..SideCounters::default()
            })
        })
        .unwrap();
        assert!(got.cpu_user_ns + got.cpu_sys_ns >= BURN_NS, "{got:?}");
        let sent = SideCounters {
            bytes_sent: 9,
            ..SideCounters::default()
        };
        let side = merge(sent, got.clone());
        assert_eq!((side.bytes_sent, side.bytes_received), (9, 7));
        assert_eq!(
            (side.cpu_user_ns, side.cpu_sys_ns),
            (got.cpu_user_ns, got.cpu_sys_ns)
        );
    }
}
