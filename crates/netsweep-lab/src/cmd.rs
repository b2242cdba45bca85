//! Running the external tools (`ip`, `tc`, `nft`, `ethtool`) through netsweep-tool's runner
//! (found on PATH or in the sbin directories, bounded by a timeout), failures reported with
//! the command line, its stderr and a fix.

use crate::error::{LabError, Result};
use netsweep_tool::ToolError;
pub use netsweep_tool::{command, command_line, find_tool, wait_timeout, Output};
use std::time::Duration;

/// How long any one tool invocation may take.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `tool args…` with optional stdin, capturing output, within [`TOOL_TIMEOUT`].
/// Does not judge the exit status.
pub fn output(tool: &str, args: &[String], stdin: Option<&str>) -> Result<Output> {
    netsweep_tool::output(tool, args, stdin, TOOL_TIMEOUT).map_err(|e| match e {
        ToolError::Wait(io) => {
            LabError::io(format!("waiting for `{}`", command_line(tool, args)), io)
        }
        ToolError::Start(_) => LabError::Command {
            what: format!("running {tool}"),
            command: command_line(tool, args),
            status: e.to_string(),
            stderr: String::new(),
            hint: hint_for(tool, "", true),
        },
        ToolError::Timeout { ref stderr, .. } => LabError::Command {
            what: format!("running {tool}"),
            command: command_line(tool, args),
            status: e.to_string(),
            stderr: fmt_stderr(stderr),
            hint: String::new(),
        },
    })
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
