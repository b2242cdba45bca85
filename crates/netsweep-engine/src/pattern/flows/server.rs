//! The server's side of a `--flows` session: accepts the client's N connections (each
//! presenting the cookie, then its flow number, in whatever order they arrive), spreads them
//! over its data threads, and runs each trial on them, relaying the control thread's end of
//! the trial (the client's announced total) to the threads.

use super::client::merge;
use super::pool::{Job, Pool, Role};
use super::{ensure_descriptors, read_index, thread_count};
use crate::pattern::{ServerBuffers, ServerOpen, ServerPattern, ServerTrial};
use netsweep_endpoint::{DataListener, Endpoint};
use netsweep_proto::messages::{GrantedKnobs, SideCounters};
use std::io;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Opens the server's side of a stream session with flows.
pub(super) fn open_stream(
    listener: Box<dyn DataListener>,
    o: &ServerOpen,
) -> Result<Box<dyn ServerPattern>, String> {
    Server::open(listener, o, Role::StreamRecv)
}

/// Opens the server's side of a pingpong session with flows.
pub(super) fn open_rr(
    listener: Box<dyn DataListener>,
    o: &ServerOpen,
) -> Result<Box<dyn ServerPattern>, String> {
    Server::open(listener, o, Role::RrServer)
}

/// Opens the server's side of a rate session with flows (an echo of every request).
pub(super) fn open_rate(
    listener: Box<dyn DataListener>,
    o: &ServerOpen,
) -> Result<Box<dyn ServerPattern>, String> {
    Server::open(listener, o, Role::RateServer)
}

/// The server's flows: its data threads (the flows' sockets with them), the knobs granted on
/// the first flow, and the listener they came from.
struct Server {
    role: Role,
    pool: Pool,
    flows: usize,
    granted: GrantedKnobs,
    _listener: Box<dyn DataListener>,
}

impl Server {
    fn open(
        mut listener: Box<dyn DataListener>,
        o: &ServerOpen,
        role: Role,
    ) -> Result<Box<dyn ServerPattern>, String> {
        let n = o.flows.max(1);
        if o.reverse {
            return Err("--flows cannot run with --reverse yet".into());
        }
        let most = netsweep_model::flows::MAX_FLOWS;
        if n > most {
            return Err(format!(
                "--flows {n} is above this server's limit of {most} flows"
            ));
        }
        ensure_descriptors(n, "server")?;
        let mut slots: Vec<Option<Box<dyn Endpoint>>> = (0..n).map(|_| None).collect();
        for k in 0..n {
            let mut ep = listener.accept(o.cookie, o.timeout).map_err(|e| {
                format!("flow data connection {} of {n} did not arrive: {e}", k + 1)
            })?;
            let i = read_index(ep.as_mut(), o.timeout)
                .map_err(|e| format!("a flow did not say its number: {e}"))?;
            match slots.get_mut(i as usize) {
                Some(slot @ None) => *slot = Some(ep),
                _ => return Err(format!("flow number {i} is out of range or repeated")),
            }
        }
        let eps: Vec<Box<dyn Endpoint>> = slots.into_iter().flatten().collect();
        let granted = eps[0].granted();
        let pool = Pool::spawn(eps, thread_count(o.threads, n, role.pattern()), o.cpu)
            .map_err(|m| format!("server side: {m}"))?;
        Ok(Box::new(Self {
            role,
            pool,
            flows: n as usize,
            granted,
            _listener: listener,
        }))
    }
}

impl ServerPattern for Server {
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint> {
        None
    }

    fn bound(&mut self) -> io::Result<GrantedKnobs> {
        Ok(self.granted.clone())
    }

    fn run_trial(
        &mut self,
        t: &ServerTrial<'_>,
        _bufs: &mut ServerBuffers,
    ) -> io::Result<SideCounters> {
        let job = Job {
            role: self.role,
            size: t.spec.size as usize,
            duration: Duration::from_nanos(t.spec.duration_ns),
            idle: t.idle,
            epoch: t.epoch,
            rate: Default::default(),
        };
        self.pool.shared.reset();
        self.pool.dispatch(job)?;
        let rr = matches!(self.role, Role::RrServer | Role::RateServer);
        let mut relayed = false;
        let wait = job.duration + 2 * t.idle + Duration::from_secs(10);
        // The end of the trial reaches the threads within a millisecond of the control
        // thread's.
        let reports = self.pool.collect(wait, Duration::from_millis(1), |sh| {
            if !relayed && t.signals.is_ended() {
                let (bytes, messages) = t.signals.sent();
                sh.end(if rr { messages } else { bytes });
                relayed = true;
            }
            if t.signals.is_aborted() {
                sh.abort.store(true, Ordering::SeqCst);
            }
        })?;
        let mut c = merge(&reports, self.flows);
        c.active_ns = c.recv_span_ns;
        Ok(c)
    }
}
