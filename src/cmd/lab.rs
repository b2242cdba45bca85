//! `netsweep lab`: build, show, enter and remove network-namespace testbeds.

use crate::cli::{LabArgs, LabCommand};
use crate::error::{Error, Result};
use netsweep_lab::{
    clean, generate_run_id, list_labs, preflight, Lab, LabError, Scenario, Topology,
};
use std::path::Path;
use std::process::ExitCode;

impl From<LabError> for Error {
    /// A lab's spec, usage and preflight errors are usage errors (2), an interrupted build 130,
    /// the rest failures (1).
    fn from(e: LabError) -> Self {
        match e.exit_code() {
            2 => Error::Usage(e.to_string()),
            130 => Error::Interrupted(e.to_string()),
            _ => Error::Failed(e.to_string()),
        }
    }
}

/// Loads a topology from a topology file or a scenario file.
pub fn load_topology(file: &str) -> std::result::Result<Topology, LabError> {
    let path = Path::new(file);
    // A file that cannot be read is a usage error (exit 2), as `scenario check` has it.
    let text = std::fs::read_to_string(path).map_err(|e| {
        LabError::Usage(format!(
            "cannot read topology file {file}: {e}: check the path"
        ))
    })?;
    if text.lines().any(|l| {
        l.trim_start().starts_with("[topology]") || l.trim_start().starts_with("topology =")
    }) {
        Ok(Scenario::load(path)?.topology)
    } else {
        Topology::load(path)
    }
}

/// The lab to act on: the one named, or the only one up.
fn pick(id: Option<&str>) -> std::result::Result<Lab, String> {
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

/// Carries out the lab subcommand.
pub fn main(a: LabArgs) -> Result {
    match a.command {
        LabCommand::Emulate { config, report } => emulate(&config, &report),
        LabCommand::MpiAgent { netns, words } => {
            let mut c = netsweep_lab::mpi_launch::agent_command(&netns, &words)?;
            let st = c
                .status()
                .map_err(|e| Error::failed(format!("cannot run a command in {netns}: {e}")))?;
            // The daemon's own exit code passes through, as ssh passes it.
            Ok(ExitCode::from(st.code().unwrap_or(1).clamp(0, 255) as u8))
        }
        LabCommand::Clean => {
            preflight()?;
            println!("{}", clean()?);
            Ok(ExitCode::SUCCESS)
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
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Up { file, id } => {
            preflight()?;
            let topo = load_topology(&file)?;
            let id = id.unwrap_or_else(generate_run_id);
            let _guard = netsweep_lab::signals::install();
            let lab = Lab::up(&topo, &id)?;
            println!("{}", lab.describe());
            let layout = lab.detach();
            println!(
                "lab {} is up; `netsweep lab down {}` removes it",
                layout.run_id, layout.run_id
            );
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Down { id } => {
            let lab = pick(id.as_deref()).map_err(Error::Usage)?;
            let run_id = lab.run_id().to_string();
            let t = lab.down()?;
            println!("lab {run_id} removed ({} namespaces)", t.namespaces.len());
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Exec { host, id, argv } => {
            let lab = pick(id.as_deref()).map_err(Error::Usage)?;
            let r = lab.exec(&host, &argv);
            // An attached lab must survive this command.
            let _ = lab.detach();
            // The command's own exit code passes through.
            Ok(ExitCode::from(r?.code().unwrap_or(1).clamp(0, 255) as u8))
        }
    }
}

/// `lab emulate`: one link's path emulator, until SIGTERM (or SIGINT).
fn emulate(config: &str, report: &str) -> Result {
    let text = std::fs::read_to_string(config).map_err(|e| {
        Error::failed(format!(
            "cannot read the emulator's configuration {config}: {e}"
        ))
    })?;
    let cfg: netsweep_emu::Config = serde_json::from_str(&text)
        .map_err(|e| Error::usage(format!("bad emulator configuration {config}: {e}")))?;
    let stop = crate::signal::install();
    // SIGUSR1 (from the scenario runner, before each run): a new lateness window.
    let window = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, window.clone())
        .map_err(|e| Error::failed(format!("cannot handle SIGUSR1: {e}")))?;
    netsweep_emu::run::run(&cfg, &stop, &window, std::path::Path::new(report))
        .map(|()| ExitCode::SUCCESS)
        .map_err(|e| Error::failed(format!("path emulator of link {}: {e}", cfg.link)))
}
