//! The figures of what a message cost and where datagrams went: CPU time per message on each
//! side (the cost of a layer where the sender is CPU-bound), the receiver's goodput over the
//! sender's window, loss split by where the kernel counted it (the receiving socket, leaving
//! the sender, elsewhere), and IP fragments per message from the namespaces' own counters
//! (`kernel` in each side's totals); how busy the host was; and how concurrent clients
//! shared the server (per client, and Jain's index over them).

use super::{Combine, Metric, MetricUnit};
use crate::results::{PointResult, SideTotals};
use crate::spec::Pattern;

const STREAMS: &[Pattern] = &[Pattern::Stream, Pattern::Bidir];

fn cpu_ns(s: &SideTotals) -> f64 {
    (s.cpu_user_ns + s.cpu_sys_ns) as f64
}

fn per(n: f64, d: u64) -> Option<f64> {
    (d > 0).then(|| n / d as f64)
}

/// A kernel counter of one side per message the client sent.
fn per_sent(p: &PointResult, side: &SideTotals, field: &str) -> Option<f64> {
    per(side.kernel.get(field) as f64, p.client.messages_sent)
}

/// Datagrams the client sent in the point (the loss figures' denominator).
fn sent(p: &PointResult) -> Option<u64> {
    p.loss.as_ref().map(|l| l.sent).filter(|n| *n > 0)
}

fn loss_socket(p: &PointResult) -> Option<f64> {
    per(p.server.socket_drops? as f64, sent(p)?)
}

/// A datagram a full qdisc or device queue refused is counted by the sender's kernel as a
/// send buffer error (UDP without IP_RECVERR: the send itself reports success).
fn loss_qdisc(p: &PointResult) -> Option<f64> {
    per(p.client.kernel.get("Udp.SndbufErrors") as f64, sent(p)?)
}

/// The busiest of the lab's path emulators over the run, as a share of one CPU (the
/// emulators' window records each one's `cpu_utilisation`).
fn emulator_util(lab: Option<&serde_json::Value>) -> Option<f64> {
    lab?.get("emulators")?
        .as_array()?
        .iter()
        .filter_map(|e| e.get("cpu_utilisation")?.as_f64())
        .reduce(f64::max)
}

/// The bit rate the lab's path emulators released over the run, in the busiest direction of
/// the busiest one: its own count of frame bytes (the window's `released_bytes`) over the
/// window's time (`window_s`) — an independent counter of what the link carried, gaps
/// between points included.
fn emulated_mbps(lab: Option<&serde_json::Value>) -> Option<f64> {
    lab?.get("emulators")?
        .as_array()?
        .iter()
        .filter_map(|e| {
            let secs = e.get("window_s")?.as_f64().filter(|s| *s > 0.0)?;
            e.get("directions")?
                .as_array()?
                .iter()
                .filter_map(|d| d.get("counters")?.get("released_bytes")?.as_u64())
                .max()
                .map(|bytes| bytes as f64 * 8.0 / secs / 1e6)
        })
        .reduce(f64::max)
}

/// The cost and whereabouts figures (see the module's text).
pub const COST_METRICS: &[Metric] = &[
    Metric {
        name: "client_cpu_per_msg",
        label: "client CPU time per message (pingpong: per round trip)",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| per(cpu_ns(&p.client), p.client.messages_sent),
    },
    Metric {
        name: "server_cpu_per_msg",
        label: "server CPU time per message received",
        unit: MetricUnit::Nanos,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| per(cpu_ns(&p.server), p.server.messages_received),
    },
    Metric {
        name: "system_busy",
        label: "the host's CPUs busy during the trials (all CPUs)",
        unit: MetricUnit::Fraction,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| Some(p.client.system_busy),
    },
    Metric {
        name: "throughput_per_client",
        label: "throughput per client",
        unit: MetricUnit::Mbps,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| Some(p.throughput_mbps.mean),
    },
    Metric {
        name: "clients_fairness",
        label: "Jain's fairness index over the clients' throughput",
        unit: MetricUnit::Plain,
        combine: Combine::Jain,
        patterns: &[],
        rpm: None,
        read: |p, _| Some(p.throughput_mbps.mean),
    },
    Metric {
        name: "delivered_mbps",
        label: "receiver goodput over the sender's window (sender rate × bytes received ÷ sent)",
        unit: MetricUnit::Mbps,
        combine: Combine::Sum,
        patterns: STREAMS,
        rpm: None,
        read: |p, c| {
            if c.spec.reverse {
                return None;
            }
            let s = p.sender_mbps.as_ref()?.mean;
            per(s * p.server.bytes_received as f64, p.client.bytes_sent)
        },
    },
    Metric {
        name: "loss_socket",
        label: "loss at the receiving socket (its buffer full: sk_drops)",
        unit: MetricUnit::Fraction,
        combine: Combine::Mean,
        patterns: STREAMS,
        rpm: None,
        read: |p, _| loss_socket(p),
    },
    Metric {
        name: "loss_qdisc",
        label: "loss leaving the sender (a full qdisc or device queue: Udp SndbufErrors)",
        unit: MetricUnit::Fraction,
        combine: Combine::Mean,
        patterns: STREAMS,
        rpm: None,
        read: |p, _| loss_qdisc(p),
    },
    Metric {
        name: "loss_other",
        label: "loss elsewhere (the path, a lost fragment, in flight at a trial's end)",
        unit: MetricUnit::Fraction,
        combine: Combine::Mean,
        patterns: STREAMS,
        rpm: None,
        read: |p, _| {
            let l = p.loss.as_ref()?.ratio;
            Some((l - loss_socket(p).unwrap_or(0.0) - loss_qdisc(p).unwrap_or(0.0)).max(0.0))
        },
    },
    Metric {
        name: "frags_per_msg",
        label: "IP fragments the sender created per message",
        unit: MetricUnit::Plain,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| per_sent(p, &p.client, "Ip.FragCreates"),
    },
    Metric {
        name: "reasm_per_msg",
        label: "IP fragments the receiver reassembled per message sent",
        unit: MetricUnit::Plain,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| per_sent(p, &p.server, "Ip.ReasmReqds"),
    },
    Metric {
        name: "reasm_per_seg",
        label: "IP fragments the receiver reassembled per TCP segment it received",
        unit: MetricUnit::Plain,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| {
            per(
                p.server.kernel.get("Ip.ReasmReqds") as f64,
                p.server.kernel.get("Tcp.InSegs"),
            )
        },
    },
    Metric {
        name: "client_util",
        label: "the client's CPU use during the trials (1 = a whole CPU)",
        unit: MetricUnit::Plain,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |p, _| Some(p.client.cpu_utilisation),
    },
    Metric {
        name: "emulator_util",
        label: "the busiest path emulator's CPU use over the run (1 = a whole CPU)",
        unit: MetricUnit::Plain,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |_, c| emulator_util(c.lab),
    },
    Metric {
        name: "emulated_mbps",
        label: "the bit rate the busiest path emulator released over the run, in frames (its own count)",
        unit: MetricUnit::Mbps,
        combine: Combine::Mean,
        patterns: &[],
        rpm: None,
        read: |_, c| emulated_mbps(c.lab),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KernelCounts;
    use std::collections::BTreeMap;

    #[test]
    fn the_emulated_rate_is_the_busiest_directions_bytes_over_the_window() {
        let lab = serde_json::json!({"emulators": [
            {"window_s": 2.0, "directions": [
                {"counters": {"released_bytes": 25_000_000u64}},
                {"counters": {"released_bytes": 1_000_000u64}}]},
            {"window_s": 2.0, "directions": [
                {"counters": {"released_bytes": 5_000_000u64}}]},
        ]});
        // 25 MB in 2 s: 100 Mbit/s.
        assert_eq!(emulated_mbps(Some(&lab)), Some(100.0));
        // A window without its time (results from before it was recorded): no figure.
        let old = serde_json::json!({"emulators": [
            {"directions": [{"counters": {"released_bytes": 25_000_000u64}}]}]});
        assert_eq!(emulated_mbps(Some(&old)), None);
        assert_eq!(emulated_mbps(None), None);
    }

    #[test]
    fn loss_splits_by_where_the_kernel_counted_it() {
        let mut p: PointResult = serde_json::from_value(serde_json::json!({
            "size": 3000, "trials": 1, "repetitions": 1000, "elapsed_ns": 1_000_000,
            "throughput_mbps": {"mean": 1.0, "ci95": 0.0, "max": 1.0, "trials": 1},
            "client": {"messages_sent": 1000}, "server": {"socket_drops": 100},
            "loss": {"sent": 1000, "lost": 300, "ratio": 0.3},
            "precision_target": 0.02, "precision_met": true, "stop_reason": "precision",
        }))
        .unwrap();
        p.client.kernel = KernelCounts::from_map(&BTreeMap::from([
            ("Udp.SndbufErrors".to_string(), 150u64),
            ("Ip.FragCreates".to_string(), 2000),
        ]));
        let read = |p: &PointResult, n: &str| {
            let m = COST_METRICS.iter().find(|m| m.name == n).unwrap();
            let spec = crate::spec::RunSpec::new(
                crate::spec::Transport::Udp,
                Pattern::Stream,
                crate::spec::Family::Ipv4,
            );
            (m.read)(
                p,
                &super::super::PointContext {
                    spec: &spec,
                    link: None,
                    lab: None,
                },
            )
        };
        assert_eq!(read(&p, "loss_socket"), Some(0.1));
        assert_eq!(read(&p, "loss_qdisc"), Some(0.15));
        assert!((read(&p, "loss_other").unwrap() - 0.05).abs() < 1e-12);
        assert_eq!(read(&p, "frags_per_msg"), Some(2.0));
        // No datagrams sent: no loss figure, not a division by zero.
        p.loss = None;
        assert_eq!(read(&p, "loss_socket"), None);
    }

    #[test]
    fn clients_combine_into_a_mean_and_jains_index() {
        let text = include_str!("../../../../../tests/data/tcp-pingpong.json");
        let one = |mbps: f64| {
            let mut r = crate::results::load(text).unwrap();
            r.points.truncate(1);
            r.points[0].throughput_mbps.mean = mbps;
            // Both clients measured over the same second.
            r.points[0].window = Some(crate::window::MeasuredWindow {
                from_unix_ns: 0,
                to_unix_ns: 1_000_000_000,
                trials_ns: 0,
            });
            r
        };
        let (a, b) = (one(30.0), one(10.0));
        let mut obs = crate::experiment::Observations::new(1, 1);
        obs.add(0, 1, &a);
        obs.add(0, 1, &b);
        let m = |n: &str| COST_METRICS.iter().find(|m| m.name == n).unwrap();
        assert_eq!(
            obs.value(0, 1, m("throughput_per_client"), None),
            Some(20.0)
        );
        // (30 + 10)² ÷ (2 × (900 + 100)) = 0.8.
        let j = obs.value(0, 1, m("clients_fairness"), None).unwrap();
        assert!((j - 0.8).abs() < 1e-12, "{j}");
    }
}
