//! Running the external tools (`ip`, `tc`, `nft`, `ethtool`): found on PATH or in the sbin
//! directories, bounded by a timeout, failures reported with the command line, its stderr and
//! a fix.

use crate::error::{LabError, Result};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long any one tool invocation may take.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

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

fn is_executable(p: &std::path::Path) -> bool {
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

/// Runs `tool args…` with optional stdin, capturing output, within [`TOOL_TIMEOUT`].
/// Does not judge the exit status.
pub fn output(tool: &str, args: &[String], stdin: Option<&str>) -> Result<Output> {
    let line = command_line(tool, args);
    let mut cmd = command(tool);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| LabError::Command {
        what: format!("running {tool}"),
        command: line.clone(),
        status: format!("could not start: {e}"),
        stderr: String::new(),
        hint: hint_for(tool, "", true),
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    let out = spawn_reader(child.stdout.take());
    let err = spawn_reader(child.stderr.take());
    let status = wait_timeout(&mut child, TOOL_TIMEOUT)
        .map_err(|e| LabError::io(format!("waiting for `{line}`"), e))?;
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err(LabError::Command {
            what: format!("running {tool}"),
            command: line,
            status: format!("timed out after {} s", TOOL_TIMEOUT.as_secs()),
            stderr: fmt_stderr(&stderr),
            hint: String::new(),
        }),
    }
}

/// Runs `tool args…` and requires success; the error says what the lab was doing (`what`).
pub fn run(what: &str, tool: &str, args: &[String], stdin: Option<&str>) -> Result<String> {
    let out = output(tool, args, stdin)?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    Err(LabError::Command {
        what: what.to_string(),
        command: command_line(tool, args),
        status: match out.status.code() {
            Some(c) => format!("exited with {c}"),
            None => "was killed by a signal".to_string(),
        },
        stderr: fmt_stderr(&out.stderr),
        hint: hint_for(effective_tool(tool, args), &out.stderr, false),
    })
}

/// The tool that really ran: `ip netns exec NS /usr/sbin/ethtool …` is ethtool's failure.
fn effective_tool<'a>(tool: &'a str, args: &'a [String]) -> &'a str {
    if tool == "ip"
        && args.first().is_some_and(|a| a == "netns")
        && args.get(1).is_some_and(|a| a == "exec")
    {
        if let Some(inner) = args.get(3) {
            return inner.rsplit('/').next().unwrap_or(inner);
        }
    }
    tool
}

fn fmt_stderr(s: &str) -> String {
    let s = s.trim();
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

/// The command as a shell would show it.
pub fn command_line(tool: &str, args: &[String]) -> String {
    let mut s = tool.to_string();
    for a in args {
        s.push(' ');
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
            s.push_str(&format!("'{}'", a.replace('\'', "'\\''")));
        } else {
            s.push_str(a);
        }
    }
    s
}

/// A fix for common failures.
fn hint_for(tool: &str, stderr: &str, missing: bool) -> String {
    let fix = if missing {
        Some(format!(
            "{tool} is not installed: apt-get install iproute2 nftables ethtool"
        ))
    } else if tool == "ethtool" {
        Some("the interface does not support changing that feature: check the names with `ethtool -k` and fix `offloads`".to_string())
    } else if stderr.contains("Operation not permitted") || stderr.contains("Permission denied") {
        Some("run as root (sudo)".to_string())
    } else if stderr.contains("File exists") {
        Some("it already exists: remove the old lab with `netsweep lab down RUN_ID` or `netsweep lab clean`".to_string())
    } else if stderr.contains("Unknown device type")
        || stderr.contains("Unknown qdisc")
        || (tool == "tc" && stderr.contains("No such file or directory"))
    {
        Some("this kernel lacks the module: load it (modprobe veth vxlan sch_htb sch_tbf) or drop that feature from the topology".to_string())
    } else {
        None
    };
    fix.map(|f| format!("\n  fix: {f}")).unwrap_or_default()
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
    fn run_reports_status_stderr_and_command() {
        let e = run(
            "testing",
            "sh",
            &[
                "-c".into(),
                "echo 'Operation not permitted' >&2; exit 3".into(),
            ],
            None,
        )
        .unwrap_err();
        let m = e.to_string();
        assert!(m.starts_with("testing: `sh -c 'echo"), "{m}");
        assert!(m.contains("exited with 3: Operation not permitted"), "{m}");
        assert!(m.contains("fix: run as root"), "{m}");
        assert_eq!(e.exit_code(), 1);
    }

    #[test]
    fn run_passes_stdin_and_returns_stdout() {
        let out = run("cat", "cat", &[], Some("hello")).unwrap();
        assert_eq!(out, "hello");
    }

    #[test]
    fn a_missing_tool_says_what_to_install() {
        let e = run("x", "no-such-tool-netsweep", &[], None).unwrap_err();
        assert!(e.to_string().contains("apt-get install"), "{e}");
    }
}
