//! A reader that goes away (`netsweep list | head`) must never make netsweep panic: the
//! printing commands end quietly by SIGPIPE, as coreutils do, and a run keeps measuring and
//! saves its results file (issue 15 item 5). Each command here writes into a pipe whose read
//! end is already closed, so every write fails with EPIPE.

use crate::common::*;
use netsweep_model::results;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// Runs netsweep with stdout on a pipe nobody reads; returns its exit status and stderr.
fn into_closed_pipe(args: &[&str]) -> (std::process::ExitStatus, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(bin())
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (o.status, String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn printing_commands_end_quietly_on_a_closed_pipe() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tcp-pingpong.json");
    let cases: &[&[&str]] = &[
        &["list"],
        &["report", data],
        &["report", data, "--format", "csv"],
        &["compare", data, data],
        &["man"],
        &["completions", "bash"],
    ];
    for args in cases {
        let (status, err) = into_closed_pipe(args);
        assert!(
            !err.contains("panicked"),
            "netsweep {args:?} panicked: {err}"
        );
        assert_eq!(
            status.signal(),
            Some(libc::SIGPIPE),
            "netsweep {args:?} should end by SIGPIPE like `ls | head`: {status:?}, {err}"
        );
    }
}

#[test]
fn a_run_keeps_measuring_and_saves_when_stdout_closes() {
    let dir = scratch("closed-stdout-run");
    let mut args = vec![
        "run",
        "--sizes",
        "1,2,3",
        "--save-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(QUICK);
    let (status, err) = into_closed_pipe(&args);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(status.code(), Some(0), "{err}");
    let saved: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let run = results::load(&std::fs::read_to_string(&saved[0]).unwrap()).unwrap();
    assert_eq!(run.points.len(), 3);
    assert!(
        matches!(run.status, results::RunStatus::Complete),
        "{:?}",
        run.status
    );
}
