//! The client's side of a `--flows` session: opens the N connections (each presenting the
//! cookie, then its flow number), hands each trial to the data threads, adds their reports
//! into one side's counters (flows in flow order, the threads' CPU, the start skew), and lets
//! the pattern fold the timed trials into the point ([`FlowsFold`], implemented in the
//! pattern's folder) with the figures every flows point has: each flow, Jain's fairness
//! index, the start skew, each thread's CPU.

use super::machine::Machine;
use super::pool::Pool;
use super::worker::{Job, Report};
use super::{ensure_descriptors, present_index, rss_kib, thread_count};
use crate::error::NetError;
use crate::pattern::{ClientOpen, ClientPattern, PointFigures, Sizing, TrialOutcome};
use crate::point::Tally;
use netsweep_endpoint::Endpoint;
use netsweep_model::flows::{add_flows, add_threads, start_skew, FlowFigure, FlowFigures};
use netsweep_model::results::{Placement, PointResult, StopReason};
use netsweep_model::spec::RunSpec;
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::{
    FlowCounters, GrantedKnobs, SideCounters, ThreadCounters, TrialSpec,
};
use std::io;
use std::time::{Duration, Instant};

/// How a pattern's flows fold into its point — the pattern's semantics, implemented in its
/// folder (`stream/flow.rs`, `pingpong/flow.rs`): what a timed trial adds and what the point
/// reports.
pub(crate) trait FlowsFold: Default + Send + 'static {
    /// What the server says when it timed out waiting on a flow.
    const SERVER_TIMEOUT: &'static str;

    /// A new point of `size`-byte messages.
    fn begin(&mut self, size: usize);

    /// One timed trial, with the round trips its threads timed: what the pattern keeps, what
    /// the flows figures need (`sums`), and the stop rule's sample (returned).
    fn fold(
        &mut self,
        out: &TrialOutcome,
        trial_hist: &LatencyHistogram,
        sums: &mut Sums,
    ) -> Result<f64, NetError>;

    /// The point, from what its timed trials added up to.
    fn finish(&mut self, end: PointEnd<'_>) -> PointResult;
}

/// What a point's timed trials hand the pattern's [`FlowsFold::finish`].
pub(crate) struct PointEnd<'a> {
    pub(crate) spec: &'a RunSpec,
    pub(crate) timed: &'a TrialSpec,
    pub(crate) tally: Tally,
    pub(crate) stop_reason: StopReason,
    /// The stop rule's samples, one per timed trial.
    pub(crate) samples: &'a [f64],
    pub(crate) sums: Sums,
    /// The session's flows.
    pub(crate) flows: usize,
}

/// Opens the client's side of a session with flows: its threads run `M`, its trials fold by
/// `F`.
pub(crate) fn open<M: Machine<Params = ()>, F: FlowsFold>(
    o: &ClientOpen<'_>,
) -> Result<Box<dyn ClientPattern>, NetError> {
    let c = connect::<M>(o)?;
    Ok(Box::new(Client::<M, F> {
        pool: c.pool,
        flows: c.flows,
        granted: c.granted,
        timeout: o.timeout,
        size: 0,
        memory_note: c.memory_note,
        samples: Vec::new(),
        fig: Sums::default(),
        trial_hist: LatencyHistogram::new(),
        fold: F::default(),
    }))
}

/// Adds the threads' reports of one trial into one side's counters. `threads` is the
/// number of threads (flow `w + threads·j` is thread `w`'s `j`-th); the data time is from
/// the earliest start to the latest end, the receive span the latest last receive.
pub(crate) fn merge<O>(reports: &[Report<O>], flows: usize) -> SideCounters {
    let threads = reports.len().max(1);
    let mut c = SideCounters {
        flows: vec![FlowCounters::default(); flows],
        ..Default::default()
    };
    for (w, r) in reports.iter().enumerate() {
        for (j, f) in r.flows.iter().enumerate() {
            if let Some(slot) = c.flows.get_mut(w + threads * j) {
                *slot = *f;
            }
        }
        c.send_calls += r.send_calls;
        c.recv_calls += r.recv_calls;
        c.cpu_user_ns += r.cpu.cpu_user_ns;
        c.cpu_sys_ns += r.cpu.cpu_sys_ns;
        c.timed_out |= r.timed_out;
        c.recv_span_ns = c.recv_span_ns.max(r.last_recv_ns);
    }
    for f in &c.flows {
        c.bytes_sent += f.bytes_sent;
        c.bytes_received += f.bytes_received;
        c.messages_sent += f.messages_sent;
        c.messages_received += f.messages_received;
    }
    let starts: Vec<u64> = reports.iter().map(|r| r.start_ns).collect();
    let first = starts.iter().copied().min().unwrap_or(0);
    let last = reports.iter().map(|r| r.end_ns).max().unwrap_or(first);
    c.active_ns = last.saturating_sub(first);
    c.start_skew_ns = Some(start_skew(&starts));
    c.threads = reports.iter().map(|r| r.cpu).collect();
    c
}

/// The client's side of a flows session, and the point being measured.
struct Client<M: Machine, F> {
    pool: Pool<M>,
    flows: usize,
    granted: GrantedKnobs,
    timeout: Duration,
    size: usize,
    /// The memory the flows took, said once on the first point.
    memory_note: Option<String>,
    /// Per timed trial, the stop rule's sample (the pattern's).
    samples: Vec<f64>,
    fig: Sums,
    /// The current trial's round trips (threads that time them).
    trial_hist: LatencyHistogram,
    fold: F,
}

/// What a point's timed trials add up to, per flow and per thread.
#[derive(Default)]
pub(crate) struct Sums {
    pub(crate) client: Vec<FlowCounters>,
    pub(crate) server: Vec<FlowCounters>,
    client_threads: Vec<ThreadCounters>,
    server_threads: Vec<ThreadCounters>,
    client_skew: u64,
    server_skew: u64,
    /// The client's data time (pingpong, rate), ns.
    pub(crate) active_ns: u64,
}

impl Sums {
    /// Adds one timed trial's per-flow, per-thread and skew figures of both sides.
    pub(crate) fn add(&mut self, c: &SideCounters, s: &SideCounters) {
        add_flows(&mut self.client, &c.flows);
        add_flows(&mut self.server, &s.flows);
        add_threads(&mut self.client_threads, &c.threads);
        add_threads(&mut self.server_threads, &s.threads);
        self.client_skew = self.client_skew.max(c.start_skew_ns.unwrap_or(0));
        self.server_skew = self.server_skew.max(s.start_skew_ns.unwrap_or(0));
    }

    /// The point's flows figures: `figure(client, server)` per flow, in `unit`.
    pub(crate) fn figures(
        self,
        flows: usize,
        unit: &str,
        figure: impl Fn(&FlowCounters, &FlowCounters) -> f64,
    ) -> FlowFigures {
        let per_flow: Vec<FlowFigure> = (0..flows)
            .map(|i| {
                let client = self.client.get(i).copied().unwrap_or_default();
                let server = self.server.get(i).copied().unwrap_or_default();
                FlowFigure {
                    figure: figure(&client, &server),
                    client,
                    server,
                }
            })
            .collect();
        let mut figures = FlowFigures::new(unit, per_flow);
        figures.client_start_skew_ns = self.client_skew;
        figures.server_start_skew_ns = self.server_skew;
        figures.client_threads = self.client_threads;
        figures.server_threads = self.server_threads;
        figures
    }
}

/// A client's flows, connected and handed to their data threads.
pub(crate) struct Opened<M: Machine> {
    pub(crate) pool: Pool<M>,
    pub(crate) flows: usize,
    pub(crate) granted: GrantedKnobs,
    /// The memory the flows took, said once on the first point.
    pub(crate) memory_note: Option<String>,
}

/// Opens the N connections (each presenting its flow number) and spawns the data threads.
pub(crate) fn connect<M: Machine>(o: &ClientOpen<'_>) -> Result<Opened<M>, NetError> {
    let n = o.spec.flows.max(1);
    ensure_descriptors(n, "client").map_err(NetError::Refused)?;
    let before = rss_kib();
    let mut eps: Vec<Box<dyn Endpoint>> = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut ep = o.connect()?;
        present_index(ep.as_mut(), i)
            .map_err(|e| NetError::io(format!("opening flow {i} of {n}"), e))?;
        eps.push(ep);
    }
    let granted = eps[0].granted();
    let threads = thread_count(o.spec.threads, n, o.spec.pattern);
    let pool = Pool::spawn(eps, threads, o.spec.client_knobs.cpu)
        .map_err(|m| NetError::Refused(format!("client side: {m}")))?;
    let memory_note = match (before, rss_kib()) {
        (Some(a), Some(b)) => Some(format!(
            "memory: opening {n} flows on {threads} data threads raised the client's \
             resident memory by {} KiB ({:.1} KiB per flow; the kernel's socket buffers \
             are not counted in it)",
            b.saturating_sub(a),
            b.saturating_sub(a) as f64 / n as f64
        )),
        _ => None,
    };
    Ok(Opened {
        pool,
        flows: n as usize,
        granted,
        memory_note,
    })
}

impl<M: Machine, F: FlowsFold> PointFigures for Client<M, F> {
    fn sizing(&self) -> Sizing {
        Sizing::Duration
    }

    fn begin_point(&mut self, _spec: &RunSpec, size: u64) -> Result<(), NetError> {
        self.size = size as usize;
        self.samples.clear();
        self.fig = Sums::default();
        self.trial_hist.reset();
        self.fold.begin(self.size);
        Ok(())
    }

    fn fold(&mut self, out: &TrialOutcome) -> Result<(), NetError> {
        let sample = self.fold.fold(out, &self.trial_hist, &mut self.fig)?;
        self.samples.push(sample);
        self.fig.add(&out.client, &out.server);
        Ok(())
    }

    fn samples(&self) -> &[f64] {
        &self.samples
    }

    fn server_timeout_note(&self) -> &'static str {
        F::SERVER_TIMEOUT
    }

    fn finish(
        &mut self,
        spec: &RunSpec,
        timed: &TrialSpec,
        mut tally: Tally,
        stop_reason: StopReason,
    ) -> PointResult {
        if let Some(note) = self.memory_note.take() {
            tally.notes.push(note);
        }
        let mut p = self.fold.finish(PointEnd {
            spec,
            timed,
            tally,
            stop_reason,
            samples: &self.samples,
            sums: std::mem::take(&mut self.fig),
            flows: self.flows,
        });
        // The trial meters saw where each side's coordinating thread ran, not its flows
        // threads: no placement to report (each thread's CPU time is in `flows`).
        p.placement = Placement::default();
        p.notes.retain(|n| !n.starts_with("placement varied"));
        p
    }
}

impl<M: Machine<Params = ()>, F: FlowsFold> ClientPattern for Client<M, F> {
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        None
    }

    fn granted(&mut self) -> GrantedKnobs {
        self.granted.clone()
    }

    fn run_trial(&mut self, _trial: u64, spec: &TrialSpec) -> io::Result<SideCounters> {
        let duration = Duration::from_nanos(spec.duration_ns);
        let job = Job {
            size: self.size,
            duration,
            idle: self.timeout,
            epoch: Instant::now(),
            params: (),
        };
        self.pool.shared.reset();
        self.pool.dispatch(job)?;
        // The client's threads end on their own clock: nothing to relay while they run.
        let wait = duration + self.timeout + Duration::from_secs(2);
        let reports = self.pool.collect(wait, |_| wait)?;
        self.trial_hist.reset();
        for h in reports.iter().filter_map(|r| r.hist.as_ref()) {
            self.trial_hist
                .merge(h)
                .map_err(|e| io::Error::other(e.to_string()))?;
        }
        Ok(merge(&reports, self.flows))
    }
}

/// Events per second: `count` over `ns` nanoseconds.
pub(crate) fn per_second(count: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        count as f64 * 1e9 / ns as f64
    }
}
