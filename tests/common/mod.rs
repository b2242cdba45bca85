//! Helpers shared by the integration tests: run the real binary, load its results, and the
//! hard prerequisite checks of the tests that are `#[ignore]`d unless `./run-tests` runs them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The netsweep binary built for these tests.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_netsweep")
}

/// A fresh scratch directory under the target dir.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Flags that keep a test run short.
pub const QUICK: &[&str] = &[
    "--trial-time",
    "5ms",
    "--max-point-time",
    "150ms",
    "--timeout",
    "5s",
];

/// Runs netsweep with `args`, returning its output.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("netsweep runs")
}

/// Runs a quick `netsweep run` writing JSON to `out`, and returns (output, parsed JSON).
pub fn run_json(out: &Path, args: &[&str]) -> (Output, serde_json::Value) {
    let mut all = vec!["run", "--no-save", "-q", "-o", out.to_str().unwrap()];
    all.extend_from_slice(QUICK);
    all.extend_from_slice(args);
    let o = run(&all);
    let text = std::fs::read_to_string(out).unwrap_or_else(|e| {
        panic!(
            "no results file ({e}); stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (
        o,
        serde_json::from_str(&text).expect("results file is JSON"),
    )
}

/// True when running as root (lab tests need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Panics with the fix unless running as root. Tests that call it are `#[ignore = "needs
/// root …"]`: without root the harness reports them ignored, and `./run-tests` as root runs
/// them (`--include-ignored`), so reaching this check without root is a mistake to report.
pub fn require_root(test: &str) {
    assert!(
        is_root(),
        "{test} needs root (network namespaces): run it as root, e.g. `sudo ./run-tests`"
    );
}

/// True when `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Panics naming the Debian package to install unless `tool` is on the PATH.
pub fn require_tool(test: &str, tool: &str, package: &str) {
    assert!(
        have(tool),
        "{test} needs {tool}: apt-get install -y {package} (./run-tests installs it as root)"
    );
}

/// Starts `netsweep serve` on `bind:port` inside a lab host and waits until it listens.
pub fn serve_in(lab: &netsweep_lab::Lab, host: &str, bind: &str, port: u16) -> std::process::Child {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let p = port.to_string();
    let child = lab
        .command(host, &[bin(), "serve", "--bind", bind, "--port", &p, "-q"])
        .unwrap()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !netsweep_lab::runner::listening(child.id(), port) {
        assert!(
            Instant::now() < deadline,
            "server did not listen on {bind}:{port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// A network namespace `nsw-<tag><pid>` with `lo` up, deleted on drop.
pub struct ScratchNetns(pub String);

impl ScratchNetns {
    pub fn new(tag: &str) -> ScratchNetns {
        let ns = ScratchNetns(format!("nsw-{}", netsweep_lab::testing::run_id(tag)));
        for args in [
            vec!["netns", "add", &ns.0],
            vec!["-n", &ns.0, "link", "set", "lo", "up"],
        ] {
            let o = std::process::Command::new("ip")
                .args(&args)
                .output()
                .expect("ip (iproute2) runs");
            assert!(
                o.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        ns
    }
}

impl Drop for ScratchNetns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}
