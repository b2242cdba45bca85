//! The lab's error type: every message says what went wrong and how to fix it.

use std::fmt;
use std::path::PathBuf;

/// A malformed topology or scenario file: where (file, line, column, field path) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The file at fault, when the text came from a file.
    pub file: Option<PathBuf>,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The field path, e.g. `links[1].b` (empty for a syntax error).
    pub field: String,
    /// What is wrong, and the fix.
    pub message: String,
}

impl SpecError {
    /// A semantic error at `field`, located later with [`SpecError::at`].
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        SpecError {
            file: None,
            line: None,
            column: None,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Sets the position from a byte offset into `source`.
    pub fn at(mut self, source: &str, offset: usize) -> Self {
        let (line, column) = line_col(source, offset);
        self.line = Some(line);
        self.column = Some(column);
        self
    }

    /// Sets the file name (kept if already set).
    pub fn in_file(mut self, file: Option<&std::path::Path>) -> Self {
        if self.file.is_none() {
            self.file = file.map(|f| f.to_path_buf());
        }
        self
    }
}

/// 1-based line and column (in characters) of byte `offset` in `source`.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(
                f,
                "{}:{line}:{}: ",
                file.display(),
                self.column.unwrap_or(1)
            )?,
            (Some(file), None) => write!(f, "{}: ", file.display())?,
            (None, Some(line)) => match self.column {
                Some(col) => write!(f, "line {line}, column {col}: ")?,
                None => write!(f, "line {line}: ")?,
            },
            (None, None) => {}
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "{}", self.message)
    }
}

/// Everything that can go wrong in the lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A malformed topology or scenario file (exit 2).
    #[error("{0}")]
    Spec(SpecError),
    /// A bad argument from the caller: unknown host, bad run id, no such lab (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The machine cannot build labs: not root, or a tool is missing (exit 2).
    #[error("{0}")]
    Preflight(String),
    /// An external command (`ip`, `tc`, `nft`, `ethtool`, …) failed (exit 1).
    #[error("{what}: `{command}` {status}{stderr}{hint}")]
    Command {
        /// What the lab was doing.
        what: String,
        /// The command line.
        command: String,
        /// "exited with 2", "could not start: …", "timed out".
        status: String,
        /// The command's stderr, prefixed with ": " when not empty.
        stderr: String,
        /// A suggested fix, prefixed with "\n  fix: " when not empty.
        hint: String,
    },
    /// A file or system call failed (exit 1).
    #[error("{context}: {source}")]
    Io {
        /// What the lab was doing.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// SIGINT or SIGTERM arrived; the lab was torn down (exit 130).
    #[error("interrupted: the lab was torn down")]
    Interrupted,
}

impl LabError {
    /// The process exit status this error deserves: 2 for usage, spec and preflight errors,
    /// 130 when interrupted, 1 for failures while running.
    pub fn exit_code(&self) -> i32 {
        match self {
            LabError::Spec(_) | LabError::Usage(_) | LabError::Preflight(_) => 2,
            LabError::Interrupted => 130,
            LabError::Command { .. } | LabError::Io { .. } => 1,
        }
    }

    /// An I/O error with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LabError::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<SpecError> for LabError {
    fn from(e: SpecError) -> Self {
        LabError::Spec(e)
    }
}

/// The lab's result type.
pub type Result<T, E = LabError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let s = "a = 1\nbb = 2\n";
        assert_eq!(line_col(s, 0), (1, 1));
        assert_eq!(line_col(s, 6), (2, 1));
        assert_eq!(line_col(s, 11), (2, 6));
        assert_eq!(line_col(s, 999), (3, 1));
    }

    #[test]
    fn spec_error_display_has_file_line_field() {
        let e = SpecError::new("links[1].b", "unknown host \"r2\"")
            .at("x\ny\n", 2)
            .in_file(Some(std::path::Path::new("t.toml")));
        assert_eq!(e.to_string(), "t.toml:2:1: links[1].b: unknown host \"r2\"");
        assert_eq!(LabError::from(e).exit_code(), 2);
    }
}
