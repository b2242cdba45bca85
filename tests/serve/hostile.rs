//! `netsweep serve` under hostile connections (issue 12 items 1 and 6): silent connections,
//! slowloris preambles, random bytes, a 4 GiB frame length, malformed and unknown messages,
//! and connect/close floods — 185 in all, 90 of them held open through the handshake timeout
//! (more than the server's cap of handshakes in flight, so the oldest are cut short for newer
//! connections) — while legitimate clients run. A connection is admitted as a session only once
//! its handshake is complete, so none of them holds one of the two session slots: every
//! legitimate run completes. The server's threads stay bounded (handshake threads are capped)
//! and return to idle; its memory stays small. Real processes on loopback.

use crate::common::serve::Server;
use crate::common::*;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The client's preamble: magic and the version range 1..=1.
const PREAMBLE: &[u8] = b"NSWP\x00\x01\x00\x01";

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

fn vm_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

#[test]
fn hostile_connections_never_keep_a_client_out() {
    let server = Server::start(&["--max-sessions", "2"]);
    let addr = server.addr.clone();
    // The idle count (accept thread and main) once the server listens.
    let idle = server.threads();
    let connect = || TcpStream::connect(&addr).expect("connect");
    let mut held: Vec<TcpStream> = Vec::new();
    let mut hostile = 0;
    // Silent: connect and say nothing (held open) — more than the server's handshake cap, so
    // later connections cut the oldest handshakes short instead of waiting behind them.
    for _ in 0..80 {
        held.push(connect());
        hostile += 1;
    }
    // Slowloris: the preamble one byte at a time, slower than the handshake allows.
    let slow: Vec<_> = (0..10)
        .map(|_| {
            let mut s = connect();
            std::thread::spawn(move || {
                for b in PREAMBLE {
                    if s.write_all(&[*b]).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(900));
                }
            })
        })
        .collect();
    hostile += 10;
    // One-shot junk, each on its own connection, kept open after writing.
    let mut junk: Vec<Vec<u8>> = Vec::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..10 {
        let mut bytes = Vec::new();
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes.push(x as u8);
        }
        junk.push(bytes); // random bytes
    }
    for _ in 0..10 {
        junk.push([PREAMBLE, &[0xFF, 0xFF, 0xFF, 0xFF]].concat()); // a 4 GiB frame
    }
    for _ in 0..10 {
        junk.push([PREAMBLE, &frame(b"{\"type\":\"hello\",\"setup\":")].concat());
        // malformed
    }
    for _ in 0..10 {
        let hello = br#"{"type":"hello","setup":{"transport":"carrier-pigeon"},"client":{}}"#;
        junk.push([PREAMBLE, &frame(hello)].concat()); // unknown transport
    }
    for _ in 0..5 {
        junk.push(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec());
    }
    for bytes in &junk {
        let mut s = connect();
        let _ = s.write_all(bytes);
        held.push(s);
        hostile += 1;
    }
    // A connect/close flood.
    for _ in 0..50 {
        drop(connect());
        hostile += 1;
    }
    assert!(hostile >= 100, "{hostile} hostile connections");

    // Legitimate clients while all of that is going on: every run completes.
    let dir = scratch("hostile");
    let mut peak_threads = server.threads();
    for i in 0..3 {
        let out = dir.join(format!("run{i}.json"));
        let mut args = vec![
            "run",
            addr.as_str(),
            "-p",
            "stream",
            "--sizes",
            "1k,64k",
            "--no-save",
            "-q",
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(QUICK);
        let o = run(&args);
        peak_threads = peak_threads.max(server.threads());
        assert_eq!(
            o.status.code(),
            Some(0),
            "legitimate run {i} failed: {}\nserver log:\n{}",
            String::from_utf8_lossy(&o.stderr),
            server.log()
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(v["status"], "complete");
        assert_eq!(v["points"].as_array().unwrap().len(), 2);
    }
    // Bounded: at most the capped handshake threads, plus sessions (control + data threads).
    let bound = idle + netsweep_engine::server::MAX_HANDSHAKES + 2 * 2;
    assert!(
        peak_threads <= bound,
        "{peak_threads} server threads under attack (bound {bound})"
    );
    let pid = server.child.id();
    let peak_rss = vm_kib(pid, "VmHWM:");
    assert!(
        peak_rss < 256 * 1024,
        "the server's peak RSS reached {peak_rss} KiB"
    );
    eprintln!(
        "{hostile} hostile connections: peak {peak_threads} threads (idle {idle}), \
         peak RSS {peak_rss} KiB"
    );
    // The hostile connections are refused, time out or get closed; the server returns to idle
    // (every handshake thread ends within the handshake timeout).
    drop(held);
    for t in slow {
        let _ = t.join();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.threads() != idle {
        assert!(
            Instant::now() < deadline,
            "threads stayed at {} (idle {idle})",
            server.threads()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = server.log();
    assert!(
        log.contains("this server does not know transport") || log.contains("carrier-pigeon"),
        "the unknown transport was refused and logged:\n{log}"
    );
    let cut = log.matches("cut short for a newer connection").count();
    assert!(
        cut >= 80 + 10 - netsweep_engine::server::MAX_HANDSHAKES,
        "{cut} handshakes cut short: the silent and slow ones beyond the cap were not\n{log}"
    );
}
