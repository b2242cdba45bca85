//! One run of a scenario, whatever starts it (`runner.rs` for one client, `clients.rs` for
//! many): the options it runs with, how it ended, and the pieces both kinds share (its
//! target address, its log files, its record when it never started).

use crate::error::{LabError, Result};
use crate::lab::Lab;
use crate::scenario::ScenarioRun;
use serde::Serialize;
use std::fs::File;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long `netsweep serve` gets to start listening.
pub const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Options of [`run_scenario_with`].
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The netsweep binary to run in the namespaces.
    pub exe: PathBuf,
    /// Where results, logs, `lab.json` and `index.json` go.
    pub out_dir: PathBuf,
    /// Run id of the lab (default: a fresh one).
    pub run_id: Option<String>,
    /// How long the server gets to start listening.
    pub server_ready_timeout: Duration,
}

impl RunOptions {
    /// Defaults for `exe` and `out_dir`.
    pub fn new(exe: &Path, out_dir: &Path) -> Self {
        RunOptions {
            exe: exe.to_path_buf(),
            out_dir: out_dir.to_path_buf(),
            run_id: None,
            server_ready_timeout: SERVER_READY_TIMEOUT,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioRunStatus {
    /// The client exited 0.
    Ok,
    /// The client exited non-zero.
    Failed,
    /// The client ran past its timeout and was killed.
    TimedOut,
    /// The server did not start listening (or exited early).
    ServerFailed,
    /// The lab could not be used for this run (bad target, spawn failure).
    Error,
    /// Ctrl-C / SIGTERM stopped it.
    Interrupted,
    /// Not started because the scenario was interrupted earlier.
    Skipped,
}

/// What one run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioRunOutcome {
    /// Run name.
    pub name: String,
    /// Client host.
    pub client: String,
    /// Server host.
    pub server: String,
    /// `ADDR:PORT` the client was pointed at.
    pub target: String,
    /// The link or tunnel targeted, if the run named one.
    pub via: Option<String>,
    /// The client command line (inside the client's namespace).
    pub command: Vec<String>,
    /// Results file, relative to the output directory.
    pub results: String,
    /// Whether the results file exists after the run.
    pub results_written: bool,
    /// Client log (stdout and stderr), relative to the output directory.
    pub log: String,
    /// Server log, relative to the output directory.
    pub server_log: String,
    /// How it ended.
    pub status: ScenarioRunStatus,
    /// The client's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Wall time of the client, in seconds.
    pub duration_secs: f64,
    /// Why it did not succeed, when it did not.
    pub message: Option<String>,
    /// The cell it measured (an index into `design.cells`).
    pub cell: usize,
    /// Which repetition of the cell, from 1.
    pub repetition: u32,
    /// The lab it ran in, relative to the output directory.
    pub lab: String,
}

pub(crate) fn skipped(run: &ScenarioRun) -> ScenarioRunOutcome {
    ScenarioRunOutcome {
        name: run.name.clone(),
        client: run.client.clone(),
        server: run.server.clone(),
        target: String::new(),
        via: run.via.clone(),
        command: Vec::new(),
        results: format!("{}.json", run.name),
        results_written: false,
        log: format!("{}.log", run.name),
        server_log: format!("{}.server.log", run.name),
        status: ScenarioRunStatus::Skipped,
        exit_code: None,
        duration_secs: 0.0,
        message: Some("not started: the scenario was interrupted".into()),
        cell: run.cell,
        repetition: run.repetition,
        lab: String::new(),
    }
}

pub(crate) fn target(lab: &Lab, run: &ScenarioRun) -> Result<(IpAddr, String)> {
    let addr = match &run.via {
        Some(via) => lab.address(&run.server, via)?,
        None => lab.address_for(&run.client, &run.server)?,
    };
    Ok((IpAddr::V4(addr), format!("{addr}:{}", run.port)))
}

pub(crate) fn log_file(path: &Path) -> Result<(Stdio, Stdio)> {
    let f =
        File::create(path).map_err(|e| LabError::io(format!("creating {}", path.display()), e))?;
    let g = f
        .try_clone()
        .map_err(|e| LabError::io(format!("opening {}", path.display()), e))?;
    Ok((Stdio::from(f), Stdio::from(g)))
}
