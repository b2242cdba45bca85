//! One `netsweep serve`, many clients (issue 11 item 5): concurrent sessions each get their own
//! results and counters, a client killed mid-run disturbs nobody and its session is reaped
//! (the server's thread count returns to idle), `--max-sessions` refuses the client beyond the
//! limit with the limit in its message, and sessions failing at any stage free their slot.
//! Real processes on loopback; every wait is bounded.

use crate::common::serve::Server;
use crate::common::*;
use netsweep_engine::control::ClientControl;
use netsweep_proto::messages::{ClientMsg, ServerMsg, SessionSetup};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Starts `netsweep run` against `addr`: a quick tcp stream over `sizes`, results to `out`.
fn client(addr: &str, out: &Path, sizes: &str) -> Child {
    Command::new(bin())
        .args(["run", addr, "--no-save", "-q", "-o", out.to_str().unwrap()])
        .args(QUICK)
        .args(["-t", "tcp", "-p", "stream", "--sizes", sizes])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("netsweep run starts")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn load(out: &Path) -> Value {
    let t = std::fs::read_to_string(out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    serde_json::from_str(&t).unwrap()
}

/// Checks a finished client: exit 0, complete, exactly `sizes`, and every point's server
/// counters (its own session's) match the client's: a reliable stream delivers every byte.
fn check_own_results(server: &Server, o: &Output, out: &Path, sizes: &[u64]) {
    assert!(
        o.status.success(),
        "client failed: {}\nserver log:\n{}",
        stderr(o),
        server.log()
    );
    let v = load(out);
    assert_eq!(v["status"], "complete", "{v}");
    let pts = v["points"].as_array().unwrap();
    let got: Vec<u64> = pts.iter().map(|p| p["size"].as_u64().unwrap()).collect();
    assert_eq!(got, sizes, "{}: another session's sizes?", out.display());
    for p in pts {
        let sent = p["client"]["bytes_sent"].as_u64().unwrap();
        let received = p["server"]["bytes_received"].as_u64().unwrap();
        assert!(sent > 0);
        assert_eq!(received, sent, "size {}: server vs client bytes", p["size"]);
        assert_eq!(sent % p["size"].as_u64().unwrap(), 0, "whole messages only");
    }
}

fn outs(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n).map(|i| dir.join(format!("c{i}.json"))).collect()
}

#[test]
fn eight_clients_at_once_each_get_their_own_results() {
    let server = Server::start(&["--max-sessions", "8", "--max-sessions-per-ip", "8"]);
    let idle = server.threads();
    let dir = scratch("serve-many");
    let outs = outs(&dir, 8);
    let sizes: Vec<[u64; 2]> = (0..8u64).map(|i| [1000 + i, 3000 + 7 * i]).collect();
    let clients: Vec<Child> = outs
        .iter()
        .zip(&sizes)
        .map(|(out, s)| client(&server.addr, out, &format!("{},{}", s[0], s[1])))
        .collect();
    // Sample the server's threads while the clients run: sessions must overlap.
    let mut clients: Vec<Option<Child>> = clients.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<Output>> = (0..8).map(|_| None).collect();
    let mut peak = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while outputs.iter().any(Option::is_none) {
        peak = peak.max(server.threads());
        for (c, o) in clients.iter_mut().zip(outputs.iter_mut()) {
            if c.as_mut().is_some_and(|c| c.try_wait().unwrap().is_some()) {
                *o = Some(c.take().unwrap().wait_with_output().unwrap());
            }
        }
        assert!(Instant::now() < deadline, "clients did not finish in time");
        std::thread::sleep(Duration::from_millis(5));
    }
    for ((o, out), s) in outputs.iter().zip(&outs).zip(&sizes) {
        check_own_results(&server, o.as_ref().unwrap(), out, s);
    }
    // Two threads (control, data) per session: at least two sessions ran at once.
    assert!(peak >= idle + 4, "peak {peak} threads, idle {idle}");
    server.wait_threads(idle);
    // Every session is named in the log, start and end.
    let log = server.log();
    for n in 1..=8 {
        let head = format!("session {n} from 127.0.0.1:");
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(&head)).collect();
        assert!(
            lines.len() == 2 && lines[1].ends_with(" ended"),
            "session {n} not logged as started and ended:\n{log}"
        );
    }
}

#[test]
fn a_client_killed_mid_run_disturbs_no_one() {
    let server = Server::start(&["--max-sessions", "3"]);
    let idle = server.threads();
    let dir = scratch("serve-kill");
    let outs = outs(&dir, 6);
    let sweep = "1000..1006:+1";
    let mut victim = client(&server.addr, &outs[0], sweep);
    let others = [
        client(&server.addr, &outs[1], sweep),
        client(&server.addr, &outs[2], sweep),
    ];
    wait_for_points(&outs[0], 1);
    victim.kill().unwrap();
    let _ = victim.wait();
    let expected: Vec<u64> = (1000..=1006).collect();
    for (c, out) in others.into_iter().zip(&outs[1..3]) {
        check_own_results(&server, &c.wait_with_output().unwrap(), out, &expected);
    }
    // The dead session was reaped: its threads ended, its slot is free.
    server.wait_threads(idle);
    let log = server.log();
    assert_eq!(
        log.lines().filter(|l| l.contains(" failed: ")).count(),
        1,
        "only the killed client's session failed:\n{log}"
    );
    // All three slots are free again: three new clients at once are all served.
    let again: Vec<Child> = outs[3..]
        .iter()
        .enumerate()
        .map(|(i, out)| client(&server.addr, out, &format!("{}", 2000 + i)))
        .collect();
    for (i, (c, out)) in again.into_iter().zip(&outs[3..]).enumerate() {
        check_own_results(
            &server,
            &c.wait_with_output().unwrap(),
            out,
            &[2000 + i as u64],
        );
    }
    server.wait_threads(idle);
}

#[test]
fn a_stalled_client_delays_no_one() {
    let server = Server::start(&[]);
    let idle = server.threads();
    let dir = scratch("serve-stall");
    let outs = outs(&dir, 3);
    // The stalled client asks for a long inactivity timeout: its session waits on it, and
    // nobody else may wait with it.
    let mut stalled = Command::new(bin())
        .args(["run", &server.addr, "--no-save", "-q", "-o"])
        .arg(&outs[0])
        .args(["--trial-time", "5ms", "--max-point-time", "150ms"])
        .args(["--timeout", "120s", "-t", "tcp", "-p", "stream"])
        .args(["--sizes", "1000..1100:+1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_points(&outs[0], 1);
    let pid = stalled.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let others = [
        client(&server.addr, &outs[1], "1500,1600"),
        client(&server.addr, &outs[2], "1700"),
    ];
    for (c, (out, sizes)) in others
        .into_iter()
        .zip(outs[1..].iter().zip([&[1500, 1600][..], &[1700][..]]))
    {
        check_own_results(&server, &c.wait_with_output().unwrap(), out, sizes);
    }
    // The stalled client was stopped all along; its session (the first) still waits on it:
    // the others did not wait for it to time out.
    assert!(stalled.try_wait().unwrap().is_none());
    let log = server.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("session 1 from ")
                && (l.ends_with(" ended") || l.contains(" failed: "))),
        "the stalled session ended before the others were served:\n{log}"
    );
    assert!(server.threads() > idle, "the stalled session is still live");
    stalled.kill().unwrap();
    let _ = stalled.wait();
    server.wait_threads(idle);
}

#[test]
fn beyond_max_sessions_a_client_is_refused_with_the_limit() {
    let server = Server::start(&["--max-sessions", "2"]);
    let dir = scratch("serve-limit");
    let outs = outs(&dir, 3);
    let sweep = "1000..1005:+1";
    let clients: Vec<Child> = outs
        .iter()
        .map(|o| client(&server.addr, o, sweep))
        .collect();
    let outputs: Vec<Output> = clients
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let refused: Vec<usize> = (0..3)
        .filter(|&i| outputs[i].status.code() == Some(1))
        .collect();
    assert_eq!(refused.len(), 1, "exactly one refused: {outputs:?}");
    let msg = stderr(&outputs[refused[0]]);
    assert!(
        msg.contains("running 2 sessions") && msg.contains("--max-sessions"),
        "the refusal names the limit: {msg}"
    );
    let expected: Vec<u64> = (1000..=1005).collect();
    for i in (0..3).filter(|i| *i != refused[0]) {
        check_own_results(&server, &outputs[i], &outs[i], &expected);
    }
    // The log reaches this test through a reader thread, perhaps after the refusal did.
    server.wait_log("netsweep serve: refused 127.0.0.1:");
}

#[test]
fn sessions_failing_at_any_stage_free_their_slot() {
    // One slot: a session that failed but still counted would refuse the next client.
    let server = Server::start(&["--max-sessions", "1"]);
    let idle = server.threads();
    let addr: SocketAddr = server.addr.parse().unwrap();
    let dir = scratch("serve-fail");
    let served = |name: &str, size: u64| {
        let out = dir.join(name);
        let o = client(&server.addr, &out, &size.to_string())
            .wait_with_output()
            .unwrap();
        check_own_results(&server, &o, &out, &[size]);
    };

    // Handshake: connect and hang up; then garbage instead of the preamble.
    drop(TcpStream::connect(addr).unwrap());
    server.wait_session_over(1, idle);
    served("a.json", 100);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let _ = s.read_to_end(&mut Vec::new());
    server.wait_session_over(3, idle);
    served("b.json", 101);

    // Data path setup: hello, then hang up without connecting the data path.
    let mut ctl = ClientControl::connect(addr, Duration::from_secs(5)).unwrap();
    let setup = SessionSetup {
        transport: "tcp".into(),
        api: "basic".into(),
        pattern: "stream".into(),
        family: "ipv4".into(),
        max_size: 4096,
        timeout_ns: Duration::from_millis(200).as_nanos() as u64,
        ..Default::default()
    };
    let hello = ClientMsg::Hello {
        setup,
        client: Default::default(),
        client_nonce: None,
    };
    let welcome = ctl.request(hello, "welcome", None).unwrap();
    assert!(matches!(welcome, ServerMsg::Welcome { .. }), "{welcome:?}");
    drop(ctl);
    server.wait_session_over(5, idle);
    served("c.json", 102);

    let log = server.log();
    assert!(
        log.lines().filter(|l| l.contains(" failed: ")).count() >= 3,
        "three failed sessions logged:\n{log}"
    );
    assert!(!log.contains("netsweep serve: refused"), "{log}");
}
