//! `netsweep run`: builds the RunSpec from flags, starts the in-process server when no host
//! is given, and drives the engine with the table/file sink.

use crate::cli::RunArgs;
use crate::sink::Sink;
use crate::values::PerSide;
use crate::{failure, signal, time, usage_error, EXIT_FAILURE};
use netsweep_core::engine::{self, RunContext};
use netsweep_core::server::{serve, ServeOptions};
use netsweep_core::sizes::{netpipe_schedule, parse_sizes, DEFAULT_PERTURBATION};
use netsweep_core::spec::{Family, Pattern, RunSpec, Transport, DGRAM_HEADER};
use netsweep_proto::messages::Knobs;
use netsweep_report::Format;
use netsweep_transport::Registry;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::SystemTime;

/// Builds the spec from the flags; the error is a usage error.
pub fn build_spec(a: &RunArgs, family: Family) -> Result<RunSpec, String> {
    let (transport, pattern, api) = (a.transport.0, a.pattern.0, a.api.0);
    let family = match transport {
        t if t.is_ip() => family,
        Transport::Packet => Family::Link,
        _ => Family::Unix,
    };
    let mut spec = RunSpec::new(transport, pattern, family);
    spec.api = api;
    match &a.sizes {
        Some(s) => {
            spec.sizes = parse_sizes(s).map_err(|e| e.to_string())?;
            spec.sizes_spec = s.clone();
        }
        None => {
            let ceiling = a.max_size.unwrap_or_else(|| transport.default_ceiling());
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
    spec.trial_time_ns = a.trial_time.as_nanos() as u64;
    spec.precision = a.precision;
    spec.max_point_time_ns = a.max_point_time.as_nanos() as u64;
    spec.timeout_ns = a.timeout.as_nanos() as u64;
    spec.min_trials = a.min_trials;
    spec.max_trials = a.max_trials;
    spec.warmup = !a.no_warmup;
    spec.refine = a.refine;
    let (client_knobs, server_knobs) = knobs(a, transport)?;
    spec.client_knobs = client_knobs;
    spec.server_knobs = server_knobs;
    if a.host.is_none() && a.cpu.is_none() {
        default_placement(&mut spec);
    }
    spec.validate()?;
    Ok(spec)
}

/// The in-process run's default placement. A pingpong or crr exchange alternates between
/// the two ends, so sharing one CPU costs it no parallelism; left free, the scheduler moves
/// the two threads between sharing a CPU and not, from trial to trial and run to run, and
/// the sweep then measures the scheduler (RTT/2 ~3× apart on a 2-CPU VM) instead of the
/// stack — docs/methodology.md has the measurements. Both ends go on the highest allowed
/// CPU (CPU 0 takes most housekeeping). Streams run both ends at once and stay free, as does
/// `shm`, whose ends poll. `--cpu free` restores the scheduler's placement.
fn default_placement(spec: &mut RunSpec) {
    if !matches!(spec.pattern, Pattern::Pingpong | Pattern::Crr) || spec.transport == Transport::Shm
    {
        return;
    }
    if let Some(&cpu) = netsweep_core::meter::allowed_cpus().last() {
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
    if matches!(transport, Transport::Tcp | Transport::Mptcp) {
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
    let stdout = if a.quiet {
        None
    } else if file.is_some() {
        Some(Format::Text)
    } else {
        Some(explicit.unwrap_or(Format::Text))
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
    let now = SystemTime::now();
    let mut sink = output_plan(&a, &spec, now);
    let interrupted = signal::install();
    let factory = Arc::new(Registry);
    let version = env!("CARGO_PKG_VERSION");

    // No host: start the server in-process on loopback and speak the same protocol to it.
    let mut local = None;
    let (server, peer_label) = match &a.host {
        Some(h) => match resolve(h, a.port, a.ipv6) {
            Ok(addr) => (addr, addr.to_string()),
            Err(e) => return usage_error(e),
        },
        None => {
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
            let opts = ServeOptions {
                once: true,
                tool_version: version.into(),
                ..Default::default()
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
    };
    let outcome = engine::run(&spec, &ctx, factory.as_ref(), &mut sink, &|| {
        time::rfc3339(SystemTime::now())
    });
    if let Some((handle, stop)) = local {
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = handle.join();
    }
    for e in &sink.write_errors {
        eprintln!("netsweep: {e}");
    }
    let code = match outcome {
        Err(e) => return failure(e),
        Ok(o) => match o.error {
            None => ExitCode::SUCCESS,
            Some(netsweep_core::error::NetError::Interrupted) => {
                eprintln!(
                    "netsweep: interrupted; {} points measured and saved",
                    o.result.points.len()
                );
                ExitCode::from(130)
            }
            Some(e) => {
                eprintln!("netsweep: {e}");
                ExitCode::from(EXIT_FAILURE)
            }
        },
    };
    if let Some(p) = &sink.saved {
        if !a.quiet {
            eprintln!("results saved to {}", p.display());
        }
    }
    if let Some((p, _)) = &sink.file {
        if !a.quiet {
            eprintln!("output written to {}", p.display());
        }
    }
    code
}
