//! `netsweep serve`: listens for `netsweep run` clients until Ctrl-C.

use crate::cli::ServeArgs;
use crate::{failure, signal, usage_error};
use netsweep_core::server::{serve, ServeOptions};
use netsweep_transport::Registry;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::process::ExitCode;
use std::sync::Arc;

pub fn main(a: ServeArgs) -> ExitCode {
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
    let bound = listener
        .local_addr()
        .map_or(addr.to_string(), |a| a.to_string());
    if !a.quiet {
        eprintln!("netsweep serve: listening on {bound} (Ctrl-C stops)");
    }
    let opts = ServeOptions {
        once: a.once,
        verbose: !a.quiet,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    };
    match serve(listener, Arc::new(Registry), opts, stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failure(format!("server failed: {e}")),
    }
}
