//! Pingpong: the client sends a message and waits for the server's echo; every round trip
//! is timed. Datagram transports number each request so a lost one is counted after the
//! loss timeout and a late echo is recognised, never waited on forever.

pub(crate) mod flow;

use super::arrival::DirectionTrials;
use super::oneway::{self, OneWayTally, WallClock};
use super::{
    any_trial, count_send_error, ClientOpen, ClientPattern, PointFigures, Registration, Sizing,
    TrialOutcome,
};
use crate::error::NetError;
use crate::point::{distribution, rate_from_times, Tally};
use netsweep_endpoint::{
    is_timeout, pool_stride, recv_message_timed, send_message, Endpoint, MessageBuffer, Slots,
};
use netsweep_model::results::{Latency, Loss, PointResult, StopReason};
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_model::stats::LatencyHistogram;
use netsweep_model::symmetry::Directions;
use netsweep_proto::messages::{SideCounters, TrialSpec};
use netsweep_proto::stamps;
use std::io;
use std::time::{Duration, Instant};

/// Pingpong's entry points.
pub const REGISTRATION: Registration = Registration {
    pattern: Pattern::Pingpong,
    client: Client::open,
    server: super::echo::open_pingpong,
    check_trial: any_trial,
    server_memory: super::session_buffers,
    flows: Some(&flow::FLOWS),
};

/// What the client saw in one pingpong trial.
#[derive(Debug, Clone, Default)]
pub struct ClientTrial {
    /// The client's counters.
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
    /// `--one-way`: the trial's stamped round trips.
    pub(crate) one_way: OneWayTally,
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
/// `checks` says whether every echo is compared with its request (for untimed warm-ups) and
/// whether requests carry `--one-way` stamps.
pub fn client_trial(
    ep: &mut dyn Endpoint,
    txs: &mut Slots<'_>,
    rxs: &mut Slots<'_>,
    first_seq: u64,
    reps: u64,
    hist: &mut LatencyHistogram,
    checks: Checks,
) -> io::Result<ClientTrial> {
    let size = txs.size;
    let pools = txs.count.max(rxs.count);
    let datagram = ep.is_datagram();
    let mut t = ClientTrial::default();
    let mut arrivals = super::arrival::Arrivals::default();
    let base = stamps::offset(datagram);
    let stamping = checks.one_way && stamps::fits(size, base);
    let wall = WallClock::now();
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
        if stamping {
            oneway::stamp_request(&mut tx[..size], base, wall.at(t0));
        }
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
        }
        // On a stream the echo's arrival is timed too (the server→client direction). Its
        // first receive and its last: one clock read when it came in one.
        let (first, end) = if datagram {
            let now = Instant::now();
            (now, now)
        } else {
            let (calls, spread) = recv_message_timed(ep, &mut rx[..size])?;
            t.counters.recv_calls += calls;
            match spread {
                Some(s) => {
                    arrivals.record(&s, size);
                    (s.first, s.last)
                }
                None => {
                    let now = Instant::now();
                    (now, now)
                }
            }
        };
        let rtt = end.duration_since(t0).as_nanos() as u64;
        if stamping {
            t.one_way.record(&rx[..size], base, wall.at(first));
        }
        hist.record(rtt);
        t.rtt_sum_ns += rtt;
        t.completed += 1;
        t.counters.bytes_received += size as u64;
        t.counters.messages_received += 1;
        if checks.verify && !same_payload(&rx[..size], &tx[..size], stamping, datagram) {
            t.corrupt += 1;
        }
    }
    t.counters.active_ns = start.elapsed().as_nanos() as u64;
    t.counters.arrival = arrivals.finish();
    Ok(t)
}

/// What a pingpong trial checks besides the round trips.
#[derive(Debug, Clone, Copy, Default)]
pub struct Checks {
    /// Compare every echo with its request (untimed warm-ups).
    pub verify: bool,
    /// Stamp requests for `--one-way` (messages with room for the stamps).
    pub one_way: bool,
}

/// Whether an echo carries its request's payload: all of it, or with `--one-way` stamps all
/// but the server's.
fn same_payload(echo: &[u8], request: &[u8], stamped: bool, datagram: bool) -> bool {
    if !stamped {
        return echo == request;
    }
    let r = stamps::server_range(stamps::offset(datagram));
    echo[..r.start] == request[..r.start] && echo[r.end..] == request[r.end..]
}

/// The client's side of a pingpong session: its endpoint, and the point being measured.
struct Client {
    ep: Box<dyn Endpoint>,
    datagram: bool,
    /// Sequence numbers of datagram requests continue across trials.
    seq: u64,
    /// How long a datagram request waits for its echo before it counts as lost.
    loss_timeout: Duration,
    /// Mean round trip of the last point.
    prev_rep_ns: Option<f64>,
    size: usize,
    rx_size: usize,
    stride: usize,
    tx: MessageBuffer,
    rx: MessageBuffer,
    /// The point's round trips, over its timed trials.
    hist: LatencyHistogram,
    /// The current trial's round trips (empty between trials).
    trial_hist: LatencyHistogram,
    last: ClientTrial,
    /// Repetitions of the last trial.
    last_reps: u64,
    corrupt: u64,
    /// Each timed trial's median round trip: its figure.
    medians: Vec<f64>,
    means: Vec<f64>,
    best_rtt: f64,
    lost: u64,
    late: u64,
    sent: u64,
    /// Client→server, as the server timed each request's arrival.
    to_server: DirectionTrials,
    /// Server→client, as this side timed each echo's.
    to_client: DirectionTrials,
    /// `--one-way` was asked for.
    one_way: bool,
    /// The point's stamped round trips.
    one_way_point: OneWayTally,
}

impl Client {
    fn open(o: &ClientOpen<'_>) -> Result<Box<dyn ClientPattern>, NetError> {
        let ep = o.connect()?;
        Ok(Box::new(Self {
            datagram: ep.is_datagram(),
            ep,
            seq: 0,
            loss_timeout: Duration::from_millis(500),
            prev_rep_ns: None,
            size: 0,
            rx_size: 0,
            stride: 0,
            tx: MessageBuffer::new(0, 0),
            rx: MessageBuffer::new(0, 0),
            hist: LatencyHistogram::new(),
            trial_hist: LatencyHistogram::new(),
            last: ClientTrial::default(),
            last_reps: 0,
            corrupt: 0,
            medians: Vec::new(),
            means: Vec::new(),
            best_rtt: f64::INFINITY,
            lost: 0,
            late: 0,
            sent: 0,
            to_server: DirectionTrials::default(),
            to_client: DirectionTrials::default(),
            one_way: false,
            one_way_point: OneWayTally::default(),
        }))
    }
}

impl PointFigures for Client {
    fn sizing(&self) -> Sizing {
        Sizing::Repetitions { max_reps: 1e9 }
    }

    fn begin_point(&mut self, spec: &RunSpec, size: u64) -> Result<(), NetError> {
        let offset = spec.client_knobs.buffer_offset.unwrap_or(0) as usize;
        // One slot each, or (--invalidate-cache) slots spread over a pool larger than the caches.
        self.size = size as usize;
        self.rx_size = self.size + usize::from(self.datagram);
        self.stride = pool_stride(self.rx_size, offset);
        let pool = spec
            .client_knobs
            .cache_pool
            .map_or(0, |p| p as usize)
            .max(self.rx_size);
        self.tx = MessageBuffer::new(pool, offset);
        self.rx = MessageBuffer::new(pool, offset);
        self.ep
            .prepare(self.size, 1)
            .map_err(|e| NetError::io("preparing the data endpoint", e))?;
        self.hist = LatencyHistogram::new();
        self.trial_hist = LatencyHistogram::new();
        let recv_timeout = if self.datagram {
            self.loss_timeout
        } else {
            Duration::from_nanos(spec.timeout_ns)
        };
        self.ep
            .set_recv_timeout(Some(recv_timeout))
            .map_err(|e| NetError::io("setting the receive timeout", e))?;
        self.corrupt = 0;
        self.medians.clear();
        self.means.clear();
        self.best_rtt = f64::INFINITY;
        (self.lost, self.late, self.sent) = (0, 0, 0);
        self.to_server.clear();
        self.to_client.clear();
        self.one_way = spec.one_way;
        self.one_way_point = OneWayTally::default();
        Ok(())
    }

    /// A round trip is the repetition; its typical time is the trial's median round trip.
    fn warmed(&mut self, spec: &TrialSpec, out: &TrialOutcome) -> f64 {
        self.corrupt += self.last.corrupt;
        let rep_ns = if self.trial_hist.count() > 0 {
            self.trial_hist.value_at_quantile(0.5) as f64
        } else {
            out.wall_ns as f64 / spec.repetitions as f64
        };
        self.trial_hist.reset();
        rep_ns
    }

    fn start_timed(&mut self, tally: &mut Tally) {
        let corrupt = self.corrupt;
        if corrupt > 0 {
            tally.notes.push(format!(
                "{corrupt} echoes differed from what was sent (integrity check failed)"
            ));
        }
    }

    // Each trial's median round trip is its figure: a round trip stalled for milliseconds
    // (a preempted thread, a vCPU woken from idle) would move a trial's mean by more than
    // the precision target, its median not at all. The stalls stay in the distribution
    // (p99, max, mean). Throughput is derived from the grand mean of the trial medians
    // (bytes ÷ RTT/2, NetPIPE's figure), not averaged per trial: a mean of reciprocals
    // would be dominated by the fastest trials.
    fn fold(&mut self, out: &TrialOutcome) -> Result<(), NetError> {
        let t = &self.last;
        self.one_way_point.merge(&t.one_way);
        self.to_server.fold(&out.server, t.completed);
        self.to_client.fold(&out.client, t.completed);
        self.lost += t.lost;
        self.late += t.late;
        // Requests the local stack refused were never sent.
        self.sent += self.last_reps - t.refused;
        if t.completed > 0 {
            let median = self.trial_hist.value_at_quantile(0.5) as f64;
            self.medians.push(median);
            self.means.push(t.rtt_sum_ns as f64 / t.completed as f64);
            self.best_rtt = self.best_rtt.min(median);
            self.hist
                .merge(&self.trial_hist)
                .map_err(|e| NetError::Refused(format!("latency histogram: {e}")))?;
        }
        self.trial_hist.reset();
        Ok(())
    }

    fn samples(&self) -> &[f64] {
        &self.medians
    }

    fn server_timeout_note(&self) -> &'static str {
        "the server timed out waiting for a request"
    }

    fn finish(
        &mut self,
        spec: &RunSpec,
        timed: &TrialSpec,
        mut tally: Tally,
        stop_reason: StopReason,
    ) -> PointResult {
        let hist = &self.hist;
        if hist.count() > 0 {
            self.prev_rep_ns = Some(hist.mean());
            // Losses are waited for at most 50× the slowest round trip seen, within limits.
            let t = (hist.max() as f64 * 50.0).clamp(2e6, 1e9);
            self.loss_timeout = Duration::from_nanos(t as u64);
        }
        let rtt = distribution(hist, &self.means, 1.0);
        let half = distribution(hist, &self.means, 0.5);
        let throughput = rate_from_times(timed.size as f64, &self.medians, self.best_rtt);
        let (lost, late, sent) = (self.lost, self.late, self.sent);
        if lost > 0 {
            tally.notes.push(format!(
                "{lost} of {sent} requests got no echo within {:.1} ms and were counted lost",
                self.loss_timeout.as_secs_f64() * 1e3
            ));
        }
        let moved = tally.client.bytes_sent + tally.client.bytes_received;
        let directions = Directions {
            to_server: self.to_server.rate(),
            to_client: self.to_client.rate(),
            one_way: self.one_way_point.figures(),
        };
        if self.one_way {
            let base = stamps::offset(self.datagram);
            tally
                .notes
                .extend(self.one_way_point.note(timed.size, base));
        }
        let directions = (directions != Directions::default()).then_some(directions);
        let reps = timed.repetitions;
        let mut p = tally.point(
            spec,
            timed.size,
            reps,
            throughput,
            stop_reason,
            (moved, moved),
        );
        p.directions = directions;
        p.latency = Some(Latency {
            rtt_ns: rtt,
            half_rtt_ns: half,
        });
        p.loss = self.datagram.then(|| Loss {
            sent,
            received: sent - lost,
            lost,
            ratio: Loss::ratio_of(lost, sent),
            late,
            send_errors: p.client.send_errors.total(),
            ..Default::default()
        });
        p
    }

    fn typical_rep_ns(&self) -> Option<f64> {
        self.prev_rep_ns
    }
}

impl ClientPattern for Client {
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        Some(self.ep.as_mut())
    }

    fn run_trial(&mut self, _trial: u64, spec: &TrialSpec) -> io::Result<SideCounters> {
        let mut txs = Slots::new(self.tx.as_mut(), self.size, self.stride);
        let mut rxs = Slots::new(self.rx.as_mut(), self.rx_size, self.stride);
        let reps = spec.repetitions;
        // A warm-up also checks every echo.
        let t = client_trial(
            self.ep.as_mut(),
            &mut txs,
            &mut rxs,
            self.seq,
            reps,
            &mut self.trial_hist,
            Checks {
                verify: spec.warmup,
                one_way: self.one_way,
            },
        )?;
        self.seq += reps;
        self.last_reps = reps;
        let counters = t.counters.clone();
        self.last = t;
        Ok(counters)
    }
}
