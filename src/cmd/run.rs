//! `netsweep run`: builds the RunSpec from flags, starts the in-process server when no host
//! is given, and drives the engine with the table/file sink.

use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::output::sink::Sink;
use crate::peer::mpi;
use crate::signal;
use netsweep_engine::engine::{self, RunContext, RunOutcome};
use netsweep_engine::error::NetError;
use netsweep_engine::iperf3;
use netsweep_engine::server::{serve, ServeOptions};
use netsweep_engine::target::{Named, Target};
use netsweep_model::spec::{Family, RunSpec, Transport};
use netsweep_model::time;
use netsweep_report::Format;
use netsweep_transport::Registry;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::SystemTime;

/// Where the run's results go: the table (or `--format`) on stdout unless `-o` names stdout
/// or `--quiet`; the `-o` file; the saved file unless `--no-save` or `-o` is already JSON.
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
        Some((p, _)) if crate::output::path::names_own_stdout(p) => None,
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

/// The testbed description of `--lab-meta FILE` (a scenario's runs record it), if given.
pub fn lab_meta(path: Option<&str>) -> Result<Option<serde_json::Value>> {
    let Some(p) = path else { return Ok(None) };
    std::fs::read_to_string(p)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string()))
        .map(Some)
        .map_err(|e| Error::usage(format!("cannot read --lab-meta {p}: {e}")))
}

pub fn main(a: RunArgs) -> Result {
    let family = if a.ipv6 { Family::Ipv6 } else { Family::Ipv4 };
    let spec = crate::cli::spec::build(&a, family).map_err(Error::Usage)?;
    if let Some(w) = crate::cli::spec::long_run_warning(&spec) {
        eprintln!("netsweep: warning: {w}");
    }
    let lab = lab_meta(a.lab_meta.as_deref())?;
    let auth_key = a.auth_key.clone();
    let now = SystemTime::now();
    let mut sink = output_plan(&a, &spec, now);
    let interrupted = signal::install();
    let factory = Arc::new(Registry);
    let version = env!("CARGO_PKG_VERSION");

    // The peer, chosen once (its refusals applied, the spec adjusted for an iperf3 server).
    let mut spec = spec;
    let named = Named {
        host: a.host.as_deref(),
        port: a.port,
        ipv6: a.ipv6,
        sizes_given: a.sizes.is_some(),
        tls_pin: a.tls_pin.is_some(),
    };
    // -t xdp needs a build with the feature before anything else is asked of it.
    let iperf3_peer = named.host.is_some_and(|h| h.starts_with(iperf3::SCHEME));
    if spec.transport == Transport::Xdp && !cfg!(feature = "xdp") && !iperf3_peer {
        return Err(Error::usage(netsweep_transport::xdp::BUILD_HINT));
    }
    let target = Target::choose(named, &mut spec).map_err(Error::Usage)?;
    let mut auth_key = auth_key;
    let mut local = None;
    // Rank 0's hold on the MPI world, kept until the run ends.
    let mut mpi_guard = None;
    let (server, peer_label) = match target {
        Target::Iperf3(addr) => {
            let started_at = time::rfc3339(now);
            let outcome = iperf3::run(&spec, addr, &started_at, &interrupted, &mut sink);
            return finish(&sink, ended(&outcome), outcome.result.points.len(), a.quiet);
        }
        Target::Netsweep(addr) => (addr, addr.to_string()),
        // Rank 1 serves; rank 0 finds it over MPI and holds the session's key.
        Target::Mpi => {
            match mpi::start(std::time::Duration::from_nanos(spec.timeout_ns), version)? {
                mpi::Role::Served => return Ok(ExitCode::SUCCESS),
                mpi::Role::Client(addr, key, guard) => {
                    auth_key = Some(key);
                    mpi_guard = Some(guard);
                    (addr, format!("mpi rank 1 at {addr}"))
                }
            }
        }
        // No host: start the server in-process on loopback and speak the same protocol to it.
        Target::InProcess => {
            let ip: IpAddr = if a.ipv6 {
                Ipv6Addr::LOCALHOST.into()
            } else {
                Ipv4Addr::LOCALHOST.into()
            };
            let listener = TcpListener::bind((ip, 0)).map_err(|e| {
                Error::failed(format!("cannot start the in-process server on {ip}: {e}"))
            })?;
            let addr = listener.local_addr().map_err(Error::failed)?;
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
        tls_pin: a.tls_pin.clone(),
    };
    let outcome = engine::run(&spec, &ctx, factory.as_ref(), &mut sink);
    if let Some((handle, stop)) = local {
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = handle.join();
    }
    // The MPI world is let go only once the session is over.
    drop(mpi_guard);
    let outcome = outcome.map_err(Error::failed)?;
    finish(&sink, ended(&outcome), outcome.result.points.len(), a.quiet)
}

/// How a run that got as far as a session ended.
fn ended(o: &RunOutcome) -> Ended {
    match &o.error {
        None => Ended::Complete,
        Some(NetError::Interrupted) => Ended::Interrupted,
        Some(e) => Ended::Failed(e.to_string()),
    }
}

/// How a run that got as far as a session ended.
#[derive(Debug)]
enum Ended {
    Complete,
    Interrupted,
    Failed(String),
}

/// Reports what was written and how the run ended: `Ok` when the run completed and every
/// results output was written in full; [`Error::Interrupted`] (130) when it was interrupted
/// and everything measured was saved; [`Error::Failed`] (1) otherwise — a run failure, or any
/// failed write of a results output (`-o`, the saved file, a format other than the table on
/// stdout), even in an interrupted run: its exit code must not say "saved" when something was
/// lost. "results saved to" and "output written to" name only files written in full.
fn finish(sink: &Sink, ended: Ended, points: usize, quiet: bool) -> Result {
    let lost = sink.failures();
    if !quiet {
        if let Some(p) = sink.saved() {
            eprintln!("results saved to {}", p.display());
        }
        if let Some(p) = sink.output() {
            eprintln!("output written to {}", p.display());
        }
    }
    let lost = lost.join("\n");
    match ended {
        Ended::Complete if lost.is_empty() => Ok(ExitCode::SUCCESS),
        Ended::Complete => Err(Error::Failed(lost)),
        Ended::Interrupted if lost.is_empty() => Err(Error::Interrupted(format!(
            "interrupted; {points} points measured and saved"
        ))),
        Ended::Interrupted => Err(Error::Failed(format!(
            "interrupted; {points} points measured\n{lost}"
        ))),
        Ended::Failed(e) if lost.is_empty() => Err(Error::Failed(e)),
        Ended::Failed(e) => Err(Error::Failed(format!("{e}\n{lost}"))),
    }
}
