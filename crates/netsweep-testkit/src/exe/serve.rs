//! A `netsweep serve` under test: started on an ephemeral loopback port, its log collected,
//! its thread count read from /proc, killed on drop.

use super::{bin, listening_addr};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `netsweep serve` on an ephemeral loopback port, its log collected; killed on drop.
#[derive(Debug)]
pub struct Server {
    /// The server process.
    pub child: Child,
    /// Where it listens, HOST:PORT.
    pub addr: String,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// Starts `netsweep serve` with `extra` flags.
    pub fn start(extra: &[&str]) -> Server {
        let mut c = Command::new(bin());
        c.args(["serve", "--bind", "127.0.0.1", "--port", "0"])
            .args(extra);
        Self::spawn(c)
    }

    /// Starts `netsweep serve` with `extra` flags under an address-space limit of `bytes`
    /// (`prlimit --as`, which then runs the server in its own process).
    pub fn start_limited(bytes: u64, extra: &[&str]) -> Server {
        let mut c = Command::new("prlimit");
        c.arg(format!("--as={bytes}"))
            .arg("--")
            .arg(bin())
            .args(["serve", "--bind", "127.0.0.1", "--port", "0"])
            .args(extra);
        Self::spawn(c)
    }

    /// The server's `field` (`VmHWM:`, `VmRSS:`…) from /proc/PID/status, KiB.
    pub fn vm_kib(&self, field: &str) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/PID/status"))
    }

    /// Starts the server `c` runs (its first stderr line names where it listens).
    pub fn spawn(mut c: Command) -> Server {
        let mut child = c
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve starts");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        // A server that did not start as expected is not left running behind the test.
        if !line.contains("listening on ") {
            let _ = child.kill();
            let _ = child.wait();
        }
        let addr = listening_addr(&line);
        let log = Arc::new(Mutex::new(line));
        let sink = log.clone();
        // Keep draining the log so the server never writes into a full pipe.
        std::thread::spawn(move || {
            let mut l = String::new();
            while err.read_line(&mut l).is_ok_and(|n| n > 0) {
                sink.lock().unwrap().push_str(&l);
                l.clear();
            }
        });
        Server { child, addr, log }
    }

    /// Stops the server (SIGSTOP) for `stall` twice, 300 ms into its first session and
    /// `gap` after the first stall ends — however long the session's setup takes on a busy
    /// machine, one of them lands in a trial of a second or so.
    pub fn stall_twice(&self, stall: Duration, gap: Duration) {
        self.wait_log("session 1 from");
        let pid = self.child.id().to_string();
        let signal = |sig: &str| {
            let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
            assert!(ok.success(), "kill {sig} {pid}");
        };
        for _ in 0..2 {
            std::thread::sleep(Duration::from_millis(300));
            signal("-STOP");
            std::thread::sleep(stall);
            signal("-CONT");
            std::thread::sleep(gap);
        }
    }

    /// Stops the server (SIGSTOP) for `stall` whenever it is seen moving data — over 1000
    /// voluntary context switches a second over its threads (a blocking receive per message),
    /// which a trial of pingpong or of rate at 2k/s makes and the control exchanges between
    /// trials do not — at most once every 900 ms, until `done()`. A stall at fixed times after
    /// the session began could miss every trial on a busy machine.
    pub fn stall_during_traffic(&self, stall: Duration, done: impl Fn() -> bool) {
        self.wait_log("session 1 from");
        let pid = self.child.id().to_string();
        let signal = |sig: &str| {
            let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
            assert!(ok.success(), "kill {sig} {pid}");
        };
        let switches = || -> u64 {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                return 0;
            };
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
                .filter_map(|st| {
                    st.lines()
                        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                        .and_then(|n| n.trim().parse::<u64>().ok())
                })
                .sum()
        };
        let mut stalls = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = switches();
        while !done() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            let now = switches();
            if now.saturating_sub(last) >= 50 {
                signal("-STOP");
                std::thread::sleep(stall);
                signal("-CONT");
                stalls += 1;
                std::thread::sleep(Duration::from_millis(800));
                last = switches();
            } else {
                last = now;
            }
        }
        assert!(stalls > 0, "the server was never seen moving data");
    }

    /// The server's thread count, from /proc.
    pub fn threads(&self) -> usize {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("Threads: in /proc/PID/status")
    }

    /// Waits (bounded) until the thread count is back to `idle`: every session reaped.
    pub fn wait_threads(&self, idle: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = self.threads();
            if now == idle {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server threads stayed at {now}, idle is {idle}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (bounded, 20 s) until the log contains `needle`; returns the log. The server logs
    /// a session's end on its own schedule, after the client may already have exited.
    pub fn wait_log(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "the log never said {needle:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's first line (where it listens, its limits).
    pub fn log_first_line(&self) -> String {
        self.log().lines().next().unwrap_or_default().to_string()
    }

    /// Everything the server logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits (bounded) until session `n`'s end (or failure) is logged and its threads are
    /// reaped.
    pub fn wait_session_over(&self, n: u64, idle: usize) {
        let head = format!("session {n} from ");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self
            .log()
            .lines()
            .any(|l| l.contains(&head) && (l.ends_with(" ended") || l.contains(" failed: ")))
        {
            assert!(
                Instant::now() < deadline,
                "session {n} did not end; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.wait_threads(idle);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The word after `key` in a startup line (`sha256 AB:…`, `responsiveness clients on
/// 127.0.0.1:4043`), ended by a space or `)`.
pub fn startup_field(line: &str, key: &str) -> String {
    let at = line
        .find(key)
        .unwrap_or_else(|| panic!("{key:?} not in the startup line {line:?}"))
        + key.len();
    line[at..].split([' ', ')']).next().unwrap().to_string()
}
