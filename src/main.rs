//! netsweep: a protocol-independent network performance evaluator. This binary is only the
//! command line: `cli` parses it, `cmd` carries out each command with the crates, `output`
//! writes what a run measured, `peer` reaches peers that are not a netsweep server (iperf3,
//! an MPI rank). Every command returns [`error::Result`]; `main` maps it to the exit code.

mod cli;
mod cmd;
mod error;
mod output;
mod peer;
mod signal;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let typo = cli::typo::misspelt_subcommand(&args);
    if let Some(msg) = typo.or_else(|| cli::typo::negative_number(&args)) {
        eprintln!("netsweep: {msg}");
        return ExitCode::from(2);
    }
    match cmd::run(cli::Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            for line in e.to_string().lines() {
                eprintln!("netsweep: {line}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}
