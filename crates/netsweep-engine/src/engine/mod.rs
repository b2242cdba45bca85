//! The client's engine: opens a session with the server, then measures each point of the
//! sweep — warm-up, calibrated trials until the confidence target or the point's time budget
//! — and hands every finished point to a [`RunSink`] at once. This file holds the run and its
//! session; `measure` the loop every pattern's point follows; `calibration` the trial plan
//! and the stop rule. The patterns themselves live in [`crate::pattern`].

mod background;
mod calibration;
mod measure;

use crate::auth::{self, AuthKey};
use crate::control::ClientControl;
use crate::error::NetError;
use crate::hostinfo;
use crate::meter::pin_current_thread;
use crate::pattern::{self, ClientOpen, ClientPattern};
use background::Background;
use measure::Measurer;
use netsweep_endpoint::TransportFactory;
use netsweep_model::results::{Granted, RunResult, RunStatus, ToolInfo, SCHEMA, SCHEMA_VERSION};
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_proto::messages::{ClientMsg, GrantedKnobs, HostInfo, ServerMsg};
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
    let mut result = RunResult {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo {
            name: "netsweep".into(),
            version: ctx.tool_version.into(),
        },
        started_at: ctx.started_at.clone(),
        finished_at: None,
        status: RunStatus::Running,
        message: None,
        spec: spec.clone(),
        peer: ctx.peer_label.clone(),
        client: client_info,
        granted: Granted {
            client: client_granted,
            server: server_granted,
        },
        warnings: symmetry_warnings(spec, ctx.lab.as_ref())
            .into_iter()
            .chain(withheld_warning(&server_info))
            .collect(),
        server: server_info,
        lab: ctx.lab.clone(),
        points: Vec::new(),
        datagram_totals: None,
        summary: None,
        anomalies: Vec::new(),
        knee: None,
    };
    sink.started(&result);

    let run_start = Instant::now();
    // Background flows (`--background`) run on their own threads, each its own session;
    // the scope joins them however the sweep ends.
    let (error, totals) = std::thread::scope(|scope| {
        let mut bg = match Background::start(scope, spec, ctx, factory) {
            Ok(bg) => bg,
            Err(e) => return (Some(e), None),
        };
        let mut m = Measurer::new(&mut ctl, pattern.as_mut(), spec, ctx.interrupt, &mut bg);
        let error = measure_all(&mut m, &mut result, sink, ctx.interrupt);
        let totals = m.pattern.is_datagram().then_some(m.totals);
        bg.close();
        (error, totals)
    });
    result.datagram_totals = totals;
    if error.is_none() {
        let _ = ctl.send(ClientMsg::Bye {});
        let _ = ctl.recv("closing the session", Some(Duration::from_secs(2)));
    }
    result.status = match &error {
        None => RunStatus::Complete,
        Some(NetError::Interrupted) => RunStatus::Interrupted,
        Some(_) => RunStatus::Failed,
    };
    if let Some(e) = &error {
        result.message = Some(e.to_string());
    }
    result.finished_at = Some(netsweep_model::time::rfc3339(SystemTime::now()));
    netsweep_model::anomaly::annotate(&mut result);
    netsweep_model::load::annotate(&mut result);
    result.summarise(run_start.elapsed().as_nanos() as u64);
    sink.finished(&result);
    Ok(RunOutcome { result, error })
}

/// A session as opened: the control connection, the pattern with its data path bound on
/// both sides, and what each side said about itself.
pub(crate) struct Session {
    ctl: ClientControl,
    cookie: u64,
    pattern: Box<dyn ClientPattern>,
    client_info: HostInfo,
    server_info: HostInfo,
    client_granted: GrantedKnobs,
    server_granted: GrantedKnobs,
}

/// Opens a session for `spec`: control connection, hello/welcome (and the key's challenge),
/// the pattern's data path, `data_ready → data_bound`, and this thread pinned to the
/// client's `--cpu`. The measured run and each background flow open theirs this way.
fn open_session(
    spec: &RunSpec,
    ctx: &RunContext<'_>,
    factory: &dyn TransportFactory,
) -> Result<Session, NetError> {
    let registration = pattern::registration_for(spec.pattern, spec.flows).ok_or_else(|| {
        NetError::Refused(format!("this build has no pattern {}", spec.pattern.name()))
    })?;
    let timeout = Duration::from_nanos(spec.timeout_ns);
    let mut ctl = ClientControl::connect(ctx.server, timeout)?;
    check_protocol(ctl.version(), spec, ctx)?;
    let setup = spec.session_setup();
    let client_info = hostinfo::collect(ctx.tool_version);
    let client_nonce = match &ctx.auth_key {
        Some(_) => Some(auth::nonce()?),
        None => None,
    };
    let during = "waiting for the server's welcome";
    let reply = ctl.request(
        ClientMsg::Hello {
            setup: setup.clone(),
            client: client_info.clone(),
            client_nonce: client_nonce
                .as_ref()
                .map(netsweep_proto::auth::encode_nonce),
        },
        during,
        None,
    )?;
    let reply = auth::client_answer(
        &mut ctl,
        ctx.auth_key.as_ref(),
        client_nonce.as_ref(),
        reply,
        during,
    )?;
    let (server_info, cookie, data) = match reply {
        ServerMsg::Welcome {
            server,
            cookie,
            data,
        } => (server, cookie, data),
        other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
    };
    let data_ip = ctl
        .stream()
        .peer_addr()
        .map_err(|e| NetError::io("control connection", e))?
        .ip();
    // The pattern opens its own data path: a connected endpoint, or (crr) a connector that
    // prepares one connection per transaction.
    let mut pattern = (registration.client)(&ClientOpen {
        factory,
        setup: &setup,
        spec,
        knobs: &spec.client_knobs,
        server: data_ip,
        data: &data,
        cookie,
        timeout,
    })?;
    let server_granted = match ctl.request(
        ClientMsg::DataReady {},
        "waiting for the data path to be bound",
        None,
    )? {
        ServerMsg::DataBound { granted } => granted,
        other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
    };
    let mut client_granted = pattern.granted();
    if let Some(cpu) = spec.client_knobs.cpu {
        pin_current_thread(cpu)
            .map_err(|m| NetError::Refused(format!("client side --cpu: {m}")))?;
        client_granted.cpu = Some(cpu);
    }
    Ok(Session {
        ctl,
        cookie,
        pattern,
        client_info,
        server_info,
        client_granted,
        server_granted,
    })
}

/// Refuses, with the reason, a run that needs more than the server's protocol version: a
/// version-1 server (an older netsweep) ignores `reverse` and knows neither bidir nor
/// authentication, so the run would otherwise wait for data that never comes.
fn check_protocol(version: u16, spec: &RunSpec, ctx: &RunContext<'_>) -> Result<(), NetError> {
    let needs_2 = [
        (spec.reverse, "--reverse"),
        (spec.pattern == Pattern::Bidir, "the bidir pattern"),
        (ctx.auth_key.is_some(), "--auth-key"),
    ];
    let needs_3 = [(spec.flows > 1, "--flows")];
    let needs = needs_2
        .iter()
        .map(|&(needed, what)| (needed, what, 2))
        .chain(needs_3.iter().map(|&(needed, what)| (needed, what, 3)));
    for (needed, what, since) in needs {
        if needed && version < since {
            return Err(NetError::Refused(format!(
                "the server speaks netsweep protocol {version} (an older netsweep), which has no \
                 {what}: upgrade netsweep on the server"
            )));
        }
    }
    Ok(())
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
fn measure_all(
    m: &mut Measurer<'_>,
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

/// Measures a `--rates` sweep: one point per offered load (requests/s, in order) at the
/// spec's one size; the pattern is told each point's load before it begins.
fn sweep_rates(
    m: &mut Measurer<'_>,
    rates: &[f64],
    result: &mut RunResult,
    sink: &mut dyn RunSink,
    interrupt: &AtomicBool,
) -> Option<NetError> {
    let size = m.spec().sizes.first().copied().unwrap_or(0);
    for (i, &rate) in rates.iter().enumerate() {
        if interrupt.load(Ordering::Relaxed) {
            return Some(NetError::Interrupted);
        }
        if let Some(why) = sink.stop() {
            return Some(NetError::Output(why));
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
fn sweep(
    m: &mut Measurer<'_>,
    sizes: &[u64],
    result: &mut RunResult,
    sink: &mut dyn RunSink,
    interrupt: &AtomicBool,
) -> Option<NetError> {
    let spec = m.spec();
    for (i, &size) in sizes.iter().enumerate() {
        if interrupt.load(Ordering::Relaxed) {
            return Some(NetError::Interrupted);
        }
        if let Some(why) = sink.stop() {
            return Some(NetError::Output(why));
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
