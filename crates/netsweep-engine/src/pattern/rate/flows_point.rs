//! The client's side of a rate session with `--flows`: the offered load is shared evenly by
//! the flows, each on a schedule of its own (`flow.rs`); each trial's thread reports are added
//! into one side's counters and one set of rate totals, and the point is the single-flow
//! rate point (`pattern::rate::rate_point`: delivered rate, latency from the intended send
//! time, lateness, exact counts, the same notes) plus the flows figures: requests answered
//! per second per flow, Jain's fairness index, the start skew, each thread's CPU.

use super::flow::{RateJob, RateReport, Scheduling};
use super::point::{delivered, offered_load, rate_point, Measured, Totals};
use super::GRACE;
use crate::error::NetError;
use crate::pattern::dgram::trial_cookie;
use crate::pattern::echo::flow::Echo;
use crate::pattern::flows::client::{connect, merge, per_second, Sums};
use crate::pattern::flows::pool::Pool;
use crate::pattern::flows::worker::{Job, Report};
use crate::pattern::flows::{server, threads_memory};
use crate::pattern::{
    any_trial, ClientOpen, ClientPattern, PointFigures, Registration, Sizing, TrialOutcome,
};
use crate::point::Tally;
use netsweep_endpoint::Endpoint;
use netsweep_model::load::{Arrivals, Schedule};
use netsweep_model::results::{Placement, PointResult, StopReason};
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::{GrantedKnobs, SideCounters, TrialSpec};
use std::io;
use std::time::{Duration, Instant};

/// Rate over `--flows`: each flow on a schedule of its own, the server's echo stamped.
pub(crate) const FLOWS: Registration = Registration {
    pattern: Pattern::Rate,
    client: open,
    server: server::open::<Echo<true>>,
    check_trial: any_trial,
    server_memory: |s| threads_memory(s, true),
    flows: None,
};

/// Opens the client's side of a rate session with flows.
fn open(o: &ClientOpen<'_>) -> Result<Box<dyn ClientPattern>, NetError> {
    let c = connect::<Scheduling>(o)?;
    Ok(Box::new(Client {
        pool: c.pool,
        flows: c.flows,
        granted: c.granted,
        memory_note: c.memory_note,
        cookie: o.cookie,
        timeout: o.timeout,
        size: 0,
        offered: None,
        rate: 0.0,
        arrivals: Arrivals::Constant,
        seed: 0,
        trial_hist: LatencyHistogram::new(),
        trial_lateness: LatencyHistogram::new(),
        trial_delivered: 0.0,
        trial: Totals::default(),
        totals: Totals::default(),
        hist: LatencyHistogram::new(),
        lateness: LatencyHistogram::new(),
        means: Vec::new(),
        delivered: Vec::new(),
        fig: Sums::default(),
    }))
}

struct Client {
    pool: Pool<Scheduling>,
    flows: usize,
    granted: GrantedKnobs,
    memory_note: Option<String>,
    cookie: u64,
    timeout: Duration,
    size: usize,
    /// The offered load of a `--rates` sweep's point.
    offered: Option<f64>,
    /// The point's offered load over all flows, requests/s.
    rate: f64,
    arrivals: Arrivals,
    seed: u64,
    /// The last trial's figures, over all threads.
    trial_hist: LatencyHistogram,
    trial_lateness: LatencyHistogram,
    trial_delivered: f64,
    trial: Totals,
    /// The point's, over its timed trials.
    totals: Totals,
    hist: LatencyHistogram,
    lateness: LatencyHistogram,
    means: Vec<f64>,
    delivered: Vec<f64>,
    fig: Sums,
}

impl Client {
    /// Adds the threads' rate reports of one trial into the trial's figures.
    fn gather(&mut self, reports: &[Report<RateReport>]) -> io::Result<()> {
        let merge_err = |e: netsweep_model::stats::StatsError| io::Error::other(e.to_string());
        self.trial_hist.reset();
        self.trial_lateness.reset();
        self.trial = Totals {
            rate: self.rate,
            arrivals: self.arrivals,
            size: self.size,
            ..Totals::default()
        };
        let (mut arrived_at, mut due_by) = ([0u64; 8], [0u64; 8]);
        for r in reports {
            if let Some(h) = &r.hist {
                self.trial_hist.merge(h).map_err(merge_err)?;
            }
            let x = &r.out;
            if let Some(l) = &x.lateness {
                self.trial_lateness.merge(l).map_err(merge_err)?;
            }
            self.trial.add(&Totals {
                sent: x.sent,
                received: x.received,
                late: x.late,
                duplicates: x.duplicates,
                truncated: u32::from(x.truncated),
                ..Totals::default()
            });
            for j in 0..arrived_at.len() {
                arrived_at[j] += x.arrived_at[j];
                due_by[j] += x.due_by[j];
            }
        }
        self.trial_delivered = delivered(self.rate, &arrived_at, &due_by);
        Ok(())
    }
}

impl PointFigures for Client {
    fn sizing(&self) -> Sizing {
        Sizing::Duration
    }

    fn offer(&mut self, rate: f64) {
        self.offered = Some(rate);
    }

    fn begin_point(&mut self, spec: &RunSpec, size: u64) -> Result<(), NetError> {
        let (rate, load) = offered_load(spec, self.offered, size)?;
        self.rate = rate;
        (self.arrivals, self.seed) = (load.arrivals, load.seed);
        self.size = size as usize;
        self.totals = Totals {
            rate: self.rate,
            arrivals: self.arrivals,
            size: self.size,
            ..Totals::default()
        };
        self.hist.reset();
        self.lateness.reset();
        self.means.clear();
        self.delivered.clear();
        self.fig = Sums::default();
        Ok(())
    }

    fn fold(&mut self, out: &TrialOutcome) -> Result<(), NetError> {
        let merge_err = |e| NetError::Refused(format!("latency histogram: {e}"));
        self.hist.merge(&self.trial_hist).map_err(merge_err)?;
        self.lateness
            .merge(&self.trial_lateness)
            .map_err(merge_err)?;
        if self.trial_hist.count() > 0 {
            self.means.push(self.trial_hist.mean());
        }
        self.delivered.push(self.trial_delivered);
        self.totals.add(&self.trial);
        self.fig.active_ns += out.client.active_ns;
        self.fig.add(&out.client, &out.server);
        Ok(())
    }

    fn samples(&self) -> &[f64] {
        &self.delivered
    }

    fn server_timeout_note(&self) -> &'static str {
        "the server timed out waiting for a request on a flow"
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
        let measured = Measured {
            hist: &self.hist,
            means: &self.means,
            lateness: &self.lateness,
            delivered: &self.delivered,
        };
        let totals = std::mem::take(&mut self.totals);
        let mut p = rate_point(
            &totals,
            &measured,
            Vec::new(),
            spec,
            timed,
            tally,
            stop_reason,
        );
        // The trial meters saw where the coordinating thread ran, not the flows' threads.
        p.placement = Placement::default();
        p.notes.retain(|n| !n.starts_with("placement varied"));
        let f = std::mem::take(&mut self.fig);
        let active_ns = f.active_ns;
        let mut figures = f.figures(self.flows, "requests_per_s", |client, _| {
            per_second(client.messages_received, active_ns)
        });
        // The aggregate is the delivered rate, measured as a whole per trial.
        figures.aggregate = p.rate.as_ref().map_or(0.0, |r| r.delivered_rate.mean);
        p.flows = Some(figures);
        p
    }
}

impl ClientPattern for Client {
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        None
    }

    fn granted(&mut self) -> GrantedKnobs {
        self.granted.clone()
    }

    fn run_trial(&mut self, trial: u64, spec: &TrialSpec) -> io::Result<SideCounters> {
        let duration = Duration::from_nanos(spec.duration_ns.max(1));
        let job = Job {
            size: self.size,
            duration,
            idle: self.timeout,
            epoch: Instant::now(),
            params: RateJob {
                per_flow: self.rate / self.flows.max(1) as f64,
                arrivals: self.arrivals,
                seed: Schedule::trial_seed(self.seed, trial),
                cookie: trial_cookie(self.cookie, trial),
                flows: self.flows,
                grace_ns: GRACE.as_nanos() as u64,
            },
        };
        self.pool.shared.reset();
        self.pool.dispatch(job)?;
        let wait = duration + 2 * self.timeout + Duration::from_secs(2);
        let reports = self.pool.collect(wait, |_| wait)?;
        self.gather(&reports)?;
        Ok(merge(&reports, self.flows))
    }
}
