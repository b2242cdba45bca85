//! The `netsweep` executable as the root package's integration tests drive it: run it and
//! load its results, serve with it (`serve.rs`), against iperf3 (`iperf3.rs`) and nginx
//! (`nginx.rs`), scratch
//! directories, and the hard prerequisite checks of tests that are `#[ignore]`d unless
//! `./run-tests` runs them. Each test binary names it `common`.

pub mod iperf3;
pub mod nginx;
pub mod serve;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The directory Cargo put this test binary's package binaries in: the test runs from its
/// `deps/` folder.
fn profile_dir() -> PathBuf {
    let me = std::env::current_exe().expect("the test binary's path");
    let deps = me.parent().expect("the test binary's folder");
    if deps.ends_with("deps") {
        deps.parent().unwrap_or(deps).to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

/// The netsweep binary Cargo built beside these tests (`cargo test` builds a package's
/// binaries before its integration tests), or `$NETSWEEP_TEST_BIN` (to run a test against
/// another build, e.g. to show that it fails on the code before a fix).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("NETSWEEP_TEST_BIN").unwrap_or_else(|_| {
            let exe = profile_dir().join("netsweep");
            assert!(
                exe.exists(),
                "{} is missing: run the tests with `cargo test` (it builds the binary first)",
                exe.display()
            );
            exe.to_string_lossy().into_owned()
        })
    })
}

/// The target directory's `tmp/` (what Cargo gives integration tests as
/// `CARGO_TARGET_TMPDIR`), where every scratch directory goes.
pub fn target_tmp() -> PathBuf {
    let profile = profile_dir();
    profile.parent().unwrap_or(&profile).join("tmp")
}

/// A fresh scratch directory under the target dir.
pub fn scratch(name: &str) -> PathBuf {
    let d = target_tmp().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A lab of two hosts joined by a link shaped to 10 Mbit/s each way with tbf (the lab's
/// plain `rate`; its queue holds 50 ms of the rate).
pub const SHAPED_10MBIT: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
rate = "10mbit"
"#;

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

pub use crate::{have, is_root, require_root, require_tool};

/// `netsweep run TARGET --no-save -q -o OUT ARGS…` inside the lab's `client` host, to spawn
/// or run: a run told nothing about the lab.
pub fn run_in(
    lab: &netsweep_lab::Lab,
    target: &str,
    out: &Path,
    args: &[&str],
) -> std::process::Command {
    let out = out.to_str().expect("a UTF-8 path");
    let mut c = lab
        .command(
            "client",
            &[bin(), "run", target, "--no-save", "-q", "-o", out],
        )
        .unwrap();
    c.args(args);
    c
}

/// Starts `netsweep serve` on `bind:port` inside a lab host and waits until it listens.
pub fn serve_in(lab: &netsweep_lab::Lab, host: &str, bind: &str, port: u16) -> std::process::Child {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let p = port.to_string();
    let child = lab
        // A lab's server is the experimenter's own: every transport, knob and host fact.
        .command(
            host,
            &[
                bin(),
                "serve",
                "--bind",
                bind,
                "--port",
                &p,
                "-q",
                "--allow",
                "all",
            ],
        )
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

/// Starts `netsweep exporter` as `cmd` gives it (its `--listen` included): the process and
/// the address its first line names. The rest of its log is drained.
pub fn exporter_from(mut cmd: std::process::Command) -> (iperf3::Killed, String) {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
    });
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (iperf3::Killed(child), addr)
}

/// A network namespace `nsw-<tag><pid>` with `lo` up, deleted on drop.
#[derive(Debug)]
pub struct ScratchNetns(pub String);

impl ScratchNetns {
    /// Makes the namespace and brings its `lo` up.
    pub fn new(tag: &str) -> ScratchNetns {
        let ns = ScratchNetns(format!("nsw-{}", crate::lab::run_id(tag)));
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

/// Panics naming the Debian package unless Debian's python3 can import `module`.
pub fn require_python_module(test: &str, module: &str, package: &str) {
    let ok = Command::new("/usr/bin/python3")
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{test} needs the Python module {module}: apt-get install -y {package} (./run-tests installs it as root)"
    );
}

/// Starts `binary serve --once` on an ephemeral loopback port (the kernel picks a free one,
/// so parallel tests never collide) and returns it with the `HOST:PORT` it listens on, read
/// from its "listening on" line.
pub fn serve_once(binary: &str) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let mut server = Command::new(binary)
        .args(["serve", "--once", "--bind", "127.0.0.1", "--port", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("serve starts");
    let mut line = String::new();
    BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (server, listening_addr(&line))
}

/// The `HOST:PORT` in `netsweep serve`'s first line ("… listening on HOST:PORT (…)").
pub fn listening_addr(line: &str) -> String {
    line.split("listening on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("serve printed no listening address: {line:?}"))
        .to_string()
}

/// Waits (bounded, 60 s) until the results file `file` holds at least `n` points.
pub fn wait_for_points(file: &Path, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(t) = std::fs::read_to_string(file) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&t) {
                if v["points"].as_array().is_some_and(|p| p.len() >= n) {
                    return;
                }
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no point written in time"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A fake netsweep server of protocol `version` (an older netsweep): it answers the preamble
/// with that version and the range 1..=version, then holds each connection until the client
/// goes. Returns its HOST:PORT on loopback.
pub fn server_of_protocol(version: u16) -> String {
    use netsweep_proto::{encode_server_preamble, ServerReply, VersionRange, CLIENT_PREAMBLE_LEN};
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { return };
            let mut pre = [0u8; CLIENT_PREAMBLE_LEN];
            if c.read_exact(&mut pre).is_err() {
                continue;
            }
            let reply = encode_server_preamble(ServerReply {
                chosen: version,
                server: VersionRange::new(1, version),
            });
            let _ = c.write_all(&reply);
            let mut sink = [0u8; 4096];
            while matches!(c.read(&mut sink), Ok(n) if n > 0) {}
        }
    });
    addr
}

/// Asserts that a run whose saved results file cannot be written (`--save-dir /dev/null/x`:
/// a directory under a file, refused to root too) failed at once: exit 1, the path and the
/// fix named, measuring stopped, and no "results saved" line.
pub fn assert_failed_on_unwritable_save_dir(o: &Output) {
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("cannot write the results file /dev/null/x/"),
        "{e}"
    );
    assert!(
        e.contains("give --save-dir a directory you can write"),
        "{e}"
    );
    assert!(e.contains("measuring stopped"), "{e}");
    assert!(!e.contains("results saved"), "{e}");
}

/// Asserts that `what`'s rate `got` (Mbit/s) is one the link delivered, from the receiving
/// interface's counters (`header`: frame bytes below the payload): no more than its fastest
/// half second of `window`, and no less than its 10th percentile (give or take 1%), less the
/// share `dropped` of what reached the host that its receiving socket dropped (the kernel's
/// count; 0 for TCP). The half seconds run from the run's first frame to its last, so a
/// busy machine's sender hiccups are in them as they are in the receiver's figure: the band is
/// narrow on an idle machine and as wide as the link's own swings on a busy one.
pub fn assert_link_delivered(
    what: &str,
    got: f64,
    series: &crate::lab::link::Series,
    window: (std::time::Instant, std::time::Instant),
    header: u64,
    dropped: f64,
) {
    use crate::lab::link::{deciles, Dir};
    assert!(
        series.covers(window.0, window.1),
        "{what}: the counters cover the run"
    );
    let rates = series.half_seconds_mbps(Dir::Rx, window, header);
    assert!(
        rates.len() >= 100,
        "{what}: the link carried the run for under 1.5 s ({} windows)",
        rates.len()
    );
    let (lo, mid, _) = deciles(&rates).unwrap();
    let hi = rates.iter().copied().fold(f64::MIN, f64::max);
    let lo_kept = lo * (1.0 - dropped);
    eprintln!(
        "{what}: {got:.2} Mbit/s; the receiving interface: {mid:.2} (median of {} half-second \
         windows, 10%: {lo:.2}, max {hi:.2}); the socket dropped {:.2}% of it",
        rates.len(),
        dropped * 100.0
    );
    assert!(
        got >= lo_kept * 0.99 && got <= hi * 1.01,
        "{what}: {got:.2} Mbit/s outside {lo_kept:.2}–{hi:.2}, what the link delivered and the \
         socket kept (its interface counters' half-second windows: 10th percentile less the \
         socket's drops, and the fastest)"
    );
}

/// Loads the nft ruleset `rules` with `nft` (an `nft -f -` command: this host's, or one in a
/// lab's namespace), panicking with nft's own words if it refuses them.
pub fn nft_load(mut nft: std::process::Command, rules: &str) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = nft
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nft runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "nft refused the rules: {}\n{rules}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Holds `what`'s rate `got` to the arithmetic `expected` (within `tolerance`, a fraction)
/// when the machine was idle enough over the measurement (`busy`); otherwise prints that the
/// check was skipped and why: a busy machine delays a shaper and the path delivers less.
pub fn check_arithmetic_when_idle(
    what: &str,
    got: f64,
    expected: f64,
    tolerance: f64,
    busy: &crate::lab::idle::Busy,
) {
    if busy.idle_enough() {
        assert!(
            (got / expected - 1.0).abs() < tolerance,
            "{what}: {got:.2} Mbit/s vs the arithmetic's {expected:.2} ({:+.1}%) on an idle \
             machine ({busy})",
            (got / expected - 1.0) * 100.0
        );
        eprintln!("{what}: {got:.2} Mbit/s, the arithmetic {expected:.2}: checked ({busy})");
    } else {
        eprintln!(
            "{what}: SKIPPED the check against the arithmetic ({expected:.2} Mbit/s, got \
             {got:.2}): the machine was not idle: {busy}"
        );
    }
}

/// The sum of `key` ("bytes", "packets", "drops") over every qdisc on `iface` of `host` whose
/// kind is `kind` (any kind when `None`), from `tc -s -j qdisc show`: the link's own count.
pub fn qdisc_stat(
    lab: &netsweep_lab::Lab,
    host: &str,
    iface: &str,
    kind: Option<&str>,
    key: &str,
) -> u64 {
    let o = lab
        .command(host, &["tc", "-s", "-j", "qdisc", "show", "dev", iface])
        .unwrap()
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("tc -s -j qdisc show dev {iface} in {host}: {e}"));
    v.as_array()
        .unwrap_or_else(|| panic!("tc printed no list for {iface}: {v}"))
        .iter()
        .filter(|q| kind.is_none_or(|k| q["kind"] == k))
        .filter_map(|q| q[key].as_u64())
        .sum()
}
