//! How a point's trials fold into a [`PointResult`]: the [`Tally`] of both sides' counters
//! that every pattern shares, and the estimates (means, confidence intervals, distributions)
//! the patterns build their figures with.

use netsweep_model::results::{
    Distribution, Estimate, Placement, PointResult, SideTotals, StopReason,
};
use netsweep_model::spec::{RunSpec, Transport};
use netsweep_model::stats::{ci95, LatencyHistogram, RELATIVE_RESOLUTION};
use netsweep_proto::messages::SideCounters;
use std::time::Instant;

/// What a point's timed trials add up to on both sides, whatever the pattern.
#[derive(Debug)]
pub struct Tally {
    started: Instant,
    /// The client's counters summed over the timed trials.
    pub client: SideCounters,
    /// The server's counters summed over the timed trials.
    pub server: SideCounters,
    placement: Placement,
    trials: u32,
    wall_ns: u64,
    /// Notes for the point, in the order they arose.
    pub notes: Vec<String>,
}

impl Tally {
    /// An empty tally for a point that started at `started`.
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            client: SideCounters::default(),
            server: SideCounters::default(),
            placement: Placement::default(),
            trials: 0,
            wall_ns: 0,
            notes: Vec::new(),
        }
    }

    /// Adds one timed trial; `server_timeout` is the note to keep if the server timed out.
    pub fn add(
        &mut self,
        client: &SideCounters,
        server: &SideCounters,
        wall_ns: u64,
        server_timeout: &str,
    ) {
        add(&mut self.client, client);
        add(&mut self.server, server);
        self.trials += 1;
        let moved = client.cpu_migrations.unwrap_or(0) + server.cpu_migrations.unwrap_or(0);
        self.placement.observe(cpus(client), cpus(server), moved);
        self.wall_ns += wall_ns;
        if server.timed_out {
            self.notes.push(server_timeout.into());
        }
    }

    /// The timed trials' wall time so far, summed, ns.
    pub fn wall_ns(&self) -> u64 {
        self.wall_ns
    }

    /// The point with every field the patterns share; the pattern fills in its own.
    /// `moved` gives the bytes each side's service demand is counted over (client, server).
    pub fn point(
        self,
        spec: &RunSpec,
        size: u64,
        repetitions: u64,
        throughput: Estimate,
        stop_reason: StopReason,
        moved: (u64, u64),
    ) -> PointResult {
        let achieved = throughput.relative_ci().and_then(finite);
        PointResult {
            size,
            trials: throughput.trials,
            repetitions,
            elapsed_ns: self.started.elapsed().as_nanos() as u64,
            throughput_mbps: throughput,
            latency: None,
            crr: None,
            sender_mbps: None,
            receiver_mbps: None,
            loss: None,
            reverse: None,
            directions: None,
            rate: None,
            flows: None,
            client: totals(&self.client, self.wall_ns, moved.0, self.trials),
            server: totals(&self.server, self.wall_ns, moved.1, self.trials),
            precision_target: spec.precision,
            precision_met: achieved.is_some_and(|a| a <= spec.precision),
            precision_achieved: achieved,
            stop_reason,
            notes: with_drops_note(
                with_placement_note(self.notes, &self.placement),
                &self.client,
                &self.server,
                spec.transport,
            ),
            placement: self.placement,
            window: None,
            background: Vec::new(),
            timeline: Vec::new(),
        }
    }
}

fn cpus(c: &SideCounters) -> [Option<u32>; 2] {
    [c.cpu_at_start, c.cpu_at_end]
}

fn with_placement_note(mut notes: Vec<String>, p: &Placement) -> Vec<String> {
    if p.mixed() {
        notes.push(format!(
            "placement varied: both ends shared a CPU in {} of {} trials, {} moves between CPUs \
             mid-trial (pin with --cpu to compare like with like)",
            p.same_cpu_trials, p.observed_trials, p.migrations
        ));
    }
    notes
}

/// Names the receive sockets that dropped datagrams themselves (a full buffer): part of the
/// loss that is the receiver's, not the path's, and what `--rcvbuf` addresses (an AF_XDP
/// socket's rings have a fixed size: there the receiver must keep up).
fn with_drops_note(
    mut notes: Vec<String>,
    client: &SideCounters,
    server: &SideCounters,
    transport: Transport,
) -> Vec<String> {
    let remedy = if transport == Transport::Xdp {
        "its AF_XDP rings were full: the receiver did not keep up; pin it with --cpu"
    } else {
        "a larger --rcvbuf may help"
    };
    for (side, c) in [("server", server), ("client", client)] {
        if let Some(n) = c.socket_drops.filter(|n| *n > 0) {
            notes.push(format!(
                "receive buffer overflowed: the {side}'s socket dropped {n} datagram{} of the \
                 loss ({remedy})",
                if n == 1 { "" } else { "s" }
            ));
        }
    }
    notes
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Mbit/s (10^6 bit/s) for `bytes` moved in `ns` nanoseconds.
pub fn mbps(bytes: f64, ns: f64) -> f64 {
    if ns <= 0.0 {
        0.0
    } else {
        bytes * 8.0 * 1e3 / ns
    }
}

/// Mbit/s for `bytes` moved in `ns` nanoseconds, from integer counters.
pub fn bits_per_ns_to_mbps(bytes: u64, ns: u64) -> f64 {
    mbps(bytes as f64, ns as f64)
}

fn add(sum: &mut SideCounters, c: &SideCounters) {
    sum.bytes_sent += c.bytes_sent;
    sum.bytes_received += c.bytes_received;
    sum.messages_sent += c.messages_sent;
    sum.messages_received += c.messages_received;
    sum.send_calls += c.send_calls;
    sum.recv_calls += c.recv_calls;
    sum.active_ns += c.active_ns;
    sum.cpu_user_ns += c.cpu_user_ns;
    sum.cpu_sys_ns += c.cpu_sys_ns;
    // Busy fractions are averaged by the caller's wall time; keep a weighted sum here.
    sum.system_busy_ppm += c.system_busy_ppm;
    sum.timed_out |= c.timed_out;
    sum.zerocopy_completions += c.zerocopy_completions;
    sum.zerocopy_copied += c.zerocopy_copied;
    sum.tcp_retransmits = add_opt(sum.tcp_retransmits, c.tcp_retransmits);
    sum.tcp_dsacks = add_opt(sum.tcp_dsacks, c.tcp_dsacks);
    sum.tcp_busy_us = add_opt(sum.tcp_busy_us, c.tcp_busy_us);
    sum.tcp_rwnd_limited_us = add_opt(sum.tcp_rwnd_limited_us, c.tcp_rwnd_limited_us);
    sum.tcp_sndbuf_limited_us = add_opt(sum.tcp_sndbuf_limited_us, c.tcp_sndbuf_limited_us);
    crate::kernel::add(&mut sum.kernel, &c.kernel);
    sum.socket_drops = add_opt(sum.socket_drops, c.socket_drops);
    sum.send_errors.add(&c.send_errors);
    sum.arrival.add(&c.arrival);
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

/// One side's totals over `trials` timed trials lasting `wall_ns` in all.
fn totals(c: &SideCounters, wall_ns: u64, bytes_moved: u64, trials: u32) -> SideTotals {
    let cpu = (c.cpu_user_ns + c.cpu_sys_ns) as f64;
    let trials = trials.max(1) as f64;
    SideTotals {
        bytes_sent: c.bytes_sent,
        bytes_received: c.bytes_received,
        messages_sent: c.messages_sent,
        messages_received: c.messages_received,
        send_calls: c.send_calls,
        recv_calls: c.recv_calls,
        cpu_user_ns: c.cpu_user_ns,
        cpu_sys_ns: c.cpu_sys_ns,
        cpu_utilisation: if wall_ns > 0 {
            cpu / wall_ns as f64
        } else {
            0.0
        },
        system_busy: c.system_busy_ppm as f64 / trials / 1e6,
        zerocopy_completions: c.zerocopy_completions,
        zerocopy_copied: c.zerocopy_copied,
        tcp_retransmits: c.tcp_retransmits,
        tcp_dsacks: c.tcp_dsacks,
        tcp_busy_us: c.tcp_busy_us,
        tcp_rwnd_limited_us: c.tcp_rwnd_limited_us,
        tcp_sndbuf_limited_us: c.tcp_sndbuf_limited_us,
        kernel: netsweep_model::kernel::KernelCounts::from_map(&c.kernel),
        socket_drops: c.socket_drops,
        send_errors: c.send_errors,
        service_demand_us_per_kb: if bytes_moved > 0 {
            (cpu / 1e3) / (bytes_moved as f64 / 1024.0)
        } else {
            0.0
        },
    }
}

/// Pingpong throughput from per-trial round-trip times: bytes ÷ (grand mean RTT / 2), with
/// the relative CI of the mean time carried over (first-order, delta method); no CI from
/// fewer than two trials. The times are read from a latency histogram, which resolves them to
/// [`RELATIVE_RESOLUTION`]: the interval is never narrower than that, so trials whose medians
/// fell in one bucket do not claim a ±0.0% precision the histogram cannot see.
pub fn rate_from_times(size: f64, rtts: &[f64], best_rtt: f64) -> Estimate {
    if rtts.is_empty() {
        return Estimate::default();
    }
    let mean_rtt = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let mean = mbps(size, mean_rtt / 2.0);
    Estimate {
        mean,
        ci95: ci95(rtts).map(|c| mean * c.relative.max(RELATIVE_RESOLUTION)),
        max: mbps(size, best_rtt / 2.0),
        trials: rtts.len() as u32,
    }
}

/// Mean, 95% CI half-width and maximum of per-trial samples.
pub fn estimate(samples: &[f64]) -> Estimate {
    let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    Estimate {
        mean,
        ci95: ci95(samples).map(|c| c.half_width),
        max: samples.iter().copied().fold(0.0, f64::max),
        trials: samples.len() as u32,
    }
}

/// A distribution from the histogram, scaled by `k` (1 for RTT, 0.5 for RTT/2); the CI of
/// the mean comes from the per-trial means (batch means), which is honest under correlation.
pub fn distribution(h: &LatencyHistogram, trial_means: &[f64], k: f64) -> Distribution {
    if h.count() == 0 {
        return Distribution::default();
    }
    Distribution {
        count: h.count(),
        min: h.min() as f64 * k,
        mean: h.mean() * k,
        p50: h.value_at_quantile(0.5) as f64 * k,
        p90: h.value_at_quantile(0.9) as f64 * k,
        p99: h.value_at_quantile(0.99) as f64 * k,
        p999: h.value_at_quantile(0.999) as f64 * k,
        max: h.max() as f64 * k,
        stddev: h.stddev() * k,
        ci95: ci95(trial_means).map(|c| c.half_width * k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pingpong_rate_from_mean_times() {
        // 1000 bytes in 10 µs RTT: 1000 B per 5 µs one way = 1600 Mbit/s.
        let e = rate_from_times(1000.0, &[10_000.0, 10_000.0, 10_000.0], 10_000.0);
        assert!((e.mean - 1600.0).abs() < 1e-9);
        // Identical trial medians: the histogram's resolution, not a zero-width interval.
        assert_eq!(e.ci95, Some(1600.0 * RELATIVE_RESOLUTION));
        assert_eq!(e.trials, 3);
        assert_eq!(rate_from_times(1000.0, &[], f64::INFINITY).trials, 0);
        // One trial: a mean, but no interval — never a zero-width one.
        let one = rate_from_times(1000.0, &[10_000.0], 10_000.0);
        assert_eq!((one.trials, one.ci95), (1, None));
        assert_eq!(estimate(&[5.0]).ci95, None);
    }
}
