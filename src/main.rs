//! netsweep: a protocol-independent network performance evaluator. This binary is only the
//! command line; measurement lives in the crates.

mod atomic_file;
mod cli;
mod cli_lab;
mod cli_exporter;
mod cli_serve;
mod cmd_compare;
mod cmd_docs;
mod cmd_exporter;
mod cmd_lab;
mod cmd_list;
mod cmd_mesh;
mod cmd_report;
mod cmd_run;
mod cmd_scenario;
mod cmd_serve;
mod colour;
mod experiment;
mod exporter_query;
mod iperf3_run;
mod mpi_run;
mod output_path;
mod parse;
mod progress;
mod signal;
mod sink;
mod values;

use clap::Parser;
use std::process::ExitCode;

/// Exit code for usage errors (bad flags, sizes, files).
pub const EXIT_USAGE: u8 = 2;
/// Exit code for a run that failed (a failed write of its results included).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code for a run interrupted by Ctrl-C or SIGTERM that saved what it measured.
pub const EXIT_INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let command = cli.command.unwrap_or(cli::Command::Run(Box::new(cli.run)));
    if !matches!(
        command,
        cli::Command::Run(_)
            | cli::Command::Serve(_)
            | cli::Command::Scenario(_)
            | cli::Command::Mesh(_)
            | cli::Command::Exporter(_)
    ) {
        signal::quiet_broken_pipe();
    }
    match command {
        cli::Command::Run(args) => cmd_run::main(*args),
        cli::Command::Serve(args) => cmd_serve::main(args),
        cli::Command::Report(args) => cmd_report::main(args),
        cli::Command::Compare(args) => cmd_compare::main(args),
        cli::Command::List => cmd_list::main(),
        cli::Command::Lab(args) => cmd_lab::main(args),
        cli::Command::Scenario(args) => cmd_scenario::main(args),
        cli::Command::Mesh(args) => cmd_mesh::main(*args),
        cli::Command::Exporter(args) => cmd_exporter::main(args),
        cli::Command::Completions(args) => cmd_docs::completions(args),
        cli::Command::Man(args) => cmd_docs::man(args),
    }
}

/// Prints a usage error and returns exit code 2.
pub fn usage_error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("netsweep: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// Prints a run failure and returns exit code 1.
pub fn failure(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("netsweep: {msg}");
    ExitCode::from(EXIT_FAILURE)
}
