//! `--auth-key` (issue 12 item 2): a pre-shared key, proven by both sides with HMAC-SHA256
//! over fresh nonces. The right key runs; a wrong or missing key is refused with a clear
//! message on both sides (the server's log names the peer); a client with a key refuses a
//! server without one; a keyless client is refused before admission (it never holds a
//! session slot); and, recorded through a relay, nothing on the wire contains the key and
//! no two exchanges repeat. Real processes on loopback.

use crate::common::serve::Server;
use crate::common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Output;
use std::sync::{Arc, Mutex};

fn key_file(name: &str, text: &str) -> PathBuf {
    let p = scratch(&format!("authkey-{name}")).join("key");
    std::fs::write(&p, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

const KEY: &str = "hunter2-but-much-longer-than-that\n";
const OTHER: &str = "a-different-key-of-enough-length\n";

fn run_with(addr: &str, key: Option<&PathBuf>, out: &std::path::Path) -> Output {
    let mut args = vec!["run", addr, "--sizes", "1,1k", "--no-save", "-q", "-o"];
    args.push(out.to_str().unwrap());
    let k;
    if let Some(key) = key {
        k = key.to_str().unwrap().to_string();
        args.extend_from_slice(&["--auth-key", &k]);
    }
    args.extend_from_slice(QUICK);
    run(&args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_right_key_runs_and_the_wrong_or_missing_one_is_refused() {
    let key = key_file("server", KEY);
    let server = Server::start(&["--auth-key", key.to_str().unwrap()]);
    let dir = scratch("auth-runs");

    let o = run_with(
        &server.addr,
        Some(&key_file("client", KEY)),
        &dir.join("ok.json"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ok.json")).unwrap()).unwrap();
    assert_eq!(v["status"], "complete");
    assert_eq!(v["points"].as_array().unwrap().len(), 2);

    let o = run_with(
        &server.addr,
        Some(&key_file("wrong", OTHER)),
        &dir.join("w.json"),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("could not prove it holds the same --auth-key"),
        "{}",
        stderr(&o)
    );

    let o = run_with(&server.addr, None, &dir.join("none.json"));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("requires authentication") && stderr(&o).contains("--auth-key"),
        "{}",
        stderr(&o)
    );
    assert!(
        !dir.join("none.json").exists(),
        "nothing measured without the key"
    );

    server.wait_log(" ended");
    server.wait_log("authentication failed");
    let log = server.wait_log("authentication required: the client offered no key");
    assert!(log.contains("refused 127.0.0.1:"), "{log}");
    assert_eq!(log.matches(" ended").count(), 1, "one session only:\n{log}");
}

#[test]
fn a_client_with_a_key_refuses_a_server_without_one() {
    let server = Server::start(&[]);
    let dir = scratch("auth-keyless-server");
    let o = run_with(&server.addr, Some(&key_file("c", KEY)), &dir.join("x.json"));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("did not authenticate itself"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn keyless_clients_never_hold_a_session_slot() {
    // One slot, held by an authenticated long run: a keyless client is refused for its key,
    // not told the server is busy — authentication comes before admission.
    let key = key_file("slot", KEY);
    let server = Server::start(&["--auth-key", key.to_str().unwrap(), "--max-sessions", "1"]);
    let dir = scratch("auth-slot");
    let out = dir.join("long.json");
    let mut args = vec![
        "run",
        &server.addr,
        "-p",
        "stream",
        "--sizes",
        "1k..256k:+1k",
    ];
    let k = key.to_str().unwrap().to_string();
    args.extend_from_slice(&[
        "--auth-key",
        &k,
        "--no-save",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    args.extend_from_slice(QUICK);
    let mut long = std::process::Command::new(bin())
        .args(&args)
        .spawn()
        .unwrap();
    wait_for_points(&out, 1);
    let o = run_with(&server.addr, None, &dir.join("none.json"));
    let _ = long.kill();
    let _ = long.wait();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("requires authentication"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("busy"), "{}", stderr(&o));
}

#[test]
fn bad_key_files_are_usage_errors() {
    let short = key_file("short", "too short\n");
    let o = run(&[
        "run",
        "--sizes",
        "1",
        "--no-save",
        "--auth-key",
        short.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("at least 16"), "{}", stderr(&o));
    let o = run(&["serve", "--auth-key", "/nonexistent/key"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot read --auth-key"),
        "{}",
        stderr(&o)
    );
}

/// Relays one connection between a client and `to`, recording both directions.
fn relay(listener: &TcpListener, to: &str, wire: Arc<Mutex<Vec<u8>>>) {
    let (a, _) = listener.accept().unwrap();
    let b = TcpStream::connect(to).unwrap();
    let pump = |mut from: TcpStream, mut into: TcpStream, wire: Arc<Mutex<Vec<u8>>>| {
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 || into.write_all(&buf[..n]).is_err() {
                    break;
                }
                wire.lock().unwrap().extend_from_slice(&buf[..n]);
            }
            let _ = into.shutdown(std::net::Shutdown::Write);
        })
    };
    let t1 = pump(a.try_clone().unwrap(), b.try_clone().unwrap(), wire.clone());
    let t2 = pump(b, a, wire);
    let _ = t1.join();
    let _ = t2.join();
}

#[test]
fn nothing_secret_or_repeated_crosses_the_wire() {
    let key = key_file("wire", KEY);
    let server = Server::start(&["--auth-key", key.to_str().unwrap()]);
    let mut exchanges = Vec::new();
    for i in 0..2 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let front = listener.local_addr().unwrap().to_string();
        let wire = Arc::new(Mutex::new(Vec::new()));
        let (w, to) = (wire.clone(), server.addr.clone());
        let relay = std::thread::spawn(move || relay(&listener, &to, w));
        // pingpong's data path is its own connection to the server, not through the relay.
        let out = scratch("auth-wire").join(format!("{i}.json"));
        let o = run_with(&front, Some(&key), &out);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        relay.join().unwrap();
        let bytes = wire.lock().unwrap().clone();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        assert!(
            text.contains("auth_challenge") && text.contains("auth_response"),
            "{text}"
        );
        let secret = KEY.trim();
        assert!(!text.contains(secret), "the key crossed the wire");
        let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
        assert!(!text.contains(&hex), "the key crossed the wire in hex");
        let proof_at = text.find("client_proof").unwrap();
        exchanges.push(text[proof_at..proof_at + 90].to_string());
    }
    assert_ne!(
        exchanges[0], exchanges[1],
        "two exchanges sent the same proof"
    );
}
