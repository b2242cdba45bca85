//! The progress line (issue 15 item 5): drawn on a terminal — bar, points done, elapsed, time
//! left, size being measured — erased before every table row, and never written when stderr
//! is a pipe or a file. The terminal is a real pty from util-linux's `script`.

use crate::common::*;
use std::process::Command;

fn sweep_args() -> Vec<&'static str> {
    let mut a = vec!["run", "--sizes", "1,2,3", "--no-save"];
    a.extend_from_slice(QUICK);
    a
}

#[test]
#[ignore = "needs script (util-linux): ./run-tests runs it as root"]
fn a_terminal_gets_a_progress_line_that_never_stays_in_the_table() {
    require_tool(
        "a_terminal_gets_a_progress_line_that_never_stays_in_the_table",
        "script",
        "util-linux",
    );
    let cmd = std::iter::once(bin())
        .chain(sweep_args())
        .collect::<Vec<_>>()
        .join(" ");
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let tty = String::from_utf8_lossy(&o.stdout);
    for (i, size) in ["1 B", "2 B", "3 B"].iter().enumerate() {
        let drawn = format!("] {i}/3 · ");
        let at = tty
            .find(&drawn)
            .unwrap_or_else(|| panic!("no {drawn:?} in {tty:?}"));
        let rest = &tty[at..];
        let line = &rest[..rest.find('\r').unwrap_or(rest.len())];
        assert!(line.ends_with(&format!("measuring {size}")), "{line:?}");
        assert_eq!(
            line.contains("left"),
            i > 0,
            "time left once a point is done: {line:?}"
        );
    }
    // Every drawn line is erased before the next row: no table row shares a line with it.
    for row in tty.split('\n') {
        let visible = row.rsplit("\x1b[2K").next().unwrap();
        assert!(
            !visible.contains("measuring"),
            "progress left on screen: {row:?}"
        );
    }
}

#[test]
fn pipes_get_no_progress_line() {
    let o = Command::new(bin()).args(sweep_args()).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("measuring") && !err.contains('\x1b'),
        "{err:?}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains('\x1b'), "{out:?}");
}

const TWO_RUNS: &str = r#"
name = "progress"
[topology]
[[topology.hosts]]
name = "client"
[[topology.hosts]]
name = "server"
[[topology.links]]
a = "client"
b = "server"
[[run]]
name = "first"
client = "client"
server = "server"
args = ["--sizes", "1,2", "--trial-time", "5ms", "--max-point-time", "100ms"]
[[run]]
name = "second"
client = "client"
server = "server"
args = ["--sizes", "1,2", "--trial-time", "5ms", "--max-point-time", "100ms"]
"#;

/// A scenario on a terminal gets the same bar, counting runs (issue 15 item 5).
#[test]
#[ignore = "needs root (lab namespaces) and script (util-linux): ./run-tests runs it as root"]
fn a_scenario_on_a_terminal_gets_a_bar_over_its_runs() {
    require_root("a_scenario_on_a_terminal_gets_a_bar_over_its_runs");
    let _l = netsweep_testkit::lab::lab_test("scenario_progress_bar");
    let dir = scratch("scenario-progress");
    let file = dir.join("two.toml");
    std::fs::write(&file, TWO_RUNS).unwrap();
    let cmd = format!(
        "{} scenario run {} -o {}",
        bin(),
        file.display(),
        dir.join("out").display()
    );
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .unwrap();
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{tty}");
    for (i, name) in ["first", "second"].iter().enumerate() {
        let drawn = format!("] {i}/2 · ");
        let at = tty
            .find(&drawn)
            .unwrap_or_else(|| panic!("no {drawn:?} in {tty:?}"));
        let rest = &tty[at..];
        let line = &rest[..rest.find(['\r', '\n']).unwrap_or(rest.len())];
        assert!(line.ends_with(&format!("running {name}")), "{line:?}");
        assert_eq!(line.contains("left"), i > 0, "{line:?}");
    }
    for row in tty.split('\n') {
        let visible = row.rsplit("\x1b[2K").next().unwrap();
        assert!(!visible.contains("running "), "bar left on screen: {row:?}");
    }
}
