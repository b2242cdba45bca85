//! One admitted session: the rest of its handshake (the transport, the data endpoint, the
//! welcome), its data thread, and its trials until `bye`, a failure or the client's
//! disappearance; every exit path stops and reaps the data thread.

use super::budget::Reservation;
use super::plan::{Peer, Plan};
use super::{ServeOptions, ServerLimits};
use crate::auth::{server_challenge, AuthKey};
use crate::control::ServerControl;
use crate::error::NetError;
use crate::hostinfo;
use crate::meter::{pin_current_thread, TrialMeter};
use crate::pattern::{
    ServerBuffers, ServerOpen, ServerPattern, ServerTrial, SessionSockets, TrialSignals,
};
use netsweep_endpoint::TransportFactory;
use netsweep_proto::messages::{
    ClientMsg, DataEndpoint, ServerMsg, SessionSetup, SideCounters, TrialSpec,
};
use std::io;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

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

/// A connection that completed its handshake: a negotiated control connection and the
/// client's hello. Only such a connection is admitted as a session.
pub(super) struct Hello {
    ctl: ServerControl,
    setup: SessionSetup,
    local_ip: IpAddr,
    client_ip: IpAddr,
}

impl Hello {
    /// Tells the client it is not admitted for now (a limit on what runs at once), and why.
    pub(super) fn refuse_busy(mut self, message: String) {
        let _ = self.ctl.send(ServerMsg::Busy { message });
    }

    /// Tells the client its session cannot run here (its plan is refused), and why.
    pub(super) fn refuse(mut self, message: String) {
        let _ = self.ctl.send(ServerMsg::Error { message });
    }

    /// The session the client asks for.
    pub(super) fn setup(&self) -> &SessionSetup {
        &self.setup
    }

    /// Where the client is.
    pub(super) fn peer(&self) -> Peer {
        Peer {
            ip: self.client_ip,
            local: self.local_ip,
        }
    }

    /// A second handle on the control connection, for shutting it down when the server
    /// stops.
    pub(super) fn control_stream(&self) -> io::Result<std::net::TcpStream> {
        self.ctl.stream().try_clone()
    }
}

/// The handshake of a fresh connection: the preamble, the client's hello and, when the server
/// holds a key, the challenge and its answer — each step within `timeout` (a deadline per
/// step, so a client trickling bytes cannot stretch it).
pub(super) fn handshake(
    stream: std::net::TcpStream,
    timeout: Duration,
    key: Option<&AuthKey>,
) -> Result<Hello, NetError> {
    let local_ip: IpAddr = stream
        .local_addr()
        .map_err(|e| NetError::io("control socket", e))?
        .ip()
        // An IPv4 client of a dual-stack (`[::]`) server: its data sockets are IPv4's.
        .to_canonical();
    // crr serves data connections from this address only.
    let client_ip: IpAddr = stream
        .peer_addr()
        .map_err(|e| NetError::io("control socket", e))?
        .ip()
        .to_canonical();
    let mut ctl = ServerControl::accept(stream, timeout)?;
    let ClientMsg::Hello {
        setup,
        client_nonce,
        ..
    } = ctl.recv("waiting for hello", timeout)?
    else {
        return Err(NetError::Refused("expected hello".into()));
    };
    if let Some(key) = key {
        server_challenge(&mut ctl, key, client_nonce.as_deref(), timeout)?;
    }
    Ok(Hello {
        ctl,
        setup,
        local_ip,
        client_ip,
    })
}

/// One session's control side.
pub(super) struct Session;

/// How long the control thread waits for the data thread to stop once the session is over,
/// before it shuts the data sockets down (waking a call blocked on the client), and again
/// after: however the client behaves, a session's end takes at most twice this.
const STOP_GRACE: Duration = Duration::from_millis(500);

/// What an admitted session runs with besides its plan.
pub(super) struct Grant<'a> {
    /// Makes the data path.
    pub factory: &'a dyn TransportFactory,
    /// The server's options.
    pub opts: &'a ServeOptions,
    /// When the session must be over (`--max-duration` from its admission).
    pub deadline: Instant,
    /// Its share of the server's budget: moved to its data thread, so that it is given back
    /// only when the last thread holding its buffers ends.
    pub reservation: Reservation,
}

impl Session {
    /// Serves an admitted session to its end.
    pub(super) fn run(hello: Hello, plan: Plan, a: Grant<'_>) -> Result<(), NetError> {
        let limits = &a.opts.limits;
        let Hello {
            mut ctl,
            setup,
            local_ip,
            client_ip,
        } = hello;
        let refuse = |ctl: &mut ServerControl, message: String| -> Result<(), NetError> {
            ctl.send(ServerMsg::Error {
                message: message.clone(),
            })?;
            Err(NetError::Refused(message))
        };
        // The plan admitted these knobs (the operator's policy): the control joins the run's
        // class on the way back too.
        crate::control::join_class(
            ctl.stream(),
            setup.server_knobs.tos,
            setup.server_knobs.priority,
        );
        let transport = plan.transport;
        let timeout = plan.timeout;
        let listener = match a.factory.listen(&setup, local_ip, client_ip) {
            Ok(l) => l,
            Err(e) => {
                return refuse(
                    &mut ctl,
                    format!("cannot open a {transport} data endpoint: {e}"),
                )
            }
        };
        let cookie = match netsweep_endpoint::random_u64() {
            Ok(c) => c,
            Err(e) => return refuse(&mut ctl, format!("no session cookie: {e}")),
        };
        let data: DataEndpoint = listener.endpoint();
        // Host facts go to a client that proved the key, or where the operator allows them.
        let server = if a.opts.auth_key.is_some() || a.opts.policy.host_facts {
            hostinfo::collect(&a.opts.tool_version)
        } else {
            hostinfo::withheld(&a.opts.tool_version)
        };
        ctl.send(ServerMsg::Welcome {
            server,
            cookie,
            data,
        })?;
        // The pattern opens its data path before data_ready: a datagram client waits for our
        // acknowledgement of its cookie before it says data_ready (crr readies the listener).
        let sockets = Arc::new(SessionSockets::default());
        let open = ServerOpen {
            transport,
            cookie,
            client: client_ip,
            timeout,
            reverse: plan.reverse,
            one_way: plan.one_way,
            flows: plan.flows,
            cpu: plan.cpu,
            data_threads: plan.sizes.threads,
            deadline: a.deadline,
            sockets: sockets.clone(),
        };
        let mut path = match (plan.reg.server)(listener, &open) {
            Ok(p) => p,
            Err(message) => return refuse(&mut ctl, message),
        };
        match ctl.recv("waiting for data_ready", left(timeout, a.deadline))? {
            ClientMsg::DataReady {} => {}
            _ => return Err(NetError::Refused("expected data_ready".into())),
        }
        let mut granted = path.bound().map_err(|e| NetError::io("data endpoint", e))?;
        granted.cpu = plan.cpu;

        let signals = Arc::new(TrialSignals::default());
        let (cmd_tx, cmd_rx) = mpsc::channel::<DataCmd>();
        let (res_tx, res_rx) = mpsc::channel::<io::Result<SideCounters>>();
        let (armed_tx, armed_rx) = mpsc::channel::<()>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let data_thread = {
            let signals = signals.clone();
            let (pin, sizes, flows) = (plan.cpu, plan.sizes, plan.flows);
            let reservation = a.reservation;
            let chans = DataThreadChannels {
                cmds: cmd_rx,
                armed: armed_tx,
                results: res_tx,
            };
            thread::Builder::new()
                .name("netsweep-data".into())
                .spawn(move || {
                    let _reservation = reservation;
                    // Pin first, so every trial runs where the client asked; then the
                    // buffers, sized by the plan (a flows session's threads keep their own).
                    let bufs = pin
                        .map_or(Ok(()), pin_current_thread)
                        .map_err(|m| format!("server side --cpu: {m}"))
                        .and_then(|()| {
                            let b = if flows > 1 {
                                Ok(ServerBuffers::none())
                            } else {
                                ServerBuffers::try_new(&sizes)
                            };
                            b.and_then(|b| path.prepare(b.slot, sizes.batch).map(|()| b))
                                .map_err(|e| format!("server buffers: {e}"))
                        });
                    match bufs {
                        Ok(bufs) => {
                            let _ = ready_tx.send(Ok(()));
                            data_loop(path.as_mut(), bufs, timeout, &signals, chans);
                        }
                        Err(m) => {
                            let _ = ready_tx.send(Err(m));
                        }
                    }
                })
                .map_err(|e| NetError::io("starting the data thread", e))?
        };
        let chans = DataChannels {
            cmd: cmd_tx,
            armed: armed_rx,
            results: res_rx,
        };
        let session = Control {
            plan: &plan,
            limits,
            timeout,
            deadline: a.deadline,
            signals: &signals,
            chans: &chans,
        };
        let result = match ready_rx.recv_timeout(left(timeout, a.deadline)) {
            Ok(Ok(())) => ctl
                .send(ServerMsg::DataBound { granted })
                .and_then(|()| session.trials(&mut ctl)),
            Ok(Err(message)) => refuse(&mut ctl, message),
            Err(_) => refuse(&mut ctl, "the server's data thread did not start".into()),
        };
        // However the session ended, stop the data thread: its loops look at the abort flag
        // on every pass and its waits end when the channels close; a call blocked on the
        // client ends when its socket is shut down.
        signals.abort.store(true, Ordering::SeqCst);
        drop(chans);
        if !stop(&data_thread, &sockets) {
            // It holds its buffers and its share of the budget until it ends; the session's
            // slot is free meanwhile.
            return Err(NetError::Refused(format!(
                "{}; its data thread did not stop within {:.1} s of the session's end \
                 (left to end by itself)",
                result
                    .err()
                    .map_or("the session ended".into(), |e| e.to_string()),
                2.0 * STOP_GRACE.as_secs_f64()
            )));
        }
        let _ = data_thread.join();
        result
    }
}

/// Waits (bounded) for `thread` to end, shutting the session's data sockets down if it does
/// not within [`STOP_GRACE`]; true once it ended.
fn stop(thread: &thread::JoinHandle<()>, sockets: &SessionSockets) -> bool {
    let ended = |grace: Duration| {
        let until = Instant::now() + grace;
        while !thread.is_finished() {
            if Instant::now() >= until {
                return false;
            }
            thread::sleep(Duration::from_millis(2));
        }
        true
    };
    ended(STOP_GRACE) || {
        sockets.shutdown();
        ended(STOP_GRACE)
    }
}

/// How long a wait may last: `wait`, but never past `deadline` (at least a millisecond, so a
/// wait at the deadline times out at once rather than blocking).
fn left(wait: Duration, deadline: Instant) -> Duration {
    wait.min(deadline.saturating_duration_since(Instant::now()))
        .max(Duration::from_millis(1))
}

/// The control thread's view of a running session.
struct Control<'a> {
    plan: &'a Plan,
    limits: &'a ServerLimits,
    timeout: Duration,
    deadline: Instant,
    signals: &'a TrialSignals,
    chans: &'a DataChannels,
}

impl Control<'_> {
    /// The refusal of a session that reached its deadline.
    fn too_long(&self, ctl: &mut ServerControl) -> Result<(), NetError> {
        let message = format!(
            "the session has lasted longer than this server's limit of {} s \
             (--max-duration); the points measured so far are kept",
            self.limits.max_session.as_secs()
        );
        ctl.send(ServerMsg::Error {
            message: message.clone(),
        })?;
        Err(NetError::Refused(message))
    }

    fn trials(&self, ctl: &mut ServerControl) -> Result<(), NetError> {
        let (limits, timeout, signals, chans) =
            (self.limits, self.timeout, self.signals, self.chans);
        let res_rx = &chans.results;
        let mut trial_started = Instant::now();
        // How long the client may take to send its next message: its trial's duration more
        // while a time-bounded trial runs (a 3 s trial with --timeout 1s is no dead peer).
        let mut wait_next = timeout;
        // A trial is between Ready and the client's end of it.
        let mut running = false;
        // The data thread's result, when it came before the client's end of the trial.
        let mut early: Option<io::Result<SideCounters>> = None;
        loop {
            let mut wait = left(wait_next, self.deadline);
            if running {
                // Look again when the trial reaches the server's limit of a trial.
                wait = wait.min(
                    (trial_started + limits.max_trial)
                        .saturating_duration_since(Instant::now())
                        .max(Duration::from_millis(1)),
                );
            }
            let msg = match ctl.recv("waiting for the next trial", wait) {
                Ok(m) => m,
                Err(NetError::Timeout { .. }) if Instant::now() >= self.deadline => {
                    return self.too_long(ctl);
                }
                // A count-bounded trial lasts as long as its round trips take. While the data
                // thread still works at it (it gives up by itself after `timeout` without
                // data), the client is no dead peer; once it is done, the client has one more
                // `wait_next` to end the trial. Bounded by the server's longest trial.
                Err(e @ NetError::Timeout { .. }) => {
                    if !running || early.is_some() || trial_started.elapsed() > limits.max_trial {
                        return Err(e);
                    }
                    match res_rx.try_recv() {
                        Ok(r) => early = Some(r),
                        Err(mpsc::TryRecvError::Empty) => {}
                        Err(mpsc::TryRecvError::Disconnected) => return Err(e),
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            match msg {
                ClientMsg::TrialStart { .. } if Instant::now() >= self.deadline => {
                    return self.too_long(ctl);
                }
                ClientMsg::TrialStart { trial, spec } => {
                    wait_next = timeout + Duration::from_nanos(spec.duration_ns);
                    if let Err(message) = self.plan.check_trial(&spec, limits) {
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
                    trial_started = Instant::now();
                    running = true;
                    ctl.send(ServerMsg::Ready { trial })?;
                }
                ClientMsg::TrialEnd { trial, counters } => {
                    wait_next = timeout;
                    running = false;
                    signals.end(counters.bytes_sent, counters.messages_sent);
                    let wait = left(timeout + Duration::from_secs(1), self.deadline);
                    let result = match early.take() {
                        Some(r) => Ok(r),
                        None => res_rx.recv_timeout(wait),
                    };
                    let counters = match result {
                        Ok(Ok(c)) => c,
                        Ok(Err(e)) => {
                            let message = format!("server data path failed: {e}");
                            ctl.send(ServerMsg::Error {
                                message: message.clone(),
                            })?;
                            return Err(NetError::Refused(message));
                        }
                        Err(_) if Instant::now() >= self.deadline => return self.too_long(ctl),
                        Err(_) => {
                            let message =
                                "server data thread did not finish the trial in time".to_string();
                            ctl.send(ServerMsg::Error {
                                message: message.clone(),
                            })?;
                            return Err(NetError::Refused(message));
                        }
                    };
                    if let Some(message) = over_rate(&counters, trial_started, limits) {
                        ctl.send(ServerMsg::Error {
                            message: message.clone(),
                        })?;
                        return Err(NetError::Refused(message));
                    }
                    ctl.send(ServerMsg::TrialReport { trial, counters })?;
                }
                ClientMsg::Bye {} => return Ok(()),
                other => {
                    return Err(NetError::Refused(format!(
                        "unexpected message {}",
                        netsweep_proto::text::printable(&format!("{other:?}"))
                    )));
                }
            }
        }
    }
}

/// The refusal of a trial that moved more than `--max-rate` through the server: its bytes
/// both ways over the wall time from Ready to the trial's report.
fn over_rate(c: &SideCounters, since: Instant, limits: &ServerLimits) -> Option<String> {
    let limit = limits.max_rate_bps?;
    let secs = since.elapsed().as_secs_f64().max(1e-6);
    let bps = (c.bytes_sent + c.bytes_received) as f64 * 8.0 / secs;
    (bps > limit as f64).then(|| {
        format!(
            "this server limits a session to {:.3} Mbit/s (--max-rate); the last trial moved \
             {:.3} Mbit/s: the points measured so far are kept",
            limit as f64 / 1e6,
            bps / 1e6
        )
    })
}

/// The data thread's ends of the channels to its control thread.
struct DataThreadChannels {
    cmds: mpsc::Receiver<DataCmd>,
    armed: mpsc::Sender<()>,
    results: mpsc::Sender<io::Result<SideCounters>>,
}

/// The data thread: owns the pattern's data path and runs each trial's loop with the
/// session's buffers (allocated once, by the plan).
fn data_loop(
    path: &mut dyn ServerPattern,
    mut bufs: ServerBuffers,
    idle: Duration,
    signals: &TrialSignals,
    chans: DataThreadChannels,
) {
    while let Ok(cmd) = chans.cmds.recv() {
        let DataCmd::Trial { spec, trial } = cmd;
        let meter = TrialMeter::start(path.stats());
        path.arm(trial);
        // Armed: everything above is done, the loop below starts at once. The control thread
        // says Ready only after this, so the receiver's epoch precedes the client's first byte.
        let epoch = Instant::now();
        if chans.armed.send(()).is_err() {
            break;
        }
        let t = ServerTrial {
            spec: &spec,
            signals,
            idle,
            epoch,
        };
        let r = path.run_trial(&t, &mut bufs).map(|mut c| {
            meter.finish(|| path.stats(), &mut c);
            c
        });
        if chans.results.send(r).is_err() {
            break;
        }
    }
}
