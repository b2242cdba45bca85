//! How many repetitions a trial makes and how long a duration-sized trial lasts: the
//! warm-up/calibration [`Plan`] every pattern's point follows (the stop rule is `stop.rs`).

use crate::pattern::{Sizing, TrialOutcome};
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_proto::messages::TrialSpec;
use std::time::Duration;

/// A point's trial plan: the warm-up trials (calibrating repetitions, or one short trial
/// for a duration-sized pattern), then the timed trials' [`TrialSpec`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    size: u64,
    warmup: bool,
    trial_ns: u64,
    /// `Some` for repetition-sized patterns.
    cal: Option<Calibration>,
    reps: u64,
    rep_ns: f64,
    /// `--interval`, carried by the timed trials of a duration-sized pattern.
    interval_ns: u64,
    /// Duration-sized: the last warm-up's length, and how long its receiver went on after its
    /// sender stopped (the data in flight — socket buffers, queues — over the path's rate).
    warm_ns: u64,
    lag_ns: u64,
    /// The least control round trip seen in the warm-ups (the path's idle round trip).
    rtt_ns: u64,
    warmups: u32,
    /// Whether the path's lag may lengthen the trials: streams (one way or both), whose
    /// rate it biases; not rate's open-loop schedules, whose trials are their offered load.
    adapt: bool,
    /// `--hard-point-time`: the longest timed trial that lets the warm-ups and `--min-trials`
    /// trials, each with the path's lag after it, end within `--max-point-time` (`None`:
    /// the point's budget widens instead).
    hard: Option<Hard>,
}

/// What a hard point time leaves for each timed trial.
#[derive(Debug, Clone, Copy)]
struct Hard {
    point_ns: u64,
    min_trials: u64,
    /// The warm-ups' time, once they are done (`None` while they run).
    warmed_ns: Option<u64>,
}

/// The shortest trial a hard point time cuts a trial to.
const MIN_HARD_TRIAL_NS: u64 = 10_000_000;

/// A duration-sized trial lasts at least this many times the path's lag (what was in flight
/// when the sender stopped, drained at the path's rate): a stream's rate over fewer is its
/// ramp and its queue, not the path (4 TCP flows over 43 Mbit/s read 35–41 Mbit/s in 20 ms
/// trials and 39.96 in 2 s ones, as iperf3 -t 5 did).
pub(crate) const LAG_TRIALS: u64 = 8;

/// … and at least this many of the path's round trips, where that is over
/// [`LONG_RTT_NS`]: a congestion window settles over round trips, not bytes (TCP over a
/// 40 ms, 100 Mbit/s path read 84.7 Mbit/s in 1.1 s trials, 94.4 in 4 s ones; iperf3 -t 8
/// 92.9).
pub(crate) const RTT_TRIALS: u64 = 100;

/// A round trip above which a path is long: below it (loopback, a LAN) the lag decides.
pub(crate) const LONG_RTT_NS: u64 = 1_000_000;

/// The longest a trial is made to last for the path's sake.
pub(crate) const MAX_ADAPTED_TRIAL_NS: u64 = 5_000_000_000;

/// Most warm-up trials a duration-sized point makes while its lag grows (a TCP window and
/// its send buffer grow over the first trials of a slow path).
const MAX_DURATION_WARMUPS: u32 = 4;

impl Plan {
    /// The plan of a point of `size` bytes; `prev_rep_ns` is the pattern's typical time per
    /// repetition on the previous point.
    pub(crate) fn new(sizing: Sizing, spec: &RunSpec, size: u64, prev_rep_ns: Option<f64>) -> Self {
        let trial_ns = spec.trial_time_ns;
        let cal = match sizing {
            Sizing::Repetitions { max_reps } => Some(Calibration {
                trial_ns: trial_ns as f64,
                max_reps,
            }),
            Sizing::Duration => None,
        };
        Self {
            size,
            warmup: spec.warmup,
            trial_ns,
            reps: cal.map_or(0, |c| c.first(prev_rep_ns)),
            cal,
            rep_ns: 0.0,
            interval_ns: spec.interval_ns,
            warm_ns: trial_ns / 2,
            lag_ns: 0,
            rtt_ns: u64::MAX,
            warmups: 0,
            adapt: matches!(spec.pattern, Pattern::Stream | Pattern::Bidir),
            hard: spec.hard_point_time.then_some(Hard {
                point_ns: spec.max_point_time_ns,
                min_trials: u64::from(spec.min_trials.max(1)),
                warmed_ns: None,
            }),
        }
    }

    /// The first warm-up trial. A repetition-sized pattern always makes one (it measures the
    /// time per repetition even without `--warmup`); a duration-sized one only with it, for
    /// half the trial time.
    pub(crate) fn first_warmup(&self) -> Option<TrialSpec> {
        match self.cal {
            Some(_) => Some(self.reps_trial(true)),
            None => self.warmup.then(|| self.duration_warmup()),
        }
    }

    fn duration_warmup(&self) -> TrialSpec {
        TrialSpec {
            size: self.size,
            repetitions: 0,
            duration_ns: self.warm_ns,
            warmup: true,
            interval_ns: 0,
        }
    }

    /// The next warm-up trial once the last one (`out`) took `rep_ns` per repetition, or
    /// `None` when the calibration is done. A duration-sized point warms up again while the
    /// lag it measured asks for trials more than twice as long as that warm-up.
    pub(crate) fn next_warmup(&mut self, rep_ns: f64, out: &TrialOutcome) -> Option<TrialSpec> {
        let Some(cal) = self.cal else {
            if !self.adapt {
                return None;
            }
            self.warmups += 1;
            self.lag_ns = lag_ns(out);
            self.rtt_ns = self.rtt_ns.min(out.control_rtt_ns);
            let wanted = self.adapted_ns();
            if wanted > 2 * self.warm_ns && self.warmups < MAX_DURATION_WARMUPS {
                self.warm_ns = wanted / 2;
                return Some(self.duration_warmup());
            }
            return None;
        };
        self.rep_ns = rep_ns;
        self.reps = cal.next(self.reps, rep_ns, self.warmup)?;
        Some(self.reps_trial(true))
    }

    /// A duration-sized trial's length: what the path asks for ([`Plan::wanted_ns`]), held
    /// under a hard point time to what fits it.
    fn adapted_ns(&self) -> u64 {
        match self.hard {
            Some(h) if self.cal.is_none() && self.adapt => {
                self.wanted_ns().min(self.hard_cap_ns(h))
            }
            _ => self.wanted_ns(),
        }
    }

    /// The longest trial of a hard point: what the warm-ups left of the point's time
    /// (while they run, two trials' worth kept for them) shared by `--min-trials` trials,
    /// less the path's lag after each; never under [`MIN_HARD_TRIAL_NS`] (a path whose lag
    /// leaves less misses its trials, said).
    fn hard_cap_ns(&self, h: Hard) -> u64 {
        let each = match h.warmed_ns {
            Some(w) => h.point_ns.saturating_sub(w) / h.min_trials,
            None => h.point_ns / (h.min_trials + 2),
        };
        each.saturating_sub(self.lag_ns).max(MIN_HARD_TRIAL_NS)
    }

    /// The trial time the path asks for: the asked one, or [`LAG_TRIALS`] times the
    /// warm-up's lag when that is longer (at most [`MAX_ADAPTED_TRIAL_NS`]).
    fn wanted_ns(&self) -> u64 {
        let rtt = if self.rtt_ns != u64::MAX && self.rtt_ns > LONG_RTT_NS {
            RTT_TRIALS.saturating_mul(self.rtt_ns)
        } else {
            0
        };
        self.trial_ns.max(
            LAG_TRIALS
                .saturating_mul(self.lag_ns)
                .max(rtt)
                .min(MAX_ADAPTED_TRIAL_NS),
        )
    }

    /// The point's time budget: the asked one, or — when the path made the trials longer
    /// than asked — the warm-ups' time (`warmed`) and room for `--min-trials` timed trials.
    pub(crate) fn budget(&self, spec: &RunSpec, warmed: Duration) -> Duration {
        let asked = Duration::from_nanos(spec.max_point_time_ns);
        if self.cal.is_some() || self.hard.is_some() || self.adapted_ns() <= self.trial_ns {
            return asked;
        }
        let trials = Duration::from_nanos(self.adapted_ns()) * spec.min_trials.max(1);
        asked.max(warmed + trials + trials / 10)
    }

    /// The note of a point whose trials the path made longer than asked, or a hard point
    /// time made shorter than the path asks.
    pub(crate) fn note(&self) -> Option<String> {
        let (t, wanted) = (self.adapted_ns(), self.wanted_ns());
        if self.hard.is_some() && t < wanted {
            return Some(format!(
                "trials held to {:.3} s by --hard-point-time (the path asks for {:.2} s: its \
                 receiver went on {:.1} ms after the sender stopped); the rate includes the \
                 path's ramp and queue",
                t as f64 / 1e9,
                wanted as f64 / 1e9,
                self.lag_ns as f64 / 1e6,
            ));
        }
        (self.cal.is_none() && t > self.trial_ns).then(|| {
            format!(
                "trials lengthened to {:.2} s (asked {:.3} s): the warm-up's receiver went on \
                 {:.1} ms after its sender stopped — data in flight in buffers and queues — \
                 and the path's round trip is {:.2} ms; a trial lasts {LAG_TRIALS}× the one \
                 and {RTT_TRIALS}× the other (a round trip over {} ms){}",
                t as f64 / 1e9,
                self.trial_ns as f64 / 1e9,
                self.lag_ns as f64 / 1e6,
                if self.rtt_ns == u64::MAX {
                    0.0
                } else {
                    self.rtt_ns as f64 / 1e6
                },
                LONG_RTT_NS / 1_000_000,
                if t == MAX_ADAPTED_TRIAL_NS {
                    " (capped)"
                } else {
                    ""
                }
            )
        })
    }

    /// Every timed trial of the point, once the warm-ups took `warmed`.
    pub(crate) fn timed(&mut self, warmed: Duration) -> TrialSpec {
        if let Some(h) = &mut self.hard {
            h.warmed_ns = Some(warmed.as_nanos() as u64);
        }
        match self.cal {
            Some(cal) => {
                self.reps = cal.timed(self.rep_ns);
                self.reps_trial(false)
            }
            None => TrialSpec {
                size: self.size,
                repetitions: 0,
                duration_ns: self.adapted_ns(),
                warmup: false,
                interval_ns: self.interval_ns,
            },
        }
    }

    fn reps_trial(&self, warmup: bool) -> TrialSpec {
        TrialSpec {
            size: self.size,
            repetitions: self.reps,
            duration_ns: 0,
            warmup,
            interval_ns: 0,
        }
    }
}

/// NetPIPE-style calibration of repetitions per trial: start from the previous point's time
/// per repetition (or 2), grow until one untimed trial lasts an eighth of the target, then
/// size the timed trials to the target duration.
#[derive(Debug, Clone, Copy)]
struct Calibration {
    trial_ns: f64,
    max_reps: f64,
}

impl Calibration {
    /// Repetitions of the first warm-up trial.
    fn first(&self, prev_rep_ns: Option<f64>) -> u64 {
        prev_rep_ns.map_or(2, |t| {
            ((self.trial_ns / 4.0) / t.max(1.0)).clamp(1.0, self.max_reps) as u64
        })
    }

    /// Repetitions of the next warm-up trial, or `None` once `reps` repetitions of `rep_ns`
    /// each fill an eighth of the target. `rep_ns` is the typical time per repetition (the
    /// median round trip where there is one), so one stalled repetition — a first contact, a
    /// preempted thread — cannot end the calibration with trials far too short.
    fn next(&self, reps: u64, rep_ns: f64, warmup: bool) -> Option<u64> {
        let rep_ns = rep_ns.max(1.0);
        if !warmup || reps as f64 * rep_ns >= self.trial_ns / 8.0 || reps as f64 >= self.max_reps {
            return None;
        }
        Some(
            ((self.trial_ns / 4.0) / rep_ns)
                .clamp(reps as f64 * 2.0, reps as f64 * 64.0)
                .min(self.max_reps) as u64,
        )
    }

    /// Repetitions of each timed trial.
    fn timed(&self, rep_ns: f64) -> u64 {
        (self.trial_ns / rep_ns.max(1.0)).clamp(1.0, self.max_reps) as u64
    }
}

/// How long the receiving side of a trial went on after the sending side stopped: what was
/// in flight (socket buffers, queues) drained at the path's rate. Both directions for bidir;
/// 0 where nothing was received.
fn lag_ns(out: &TrialOutcome) -> u64 {
    let (c, s) = (&out.client, &out.server);
    let to_server = if c.bytes_sent > 0 && s.bytes_received > 0 {
        s.recv_span_ns.saturating_sub(c.active_ns)
    } else {
        0
    };
    let to_client = if s.bytes_sent > 0 && c.bytes_received > 0 {
        c.recv_span_ns.saturating_sub(s.active_ns)
    } else {
        0
    };
    to_server.max(to_client)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_model::spec::{Family, Transport};
    use netsweep_proto::messages::SideCounters;

    /// A warm-up whose receiver ended `lag_ms` after its sender (a client sending to the
    /// server for 10 ms).
    fn sent(lag_ms: f64) -> TrialOutcome {
        TrialOutcome {
            client: SideCounters {
                bytes_sent: 1 << 20,
                active_ns: 10_000_000,
                ..Default::default()
            },
            server: SideCounters {
                bytes_received: 1 << 20,
                recv_span_ns: 10_000_000 + (lag_ms * 1e6) as u64,
                active_ns: 10_000_000 + (lag_ms * 1e6) as u64,
                ..Default::default()
            },
            wall_ns: 10_000_000,
            control_rtt_ns: 50_000,
        }
    }

    fn idle() -> TrialOutcome {
        sent(0.0)
    }

    #[test]
    fn a_slow_paths_lag_lengthens_stream_trials_and_the_budget() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Stream, Family::Ipv4);
        spec.warmup = true;
        // Loopback: the receiver is done 0.2 ms after the sender; 20 ms trials as asked.
        let mut lo = Plan::new(Sizing::Duration, &spec, 65536, None);
        assert_eq!(lo.first_warmup().map(|t| t.duration_ns), Some(10_000_000));
        assert_eq!(lo.next_warmup(0.0, &sent(0.2)), None);
        assert_eq!(lo.timed(Duration::ZERO).duration_ns, 20_000_000);
        assert_eq!(lo.budget(&spec, Duration::ZERO), Duration::from_millis(300));
        assert_eq!(lo.note(), None);
        // A shaped path held 250 ms of data: warm up again for half of 8 × that, then time
        // trials of 2 s, with room for three in the point's budget.
        let mut slow = Plan::new(Sizing::Duration, &spec, 65536, None);
        let w = slow
            .next_warmup(0.0, &sent(250.0))
            .expect("a longer warm-up");
        assert_eq!(w.duration_ns, 1_000_000_000);
        assert_eq!(slow.next_warmup(0.0, &sent(250.0)), None);
        assert_eq!(slow.timed(Duration::ZERO).duration_ns, 2_000_000_000);
        // Room for the warm-ups and min-trials (3) timed trials, and a tenth more.
        assert_eq!(
            slow.budget(&spec, Duration::from_secs(1)),
            Duration::from_millis(7_600)
        );
        let note = slow.note().expect("a note");
        assert!(
            note.contains("2.00 s") && note.contains("250.0 ms"),
            "{note}"
        );
        // A 40 ms round trip: 100 of them, even with little in flight.
        let mut long = Plan::new(Sizing::Duration, &spec, 65536, None);
        let mut w = sent(5.0);
        w.control_rtt_ns = 40_000_000;
        assert!(long.next_warmup(0.0, &w).is_some());
        while long.next_warmup(0.0, &w).is_some() {}
        assert_eq!(long.timed(Duration::ZERO).duration_ns, 4_000_000_000);
        assert!(long.note().unwrap().contains("40.00 ms"));
        // However long the lag, a trial is capped, and the warm-ups stop.
        let mut stuck = Plan::new(Sizing::Duration, &spec, 65536, None);
        let mut n = 0;
        while stuck.next_warmup(0.0, &sent(60_000.0)).is_some() {
            n += 1;
        }
        assert!(n < MAX_DURATION_WARMUPS, "{n} warm-ups");
        assert_eq!(
            stuck.timed(Duration::ZERO).duration_ns,
            MAX_ADAPTED_TRIAL_NS
        );
        assert!(stuck.note().unwrap().contains("(capped)"));
        // A rate point's trials are its schedule: never lengthened.
        let rate = RunSpec::new(Transport::Tcp, Pattern::Rate, Family::Ipv4);
        let mut r = Plan::new(Sizing::Duration, &rate, 64, None);
        assert_eq!(r.next_warmup(0.0, &sent(250.0)), None);
        assert_eq!(r.timed(Duration::ZERO).duration_ns, rate.trial_time_ns);
        // Bidir: the slower direction decides; a reverse stream's receiver is the client.
        let mut back = sent(0.0);
        back.server.bytes_sent = 1 << 20;
        back.server.active_ns = 10_000_000;
        back.client.bytes_received = 1 << 20;
        back.client.recv_span_ns = 40_000_000;
        assert_eq!(lag_ns(&back), 30_000_000);
    }

    #[test]
    fn a_hard_point_time_holds_the_trials_to_what_fits_and_never_widens_the_budget() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Bidir, Family::Ipv4);
        spec.hard_point_time = true;
        spec.max_point_time_ns = 500_000_000;
        spec.trial_time_ns = 100_000_000;
        // 250 ms in flight asks for 2 s trials; 500 ms ÷ (3 + 2) less the lag leaves none:
        // the shortest trial, said.
        let mut slow = Plan::new(Sizing::Duration, &spec, 65536, None);
        let w = slow.next_warmup(0.0, &sent(250.0));
        assert!(w.is_none_or(|w| w.duration_ns <= 50_000_000));
        let warmed = Duration::from_millis(400);
        assert_eq!(slow.timed(warmed).duration_ns, MIN_HARD_TRIAL_NS);
        assert_eq!(
            slow.budget(&spec, Duration::from_millis(400)),
            Duration::from_millis(500)
        );
        let note = slow.note().expect("a note");
        assert!(
            note.contains("--hard-point-time") && note.contains("2.00 s"),
            "{note}"
        );
        // 30 ms of lag after 200 ms of warm-ups: (500 − 200) ÷ 3 less 30.
        let mut mid = Plan::new(Sizing::Duration, &spec, 65536, None);
        while mid.next_warmup(0.0, &sent(30.0)).is_some() {}
        let t = mid.timed(Duration::from_millis(200)).duration_ns;
        assert_eq!(t, 70_000_000);
        // A quick path keeps the asked trials and says nothing.
        let mut lo = Plan::new(Sizing::Duration, &spec, 65536, None);
        assert_eq!(lo.next_warmup(0.0, &sent(0.2)), None);
        assert_eq!(lo.timed(Duration::from_millis(50)).duration_ns, 100_000_000);
        assert_eq!(lo.note(), None);
    }

    #[test]
    fn calibration_grows_then_sizes_trials() {
        let cal = Calibration {
            trial_ns: 20e6,
            max_reps: 1e9,
        };
        assert_eq!(cal.first(None), 2);
        // Previous point took 10 µs per repetition: a quarter trial is 500 repetitions.
        assert_eq!(cal.first(Some(10_000.0)), 500);
        // 2 repetitions of 10 µs are far too short: grow, at most 64× at once.
        assert_eq!(cal.next(2, 10_000.0, true), Some(128));
        // 500 repetitions of 10 µs (a quarter of the target) are enough.
        assert_eq!(cal.next(500, 10_000.0, true), None);
        assert_eq!(cal.next(2, 10_000.0, false), None, "no warm-up: no growth");
        assert_eq!(cal.timed(10_000.0), 2000);
        assert_eq!(cal.timed(1e12), 1, "at least one repetition");
    }

    #[test]
    fn plans_warm_up_then_time() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Pingpong, Family::Ipv4);
        spec.trial_time_ns = 20_000_000;
        spec.warmup = true;
        let mut p = Plan::new(Sizing::Repetitions { max_reps: 1e9 }, &spec, 64, None);
        assert_eq!(
            p.first_warmup().map(|t| (t.repetitions, t.warmup)),
            Some((2, true))
        );
        assert_eq!(
            p.next_warmup(10_000.0, &idle()).map(|t| t.repetitions),
            Some(128)
        );
        assert_eq!(
            p.next_warmup(10_000.0, &idle()).map(|t| t.repetitions),
            Some(500)
        );
        assert_eq!(p.next_warmup(10_000.0, &idle()), None);
        let t = p.timed(Duration::ZERO);
        assert_eq!((t.repetitions, t.duration_ns, t.warmup), (2000, 0, false));
        let mut d = Plan::new(Sizing::Duration, &spec, 64, None);
        let w = d.first_warmup().expect("a warm-up with --warmup");
        assert_eq!((w.duration_ns, w.repetitions), (10_000_000, 0));
        assert_eq!(d.next_warmup(1.0, &idle()), None);
        assert_eq!(d.timed(Duration::ZERO).duration_ns, 20_000_000);
        spec.warmup = false;
        assert_eq!(
            Plan::new(Sizing::Duration, &spec, 64, None).first_warmup(),
            None
        );
        let mut r = Plan::new(Sizing::Repetitions { max_reps: 1e9 }, &spec, 64, None);
        assert!(
            r.first_warmup().is_some(),
            "calibration runs even without --warmup"
        );
        assert_eq!(r.next_warmup(10_000.0, &idle()), None);
        assert_eq!(r.timed(Duration::ZERO).repetitions, 2000);
    }
}
