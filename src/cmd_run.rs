//! `netsweep run`: builds the RunSpec from flags, starts the in-process server when no host
//! is given, and drives the engine with the table/file sink.

use crate::cli::RunArgs;
use crate::sink::Sink;
use crate::values::PerSide;
use crate::{failure, iperf3_run, mpi_run, signal, usage_error, EXIT_FAILURE, EXIT_INTERRUPTED};
use netsweep_engine::engine::{self, RunContext};
use netsweep_engine::error::NetError;
use netsweep_engine::server::{serve, ServeOptions};
use netsweep_model::load::{parse_rates, Arrivals, LoadSpec};
use netsweep_model::results::RunStatus;
use netsweep_model::sizes::{netpipe_schedule, parse_sizes, DEFAULT_PERTURBATION};
use netsweep_model::spec::{Api, Family, Pattern, RunSpec, Transport, DGRAM_HEADER};
use netsweep_model::time;
use netsweep_proto::messages::Knobs;
use netsweep_report::Format;
use netsweep_transport::knobs::Knob;
use netsweep_transport::Registry;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Builds the spec from the flags; the error is a usage error.
pub fn build_spec(a: &RunArgs, family: Family) -> Result<RunSpec, String> {
    let (transport, pattern, api) = (a.transport.0, a.pattern.0, a.api.0);
    let d = netsweep_transport::descriptor(transport);
    let family = d.family(family);
    let mut spec = RunSpec::new(transport, pattern, family);
    spec.api = api;
    match &a.sizes {
        Some(s) => {
            spec.sizes = parse_sizes(s).map_err(|e| e.to_string())?;
            spec.sizes_spec = s.clone();
        }
        None if pattern == Pattern::Rate => {
            spec.sizes = vec![RATE_DEFAULT_SIZE];
            spec.sizes_spec = format!("{RATE_DEFAULT_SIZE} (the rate pattern's default)");
        }
        None => {
            let ceiling = a.max_size.unwrap_or(d.default_ceiling);
            let start = if transport.is_datagram() && pattern == Pattern::Stream {
                DGRAM_HEADER
            } else {
                1
            };
            spec.sizes = netpipe_schedule(start, ceiling, a.perturbation);
            spec.sizes_spec = format!(
                "netpipe({start}..{ceiling}, perturbation {})",
                if a.perturbation == DEFAULT_PERTURBATION {
                    format!("{} (default)", a.perturbation)
                } else {
                    a.perturbation.to_string()
                }
            );
        }
    }
    if pattern == Pattern::Pingpong && !transport.is_datagram() && spec.sizes.contains(&0) {
        return Err(format!(
            "size 0 cannot make a {transport} round trip (no bytes to wait for): start --sizes at 1"
        ));
    }
    spec.load = load(a, pattern)?;
    set_trial_times(a, &mut spec);
    spec.precision = a.precision;
    spec.timeout_ns = a.timeout.as_nanos() as u64;
    spec.min_trials = a.min_trials;
    spec.max_trials = a.max_trials;
    spec.warmup = !a.no_warmup;
    spec.refine = a.refine;
    spec.reverse = a.reverse;
    spec.flows = a.flows;
    spec.threads = a.threads;
    let (mut client_knobs, mut server_knobs) = knobs(a, transport)?;
    if a.batch.is_none() && (api == Api::Gso || transport == Transport::Xdp) {
        // A super-datagram of one segment is a plain send: gso's point is the batch. An
        // AF_XDP ring likewise takes a batch of frames per kick.
        let b = Some(netsweep_transport::gso::MAX_SEGMENTS as u32);
        (client_knobs.batch, server_knobs.batch) = (b, b);
    }
    spec.client_knobs = client_knobs;
    spec.server_knobs = server_knobs;
    spec.interval_ns = a.interval.map_or(0, |i| i.as_nanos() as u64);
    // Flows run on many threads: pinning them all to one CPU would serialise them.
    if a.host.is_none() && a.cpu.is_none() && a.flows <= 1 {
        default_placement(&mut spec);
    }
    spec.validate(d)?;
    spec.background = a.background.clone();
    for b in &spec.background {
        let flow = b.session_spec(&spec);
        flow.validate(netsweep_transport::descriptor(flow.transport))
            .and_then(|()| b.check(&spec))
            .map_err(|e| format!("--background {}: {e}", b.text))?;
    }
    Ok(spec)
}

/// Sets the trial time and the point budget from the flags; without them the spec keeps
/// `RunSpec::new`'s defaults — except a rate run's. A rate point's stop-rule sample, the
/// delivered rate, follows the offered one and meets any precision at once, so the trial
/// time decides how many replies its percentiles rest on: without --trial-time a rate
/// trial carries 1000 requests at the run's lowest load (`LoadSpec::default_trial_ns`), and
/// the budget lets --min-trials of them run.
fn set_trial_times(a: &RunArgs, spec: &mut RunSpec) {
    let ns = |d: Duration| d.as_nanos() as u64;
    let rate_default = a.trial_time.is_none() && spec.load.is_some();
    match (a.trial_time, &spec.load) {
        (Some(t), _) => spec.trial_time_ns = ns(t),
        (None, Some(load)) => spec.trial_time_ns = load.default_trial_ns(&spec.sizes),
        (None, None) => {}
    }
    match a.max_point_time {
        Some(t) => spec.max_point_time_ns = ns(t),
        None if rate_default => {
            spec.max_point_time_ns = spec.trial_time_ns * u64::from(a.min_trials.max(2));
        }
        None => {}
    }
}

/// The message size of a rate run without --sizes.
const RATE_DEFAULT_SIZE: u64 = 64;

/// The rate pattern's offered load from --rate/--rates/--arrivals/--seed; the
/// flags are refused with another pattern.
fn load(a: &RunArgs, pattern: Pattern) -> Result<Option<LoadSpec>, String> {
    if pattern != Pattern::Rate {
        let given = [
            (a.rate.is_some(), "--rate"),
            (a.rates.is_some(), "--rates"),
            (a.seed.is_some(), "--seed"),
            (a.arrivals != Arrivals::Constant, "--arrivals"),
        ];
        return match given.iter().find(|(g, _)| *g) {
            Some((_, flag)) => Err(format!(
                "{flag} applies to the rate pattern: add -p rate (open-loop requests at an \
                 offered load)"
            )),
            None => Ok(None),
        };
    }
    let rates = match &a.rates {
        Some(r) => parse_rates(r)?,
        None => Vec::new(),
    };
    let seed = a.seed.unwrap_or_else(|| {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
        now.map_or(1, |d| d.as_nanos() as u64)
    });
    Ok(Some(LoadSpec {
        rate: a.rate,
        rates,
        rates_spec: a.rates.clone().unwrap_or_default(),
        arrivals: a.arrivals,
        seed,
    }))
}

/// The in-process run's default placement. A pingpong or crr exchange alternates between
/// the two ends, so sharing one CPU costs it no parallelism; left free, the scheduler moves
/// the two threads between sharing a CPU and not, from trial to trial and run to run, and
/// the sweep then measures the scheduler (RTT/2 ~3× apart on a 2-CPU VM) instead of the
/// stack — docs/methodology.md has the measurements. Both ends go on the highest allowed
/// CPU (CPU 0 takes most housekeeping). Streams run both ends at once and stay free, as does
/// a transport whose ends poll (`shm`) and a run that asks for `--busy-poll` (a polling end
/// would take the CPU its peer needs). `--cpu free` restores the scheduler's placement.
fn default_placement(spec: &mut RunSpec) {
    if !matches!(spec.pattern, Pattern::Pingpong | Pattern::Crr)
        || netsweep_transport::descriptor(spec.transport).polls
        || spec.client_knobs.busy_poll.is_some()
        || spec.server_knobs.busy_poll.is_some()
    {
        return;
    }
    if let Some(&cpu) = netsweep_engine::meter::allowed_cpus().last() {
        spec.client_knobs.cpu = Some(cpu);
        spec.server_knobs.cpu = Some(cpu);
        spec.default_placement = true;
    }
}

/// Builds both sides' knobs from the flags.
fn knobs(a: &RunArgs, transport: Transport) -> Result<(Knobs, Knobs), String> {
    let mut c = Knobs::default();
    let mut s = Knobs::default();
    (c.sndbuf, s.sndbuf) = PerSide::pair(a.sndbuf);
    (c.rcvbuf, s.rcvbuf) = PerSide::pair(a.rcvbuf);
    if netsweep_transport::knobs::applies(Knob::Nodelay, transport) {
        (c.nodelay, s.nodelay) = (Some(a.nodelay), Some(a.nodelay));
    }
    if !a.align {
        (c.buffer_offset, s.buffer_offset) = PerSide::pair(a.offset);
    }
    if let Some(b) = a.batch {
        if b == 0 || b > 1024 {
            return Err(format!("--batch {b} is out of range: give 1 to 1024"));
        }
        (c.batch, s.batch) = (Some(b), Some(b));
    }
    (c.congestion_control, s.congestion_control) = (a.cc.clone(), a.cc.clone());
    // --dscp arrives as the TOS byte; clap keeps it and --tos apart.
    (c.tos, s.tos) = PerSide::pair(a.tos.or(a.dscp));
    (c.priority, s.priority) = PerSide::pair(a.priority);
    if a.no_check {
        (c.no_check, s.no_check) = (Some(true), Some(true));
    }
    (c.busy_poll, s.busy_poll) = PerSide::pair(a.busy_poll);
    (c.pmtu, s.pmtu) = (a.pmtu.clone(), a.pmtu.clone());
    (c.cpu, s.cpu) = PerSide::pair(a.cpu);
    if let Some(pool) = a.invalidate_cache {
        (c.cache_pool, s.cache_pool) = (Some(pool), Some(pool));
    }
    (c.interface, s.interface) = (a.interface.clone(), None);
    Ok((c, s))
}

/// Resolves HOST[:PORT] to a control address.
fn resolve(host: &str, default_port: u16, ipv6: bool) -> Result<SocketAddr, String> {
    let with_port = if host.parse::<Ipv6Addr>().is_ok() {
        format!("[{host}]:{default_port}")
    } else if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{default_port}")
    };
    let addrs: Vec<SocketAddr> = with_port
        .to_socket_addrs()
        .map_err(|e| {
            format!("cannot resolve '{host}': {e}; give HOST or HOST:PORT (IPv6 as [ADDR]:PORT)")
        })?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv6() == ipv6)
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("'{host}' resolved to no address"))
}

fn output_plan(a: &RunArgs, spec: &RunSpec, now: SystemTime) -> Sink {
    let explicit = a.format.map(|f| f.0);
    let file = a.output.as_ref().map(|o| {
        (
            PathBuf::from(o),
            explicit.unwrap_or_else(|| Format::from_path(o)),
        )
    });
    // `-o /dev/stdout` (or any path that is this process's stdout) is the stdout output:
    // the table is not printed beside it.
    let stdout = match &file {
        _ if a.quiet => None,
        Some((p, _)) if crate::output_path::names_own_stdout(p) => None,
        Some(_) => Some(Format::Text),
        None => Some(explicit.unwrap_or(Format::Text)),
    };
    let file_is_json = matches!(&file, Some((_, Format::Json)));
    let saved = (!a.no_save && !file_is_json).then(|| {
        PathBuf::from(&a.save_dir).join(format!(
            "{}-{}-{}.json",
            time::compact(now),
            spec.transport,
            spec.pattern
        ))
    });
    Sink::new(stdout, file, saved, a.quiet)
}

pub fn main(a: RunArgs) -> ExitCode {
    let family = if a.ipv6 { Family::Ipv6 } else { Family::Ipv4 };
    let spec = match build_spec(&a, family) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    let lab = match &a.lab_meta {
        None => None,
        Some(p) => match std::fs::read_to_string(p)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string()))
        {
            Ok(v) => Some(v),
            Err(e) => return usage_error(format!("cannot read --lab-meta {p}: {e}")),
        },
    };
    let auth_key = a.auth_key.clone();
    let now = SystemTime::now();
    let mut sink = output_plan(&a, &spec, now);
    let interrupted = signal::install();
    let factory = Arc::new(Registry);
    let version = env!("CARGO_PKG_VERSION");

    // An iperf3 server as the peer: its own protocol, stream points only.
    if let Some(url) = a
        .host
        .as_deref()
        .filter(|h| h.starts_with(iperf3_run::SCHEME))
    {
        let mut spec = iperf3_run::honest_spec(spec);
        if let Err(e) = iperf3_run::check(&spec) {
            return usage_error(e);
        }
        if a.sizes.is_none() {
            spec.sizes = iperf3_run::default_sizes(spec.transport);
            spec.sizes_spec = "iperf3 default".into();
        }
        let addr = match iperf3_run::resolve(url) {
            Ok(a) => a,
            Err(e) => return usage_error(e),
        };
        let (result, error) = iperf3_run::run(&spec, addr, &mut sink, &interrupted);
        let ended = match error {
            None => Ended::Complete,
            Some(_) if result.status == RunStatus::Interrupted => Ended::Interrupted,
            Some(e) => Ended::Failed(e),
        };
        return finish(&sink, ended, result.points.len(), a.quiet);
    }
    // -t xdp: a build with the feature, and a link between two hosts (never loopback).
    if spec.transport == Transport::Xdp {
        if !cfg!(feature = "xdp") {
            return usage_error(netsweep_transport::xdp::BUILD_HINT);
        }
        if a.host.is_none() {
            return usage_error(
                "-t xdp needs a link between two hosts or namespaces: run `netsweep serve` on \
                 the far end and name it (`netsweep run HOST -t xdp`; `netsweep lab` builds \
                 such a pair); on loopback use -t packet",
            );
        }
    }
    // -t mpi: rank 1 serves, rank 0 finds it over MPI (no host).
    let mut auth_key = auth_key;
    let mut mpi_client = None;
    if spec.transport == Transport::Mpi {
        if a.host.is_some() {
            return usage_error(
                "-t mpi finds its peer in the MPI world: drop HOST and run \
                 `mpirun -np 2 netsweep run -t mpi …`",
            );
        }
        match mpi_run::start(std::time::Duration::from_nanos(spec.timeout_ns), version) {
            Err(code) => return code,
            Ok(mpi_run::Role::Served(code)) => return code,
            Ok(mpi_run::Role::Client(addr, key, guard)) => {
                auth_key = Some(key);
                mpi_client = Some((addr, guard));
            }
        }
    }
    // No host: start the server in-process on loopback and speak the same protocol to it.
    let mut local = None;
    let (server, peer_label) = match (&a.host, &mpi_client) {
        (_, Some((addr, _))) => (*addr, format!("mpi rank 1 at {addr}")),
        (Some(h), None) => match resolve(h, a.port, a.ipv6) {
            Ok(addr) => (addr, addr.to_string()),
            Err(e) => return usage_error(e),
        },
        (None, None) => {
            let ip: IpAddr = if a.ipv6 {
                Ipv6Addr::LOCALHOST.into()
            } else {
                Ipv4Addr::LOCALHOST.into()
            };
            let listener = match TcpListener::bind((ip, 0)) {
                Ok(l) => l,
                Err(e) => {
                    return failure(format!("cannot start the in-process server on {ip}: {e}"))
                }
            };
            let addr = match listener.local_addr() {
                Ok(a) => a,
                Err(e) => return failure(e),
            };
            let stop = Arc::new(AtomicBool::new(false));
            // The in-process server holds the same key, so a local run exercises the
            // authentication too.
            // One session, or (with --background) one per flow besides the measured one,
            // served until the run ends.
            let sessions = 1 + spec.background.len();
            let opts = ServeOptions {
                once: sessions == 1,
                max_sessions: sessions,
                max_sessions_per_ip: sessions,
                tool_version: version.into(),
                auth_key: auth_key.clone(),
                ..ServeOptions::in_process()
            };
            let f = factory.clone();
            let s2 = stop.clone();
            local = Some((
                std::thread::spawn(move || serve(listener, f, opts, s2)),
                stop,
            ));
            (addr, "in-process".to_string())
        }
    };
    let ctx = RunContext {
        server,
        peer_label,
        tool_version: version,
        interrupt: &interrupted,
        started_at: time::rfc3339(now),
        lab,
        auth_key,
    };
    let outcome = engine::run(&spec, &ctx, factory.as_ref(), &mut sink);
    if let Some((handle, stop)) = local {
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = handle.join();
    }
    let (ended, points) = match outcome {
        Err(e) => return failure(e),
        Ok(o) => {
            let points = o.result.points.len();
            match o.error {
                None => (Ended::Complete, points),
                Some(NetError::Interrupted) => (Ended::Interrupted, points),
                Some(e) => (Ended::Failed(e.to_string()), points),
            }
        }
    };
    finish(&sink, ended, points, a.quiet)
}

/// How a run that got as far as a session ended.
#[derive(Debug)]
enum Ended {
    Complete,
    Interrupted,
    Failed(String),
}

/// Reports how the run ended and what was written, and picks the exit code: 0 when the run
/// completed and every results output was written in full; 130 when it was interrupted and
/// everything measured was saved; 1 otherwise — a run failure, or any failed write of a
/// results output (`-o`, the saved file, a format other than the table on stdout), even in an
/// interrupted run: its exit code must not say "saved" when something was lost. "results saved
/// to" and "output written to" name only files written in full.
fn finish(sink: &Sink, ended: Ended, points: usize, quiet: bool) -> ExitCode {
    let lost = sink.failures();
    match &ended {
        Ended::Complete => {}
        Ended::Interrupted if lost.is_empty() => {
            eprintln!("netsweep: interrupted; {points} points measured and saved")
        }
        Ended::Interrupted => eprintln!("netsweep: interrupted; {points} points measured"),
        Ended::Failed(e) => eprintln!("netsweep: {e}"),
    }
    for l in &lost {
        eprintln!("netsweep: {l}");
    }
    if !quiet {
        if let Some(p) = sink.saved() {
            eprintln!("results saved to {}", p.display());
        }
        if let Some(p) = sink.output() {
            eprintln!("output written to {}", p.display());
        }
    }
    match ended {
        Ended::Complete if lost.is_empty() => ExitCode::SUCCESS,
        Ended::Interrupted if lost.is_empty() => ExitCode::from(EXIT_INTERRUPTED),
        _ => ExitCode::from(EXIT_FAILURE),
    }
}
