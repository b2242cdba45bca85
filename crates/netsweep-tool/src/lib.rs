//! Running external tools (`ip`, `tc`, `ethtool`, `nft`): found on PATH or in the sbin
//! directories, output captured, every run bounded by a timeout so a hung tool can never
//! hang a session. The lab's runner (`netsweep_lab::cmd`) adds its errors and fixes on top.

#![warn(missing_docs)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a query of the host's state (`ip route get`, `tc qdisc show`, `ethtool -k`) may
/// take before its answer is given up.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(3);

/// Directories searched after PATH (root's tools live in sbin, which `sudo` may drop).
const EXTRA_DIRS: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin"];

/// The full path of `tool`, if it is installed.
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(EXTRA_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A `Command` for `tool` (its full path when found, else the bare name).
pub fn command(tool: &str) -> Command {
    Command::new(find_tool(tool).unwrap_or_else(|| PathBuf::from(tool)))
}

/// What a finished command printed.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Why a tool gave no [`Output`].
#[derive(Debug)]
pub enum ToolError {
    /// It could not be started (not installed, not executable).
    Start(std::io::Error),
    /// Waiting for it failed.
    Wait(std::io::Error),
    /// It was still running at the timeout and was killed; what it wrote to stderr so far.
    Timeout {
        /// The timeout it was given.
        after: Duration,
        /// Its standard error up to the kill.
        stderr: String,
    },
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Start(e) => write!(f, "could not start: {e}"),
            ToolError::Wait(e) => write!(f, "could not be waited for: {e}"),
            ToolError::Timeout { after, .. } => {
                write!(f, "timed out after {} s", after.as_secs_f64())
            }
        }
    }
}

/// Waits for `child` until `timeout`; kills it (by its pid) when time runs out.
/// Returns `None` on timeout.
pub fn wait_timeout(child: &mut Child, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(Some(st));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

fn spawn_reader<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut r) = r {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            s = String::from_utf8_lossy(&buf).into_owned();
        }
        s
    })
}

/// Runs `tool args…` with optional stdin, capturing its output, within `timeout` (the tool
/// is killed when it runs out). Does not judge the exit status.
pub fn output<S: AsRef<OsStr>>(
    tool: &str,
    args: &[S],
    stdin: Option<&str>,
    timeout: Duration,
) -> Result<Output, ToolError> {
    let mut cmd = command(tool);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(ToolError::Start)?;
    let out = spawn_reader(child.stdout.take());
    let err = spawn_reader(child.stderr.take());
    // Fed from its own thread, so neither a tool that never reads its input nor one that
    // fills its output pipe before reading can block us past the timeout: when the tool is
    // killed the pipe breaks and the writer ends.
    let feed = match (stdin, child.stdin.take()) {
        (Some(text), Some(mut pipe)) => {
            let text = text.to_owned();
            Some(std::thread::spawn(move || {
                let _ = pipe.write_all(text.as_bytes());
            }))
        }
        _ => None,
    };
    let status = wait_timeout(&mut child, timeout).map_err(ToolError::Wait)?;
    if let Some(feed) = feed {
        let _ = feed.join();
    }
    // The tool has exited or been killed: its pipes are closed unless a process it spawned
    // inherited them (none of the tools run here do).
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err(ToolError::Timeout {
            after: timeout,
            stderr,
        }),
    }
}

/// The standard output of a host-state query that succeeded within [`QUERY_TIMEOUT`];
/// `None` when the tool is missing, fails or hangs (the fact is then left out).
pub fn query(tool: &str, args: &[&str]) -> Option<String> {
    match output(tool, args, None, QUERY_TIMEOUT) {
        Ok(o) if o.status.success() => Some(o.stdout),
        _ => None,
    }
}

/// The command as a shell would show it.
pub fn command_line<S: AsRef<str>>(tool: &str, args: &[S]) -> String {
    let mut s = tool.to_string();
    for a in args {
        let a = a.as_ref();
        s.push(' ');
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
            s.push_str(&format!("'{}'", a.replace('\'', "'\\''")));
        } else {
            s.push_str(a);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh_and_not_nonsense() {
        assert!(find_tool("sh").is_some());
        assert!(find_tool("no-such-tool-netsweep").is_none());
    }

    #[test]
    fn output_captures_both_streams_and_stdin() {
        let o = output(
            "sh",
            &["-c", "cat; echo err >&2; exit 3"],
            Some("in"),
            QUERY_TIMEOUT,
        )
        .unwrap();
        assert_eq!((o.stdout.as_str(), o.stderr.as_str()), ("in", "err\n"));
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(query("sh", &["-c", "echo ok"]).as_deref(), Some("ok\n"));
        assert_eq!(query("sh", &["-c", "exit 1"]), None);
        assert_eq!(query("no-such-tool-netsweep", &[]), None);
    }

    /// A hung tool is killed at the timeout, even when it blocks reading stdin.
    #[test]
    fn a_hung_tool_is_killed_at_the_timeout() {
        let t0 = Instant::now();
        let e = output(
            "sh",
            &["-c", "echo partial >&2; exec sleep 30"],
            None,
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(20), "not killed");
        match e {
            ToolError::Timeout { stderr, .. } => assert_eq!(stderr, "partial\n"),
            other => panic!("expected a timeout, got {other}"),
        }
    }

    /// A tool that never reads its input, given more than a pipe holds, is still killed at
    /// the timeout (the input used to be written in full before the timeout started).
    #[test]
    fn a_tool_that_ignores_a_large_stdin_is_killed_at_the_timeout() {
        let input = "x".repeat(4 << 20);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = output(
                "sh",
                &["-c", "echo waiting >&2; exec sleep 30"],
                Some(&input),
                Duration::from_millis(200),
            );
            let _ = tx.send(r);
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Err(ToolError::Timeout { stderr, .. })) => assert_eq!(stderr, "waiting\n"),
            Ok(other) => panic!("expected a timeout, got {:?}", other.map(|o| o.status)),
            Err(_) => panic!("output() hung on a tool that does not read its stdin"),
        }
    }

    /// A tool that writes more than a pipe holds before reading its input completes.
    #[test]
    fn a_tool_that_writes_before_reading_completes() {
        let input = "y".repeat(1 << 20);
        let o = output(
            "sh",
            &["-c", "head -c 1048576 /dev/zero; wc -c"],
            Some(&input),
            Duration::from_secs(20),
        )
        .unwrap();
        assert!(o.status.success());
        assert_eq!(o.stdout.len(), (1 << 20) + "1048576\n".len());
        assert!(
            o.stdout.ends_with("1048576\n"),
            "{:?}",
            &o.stdout[o.stdout.len() - 20..]
        );
    }
}
