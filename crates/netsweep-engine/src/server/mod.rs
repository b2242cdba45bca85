//! The server side: accepts control connections, admits a connection as a session only once
//! its handshake (preamble and hello) is complete, and serves up to `max_sessions` sessions at
//! once, each isolated (its own control thread, data thread, cookie, counters and buffers;
//! only the listener and the read-only options are shared). A connection that never finishes
//! its handshake holds no session slot, only one of a bounded number of handshake threads
//! until the handshake timeout or a newer connection cuts it short ([`handshakes`]); a client
//! beyond the session limit is told so. The session itself is in [`session`].

mod admission;
pub mod allow;
pub mod budget;
mod handshakes;
pub mod iperf3;
pub mod listen;
mod log;
pub mod metrics;
pub mod plan;
pub mod rpm;
mod session;

pub use admission::client_key;
use admission::Admission;
pub use budget::{Budget, Cost, HostLimits};
use handshakes::{Handshakes, Slot};
pub use handshakes::{MAX_HANDSHAKES, MAX_HANDSHAKES_PER_IP};
pub use plan::{Plan, Policy};

pub use log::LogFormat;
use log::{log, Event};

/// The 32-bit cookie datagrams of one trial carry (see [`crate::pattern::dgram::trial_cookie`]).
pub use crate::pattern::dgram::trial_cookie;

use crate::auth::AuthKey;
use crate::error::NetError;
use netsweep_endpoint::TransportFactory;
use session::{handshake, Grant, Session};
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
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
    /// Longest a session may last (`--max-duration`): checked between trials, and a trial still
    /// running at the limit is cut, the client told why on the control connection.
    pub max_session: Duration,
    /// Most bits per second one session may move through the server, both directions counted
    /// over each trial's wall time on the server (`--max-rate`); `None`: no limit.
    pub max_rate_bps: Option<u64>,
    /// Most data connections one session may open (`--flows`; `--max-flows`).
    pub max_flows: u32,
    /// Most memory one session may hold: its buffers, its transport's rings and tmpfs files
    /// (`--max-session-memory`).
    pub session_memory: u64,
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
            session_memory: DEFAULT_SESSION_MEMORY,
        }
    }
}

/// The default of `--max-session-memory` when the host allows more: a sweep to the default
/// `--max-size` (64 MiB) with bidir, or 64 flows' threads at 8 MiB, fits.
pub const DEFAULT_SESSION_MEMORY: u64 = 1 << 30;

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
    /// What clients may ask beyond a plain measurement (`--allow`).
    pub policy: Policy,
    /// What all sessions together may hold (`--max-memory`, `--max-threads`, the open-files
    /// limit).
    pub budget: Cost,
    /// With `--iperf3`: write each iperf3 test's record into this directory
    /// (`--iperf3-results`).
    pub iperf3_results: Option<std::path::PathBuf>,
    /// `--allow-from`: the client addresses served (None: any).
    pub allow_from: Option<allow::AllowFrom>,
    /// `--metrics`: the counters its Prometheus endpoint shows (None: not kept).
    pub metrics: Option<Arc<metrics::ServeMetrics>>,
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
            policy: Policy::default(),
            budget: HostLimits::read().default_budget(),
            iperf3_results: None,
            allow_from: None,
            metrics: None,
        }
    }
}

impl ServeOptions {
    /// Whether a connection from `peer` may go on to its handshake: with `--allow-from`, only
    /// from a listed prefix; any other is logged as refused and closed by the caller.
    pub(crate) fn admits_address(&self, peer: SocketAddr, p: metrics::Protocol) -> bool {
        let ok = self.allow_from.as_ref().is_none_or(|a| a.allows(peer.ip()));
        if !ok {
            self.count(p, Event::Refused);
            let port = match p {
                metrics::Protocol::Netsweep => "control port",
                metrics::Protocol::Iperf3 => "iperf3 port",
                metrics::Protocol::Rpm => "rpm port",
            };
            log(
                self.log_format,
                Event::Refused,
                None,
                Some(peer),
                Some(&format!("{port}: the address is not in --allow-from")),
            );
        }
        ok
    }

    /// Counts a connection's event for `--metrics` (a start, a refusal).
    pub(in crate::server) fn count(&self, p: metrics::Protocol, event: Event) {
        let Some(m) = &self.metrics else { return };
        match event {
            Event::SessionStart => m.started(p),
            Event::Refused => m.refused(p),
            _ => {}
        }
    }

    /// Counts an admitted session's end for `--metrics`.
    pub(in crate::server) fn count_end(&self, p: metrics::Protocol, ok: bool) {
        if let Some(m) = &self.metrics {
            m.finished(p, ok);
        }
    }
}

impl ServeOptions {
    /// The options of a server whose only clients are the run (or ranks) that started it:
    /// every transport and knob allowed, the host's facts shared, and a session may use the
    /// whole budget (the user asked for it on this host).
    pub fn in_process() -> Self {
        let d = Self::default();
        Self {
            policy: Policy::ALL,
            limits: ServerLimits {
                session_memory: d.budget.memory,
                ..d.limits.clone()
            },
            ..d
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
    serve_with(listener, Ports::default(), factory, opts, stop)
}

/// The server's ports beside its control port: iperf3's (`--iperf3`) and the responsiveness
/// port (`--rpm`: the caller's HTTP server, which this admission admits for).
#[derive(Default)]
pub struct Ports {
    /// `--iperf3`.
    pub iperf3: Option<iperf3::Listeners>,
    /// `--rpm`.
    pub rpm: Option<rpm::RpmServer>,
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports")
            .field("iperf3", &self.iperf3)
            .field("rpm", &self.rpm.is_some())
            .finish()
    }
}

/// [`serve`], and its other ports: iperf3 clients' ([`iperf3`]) and responsiveness clients'
/// ([`rpm`]), whose tests the same admission and budget admit; they stop with the server.
pub fn serve_with(
    listener: TcpListener,
    ports: Ports,
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
        budget: Budget::new(opts.budget),
    });
    let handshakes = Arc::new(Handshakes::default());
    let controls = Arc::new(Controls::default());
    let opts = Arc::new(opts);
    let mut threads: Vec<thread::JoinHandle<()>> = Vec::new();
    let numbers = Arc::new(AtomicU64::new(0));
    if let Some(server) = ports.rpm {
        threads.push(rpm::spawn(
            server,
            admission.clone(),
            opts.clone(),
            numbers.clone(),
            stop.clone(),
        )?);
    }
    if let Some(l) = ports.iperf3 {
        let shared = iperf3::Shared {
            admission: admission.clone(),
            opts: opts.clone(),
            controls: controls.clone(),
            numbers: numbers.clone(),
        };
        let stop = stop.clone();
        threads.push(
            thread::Builder::new()
                .name("netsweep-iperf3".into())
                .spawn(move || {
                    if let Err(e) = iperf3::serve(l, shared, stop) {
                        let m = format!("the iperf3 port stopped: {e}");
                        log(LogFormat::Text, Event::Error, None, None, Some(&m));
                    }
                })?,
        );
    }
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
            // An IPv4 client of the dual-stack listener is an IPv4 peer (log, per-address
            // limits), not ::ffff:….
            Ok((s, p)) => (s, SocketAddr::new(p.ip().to_canonical(), p.port())),
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
        if !opts.admits_address(peer, metrics::Protocol::Netsweep) {
            continue;
        }
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
        let n = numbers.fetch_add(1, Ordering::SeqCst) + 1;
        // At the cap a handshake is cut short (the oldest of the address holding the most),
        // its thread gone before this one starts.
        let Some(slot) = handshakes.enter(
            n,
            &stream,
            client_key(peer.ip()),
            Duration::from_millis(200),
        ) else {
            continue;
        };
        let server = Shared {
            admission: admission.clone(),
            factory: factory.clone(),
            opts: opts.clone(),
            controls: controls.clone(),
        };
        let spawned = thread::Builder::new()
            .name(format!("netsweep-s{n}"))
            .spawn(move || connection_thread(n, peer, stream, slot, &server));
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
    // Stopping (SIGTERM, or the end of a --once run): cut short every handshake and shut every
    // session's control connection down — a session then ends at once, stopping its data
    // thread within its grace — and wait for them, but not forever: whatever a client does,
    // the server is gone within STOP_WAIT.
    handshakes.cut_all();
    controls.shutdown_all();
    let until = Instant::now() + STOP_WAIT;
    while threads.iter().any(|h| !h.is_finished()) && Instant::now() < until {
        thread::sleep(Duration::from_millis(5));
    }
    reap(&mut threads);
    if !threads.is_empty() {
        log(
            opts.log_format,
            Event::Error,
            None,
            None,
            Some(&format!(
                "{} session thread(s) did not end within {:.1} s of the stop; leaving them",
                threads.len(),
                STOP_WAIT.as_secs_f64()
            )),
        );
    }
    Ok(())
}

/// How long a stopping server waits for its sessions to end.
const STOP_WAIT: Duration = Duration::from_millis(1500);

/// What every connection thread shares with the accept loop.
struct Shared {
    admission: Arc<Admission>,
    factory: Arc<dyn TransportFactory>,
    opts: Arc<ServeOptions>,
    controls: Arc<Controls>,
}

/// The control connections of running sessions, so that a stopping server can end them.
#[derive(Default)]
struct Controls(Mutex<HashMap<u64, TcpStream>>);

impl Controls {
    fn add(&self, n: u64, s: TcpStream) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(n, s);
    }

    fn remove(&self, n: u64) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&n);
    }

    fn shutdown_all(&self) {
        for s in self.0.lock().unwrap_or_else(|p| p.into_inner()).values() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
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

/// One connection's thread: its handshake (holding only a handshake slot), its plan, then,
/// if admitted (slots and budget), its session, logged under its number and peer; if not, the
/// refusal.
fn connection_thread(
    n: u64,
    peer: SocketAddr,
    stream: TcpStream,
    handshake_slot: Slot,
    s: &Shared,
) {
    let opts = s.opts.as_ref();
    let say = |event: Event, session: Option<u64>, reason: Option<&str>| {
        opts.count(metrics::Protocol::Netsweep, event);
        if opts.verbose {
            log(opts.log_format, event, session, Some(peer), reason);
        }
    };
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
        Err(NetError::Refused(reason)) => return say(Event::Refused, None, Some(&reason)),
        Err(e) => {
            let reason = if evicted {
                format!(
                    "before the session: its handshake was cut short for a newer \
                     connection ({MAX_HANDSHAKES} were in their handshake; a flood of \
                     silent connections?)"
                )
            } else {
                format!("before the session: {e}")
            };
            return say(Event::SessionFailed, Some(n), Some(&reason));
        }
    };
    // The hello, checked and costed once, before anything is allocated for it.
    let plan = Plan::new(
        hello.setup(),
        hello.peer(),
        &opts.limits,
        &opts.policy,
        s.factory.as_ref(),
    )
    .and_then(|p| match p.cost.over(&opts.budget) {
        None => Ok(p),
        Some(r) => Err(format!(
            "this run would hold {} on the server, more than the {} it gives all its sessions \
             together ({}); use smaller --sizes or fewer --flows, or ask its operator to raise it",
            r.amount(r.of(&p.cost)),
            r.amount(r.of(&opts.budget)),
            r.server_flag()
        )),
    });
    let plan = match plan {
        Ok(p) => p,
        Err(message) => {
            say(Event::Refused, None, Some(&message));
            return hello.refuse(message);
        }
    };
    let (_admitted, reservation) = match s.admission.admit(peer.ip(), plan.cost) {
        Ok(a) => a,
        Err(message) => {
            say(Event::Refused, None, Some(&message));
            return hello.refuse_busy(message);
        }
    };
    say(Event::SessionStart, Some(n), None);
    if let Ok(c) = hello.control_stream() {
        s.controls.add(n, c);
    }
    let grant = Grant {
        factory: s.factory.as_ref(),
        opts,
        deadline: Instant::now() + opts.limits.max_session,
        reservation,
    };
    let r = Session::run(hello, plan, grant);
    s.controls.remove(n);
    opts.count_end(metrics::Protocol::Netsweep, r.is_ok());
    match &r {
        Ok(()) => say(Event::SessionEnd, Some(n), None),
        Err(e) => say(Event::SessionFailed, Some(n), Some(&e.to_string())),
    }
}
