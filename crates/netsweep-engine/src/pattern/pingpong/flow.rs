//! Pingpong over `--flows` (neper's tcp_rr): each flow's state machine keeps one request
//! outstanding for the trial's duration, and each response's round trip goes into the
//! thread's histogram. Once the time is up no new request starts, and the thread is done
//! when every flow has its last response — so every request sent was answered. The server's
//! side is the echo (`echo/flow.rs`). A point's figure is transactions per second over all
//! flows, measured as a whole per trial, with the round trips of every flow in one histogram.

use crate::error::NetError;
use crate::pattern::echo::flow::Echo;
use crate::pattern::flows::client::{per_second, FlowsFold, PointEnd, Sums};
use crate::pattern::flows::machine::{Machine, Next, Share, Target};
use crate::pattern::flows::worker::{Flows, Job, WAIT_NS};
use crate::pattern::flows::{client, server, threads_memory};
use crate::pattern::{any_trial, Registration, TrialOutcome};
use crate::point::{distribution, estimate};
use netsweep_model::results::{Latency, PointResult};
use netsweep_model::spec::Pattern;
use netsweep_model::stats::LatencyHistogram;
use std::io;
use std::time::Instant;

/// Pingpong over `--flows`: one request outstanding per flow.
pub(crate) const FLOWS: Registration = Registration {
    pattern: Pattern::Pingpong,
    client: client::open::<Requesting, Folding>,
    server: server::open::<Echo<false>>,
    check_trial: any_trial,
    server_memory: |s| threads_memory(s, true),
    flows: None,
};

/// The client's side: a request outstanding on every flow.
#[derive(Debug, Default)]
pub(crate) struct Requesting {
    /// Per flow: when its request went out, and whether it is still partly unsent.
    t0: Vec<Instant>,
    sending: Vec<bool>,
    start: Option<Instant>,
    outstanding: usize,
    stopping: bool,
    responses: u64,
    /// Made by the first trial (a histogram is ~270 KiB, written whole when made).
    hist: Option<LatencyHistogram>,
}

impl Requesting {
    /// Starts flow `i`'s next request at `now`.
    #[inline]
    fn request(&mut self, t: &mut Flows, i: usize, size: usize, now: Instant) -> io::Result<()> {
        (self.t0[i], self.sending[i]) = (now, true);
        if t.push(i, size, false)? {
            self.sending[i] = false;
        }
        Ok(())
    }
}

impl Machine for Requesting {
    type Params = ();
    type Out = ();
    const SENDS: bool = true;
    const TARGET: Option<Target> = None;

    fn ready(&mut self, _job: &Job<()>, share: Share) {
        let now = Instant::now();
        self.t0.clear();
        self.t0.resize(share.flows, now);
        self.sending.clear();
        self.sending.resize(share.flows, false);
        (self.start, self.outstanding) = (None, share.flows);
        (self.stopping, self.responses) = (false, 0);
        self.hist.get_or_insert_with(LatencyHistogram::new).reset();
    }

    fn start(&mut self, t: &mut Flows, job: &Job<()>, now: Instant) -> io::Result<()> {
        self.start = Some(now);
        for i in 0..self.t0.len() {
            self.request(t, i, job.size, now)?;
        }
        Ok(())
    }

    #[inline]
    fn on_ready(&mut self, t: &mut Flows, i: usize, job: &Job<()>) -> io::Result<()> {
        if self.sending[i] {
            if t.push(i, job.size, false)? {
                self.sending[i] = false;
            }
        } else if t.pull(i, job.size)? {
            let now = Instant::now();
            if let Some(h) = self.hist.as_mut() {
                h.record(now.duration_since(self.t0[i]).as_nanos() as u64);
            }
            self.responses += 1;
            if self.stopping {
                self.outstanding -= 1;
            } else {
                self.request(t, i, job.size, now)?;
            }
        }
        Ok(())
    }

    #[inline]
    fn next(&mut self, _t: &mut Flows, job: &Job<()>, now: Instant) -> io::Result<Next> {
        let start = self.start.unwrap_or(now);
        if !self.stopping && now.duration_since(start) >= job.duration {
            self.stopping = true;
        }
        Ok(if self.outstanding == 0 {
            Next::Done
        } else {
            Next::Wait(WAIT_NS)
        })
    }

    fn progress(&self) -> u64 {
        self.responses
    }

    fn waits_on_peer(&self) -> bool {
        true
    }

    fn stalled(&self) -> &'static str {
        "no response on a flow within the timeout"
    }

    fn hist(&self) -> Option<&LatencyHistogram> {
        self.hist.as_ref()
    }

    fn out(&self) {}
}

/// How pingpong's flows fold into the point: transactions per second per trial (the stop
/// rule's sample is the request bytes answered, in Mbit/s), and every round trip.
#[derive(Debug, Default)]
pub(crate) struct Folding {
    size: usize,
    /// Per timed trial, transactions per second over all flows.
    tps: Vec<f64>,
    /// The point's round trips, and each trial's mean.
    hist: LatencyHistogram,
    trial_means: Vec<f64>,
}

impl FlowsFold for Folding {
    const SERVER_TIMEOUT: &'static str = "the server timed out waiting for a request on a flow";

    fn begin(&mut self, size: usize) {
        self.size = size;
        self.tps.clear();
        self.trial_means.clear();
        self.hist.reset();
    }

    fn fold(
        &mut self,
        out: &TrialOutcome,
        trial_hist: &LatencyHistogram,
        sums: &mut Sums,
    ) -> Result<f64, NetError> {
        let c = &out.client;
        let tps = per_second(c.messages_received, c.active_ns);
        self.tps.push(tps);
        sums.active_ns += c.active_ns;
        if trial_hist.count() > 0 {
            self.trial_means.push(trial_hist.mean());
            self.hist
                .merge(trial_hist)
                .map_err(|e| NetError::Refused(format!("latency histogram: {e}")))?;
        }
        Ok(tps * self.size as f64 * 8.0 / 1e6)
    }

    fn finish(&mut self, end: PointEnd<'_>) -> PointResult {
        let tally = end.tally;
        let throughput = estimate(end.samples);
        let moved = tally.client.bytes_sent + tally.client.bytes_received;
        let messages = tally.client.messages_received;
        let mut p = tally.point(
            end.spec,
            end.timed.size,
            messages,
            throughput,
            end.stop_reason,
            (moved, moved),
        );
        let active_ns = end.sums.active_ns;
        let mut figures = end
            .sums
            .figures(end.flows, "transactions_per_s", |client, _| {
                per_second(client.messages_received, active_ns)
            });
        // The aggregate is measured as a whole, per trial, not summed from flow means.
        figures.aggregate = estimate(&self.tps).mean;
        p.latency = Some(Latency {
            rtt_ns: distribution(&self.hist, &self.trial_means, 1.0),
            half_rtt_ns: distribution(&self.hist, &self.trial_means, 0.5),
        });
        p.flows = Some(figures);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_side_that_times_requests_carries_a_histogram() {
        // A histogram is ~270 KiB written whole: only the side that times requests makes one
        // (a stream's sides have none, `stream/flow.rs`), and only once it is readied.
        assert!(Echo::<false>::default().hist().is_none());
        let mut r = Requesting::default();
        assert!(r.hist().is_none(), "made before its first trial");
        let job = Job {
            size: 64,
            duration: std::time::Duration::from_millis(1),
            idle: std::time::Duration::from_secs(1),
            epoch: Instant::now(),
            params: (),
        };
        let share = Share {
            index: 0,
            threads: 1,
            flows: 2,
        };
        r.ready(&job, share);
        assert_eq!(r.hist().map(|h| h.count()), Some(0));
    }

    #[test]
    fn every_request_on_every_flow_is_answered_and_timed() {
        use crate::pattern::flows::pool::Pool;
        use crate::pattern::flows::testing::{self, pairs};
        // Five flows on two threads a side: the threads hold 3 and 2 flows each, in epoll.
        let (c, s, _) = pairs(5);
        let client = Pool::<Requesting>::spawn(c, 2, None).unwrap();
        let server = Pool::<Echo<false>>::spawn(s, 2, None).unwrap();
        let requests = |r: &[crate::pattern::flows::worker::Report<()>]| {
            r.iter()
                .flat_map(|r| r.flows.iter())
                .map(|f| f.messages_sent)
                .sum::<u64>()
        };
        let (sent, got) = testing::trial(&client, &server, testing::job(100, ()), requests);
        let asked = requests(&sent);
        let timed: u64 = sent
            .iter()
            .filter_map(|r| r.hist.as_ref())
            .map(|h| h.count())
            .sum();
        let answered: u64 = sent
            .iter()
            .flat_map(|r| r.flows.iter())
            .map(|f| f.messages_received)
            .sum();
        let heard: u64 = got
            .iter()
            .flat_map(|r| r.flows.iter())
            .map(|f| f.messages_received)
            .sum();
        // No request is left unanswered when the time is up, and each answer is one round trip.
        assert!(asked > 5, "{asked} requests in 150 ms");
        assert_eq!((answered, timed, heard), (asked, asked, asked));
        for r in &sent {
            assert!(r
                .flows
                .iter()
                .all(|f| f.messages_sent > 0 && f.bytes_received == f.messages_received * 100));
        }
    }
}
