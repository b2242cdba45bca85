//! Colours (issue 15 item 5): on a terminal the table's header is bold and rows that missed
//! the precision target yellow; with `NO_COLOR` set, in a pipe and in files there is no escape
//! sequence at all. The terminal is a real pty from util-linux's `script`.

use crate::common::*;
use std::process::Command;

const BOLD: &str = "\x1b[1m";
const YELLOW: &str = "\x1b[33m";

/// A sweep whose points cannot reach their precision: every row is marked `~`. The target is
/// ±0.0001%, finer than the latency histogram resolves a round trip (0.1%): a pingpong's
/// interval is never narrower than that. (Before it was, trials whose medians fell in one
/// bucket claimed ±0.0% and met the target: a CI run saw it at 2 bytes.)
fn args() -> Vec<&'static str> {
    vec![
        "run",
        "--sizes",
        "1,2",
        "--no-save",
        "--trial-time",
        "5ms",
        "--max-point-time",
        "20ms",
        "--precision",
        "0.0001%",
    ]
}

fn on_a_pty(no_color: bool) -> String {
    let cmd = std::iter::once(bin())
        .chain(args())
        .collect::<Vec<_>>()
        .join(" ");
    let mut c = Command::new("script");
    c.args(["-qec", &cmd, "/dev/null"]).env_remove("NO_COLOR");
    if no_color {
        c.env("NO_COLOR", "1");
    }
    let o = c.output().unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
#[ignore = "needs script (util-linux): ./run-tests runs it as root"]
fn a_terminal_gets_colours_unless_no_color_is_set() {
    require_tool("a_terminal_gets_colours", "script", "util-linux");
    let tty = on_a_pty(false);
    assert!(tty.contains(&format!("{BOLD}netsweep ")), "{tty:?}");
    let missed = tty.lines().filter(|l| l.contains(" ~ ")).count();
    assert_eq!(missed, 2, "{tty:?}");
    for l in tty.lines().filter(|l| l.contains(" ~ ")) {
        assert!(l.contains(YELLOW), "a missed row is yellow: {l:?}");
    }
    let plain = on_a_pty(true);
    assert!(plain.contains("netsweep "));
    assert!(
        !plain.contains(BOLD) && !plain.contains(YELLOW),
        "{plain:?}"
    );
}

#[test]
fn pipes_and_files_get_no_colour() {
    let o = Command::new(bin())
        .args(args())
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(" ~ ") && !out.contains('\x1b'), "{out:?}");
    let dir = scratch("colour");
    let f = dir.join("t.txt");
    let mut a = args();
    a.extend(["-o", f.to_str().unwrap()]);
    let o = Command::new(bin()).args(&a).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(!std::fs::read_to_string(&f).unwrap().contains('\x1b'));
}
