//! The server side: accepts control connections, serves one run at a time (a second client
//! is told "busy"), and runs each trial's data loop on a dedicated data thread.

use crate::control::ServerControl;
use crate::endpoint::{pool_stride, DataListener, Endpoint, NoEndpoint, Slots, TransportFactory};
use crate::error::NetError;
use crate::hostinfo;
use crate::meter::{pin_current_thread, TrialMeter};
use crate::pattern::dgram::DgramAccount;
use crate::pattern::{crr, pingpong, stream, TrialSignals, SLICE};
use crate::spec::{Pattern, Transport, DGRAM_HEADER};
use netsweep_proto::messages::{ClientMsg, DataEndpoint, ServerMsg, SideCounters, TrialSpec};
use std::io;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
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
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_size: 64 << 20,
            max_trial: Duration::from_secs(60),
            max_repetitions: 1_000_000_000,
            max_timeout: Duration::from_secs(300),
            handshake_timeout: Duration::from_secs(5),
        }
    }
}

/// How `serve` behaves.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    pub limits: ServerLimits,
    /// Serve one session, then return (the in-process server of `netsweep run`).
    pub once: bool,
    /// Print a line per session to stderr.
    pub verbose: bool,
    /// This build's version, reported to clients.
    pub tool_version: String,
}

/// Serves sessions until `stop` is set (checked at least every 100 ms) or, with `once`,
/// after the first session.
pub fn serve(
    listener: TcpListener,
    factory: Arc<dyn TransportFactory>,
    opts: ServeOptions,
    stop: Arc<AtomicBool>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let busy = Arc::new(AtomicBool::new(false));
    let mut session: Option<thread::JoinHandle<()>> = None;
    let sessions = Arc::new(AtomicU64::new(0));
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if opts.once && sessions.load(Ordering::SeqCst) > 0 && !busy.load(Ordering::SeqCst) {
            break;
        }
        match listener.accept() {
            Ok((stream, peer)) => {
                stream.set_nonblocking(false)?;
                if busy.swap(true, Ordering::SeqCst) {
                    let limits = opts.limits.clone();
                    thread::spawn(move || turn_away(stream, &limits));
                    continue;
                }
                if let Some(h) = session.take() {
                    let _ = h.join();
                }
                let (factory, opts2, busy2, sessions2) = (
                    factory.clone(),
                    opts.clone(),
                    busy.clone(),
                    sessions.clone(),
                );
                session = Some(thread::spawn(move || {
                    if opts2.verbose {
                        note(format_args!("netsweep serve: session from {peer}"));
                    }
                    let r = Session::run(stream, factory.as_ref(), &opts2);
                    if opts2.verbose {
                        match &r {
                            Ok(()) => {
                                note(format_args!("netsweep serve: session from {peer} ended"))
                            }
                            Err(e) => note(format_args!(
                                "netsweep serve: session from {peer} failed: {e}"
                            )),
                        }
                    }
                    sessions2.fetch_add(1, Ordering::SeqCst);
                    busy2.store(false, Ordering::SeqCst);
                }));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(20))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                note(format_args!("netsweep serve: accept failed: {e}"));
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
    if let Some(h) = session.take() {
        let _ = h.join();
    }
    Ok(())
}

/// Writes a line to stderr, ignoring failures: a closed stderr must never kill a session.
fn note(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{args}");
}

/// Tells a second client that the server is busy, without disturbing the running session.
fn turn_away(stream: TcpStream, limits: &ServerLimits) {
    let Ok(mut ctl) = ServerControl::accept(stream, limits.handshake_timeout) else {
        return;
    };
    if let Ok(ClientMsg::Hello { .. }) = ctl.recv("waiting for hello", limits.handshake_timeout) {
        let _ = ctl.send(ServerMsg::Busy {
            message: "another run is in progress on this server".into(),
        });
    }
}

/// A command for the data thread.
enum DataCmd {
    Trial { spec: TrialSpec, trial: u64 },
}

/// The control thread's ends of the channels to its data thread.
struct DataChannels {
    cmd: mpsc::Sender<DataCmd>,
    /// One message per trial, sent once the data thread has taken its epoch.
    armed: mpsc::Receiver<()>,
    results: mpsc::Receiver<io::Result<SideCounters>>,
}

/// One session's control side.
struct Session;

impl Session {
    fn run(
        stream: TcpStream,
        factory: &dyn TransportFactory,
        opts: &ServeOptions,
    ) -> Result<(), NetError> {
        let limits = &opts.limits;
        let local_ip: IpAddr = stream
            .local_addr()
            .map_err(|e| NetError::io("control socket", e))?
            .ip();
        // crr serves data connections from this address only.
        let client_ip: IpAddr = stream
            .peer_addr()
            .map_err(|e| NetError::io("control socket", e))?
            .ip();
        let mut ctl = ServerControl::accept(stream, limits.handshake_timeout)?;
        let ClientMsg::Hello { setup, .. } =
            ctl.recv("waiting for hello", limits.handshake_timeout)?
        else {
            return Err(NetError::Refused("expected hello".into()));
        };
        let refuse = |ctl: &mut ServerControl, message: String| -> Result<(), NetError> {
            ctl.send(ServerMsg::Error {
                message: message.clone(),
            })?;
            Err(NetError::Refused(message))
        };
        let Some(transport) = Transport::parse(&setup.transport) else {
            return refuse(
                &mut ctl,
                format!("this server does not know transport {:?}", setup.transport),
            );
        };
        let Some(pattern) = Pattern::parse(&setup.pattern) else {
            return refuse(
                &mut ctl,
                format!("this server does not know pattern {:?}", setup.pattern),
            );
        };
        if setup.max_size > limits.max_size {
            return refuse(
                &mut ctl,
                format!(
                    "message size {} is above this server's limit of {} bytes",
                    setup.max_size, limits.max_size
                ),
            );
        }
        let timeout = Duration::from_nanos(setup.timeout_ns)
            .clamp(Duration::from_millis(100), limits.max_timeout);
        let mut listener = match factory.listen(&setup, local_ip) {
            Ok(l) => l,
            Err(e) => {
                return refuse(
                    &mut ctl,
                    format!("cannot open a {transport} data endpoint: {e}"),
                )
            }
        };
        let cookie = random_u64();
        let data: DataEndpoint = listener.endpoint();
        ctl.send(ServerMsg::Welcome {
            server: hostinfo::collect(&opts.tool_version),
            cookie,
            data,
        })?;
        // crr opens a connection per transaction: ready the listener once (timeouts, the
        // client's address) and keep it for the data thread; its connections inherit the
        // knobs it grants. Otherwise accept before waiting for data_ready: a datagram client
        // waits for our acknowledgement of its cookie before it says data_ready.
        let mut crr_granted = None;
        let (mut ep, crr_listener): (Box<dyn Endpoint>, Option<Box<dyn DataListener>>) =
            if pattern == Pattern::Crr {
                match listener.prepare_crr(client_ip, SLICE) {
                    Ok(g) => crr_granted = Some(g),
                    Err(e) => {
                        return refuse(
                            &mut ctl,
                            format!("cannot prepare the {transport} crr listener: {e}"),
                        )
                    }
                }
                (Box::new(NoEndpoint), Some(listener))
            } else {
                match listener.accept(cookie, timeout) {
                    Ok(ep) => (ep, None),
                    Err(e) => {
                        return refuse(
                            &mut ctl,
                            format!("the client's data connection did not arrive: {e}"),
                        )
                    }
                }
            };
        match ctl.recv("waiting for data_ready", timeout)? {
            ClientMsg::DataReady {} => {}
            _ => return Err(NetError::Refused("expected data_ready".into())),
        }
        ep.set_recv_timeout(Some(SLICE))
            .map_err(|e| NetError::io("data endpoint", e))?;
        let mut granted = crr_granted.unwrap_or_else(|| ep.granted());
        granted.cpu = setup.server_knobs.cpu;

        let signals = Arc::new(TrialSignals::default());
        let (cmd_tx, cmd_rx) = mpsc::channel::<DataCmd>();
        let (res_tx, res_rx) = mpsc::channel::<io::Result<SideCounters>>();
        let (armed_tx, armed_rx) = mpsc::channel::<()>();
        let (pin_tx, pin_rx) = mpsc::channel::<Result<(), String>>();
        let pin = setup.server_knobs.cpu;
        let data_thread = {
            let signals = signals.clone();
            let max = setup.max_size as usize;
            let offset = setup.server_knobs.buffer_offset.unwrap_or(0) as usize;
            let batch = setup.server_knobs.batch.unwrap_or(1).clamp(1, 1024) as usize;
            let pool = setup.server_knobs.cache_pool.unwrap_or(0).min(1 << 28) as usize;
            thread::Builder::new()
                .name("netsweep-data".into())
                .spawn(move || {
                    // Pin first, so every trial runs where the client asked.
                    let pinned = pin.map_or(Ok(()), pin_current_thread);
                    let ok = pinned.is_ok();
                    let _ = pin_tx.send(pinned);
                    if ok {
                        data_loop(
                            ep,
                            crr_listener,
                            pattern,
                            max,
                            batch,
                            offset,
                            pool,
                            cookie,
                            timeout,
                            &signals,
                            cmd_rx,
                            armed_tx,
                            res_tx,
                        );
                    }
                })
                .map_err(|e| NetError::io("starting the data thread", e))?
        };
        match pin_rx.recv_timeout(timeout) {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                let _ = data_thread.join();
                return refuse(&mut ctl, format!("server side --cpu: {message}"));
            }
            Err(_) => return refuse(&mut ctl, "the server's data thread did not start".into()),
        }
        ctl.send(ServerMsg::DataBound { granted })?;
        let chans = DataChannels {
            cmd: cmd_tx,
            armed: armed_rx,
            results: res_rx,
        };
        let result = Self::trials(
            &mut ctl, pattern, transport, limits, timeout, &signals, &chans,
        );
        signals.abort.store(true, Ordering::SeqCst);
        drop(chans);
        let _ = data_thread.join();
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn trials(
        ctl: &mut ServerControl,
        pattern: Pattern,
        transport: Transport,
        limits: &ServerLimits,
        timeout: Duration,
        signals: &TrialSignals,
        chans: &DataChannels,
    ) -> Result<(), NetError> {
        let res_rx = &chans.results;
        loop {
            match ctl.recv("waiting for the next trial", timeout)? {
                ClientMsg::TrialStart { trial, spec } => {
                    if let Err(message) = check_trial(&spec, pattern, transport, limits) {
                        ctl.send(ServerMsg::Error {
                            message: message.clone(),
                        })?;
                        return Err(NetError::Refused(message));
                    }
                    signals.reset();
                    if chans.cmd.send(DataCmd::Trial { spec, trial }).is_err() {
                        return Err(NetError::Closed {
                            during: "the data thread ended".into(),
                        });
                    }
                    // Ready only once the data thread is armed (its epoch taken): the
                    // client's first byte can then never arrive before the receiver's clock.
                    if let Err(e) = chans.armed.recv_timeout(timeout) {
                        let message = match (e, res_rx.try_recv()) {
                            (_, Ok(Err(e))) => format!("server data path failed: {e}"),
                            (mpsc::RecvTimeoutError::Timeout, _) => {
                                "server data thread did not arm the trial in time".to_string()
                            }
                            _ => "the server's data thread ended".to_string(),
                        };
                        ctl.send(ServerMsg::Error {
                            message: message.clone(),
                        })?;
                        return Err(NetError::Refused(message));
                    }
                    ctl.send(ServerMsg::Ready { trial })?;
                }
                ClientMsg::TrialEnd { trial, counters } => {
                    signals.end(counters.bytes_sent, counters.messages_sent);
                    let wait = timeout + Duration::from_secs(1);
                    let counters = match res_rx.recv_timeout(wait) {
                        Ok(Ok(c)) => c,
                        Ok(Err(e)) => {
                            let message = format!("server data path failed: {e}");
                            ctl.send(ServerMsg::Error {
                                message: message.clone(),
                            })?;
                            return Err(NetError::Refused(message));
                        }
                        Err(_) => {
                            let message =
                                "server data thread did not finish the trial in time".to_string();
                            ctl.send(ServerMsg::Error {
                                message: message.clone(),
                            })?;
                            return Err(NetError::Refused(message));
                        }
                    };
                    ctl.send(ServerMsg::TrialReport { trial, counters })?;
                }
                ClientMsg::Bye {} => return Ok(()),
                other => {
                    return Err(NetError::Refused(format!("unexpected message {other:?}")));
                }
            }
        }
    }
}

fn check_trial(
    spec: &TrialSpec,
    pattern: Pattern,
    transport: Transport,
    limits: &ServerLimits,
) -> Result<(), String> {
    if spec.size > limits.max_size {
        return Err(format!(
            "trial size {} above the server limit {}",
            spec.size, limits.max_size
        ));
    }
    if spec.repetitions > limits.max_repetitions {
        return Err(format!(
            "{} repetitions above the server limit {}",
            spec.repetitions, limits.max_repetitions
        ));
    }
    if Duration::from_nanos(spec.duration_ns) > limits.max_trial {
        return Err(format!(
            "trial of {} ns above the server limit",
            spec.duration_ns
        ));
    }
    if pattern == Pattern::Stream && transport.is_datagram() && spec.size < DGRAM_HEADER {
        return Err(format!(
            "datagram stream messages need at least {DGRAM_HEADER} bytes"
        ));
    }
    Ok(())
}

/// The data thread: owns the endpoint and runs each trial's loop.
#[allow(clippy::too_many_arguments)]
fn data_loop(
    mut ep: Box<dyn Endpoint>,
    mut crr_listener: Option<Box<dyn DataListener>>,
    pattern: Pattern,
    max_size: usize,
    batch: usize,
    offset: usize,
    cache_pool: usize,
    cookie: u64,
    idle: Duration,
    signals: &TrialSignals,
    cmds: mpsc::Receiver<DataCmd>,
    armed: mpsc::Sender<()>,
    results: mpsc::Sender<io::Result<SideCounters>>,
) {
    // Allocated once per session: one byte more than the largest message, so an oversize
    // datagram shows as a wrong length instead of silently truncating.
    let slot = max_size.max(64 * 1024) + 1;
    let pool_len = (slot * batch).max(cache_pool);
    let mut buf = crate::endpoint::MessageBuffer::new(pool_len, offset);
    let mut lens = vec![0usize; batch];
    if let Err(e) = ep.prepare(slot, batch) {
        let _ = results.send(Err(e));
        return;
    }
    let mut account = DgramAccount::new(0);
    while let Ok(cmd) = cmds.recv() {
        let DataCmd::Trial { spec, trial } = cmd;
        let meter = TrialMeter::start(ep.as_mut());
        if pattern == Pattern::Stream {
            account.set_cookie(trial_cookie(cookie, trial));
            account.reset();
        }
        // Armed: everything above is done, the loop below starts at once. The control thread
        // says Ready only after this, so the receiver's epoch precedes the client's first byte.
        let epoch = Instant::now();
        if armed.send(()).is_err() {
            break;
        }
        let r = match pattern {
            Pattern::Pingpong => {
                let size = spec.size as usize;
                let stride = if cache_pool > slot {
                    pool_stride(size + 1, offset)
                } else {
                    slot
                };
                let mut slots = Slots::new(&mut buf.as_mut()[..pool_len], size + 1, stride);
                pingpong::server_trial(
                    ep.as_mut(),
                    &mut slots,
                    size,
                    spec.repetitions,
                    signals,
                    idle,
                )
            }
            Pattern::Crr => match crr_listener.as_mut() {
                Some(l) => crr::server_trial(
                    l.as_mut(),
                    cookie,
                    &mut buf.as_mut()[..slot],
                    spec.size as usize,
                    signals,
                    idle,
                ),
                None => Err(io::Error::other("crr session without a listener")),
            },
            Pattern::Stream => stream::receiver_trial(
                ep.as_mut(),
                buf.as_mut(),
                slot,
                &mut lens,
                signals,
                idle,
                &mut account,
                epoch,
            ),
        };
        let r = r.map(|mut c| {
            meter.finish(ep.as_mut(), &mut c);
            c
        });
        if results.send(r).is_err() {
            break;
        }
    }
}

/// The 32-bit cookie datagrams of one trial carry: stale datagrams of an earlier trial
/// count as foreign, never as received.
pub fn trial_cookie(cookie: u64, trial: u64) -> u32 {
    (cookie as u32).wrapping_add((trial as u32).wrapping_mul(0x9E37_79B9))
}

/// A random 64-bit value from the kernel (session cookies).
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into our buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
    if n != 8 {
        // Fall back on time and pid: cookies only need to differ between sessions.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return t ^ ((std::process::id() as u64) << 32);
    }
    u64::from_le_bytes(b)
}
