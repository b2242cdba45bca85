//! One admitted session: the rest of its handshake (the transport, the data endpoint, the
//! welcome), its data thread, and its trials until `bye`, a failure or the client's
//! disappearance; every exit path stops and reaps the data thread.

use super::{ServeOptions, ServerLimits};
use crate::auth::{server_challenge, AuthKey};
use crate::control::ServerControl;
use crate::error::NetError;
use crate::hostinfo;
use crate::meter::{pin_current_thread, TrialMeter};
use crate::pattern::{
    self, Registration, ServerBuffers, ServerOpen, ServerPattern, ServerTrial, TrialSignals,
};
use netsweep_endpoint::TransportFactory;
use netsweep_model::spec::{Pattern, Transport};
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
    /// Tells the client it is not admitted, and why.
    pub(super) fn refuse_busy(mut self, message: String) {
        let _ = self.ctl.send(ServerMsg::Busy { message });
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
        .ip();
    // crr serves data connections from this address only.
    let client_ip: IpAddr = stream
        .peer_addr()
        .map_err(|e| NetError::io("control socket", e))?
        .ip();
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

impl Session {
    /// Serves an admitted session to its end.
    pub(super) fn run(
        hello: Hello,
        factory: &dyn TransportFactory,
        opts: &ServeOptions,
    ) -> Result<(), NetError> {
        let limits = &opts.limits;
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
        let Some(transport) = Transport::parse(&setup.transport) else {
            return refuse(
                &mut ctl,
                format!("this server does not know transport {:?}", setup.transport),
            );
        };
        let flows = setup.flow_count();
        let Some(reg) =
            Pattern::parse(&setup.pattern).and_then(|p| pattern::registration_for(p, flows))
        else {
            let with = if flows > 1 { " with --flows" } else { "" };
            return refuse(
                &mut ctl,
                format!(
                    "this server does not know pattern {:?}{with}",
                    setup.pattern
                ),
            );
        };
        if setup.max_size > limits.max_size {
            return refuse(
                &mut ctl,
                format!(
                    "message size {} is above this server's limit of {} bytes (--max-size)",
                    setup.max_size, limits.max_size
                ),
            );
        }
        if setup.flows > limits.max_flows {
            return refuse(
                &mut ctl,
                format!(
                    "--flows {} is above this server's limit of {} flows per session \
                     (--max-flows)",
                    setup.flows, limits.max_flows
                ),
            );
        }
        let timeout = Duration::from_nanos(setup.timeout_ns)
            .clamp(Duration::from_millis(100), limits.max_timeout);
        let listener = match factory.listen(&setup, local_ip) {
            Ok(l) => l,
            Err(e) => {
                return refuse(
                    &mut ctl,
                    format!("cannot open a {transport} data endpoint: {e}"),
                )
            }
        };
        let cookie = netsweep_endpoint::random_u64();
        let data: DataEndpoint = listener.endpoint();
        ctl.send(ServerMsg::Welcome {
            server: hostinfo::collect(&opts.tool_version),
            cookie,
            data,
        })?;
        // The pattern opens its data path before data_ready: a datagram client waits for our
        // acknowledgement of its cookie before it says data_ready (crr readies the listener).
        let open = ServerOpen {
            transport,
            cookie,
            client: client_ip,
            timeout,
            reverse: setup.reverse,
            flows,
            threads: setup.threads,
            cpu: setup.server_knobs.cpu,
        };
        let mut path = match (reg.server)(listener, &open) {
            Ok(p) => p,
            Err(message) => return refuse(&mut ctl, message),
        };
        match ctl.recv("waiting for data_ready", timeout)? {
            ClientMsg::DataReady {} => {}
            _ => return Err(NetError::Refused("expected data_ready".into())),
        }
        let mut granted = path.bound().map_err(|e| NetError::io("data endpoint", e))?;
        granted.cpu = setup.server_knobs.cpu;

        let signals = Arc::new(TrialSignals::default());
        let (cmd_tx, cmd_rx) = mpsc::channel::<DataCmd>();
        let (res_tx, res_rx) = mpsc::channel::<io::Result<SideCounters>>();
        let (armed_tx, armed_rx) = mpsc::channel::<()>();
        let (pin_tx, pin_rx) = mpsc::channel::<Result<(), String>>();
        let pin = setup.server_knobs.cpu;
        let data_thread = {
            let signals = signals.clone();
            let k = &setup.server_knobs;
            let sizes = BufferSizes {
                max_size: setup.max_size as usize,
                offset: k.buffer_offset.unwrap_or(0) as usize,
                batch: k.batch.unwrap_or(1).clamp(1, 1024) as usize,
                cache_pool: k.cache_pool.unwrap_or(0).min(1 << 28) as usize,
            };
            let chans = DataThreadChannels {
                cmds: cmd_rx,
                armed: armed_tx,
                results: res_tx,
            };
            thread::Builder::new()
                .name("netsweep-data".into())
                .spawn(move || {
                    // Pin first, so every trial runs where the client asked.
                    let pinned = pin.map_or(Ok(()), pin_current_thread);
                    let ok = pinned.is_ok();
                    let _ = pin_tx.send(pinned);
                    if ok {
                        data_loop(path.as_mut(), sizes, timeout, &signals, chans);
                    }
                })
                .map_err(|e| NetError::io("starting the data thread", e))?
        };
        let chans = DataChannels {
            cmd: cmd_tx,
            armed: armed_rx,
            results: res_rx,
        };
        let result = match pin_rx.recv_timeout(timeout) {
            Ok(Ok(())) => ctl.send(ServerMsg::DataBound { granted }).and_then(|()| {
                Self::trials(&mut ctl, reg, transport, limits, timeout, &signals, &chans)
            }),
            Ok(Err(message)) => refuse(&mut ctl, format!("server side --cpu: {message}")),
            Err(_) => refuse(&mut ctl, "the server's data thread did not start".into()),
        };
        // However the session ended, stop the data thread (its loops poll the abort flag and
        // its waits end when the channels close) and reap it: its sockets close with it.
        signals.abort.store(true, Ordering::SeqCst);
        drop(chans);
        let _ = data_thread.join();
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn trials(
        ctl: &mut ServerControl,
        reg: &Registration,
        transport: Transport,
        limits: &ServerLimits,
        timeout: Duration,
        signals: &TrialSignals,
        chans: &DataChannels,
    ) -> Result<(), NetError> {
        let res_rx = &chans.results;
        let started = Instant::now();
        let mut trial_started = Instant::now();
        // How long the client may take to send its next message: its trial's duration more
        // while a time-bounded trial runs (a 3 s trial with --timeout 1s is no dead peer).
        let mut wait_next = timeout;
        // A trial is between Ready and the client's end of it.
        let mut running = false;
        // The data thread's result, when it came before the client's end of the trial.
        let mut early: Option<io::Result<SideCounters>> = None;
        loop {
            let msg = match ctl.recv("waiting for the next trial", wait_next) {
                Ok(m) => m,
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
                ClientMsg::TrialStart { .. } if started.elapsed() > limits.max_session => {
                    let message = format!(
                        "the session has lasted longer than this server's limit of {} s \
                         (--max-duration); the points measured so far are kept",
                        limits.max_session.as_secs()
                    );
                    ctl.send(ServerMsg::Error {
                        message: message.clone(),
                    })?;
                    return Err(NetError::Refused(message));
                }
                ClientMsg::TrialStart { trial, spec } => {
                    wait_next = timeout + Duration::from_nanos(spec.duration_ns);
                    if let Err(message) = check_trial(&spec, reg, transport, limits) {
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
                    let wait = timeout + Duration::from_secs(1);
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
                    return Err(NetError::Refused(format!("unexpected message {other:?}")));
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

fn check_trial(
    spec: &TrialSpec,
    reg: &Registration,
    transport: Transport,
    limits: &ServerLimits,
) -> Result<(), String> {
    if spec.size > limits.max_size {
        return Err(format!(
            "trial size {} above the server limit {} (--max-size)",
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
    (reg.check_trial)(spec, transport)
}

/// The sizes of the server's buffers, from the session's setup.
#[derive(Debug, Clone, Copy)]
struct BufferSizes {
    max_size: usize,
    offset: usize,
    batch: usize,
    cache_pool: usize,
}

/// The data thread's ends of the channels to its control thread.
struct DataThreadChannels {
    cmds: mpsc::Receiver<DataCmd>,
    armed: mpsc::Sender<()>,
    results: mpsc::Sender<io::Result<SideCounters>>,
}

/// The data thread: owns the pattern's data path and runs each trial's loop.
fn data_loop(
    path: &mut dyn ServerPattern,
    sizes: BufferSizes,
    idle: Duration,
    signals: &TrialSignals,
    chans: DataThreadChannels,
) {
    // Allocated once per session.
    let mut bufs = ServerBuffers::new(sizes.max_size, sizes.batch, sizes.offset, sizes.cache_pool);
    if let Err(e) = path.prepare(bufs.slot, sizes.batch) {
        let _ = chans.results.send(Err(e));
        return;
    }
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
