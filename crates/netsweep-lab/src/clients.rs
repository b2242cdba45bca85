//! One scenario run: its `netsweep serve` in the server host, then its `netsweep run` in the
//! client host — or, with `clients = N`, N of them at once against the one server (the seed
//! 002 "multiple clients / single server" test), each with its own results and log — and
//! the server's session limits raised to fit the clients and their background flows. A run
//! with `--transport mpi` has no server: `mpirun` starts both ranks ([`crate::mpi_launch`]).
//! A run with `command = "rpm"` runs `netsweep rpm` against `serve --rpm`, pinned to the
//! certificate the server's startup line names.

use crate::children::{stop, wait_listening, Ready, POLL};
use crate::error::LabError;
use crate::lab::Lab;
use crate::run_outcome::{
    log_file, skipped, target, RunOptions, ScenarioRunOutcome, ScenarioRunStatus,
};
use crate::scenario::{RunCommand, ScenarioRun, RPM_PORT};
use crate::signals;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The arguments `netsweep serve` gets for `run`: its own, and with several clients (or
/// background flows) room for every session they open from their one address, unless the
/// run sets those limits itself.
fn server_args(run: &ScenarioRun) -> Vec<String> {
    let mut args = run.server_args.clone();
    // The lab's server serves only the scenario's own clients: whatever transport, knob or
    // host fact they ask, unless the scenario says otherwise.
    if !args
        .iter()
        .any(|a| a == "--allow" || a.starts_with("--allow="))
    {
        args.extend(["--allow".to_string(), "all".to_string()]);
    }
    let flows = 1 + run
        .args
        .iter()
        .filter(|a| a.starts_with("--background"))
        .count();
    let sessions = run.clients as usize * flows;
    if sessions > 1 {
        for flag in ["--max-sessions", "--max-sessions-per-ip"] {
            if !args
                .iter()
                .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
            {
                args.extend([flag.to_string(), sessions.to_string()]);
            }
        }
    }
    args
}

/// The common `--start-at` of `clients` clients started now: a second, and a quarter of a
/// second for each (a debug build's client starts and connects in 50–100 ms on 2 CPUs).
fn start_time(clients: u32) -> String {
    let lead = Duration::from_millis(1000 + 250 * u64::from(clients));
    let at = std::time::SystemTime::now() + lead;
    let d = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

/// One `[[run]]`: its server, then its client (or, with `clients = N`, N clients at once
/// against the one server, each with its own results and log, named `<run>-<i>`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn one_run(
    lab: &Lab,
    run: &ScenarioRun,
    exe: &Path,
    out_dir: &Path,
    lab_meta: &Path,
    opts: &RunOptions,
    starting: &mut dyn FnMut(&str, &[String]),
) -> Vec<ScenarioRunOutcome> {
    let mut proto = skipped(run);
    proto.message = None;
    proto.status = ScenarioRunStatus::Error;
    let (addr, mut tgt) = match target(lab, run) {
        Ok(t) => t,
        Err(e) => {
            proto.message = Some(e.to_string());
            return vec![proto];
        }
    };
    let exe_s = exe.display().to_string();
    let mpi = crate::mpi_launch::is_mpi(&run.args);
    if mpi {
        // Rank 1 serves on a port of its choosing, at this address.
        tgt = format!("mpi rank 1 at {addr}");
        let results = out_dir.join(&proto.results);
        let _ = std::fs::remove_file(&results);
        match crate::mpi_launch::command(lab, run, &exe_s, addr, &results, lab_meta) {
            Ok(c) => proto.command = c,
            Err(e) => {
                proto.target = tgt;
                proto.message = Some(e.to_string());
                return vec![proto];
            }
        }
    }
    if run.command == RunCommand::Rpm {
        tgt = format!("{addr}:{RPM_PORT}");
    }
    proto.target = tgt.clone();
    let mut outs: Vec<ScenarioRunOutcome> = (1..=run.clients)
        .map(|i| {
            let mut out = proto.clone();
            if mpi {
                return out;
            }
            if run.clients > 1 {
                out.name = format!("{}-{i}", run.name);
                out.results = format!("{}.json", out.name);
                out.log = format!("{}.log", out.name);
            }
            let results = out_dir.join(&out.results);
            let _ = std::fs::remove_file(&results);
            let mut command = match run.command {
                RunCommand::Run => vec![exe_s.clone(), "run".into(), tgt.clone()],
                RunCommand::Rpm => vec![exe_s.clone(), "rpm".into(), tgt.clone()],
            };
            command.extend(run.args.iter().cloned());
            command.extend([
                "-o".into(),
                results.display().to_string(),
                "--lab-meta".into(),
                lab_meta.display().to_string(),
            ]);
            out.command = command;
            out
        })
        .collect();
    starting(&tgt, &outs[0].command);

    // Server (an mpi run's rank 1 serves instead).
    let mut server = None;
    if !mpi {
        let mut server_argv = vec![
            exe_s,
            "serve".into(),
            "--bind".into(),
            addr.to_string(),
            "--port".into(),
            run.port.to_string(),
        ];
        let rpm = run.command == RunCommand::Rpm;
        if rpm {
            server_argv.extend(["--rpm".into(), RPM_PORT.to_string()]);
        }
        server_argv.extend(server_args(run));
        let spawned = lab.command(&run.server, &server_argv).and_then(|mut c| {
            let (o, e) = log_file(&out_dir.join(&proto.server_log))?;
            c.stdin(Stdio::null()).stdout(o).stderr(e);
            c.spawn()
                .map_err(|e| LabError::io(format!("starting netsweep serve in {}", run.server), e))
        });
        let s = server.insert(match spawned {
            Ok(s) => s,
            Err(e) => {
                let m = e.to_string();
                return every(outs, |o| o.message = Some(m.clone()));
            }
        });
        let ready_port = if rpm { RPM_PORT } else { run.port };
        match wait_listening(s, ready_port, opts.server_ready_timeout) {
            Ready::Yes if rpm => {
                // The client trusts the one certificate this server presents.
                match certificate_pin(&out_dir.join(&proto.server_log)) {
                    Some(pin) => {
                        for out in &mut outs {
                            out.command.extend(["--tls-pin".into(), pin.clone()]);
                        }
                    }
                    None => {
                        stop(s);
                        return every(outs, |o| {
                            o.status = ScenarioRunStatus::ServerFailed;
                            o.message = Some(format!(
                                "the server's startup line names no certificate; see {}",
                                o.server_log
                            ));
                        });
                    }
                }
            }
            Ready::Yes => {}
            Ready::Interrupted => {
                stop(s);
                return every(outs, |o| {
                    o.status = ScenarioRunStatus::Interrupted;
                    o.message = Some("interrupted while the server was starting".into());
                });
            }
            Ready::No(why) => {
                stop(s);
                return every(outs, |o| {
                    o.status = ScenarioRunStatus::ServerFailed;
                    o.message = Some(format!("{why}; see {}", o.server_log));
                });
            }
        }
    }

    // Several clients begin their first point together (`--start-at`), when every one of
    // them has had time to start and connect: a sum over them is over one window.
    if run.clients > 1 && !mpi && !run.args.iter().any(|a| a.starts_with("--start-at")) {
        let at = start_time(run.clients);
        for out in &mut outs {
            out.command.extend(["--start-at".to_string(), at.clone()]);
        }
    }
    // Clients, all at once, within a window on the lab's path emulators.
    let window = crate::emulation::Window::open(lab.layout());
    let started = Instant::now();
    let mut clients = Vec::new();
    for out in &mut outs {
        let client = lab
            .command(&run.client, &out.command[..])
            .and_then(|mut c| {
                let (o, e) = log_file(&out_dir.join(&out.log))?;
                c.stdin(Stdio::null()).stdout(o).stderr(e);
                if mpi {
                    // Open MPI refuses root without both.
                    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
                }
                c.spawn().map_err(|e| {
                    LabError::io(format!("starting netsweep run in {}", run.client), e)
                })
            });
        match client {
            Ok(c) => clients.push(Some(c)),
            Err(e) => {
                out.message = Some(e.to_string());
                clients.push(None);
            }
        }
    }
    let deadline = started + Duration::from_secs(run.timeout_secs);
    let what = match run.command {
        RunCommand::Run => "netsweep run",
        RunCommand::Rpm => "netsweep rpm",
    };
    while clients.iter().any(Option::is_some) {
        for (slot, out) in clients.iter_mut().zip(outs.iter_mut()) {
            let Some(client) = slot else { continue };
            let done = match client.try_wait() {
                Ok(Some(st)) => {
                    out.exit_code = st.code();
                    if st.success() {
                        out.status = ScenarioRunStatus::Ok;
                    } else {
                        out.status = ScenarioRunStatus::Failed;
                        out.message = Some(match st.code() {
                            Some(c) => format!("{what} exited with {c}; see {}", out.log),
                            None => format!("{what} was killed by a signal; see {}", out.log),
                        });
                    }
                    true
                }
                Ok(None) if signals::interrupted() => {
                    stop(client);
                    out.status = ScenarioRunStatus::Interrupted;
                    out.message = Some("interrupted".into());
                    true
                }
                Ok(None) if Instant::now() >= deadline => {
                    stop(client);
                    out.status = ScenarioRunStatus::TimedOut;
                    out.message = Some(format!(
                        "{what} took longer than {} s and was stopped; raise `timeout` in the run",
                        run.timeout_secs
                    ));
                    true
                }
                Ok(None) => false,
                Err(e) => {
                    out.message = Some(format!("waiting for netsweep run: {e}"));
                    stop(client);
                    true
                }
            };
            if done {
                out.duration_secs = started.elapsed().as_secs_f64();
                *slot = None;
            }
        }
        std::thread::sleep(POLL);
    }
    if let Some(s) = server.as_mut() {
        stop(s);
    }
    let (emulators, warnings) = window.close();
    for out in &mut outs {
        let results = out_dir.join(&out.results);
        out.results_written = results.exists();
        if out.results_written && !window.is_empty() {
            if let Err(e) = crate::emulation::record(&results, &emulators, &warnings) {
                out.message = Some(format!("recording the path emulators' counters: {e}"));
            }
        }
        if !warnings.is_empty() {
            let w = warnings.join("; ");
            out.message = Some(
                out.message
                    .take()
                    .map_or(w.clone(), |m| format!("{m}; {w}")),
            );
        }
    }
    outs
}

/// The SHA-256 fingerprint of the certificate `netsweep serve` presents, from its startup
/// line in `log` ("… tls certificate sha256 AB:CD:… (…)").
fn certificate_pin(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let (_, after) = text
        .split_once("tls certificate sha256 ")
        .or_else(|| text.split_once("\"tls_fingerprint\":\""))?;
    let pin = after.split([' ', '"', '\n']).next()?;
    (pin.len() >= 64).then(|| pin.to_string())
}

/// Applies `f` to every outcome and returns them.
fn every(
    mut outs: Vec<ScenarioRunOutcome>,
    f: impl Fn(&mut ScenarioRunOutcome),
) -> Vec<ScenarioRunOutcome> {
    outs.iter_mut().for_each(f);
    outs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_makes_room_for_every_client_and_background_flow() {
        let mut run = ScenarioRun {
            command: crate::scenario::RunCommand::Run,
            name: "a".into(),
            client: "c".into(),
            server: "s".into(),
            args: vec!["--background".into(), "stream".into()],
            server_args: vec!["-q".into()],
            via: None,
            port: 7200,
            timeout_secs: 1,
            clients: 1,
            cell: 0,
            repetition: 1,
            topology: 0,
        };
        assert_eq!(
            server_args(&run),
            [
                "-q",
                "--allow",
                "all",
                "--max-sessions",
                "2",
                "--max-sessions-per-ip",
                "2"
            ]
        );
        run.clients = 4;
        run.server_args = vec!["--max-sessions=100".into(), "--allow=tos".into()];
        assert_eq!(
            server_args(&run),
            [
                "--max-sessions=100",
                "--allow=tos",
                "--max-sessions-per-ip",
                "8"
            ]
        );
        run.args.clear();
        run.clients = 1;
        assert!(server_args(&run) == ["--max-sessions=100", "--allow=tos"]);
    }

    #[test]
    fn the_pin_is_read_from_either_startup_line() {
        let fp = "AB:".repeat(31) + "CD";
        let dir = std::env::temp_dir().join(format!("nsw-pin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("text.log");
        std::fs::write(&text, format!("netsweep serve: listening on x (…; tls certificate sha256 {fp} (self-signed); Ctrl-C stops)\n")).unwrap();
        assert_eq!(certificate_pin(&text).as_deref(), Some(fp.as_str()));
        let json = dir.join("json.log");
        std::fs::write(
            &json,
            format!("{{\"event\":\"listening\",\"tls_fingerprint\":\"{fp}\"}}\n"),
        )
        .unwrap();
        assert_eq!(certificate_pin(&json).as_deref(), Some(fp.as_str()));
        let quiet = dir.join("quiet.log");
        std::fs::write(&quiet, "").unwrap();
        assert_eq!(certificate_pin(&quiet), None, "-q: no startup line, no pin");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
