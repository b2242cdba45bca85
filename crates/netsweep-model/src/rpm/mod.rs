//! Responsiveness under working conditions (draft-ietf-ippm-responsiveness-09) as arithmetic:
//! the trimmed means, the RPM formula, the moving averages and the stability rule that end each
//! direction's test, and a bootstrap interval for the result. The client (`netsweep rpm`) feeds
//! it one interval at a time — the bytes its load-generating connections moved and the probes
//! that finished — and does what [`Ramp::end_interval`] says; nothing here reads a clock, so
//! every rule is tested on made-up intervals.

use serde::{Deserialize, Serialize};

pub mod result;

/// The draft's test parameters (its §4.4 names in brackets).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// Intervals a moving average spans, and averages a stability check looks at [MAD]: 4.
    pub mad: usize,
    /// One interval, in milliseconds [ID]: 1000.
    pub interval_ms: u64,
    /// The share of each probe kind's samples kept by a trimmed mean, the lowest [TMP]: 0.95.
    pub trim: f64,
    /// The standard deviation of the last MAD averages, as a share of the newest, below which
    /// a quantity is stable [SDT]: 0.05.
    pub sdt: f64,
    /// Most load-generating connections [MNP]: 16.
    pub max_connections: usize,
    /// Most intervals one direction's test may take before it reports what it has.
    pub max_intervals: usize,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            mad: 4,
            interval_ms: 1000,
            trim: 0.95,
            sdt: 0.05,
            max_connections: 16,
            max_intervals: 12,
        }
    }
}

/// One foreign probe (a new connection's small GET), its phases in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Foreign {
    /// The interval it finished in.
    pub interval: usize,
    /// The TCP handshake (connect to connected).
    pub tcp: f64,
    /// The TLS handshake, divided by its round trips (TLS 1.3: one).
    pub tls: f64,
    /// The GET, request sent to the whole response received.
    pub http: f64,
}

/// One self probe (a small GET multiplexed on a load-generating connection), in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SelfProbe {
    /// The interval it finished in.
    pub interval: usize,
    /// Request sent to the whole response received.
    pub http: f64,
}

/// The mean of the lowest `keep` share of `values` (at least one), or None for none.
pub fn trimmed_mean(values: &mut [f64], keep: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = ((values.len() as f64 * keep.clamp(0.0, 1.0)).floor() as usize).max(1);
    Some(values[..n].iter().sum::<f64>() / n as f64)
}

/// Responsiveness from one window's probes, with the parts it is made of.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Responsiveness {
    /// Round trips per minute: the mean of the foreign and the loaded RPM (§5.3.1.1).
    pub rpm: f64,
    /// 60 s over the mean of the three foreign phases' trimmed means.
    pub foreign_rpm: f64,
    /// 60 s over the self probes' trimmed mean.
    pub loaded_rpm: f64,
    /// The trimmed means, in milliseconds: TCP handshake, TLS handshake, foreign GET, loaded
    /// GET.
    pub tcp_ms: f64,
    /// See `tcp_ms`.
    pub tls_ms: f64,
    /// See `tcp_ms`.
    pub http_foreign_ms: f64,
    /// See `tcp_ms`.
    pub http_loaded_ms: f64,
    /// Probes the window held: foreign, self.
    pub probes: (usize, usize),
}

/// The responsiveness of `foreign` and `selfp` (all of them), or None without one of each or
/// with a zero time.
pub fn responsiveness(
    foreign: &[Foreign],
    selfp: &[SelfProbe],
    trim: f64,
) -> Option<Responsiveness> {
    let tm = |f: &dyn Fn(&Foreign) -> f64| {
        let mut v: Vec<f64> = foreign.iter().map(f).collect();
        trimmed_mean(&mut v, trim)
    };
    let tcp = tm(&|p| p.tcp)?;
    let tls = tm(&|p| p.tls)?;
    let http_f = tm(&|p| p.http)?;
    let mut l: Vec<f64> = selfp.iter().map(|p| p.http).collect();
    let http_l = trimmed_mean(&mut l, trim)?;
    let foreign_rtt = (tcp + tls + http_f) / 3.0;
    if foreign_rtt <= 0.0 || http_l <= 0.0 {
        return None;
    }
    let foreign_rpm = 60.0 / foreign_rtt;
    let loaded_rpm = 60.0 / http_l;
    let rpm = (foreign_rpm + loaded_rpm) / 2.0;
    rpm.is_finite().then_some(Responsiveness {
        rpm,
        foreign_rpm,
        loaded_rpm,
        tcp_ms: tcp * 1e3,
        tls_ms: tls * 1e3,
        http_foreign_ms: http_f * 1e3,
        http_loaded_ms: http_l * 1e3,
        probes: (foreign.len(), selfp.len()),
    })
}

/// Fewest probes of each kind a bootstrap interval is drawn from.
pub const MIN_BOOTSTRAP_PROBES: usize = 8;

/// A 95 % bootstrap interval for the RPM of `foreign` and `selfp`: `resamples` draws with
/// replacement of each kind (a foreign probe's three phases drawn together), the 2.5th and
/// 97.5th percentiles of their RPMs. None with fewer than [`MIN_BOOTSTRAP_PROBES`] of a kind.
/// `seed` makes it repeatable.
pub fn bootstrap(
    foreign: &[Foreign],
    selfp: &[SelfProbe],
    trim: f64,
    resamples: usize,
    seed: u64,
) -> Option<(f64, f64)> {
    if foreign.len() < MIN_BOOTSTRAP_PROBES || selfp.len() < MIN_BOOTSTRAP_PROBES {
        return None;
    }
    let mut state = seed | 1;
    let mut next = |n: usize| {
        // xorshift64*: a few nanoseconds a draw, and no dependency.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    };
    let mut rpms = Vec::with_capacity(resamples);
    let mut f = vec![foreign[0]; foreign.len()];
    let mut s = vec![selfp[0]; selfp.len()];
    for _ in 0..resamples {
        for x in f.iter_mut() {
            *x = foreign[next(foreign.len())];
        }
        for x in s.iter_mut() {
            *x = selfp[next(selfp.len())];
        }
        if let Some(r) = responsiveness(&f, &s, trim) {
            rpms.push(r.rpm);
        }
    }
    if rpms.len() < resamples / 2 {
        return None;
    }
    rpms.sort_by(f64::total_cmp);
    let at = |q: f64| rpms[((rpms.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

/// The population standard deviation of `v`, as a share of `of`: None for an empty `v` or a
/// non-positive `of`.
fn relative_sd(v: &[f64], of: f64) -> Option<f64> {
    if v.is_empty() || of <= 0.0 {
        return None;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64;
    Some(var.sqrt() / of)
}

/// What the client does after an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Go on for another interval, opening one more load-generating connection first if set.
    Continue {
        /// Open a load-generating connection.
        add_connection: bool,
    },
    /// Goodput and responsiveness are both stable: the test of this direction is over.
    Stable,
    /// The interval budget is spent before both were stable: report what there is, marked.
    OutOfTime,
}

/// One direction's test across its intervals (§5.4): a load-generating connection added each
/// interval up to the most allowed; goodput saturated once the standard deviation of the last
/// MAD moving averages of the aggregate goodput is within SDT of the newest; then the
/// responsiveness of the last MAD intervals' probes each interval, stable by the same rule.
#[derive(Debug, Clone)]
pub struct Ramp {
    params: Params,
    /// Bytes every load-generating connection moved, per interval.
    bytes: Vec<u64>,
    /// How long each interval lasted, seconds (its nominal length unless the caller timed it).
    seconds: Vec<f64>,
    /// The moving average of aggregate goodput at each interval, bits per second.
    goodput: Vec<f64>,
    /// The responsiveness at each interval since goodput saturated.
    rpm: Vec<f64>,
    /// (interval, goodput) when goodput saturated.
    pub goodput_saturated: Option<(usize, f64)>,
    /// (interval, RPM) when responsiveness was stable.
    pub rpm_stable: Option<(usize, f64)>,
}

impl Ramp {
    /// A test about to start its first interval with one load-generating connection.
    pub fn new(params: Params) -> Self {
        Self {
            params,
            bytes: Vec::new(),
            seconds: Vec::new(),
            goodput: Vec::new(),
            rpm: Vec::new(),
            goodput_saturated: None,
            rpm_stable: None,
        }
    }

    /// Intervals ended so far.
    pub fn intervals(&self) -> usize {
        self.bytes.len()
    }

    /// The newest moving average of aggregate goodput, bits per second.
    pub fn goodput_bps(&self) -> Option<f64> {
        self.goodput.last().copied()
    }

    /// The probes of the last MAD intervals (the window a responsiveness is computed over)
    /// ending with interval `last`.
    pub fn window<'a>(
        &self,
        last: usize,
        foreign: &'a [Foreign],
        selfp: &'a [SelfProbe],
    ) -> (Vec<Foreign>, Vec<SelfProbe>) {
        let first = (last + 1).saturating_sub(self.params.mad);
        let inw = |i: usize| i >= first && i <= last;
        (
            foreign
                .iter()
                .filter(|p| inw(p.interval))
                .copied()
                .collect(),
            selfp.iter().filter(|p| inw(p.interval)).copied().collect(),
        )
    }

    /// Interval `self.intervals()` has ended after its nominal length: see
    /// [`Self::end_interval_after`].
    pub fn end_interval(
        &mut self,
        bytes: u64,
        foreign: &[Foreign],
        selfp: &[SelfProbe],
        connections: usize,
    ) -> Step {
        let nominal = self.params.interval_ms as f64 / 1e3;
        self.end_interval_after(bytes, nominal, foreign, selfp, connections)
    }

    /// Interval `self.intervals()` has ended, `seconds` after the previous one (a caller whose
    /// timer woke late says so, and its bytes are not taken as the nominal interval's): `bytes`
    /// is what every load-generating connection moved in it, `foreign` and `selfp` every probe
    /// finished so far, `connections` how many load-generating connections are open.
    pub fn end_interval_after(
        &mut self,
        bytes: u64,
        seconds: f64,
        foreign: &[Foreign],
        selfp: &[SelfProbe],
        connections: usize,
    ) -> Step {
        let i = self.bytes.len();
        self.bytes.push(bytes);
        let p = self.params;
        let nominal = p.interval_ms as f64 / 1e3;
        self.seconds.push(if seconds.is_finite() && seconds > 0.0 {
            seconds
        } else {
            nominal
        });
        let from = (i + 1).saturating_sub(p.mad);
        let span = &self.bytes[from..];
        let seconds: f64 = self.seconds[from..].iter().sum();
        let avg = span.iter().sum::<u64>() as f64 * 8.0 / seconds;
        self.goodput.push(avg);
        if self.goodput_saturated.is_none() && self.goodput.len() >= p.mad {
            let last = &self.goodput[self.goodput.len() - p.mad..];
            if relative_sd(last, avg).is_some_and(|sd| sd < p.sdt) {
                self.goodput_saturated = Some((i, avg));
            }
        }
        if self.goodput_saturated.is_some() && self.rpm_stable.is_none() {
            let (f, s) = self.window(i, foreign, selfp);
            if let Some(r) = responsiveness(&f, &s, p.trim) {
                self.rpm.push(r.rpm);
                if self.rpm.len() >= p.mad {
                    let last = &self.rpm[self.rpm.len() - p.mad..];
                    if relative_sd(last, r.rpm).is_some_and(|sd| sd < p.sdt) {
                        self.rpm_stable = Some((i, r.rpm));
                    }
                }
            }
        }
        if self.rpm_stable.is_some() {
            return Step::Stable;
        }
        if i + 1 >= p.max_intervals {
            return Step::OutOfTime;
        }
        Step::Continue {
            add_connection: connections < p.max_connections,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn foreign(interval: usize, ms: f64) -> Foreign {
        Foreign {
            interval,
            tcp: ms / 1e3,
            tls: ms / 1e3,
            http: ms / 1e3,
        }
    }

    fn loaded(interval: usize, ms: f64) -> SelfProbe {
        SelfProbe {
            interval,
            http: ms / 1e3,
        }
    }

    #[test]
    fn a_trimmed_mean_drops_the_slowest_share() {
        let mut v: Vec<f64> = (1..=20).map(f64::from).collect();
        // 95 % of 20 is 19: the 20 goes, the mean of 1..=19 is 10.
        assert_eq!(trimmed_mean(&mut v, 0.95), Some(10.0));
        assert_eq!(trimmed_mean(&mut [7.0], 0.95), Some(7.0));
        assert_eq!(trimmed_mean(&mut [], 0.95), None);
    }

    #[test]
    fn rpm_is_the_mean_of_the_foreign_and_the_loaded_rpm() {
        // Foreign phases 20 ms each: 3000 RPM; loaded GETs 100 ms: 600 RPM; mean 1800.
        let f: Vec<_> = (0..10).map(|_| foreign(0, 20.0)).collect();
        let s: Vec<_> = (0..10).map(|_| loaded(0, 100.0)).collect();
        let r = responsiveness(&f, &s, 0.95).unwrap();
        assert!((r.foreign_rpm - 3000.0).abs() < 1e-6, "{r:?}");
        assert!((r.loaded_rpm - 600.0).abs() < 1e-6, "{r:?}");
        assert!((r.rpm - 1800.0).abs() < 1e-6, "{r:?}");
        assert_eq!(r.probes, (10, 10));
        assert!(responsiveness(&f, &[], 0.95).is_none());
        assert!(responsiveness(&[], &s, 0.95).is_none());
    }

    #[test]
    fn the_bootstrap_interval_brackets_the_estimate_and_narrows_with_probes() {
        let mk = |n: usize| {
            let f: Vec<_> = (0..n).map(|k| foreign(0, 10.0 + (k % 7) as f64)).collect();
            let s: Vec<_> = (0..n)
                .map(|k| loaded(0, 50.0 + (k % 11) as f64 * 5.0))
                .collect();
            (f, s)
        };
        let (f, s) = mk(40);
        let rpm = responsiveness(&f, &s, 0.95).unwrap().rpm;
        let (lo, hi) = bootstrap(&f, &s, 0.95, 500, 7).unwrap();
        assert!(lo < rpm && rpm < hi, "{lo} {rpm} {hi}");
        let (f4, s4) = mk(400);
        let (lo4, hi4) = bootstrap(&f4, &s4, 0.95, 500, 7).unwrap();
        assert!(
            hi4 - lo4 < (hi - lo) * 0.6,
            "{lo4}..{hi4} against {lo}..{hi}"
        );
        // Repeatable, and refused on too few probes.
        assert_eq!(bootstrap(&f, &s, 0.95, 500, 7), Some((lo, hi)));
        assert!(bootstrap(&f[..5], &s, 0.95, 500, 7).is_none());
    }

    /// A ramp whose goodput climbs for `climb` intervals, then holds; its probes' times are
    /// 10 ms (each foreign phase) and 100 ms (loaded), times `rpm_noise(interval)`.
    fn run(params: Params, climb: usize, rpm_noise: &dyn Fn(usize) -> f64) -> (Ramp, Vec<Step>) {
        let mut ramp = Ramp::new(params);
        let mut f = Vec::new();
        let mut s = Vec::new();
        let mut steps = Vec::new();
        let mut conns = 1;
        for i in 0..params.max_intervals {
            let bytes = 1_000_000 * (i.min(climb) as u64 + 1);
            for _ in 0..20 {
                f.push(foreign(i, 10.0 * rpm_noise(i)));
                s.push(loaded(i, 100.0 * rpm_noise(i)));
            }
            let step = ramp.end_interval(bytes, &f, &s, conns);
            steps.push(step);
            match step {
                Step::Continue { add_connection } => conns += usize::from(add_connection),
                _ => break,
            }
        }
        (ramp, steps)
    }

    #[test]
    fn goodput_saturates_once_its_moving_averages_settle_then_rpm_must_too() {
        let p = Params::default();
        let (ramp, steps) = run(p, 3, &|_| 1.0);
        // Bytes climb for intervals 0..=3, then hold: the moving average of 4 holds from
        // interval 6 and its last four averages agree within 5 % from interval 8 (or so);
        // RPM, steady from the start, is stable MAD intervals after saturation began.
        let (gi, g) = ramp.goodput_saturated.unwrap();
        assert!((6..=9).contains(&gi), "saturated at {gi}: {steps:?}");
        assert!((g - 32e6).abs() / 32e6 < 0.01, "{g}");
        let (ri, rpm) = ramp.rpm_stable.unwrap();
        assert_eq!(ri, gi + p.mad - 1, "{steps:?}");
        // Foreign 10 ms a phase: 6000 RPM; loaded 100 ms: 600; mean 3300.
        assert!((rpm - 3300.0).abs() < 1.0, "{rpm}");
        assert_eq!(*steps.last().unwrap(), Step::Stable);
        // Every interval before the end asked for one more connection.
        assert!(steps[..steps.len() - 1].iter().all(|s| *s
            == Step::Continue {
                add_connection: true
            }));
    }

    #[test]
    fn a_late_interval_is_divided_by_the_time_it_took() {
        let p = Params::default();
        let mut r = Ramp::new(p);
        // 1 MB a second, but the third interval's timer woke 100 ms late and the fourth's on
        // time: the third held 1.1 s of bytes and the fourth 0.9 s.
        for (bytes, secs) in [
            (1_000_000, 1.0),
            (1_000_000, 1.0),
            (1_100_000, 1.1),
            (900_000, 0.9),
        ] {
            r.end_interval_after(bytes, secs, &[], &[], 1);
        }
        let timed = r.goodput_bps().unwrap();
        assert!((timed - 8e6).abs() < 1.0, "{timed}");
        // Taken as nominal seconds, the late interval alone reads 10 % high.
        let mut n = Ramp::new(p);
        n.end_interval(1_100_000, &[], &[], 1);
        assert!((n.goodput_bps().unwrap() - 8.8e6).abs() < 1.0);
        let mut t = Ramp::new(p);
        t.end_interval_after(1_100_000, 1.1, &[], &[], 1);
        assert!((t.goodput_bps().unwrap() - 8e6).abs() < 1.0);
        // A nonsense length falls back to the nominal one.
        let mut z = Ramp::new(p);
        z.end_interval_after(1_000_000, 0.0, &[], &[], 1);
        assert!((z.goodput_bps().unwrap() - 8e6).abs() < 1.0);
    }

    #[test]
    fn an_unsteady_rpm_runs_out_of_time_and_says_so() {
        let p = Params {
            max_intervals: 14,
            ..Params::default()
        };
        // A queue that keeps growing: every probe takes 15 % longer each interval, so each
        // window's RPM falls by about as much and four in a row never agree within 5 %.
        let (ramp, steps) = run(p, 2, &|i| 1.15f64.powi(i as i32));
        assert!(ramp.goodput_saturated.is_some());
        assert!(
            ramp.rpm_stable.is_none(),
            "{:?} {:?}",
            ramp.rpm,
            ramp.goodput_saturated
        );
        assert_eq!(steps.len(), 14);
        assert_eq!(*steps.last().unwrap(), Step::OutOfTime);
    }

    #[test]
    fn connections_stop_growing_at_the_most_allowed() {
        let p = Params {
            max_connections: 3,
            ..Params::default()
        };
        let mut ramp = Ramp::new(p);
        assert_eq!(
            ramp.end_interval(1, &[], &[], 2),
            Step::Continue {
                add_connection: true
            }
        );
        assert_eq!(
            ramp.end_interval(1, &[], &[], 3),
            Step::Continue {
                add_connection: false
            }
        );
    }

    #[test]
    fn the_window_is_the_last_mad_intervals() {
        let ramp = Ramp::new(Params::default());
        let f: Vec<_> = (0..10).map(|i| foreign(i, 1.0)).collect();
        let s: Vec<_> = (0..10).map(|i| loaded(i, 1.0)).collect();
        let (wf, ws) = ramp.window(6, &f, &s);
        assert_eq!(
            wf.iter().map(|p| p.interval).collect::<Vec<_>>(),
            [3, 4, 5, 6]
        );
        assert_eq!(ws.len(), 4);
        let (wf, _) = ramp.window(1, &f, &s);
        assert_eq!(wf.len(), 2);
    }
}
