//! Traffic patterns: each pattern (`pingpong`, `stream`, `crr`, `bidir`, `rate`) is one file,
//! or a folder for rate, owning everything about it — the timed loops of both sides (nothing in them allocates, logs, locks or
//! touches the control connection), its data path on each side, what a repetition is, and
//! how its trials fold into a point. `echo` (the echo server of pingpong and rate), `arrival`
//! (a receiver's timing of each message, one direction's figure), `dgram`
//! (the datagram header and loss accounting) and `loops` (trial signals, idle slices, refused
//! sends) hold what the patterns share; this file
//! holds the traits a pattern implements and the registry.
//! The engine (`crate::engine`) owns what every pattern shares: warm-up and calibration,
//! timed trials until the stop rule, the tally of both sides' counters and the sinks; the
//! server (`crate::server`) owns the session and the data thread.
//!
//! # Adding a pattern
//!
//! 1. Name it: a variant of `netsweep_model::spec::Pattern` (in `name`, `parse` and `ALL`),
//!    the name the CLI and the results use, and its aliases in the CLI's `PatternArg`
//!    (`src/cli/values.rs`); the compiler points at every `match` that must say more (what the
//!    model checks about a spec, such as which apis a pattern supports).
//! 2. Write `pattern/<name>.rs`: the timed loops, a [`ClientPattern`] (the client's side:
//!    opens its data path with [`ClientOpen`], runs a trial, folds trials into the point), a
//!    [`ServerPattern`] (the server's side: opens its data path from the session's
//!    [`DataListener`], runs a trial), and a `pub const REGISTRATION: Registration`.
//! 3. Register it: `pub mod <name>;` and `<name>::REGISTRATION,` in [`REGISTRY`] below.
//!
//! Nothing else changes: the engine, the server and the control protocol reach a pattern
//! only through its [`Registration`].

mod arrival;
pub mod bidir;
pub mod crr;
pub mod dgram;
pub mod echo;
pub mod flows;
pub mod intervals;
mod loops;
pub(crate) mod oneway;
pub mod pingpong;
pub mod rate;
mod reverse;
pub mod stream;

pub use loops::{count_send_error, slices, yield_cpu, IdleSlices, TrialSignals, SLICE};

use crate::error::NetError;
use crate::point::Tally;
use netsweep_endpoint::{DataListener, Endpoint, EndpointStats, MessageBuffer, TransportFactory};
use netsweep_model::results::{PointResult, StopReason};
use netsweep_model::spec::{Pattern, RunSpec, Transport};
use netsweep_proto::messages::{
    DataEndpoint, GrantedKnobs, Knobs, SessionSetup, SideCounters, TrialSpec,
};
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every pattern this build knows: one entry per pattern, with its `--flows` variant when it
/// has one (the variant is the pattern's own, in its folder, built on the flows driver).
pub const REGISTRY: &[Registration] = &[
    pingpong::REGISTRATION,
    stream::REGISTRATION,
    crr::REGISTRATION,
    bidir::REGISTRATION,
    rate::REGISTRATION,
];

/// The registration of `pattern`, if this build has one.
pub fn registration(pattern: Pattern) -> Option<&'static Registration> {
    REGISTRY.iter().find(|r| r.pattern == pattern)
}

/// The registration a session runs: the pattern's own, or its `--flows` variant when the
/// session has more than one flow.
pub fn registration_for(pattern: Pattern, flows: u32) -> Option<&'static Registration> {
    let own = registration(pattern)?;
    if flows > 1 {
        own.flows
    } else {
        Some(own)
    }
}

/// Opens the client's side of a session.
pub type OpenClient = fn(&ClientOpen<'_>) -> Result<Box<dyn ClientPattern>, NetError>;

/// Opens the server's side of a session from its listener; the error goes to the client.
pub type OpenServer =
    fn(Box<dyn DataListener>, &ServerOpen) -> Result<Box<dyn ServerPattern>, String>;

/// A pattern's entry points, as the engine and the server reach it.
#[derive(Debug, Clone, Copy)]
pub struct Registration {
    /// The pattern registered.
    pub pattern: Pattern,
    /// Opens the client's side of a session (its data path included).
    pub client: OpenClient,
    /// Opens the server's side of a session from the session's listener; the error is the
    /// message sent to the client.
    pub server: OpenServer,
    /// The server's check of a trial the client asks for, beyond the server's limits.
    pub check_trial: fn(&TrialSpec, bool) -> Result<(), String>,
    /// The most memory the server's side allocates for a session of these sizes (its
    /// buffers, whatever the trials ask within the session's largest size): the session's
    /// budget is checked against it before the session is admitted.
    pub server_memory: fn(&BufferSizes) -> u64,
    /// The pattern's `--flows` variant (N connections run by the flows driver's threads),
    /// if it has one; a variant has none of its own.
    pub flows: Option<&'static Registration>,
}

/// The sizes a session's server side allocates for, as its plan fixed them from the hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSizes {
    /// The session's largest message.
    pub max_size: usize,
    /// Messages per batch call.
    pub batch: usize,
    /// Offset of the buffers from a page boundary (below a page).
    pub offset: usize,
    /// The cache pool asked for (`--invalidate-cache`), bytes.
    pub cache_pool: usize,
    /// Data threads serving the session's flows (1 without `--flows`).
    pub threads: usize,
}

impl BufferSizes {
    /// One message slot: the largest message plus one byte (at least 64 KiB + 1).
    pub fn slot(&self) -> usize {
        self.max_size.max(64 * 1024).saturating_add(1)
    }

    /// A batch of slots; saturates (and is then refused by any budget) rather than wraps.
    pub fn batch_bytes(&self) -> u64 {
        (self.slot() as u64).saturating_mul(self.batch as u64)
    }
}

/// [`Registration::server_memory`] of a pattern whose server side uses the session's
/// [`ServerBuffers`] alone.
pub fn session_buffers(s: &BufferSizes) -> u64 {
    buffer_bytes(s.batch_bytes().max(s.cache_pool as u64), s.offset)
}

/// What a [`MessageBuffer`] of `len` bytes at `offset` allocates.
pub fn buffer_bytes(len: u64, offset: usize) -> u64 {
    len.saturating_add((offset % netsweep_endpoint::PAGE + netsweep_endpoint::PAGE) as u64)
}

/// A [`Registration::check_trial`] for patterns that accept every trial within the limits.
pub fn any_trial(_: &TrialSpec, _: bool) -> Result<(), String> {
    Ok(())
}

/// How a pattern's trials are sized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sizing {
    /// A trial repeats one exchange; calibration grows the count (up to `max_reps`) until a
    /// trial lasts the target trial time.
    Repetitions {
        /// Most repetitions in one trial.
        max_reps: f64,
    },
    /// A trial lasts the target trial time; the warm-up (with `--warmup`) is one trial of
    /// half of it.
    Duration,
}

/// What the client side of a session is opened with.
pub struct ClientOpen<'a> {
    /// Makes the data path.
    pub factory: &'a dyn TransportFactory,
    /// The session as agreed with the server.
    pub setup: &'a SessionSetup,
    /// The run.
    pub spec: &'a RunSpec,
    /// The client's knobs.
    pub knobs: &'a Knobs,
    /// The server's address for data.
    pub server: IpAddr,
    /// Where the server's data listener waits.
    pub data: &'a DataEndpoint,
    /// The session cookie.
    pub cookie: u64,
    /// The run's inactivity timeout.
    pub timeout: Duration,
}

impl std::fmt::Debug for ClientOpen<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOpen")
            .field("setup", self.setup)
            .field("server", &self.server)
            .field("data", self.data)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ClientOpen<'_> {
    /// Connects the session's persistent data endpoint (bound to the cookie).
    pub fn connect(&self) -> Result<Box<dyn Endpoint>, NetError> {
        self.factory
            .connect(
                self.setup,
                self.knobs,
                self.server,
                self.data,
                self.cookie,
                self.timeout,
            )
            .map_err(|e| {
                NetError::io(
                    format!(
                        "connecting the {} data path to {}",
                        self.spec.transport, self.server
                    ),
                    e,
                )
            })
    }
}

/// One timed or warm-up trial's figures as both sides reported them.
#[derive(Debug)]
pub struct TrialOutcome {
    /// The client's counters.
    pub client: SideCounters,
    /// The server's counters.
    pub server: SideCounters,
    /// Wall time of the client's loop, nanoseconds.
    pub wall_ns: u64,
    /// The round trip of the trial's start on the control connection (`trial_start` to
    /// `ready`, before any data), nanoseconds: the path's idle round trip, and the server's
    /// arming.
    pub control_rtt_ns: u64,
}

/// A point's figures as a pattern accounts for them, whatever runs its trials: how trials are
/// sized, what each timed trial adds, the samples the stop rule judges and the point at the
/// end. The engine calls, per point: [`begin_point`](Self::begin_point), then
/// [`warmed`](Self::warmed) after each warm-up trial, [`start_timed`](Self::start_timed),
/// then [`fold`](Self::fold) per timed trial until the stop rule judges
/// [`samples`](Self::samples) enough, and [`finish`](Self::finish). A netsweep session's
/// pattern also runs the client's loop ([`ClientPattern`]); against a peer tool (an iperf3
/// server) the tool's protocol runs it and only the figures are the pattern's.
pub trait PointFigures {
    /// How trials are sized.
    fn sizing(&self) -> Sizing;
    /// Knobs learnt only once points ran (crr reads them on its first connection); they
    /// replace [`ClientPattern::granted`] in the results.
    fn learnt_granted(&mut self) -> Option<GrantedKnobs> {
        None
    }
    /// The offered load of the next point of a `--rates` sweep, requests/s (before
    /// [`begin_point`](Self::begin_point)); only the rate pattern offers a load.
    fn offer(&mut self, _rate: f64) {}
    /// Readies a point (buffers, the endpoint's preparation, timeouts); outside timed loops.
    fn begin_point(&mut self, spec: &RunSpec, size: u64) -> Result<(), NetError>;
    /// A warm-up trial ended: the typical time per repetition it measured (used by
    /// [`Sizing::Repetitions`]). By default the wall time over the repetitions.
    fn warmed(&mut self, spec: &TrialSpec, out: &TrialOutcome) -> f64 {
        out.wall_ns as f64 / spec.repetitions.max(1) as f64
    }
    /// The warm-up is over and the timed trials start (notes from the warm-up go to `tally`).
    fn start_timed(&mut self, _tally: &mut Tally) {}
    /// Folds one timed trial (already added to the tally) into the point's figures.
    fn fold(&mut self, out: &TrialOutcome) -> Result<(), NetError>;
    /// The per-trial figures the stop rule judges.
    fn samples(&self) -> &[f64];
    /// The note a point keeps when the server timed out in a trial.
    fn server_timeout_note(&self) -> &'static str;
    /// The point from its tally and the pattern's figures; `timed` is its timed trials' spec.
    fn finish(
        &mut self,
        spec: &RunSpec,
        timed: &TrialSpec,
        tally: Tally,
        stop_reason: StopReason,
    ) -> PointResult;
    /// The typical time per repetition of the last point, to size the next point's first
    /// warm-up trial.
    fn typical_rep_ns(&self) -> Option<f64> {
        None
    }
}

/// The client's side of a pattern for one netsweep session: its figures and the client's
/// loop over the session's data path. Per trial the engine's session peer calls
/// [`arm`](Self::arm), asks the server to start, runs [`run_trial`](Self::run_trial) under
/// the trial meter, ends the trial and hands the server's report to
/// [`complete`](Self::complete).
pub trait ClientPattern: PointFigures {
    /// The session's persistent endpoint, for patterns that keep one (crr opens a
    /// connection per transaction instead).
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint>;
    /// True when the data path carries datagrams (the run then keeps datagram totals).
    fn is_datagram(&mut self) -> bool {
        self.endpoint().is_some_and(|ep| ep.is_datagram())
    }
    /// The knobs granted on the data path when the session starts.
    fn granted(&mut self) -> GrantedKnobs {
        self.endpoint().map(|ep| ep.granted()).unwrap_or_default()
    }
    /// The data path's own cumulative counters, read around each trial.
    fn stats(&mut self) -> EndpointStats {
        self.endpoint().map(|ep| ep.stats()).unwrap_or_default()
    }
    /// Runs the client's loop of trial number `trial`; returns the client's counters.
    fn run_trial(&mut self, trial: u64, spec: &TrialSpec) -> io::Result<SideCounters>;
    /// Readies trial number `trial` just before the engine asks the server to start it
    /// (outside the timed loop): a receiving client resets its accounting and takes its
    /// epoch here, before the server can send its first byte.
    fn arm(&mut self, _trial: u64) {}
    /// The server's report of the trial arrived: a receiving client takes what the server
    /// sent beyond its timed loop (now that the server's count is known) and completes its
    /// counters. Outside the timed loop; by default nothing to do.
    fn complete(&mut self, _server: &SideCounters, _client: &mut SideCounters) -> io::Result<()> {
        Ok(())
    }
}

/// What the server side of a session is opened with.
#[derive(Debug, Clone)]
pub struct ServerOpen {
    /// The session's transport.
    pub transport: Transport,
    /// The session cookie.
    pub cookie: u64,
    /// The client's address (crr serves its connections only).
    pub client: IpAddr,
    /// The session's inactivity timeout.
    pub timeout: Duration,
    /// The client asked for `--reverse`: the server sends (patterns that support it).
    pub reverse: bool,
    /// The client asked for `--one-way`: the echo server stamps its echoes.
    pub one_way: bool,
    /// The session's flows (`--flows`; 1 for one).
    pub flows: u32,
    /// The CPU the server's data threads run on (`--cpu`).
    pub cpu: Option<u32>,
    /// The session's data threads for its flows, as its plan fixed them from the client's
    /// `--threads` (0: the server decides).
    pub data_threads: usize,
    /// When the session must be over, whatever it does: no wait for a connection goes past
    /// it.
    pub deadline: Instant,
    /// The session's data sockets, which its control thread shuts down when it must end the
    /// session while a data thread is blocked in a call.
    pub sockets: Arc<SessionSockets>,
}

impl ServerOpen {
    /// Accepts the client's persistent data connection (the one presenting the cookie).
    pub fn accept(&self, mut listener: Box<dyn DataListener>) -> Result<Accepted, String> {
        let ep = self.accept_one(listener.as_mut())?;
        Ok(Accepted {
            ep,
            _listener: listener,
        })
    }

    /// Accepts one data connection presenting the cookie, within the session's timeout and
    /// never past its deadline, and files its socket with the session's.
    pub fn accept_one(&self, listener: &mut dyn DataListener) -> Result<Box<dyn Endpoint>, String> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(
                "the session reached its time limit (--max-duration) while its data \
                        connections were opening"
                    .into(),
            );
        }
        let ep = listener
            .accept(self.cookie, self.timeout.min(left))
            .map_err(|e| {
                if Instant::now() >= self.deadline {
                    "the session reached its time limit (--max-duration) while its data \
                     connections were opening"
                        .to_string()
                } else {
                    format!("the client's data connection did not arrive: {e}")
                }
            })?;
        self.sockets.add(ep.as_ref());
        Ok(ep)
    }
}

/// Duplicates of a session's data sockets, kept by its control thread: shutting them down
/// wakes whatever call a data thread is blocked in (a send to a client that stopped
/// reading, a receive from one that trickles bytes), so a session ends when the server says
/// so. Endpoints without a socket (shared memory, MPI) are bounded by their timeouts.
#[derive(Debug, Default)]
pub struct SessionSockets(std::sync::Mutex<Vec<std::os::fd::OwnedFd>>);

impl SessionSockets {
    /// Files a duplicate of `ep`'s socket, if it has one (a failed dup files nothing).
    pub fn add(&self, ep: &dyn Endpoint) {
        let Some(fd) = ep.socket_fd() else { return };
        // SAFETY: `fd` is the endpoint's open socket, borrowed only to duplicate it.
        let dup = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned();
        if let Ok(dup) = dup {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).push(dup);
        }
    }

    /// Shuts every filed socket down both ways; returns how many.
    pub fn shutdown(&self) -> usize {
        let socks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for s in socks.iter() {
            // SAFETY: shutdown(2) on a descriptor this value owns; an error (a socket that
            // is not connected) leaves it as it was.
            unsafe { libc::shutdown(std::os::fd::AsRawFd::as_raw_fd(s), libc::SHUT_RDWR) };
        }
        socks.len()
    }
}

/// The server's persistent data endpoint, with the listener it came from (kept for the
/// session, as an endpoint may rely on it).
pub struct Accepted {
    /// The endpoint.
    pub ep: Box<dyn Endpoint>,
    _listener: Box<dyn DataListener>,
}

impl std::fmt::Debug for Accepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accepted")
            .field("datagram", &self.ep.is_datagram())
            .finish_non_exhaustive()
    }
}

/// The server's buffers, allocated once per session on the data thread and lent to every
/// trial: `lens.len()` slots of `slot` bytes (the largest message plus one, so an oversize
/// datagram shows as a wrong length), or a pool of `pool_len` bytes for `--invalidate-cache`.
#[derive(Debug)]
pub struct ServerBuffers {
    /// The buffer, starting at the requested page offset.
    pub buf: MessageBuffer,
    /// One slot: the largest message plus one byte.
    pub slot: usize,
    /// The bytes in use: a batch of slots or the cache pool, whichever is larger.
    pub pool_len: usize,
    /// One length per slot of a batch.
    pub lens: Vec<usize>,
    /// The requested offset from a page boundary.
    pub offset: usize,
    /// The requested cache pool (0 for none).
    pub cache_pool: usize,
}

impl ServerBuffers {
    /// Buffers for messages up to `max_size`, `batch` per call, at `offset`, over at least
    /// `cache_pool` bytes: [`session_buffers`] bytes, or an error (never an abort) when the
    /// allocator cannot give them.
    pub fn try_new(s: &BufferSizes) -> io::Result<Self> {
        let slot = s.slot();
        let pool_len = usize::try_from(s.batch_bytes())
            .unwrap_or(usize::MAX)
            .max(s.cache_pool);
        Ok(Self {
            buf: MessageBuffer::try_new(pool_len, s.offset)?,
            slot,
            pool_len,
            lens: vec![0usize; s.batch.max(1)],
            offset: s.offset,
            cache_pool: s.cache_pool,
        })
    }

    /// No buffers: a session whose pattern keeps its own (the flows' threads).
    pub fn none() -> Self {
        Self {
            buf: MessageBuffer::new(0, 0),
            slot: 0,
            pool_len: 0,
            lens: vec![0],
            offset: 0,
            cache_pool: 0,
        }
    }
}

/// What a server trial runs with besides its buffers.
#[derive(Debug, Clone, Copy)]
pub struct ServerTrial<'a> {
    /// The trial as the client asked for it.
    pub spec: &'a TrialSpec,
    /// The control thread's signals.
    pub signals: &'a TrialSignals,
    /// How long the loop waits without progress before it gives up.
    pub idle: Duration,
    /// The moment this side was armed (before the client could send its first byte).
    pub epoch: Instant,
}

/// The server's side of a pattern for one session; it lives on the data thread.
pub trait ServerPattern: Send {
    /// The session's persistent endpoint, for patterns that keep one.
    fn endpoint(&mut self) -> Option<&mut dyn Endpoint>;
    /// The client said its data path is ready: ready ours for trials (every receive waits
    /// at most a [`SLICE`]) and return the knobs the kernel granted.
    fn bound(&mut self) -> io::Result<GrantedKnobs> {
        let Some(ep) = self.endpoint() else {
            return Ok(GrantedKnobs::default());
        };
        ep.set_recv_timeout(Some(SLICE))?;
        Ok(ep.granted())
    }
    /// Prepares the data path for the session's largest message and batch, once, on the
    /// data thread.
    fn prepare(&mut self, slot: usize, batch: usize) -> io::Result<()> {
        self.endpoint().map_or(Ok(()), |ep| ep.prepare(slot, batch))
    }
    /// The data path's own cumulative counters, read around each trial.
    fn stats(&mut self) -> EndpointStats {
        self.endpoint().map(|ep| ep.stats()).unwrap_or_default()
    }
    /// Readies trial number `trial` before the side is armed (outside the timed loop).
    fn arm(&mut self, _trial: u64) {}
    /// Runs the server's loop of one trial.
    fn run_trial(
        &mut self,
        t: &ServerTrial<'_>,
        bufs: &mut ServerBuffers,
    ) -> io::Result<SideCounters>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_is_registered_once() {
        for pattern in Pattern::ALL {
            let n = REGISTRY.iter().filter(|r| r.pattern == pattern).count();
            assert_eq!(n, 1, "{pattern:?} registered {n} times");
            assert_eq!(registration(pattern).map(|r| r.pattern), Some(pattern));
        }
        assert_eq!(REGISTRY.len(), Pattern::ALL.len());
    }

    /// One registry: `--flows N` runs the pattern's own flows variant (stream, pingpong and
    /// rate have one, crr and bidir none), one flow its single-flow registration.
    #[test]
    fn a_session_of_many_flows_runs_the_patterns_flows_variant() {
        for pattern in Pattern::ALL {
            let own = registration(pattern).unwrap();
            assert!(std::ptr::eq(registration_for(pattern, 1).unwrap(), own));
            let variant = registration_for(pattern, 4);
            let has = matches!(pattern, Pattern::Stream | Pattern::Pingpong | Pattern::Rate);
            assert_eq!(variant.is_some(), has, "{pattern:?}");
            if let Some(v) = variant {
                assert_eq!(v.pattern, pattern);
                assert!(!std::ptr::eq(v, own) && v.flows.is_none(), "{pattern:?}");
            }
        }
    }

    #[test]
    fn stream_refuses_datagrams_shorter_than_the_header() {
        let stream = registration(Pattern::Stream).unwrap();
        let short = TrialSpec {
            size: 8,
            ..Default::default()
        };
        assert!((stream.check_trial)(&short, true).is_err());
        assert!((stream.check_trial)(&short, false).is_ok());
        let pingpong = registration(Pattern::Pingpong).unwrap();
        assert!((pingpong.check_trial)(&short, true).is_ok());
    }
}
