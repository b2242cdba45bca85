//! `netsweep run iperf3://HOST[:PORT]`: netsweep's sweep of stream points against an unmodified
//! `iperf3 -s`, over iperf3's own protocol (crates/netsweep-iperf3). Each trial is one whole
//! iperf3 test (at least 1 s: a test carries a control exchange and a drain before TEST_END);
//! a point takes trials until the precision target or its budget, as every netsweep point.
//! The iperf3 server's byte counts and CPU are the point's server side. What iperf3 cannot do
//! (pingpong, crr, bidir, other transports and apis, per-trial CPU of its data path) is refused.

use crate::output::sink::Sink;
use netsweep_engine::engine::RunSink;
use netsweep_engine::hostinfo;
use netsweep_engine::point::estimate;
use netsweep_iperf3::{run_test, Bound, Iperf3Error, TestOutcome, TestParams, DEFAULT_PORT};
use netsweep_model::results::{
    Granted, Loss, PointResult, RunResult, RunStatus, SideTotals, StopReason, ToolInfo, SCHEMA,
    SCHEMA_VERSION,
};
use netsweep_model::spec::{Api, Pattern, RunSpec, Transport};
use netsweep_model::{stats, time};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Shortest iperf3 trial: the drain and settle before TEST_END stay a small share of it.
pub const MIN_TRIAL: Duration = Duration::from_secs(1);
/// The scheme of an iperf3 peer.
pub const SCHEME: &str = "iperf3://";

/// The iperf3 server of `url` (`iperf3://HOST[:PORT]`, port 5201 by default).
pub fn resolve(url: &str) -> Result<SocketAddr, String> {
    let rest = url.strip_prefix(SCHEME).unwrap_or(url);
    let with_port = if rest.ends_with(']') || !rest.contains(':') || rest.matches(':').count() > 1 {
        if rest.matches(':').count() > 1 && !rest.starts_with('[') {
            format!("[{rest}]:{DEFAULT_PORT}")
        } else {
            format!("{rest}:{DEFAULT_PORT}")
        }
    } else {
        rest.to_string()
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {url}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url} resolved to no address"))
}

/// Why iperf3 cannot run `spec`, if it cannot; the message names what it can.
pub fn check(spec: &RunSpec) -> Result<(), String> {
    if spec.pattern != Pattern::Stream {
        return Err(format!(
            "an iperf3 server runs streams only, not {} (the default pattern is pingpong): \
             add -p stream (with --reverse for the server sending)",
            spec.pattern
        ));
    }
    if !matches!(spec.transport, Transport::Tcp | Transport::Udp) {
        return Err(format!(
            "an iperf3 server speaks tcp and udp, not {}",
            spec.transport
        ));
    }
    if spec.api != Api::Basic {
        return Err("with an iperf3 peer only --api basic applies (iperf3 chooses its own)".into());
    }
    if spec.interval_ns != 0 {
        return Err(
            "--interval is netsweep's own timeline: an iperf3 server reports whole tests only; \
             drop --interval"
                .into(),
        );
    }
    let refused = unhonoured(spec);
    if !refused.is_empty() {
        return Err(format!(
            "against an iperf3 server netsweep cannot apply {}: drop {}",
            refused.join(", "),
            if refused.len() == 1 { "it" } else { "them" }
        ));
    }
    Ok(())
}

/// The options of `spec` a run against an iperf3 server cannot honour, by the flag that
/// asked for each: refused, never recorded in the results as if they had applied. iperf3's
/// protocol carries none of netsweep's flows, background load, offered loads or refinement,
/// and this client sets no socket option on its data connections (nor can it on the
/// server's). TCP_NODELAY, which `run` sets on a TCP path by default, and the default
/// page-aligned buffers are not asked for: the caller clears them ([`honest_spec`]).
pub fn unhonoured(spec: &RunSpec) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut no = |asked: bool, flag: &str| {
        if asked {
            v.push(flag.to_string());
        }
    };
    no(spec.flows > 1, "--flows");
    no(spec.threads != 0, "--threads");
    no(!spec.background.is_empty(), "--background");
    no(spec.refine, "--refine");
    no(spec.load.is_some(), "--rates");
    for k in [&spec.client_knobs, &spec.server_knobs] {
        no(k.sndbuf.is_some(), "--sndbuf");
        no(k.rcvbuf.is_some(), "--rcvbuf");
        no(k.buffer_offset.is_some_and(|o| o != 0), "--offset");
        no(k.batch.is_some(), "--batch");
        no(k.congestion_control.is_some(), "--cc");
        no(k.tos.is_some(), "--tos/--dscp");
        no(k.priority.is_some(), "--priority");
        no(k.no_check.is_some(), "--no-check");
        no(k.busy_poll.is_some(), "--busy-poll");
        no(k.pmtu.is_some(), "--pmtu");
        no(k.cpu.is_some(), "--cpu");
        no(k.cache_pool.is_some(), "--invalidate-cache");
        no(k.interface.is_some(), "--interface");
        no(!k.extra.is_empty(), "--knob");
    }
    let mut seen = std::collections::BTreeSet::new();
    v.retain(|f| seen.insert(f.clone()));
    v
}

/// `spec` as a run against an iperf3 server carries it out: no TCP_NODELAY and no buffer
/// offset are set on either side (nothing is), so the results do not say they were.
pub fn honest_spec(mut spec: RunSpec) -> RunSpec {
    for k in [&mut spec.client_knobs, &mut spec.server_knobs] {
        k.nodelay = None;
        if k.buffer_offset == Some(0) {
            k.buffer_offset = None;
        }
    }
    spec
}

/// The default sizes against iperf3: a coarse schedule (each point is several whole tests).
pub fn default_sizes(t: Transport) -> Vec<u64> {
    match t {
        Transport::Udp => vec![512, 1472, 8192, 32768, 65507],
        _ => vec![1024, 4096, 16384, 65536, 131072, 1 << 20],
    }
}

/// Runs the sweep against the iperf3 server at `addr`; returns the results and the error that
/// stopped it, if any.
pub fn run(
    spec: &RunSpec,
    addr: SocketAddr,
    sink: &mut Sink,
    interrupt: &AtomicBool,
) -> (RunResult, Option<String>) {
    let version = env!("CARGO_PKG_VERSION");
    let mut result = RunResult {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo {
            name: "netsweep".into(),
            version: version.into(),
        },
        started_at: time::rfc3339(SystemTime::now()),
        finished_at: None,
        status: RunStatus::Running,
        message: None,
        spec: spec.clone(),
        peer: format!("{SCHEME}{addr}"),
        client: hostinfo::collect(version),
        server: Default::default(),
        granted: Granted::default(),
        warnings: Vec::new(),
        lab: None,
        points: Vec::new(),
        datagram_totals: None,
        summary: None,
        anomalies: Vec::new(),
        knee: None,
    };
    result.server.tool = "iperf3".into();
    sink.started(&result);
    let run_start = Instant::now();
    let mut error = None;
    let mut served = false;
    for (i, &size) in spec.sizes.iter().enumerate() {
        if interrupt.load(Ordering::SeqCst) {
            error = Some("interrupted".to_string());
            break;
        }
        // Every results file failed: nothing measured from here on would be kept.
        if let Some(why) = sink.stop() {
            error = Some(why);
            break;
        }
        sink.measuring(i, size);
        match point(spec, addr, size, interrupt, &mut served) {
            Ok(p) => {
                result.points.push(p);
                sink.point(&result);
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    result.status = match &error {
        None => RunStatus::Complete,
        Some(e) if e == "interrupted" => RunStatus::Interrupted,
        Some(_) => RunStatus::Failed,
    };
    result.message = error.clone();
    result.finished_at = Some(time::rfc3339(SystemTime::now()));
    netsweep_model::anomaly::annotate(&mut result);
    result.summarise(run_start.elapsed().as_nanos() as u64);
    sink.finished(&result);
    (result, error)
}

/// One trial's figures.
struct Trial {
    sender_mbps: f64,
    receiver_mbps: f64,
    client: SideTotals,
    server: SideTotals,
    lost: Option<u64>,
    jitter_s: Option<f64>,
}

fn mbps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e6
    } else {
        0.0
    }
}

/// The figures of one test. Forward: the client sent for its wall time; the server received
/// what it reports over its own `end_time` less the settle netsweep waited between its
/// kernel's last acknowledgement and TEST_END (the server had everything then). Reverse: the roles swap, and the server's time is
/// its whole `end_time` (it sends until TEST_END).
fn trial(o: &TestOutcome, reverse: bool) -> Trial {
    let c = &o.client;
    let s = o.server.stream();
    let server_bytes = s.bytes.unwrap_or(0);
    let server_secs = s.end_time.unwrap_or(0.0) - s.start_time.unwrap_or(0.0);
    let client_secs = c.wall().as_secs_f64();
    // From the kernel's last acknowledgement to TEST_END the server had nothing left to read.
    let tail = o.test_end_sent.duration_since(c.drained).as_secs_f64();
    let cpu = |pct: Option<f64>| pct.unwrap_or(0.0) / 100.0;
    let mut client = SideTotals {
        cpu_utilisation: c.cpu_util[0] / 100.0,
        tcp_retransmits: c.retransmits,
        ..Default::default()
    };
    let mut server = SideTotals {
        cpu_utilisation: cpu(o.server.cpu_util_total),
        ..Default::default()
    };
    let (sender_mbps, receiver_mbps) = if reverse {
        client.bytes_received = c.bytes;
        client.messages_received = c.messages;
        client.recv_calls = c.calls;
        server.bytes_sent = server_bytes;
        server.messages_sent = s.packets.unwrap_or(0);
        (mbps(server_bytes, server_secs), mbps(c.bytes, client_secs))
    } else {
        client.bytes_sent = c.bytes;
        client.messages_sent = c.messages;
        client.send_calls = c.calls;
        server.bytes_received = server_bytes;
        // iperf3's `packets` is the highest sequence number it received; `errors` the gaps.
        server.messages_received = s
            .packets
            .unwrap_or(0)
            .saturating_sub(s.errors.unwrap_or(0).max(0) as u64);
        (
            mbps(c.bytes, client_secs),
            mbps(server_bytes, (server_secs - tail).max(1e-6)),
        )
    };
    let (lost, jitter_s) = if reverse {
        (c.lost, c.jitter_s)
    } else {
        (s.errors.map(|e| e.max(0) as u64), s.jitter)
    };
    Trial {
        sender_mbps,
        receiver_mbps,
        client,
        server,
        lost,
        jitter_s,
    }
}

fn add(total: &mut SideTotals, t: &SideTotals) {
    total.bytes_sent += t.bytes_sent;
    total.bytes_received += t.bytes_received;
    total.messages_sent += t.messages_sent;
    total.messages_received += t.messages_received;
    total.send_calls += t.send_calls;
    total.recv_calls += t.recv_calls;
    total.cpu_utilisation += t.cpu_utilisation;
    total.tcp_retransmits = match (total.tcp_retransmits, t.tcp_retransmits) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
}

/// Measures one size: whole iperf3 tests until the precision target (at least two) or the
/// point's budget (at least two tests' worth).
fn point(
    spec: &RunSpec,
    addr: SocketAddr,
    size: u64,
    interrupt: &AtomicBool,
    served: &mut bool,
) -> Result<PointResult, String> {
    let udp = spec.transport == Transport::Udp;
    let trial_time = Duration::from_nanos(spec.trial_time_ns).max(MIN_TRIAL);
    let budget = Duration::from_nanos(spec.max_point_time_ns).max(trial_time * 3);
    // With --warmup (the default) the point starts with one test of half the trial time
    // whose figures are discarded, as netsweep's own points start with a warm-up trial.
    let mut warming = spec.warmup;
    let warm_time = trial_time / 2;
    let mut params = TestParams::new(
        udp,
        size as usize,
        Bound::Duration(if warming { warm_time } else { trial_time }),
        spec.reverse,
    );
    params.timeout = Duration::from_nanos(spec.timeout_ns).max(Duration::from_secs(2));
    let start = Instant::now();
    let (mut tx, mut rx) = (Vec::new(), Vec::new());
    let (mut client, mut server) = (SideTotals::default(), SideTotals::default());
    let (mut lost, mut jitter) = (0u64, Vec::new());
    let mut busy_retries = 0;
    let stop_reason = loop {
        if interrupt.load(Ordering::SeqCst) {
            return Err("interrupted".into());
        }
        let o = match run_test(addr, &params) {
            Ok(o) => o,
            // iperf3 serves one test at a time: the previous one may still be closing (it
            // refuses, or closes a connection that arrives while it resets).
            Err(Iperf3Error::Busy(_)) if busy_retries < 20 => {
                busy_retries += 1;
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            Err(Iperf3Error::Closed { doing })
                if busy_retries < 20 && doing.contains("PARAM_EXCHANGE") =>
            {
                busy_retries += 1;
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            // Between tests iperf3 closes its listening socket and opens a new one: a
            // connection in that gap is refused or reset. Once the server has answered.
            Err(Iperf3Error::Connect { source, .. })
                if *served
                    && busy_retries < 20
                    && matches!(
                        source.kind(),
                        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset
                    ) =>
            {
                busy_retries += 1;
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            Err(e) => return Err(format!("iperf3 server {addr}, size {size}: {e}")),
        };
        *served = true;
        if warming {
            warming = false;
            params.bound = Bound::Duration(trial_time);
            continue;
        }
        let t = trial(&o, spec.reverse);
        tx.push(t.sender_mbps);
        rx.push(t.receiver_mbps);
        add(&mut client, &t.client);
        add(&mut server, &t.server);
        lost += t.lost.unwrap_or(0);
        jitter.extend(t.jitter_s);
        let ci = stats::ci95(&rx).map(|c| c.relative);
        if rx.len() >= spec.min_trials.max(2) as usize && ci.is_some_and(|r| r <= spec.precision) {
            break StopReason::Precision;
        }
        if rx.len() >= spec.max_trials.max(2) as usize {
            break StopReason::MaxTrials;
        }
        if rx.len() >= 2 && start.elapsed() + trial_time > budget {
            break StopReason::TimeBudget;
        }
    };
    let n = rx.len() as f64;
    client.cpu_utilisation /= n;
    server.cpu_utilisation /= n;
    let receiver = estimate(&rx);
    let achieved = receiver.relative_ci();
    let mut notes = vec![format!(
        "iperf3 peer: each trial is one iperf3 test of {:.1} s{}; the server's CPU is its \
         whole process over the whole test, setup included",
        trial_time.as_secs_f64(),
        if spec.warmup {
            format!(", after a warm-up test of {:.1} s", warm_time.as_secs_f64())
        } else {
            String::new()
        }
    )];
    let loss = udp.then(|| {
        let (sent, received) = if spec.reverse {
            (server.messages_sent, client.messages_received)
        } else {
            (client.messages_sent, server.messages_received)
        };
        let tail = sent.saturating_sub(received + lost);
        if tail > 0 {
            notes.push(format!(
                "{tail} datagrams were still in flight when the test ended (sent after the \
                 receiver's last count): neither received nor lost"
            ));
        }
        Loss {
            sent,
            received,
            lost,
            ratio: Loss::ratio_of(lost, sent),
            jitter_ns: jitter.iter().sum::<f64>() / jitter.len().max(1) as f64 * 1e9,
            ..Default::default()
        }
    });
    Ok(PointResult {
        size,
        trials: rx.len() as u32,
        repetitions: client.messages_sent.max(client.messages_received),
        elapsed_ns: start.elapsed().as_nanos() as u64,
        throughput_mbps: receiver,
        latency: None,
        sender_mbps: Some(estimate(&tx)),
        receiver_mbps: Some(receiver),
        crr: None,
        loss,
        reverse: None,
        client,
        server,
        precision_target: spec.precision,
        precision_achieved: achieved,
        precision_met: achieved.is_some_and(|a| a <= spec.precision),
        stop_reason,
        placement: Default::default(),
        notes,
        background: Vec::new(),
        timeline: Vec::new(),
        rate: None,
        flows: None,
    })
}
