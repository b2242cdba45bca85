//! Background flows (`--background`): each is its own session with the same server (its own
//! control connection, cookie and data path), on its own thread. The engine starts a
//! background trial before each measured trial and stops it after the measured trial's
//! report, so every measured trial — warm-ups included — runs under load while the start
//! and stop stay outside its timed loop. A background trial lasts until it is told to stop
//! (`stream::sender_until`); what it moved during the timed trials is recorded beside the
//! point. A flow with a `start` waits that long after it is armed before it sends (the
//! measured trial starts meanwhile), so a timeline shows the load arrive. A flow that fails
//! ends the run with its error.

use super::open::open_session;
use super::RunContext;
use crate::error::NetError;
use crate::pattern::dgram::trial_cookie;
use crate::pattern::stream::sender_until;
use netsweep_endpoint::{MessageBuffer, TransportFactory};
use netsweep_model::background::BackgroundFigures;
use netsweep_model::spec::RunSpec;
use netsweep_proto::messages::{ClientMsg, ServerMsg, SideCounters, TrialSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::Scope;
use std::time::{Duration, Instant};

/// The longest a background trial may last if never told to stop (the server's default
/// limit on a stream trial).
const MAX_BACKGROUND_TRIAL: Duration = Duration::from_secs(60);

/// What the engine tells a flow's thread.
enum Cmd {
    /// Start a background trial (and say so once it is sending).
    Trial,
}

/// What a flow's thread tells the engine.
enum Event {
    /// The session is open; the flow waits for its first trial.
    Opened,
    /// The server armed the trial and the flow is sending.
    Running,
    /// The trial stopped: the flow's and the server's counters.
    Done(Box<(SideCounters, SideCounters)>),
    /// The flow failed; its thread has ended.
    Failed(NetError),
}

/// One background flow as the engine sees it.
struct Flow {
    text: String,
    cmds: Sender<Cmd>,
    events: Receiver<Event>,
    stop: Arc<AtomicBool>,
    /// Whether a background trial is under way.
    running: bool,
    /// How long into each trial the flow starts sending, ns.
    start_ns: u64,
    figures: BackgroundFigures,
}

/// The run's background flows (none without `--background`).
pub(crate) struct Background {
    flows: Vec<Flow>,
    /// The longest wait on a flow's thread.
    wait: Duration,
}

impl Background {
    /// Opens every flow of `run.background` on a thread of `scope`, each its own session;
    /// returns once all are open, or the first one's error.
    pub(crate) fn start<'scope, 'env>(
        scope: &'scope Scope<'scope, 'env>,
        run: &'env RunSpec,
        ctx: &'env RunContext<'env>,
        factory: &'env dyn TransportFactory,
    ) -> Result<Self, NetError> {
        // Opening a session waits on the server at most `timeout` per step; allow a few.
        let wait = Duration::from_nanos(run.timeout_ns) * 3 + Duration::from_secs(2);
        let mut bg = Self {
            flows: Vec::new(),
            wait,
        };
        for b in &run.background {
            let spec = b.session_spec(run);
            let (cmd_tx, cmd_rx) = mpsc::channel();
            let (ev_tx, ev_rx) = mpsc::channel();
            let stop = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&stop);
            let start = Duration::from_nanos(b.start_ns.unwrap_or(0));
            scope.spawn(move || flow_thread(spec, start, ctx, factory, &flag, cmd_rx, ev_tx));
            bg.flows.push(Flow {
                text: b.text.clone(),
                cmds: cmd_tx,
                events: ev_rx,
                stop,
                running: false,
                start_ns: b.start_ns.unwrap_or(0),
                figures: BackgroundFigures {
                    flow: b.text.clone(),
                    ..Default::default()
                },
            });
        }
        for i in 0..bg.flows.len() {
            match bg.next_event(i, "opening its session")? {
                Event::Opened => {}
                _ => return Err(bg.flow_error(i, "opened out of order".into())),
            }
        }
        Ok(bg)
    }

    /// A point begins: its figures start from zero.
    pub(super) fn begin_point(&mut self) {
        for f in &mut self.flows {
            f.figures = BackgroundFigures {
                flow: f.text.clone(),
                ..Default::default()
            };
        }
    }

    /// Starts a background trial on every flow; returns once all are sending.
    pub(super) fn start_trial(&mut self) -> Result<(), NetError> {
        for i in 0..self.flows.len() {
            let f = &mut self.flows[i];
            f.stop.store(false, Ordering::Relaxed);
            if f.cmds.send(Cmd::Trial).is_err() {
                return Err(self.gone(i));
            }
            f.running = true;
            match self.next_event(i, "starting a trial")? {
                Event::Running => {}
                _ => return Err(self.flow_error(i, "answered out of order".into())),
            }
        }
        Ok(())
    }

    /// Stops every flow's trial; with `keep` (a timed trial) adds what it moved to the
    /// point's figures.
    pub(super) fn stop_trial(&mut self, keep: bool) -> Result<(), NetError> {
        for f in &self.flows {
            f.stop.store(true, Ordering::Relaxed);
        }
        for i in 0..self.flows.len() {
            if !self.flows[i].running {
                continue;
            }
            self.flows[i].running = false;
            match self.next_event(i, "ending a trial")? {
                Event::Done(c) => {
                    let (client, server) = *c;
                    if keep {
                        // The receiver's time from the flow's start (it was armed before).
                        let f = &mut self.flows[i];
                        f.figures.add(
                            client.bytes_sent,
                            server.bytes_received,
                            server.recv_span_ns.saturating_sub(f.start_ns),
                        );
                    }
                }
                _ => return Err(self.flow_error(i, "answered out of order".into())),
            }
        }
        Ok(())
    }

    /// The point's figures, one per flow (empty without background flows).
    pub(super) fn figures(&self) -> Vec<BackgroundFigures> {
        self.flows.iter().map(|f| f.figures.clone()).collect()
    }

    /// Stops every flow and lets its thread close its session (the scope joins it).
    pub(super) fn close(self) {
        for f in &self.flows {
            f.stop.store(true, Ordering::Relaxed);
        }
        // Dropping the command channels ends each thread's wait for the next trial.
    }

    /// The next event of flow `i`, within the wait; a failure becomes the run's error.
    fn next_event(&self, i: usize, during: &str) -> Result<Event, NetError> {
        match self.flows[i].events.recv_timeout(self.wait) {
            Ok(Event::Failed(e)) => Err(self.flow_error(i, e.to_string())),
            Ok(ev) => Ok(ev),
            Err(RecvTimeoutError::Timeout) => Err(NetError::Timeout {
                secs: self.wait.as_secs_f64(),
                during: format!("background flow '{}' was {during}", self.flows[i].text),
            }),
            Err(RecvTimeoutError::Disconnected) => Err(self.gone(i)),
        }
    }

    fn gone(&self, i: usize) -> NetError {
        self.flow_error(i, "its thread ended".into())
    }

    fn flow_error(&self, i: usize, what: String) -> NetError {
        NetError::Background(format!(
            "background flow '{}' failed: {what}; the measured run stopped with it",
            self.flows[i].text
        ))
    }
}

/// Waits `start` (nothing when zero), or until the trial is stopped, checking every 2 ms.
fn wait_start(start: Duration, stop: &AtomicBool) {
    let until = Instant::now() + start;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(2)));
    }
}

/// A flow's thread: opens its session, then runs one background trial per command until
/// the command channel closes, then says goodbye.
fn flow_thread(
    spec: RunSpec,
    start: Duration,
    ctx: &RunContext<'_>,
    factory: &dyn TransportFactory,
    stop: &AtomicBool,
    cmds: Receiver<Cmd>,
    events: Sender<Event>,
) {
    if let Err(e) = flow(&spec, start, ctx, factory, stop, &cmds, &events) {
        let _ = events.send(Event::Failed(e));
    }
}

fn flow(
    spec: &RunSpec,
    start: Duration,
    ctx: &RunContext<'_>,
    factory: &dyn TransportFactory,
    stop: &AtomicBool,
    cmds: &Receiver<Cmd>,
    events: &Sender<Event>,
) -> Result<(), NetError> {
    let mut s = open_session(spec, ctx, factory)?;
    let size = spec.sizes[0];
    s.pattern.begin_point(spec, size)?;
    let offset = spec.client_knobs.buffer_offset.unwrap_or(0) as usize;
    // Allocated once, before any trial.
    let mut buf = MessageBuffer::new(size as usize, offset);
    let report_wait = Duration::from_nanos(spec.timeout_ns) + Duration::from_secs(2);
    let _ = events.send(Event::Opened);
    let mut trial = 0u64;
    while let Ok(Cmd::Trial) = cmds.recv() {
        trial += 1;
        let t = TrialSpec {
            size,
            repetitions: 0,
            duration_ns: MAX_BACKGROUND_TRIAL.as_nanos() as u64,
            warmup: false,
            interval_ns: 0,
        };
        let during = "waiting for the server to arm a background trial";
        match s
            .ctl
            .request(ClientMsg::TrialStart { trial, spec: t }, during, None)?
        {
            ServerMsg::Ready { .. } => {}
            other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
        }
        let _ = events.send(Event::Running);
        wait_start(start, stop);
        let ep = s
            .pattern
            .endpoint()
            .ok_or_else(|| NetError::Refused("the background pattern has no endpoint".into()))?;
        let cookie = trial_cookie(s.cookie, trial);
        let client = sender_until(
            ep,
            buf.as_mut(),
            size as usize,
            MAX_BACKGROUND_TRIAL,
            cookie,
            stop,
        )
        .map_err(|e| NetError::io("background data path", e))?;
        let during = "waiting for the server's background trial report";
        let server = match s.ctl.request(
            ClientMsg::TrialEnd {
                trial,
                counters: client.clone(),
            },
            during,
            Some(report_wait),
        )? {
            ServerMsg::TrialReport { counters, .. } => counters,
            other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
        };
        if events
            .send(Event::Done(Box::new((client, server))))
            .is_err()
        {
            break;
        }
    }
    let _ = s.ctl.send(ClientMsg::Bye {});
    let _ = s
        .ctl
        .recv("closing the session", Some(Duration::from_secs(2)));
    Ok(())
}
