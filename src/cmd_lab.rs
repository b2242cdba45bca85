//! `netsweep lab`: build, show, enter and remove network-namespace testbeds.

use crate::cli::{LabArgs, LabCommand};
use crate::{failure, usage_error};
use netsweep_lab::{
    clean, generate_run_id, list_labs, preflight, Lab, LabError, Scenario, Topology,
};
use std::path::Path;
use std::process::ExitCode;

/// Reports a lab error with its exit code (2 for spec/usage/preflight, 1 for failures).
pub fn lab_failure(e: &LabError) -> ExitCode {
    eprintln!("netsweep: {e}");
    ExitCode::from(e.exit_code() as u8)
}

/// Loads a topology from a topology file or a scenario file.
pub fn load_topology(file: &str) -> Result<Topology, LabError> {
    let path = Path::new(file);
    let text =
        std::fs::read_to_string(path).map_err(|e| LabError::io(format!("reading {file}"), e))?;
    if text.lines().any(|l| {
        l.trim_start().starts_with("[topology]") || l.trim_start().starts_with("topology =")
    }) {
        Ok(Scenario::load(path)?.topology)
    } else {
        Topology::load(path)
    }
}

/// The lab to act on: the one named, or the only one up.
fn pick(id: Option<&str>) -> Result<Lab, String> {
    if let Some(id) = id {
        return Lab::attach(id).map_err(|e| e.to_string());
    }
    let labs: Vec<_> = list_labs()
        .into_iter()
        .filter_map(|(_, l)| l.ok())
        .collect();
    match labs.len() {
        0 => Err("no lab is up (start one with `netsweep lab up FILE`)".into()),
        1 => Ok(Lab::from_layout(labs.into_iter().next().expect("one lab"))),
        n => Err(format!(
            "{n} labs are up: name one with its id ({})",
            labs.iter()
                .map(|l| l.run_id.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

pub fn main(a: LabArgs) -> ExitCode {
    match a.command {
        LabCommand::Emulate { config, report } => emulate(&config, &report),
        LabCommand::Clean => {
            if let Err(e) = preflight() {
                return lab_failure(&e);
            }
            match clean() {
                Ok(report) => {
                    println!("{report}");
                    ExitCode::SUCCESS
                }
                Err(e) => lab_failure(&e),
            }
        }
        LabCommand::Show => {
            let labs = list_labs();
            if labs.is_empty() {
                println!("no lab is up");
            }
            for (path, l) in labs {
                match l {
                    Ok(layout) => println!("{layout}\n(state: {})\n", path.display()),
                    Err(e) => println!(
                        "{}: unreadable state ({e}); `netsweep lab clean` removes it",
                        path.display()
                    ),
                }
            }
            ExitCode::SUCCESS
        }
        LabCommand::Up { file, id } => {
            if let Err(e) = preflight() {
                return lab_failure(&e);
            }
            let topo = match load_topology(&file) {
                Ok(t) => t,
                Err(e) => return lab_failure(&e),
            };
            let id = id.unwrap_or_else(generate_run_id);
            let _guard = netsweep_lab::signals::install();
            match Lab::up(&topo, &id) {
                Ok(lab) => {
                    println!("{}", lab.describe());
                    let layout = lab.detach();
                    println!(
                        "lab {} is up; `netsweep lab down {}` removes it",
                        layout.run_id, layout.run_id
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => lab_failure(&e),
            }
        }
        LabCommand::Down { id } => {
            let lab = match pick(id.as_deref()) {
                Ok(l) => l,
                Err(e) => return crate::usage_error(e),
            };
            let run_id = lab.run_id().to_string();
            match lab.down() {
                Ok(t) => {
                    println!("lab {run_id} removed ({} namespaces)", t.namespaces.len());
                    ExitCode::SUCCESS
                }
                Err(e) => lab_failure(&e),
            }
        }
        LabCommand::Exec { host, id, argv } => {
            let lab = match pick(id.as_deref()) {
                Ok(l) => l,
                Err(e) => return crate::usage_error(e),
            };
            let r = lab.exec(&host, &argv);
            // An attached lab must survive this command.
            let _ = lab.detach();
            match r {
                Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8),
                Err(e) => lab_failure(&e),
            }
        }
    }
}

/// `lab emulate`: one link's path emulator, until SIGTERM (or SIGINT).
fn emulate(config: &str, report: &str) -> ExitCode {
    let text = match std::fs::read_to_string(config) {
        Ok(t) => t,
        Err(e) => {
            return failure(format!(
                "cannot read the emulator's configuration {config}: {e}"
            ))
        }
    };
    let cfg: netsweep_emu::Config = match serde_json::from_str(&text) {
        Ok(c) => c,
        Err(e) => return usage_error(format!("bad emulator configuration {config}: {e}")),
    };
    let stop = crate::signal::install();
    // SIGUSR1 (from the scenario runner, before each run): a new lateness window.
    let window = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGUSR1, window.clone()) {
        return failure(format!("cannot handle SIGUSR1: {e}"));
    }
    match netsweep_emu::run::run(&cfg, &stop, &window, std::path::Path::new(report)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failure(format!("path emulator of link {}: {e}", cfg.link)),
    }
}
