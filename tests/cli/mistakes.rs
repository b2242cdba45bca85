//! What a new user types wrong (issue 40): each mistake gets a message that names the fix,
//! and a usage error exits 2.

use crate::common::*;
use std::process::Command;

fn netsweep(args: &[&str]) -> (i32, String) {
    let o = Command::new(bin()).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_misspelt_subcommand_is_suggested_not_looked_up() {
    let (code, err) = netsweep(&["lsit"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean 'list'"), "{err}");
    let (code, err) = netsweep(&["reprot", "x.json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean 'report'"), "{err}");
}

#[test]
fn misleading_messages_name_the_real_mistake() {
    let (code, err) = netsweep(&["run", "--sizes", "10..1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("start is above end"), "{err}");
    let (code, err) = netsweep(&["run", "--sizes", "-5"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("negative value '-5' for --sizes") && !err.contains("-- -5"),
        "{err}"
    );
    let (code, err) = netsweep(&["exporter", "--listen", "bogus"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not an address") && !err.contains("another exporter"),
        "{err}"
    );
    let (code, err) = netsweep(&["man", "--dir", "/etc/passwd"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not a directory") && !err.contains("mkdir"),
        "{err}"
    );
    let (code, err) = netsweep(&["serve", "--max-rate", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("carries nothing") && !err.contains("\"0mbit\""),
        "{err}"
    );
    let (code, err) = netsweep(&["lab", "up", "/nonexistent-netsweep-40.toml"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("check the path"), "{err}");
}

#[test]
fn a_results_file_without_points_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let golden = include_str!("../golden/tcp-pingpong.json");
    let mut v: serde_json::Value = serde_json::from_str(golden).unwrap();
    v.as_object_mut().unwrap().remove("points");
    let f = dir.path().join("nop.json");
    std::fs::write(&f, v.to_string()).unwrap();
    let (code, err) = netsweep(&["report", f.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("missing field `points`") && !err.contains("not JSON"),
        "{err}"
    );
}

/// Limits under which no client could be served are refused before the server listens.
#[test]
fn serve_refuses_limits_that_serve_nothing_at_startup() {
    for (args, says) in [
        (&["--max-size", "0"][..], "--max-size 0"),
        (&["--max-memory", "1"][..], "no session fits"),
        (&["--max-session-memory", "1k"][..], "no session fits"),
        (
            &["--iperf3", "0", "--iperf3-results", "/proc"][..],
            "cannot write there",
        ),
    ] {
        let mut a = vec!["serve", "--port", "0"];
        a.extend_from_slice(args);
        let (code, err) = netsweep(&a);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("listening"), "{args:?}: {err}");
        assert!(
            !err.contains("  "),
            "{args:?}: a run of spaces inside the message: {err}"
        );
    }
}

/// An output path under directories that do not exist yet: they are made, and said so.
#[test]
fn a_missing_output_directory_is_created_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let golden = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/tcp-pingpong.json"
    );
    let out = dir.path().join("new/sub/report.html");
    let (code, err) = netsweep(&["report", golden, "--html", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_file());
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("creating directory"))
        .collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains("new/sub"), "{err}");
}

/// The usage line of `netsweep ARGS --help`.
fn usage(args: &[&str]) -> String {
    let mut a = args.to_vec();
    a.push("--help");
    let o = Command::new(bin()).args(&a).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    out.lines()
        .find(|l| l.starts_with("Usage:"))
        .unwrap_or_default()
        .to_string()
}

/// docs/lab.md's commands and the README's promises against the command line.
#[test]
fn the_docs_say_what_the_command_line_takes() {
    let root = env!("CARGO_MANIFEST_DIR");
    let lab = std::fs::read_to_string(format!("{root}/docs/lab.md")).unwrap();
    // `lab show` takes no argument; `lab exec` picks a lab with --id.
    assert_eq!(usage(&["lab", "show"]), "Usage: netsweep lab show");
    assert!(lab.contains("| `netsweep lab show` |"), "docs/lab.md");
    assert!(usage(&["lab", "exec"]).contains("[OPTIONS] <HOST> -- <ARGV>..."));
    assert!(lab.contains("`netsweep lab exec [--id RUN_ID] HOST -- CMD…`"));
    assert!(!lab.contains("lab exec [RUN_ID]") && !lab.contains("lab show [RUN_ID]"));
    // -p's help names every pattern it takes, rate included.
    let help = Command::new(bin())
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let p = &help[help.find("--pattern").unwrap()..help.find("-R, --reverse").unwrap()];
    let p = p.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(p.contains(") or rate ("), "{p}");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    assert!(!readme.contains("<this repository's URL>"));
    assert!(!readme.contains("20–25 s"));
    let prio = readme.find("--priority 6 --background").unwrap();
    assert!(readme[prio.saturating_sub(300)..prio].contains("serve --allow priority"));
}

/// A rate far beyond the path with long trials: Ctrl-C ends the run at once, not at the end
/// of the trial in progress (issue 40: it used to need SIGKILL).
#[test]
fn ctrl_c_ends_a_hopeless_rate_trial_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut child = Command::new(bin())
        .args(["run", "-p", "rate", "--rate", "1e12", "--sizes", "64"])
        .args(["--trial-time", "5s", "-o", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let sent = std::time::Instant::now();
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > std::time::Duration::from_secs(15) {
            let _ = child.kill();
            panic!("still running 15 s after SIGINT");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let took = sent.elapsed();
    assert_eq!(status.code(), Some(130));
    assert!(
        took < std::time::Duration::from_secs(2),
        "{took:?} after SIGINT"
    );
    let saved = std::fs::read_to_string(&out).unwrap();
    assert!(saved.contains("\"interrupted\""), "{saved}");
}
