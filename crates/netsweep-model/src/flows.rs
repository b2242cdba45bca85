//! The figures of a `--flows` point: per-flow counts of both sides, the aggregate, Jain's
//! fairness index over the flows, the start skew across data threads and each thread's CPU —
//! and the arithmetic behind them, on values only.

use crate::spec::{Api, Pattern, RunSpec, Transport};
use netsweep_proto::messages::{FlowCounters, ThreadCounters};
use serde::{Deserialize, Serialize};

/// Most flows one run may ask for.
pub const MAX_FLOWS: u32 = 4096;

/// A point measured over several concurrent flows (`--flows N`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct FlowFigures {
    /// Flows in the point.
    pub count: u32,
    /// Aggregate over all flows: Mbit/s received (stream) or transactions per second
    /// (pingpong), over the point's timed trials.
    pub aggregate: f64,
    /// What `aggregate` and `per_flow[].figure` count: `mbps`, `transactions_per_s` or
    /// `requests_per_s` (rate: requests answered per second; the aggregate is the delivered rate).
    pub unit: String,
    /// Jain's fairness index of the per-flow figures: (Σx)² / (n·Σx²), 1 when every flow got
    /// the same, 1/n when one flow got everything.
    pub fairness: f64,
    /// The lowest per-flow figure.
    pub min_flow: f64,
    /// The highest per-flow figure.
    pub max_flow: f64,
    /// The client's start skew: latest minus earliest first send across its data threads,
    /// nanoseconds; the largest over the timed trials.
    pub client_start_skew_ns: u64,
    /// The server's start skew (first receive, or first echo), nanoseconds; the largest over
    /// the timed trials.
    pub server_start_skew_ns: u64,
    /// Each flow, in flow order.
    pub per_flow: Vec<FlowFigure>,
    /// The client's data threads, summed over the timed trials.
    pub client_threads: Vec<ThreadCounters>,
    /// The server's data threads, summed over the timed trials.
    pub server_threads: Vec<ThreadCounters>,
}

/// One flow's counts on both sides over a point's timed trials, and its figure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct FlowFigure {
    /// Mbit/s received (stream) or transactions per second (pingpong).
    pub figure: f64,
    /// What the client counted on this flow.
    pub client: FlowCounters,
    /// What the server counted on this flow.
    pub server: FlowCounters,
}

/// Checks `--flows` and `--threads` of `spec` against what the flows data path supports;
/// the error names what works.
pub fn check(spec: &RunSpec) -> Result<(), String> {
    if spec.flows == 0 || spec.flows > MAX_FLOWS {
        return Err(format!(
            "--flows {} is out of range: give 1 to {MAX_FLOWS}",
            spec.flows
        ));
    }
    if spec.flows == 1 {
        return Ok(());
    }
    const WORKS: &str = "--flows works with -p stream, pingpong or rate, -t tcp, mptcp or \
                         unix-stream, --api basic, client to server";
    let what = if !matches!(
        spec.pattern,
        Pattern::Stream | Pattern::Pingpong | Pattern::Rate
    ) {
        format!("the {} pattern", spec.pattern)
    } else if spec.interval_ns != 0 {
        "--interval (timelines are per single flow)".to_string()
    } else if !matches!(
        spec.transport,
        Transport::Tcp | Transport::Mptcp | Transport::UnixStream
    ) {
        format!("the {} transport", spec.transport)
    } else if spec.api != Api::Basic {
        format!("--api {}", spec.api.name())
    } else if spec.reverse {
        "--reverse".to_string()
    } else {
        return Ok(());
    };
    Err(format!(
        "--flows {} cannot run with {what} yet: {WORKS}",
        spec.flows
    ))
}

/// Jain's fairness index (Σx)² / (n·Σx²) of `xs`; `None` for no flows or all zeros.
pub fn jain(xs: &[f64]) -> Option<f64> {
    let n = xs.len() as f64;
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    // Rounding can put equal flows a hair above 1: the index is at most 1 by definition.
    (n > 0.0 && squares > 0.0).then(|| (sum * sum / (n * squares)).min(1.0))
}

/// The start skew of threads whose first sends happened at `firsts` (nanoseconds on one
/// clock): the latest minus the earliest; 0 for fewer than two.
pub fn start_skew(firsts: &[u64]) -> u64 {
    match (firsts.iter().min(), firsts.iter().max()) {
        (Some(lo), Some(hi)) => hi - lo,
        _ => 0,
    }
}

/// Adds `b` to `a`, flow by flow (`a` grows to `b`'s length).
pub fn add_flows(a: &mut Vec<FlowCounters>, b: &[FlowCounters]) {
    if a.len() < b.len() {
        a.resize(b.len(), FlowCounters::default());
    }
    for (x, y) in a.iter_mut().zip(b) {
        x.bytes_sent += y.bytes_sent;
        x.bytes_received += y.bytes_received;
        x.messages_sent += y.messages_sent;
        x.messages_received += y.messages_received;
    }
}

/// Adds `b` to `a`, thread by thread (`a` grows to `b`'s length).
pub fn add_threads(a: &mut Vec<ThreadCounters>, b: &[ThreadCounters]) {
    if a.len() < b.len() {
        a.resize(b.len(), ThreadCounters::default());
    }
    for (x, y) in a.iter_mut().zip(b) {
        x.flows = y.flows;
        x.cpu_user_ns += y.cpu_user_ns;
        x.cpu_sys_ns += y.cpu_sys_ns;
    }
}

impl FlowFigures {
    /// The figures from per-flow figures (`figure` of each, flow order) and counts; the
    /// aggregate is their sum.
    pub fn new(unit: &str, per_flow: Vec<FlowFigure>) -> Self {
        let xs: Vec<f64> = per_flow.iter().map(|f| f.figure).collect();
        Self {
            count: per_flow.len() as u32,
            aggregate: xs.iter().sum(),
            unit: unit.into(),
            fairness: jain(&xs).unwrap_or(0.0),
            min_flow: xs.iter().copied().reduce(f64::min).unwrap_or(0.0),
            max_flow: xs.iter().copied().fold(0.0, f64::max),
            per_flow,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_flows_and_one_over_n_for_a_single_winner() {
        assert_eq!(jain(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(jain(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        // (1+2+3)² / (3 · 14) = 36/42
        let j = jain(&[1.0, 2.0, 3.0]).unwrap();
        assert!((j - 36.0 / 42.0).abs() < 1e-12, "{j}");
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }

    #[test]
    fn start_skew_is_latest_minus_earliest() {
        assert_eq!(start_skew(&[1_000, 1_250, 1_100]), 250);
        assert_eq!(start_skew(&[7]), 0);
        assert_eq!(start_skew(&[]), 0);
    }

    #[test]
    fn flows_and_threads_add_element_wise() {
        let one = FlowCounters {
            bytes_sent: 10,
            bytes_received: 1,
            messages_sent: 2,
            messages_received: 3,
        };
        let mut sum = Vec::new();
        add_flows(&mut sum, &[one, one]);
        add_flows(&mut sum, &[one, one]);
        assert_eq!(sum.len(), 2);
        assert_eq!((sum[1].bytes_sent, sum[1].messages_received), (20, 6));
        let t = ThreadCounters {
            flows: 3,
            cpu_user_ns: 5,
            cpu_sys_ns: 7,
        };
        let mut ts = Vec::new();
        add_threads(&mut ts, &[t]);
        add_threads(&mut ts, &[t]);
        assert_eq!(
            ts,
            vec![ThreadCounters {
                flows: 3,
                cpu_user_ns: 10,
                cpu_sys_ns: 14
            }]
        );
    }

    #[test]
    fn figures_sum_the_flows_and_judge_their_fairness() {
        let flow = |x| FlowFigure {
            figure: x,
            ..Default::default()
        };
        let f = FlowFigures::new("mbps", vec![flow(100.0), flow(300.0)]);
        assert_eq!((f.count, f.aggregate), (2, 400.0));
        assert_eq!((f.min_flow, f.max_flow), (100.0, 300.0));
        assert!((f.fairness - 0.8).abs() < 1e-12, "{}", f.fairness);
    }

    use crate::spec::Family;

    #[test]
    fn flows_are_refused_where_not_built_with_what_works() {
        let mut s = RunSpec::new(Transport::Tcp, Pattern::Stream, Family::Ipv4);
        s.sizes = vec![1024];
        s.flows = 4;
        assert_eq!(check(&s), Ok(()));
        assert_eq!(
            (s.session_setup().flows, s.session_setup().flow_count()),
            (4, 4)
        );
        for (change, what) in [
            (
                (Transport::Tcp, Pattern::Crr, Api::Basic, false),
                "crr pattern",
            ),
            (
                (Transport::Tcp, Pattern::Bidir, Api::Basic, false),
                "bidir pattern",
            ),
            (
                (Transport::Udp, Pattern::Stream, Api::Basic, false),
                "udp transport",
            ),
            (
                (Transport::Tcp, Pattern::Stream, Api::Zerocopy, false),
                "--api zerocopy",
            ),
            (
                (Transport::Tcp, Pattern::Stream, Api::Basic, true),
                "--reverse",
            ),
        ] {
            let mut t = s.clone();
            (t.transport, t.pattern, t.api, t.reverse) = change;
            let e = check(&t).unwrap_err();
            assert!(e.contains(what) && e.contains("works with"), "{e}");
        }
        s.flows = 0;
        assert!(check(&s).unwrap_err().contains("out of range"));
        s.flows = 1;
        s.transport = Transport::Udp;
        s.sizes = vec![64];
        assert_eq!(check(&s), Ok(()));
        // A spec saved before --flows existed loads as one flow.
        let mut v = serde_json::to_value(&s).unwrap();
        assert!(v.get("flows").is_none());
        v.as_object_mut().unwrap().remove("threads");
        let back: RunSpec = serde_json::from_value(v).unwrap();
        assert_eq!((back.flows, back.threads), (1, 0));
    }
}
