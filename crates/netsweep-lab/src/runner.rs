//! Running a scenario: lab up, then for each run `netsweep serve` in the server host and
//! `netsweep run` in the client host, results and logs saved under the output directory with
//! `lab.json` and `index.json`, and the lab torn down on success, failure and Ctrl-C alike.
//!
//! The runner relies only on the binary's exit status and the files it writes.

use crate::clients::one_run;
use crate::error::{LabError, Result};
use crate::lab::Lab;
use crate::layout::Layout;
use crate::names;
pub(crate) use crate::run_outcome::skipped;
pub use crate::run_outcome::{
    RunOptions, ScenarioRunOutcome, ScenarioRunStatus, SERVER_READY_TIMEOUT,
};
use crate::scenario::{Compare, Scenario, ScenarioRun};
use crate::signals;
use netsweep_model::experiment::{Claim, Design, Outcome, Verdict};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// `schema` of `index.json`.
pub const INDEX_SCHEMA: &str = "netsweep-scenario-index";
/// `schema_version` of `index.json`.
pub const INDEX_SCHEMA_VERSION: u32 = 1;

pub use crate::children::{listening, proc_net_listens};
/// What a scenario did.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioOutcome {
    /// Always [`INDEX_SCHEMA`].
    pub schema: &'static str,
    /// [`INDEX_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Scenario name.
    pub scenario: String,
    /// Scenario description.
    pub description: Option<String>,
    /// Scenario file.
    pub scenario_file: Option<PathBuf>,
    /// Lab run id.
    pub run_id: String,
    /// Start time (Unix seconds).
    pub started_unix: u64,
    /// End time (Unix seconds), once finished.
    pub finished_unix: Option<u64>,
    /// The lab description, relative to the output directory.
    pub lab: String,
    /// Every run, in order.
    pub runs: Vec<ScenarioRunOutcome>,
    /// The comparisons the scenario asks for.
    pub compare: Vec<Compare>,
    /// The factors, cells, repetitions and order of the runs.
    pub design: Design,
    /// The claims, with their verdicts once the runs are done (see `verdicts`).
    pub claims: Vec<Claim>,
    /// Each claim's verdict on the results, in claim order; the caller evaluates them.
    pub verdicts: Vec<Verdict>,
    /// Every lab the runs used (one per combination of lab-property levels).
    pub labs: Vec<String>,
    /// SIGINT/SIGTERM stopped the scenario.
    pub interrupted: bool,
    /// What teardown could not remove (empty when clean).
    pub teardown_errors: Vec<String>,
    /// The output directory.
    #[serde(skip)]
    pub out_dir: PathBuf,
}

impl ScenarioOutcome {
    /// Whether every run succeeded and the lab was removed.
    pub fn all_ok(&self) -> bool {
        !self.interrupted
            && self.teardown_errors.is_empty()
            && self.runs.iter().all(|r| r.status == ScenarioRunStatus::Ok)
    }

    /// 0 when all ran, 130 when interrupted, else 1.
    pub fn exit_code(&self) -> i32 {
        if self.interrupted {
            130
        } else if self.all_ok() {
            0
        } else {
            1
        }
    }

    /// Path of `index.json`.
    pub fn index_path(&self) -> PathBuf {
        self.out_dir.join("index.json")
    }

    /// Path of `lab.json`.
    pub fn lab_path(&self) -> PathBuf {
        self.out_dir.join(&self.lab)
    }

    /// Rewrites `index.json` (after the verdicts are in).
    pub fn write_index(&self) -> Result<()> {
        write_json(&self.index_path(), self)
    }

    /// True when a claim's verdict is `fails`, or `invalid` (its figures cannot all hold).
    pub fn a_claim_fails(&self) -> bool {
        self.verdicts
            .iter()
            .any(|v| matches!(v.outcome, Outcome::Fails | Outcome::Invalid))
    }
}

/// Progress reports for the caller to print.
#[derive(Debug)]
pub enum Progress<'a> {
    /// The lab is up.
    LabUp(&'a Layout),
    /// A run is starting.
    RunStarting {
        /// 0-based index.
        index: usize,
        /// Number of runs.
        total: usize,
        /// The run.
        run: &'a ScenarioRun,
        /// `ADDR:PORT`.
        target: &'a str,
        /// Client command line.
        command: &'a [String],
    },
    /// A run ended.
    RunFinished {
        /// 0-based index.
        index: usize,
        /// Number of runs.
        total: usize,
        /// What happened.
        outcome: &'a ScenarioRunOutcome,
    },
    /// The lab was torn down.
    LabDown,
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| {
        LabError::io(
            format!("encoding {}", path.display()),
            std::io::Error::other(e),
        )
    })?;
    netsweep_atomic::write_atomic(path, &(text + "\n"))
        .map_err(|e| LabError::io(format!("writing {}", path.display()), e))
}

/// Runs `scenario` with `exe` as the netsweep binary, writing into `out_dir`.
pub fn run_scenario<F: FnMut(&Progress<'_>)>(
    scenario: &Scenario,
    exe: &Path,
    out_dir: &Path,
    progress: F,
) -> Result<ScenarioOutcome> {
    run_scenario_with(scenario, &RunOptions::new(exe, out_dir), progress)
}

/// Runs `scenario` with explicit options.
pub fn run_scenario_with<F: FnMut(&Progress<'_>)>(
    scenario: &Scenario,
    opts: &RunOptions,
    mut progress: F,
) -> Result<ScenarioOutcome> {
    let _signals = signals::install();
    let exe = std::fs::canonicalize(&opts.exe).map_err(|e| {
        LabError::Usage(format!(
            "netsweep binary {} not found ({e}): build it (`cargo build --release`) or give its path",
            opts.exe.display()
        ))
    })?;
    std::fs::create_dir_all(&opts.out_dir).map_err(|e| {
        LabError::Usage(format!(
            "cannot create output directory {} ({e}): pick a writable place with -o",
            opts.out_dir.display()
        ))
    })?;
    let out_dir = std::fs::canonicalize(&opts.out_dir)
        .map_err(|e| LabError::io(format!("resolving {}", opts.out_dir.display()), e))?;
    let run_id = opts.run_id.clone().unwrap_or_else(names::generate_run_id);

    let lab_file = |k: usize| {
        if scenario.topologies.len() > 1 {
            format!("lab-{}.json", k + 1)
        } else {
            "lab.json".to_string()
        }
    };
    let first = scenario.runs.first().map_or(0, |r| r.topology);
    let mut lab = Lab::up(&scenario.topologies[first], &run_id)?;
    let mut lab_at = first;
    let mut outcome = ScenarioOutcome {
        schema: INDEX_SCHEMA,
        schema_version: INDEX_SCHEMA_VERSION,
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        scenario_file: scenario.file.clone(),
        run_id: run_id.clone(),
        started_unix: now_unix(),
        finished_unix: None,
        lab: lab_file(first),
        runs: Vec::new(),
        compare: scenario.compare.clone(),
        design: scenario.design.clone(),
        claims: scenario.claims.clone(),
        verdicts: Vec::new(),
        labs: (0..scenario.topologies.len()).map(lab_file).collect(),
        interrupted: false,
        teardown_errors: Vec::new(),
        out_dir: out_dir.clone(),
    };
    // From here on the lab is removed whatever happens: `lab` drops on every early return.
    write_json(&out_dir.join(lab_file(first)), lab.layout())?;
    write_json(&outcome.index_path(), &outcome)?;
    progress(&Progress::LabUp(lab.layout()));

    let total = scenario.runs.len();
    for (index, run) in scenario.runs.iter().enumerate() {
        // A lab-property level: the next run needs another lab.
        if run.topology != lab_at && !signals::interrupted() {
            if let Err(e) = lab.down() {
                outcome.teardown_errors.push(e.to_string());
            }
            lab = Lab::up(&scenario.topologies[run.topology], &run_id)?;
            lab_at = run.topology;
            write_json(&out_dir.join(lab_file(lab_at)), lab.layout())?;
            progress(&Progress::LabUp(lab.layout()));
        }
        let lab_meta = out_dir.join(lab_file(lab_at));
        let results = if signals::interrupted() {
            vec![skipped(run)]
        } else {
            one_run(
                &lab,
                run,
                &exe,
                &out_dir,
                &lab_meta,
                opts,
                &mut |target, command| {
                    progress(&Progress::RunStarting {
                        index,
                        total,
                        run,
                        target,
                        command,
                    })
                },
            )
        };
        for mut result in results {
            result.lab = lab_file(run.topology);
            if matches!(
                result.status,
                ScenarioRunStatus::Interrupted | ScenarioRunStatus::Skipped
            ) {
                outcome.interrupted = true;
            }
            outcome.runs.push(result);
            if let Some(last) = outcome.runs.last() {
                progress(&Progress::RunFinished {
                    index,
                    total,
                    outcome: last,
                });
            }
        }
        write_json(&outcome.index_path(), &outcome)?;
    }
    if signals::interrupted() {
        outcome.interrupted = true;
    }
    if let Err(e) = lab.down() {
        outcome.teardown_errors.push(e.to_string());
    }
    progress(&Progress::LabDown);
    outcome.finished_unix = Some(now_unix());
    write_json(&outcome.index_path(), &outcome)?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_exit_codes() {
        let mut o = ScenarioOutcome {
            schema: INDEX_SCHEMA,
            schema_version: 1,
            scenario: "s".into(),
            description: None,
            scenario_file: None,
            run_id: "r".into(),
            started_unix: 0,
            finished_unix: None,
            lab: "lab.json".into(),
            runs: Vec::new(),
            compare: Vec::new(),
            design: Design::default(),
            claims: Vec::new(),
            verdicts: Vec::new(),
            labs: Vec::new(),
            interrupted: false,
            teardown_errors: Vec::new(),
            out_dir: PathBuf::from("/tmp"),
        };
        assert_eq!(o.exit_code(), 0);
        let mut r = skipped(&ScenarioRun {
            command: crate::scenario::RunCommand::Run,
            name: "a".into(),
            client: "c".into(),
            server: "s".into(),
            args: vec![],
            server_args: vec![],
            via: None,
            port: 7200,
            timeout_secs: 1,
            clients: 1,
            cell: 0,
            repetition: 1,
            topology: 0,
        });
        r.status = ScenarioRunStatus::Failed;
        o.runs.push(r);
        assert_eq!(o.exit_code(), 1);
        o.interrupted = true;
        assert_eq!(o.exit_code(), 130);
        let j = serde_json::to_value(&o).unwrap();
        assert_eq!(j["schema"], "netsweep-scenario-index");
        assert_eq!(j["runs"][0]["status"], "failed");
        assert_eq!(j["runs"][0]["results"], "a.json");
    }
}
