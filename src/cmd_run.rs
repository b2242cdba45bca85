//! `netsweep run`: builds the RunSpec from flags, starts the in-process server when no host
//! is given, and drives the engine with the table/file sink.

use crate::cli::RunArgs;
use crate::sink::Sink;
use crate::{failure, parse, signal, time, usage_error, EXIT_FAILURE};
use netsweep_core::engine::{self, RunContext};
use netsweep_core::server::{serve, ServeOptions};
use netsweep_core::sizes::{netpipe_schedule, parse_sizes, DEFAULT_PERTURBATION};
use netsweep_core::spec::{Api, Family, Pattern, RunSpec, Transport, DGRAM_HEADER};
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
    let transport = Transport::parse(&a.transport).ok_or_else(|| {
        format!(
            "unknown transport '{}': choose one of {}",
            a.transport,
            Transport::ALL.map(|t| t.name()).join(", ")
        )
    })?;
    let pattern = Pattern::parse(&a.pattern).ok_or_else(|| {
        format!(
            "unknown pattern '{}': choose one of {}",
            a.pattern,
            Pattern::ALL.map(|p| p.name()).join(", ")
        )
    })?;
    let api = Api::parse(&a.api).ok_or_else(|| {
        format!(
            "unknown api '{}': choose one of {}",
            a.api,
            Api::ALL.map(|p| p.name()).join(", ")
        )
    })?;
    let family = if transport.is_ip() {
        family
    } else {
        Family::Unix
    };
    let mut spec = RunSpec::new(transport, pattern, family);
    spec.api = api;
    match &a.sizes {
        Some(s) => {
            spec.sizes = parse_sizes(s).map_err(|e| e.to_string())?;
            spec.sizes_spec = s.clone();
        }
        None => {
            let ceiling = match &a.max_size {
                Some(m) => parse::size(m, "--max-size")?,
                None => transport.default_ceiling(),
            };
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
    spec.trial_time_ns = parse::duration(&a.trial_time, "--trial-time")?.as_nanos() as u64;
    spec.precision = parse::fraction(&a.precision, "--precision")?;
    spec.max_point_time_ns =
        parse::duration(&a.max_point_time, "--max-point-time")?.as_nanos() as u64;
    spec.timeout_ns = parse::duration(&a.timeout, "--timeout")?.as_nanos() as u64;
    spec.min_trials = a.min_trials;
    spec.max_trials = a.max_trials;
    spec.warmup = !a.no_warmup;
    let knobs = Knobs {
        sndbuf: a
            .sndbuf
            .as_deref()
            .map(|s| parse::size(s, "--sndbuf"))
            .transpose()?,
        rcvbuf: a
            .rcvbuf
            .as_deref()
            .map(|s| parse::size(s, "--rcvbuf"))
            .transpose()?,
        nodelay: (transport == Transport::Tcp)
            .then(|| parse::on_off(&a.nodelay, "--nodelay"))
            .transpose()?,
        buffer_offset: (a.offset > 0).then_some(a.offset),
        ..Default::default()
    };
    if a.offset >= 4096 {
        return Err(format!(
            "--offset {} must be below the page size (4096)",
            a.offset
        ));
    }
    spec.client_knobs = knobs.clone();
    spec.server_knobs = knobs;
    spec.validate()?;
    Ok(spec)
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

fn output_plan(a: &RunArgs, spec: &RunSpec, now: SystemTime) -> Result<Sink, String> {
    let explicit = a
        .format
        .as_deref()
        .map(|f| {
            Format::parse(f).ok_or_else(|| {
                format!(
                    "unknown --format '{f}': choose one of {}",
                    Format::ALL.map(|f| f.name()).join(", ")
                )
            })
        })
        .transpose()?;
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
    Ok(Sink::new(stdout, file, saved, a.quiet))
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
    let mut sink = match output_plan(&a, &spec, now) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    signal::install();
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
        interrupt: &signal::INTERRUPTED,
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
