//! The server side: accepts control connections, admits a connection as a session only once
//! its handshake (preamble and hello) is complete, and serves up to `max_sessions` sessions at
//! once, each isolated (its own control thread, data thread, cookie, counters and buffers;
//! only the listener and the read-only options are shared). A connection that never finishes
//! its handshake holds no session slot, only one of a bounded number of handshake threads
//! until the handshake timeout or a newer connection cuts it short ([`handshakes`]); a client
//! beyond the session limit is told so. The session itself is in [`session`].

mod handshakes;
mod log;
mod session;

pub use handshakes::MAX_HANDSHAKES;
use handshakes::{Handshakes, Slot};

pub use log::LogFormat;
use log::{log, Event};

/// The 32-bit cookie datagrams of one trial carry (see [`crate::pattern::dgram::trial_cookie`]).
pub use crate::pattern::dgram::trial_cookie;

use crate::auth::AuthKey;
use crate::error::NetError;
use netsweep_endpoint::TransportFactory;
use session::{handshake, Session};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Limits the server enforces on what a client may ask.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// Largest message size.
    pub max_size: u64,
    /// Longest stream trial.
    pub max_trial: Duration,
    /// Most round trips in one trial.
    pub max_repetitions: u64,
    /// Longest inactivity timeout a client may ask for.
    pub max_timeout: Duration,
    /// How long a fresh connection may take to introduce itself.
    pub handshake_timeout: Duration,
    /// Longest a session may last (checked between trials; `--max-duration`).
    pub max_session: Duration,
    /// Most bits per second one session may move through the server, both directions counted
    /// over each trial's wall time on the server (`--max-rate`); `None`: no limit.
    pub max_rate_bps: Option<u64>,
    /// Most data connections one session may open (`--flows`; `--max-flows`).
    pub max_flows: u32,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_size: 64 << 20,
            max_trial: Duration::from_secs(60),
            max_repetitions: 1_000_000_000,
            max_timeout: Duration::from_secs(300),
            handshake_timeout: Duration::from_secs(5),
            max_session: Duration::from_secs(3600),
            max_rate_bps: None,
            max_flows: netsweep_model::flows::MAX_FLOWS,
        }
    }
}

/// How `serve` behaves.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// What a client may ask.
    pub limits: ServerLimits,
    /// Serve one session, then return (the in-process server of `netsweep run`); a client
    /// arriving while it runs is told the server is busy.
    pub once: bool,
    /// Most sessions served at once; a client beyond is refused with the limit in the message.
    pub max_sessions: usize,
    /// Most sessions from one client address at once (`--max-sessions-per-ip`).
    pub max_sessions_per_ip: usize,
    /// Print a line per session to stderr.
    pub verbose: bool,
    /// How those lines are written.
    pub log_format: LogFormat,
    /// The pre-shared key a client must prove it holds (`--auth-key`); None: anyone may run.
    pub auth_key: Option<AuthKey>,
    /// This build's version, reported to clients.
    pub tool_version: String,
    /// With `once`: give up (an error) when no session was admitted within this long (the
    /// server rank of `-t mpi`, whose client is another process that may never come).
    pub first_session_within: Option<Duration>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            limits: ServerLimits::default(),
            once: false,
            max_sessions: default_max_sessions(),
            max_sessions_per_ip: DEFAULT_MAX_SESSIONS_PER_IP,
            verbose: false,
            log_format: LogFormat::Text,
            auth_key: None,
            tool_version: String::new(),
            first_session_within: None,
        }
    }
}

/// The default session limit: four per CPU. A session's data thread keeps a CPU busy only
/// during its trials and sits idle between them (control round trips, calibration), so a few
/// sessions per CPU can share the host; the bound keeps threads and per-session buffers (up to
/// the largest message size each) in check.
pub fn default_max_sessions() -> usize {
    thread::available_parallelism()
        .map_or(1, |n| n.get())
        .saturating_mul(4)
}

/// The default of `--max-sessions-per-ip`: a user normally runs one session at a time; four
/// leave room for a few while one address cannot take every slot of a larger server.
pub const DEFAULT_MAX_SESSIONS_PER_IP: usize = 4;

/// Counts one live thread of a kind while it exists: taken by the accept loop before the thread
/// starts, dropped when the thread ends however it ends (error at any stage, or a panic).
struct LiveGuard(Arc<AtomicUsize>);

impl LiveGuard {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count.clone())
    }
}

/// Who may become a session: at most `limit` at once and `per_ip` from one address, and with
/// `once` only one ever.
struct Admission {
    live: Arc<AtomicUsize>,
    admitted: AtomicU64,
    limit: usize,
    per_ip: usize,
    by_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
    once: bool,
}

/// An admitted session's hold on its slots: its address's count and the total, given back
/// when the session ends however it ends.
struct Admitted {
    _live: LiveGuard,
    ip: IpAddr,
    by_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut by_ip = self.by_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = by_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                by_ip.remove(&self.ip);
            }
        }
    }
}

impl Admission {
    /// Slots for a connection from `ip` whose handshake is complete, or why not. Sessions are
    /// admitted from many handshake threads: both counts move under one short lock, taken
    /// only here and when a session ends — never while anything waits on a peer.
    fn admit(&self, ip: IpAddr) -> Result<Admitted, String> {
        let mut by_ip = self.by_ip.lock().unwrap_or_else(|p| p.into_inner());
        let live = self.live.load(Ordering::SeqCst);
        if live >= self.limit || (self.once && self.admitted.load(Ordering::SeqCst) > 0) {
            return Err(self.refusal());
        }
        let mine = by_ip.entry(ip).or_insert(0);
        if *mine >= self.per_ip {
            return Err(format!(
                "it is running {} session{} for {ip}, its --max-sessions-per-ip limit; try \
                 again when one ends, or raise --max-sessions-per-ip on the server",
                self.per_ip,
                if self.per_ip == 1 { "" } else { "s" }
            ));
        }
        *mine += 1;
        self.admitted.fetch_add(1, Ordering::SeqCst);
        Ok(Admitted {
            _live: LiveGuard::new(&self.live),
            ip,
            by_ip: self.by_ip.clone(),
        })
    }

    /// Why a client was not admitted at the total limit, in the words it is shown.
    fn refusal(&self) -> String {
        if self.once {
            "it serves one run (--once) and that run is in progress; try again when it is done"
                .to_string()
        } else {
            format!(
                "it is running {} session{}, its --max-sessions limit; try again later, or \
                 raise --max-sessions on the server",
                self.limit,
                if self.limit == 1 { "" } else { "s" }
            )
        }
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves sessions until `stop` is set (checked at least every 100 ms) or, with `once`,
/// after the first session. Every connection gets a thread for its handshake (at most
/// [`MAX_HANDSHAKES`] at once: a newer connection cuts the oldest short); a completed
/// handshake is admitted as a session up to `opts.max_sessions` (one with `once`) and goes on
/// on the same thread; a session's failure ends only that session.
pub fn serve(
    listener: TcpListener,
    factory: Arc<dyn TransportFactory>,
    opts: ServeOptions,
    stop: Arc<AtomicBool>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let admission = Arc::new(Admission {
        live: Arc::new(AtomicUsize::new(0)),
        admitted: AtomicU64::new(0),
        limit: if opts.once {
            1
        } else {
            opts.max_sessions.max(1)
        },
        per_ip: opts.max_sessions_per_ip.max(1),
        by_ip: Arc::new(Mutex::new(HashMap::new())),
        once: opts.once,
    });
    let handshakes = Arc::new(Handshakes::default());
    let opts = Arc::new(opts);
    let mut threads: Vec<thread::JoinHandle<()>> = Vec::new();
    let mut numbered: u64 = 0;
    let give_up = opts.first_session_within.map(|d| Instant::now() + d);
    loop {
        reap(&mut threads);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if give_up.is_some_and(|t| Instant::now() >= t)
            && admission.admitted.load(Ordering::SeqCst) == 0
        {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no client started a session in time",
            ));
        }
        if opts.once
            && admission.admitted.load(Ordering::SeqCst) > 0
            && admission.live.load(Ordering::SeqCst) == 0
        {
            break;
        }
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log(
                    opts.log_format,
                    Event::Error,
                    None,
                    None,
                    Some(&format!("accept failed: {e}")),
                );
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if let Err(e) = stream.set_nonblocking(false) {
            log(
                opts.log_format,
                Event::Error,
                None,
                Some(peer),
                Some(&e.to_string()),
            );
            continue;
        }
        numbered += 1;
        let n = numbered;
        // At the cap the oldest handshake is cut short, its thread gone before this one starts.
        let Some(slot) = handshakes.enter(n, &stream, Duration::from_millis(200)) else {
            continue;
        };
        let (factory, opts2, admission2) = (factory.clone(), opts.clone(), admission.clone());
        let spawned = thread::Builder::new()
            .name(format!("netsweep-s{n}"))
            .spawn(move || {
                connection_thread(n, peer, stream, slot, &admission2, factory.as_ref(), &opts2)
            });
        match spawned {
            Ok(h) => threads.push(h),
            Err(e) => log(
                opts.log_format,
                Event::Error,
                Some(n),
                Some(peer),
                Some(&format!("cannot start its thread: {e}")),
            ),
        }
    }
    for h in threads {
        let _ = h.join();
    }
    Ok(())
}

/// Joins the session threads that have ended.
fn reap(sessions: &mut Vec<thread::JoinHandle<()>>) {
    let mut i = 0;
    while i < sessions.len() {
        if sessions[i].is_finished() {
            let _ = sessions.swap_remove(i).join();
        } else {
            i += 1;
        }
    }
}

/// One connection's thread: its handshake (holding only a handshake slot), then, if admitted,
/// its session, logged under its number and peer; if not, the refusal.
fn connection_thread(
    n: u64,
    peer: SocketAddr,
    stream: TcpStream,
    handshake_slot: Slot,
    admission: &Admission,
    factory: &dyn TransportFactory,
    opts: &ServeOptions,
) {
    let hello = handshake(
        stream,
        opts.limits.handshake_timeout,
        opts.auth_key.as_ref(),
    );
    let evicted = handshake_slot.evicted();
    drop(handshake_slot);
    let hello = match hello {
        Ok(h) => h,
        // Refused in the handshake (no key, wrong key, a bad hello): logged with the reason.
        Err(NetError::Refused(reason)) => {
            if opts.verbose {
                log(
                    opts.log_format,
                    Event::Refused,
                    None,
                    Some(peer),
                    Some(&reason),
                );
            }
            return;
        }
        Err(e) => {
            if opts.verbose {
                let reason = if evicted {
                    format!(
                        "before the session: its handshake was cut short for a newer \
                         connection ({MAX_HANDSHAKES} were in their handshake; a flood of \
                         silent connections?)"
                    )
                } else {
                    format!("before the session: {e}")
                };
                log(
                    opts.log_format,
                    Event::SessionFailed,
                    Some(n),
                    Some(peer),
                    Some(&reason),
                );
            }
            return;
        }
    };
    let _admitted = match admission.admit(peer.ip()) {
        Ok(a) => a,
        Err(message) => {
            if opts.verbose {
                log(
                    opts.log_format,
                    Event::Refused,
                    None,
                    Some(peer),
                    Some(&message),
                );
            }
            hello.refuse_busy(message);
            return;
        }
    };
    if opts.verbose {
        log(
            opts.log_format,
            Event::SessionStart,
            Some(n),
            Some(peer),
            None,
        );
    }
    let r = Session::run(hello, factory, opts);
    if opts.verbose {
        match &r {
            Ok(()) => log(
                opts.log_format,
                Event::SessionEnd,
                Some(n),
                Some(peer),
                None,
            ),
            Err(e) => log(
                opts.log_format,
                Event::SessionFailed,
                Some(n),
                Some(peer),
                Some(&e.to_string()),
            ),
        }
    }
}
