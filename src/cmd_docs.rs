//! `netsweep completions SHELL` and `netsweep man`: shell completion scripts and man pages,
//! generated from the clap definition of the command line (never written by hand), so they
//! always list exactly the flags and values `--help` shows.

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::{failure, usage_error};
use clap::CommandFactory;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Prints the completion script for a shell on stdout.
pub fn completions(a: CompletionsArgs) -> ExitCode {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "netsweep", &mut out);
    write_stdout(&out)
}

/// Prints `netsweep.1` on stdout, or writes it and one page per subcommand into a directory.
pub fn man(a: ManArgs) -> ExitCode {
    let cmd = Cli::command();
    match &a.dir {
        None => {
            let mut out = Vec::new();
            if let Err(e) = clap_mangen::Man::new(cmd).render(&mut out) {
                return failure(format!("rendering the man page: {e}"));
            }
            write_stdout(&out)
        }
        Some(dir) => match write_pages(cmd, Path::new(dir)) {
            Ok(n) => {
                eprintln!("{n} man pages written to {dir}");
                ExitCode::SUCCESS
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => usage_error(format!(
                "--dir {dir}: no such directory (create it first, e.g. mkdir -p {dir})"
            )),
            Err(e) => failure(format!("writing man pages to {dir}: {e}")),
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

/// Writes to stdout; a closed pipe (`netsweep man | head`) ends quietly.
fn write_stdout(bytes: &[u8]) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => failure(format!("writing to stdout: {e}")),
    }
}
