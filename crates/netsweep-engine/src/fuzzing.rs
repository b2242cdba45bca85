//! Entry points for the cargo-fuzz targets in `fuzz/`, not an API: the data-path code that
//! reads a peer's bytes (rate replies, flow numbers) driven without sockets. The datagram
//! header and its accounting are public already (`pattern::dgram`).

use crate::pattern::dgram::HEADER;
use crate::pattern::flows::{read_index, server};
use crate::pattern::rate::flow::{RateJob, Schedules};
use crate::pattern::rate::loops::{Bucket, RecvPlan, Replies};
use netsweep_endpoint::Endpoint;
use netsweep_model::load::Arrivals;
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::GrantedKnobs;
use std::io;
use std::time::{Duration, Instant};

/// A rate trial's receiving side as the pattern sizes it: storage for `requests` requests,
/// the timeline's intervals of `interval_ns` (0: none) over a schedule of `window_ns`.
#[derive(Debug, Clone, Copy)]
pub struct RatePlan {
    /// Bytes of every request and reply.
    pub size: usize,
    /// The trial's cookie.
    pub cookie: u32,
    /// Requests the trial may carry (rounded up to whole words of the `seen` bits).
    pub requests: u64,
    /// Length of a timeline interval, ns (0: one bucket).
    pub interval_ns: u64,
    /// The schedule's span, ns.
    pub window_ns: u64,
    /// A reply later than this after its intended send time is late.
    pub grace_ns: u64,
}

/// What a rate receiver made of the replies: its counts, and what went into its histograms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateTally {
    /// `--one-way`: replies timed or found unstamped (each reply on time, with room).
    pub one_way_timed: u64,
    /// Replies seen.
    pub messages: u64,
    /// Distinct requests answered.
    pub received: u64,
    /// Replies late, of another trial or malformed.
    pub late: u64,
    /// Replies of a request already answered.
    pub duplicates: u64,
    /// Answers counted at a checkpoint.
    pub arrived: u64,
    /// Latencies in the trial's histogram.
    pub recorded: u64,
    /// Answers in the timeline's buckets, by intended send time and by arrival.
    pub answered: u64,
    /// Arrivals in the timeline's buckets.
    pub arrived_in_buckets: u64,
    /// The `seen` bits' capacity in requests.
    pub capacity: u64,
}

/// The rate pattern's receiver (`pattern::rate`, one flow) fed `replies`, each a whole reply
/// as the peer sent it.
pub fn rate_replies<'m>(plan: RatePlan, replies: impl IntoIterator<Item = &'m [u8]>) -> RateTally {
    let words = plan.requests.div_ceil(64).max(1) as usize;
    let interval_ns = if plan.interval_ns == 0 {
        u64::MAX
    } else {
        plan.interval_ns
    };
    let window_ns = plan.window_ns.max(1);
    let nb = if interval_ns == u64::MAX {
        1
    } else {
        window_ns.div_ceil(interval_ns).max(1) as usize
    };
    let recv = RecvPlan {
        size: plan.size,
        cookie: plan.cookie,
        epoch: Instant::now(),
        grace_ns: plan.grace_ns,
        timeout_ns: u64::MAX,
        interval_ns,
        window_ns,
        // `--one-way` where the replies have room for the stamps: a peer's stamps are any
        // i64 the reply's bytes hold.
        wall: netsweep_proto::stamps::fits(plan.size, netsweep_proto::stamps::RATE_OFFSET)
            .then(crate::pattern::oneway::WallClock::now),
    };
    let mut hist = LatencyHistogram::new();
    let mut seen = vec![0u64; words];
    let mut buckets = vec![Bucket::default(); nb];
    let mut r = Replies::new(&recv, true, &mut hist, &mut seen, &mut buckets);
    for m in replies {
        r.reply(m);
    }
    let got = r.finish();
    let one_way = got.one_way.figures();
    RateTally {
        one_way_timed: one_way.map_or(0, |o| o.messages) + got.one_way.unstamped,
        messages: got.counters.messages_received,
        received: got.answers.received,
        late: got.answers.late,
        duplicates: got.answers.duplicates,
        arrived: got.answers.arrived_at.iter().sum(),
        recorded: hist.count(),
        answered: buckets.iter().map(|b| b.answered).sum(),
        arrived_in_buckets: buckets.iter().map(|b| b.arrived).sum(),
        capacity: words as u64 * 64,
    }
}

/// One data thread of a rate session with flows (`pattern::rate::flow`): `flows` flows at
/// `per_flow` requests per second for `duration`, its replies accounted by flow.
#[derive(Debug)]
pub struct FlowsRate {
    state: Schedules,
    hist: LatencyHistogram,
    flows: usize,
}

impl FlowsRate {
    /// A thread readied for a trial, as the pool readies it.
    pub fn new(
        flows: usize,
        per_flow: f64,
        duration: Duration,
        cookie: u32,
        grace_ns: u64,
    ) -> Self {
        let job = RateJob {
            per_flow,
            arrivals: Arrivals::Constant,
            seed: 1,
            cookie,
            flows,
            grace_ns,
        };
        let mut state = Schedules::default();
        state.ready(&job, duration, 0..flows);
        Self {
            state,
            hist: LatencyHistogram::new(),
            flows,
        }
    }

    /// Accounts a whole reply of `size` bytes on flow `flow` (taken modulo the flows: a
    /// thread reads only its own) that starts with `stamp`, arrived at `now` ns.
    pub fn reply(&mut self, flow: usize, stamp: &[u8; HEADER], size: usize, now: u64) {
        let i = flow % self.flows.max(1);
        self.state
            .account(i, stamp, size, now, Some(&mut self.hist));
    }

    /// (received, late, duplicates, latencies recorded).
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let r = self.state.report();
        (r.received, r.late, r.duplicates, self.hist.count())
    }
}

/// A connection's bytes after its cookie, handed out `piece` bytes per receive.
#[derive(Debug)]
struct Script<'a> {
    bytes: &'a [u8],
    piece: usize,
}

impl Endpoint for Script<'_> {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.piece.max(1)).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }

    fn is_datagram(&self) -> bool {
        false
    }

    fn set_recv_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }

    fn granted(&self) -> GrantedKnobs {
        GrantedKnobs::default()
    }
}

/// The server's side of a session with `n` flows (`pattern::flows::server`): each connection
/// in `conns` (its bytes after the cookie, `piece` bytes per receive) says its flow number
/// and is filed under it. Returns, by flow number, the connection filed there — or the
/// error that refuses the session.
pub fn file_flows<'c>(
    n: u32,
    conns: impl IntoIterator<Item = &'c [u8]>,
    piece: usize,
) -> Result<Vec<usize>, String> {
    let mut slots: Vec<Option<usize>> = (0..n).map(|_| None).collect();
    let mut conns = conns.into_iter();
    for k in 0..n as usize {
        let bytes = conns
            .next()
            .ok_or_else(|| format!("flow data connection {} of {n} did not arrive", k + 1))?;
        let mut ep = Script { bytes, piece };
        let i = read_index(&mut ep, Duration::from_secs(1))
            .map_err(|e| format!("a flow did not say its number: {e}"))?;
        server::file(&mut slots, i, k)?;
    }
    Ok(slots.into_iter().flatten().collect())
}
