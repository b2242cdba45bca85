//! Where a run's results go: the sink (table on stdout, the `-o` file, the saved file, each
//! rewritten after every point, through netsweep-atomic), paths that name stdout, the progress
//! line and the table's colours.

pub mod colour;
pub mod path;
pub mod progress;
pub mod sink;

use crate::error::{Error, Result};
use std::io::Write;
use std::process::ExitCode;

/// Writes a command's whole output to stdout; a closed pipe (`netsweep man | head`) ends
/// quietly, any other failed write fails the command.
pub fn write_stdout(bytes: &[u8]) -> Result {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(Error::failed(format!("writing to stdout: {e}"))),
    }
}
