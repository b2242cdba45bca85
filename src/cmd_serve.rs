//! `netsweep serve`: listens for `netsweep run` clients until Ctrl-C.

use crate::cli::{LogFormatArg, ServeArgs};
use crate::{failure, signal, usage_error};
use netsweep_engine::server::{
    default_max_sessions, serve, LogFormat, ServeOptions, ServerLimits, DEFAULT_MAX_SESSIONS_PER_IP,
};
use netsweep_model::time;
use netsweep_transport::Registry;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::SystemTime;

pub fn main(a: ServeArgs) -> ExitCode {
    let auth_key = a.auth_key;
    let ip: IpAddr = match a.bind.trim_matches(['[', ']']).parse() {
        Ok(ip) => ip,
        Err(_) => {
            return usage_error(format!(
                "bad --bind '{}': give an IP address such as 0.0.0.0 or ::",
                a.bind
            ))
        }
    };
    let addr = SocketAddr::new(ip, a.port);
    let listener = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            return failure(format!(
                "cannot listen on {addr}: {e} (is another server using the port? try --port)"
            ))
        }
    };
    // The server polls the flag the first SIGINT/SIGTERM sets.
    let stop = signal::install();
    let max_sessions = a
        .max_sessions
        .map_or_else(default_max_sessions, |n| n as usize);
    let bound = listener
        .local_addr()
        .map_or(addr.to_string(), |a| a.to_string());
    if !a.quiet {
        if a.log_format == LogFormatArg::Json {
            let line = serde_json::json!({
                "ts": time::rfc3339(SystemTime::now()),
                "event": "listening",
                "addr": bound,
                "max_sessions": if a.once { 1 } else { max_sessions },
                "once": a.once,
            });
            eprintln!("{line}");
        } else {
            let limit = if a.once {
                "one run, then exit".to_string()
            } else {
                format!("up to {max_sessions} runs at once")
            };
            eprintln!("netsweep serve: listening on {bound} ({limit}; Ctrl-C stops)");
        }
    }
    let defaults = ServerLimits::default();
    let limits = ServerLimits {
        max_size: a.max_size.unwrap_or(defaults.max_size),
        max_session: a.max_duration.unwrap_or(defaults.max_session),
        max_rate_bps: a.max_rate,
        max_flows: a.max_flows.unwrap_or(defaults.max_flows),
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
    };
    match serve(listener, Arc::new(Registry), opts, stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failure(format!("server failed: {e}")),
    }
}
