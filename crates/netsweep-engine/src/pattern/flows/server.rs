//! The server's side of a `--flows` session: accepts the client's N connections (each
//! presenting the cookie, then its flow number, in whatever order they arrive), spreads them
//! over its data threads, and runs each trial on them, relaying the control thread's end of
//! the trial (the client's announced total) to the threads.

use super::client::merge;
use super::machine::{Machine, Target};
use super::pool::Pool;
use super::read_index;
use super::worker::Job;
use crate::pattern::{ServerBuffers, ServerOpen, ServerPattern, ServerTrial};
use netsweep_endpoint::{DataListener, Endpoint};
use netsweep_proto::messages::{GrantedKnobs, SideCounters};
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often the relay looks at the control thread's signals near the end of a trial.
const FINE: Duration = Duration::from_millis(1);

/// How often it looks during the trial and once the end is relayed (for an abort): each
/// look wakes a thread that the data threads' CPUs would otherwise keep (with eight blocking
/// stream flows on two CPUs, looking every millisecond cost 2.5% and 8% of the aggregate in
/// two series of six alternated runs).
const COARSE: Duration = Duration::from_millis(20);

/// The server's flows: its data threads (the flows' sockets with them), the knobs granted on
/// the first flow, and the listener they came from.
struct Server<M: Machine> {
    pool: Pool<M>,
    flows: usize,
    granted: GrantedKnobs,
    _listener: Box<dyn DataListener>,
}

/// Opens the server's side of a session with flows, its threads running `M` (a machine with
/// a [`Target`]: the server's threads end on the client's total).
pub(crate) fn open<M: Machine<Params = ()>>(
    listener: Box<dyn DataListener>,
    o: &ServerOpen,
) -> Result<Box<dyn ServerPattern>, String> {
    Server::<M>::open(listener, o)
}

impl<M: Machine<Params = ()>> Server<M> {
    fn open(
        mut listener: Box<dyn DataListener>,
        o: &ServerOpen,
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
        let mut slots: Vec<Option<Box<dyn Endpoint>>> = (0..n).map(|_| None).collect();
        for k in 0..n {
            // Within the session's deadline (the sockets filed with the session's).
            let mut ep = o
                .accept_one(listener.as_mut())
                .map_err(|e| format!("flow data connection {} of {n}: {e}", k + 1))?;
            let left = o.deadline.saturating_duration_since(Instant::now());
            let i = read_index(
                ep.as_mut(),
                o.timeout.min(left).max(Duration::from_millis(1)),
            )
            .map_err(|e| format!("a flow did not say its number: {e}"))?;
            file(&mut slots, i, ep)?;
        }
        let eps: Vec<Box<dyn Endpoint>> = slots.into_iter().flatten().collect();
        let granted = eps[0].granted();
        let pool =
            Pool::spawn(eps, o.data_threads, o.cpu).map_err(|m| format!("server side: {m}"))?;
        Ok(Box::new(Self {
            pool,
            flows: n as usize,
            granted,
            _listener: listener,
        }))
    }
}

/// Files a connection that presented flow number `i` (the peer's four bytes) in its slot:
/// refused when the number is out of range or already taken.
pub(crate) fn file<T>(slots: &mut [Option<T>], i: u32, conn: T) -> Result<(), String> {
    match slots.get_mut(i as usize) {
        Some(slot @ None) => {
            *slot = Some(conn);
            Ok(())
        }
        _ => Err(format!("flow number {i} is out of range or repeated")),
    }
}

/// How long the relay sleeps after looking at `now`: [`FINE`] from `fine_from` until it
/// relayed the end, [`COARSE`] otherwise — but never past `fine_from`.
fn next_look(now: Instant, fine_from: Instant, relayed: bool) -> Duration {
    if relayed {
        COARSE
    } else if now >= fine_from {
        FINE
    } else {
        (fine_from - now).min(COARSE)
    }
}

impl<M: Machine<Params = ()>> ServerPattern for Server<M> {
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
            size: t.spec.size as usize,
            duration: Duration::from_nanos(t.spec.duration_ns),
            idle: t.idle,
            epoch: t.epoch,
            params: (),
        };
        self.pool.shared.reset();
        self.pool.dispatch(job)?;
        let requests = M::TARGET == Some(Target::Requests);
        let mut relayed = false;
        let wait = job.duration + 2 * t.idle + Duration::from_secs(10);
        // The client's end of the trial reaches the threads within `FINE` of the control
        // thread's: the relay looks that often from shortly before the trial's duration is
        // up, and every `COARSE` (for an abort) before and after.
        let fine_from = Instant::now() + job.duration.saturating_sub(COARSE);
        let reports = self.pool.collect(wait, |sh| {
            if !relayed && t.signals.is_ended() {
                let (bytes, messages) = t.signals.sent();
                sh.end(if requests { messages } else { bytes });
                relayed = true;
            }
            if t.signals.is_aborted() {
                sh.abort.store(true, Ordering::SeqCst);
            }
            next_look(Instant::now(), fine_from, relayed)
        })?;
        let mut c = merge(&reports, self.flows);
        c.active_ns = c.recv_span_ns;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_filed_under_its_number_once_and_only_in_range() {
        let mut slots: Vec<Option<char>> = vec![None; 3];
        assert_eq!(file(&mut slots, 2, 'a'), Ok(()));
        assert_eq!(file(&mut slots, 0, 'b'), Ok(()));
        assert!(file(&mut slots, 2, 'c').unwrap_err().contains("repeated"));
        assert!(file(&mut slots, 3, 'd').is_err());
        assert!(file(&mut slots, u32::MAX, 'e').is_err());
        assert_eq!(slots, [Some('b'), None, Some('a')]);
    }

    #[test]
    fn the_relay_looks_often_only_near_the_end_and_until_it_relayed() {
        let t0 = Instant::now();
        let fine_from = t0 + Duration::from_millis(480);
        // Early in the trial: the coarse period.
        assert_eq!(next_look(t0, fine_from, false), COARSE);
        // Close to the end: it wakes at `fine_from`, not later.
        let near = fine_from - Duration::from_millis(3);
        assert_eq!(next_look(near, fine_from, false), Duration::from_millis(3));
        // From then until the end is relayed: every FINE.
        assert_eq!(next_look(fine_from, fine_from, false), FINE);
        assert_eq!(next_look(fine_from + COARSE * 10, fine_from, false), FINE);
        // Relayed: only an abort is left to pass on.
        assert_eq!(next_look(fine_from + FINE, fine_from, true), COARSE);
    }
}
