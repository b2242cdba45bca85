//! The kernel's own count of what a lab link carried, sampled over time: a thread inside a
//! host's namespace reads that namespace's /proc/net/dev (bytes and packets per interface)
//! every [`PERIOD`], stamping each reading with `Instant`, so a test can ask what the link
//! delivered over exactly the window its measurement covered.

use netsweep_lab::netns;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the sampler reads the counters.
pub const PERIOD: Duration = Duration::from_millis(2);

/// One reading of one interface.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// When it was read.
    pub at: Instant,
    /// Bytes received (whole frames, Ethernet header included).
    pub rx_bytes: u64,
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
}

/// `iface`'s counters in /proc/net/dev text (`None`: no such interface), or those of the
/// one interface other than `lo` when `iface` is `None`.
pub fn parse_net_dev(text: &str, iface: Option<&str>) -> Option<(u64, u64, u64, u64)> {
    let mut found = text.lines().skip(2).filter_map(|l| {
        let (name, rest) = l.split_once(':')?;
        let name = name.trim();
        let f: Vec<u64> = rest
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        (f.len() >= 10).then(|| (name.to_string(), (f[0], f[1], f[8], f[9])))
    });
    match iface {
        Some(want) => found.find(|(n, _)| n == want).map(|(_, c)| c),
        None => {
            let others: Vec<_> = found.filter(|(n, _)| n != "lo").collect();
            (others.len() == 1).then(|| others[0].1)
        }
    }
}

/// A sampling thread (stopped by [`LinkSampler::stop`]).
#[derive(Debug)]
pub struct LinkSampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<Vec<Reading>, String>>,
}

impl LinkSampler {
    /// Starts sampling `iface` (the namespace's one interface besides `lo` when `None`) in
    /// namespace `ns`; fails when the namespace or interface cannot be read.
    pub fn start(ns: &str, iface: Option<&str>) -> Result<LinkSampler, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ns, iface, flag) = (ns.to_string(), iface.map(str::to_string), stop.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let read = || -> Result<Reading, String> {
                let text = std::fs::read_to_string("/proc/thread-self/net/dev")
                    .map_err(|e| format!("/proc/thread-self/net/dev in {ns}: {e}"))?;
                let at = Instant::now();
                let (rb, rp, tb, tp) = parse_net_dev(&text, iface.as_deref())
                    .ok_or_else(|| format!("no interface {iface:?} in {ns}: {text}"))?;
                Ok(Reading {
                    at,
                    rx_bytes: rb,
                    rx_packets: rp,
                    tx_bytes: tb,
                    tx_packets: tp,
                })
            };
            let first = netns::enter(&ns)
                .map_err(|e| e.to_string())
                .and_then(|_| read());
            let _ = ready_tx.send(first.as_ref().map(|_| ()).map_err(Clone::clone));
            let mut all = vec![first?];
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(PERIOD);
                match read() {
                    Ok(r) => all.push(r),
                    // The lab went away under the sampler: what it read so far stands.
                    Err(_) => break,
                }
            }
            Ok(all)
        });
        ready_rx
            .recv()
            .map_err(|_| "the sampler thread died".to_string())??;
        Ok(LinkSampler { stop, thread })
    }

    /// Stops sampling and returns the readings.
    pub fn stop(self) -> Result<Series, String> {
        self.stop.store(true, Ordering::Relaxed);
        let readings = self
            .thread
            .join()
            .map_err(|_| "the sampler thread panicked".to_string())??;
        Ok(Series { readings })
    }
}

/// Which way the counted traffic went through the sampled interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Received by the interface.
    Rx,
    /// Sent by it.
    Tx,
}

/// An interface's readings in time order.
#[derive(Debug, Clone)]
pub struct Series {
    /// The readings, oldest first.
    pub readings: Vec<Reading>,
}

impl Series {
    /// (bytes, packets) counted in direction `dir` by time `t`, interpolated linearly
    /// between the readings either side of it (clamped to the first and last).
    pub fn at(&self, dir: Dir, t: Instant) -> (f64, f64) {
        let v = |r: &Reading| match dir {
            Dir::Rx => (r.rx_bytes as f64, r.rx_packets as f64),
            Dir::Tx => (r.tx_bytes as f64, r.tx_packets as f64),
        };
        let r = &self.readings;
        let i = r.partition_point(|x| x.at <= t);
        if i == 0 {
            return v(&r[0]);
        }
        if i == r.len() {
            return v(&r[r.len() - 1]);
        }
        let (a, b) = (&r[i - 1], &r[i]);
        let span = (b.at - a.at).as_secs_f64();
        let w = if span > 0.0 {
            (t - a.at).as_secs_f64() / span
        } else {
            0.0
        };
        let (va, vb) = (v(a), v(b));
        (va.0 + (vb.0 - va.0) * w, va.1 + (vb.1 - va.1) * w)
    }

    /// Whether the readings cover `[t0, t1]`, each end within two periods of a reading.
    pub fn covers(&self, t0: Instant, t1: Instant) -> bool {
        let (Some(first), Some(last)) = (self.readings.first(), self.readings.last()) else {
            return false;
        };
        let slack = PERIOD * 2;
        first.at <= t0 + slack && last.at + slack >= t1 && t0 < t1
    }

    /// The payload rate, bit/s, the interface carried in direction `dir` over `[t0, t1]`:
    /// its bytes less `header` bytes per packet (the frame's headers below the payload),
    /// over the window's length.
    pub fn payload_rate(&self, dir: Dir, t0: Instant, t1: Instant, header: u64) -> f64 {
        let (b0, p0) = self.at(dir, t0);
        let (b1, p1) = self.at(dir, t1);
        let payload = (b1 - b0) - (p1 - p0) * header as f64;
        payload * 8.0 / (t1 - t0).as_secs_f64()
    }

    /// The link's active span inside `[t0, t1]`: from its first frame to its last in direction
    /// `dir`, to a step's precision (`None` when it carried nothing).
    pub fn active_span(
        &self,
        dir: Dir,
        (t0, t1): (Instant, Instant),
        step: Duration,
    ) -> Option<(Instant, Instant)> {
        let moved = |u: Instant| self.at(dir, u + step).1 - self.at(dir, u).1 >= 1.0;
        let mut first = None;
        let mut last = None;
        let mut u = t0;
        while u + step <= t1 {
            if moved(u) {
                first.get_or_insert(u);
                last = Some(u + step);
            }
            u += step;
        }
        Some((first?, last?))
    }

    /// The payload rates, bit/s, over every `len`-long window (starting every `step`) inside
    /// the link's active span within `[t0, t1]`: what it delivered while a run's data flowed,
    /// pauses and all (a sender's hiccups on a busy machine, the pauses between trials), not
    /// before the run's first frame or after its last.
    pub fn window_rates(
        &self,
        dir: Dir,
        window: (Instant, Instant),
        len: Duration,
        step: Duration,
        header: u64,
    ) -> Vec<f64> {
        let mut out = Vec::new();
        let Some((a, b)) = self.active_span(dir, window, step) else {
            return out;
        };
        let mut s = a;
        while s + len <= b {
            out.push(self.payload_rate(dir, s, s + len, header));
            s += step;
        }
        out
    }

    /// [`Series::window_rates`] over half-second windows every 10 ms, in Mbit/s: what the
    /// link delivered during a run, to hold a receiver rate against.
    pub fn half_seconds_mbps(&self, dir: Dir, window: (Instant, Instant), header: u64) -> Vec<f64> {
        let (len, step) = (Duration::from_millis(500), Duration::from_millis(10));
        self.window_rates(dir, window, len, step, header)
            .into_iter()
            .map(|r| r / 1e6)
            .collect()
    }
}

/// The 10th, 50th and 90th percentiles of `rates` (nearest rank), or `None` when empty.
pub fn deciles(rates: &[f64]) -> Option<(f64, f64, f64)> {
    let mut r = rates.to_vec();
    r.sort_by(f64::total_cmp);
    let at = |q: f64| r[((r.len() - 1) as f64 * q).round() as usize];
    (!r.is_empty()).then(|| (at(0.1), at(0.5), at(0.9)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "Inter-|   Receive                                                |  Transmit\n \
face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0\n\
nsw-0-client: 151400     100    0    0    0     0          0         0     6600     100    0    0    0     0       0          0\n";

    #[test]
    fn reads_an_interface_and_the_only_one_besides_lo() {
        assert_eq!(
            parse_net_dev(DEV, Some("nsw-0-client")),
            Some((151400, 100, 6600, 100))
        );
        assert_eq!(parse_net_dev(DEV, None), Some((151400, 100, 6600, 100)));
        assert_eq!(parse_net_dev(DEV, Some("eth0")), None);
    }

    #[test]
    fn deciles_by_nearest_rank() {
        let r: Vec<f64> = (0..=100).rev().map(f64::from).collect();
        assert_eq!(deciles(&r), Some((10.0, 50.0, 90.0)));
        assert_eq!(deciles(&[3.0]), Some((3.0, 3.0, 3.0)));
        assert_eq!(deciles(&[]), None);
    }

    #[test]
    fn rates_interpolate_between_readings() {
        let t0 = Instant::now();
        let reading = |ms: u64, bytes: u64, packets: u64| Reading {
            at: t0 + Duration::from_millis(ms),
            rx_bytes: bytes,
            rx_packets: packets,
            tx_bytes: 0,
            tx_packets: 0,
        };
        // 1514-byte frames, 10 a millisecond for 100 ms: 1448 payload bytes each after a
        // 66-byte header (Ethernet 14, IPv4 20, TCP with timestamps 32).
        let s = Series {
            readings: (0..=100).map(|i| reading(i, i * 15140, i * 10)).collect(),
        };
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let r = s.payload_rate(Dir::Rx, ms(10), ms(90), 66);
        assert!((r - 10.0 * 1448.0 * 8.0 * 1000.0).abs() < 1.0, "{r}");
        // Half-way between two readings: half their difference.
        let (b, p) = s.at(Dir::Rx, t0 + Duration::from_micros(1500));
        assert!((b - 15140.0 * 1.5).abs() < 1e-6 && (p - 15.0).abs() < 1e-9);
        assert!(s.covers(ms(0), ms(100)) && !s.covers(ms(0), ms(200)));
        // Nothing moves before 0 or after 100 ms: the span is the readings'.
        assert_eq!(
            s.active_span(Dir::Rx, (ms(0), ms(300)), Duration::from_millis(10)),
            Some((ms(0), ms(100)))
        );
        let w = s.window_rates(
            Dir::Rx,
            (ms(0), ms(300)),
            Duration::from_millis(50),
            Duration::from_millis(10),
            66,
        );
        assert_eq!(w.len(), 6);
        assert!(w.iter().all(|x| (x - r).abs() < 1.0), "{w:?}");
    }
}
