//! `netsweep completions SHELL` and `netsweep man`: shell completion scripts and man pages,
//! generated from the clap definition of the command line (never written by hand), so they
//! always list exactly the flags and values `--help` shows.

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::error::{Error, Result};
use crate::output::write_stdout;
use clap::CommandFactory;
use std::path::Path;
use std::process::ExitCode;

/// Prints the completion script for a shell on stdout.
pub fn completions(a: CompletionsArgs) -> Result {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "netsweep", &mut out);
    write_stdout(&out)
}

/// Prints `netsweep.1` on stdout, or writes it and one page per subcommand into a directory.
pub fn man(a: ManArgs) -> Result {
    let cmd = Cli::command();
    match &a.dir {
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .map_err(|e| Error::failed(format!("rendering the man page: {e}")))?;
            write_stdout(&out)
        }
        Some(dir) => match write_pages(cmd, Path::new(dir)) {
            Ok(n) => {
                eprintln!("{n} man pages written to {dir}");
                Ok(ExitCode::SUCCESS)
            }
            Err(_) if Path::new(dir).exists() && !Path::new(dir).is_dir() => Err(Error::usage(
                format!("--dir {dir}: not a directory (name a directory to write the pages into)"),
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::usage(format!(
                "--dir {dir}: no such directory (create it first, e.g. mkdir -p {dir})"
            ))),
            Err(e) => Err(Error::failed(format!("writing man pages to {dir}: {e}"))),
        },
    }
}

/// `netsweep.1`, `netsweep-run.1`, `netsweep-lab-up.1`, …: one page per (sub)command.
fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<usize> {
    if !dir.is_dir() {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    let mut n = 0;
    let mut stack = vec![(cmd, String::from("netsweep"))];
    while let Some((cmd, name)) = stack.pop() {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            stack.push((sub.clone(), format!("{name}-{}", sub.get_name())));
        }
        let cmd = cmd.name(name.clone());
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut page)?;
        std::fs::write(dir.join(format!("{name}.1")), page)?;
        n += 1;
    }
    Ok(n)
}
