//! Running Debian's `iperf3`, client and server, against `netsweep serve --iperf3` in the
//! iperf3 conformance tests: the servers on free ports, the client with `-J` and a bound on
//! its run time, and the records `--iperf3-results` writes.

use super::serve::Server;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed on drop.
#[derive(Debug)]
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `netsweep serve --iperf3 0` on loopback, its records in `dir`: the server and its iperf3
/// port (from its first line).
pub fn netsweep_iperf3(dir: &Path, extra: &[&str]) -> (Server, u16) {
    let d = dir.to_str().unwrap();
    let mut args = vec!["--iperf3", "0", "--iperf3-results", d];
    args.extend_from_slice(extra);
    let s = Server::start(&args);
    let port = iperf3_port(&s.log_first_line());
    (s, port)
}

/// The iperf3 port a `serve` startup line names.
pub fn iperf3_port(line: &str) -> u16 {
    line.split("for iperf3 clients on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no iperf3 port in {line:?}"))
}

/// A free TCP port on loopback (for `iperf3 -s`).
pub use crate::free_port;

/// `iperf3 -s` on `port` of 127.0.0.1, once it listens.
pub fn iperf3_s(port: u16) -> Killed {
    let child = Command::new("iperf3")
        .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 starts");
    wait_listening(child.id(), port);
    Killed(child)
}

/// Waits (10 s at most) until process `pid` listens on `port`.
pub fn wait_listening(pid: u32, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !netsweep_lab::runner::listening(pid, port) {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `cmd` (an `iperf3 -c … -J`) to its end, killing it after `limit`: its JSON output.
pub fn client_json(mut cmd: Command, limit: Duration) -> Value {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("iperf3 starts");
    let pid = child.id();
    let killer = std::thread::spawn(move || {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
            if !Path::new(&format!("/proc/{pid}")).exists() {
                return;
            }
        }
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let o = child.wait_with_output().unwrap();
    let _ = killer.join();
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "iperf3 printed no JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// `iperf3 -c 127.0.0.1 -p PORT -J ARGS`, bounded to a minute.
pub fn iperf3_c(port: u16, args: &[&str]) -> Value {
    let mut c = Command::new("iperf3");
    c.args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
        .args(args);
    client_json(c, Duration::from_secs(60))
}

/// The records of `dir`, oldest session first.
pub fn records(dir: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut v: Vec<Value> = files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();
    v.sort_by_key(|r| r["session"].as_u64());
    v
}

/// Waits (20 s at most) until `dir` holds `n` records.
pub fn wait_records(dir: &Path, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = records(dir);
        if r.len() >= n {
            return r;
        }
        assert!(Instant::now() < deadline, "{} records of {n}", r.len());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A record's bytes on its streams of one direction (`to_server`, `from_server`).
pub fn record_bytes(r: &Value, direction: &str) -> u64 {
    r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["direction"] == direction)
        .map(|s| s["bytes"].as_u64().unwrap())
        .sum()
}

/// One stream of the client's `-J` output.
#[derive(Debug, Clone, Copy)]
pub struct ClientStream {
    /// The client sent on it.
    pub client_sends: bool,
    /// Bytes its sender counted.
    pub sent: u64,
    /// Bytes its receiver counted (TCP; a UDP stream's summary has the sender's only).
    pub received: Option<u64>,
    /// UDP: datagrams lost and in all, as the client reports them.
    pub lost: Option<u64>,
    /// See `lost`.
    pub packets: Option<u64>,
}

/// The streams of the client's `-J` output.
pub fn client_streams(j: &Value) -> Vec<ClientStream> {
    j["end"]["streams"]
        .as_array()
        .unwrap_or_else(|| panic!("no end.streams: {j}"))
        .iter()
        .map(|s| match s.get("udp") {
            Some(u) => ClientStream {
                client_sends: u["sender"] == true,
                sent: u["bytes"].as_u64().unwrap(),
                received: None,
                lost: u["lost_packets"].as_u64(),
                packets: u["packets"].as_u64(),
            },
            None => ClientStream {
                client_sends: s["sender"]["sender"] == true,
                sent: s["sender"]["bytes"].as_u64().unwrap(),
                received: s["receiver"]["bytes"].as_u64(),
                lost: None,
                packets: None,
            },
        })
        .collect()
}
