//! A rate point from what its trials counted, for one flow or many: the offered load, the
//! notes (schedule missed, lost, late, truncated, refused, duplicates), the delivered rate as
//! the throughput, latency from the intended send time, loss for datagrams, the rate
//! figures.

use super::{GRACE, MISSED_FRACTION};
use crate::error::NetError;
use crate::point::{distribution, estimate, Tally};
use netsweep_model::load::{Arrivals, LoadSpec, RateFigures, TimelineSample};
use netsweep_model::results::{Distribution, Estimate, Latency, Loss, PointResult, StopReason};
use netsweep_model::spec::RunSpec;
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::TrialSpec;

/// A point's offered load, requests/s (a `--rates` sweep's, else `--rate` at `size`), and
/// the run's load settings.
pub(crate) fn offered_load(
    spec: &RunSpec,
    offered: Option<f64>,
    size: u64,
) -> Result<(f64, &LoadSpec), NetError> {
    let load = spec
        .load
        .as_ref()
        .ok_or_else(|| NetError::Refused("the rate pattern needs --rate or --rates".into()))?;
    let rate = match (offered, load.rate) {
        (Some(r), _) => r,
        (None, Some(r)) => r.per_second(size),
        (None, None) => return Err(NetError::Refused("no offered load for the point".into())),
    };
    Ok((rate, load))
}

/// What a rate point's timed trials counted (one flow or many).
#[derive(Debug, Default)]
pub(crate) struct Totals {
    /// The offered load, requests/s.
    pub rate: f64,
    pub arrivals: Arrivals,
    pub size: usize,
    pub datagram: bool,
    pub sent: u64,
    pub received: u64,
    pub late: u64,
    pub duplicates: u64,
    /// Requests the local stack refused.
    pub refused: u64,
    /// Trials whose schedule outgrew their storage.
    pub truncated: u32,
}

impl Totals {
    /// Adds another trial's (or thread's) counts.
    pub fn add(&mut self, x: &Totals) {
        self.sent += x.sent;
        self.received += x.received;
        self.late += x.late;
        self.duplicates += x.duplicates;
        self.refused += x.refused;
        self.truncated += x.truncated;
    }
}

/// What a rate point's timed trials measured.
pub(crate) struct Measured<'a> {
    /// Latency from the intended send time, every answered request.
    pub hist: &'a LatencyHistogram,
    /// Each trial's mean latency.
    pub means: &'a [f64],
    pub lateness: &'a LatencyHistogram,
    /// Each trial's delivered rate, requests/s (the stop rule's sample).
    pub delivered: &'a [f64],
}

/// A rate point from its totals: notes, the delivered rate as throughput, latency, loss
/// (datagrams) and the rate figures.
pub(crate) fn rate_point(
    t: &Totals,
    m: &Measured<'_>,
    timeline: Vec<TimelineSample>,
    spec: &RunSpec,
    timed: &TrialSpec,
    mut tally: Tally,
    stop_reason: StopReason,
) -> PointResult {
    let mean_gap_ns = 1e9 / t.rate.max(1e-9);
    let lateness = distribution(m.lateness, &[], 1.0);
    let missed = lateness.count > 0 && lateness.p50 > MISSED_FRACTION * mean_gap_ns;
    let (sent, received) = (t.sent, t.received);
    let lost = sent.saturating_sub(received);
    for note in notes(t, &lateness, missed, mean_gap_ns, lost) {
        tally.notes.push(note);
    }
    let delivered = estimate(m.delivered);
    let mbps = |x: f64| x * t.size as f64 * 8.0 / 1e6;
    let throughput = Estimate {
        mean: mbps(delivered.mean),
        ci95: delivered.ci95.map(mbps),
        max: mbps(delivered.max),
        trials: delivered.trials,
    };
    let moved = tally.client.bytes_sent + tally.client.bytes_received;
    let mut p = tally.point(
        spec,
        timed.size,
        sent,
        throughput,
        stop_reason,
        (moved, moved),
    );
    p.latency = Some(Latency {
        rtt_ns: distribution(m.hist, m.means, 1.0),
        half_rtt_ns: distribution(m.hist, m.means, 0.5),
    });
    p.loss = t.datagram.then(|| Loss {
        sent,
        received,
        lost,
        ratio: Loss::ratio_of(lost, sent),
        late: t.late,
        send_errors: p.client.send_errors.total(),
        ..Default::default()
    });
    p.rate = Some(RateFigures {
        offered_rate: t.rate,
        delivered_rate: delivered,
        arrivals: t.arrivals,
        sent,
        received,
        lost,
        late: t.late,
        lateness_ns: lateness,
        schedule_missed: missed,
        timeline,
    });
    p
}

/// `rate` × the best, over the checkpoints, of answers arrived by one ÷ requests due by it
/// (`arrived_at[j]`: answers first counted at checkpoint j; `due_by[j]`: requests due by it).
pub(crate) fn delivered(rate: f64, arrived_at: &[u64], due_by: &[u64]) -> f64 {
    let mut arrived = 0u64;
    let mut best = None::<f64>;
    for (a, &due) in arrived_at.iter().zip(due_by) {
        arrived += a;
        if due > 0 {
            let ratio = arrived as f64 / due as f64;
            best = Some(best.map_or(ratio, |b| b.max(ratio)));
        }
    }
    rate * best.unwrap_or(0.0)
}

/// The point's honesty notes: a schedule the sender could not keep, requests lost, late or
/// not sent.
fn notes(c: &Totals, lateness: &Distribution, missed: bool, gap_ns: f64, lost: u64) -> Vec<String> {
    let mut out = Vec::new();
    if missed {
        out.push(format!(
            "schedule missed: the sender could not keep the schedule, median lateness {:.1} µs is over {:.0}% of \
             the {:.1} µs between requests (p99 {:.1} µs), so less than {:.0} msg/s was \
             offered on time: lower --rate, or pin the client with --cpu",
            lateness.p50 / 1e3,
            MISSED_FRACTION * 100.0,
            gap_ns / 1e3,
            lateness.p99 / 1e3,
            c.rate
        ));
    }
    if lost > 0 {
        out.push(format!(
            "lost requests: {lost} of {} requests got no reply within {} ms of the last send",
            c.sent,
            GRACE.as_millis()
        ));
    }
    if c.late > 0 {
        out.push(format!(
            "late replies: {} replies came over {} ms after their intended send time (or after \
             their trial), counted late, not in the latency figures",
            c.late,
            GRACE.as_millis()
        ));
    }
    if c.truncated > 0 {
        out.push(format!(
            "schedule truncated: {} trials drew more requests than their storage (1.5× the \
             mean), the rest of their schedule was not sent",
            c.truncated
        ));
    }
    if c.refused > 0 {
        out.push(format!(
            "refused requests: {} requests were refused by this host's stack (see send_errors)",
            c.refused
        ));
    }
    if c.duplicates > 0 {
        out.push(format!(
            "duplicates: {} duplicate replies were ignored",
            c.duplicates
        ));
    }
    out
}
