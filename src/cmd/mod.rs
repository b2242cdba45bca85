//! The commands, one module each: `run` (and its front ends `mesh`, `scenario`), `serve`,
//! `report`/`compare`, `rpm`, `lab`, `exporter`, `list`, and the generated docs. [`run`] dispatches.

mod compare;
mod docs;
mod exporter;
mod lab;
mod list;
mod mesh;
mod report;
mod rpm;
mod run;
mod scenario;
mod serve;

use crate::cli::{Cli, Command};
use crate::error::Result;

/// Carries out the command line's command (`run` when none is given).
pub fn run(cli: Cli) -> Result {
    let command = cli.command.unwrap_or(Command::Run(Box::new(cli.run)));
    // Commands that write a table or a file to a pipe stop quietly when the reader goes
    // away; the ones that measure or serve handle the signal themselves.
    if !matches!(
        command,
        Command::Run(_)
            | Command::Serve(_)
            | Command::Scenario(_)
            | Command::Mesh(_)
            | Command::Exporter(_)
            | Command::Rpm(_)
    ) {
        crate::signal::quiet_broken_pipe();
    }
    match command {
        Command::Run(args) => run::main(*args),
        Command::Serve(args) => serve::main(args),
        Command::Report(args) => report::main(args),
        Command::Compare(args) => compare::main(args),
        Command::Rpm(args) => rpm::main(args),
        Command::List => list::main(),
        Command::Lab(args) => lab::main(args),
        Command::Scenario(args) => scenario::main(args),
        Command::Mesh(args) => mesh::main(*args),
        Command::Exporter(args) => exporter::main(args),
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
    }
}
