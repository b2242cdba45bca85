//! The command line's one error type: what went wrong, and the exit code it maps to — 2 for a
//! usage error (the command asked for something that cannot be done: fix the command), 1 for
//! a run that failed (or lost a results write), 130 for a run interrupted by Ctrl-C or
//! SIGTERM that saved everything it measured. `main` prints it once, prefixed `netsweep: `.

use std::fmt;
use std::process::ExitCode;

/// Exit code for usage errors (bad flags, sizes, files).
pub const EXIT_USAGE: u8 = 2;
/// Exit code for a run that failed (a failed write of its results included).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code for a run interrupted by Ctrl-C or SIGTERM that saved what it measured.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Why a command did not succeed.
#[derive(Debug)]
pub enum Error {
    /// The command line cannot be carried out as given; the message says the fix.
    Usage(String),
    /// The command was carried out and failed.
    Failed(String),
    /// Interrupted; everything measured was saved.
    Interrupted(String),
}

/// A command's result: the exit code of a command that ran to its end (0, or a code it passes
/// through, such as `lab exec`'s), or why it did not.
pub type Result<T = ExitCode, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A usage error (exit 2).
    pub fn usage(msg: impl fmt::Display) -> Self {
        Self::Usage(msg.to_string())
    }

    /// A run failure (exit 1).
    pub fn failed(msg: impl fmt::Display) -> Self {
        Self::Failed(msg.to_string())
    }

    /// The process exit code this error maps to.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => EXIT_USAGE,
            Self::Failed(_) => EXIT_FAILURE,
            Self::Interrupted(_) => EXIT_INTERRUPTED,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(m) | Self::Failed(m) | Self::Interrupted(m) => f.write_str(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_maps_to_its_exit_code() {
        assert_eq!(Error::usage("x").exit_code(), 2);
        assert_eq!(Error::failed("x").exit_code(), 1);
        assert_eq!(Error::Interrupted("x".into()).exit_code(), 130);
        assert_eq!(Error::failed("disk full").to_string(), "disk full");
    }
}
