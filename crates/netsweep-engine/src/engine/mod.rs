//! The client's engine: opens a session with the server, then measures each point of the
//! sweep — warm-up, calibrated trials until the confidence target or the point's time budget
//! — and hands every finished point to a [`RunSink`] at once. This file holds the run and its
//! session; `measure` the loop every pattern's point follows; `calibration` the trial plan
//! and the stop rule. The patterns themselves live in [`crate::pattern`].

mod background;
mod calibration;
mod measure;
mod open;
pub mod peer;
mod session;
mod stop;

use crate::auth::AuthKey;
use crate::error::NetError;
use crate::pattern::PointFigures;
use background::Background;
use measure::Measurer;
use netsweep_endpoint::TransportFactory;
use netsweep_model::results::{
    DatagramTotals, Granted, RunResult, RunStatus, ToolInfo, SCHEMA, SCHEMA_VERSION,
};
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_proto::messages::{ClientMsg, GrantedKnobs, HostInfo};
use open::{open_session, Session};
use peer::Peer;
use session::SessionPeer;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// The warning of a run whose server kept its host's facts to itself.
fn withheld_warning(server: &netsweep_proto::messages::HostInfo) -> Option<String> {
    server.kernel.is_empty().then(|| {
        "the server withheld its host's facts (kernel, CPU model, interfaces, sysctls), as \
         netsweep serve does for clients that did not authenticate: the results cannot say \
         which host served them (its operator can share them: serve --allow host-facts, or \
         --auth-key)"
            .to_string()
    })
}

/// Receives the run as it progresses. The CLI's sink prints the table and rewrites the file.
pub trait RunSink {
    /// The session is established; `run` has the metadata and no points yet.
    fn started(&mut self, run: &RunResult);
    /// A point is about to be measured (index into the spec's sizes).
    fn measuring(&mut self, _index: usize, _size: u64) {}
    /// A point was measured and appended to `run.points`.
    fn point(&mut self, run: &RunResult);
    /// The run ended (complete, interrupted or failed); `run.status` says which.
    fn finished(&mut self, run: &RunResult);
    /// Why the run must stop before its next point, if it must: the sink can no longer keep
    /// what it would measure (every results file failed). Asked between points.
    fn stop(&self) -> Option<String> {
        None
    }
}

/// Everything a run needs besides the spec.
#[derive(Debug)]
pub struct RunContext<'a> {
    /// The server's control address.
    pub server: SocketAddr,
    /// How the peer is named in results (`host:port` or `in-process`).
    pub peer_label: String,
    /// This build's version.
    pub tool_version: &'a str,
    /// Set by the Ctrl-C handler; checked between trials.
    pub interrupt: &'a AtomicBool,
    /// Wall-clock start time (RFC 3339), recorded in the results.
    pub started_at: String,
    /// A testbed description to record, when running in a lab.
    pub lab: Option<serde_json::Value>,
    /// The pre-shared key (`--auth-key`): the server must prove it holds it, and so do we.
    pub auth_key: Option<AuthKey>,
    /// `--tls-pin`: the only certificate (its SHA-256 fingerprint, `AB:CD:…`) a `tls`
    /// session may present.
    pub tls_pin: Option<String>,
}

/// The outcome of a run that got as far as a session: the results (always valid, possibly
/// partial) and the error that stopped it early, if any.
#[derive(Debug)]
pub struct RunOutcome {
    /// The results as far as the run got.
    pub result: RunResult,
    /// What stopped the run early, if anything.
    pub error: Option<NetError>,
}

/// Runs `spec` against the server. Errors before the session is established (nothing
/// measured) are returned as `Err`; later ones end the run with a partial result.
pub fn run(
    spec: &RunSpec,
    ctx: &RunContext<'_>,
    factory: &dyn TransportFactory,
    sink: &mut dyn RunSink,
) -> Result<RunOutcome, NetError> {
    let Session {
        mut ctl,
        mut pattern,
        client_info,
        server_info,
        client_granted,
        server_granted,
        ..
    } = open_session(spec, ctx, factory)?;
    let mut result = new_result(spec, ctx.tool_version, &ctx.started_at, &ctx.peer_label);
    result.client = client_info;
    result.granted = Granted {
        client: client_granted,
        server: server_granted,
    };
    result.warnings = symmetry_warnings(spec, ctx.lab.as_ref())
        .into_iter()
        .chain(withheld_warning(&server_info))
        .collect();
    result.server = server_info;
    result.lab = ctx.lab.clone();
    sink.started(&result);

    let run_start = Instant::now();
    // Background flows (`--background`) run on their own threads, each its own session;
    // the scope joins them however the sweep ends.
    let (error, totals) = std::thread::scope(|scope| {
        let mut bg = match Background::start(scope, spec, ctx, factory) {
            Ok(bg) => bg,
            Err(e) => return (Some(e), None),
        };
        let mut peer = SessionPeer {
            ctl: &mut ctl,
            bg: &mut bg,
            interrupt: ctx.interrupt,
            timeout: Duration::from_nanos(spec.timeout_ns),
            totals: DatagramTotals::default(),
        };
        let mut m = Measurer::new(&mut peer, pattern.as_mut(), spec, ctx.interrupt);
        let error = measure_all(&mut m, &mut result, sink, ctx.interrupt);
        let totals = peer.datagram_totals(pattern.as_mut());
        bg.close();
        (error, totals)
    });
    result.datagram_totals = totals;
    if error.is_none() {
        let _ = ctl.send(ClientMsg::Bye {});
        let _ = ctl.recv("closing the session", Some(Duration::from_secs(2)));
    }
    Ok(conclude(result, error, run_start, sink))
}

/// Runs `result.spec`'s sweep with a peer other than a netsweep session (an iperf3 server):
/// the same points, warm-up, stop rule, `--refine`, annotations and sink as [`run`].
pub(crate) fn run_with<P: Peer + ?Sized>(
    mut result: RunResult,
    peer: &mut P,
    pattern: &mut P::Pattern,
    interrupt: &AtomicBool,
    sink: &mut dyn RunSink,
) -> RunOutcome {
    let spec = result.spec.clone();
    sink.started(&result);
    let run_start = Instant::now();
    let mut m = Measurer::new(peer, pattern, &spec, interrupt);
    let error = measure_all(&mut m, &mut result, sink, interrupt);
    result.datagram_totals = peer.datagram_totals(pattern);
    conclude(result, error, run_start, sink)
}

/// A run's results before its first point: what it is, when it started, against whom.
pub(crate) fn new_result(
    spec: &RunSpec,
    tool_version: &str,
    started_at: &str,
    peer: &str,
) -> RunResult {
    RunResult {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo {
            name: "netsweep".into(),
            version: tool_version.into(),
        },
        started_at: started_at.into(),
        finished_at: None,
        status: RunStatus::Running,
        message: None,
        spec: spec.clone(),
        peer: peer.into(),
        client: HostInfo::default(),
        granted: Granted::default(),
        warnings: Vec::new(),
        server: HostInfo::default(),
        lab: None,
        points: Vec::new(),
        datagram_totals: None,
        summary: None,
        anomalies: Vec::new(),
        knee: None,
    }
}

/// Ends a run: its status and message from the error that stopped it (if any), the end
/// time, anomalies and the load annotations, the summary; the sink gets the last word.
fn conclude(
    mut result: RunResult,
    error: Option<NetError>,
    run_start: Instant,
    sink: &mut dyn RunSink,
) -> RunOutcome {
    result.status = match &error {
        None => RunStatus::Complete,
        Some(NetError::Interrupted) => RunStatus::Interrupted,
        Some(_) => RunStatus::Failed,
    };
    if let Some(e) = &error {
        result.message = Some(match result.message.take() {
            Some(m) => format!("{e}; {m}"),
            None => e.to_string(),
        });
    }
    result.finished_at = Some(netsweep_model::time::rfc3339(SystemTime::now()));
    netsweep_model::anomaly::annotate(&mut result);
    netsweep_model::load::annotate(&mut result);
    netsweep_model::symmetry::annotate(&mut result);
    result.summarise(run_start.elapsed().as_nanos() as u64);
    sink.finished(&result);
    RunOutcome { result, error }
}

/// A pingpong across a lab link shaped differently in its two directions: RTT/2 is then not a
/// one-way time (DESIGN's symmetry rule), which the run says instead of printing a rate that
/// is neither direction's.
fn symmetry_warnings(spec: &RunSpec, lab: Option<&serde_json::Value>) -> Vec<String> {
    if spec.pattern != Pattern::Pingpong {
        return Vec::new();
    }
    lab.map(netsweep_model::symmetry::lab_asymmetries)
        .unwrap_or_default()
        .into_iter()
        .map(|link| {
            format!(
                "the lab shapes the two directions differently ({link}): across it RTT/2 is \
                 not a one-way time and pingpong throughput (size ÷ RTT/2) is neither \
                 direction's rate; measure each direction with -p stream and -p stream -R"
            )
        })
        .collect()
}

/// Most sizes `--refine` adds to a run.
pub const MAX_REFINE_SIZES: usize = 256;

/// The sweep (of sizes, or with `--rates` of offered loads), then `--refine`'s extra sizes;
/// the knobs the pattern learnt on the way. Returns the error that stopped it, if any.
fn measure_all<P: Peer + ?Sized>(
    m: &mut Measurer<'_, P>,
    result: &mut RunResult,
    sink: &mut dyn RunSink,
    interrupt: &AtomicBool,
) -> Option<NetError> {
    let spec = m.spec();
    let rates = spec.load.as_ref().map_or(&[][..], |l| &l.rates[..]);
    let mut error = if rates.is_empty() {
        sweep(m, &spec.sizes, result, sink, interrupt)
    } else {
        sweep_rates(m, rates, result, sink, interrupt)
    };
    if error.is_none() && spec.passes > 1 && rates.is_empty() {
        error = revisit(m, result, sink, interrupt);
    }
    if let Some(g) = m.pattern.learnt_granted() {
        // Knobs the pattern learnt on its first point (crr: on its first connection).
        let cpu = result.granted.client.cpu;
        result.granted.client = GrantedKnobs { cpu, ..g };
    }
    if error.is_none() && spec.refine {
        // Re-sweep finely around what detection found, then detect again on every point.
        let measured: Vec<u64> = result.points.iter().map(|p| p.size).collect();
        let found = netsweep_model::anomaly::detect_run(result);
        let mut extra = netsweep_model::anomaly::refine_sizes(&found, &measured);
        extra.truncate(MAX_REFINE_SIZES);
        if !extra.is_empty() {
            let refined = extra.len();
            error = sweep(m, &extra, result, sink, interrupt);
            result.points.sort_by_key(|p| p.size);
            let note = format!(
                "--refine: {refined} sizes added around {} suspected anomalies",
                found.len()
            );
            result.message = Some(match result.message.take() {
                Some(m) => format!("{m}; {note}"),
                None => note,
            });
        }
    }
    error
}

/// Why measuring must stop before the next point, if it must: the run was interrupted, or no
/// results output can be written any more.
fn halted(sink: &dyn RunSink, interrupt: &AtomicBool) -> Option<NetError> {
    if interrupt.load(Ordering::Relaxed) {
        return Some(NetError::Interrupted);
    }
    sink.stop().map(NetError::Output)
}

/// `--passes`: visits every measured point again in each later pass, in that pass's order
/// (down the sizes, then up), with `--min-trials` trials, then folds the passes' means into
/// each point's interval (`netsweep_model::passes`). An error stops the passes; what they
/// measured is still folded.
fn revisit<P: Peer + ?Sized>(
    m: &mut Measurer<'_, P>,
    result: &mut RunResult,
    sink: &mut dyn RunSink,
    interrupt: &AtomicBool,
) -> Option<NetError> {
    let passes = m.spec().passes;
    let n = result.points.len();
    let mut throughput: Vec<Vec<f64>> = result
        .points
        .iter()
        .map(|p| vec![p.throughput_mbps.mean])
        .collect();
    let mut half_rtt: Vec<Vec<f64>> = result
        .points
        .iter()
        .map(|p| {
            p.latency
                .map(|l| vec![l.half_rtt_ns.mean])
                .unwrap_or_default()
        })
        .collect();
    let mut error = None;
    'passes: for pass in 1..passes {
        for i in netsweep_model::passes::order(n, pass) {
            if let Some(e) = halted(sink, interrupt) {
                error = Some(e);
                break 'passes;
            }
            let size = result.points[i].size;
            sink.measuring(i, size);
            match m.revisit(size) {
                Ok(p) => {
                    throughput[i].push(p.throughput_mbps.mean);
                    if let Some(l) = p.latency {
                        half_rtt[i].push(l.half_rtt_ns.mean);
                    }
                }
                Err(e) => {
                    error = Some(e);
                    break 'passes;
                }
            }
        }
    }
    for (i, p) in result.points.iter_mut().enumerate() {
        netsweep_model::passes::fold(p, &throughput[i], &half_rtt[i]);
    }
    error
}

/// Measures a `--rates` sweep: one point per offered load (requests/s, in order) at the
/// spec's one size; the pattern is told each point's load before it begins.
fn sweep_rates<P: Peer + ?Sized>(
    m: &mut Measurer<'_, P>,
    rates: &[f64],
    result: &mut RunResult,
    sink: &mut dyn RunSink,
    interrupt: &AtomicBool,
) -> Option<NetError> {
    let size = m.spec().sizes.first().copied().unwrap_or(0);
    for (i, &rate) in rates.iter().enumerate() {
        if let Some(e) = halted(sink, interrupt) {
            return Some(e);
        }
        sink.measuring(i, size);
        m.pattern.offer(rate);
        match m.point(size) {
            Ok(p) => {
                result.points.push(p);
                sink.point(result);
            }
            Err(e) => return Some(e),
        }
    }
    None
}

/// Measures `sizes` in order, appending each point to `result` and handing it to the sink.
/// Returns the error that stopped it, if any.
fn sweep<P: Peer + ?Sized>(
    m: &mut Measurer<'_, P>,
    sizes: &[u64],
    result: &mut RunResult,
    sink: &mut dyn RunSink,
    interrupt: &AtomicBool,
) -> Option<NetError> {
    let spec = m.spec();
    for (i, &size) in sizes.iter().enumerate() {
        if let Some(e) = halted(sink, interrupt) {
            return Some(e);
        }
        sink.measuring(i, size);
        match m.point(size) {
            Ok(p) => {
                let slow = spec.stop_after_transfer_ns > 0
                    && p.transfer_ns().unwrap_or(0.0) > spec.stop_after_transfer_ns as f64;
                result.points.push(p);
                sink.point(result);
                if slow && i + 1 < sizes.len() {
                    result.message = Some(format!(
                        "sweep stopped after {size} bytes: one transfer took over {:.1} s",
                        spec.stop_after_transfer_ns as f64 / 1e9
                    ));
                    return None;
                }
            }
            Err(e) => return Some(e),
        }
    }
    None
}
