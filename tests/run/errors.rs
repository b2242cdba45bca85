//! Issue 2: usage errors exit 2, run failures exit 1, and a dead peer or Ctrl-C leaves a
//! valid results file holding every completed point.

use crate::common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn usage_errors_exit_2_and_say_the_fix() {
    for (args, needle) in [
        (vec!["run", "--sizes", "8x"], "8x"),
        (vec!["run", "--sizes", "1k..8k"], ":+"),
        (
            vec!["run", "-t", "sctp"],
            "[possible values: tcp, tls, quic, udp, unix-stream",
        ),
        (
            vec!["run", "-p", "bounce"],
            "[possible values: pingpong, stream, crr, bidir, rate]",
        ),
        (vec!["run", "--api", "aio"], "[possible values: basic, mmsg"),
        (vec!["run", "--precision", "200%"], "--precision"),
        (vec!["run", "--trial-time", "soon"], "--trial-time"),
        (
            vec!["run", "--format", "xml"],
            "[possible values: text, json, jsonl",
        ),
        (
            vec!["report", "x.json", "-f", "xml"],
            "[possible values: text, json, jsonl",
        ),
        (
            vec!["compare", "a", "b", "-f", "csv"],
            "[possible values: text, json]",
        ),
        (vec!["run", "--nodelay", "maybe"], "--nodelay"),
        (
            vec!["run", "--pmtu", "sometimes"],
            "[possible values: do, dont, want, probe]",
        ),
        (vec!["run", "--tos", "1,2,3"], "CLIENT,SERVER"),
        (vec!["run", "--dscp", "64"], "0..63"),
        (vec!["run", "--offset", "4096"], "page size"),
        (vec!["run", "--sndbuf", "lots"], "--sndbuf"),
        (
            vec!["run", "-t", "udp", "-p", "stream", "--sizes", "8"],
            "at least 20",
        ),
        (vec!["run", "-t", "udp", "--sizes", "70000"], "65507"),
        (vec!["run", "--no-such-flag"], "--no-such-flag"),
        (vec!["report", "/nonexistent/file.json"], "cannot read"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(needle),
            "{args:?}: stderr lacks {needle:?}: {}",
            stderr(&o)
        );
    }
}

/// `--help` lists every closed set's values, and the aliases the core accepts still parse.
#[test]
fn help_lists_the_choices() {
    let o = run(&["run", "--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout).replace(char::is_whitespace, "");
    for needle in [
        "[possiblevalues:tcp,tls,quic,udp,unix-stream,unix-dgram,unix-seqpacket,packet,mptcp,udplite,shm,mpi,xdp]",
        "[possiblevalues:pingpong,stream,crr,bidir,rate]",
        "[possiblevalues:basic,mmsg,zerocopy,sendfile,splice,uring,gso,datagram]",
        "[possiblevalues:text,json,jsonl,csv,npout,openmetrics]",
        "[possiblevalues:do,dont,want,probe]",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
    // Aliases stay accepted: a usage error other than the value's would exit 2 too, so
    // check that only the deliberately bad --sizes is complained about.
    let o = run(&[
        "run", "-t", "unix", "-p", "rr", "--api", "io_uring", "--sizes", "8x",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!stderr(&o).contains("invalid value"), "{}", stderr(&o));
    // --nodelay takes a value (it is no bare switch).
    let o = run(&["run", "--nodelay", "off", "--sizes", "8x"]);
    assert!(stderr(&o).contains("'8x'"), "{}", stderr(&o));
}

#[test]
fn report_rejects_a_file_that_is_not_results() {
    let dir = scratch("notresults");
    let f = dir.join("x.json");
    std::fs::write(&f, r#"{"schema":"something-else"}"#).unwrap();
    let o = run(&["report", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a netsweep results file"));
    std::fs::write(&f, "garbage").unwrap();
    assert_eq!(run(&["report", f.to_str().unwrap()]).status.code(), Some(2));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn connection_refused_exits_1_naming_host_and_port() {
    let port = free_port();
    let o = run(&[
        "run",
        &format!("127.0.0.1:{port}"),
        "--no-save",
        "--sizes",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(e.contains("netsweep serve"), "says what to check: {e}");
}

struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `netsweep serve` on a kernel-chosen port and returns it with the port it printed.
fn serve() -> (Child, u16) {
    serve_with(&[])
}

fn serve_with(extra: &[&str]) -> (Child, u16) {
    use std::io::{BufRead, BufReader};
    let mut c = Command::new(bin())
        .args(["serve", "--bind", "127.0.0.1", "--port", "0"])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut err = BufReader::new(c.stderr.take().unwrap());
    err.read_line(&mut line).unwrap();
    // Keep draining the server's log so it never writes into a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let port = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    (Child(c), port)
}

#[test]
fn server_killed_mid_sweep_leaves_exit_1_and_valid_file() {
    let (mut server, port) = serve();
    let dir = scratch("killed");
    let out = dir.join("r.json");
    let client = Command::new(bin())
        .args([
            "run",
            &format!("127.0.0.1:{port}"),
            "--no-save",
            "-q",
            "-o",
            out.to_str().unwrap(),
        ])
        .args([
            "--sizes",
            "1..200:+1",
            "--trial-time",
            "10ms",
            "--max-point-time",
            "100ms",
            "--timeout",
            "2s",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_points(&out, 2);
    server.0.kill().unwrap();
    let t0 = Instant::now();
    let o = client.wait_with_output().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "client noticed within its timeout"
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["status"], "failed");
    assert!(v["message"].as_str().unwrap().len() > 10);
    let pts = v["points"].as_array().unwrap();
    assert!(pts.len() >= 2 && pts.len() < 200);
    for p in pts {
        assert!(p["latency"]["half_rtt_ns"]["p50"].as_f64().unwrap() > 0.0);
    }
    assert!(v["summary"]["points"].as_u64().unwrap() as usize == pts.len());
}

#[test]
fn second_client_is_told_busy() {
    // One session at a time: the second client is beyond the limit.
    let (_server, port) = serve_with(&["--max-sessions", "1"]);
    let dir = scratch("busy");
    let out = dir.join("first.json");
    let mut first = Command::new(bin())
        .args([
            "run",
            &format!("127.0.0.1:{port}"),
            "--no-save",
            "-q",
            "-o",
            out.to_str().unwrap(),
        ])
        .args([
            "--sizes",
            "1..400:+1",
            "--trial-time",
            "10ms",
            "--max-point-time",
            "50ms",
        ])
        .spawn()
        .unwrap();
    wait_for_points(&out, 1);
    let o = run(&[
        "run",
        &format!("127.0.0.1:{port}"),
        "--no-save",
        "--sizes",
        "1",
        "--timeout",
        "3s",
    ]);
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    assert!(stderr(&o).contains("--max-sessions"), "{}", stderr(&o));
}

#[test]
fn ctrl_c_keeps_what_was_measured() {
    let dir = scratch("sigint");
    let out = dir.join("r.json");
    let client = Command::new(bin())
        .args(["run", "--no-save", "-q", "-o", out.to_str().unwrap()])
        .args([
            "--sizes",
            "1..400:+1",
            "--trial-time",
            "10ms",
            "--max-point-time",
            "50ms",
        ])
        .spawn()
        .unwrap();
    wait_for_points(&out, 2);
    // SAFETY: kill() on our own child's pid.
    unsafe { libc::kill(client.id() as i32, libc::SIGINT) };
    let o = client.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["status"], "interrupted");
    assert!(v["points"].as_array().unwrap().len() >= 2);
}

/// A second signal ends the run at once, by a signal rather than exit 130 (SIGINT then
/// SIGTERM: two distinct signals are both delivered, where a repeated one could merge with
/// the pending first; which of the two comes second is the kernel's choice).
#[test]
fn a_second_signal_ends_the_run_at_once() {
    let dir = scratch("sigtwice");
    let out = dir.join("r.json");
    let client = Command::new(bin())
        .args(["run", "--no-save", "-q", "-o", out.to_str().unwrap()])
        .args(["--sizes", "1..400:+1", "--trial-time", "10ms"])
        .spawn()
        .unwrap();
    wait_for_points(&out, 1);
    // SAFETY: kill() on our own child's pid.
    unsafe {
        libc::kill(client.id() as i32, libc::SIGINT);
        libc::kill(client.id() as i32, libc::SIGTERM);
    }
    let o = client.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    let sig = o.status.signal();
    assert!(
        sig == Some(libc::SIGINT) || sig == Some(libc::SIGTERM),
        "{:?}",
        o.status
    );
}

#[test]
fn results_are_saved_by_default_and_rerendered() {
    let dir = scratch("autosave");
    let mut args = vec!["run", "--sizes", "1,1k,4k"];
    args.extend_from_slice(QUICK);
    let o = Command::new(bin())
        .args(&args)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("p50 µs") && table.contains("peak"),
        "{table}"
    );
    let rows = table
        .lines()
        .filter(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            t.len() >= 6 && t[..3].iter().all(|x| x.parse::<f64>().is_ok())
        })
        .count();
    assert_eq!(rows, 3, "{table}");
    let saved: Vec<_> = std::fs::read_dir(dir.join("netsweep-results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1);
    let name = saved[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with("-tcp-pingpong.json"), "{name}");
    assert!(stderr(&o).contains(&name), "the path is printed");
    let f = saved[0].to_str().unwrap();
    let csv = run(&["report", f, "--format", "csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert_eq!(csv.lines().count(), 4);
    assert!(csv.starts_with("size,"));
    let np = run(&["report", f, "--format", "npout"]);
    let np = String::from_utf8_lossy(&np.stdout);
    let rows: Vec<Vec<f64>> = np
        .lines()
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 3);
    assert!(rows
        .iter()
        .all(|r| r.len() == 3 && r[1] > 0.0 && r[2] > 0.0));
    assert_eq!(rows[1][0], 1024.0);
    let jl = run(&["report", f, "--format", "jsonl"]);
    let jl = String::from_utf8_lossy(&jl.stdout);
    let recs: Vec<serde_json::Value> = jl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs.len(), 5);
    assert_eq!(recs[0]["record"], "run");
    assert_eq!(recs[4]["record"], "end");
    let js = run(&["report", f, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&js.stdout).unwrap();
    assert_eq!(v["points"].as_array().unwrap().len(), 3);
}

/// The results files a run saved into `dir`.
fn saved_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

/// Issue 26 item 5: a failed write of `-o` is a run failure, said at once with the path and
/// the fix; the saved results file still gets every point. A rename over a device would
/// replace it (as root, /dev/full itself): it is written directly, and stays a device.
#[test]
fn o_dev_full_fails_the_run_naming_the_path() {
    let dir = scratch("o-dev-full");
    let mut args = vec![
        "run",
        "--sizes",
        "1,2",
        "-o",
        "/dev/full",
        "--save-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(QUICK);
    let o = run(&args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("cannot write /dev/full (-o)"), "{e}");
    assert!(e.contains("give -o a file you can write"), "the fix: {e}");
    assert!(!e.contains("output written"), "{e}");
    let saved = saved_in(&dir);
    assert_eq!(saved.len(), 1, "{saved:?}: {e}");
    let run = netsweep_model::results::load(&std::fs::read_to_string(&saved[0]).unwrap()).unwrap();
    assert_eq!(run.points.len(), 2, "measuring went on into the saved file");
    assert!(e.contains("results saved to"), "{e}");
    use std::os::unix::fs::FileTypeExt;
    let full = std::fs::symlink_metadata("/dev/full").unwrap();
    assert!(full.file_type().is_char_device(), "/dev/full was replaced");
}

/// The saved results file cannot be created (its directory would be under a file: refused
/// to root too): exit 1 before anything is measured, naming the path and the fix, and no
/// "results saved" line.
#[test]
fn an_unwritable_save_dir_fails_the_run_before_it_measures() {
    let mut args = vec!["run", "--sizes", "1,2", "--save-dir", "/dev/null/x"];
    args.extend_from_slice(QUICK);
    let o = run(&args);
    assert_failed_on_unwritable_save_dir(&o);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("0 points"), "nothing was measured: {table}");
}

/// The temporary file beside `-o` has an unpredictable name, created exclusively: a symlink
/// planted at the name the old code used (`X.partial`) is neither followed nor replaced.
#[test]
fn a_symlink_planted_at_the_partial_name_is_not_followed() {
    let dir = scratch("planted-partial");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let out = dir.join("out.json");
    let planted = dir.join("out.json.partial");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let mut args = vec!["run", "--sizes", "1,2", "--no-save", "-q", "-o"];
    args.push(out.to_str().unwrap());
    args.extend_from_slice(QUICK);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(std::fs::read_link(&planted).unwrap(), victim);
    let run = netsweep_model::results::load(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(run.points.len(), 2);
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["out.json", "out.json.partial", "victim"]);
}

/// `-o /dev/stdout` is written to, not renamed over: stdout carries the document alone (no
/// table beside it), and /dev/stdout stays the link it was.
#[test]
fn o_dev_stdout_writes_the_document_to_stdout() {
    let mut args = vec![
        "run",
        "--sizes",
        "1,2",
        "--no-save",
        "-f",
        "json",
        "-o",
        "/dev/stdout",
    ];
    args.extend_from_slice(QUICK);
    let o = run(&args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    let doc = String::from_utf8_lossy(&o.stdout);
    let run = netsweep_model::results::load(&doc).unwrap_or_else(|err| panic!("{err}: {doc}"));
    assert_eq!(run.points.len(), 2);
    assert!(e.contains("output written to /dev/stdout"), "{e}");
    assert!(std::fs::symlink_metadata("/dev/stdout")
        .unwrap()
        .is_symlink());
}
