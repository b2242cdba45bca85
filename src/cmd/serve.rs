//! `netsweep serve`: listens for `netsweep run` clients (and, with `--iperf3`, for iperf3
//! clients) until Ctrl-C.

mod metrics;

use crate::cli::{AllowArg, LogFormatArg, ServeArgs};
use crate::error::{Error, Result};
use crate::signal;
use netsweep_engine::server::budget::bytes;
use netsweep_engine::server::rpm::{RpmLimits, RpmServer};
use netsweep_engine::server::{
    default_max_sessions, iperf3, listen, serve_with, HostLimits, LogFormat, Policy, Ports,
    ServeOptions, ServerLimits, DEFAULT_MAX_SESSIONS_PER_IP, DEFAULT_SESSION_MEMORY,
};
use netsweep_model::time;
use netsweep_transport::tls::identity as tls;
use netsweep_transport::Registry;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::SystemTime;

/// Least memory a session can be served in: a couple of pages of message buffers per side
/// and a transport's smallest rings, with room to spare. A budget below it refuses every
/// client, so it is refused at startup instead.
const MIN_MEMORY: u64 = 1 << 20;

/// Refuses, at startup, limits under which no client could be served, and an
/// `--iperf3-results` directory that cannot be written (found otherwise only per test, in
/// the log).
fn check_limits(a: &ServeArgs) -> Result<()> {
    if a.max_size == Some(0) {
        return Err(Error::usage(
            "--max-size 0 would refuse every run (a message is at least 1 byte): give e.g. 1M, \
             or leave it out for the default 64M",
        ));
    }
    for (flag, v) in [
        ("--max-memory", a.max_memory),
        ("--max-session-memory", a.max_session_memory),
    ] {
        if let Some(m) = v.filter(|&m| m < MIN_MEMORY) {
            return Err(Error::usage(format!(
                "{flag} {}: no session fits in under {}: give at least 1M (e.g. 256M), or leave \
             it out for the default",
                bytes(m),
                bytes(MIN_MEMORY)
            )));
        }
    }
    if let Some(dir) = &a.iperf3_results {
        if !dir.is_dir() {
            return Err(Error::usage(format!(
                "--iperf3-results {}: not a directory; create it first",
                dir.display()
            )));
        }
        let probe = dir.join(format!(".netsweep-write-check-{}", std::process::id()));
        match std::fs::File::create(&probe) {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
            }
            Err(e) => {
                return Err(Error::usage(format!(
                    "--iperf3-results {}: cannot write there ({e}): give a directory this user \
             can write",
                    dir.display()
                )))
            }
        }
    }
    Ok(())
}

/// Serves sessions until SIGTERM or Ctrl-C.
pub fn main(a: ServeArgs) -> Result {
    check_limits(&a)?;
    let auth_key = a.auth_key;
    let (ip, no_ipv6) = match &a.bind {
        Some(b) => {
            let ip: IpAddr = b.trim_matches(['[', ']']).parse().map_err(|_| {
                Error::usage(format!(
                    "bad --bind '{b}': give an IP address such as 0.0.0.0 or ::"
                ))
            })?;
            (ip, None)
        }
        None => listen::default_ip(),
    };
    let addr = SocketAddr::new(ip, a.port);
    let listener = listen::tcp(addr).map_err(|e| {
        Error::failed(format!(
            "cannot listen on {addr}: {e} (is another server using the port? try --port)"
        ))
    })?;
    let iperf3 = match a.iperf3 {
        None => None,
        Some(port) => Some(
            iperf3::Listeners::bind(SocketAddr::new(ip, port)).map_err(|e| {
                Error::failed(format!(
                    "cannot listen for iperf3 clients on {ip}:{port} (TCP and UDP): {e} (is \
                 `iperf3 -s` running there? stop it, or give --iperf3 another port)"
                ))
            })?,
        ),
    };
    let rpm = match a.rpm {
        None => None,
        Some(port) => Some(listen::tcp(SocketAddr::new(ip, port)).map_err(|e| {
            Error::failed(format!(
                "cannot listen for responsiveness clients on {ip}:{port}: {e} (give --rpm \
                 another port)"
            ))
        })?),
    };
    let rpm_at = rpm
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|a| a.to_string());
    let iperf3_at = iperf3
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|a| a.to_string());
    // The server polls the flag the first SIGINT/SIGTERM sets.
    let stop = signal::install();
    let metrics = match &a.metrics {
        Some(at) => Some(metrics::endpoint(at, stop.clone())?),
        None => None,
    };
    let metrics_at = metrics.as_ref().map(|(_, at)| at.clone());
    let max_sessions = a
        .max_sessions
        .map_or_else(default_max_sessions, |n| n as usize);
    let bound = listener
        .local_addr()
        .map_or(addr.to_string(), |a| a.to_string());
    // The budget: the host's limits (read once, the open-files limit raised to the hard
    // one), unless the operator says less or more.
    let mut budget = HostLimits::read().default_budget();
    if let Some(m) = a.max_memory {
        budget.memory = m;
    }
    if let Some(t) = a.max_threads {
        budget.threads = t;
    }
    let session_memory = a
        .max_session_memory
        .unwrap_or(DEFAULT_SESSION_MEMORY.min(budget.memory / 4));
    let policy = policy(&a.allow);
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => tls::install(cert, key).map_err(Error::usage)?,
        _ => tls::server().map_err(Error::failed)?,
    };
    if !a.quiet {
        if a.log_format == LogFormatArg::Json {
            let line = serde_json::json!({
                "ts": time::rfc3339(SystemTime::now()),
                "event": "listening",
                "addr": bound,
                "max_sessions": if a.once { 1 } else { max_sessions },
                "once": a.once,
                "max_memory": budget.memory,
                "max_session_memory": session_memory,
                "max_threads": budget.threads,
                "max_fds": budget.fds,
                "iperf3_addr": iperf3_at,
                "rpm_addr": rpm_at,
                "metrics_addr": metrics_at,
                "tls_fingerprint": tls.fingerprint,
                "tls_certificate": tls.source,
                "ipv4_only_because": no_ipv6,
            });
            eprintln!("{line}");
        } else {
            let limit = if a.once {
                "one run, then exit".to_string()
            } else {
                format!("up to {max_sessions} runs at once")
            };
            let mut also = iperf3_at
                .as_ref()
                .map_or(String::new(), |a| format!(" and for iperf3 clients on {a}"));
            if let Some(a) = &rpm_at {
                also += &format!(" and for responsiveness clients on {a} (rpm)");
            }
            let metrics = metrics_at.as_ref().map_or(String::new(), |a| {
                format!("metrics on http://{a}/metrics; ")
            });
            let v4_only = no_ipv6.as_ref().map_or(String::new(), |why| {
                format!(" (IPv4 only: this host has no IPv6 to listen on [::]: {why})")
            });
            eprintln!(
                "netsweep serve: listening on {bound}{also}{v4_only} ({limit}; sessions may \
                 hold {} in all, {} each, {} threads, {} file descriptors; {metrics}tls \
                 certificate sha256 {} ({}); Ctrl-C stops)",
                bytes(budget.memory),
                bytes(session_memory),
                budget.threads,
                budget.fds,
                tls.fingerprint,
                tls.source
            );
        }
    }
    let defaults = ServerLimits::default();
    let limits = ServerLimits {
        max_size: a.max_size.unwrap_or(defaults.max_size),
        max_session: a.max_duration.unwrap_or(defaults.max_session),
        max_rate_bps: a.max_rate,
        max_flows: a.max_flows.unwrap_or(defaults.max_flows),
        session_memory,
        ..defaults
    };
    let opts = ServeOptions {
        limits,
        once: a.once,
        max_sessions,
        max_sessions_per_ip: a
            .max_sessions_per_ip
            .map_or(DEFAULT_MAX_SESSIONS_PER_IP, |n| n as usize),
        verbose: !a.quiet,
        auth_key,
        log_format: match a.log_format {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        },
        tool_version: env!("CARGO_PKG_VERSION").into(),
        first_session_within: None,
        policy,
        budget,
        iperf3_results: a.iperf3_results,
        allow_from: a.allow_from,
        metrics: metrics.map(|(m, _)| m),
    };
    let rpm_tls = tls.config.clone();
    let ports = Ports {
        iperf3,
        rpm: rpm.map(|l| -> RpmServer {
            Box::new(move |admit, limits: RpmLimits, stop| {
                let opts = netsweep_rpm::server::ServerOptions {
                    tls: rpm_tls,
                    max_connection: limits.max_connection,
                    handshake_timeout: limits.handshake_timeout,
                    admit,
                };
                netsweep_rpm::server::serve(l, opts, stop)
            })
        }),
    };
    serve_with(listener, ports, Arc::new(Registry), opts, stop)
        .map(|()| ExitCode::SUCCESS)
        .map_err(|e| Error::failed(format!("server failed: {e}")))
}

/// The policy `--allow` sets: nothing beyond a plain measurement unless listed.
fn policy(allow: &[AllowArg]) -> Policy {
    if allow.contains(&AllowArg::All) {
        return Policy::ALL;
    }
    let has = |a| allow.contains(&a);
    Policy {
        host_transports: has(AllowArg::HostTransports),
        raw_transports: has(AllowArg::RawTransports),
        tos: has(AllowArg::Tos),
        priority: has(AllowArg::Priority),
        any_cc: has(AllowArg::Cc),
        host_facts: has(AllowArg::HostFacts),
    }
}
