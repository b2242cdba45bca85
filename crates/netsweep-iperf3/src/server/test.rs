//! One iperf3 test, server side, from CREATE_STREAMS to IPERF_DONE: the data connections in
//! the order the client makes them (what it sends first, then what it receives), their threads,
//! TEST_START and TEST_RUNNING, a figure per second while waiting for TEST_END, the omitted
//! seconds, then the results exchange. Before its results go out the server reads what the
//! client sent still in flight (until it has the bytes the client's results count, or the
//! streams fall quiet), so a forward test's byte count is the client's — iperf3's own server
//! drops that tail. Every wait is bounded by the idle timeout and the test's deadline; every
//! exit stops and reaps the stream threads.

use super::sockets::{self, OptionError};
use super::streams::{self, Counters, Shared, Sock, StreamPlan};
use super::{
    codes, read_frame, refuse, Config, DataSocket, Failure, Interval, Refusal, Served,
    StreamFigures, StreamSource, MAX_CLIENT_RESULTS, MAX_INTERVALS,
};
use crate::outcome::ServerReport;
use crate::wire::State;
use std::any::Any;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How long the server reads the tail of a forward test after TEST_END at most.
const DRAIN_MAX: Duration = Duration::from_secs(3);
/// A gap this long on every receiving stream ends the drain.
const DRAIN_QUIET: Duration = Duration::from_millis(60);
/// How long a stopping test waits for its threads before and after shutting their sockets.
const STOP_GRACE: Duration = Duration::from_millis(500);

/// A counter snapshot (at the end of the omitted seconds, or of an interval).
#[derive(Debug, Clone, Copy, Default)]
struct Snap {
    bytes: u64,
    packets: u64,
    lost: u64,
    out_of_order: u64,
    datagrams: u64,
    retransmits: u64,
}

/// The running streams; dropping it stops them (bounded) however the test ends.
struct Running {
    shared: Arc<Shared>,
    counters: Vec<Arc<Counters>>,
    socks: Vec<Sock>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Running {
    fn snap(&self, i: usize) -> Snap {
        let c = &self.counters[i];
        Snap {
            bytes: c.bytes.load(Relaxed),
            packets: c.packets.load(Relaxed),
            lost: c.lost.load(Relaxed),
            out_of_order: c.out_of_order.load(Relaxed),
            datagrams: c.datagrams.load(Relaxed),
            retransmits: match &self.socks[i] {
                Sock::Tcp(s) => crate::data::total_retrans(s).unwrap_or(0),
                Sock::Udp(_) => 0,
            },
        }
    }

    fn snaps(&self) -> Vec<Snap> {
        (0..self.counters.len()).map(|i| self.snap(i)).collect()
    }

    /// Stops every stream and waits for their threads (shutting their sockets down if they do
    /// not end within the grace); a thread that never ends is left holding its share.
    fn stop(&mut self) {
        self.shared.go(None);
        self.shared.stop_send.store(true, Relaxed);
        self.shared.stop_recv.store(true, Relaxed);
        let ended = |grace: Duration, t: &[thread::JoinHandle<()>]| {
            let until = Instant::now() + grace;
            while t.iter().any(|h| !h.is_finished()) && Instant::now() < until {
                thread::sleep(Duration::from_millis(2));
            }
        };
        ended(STOP_GRACE, &self.threads);
        if self.threads.iter().any(|h| !h.is_finished()) {
            for s in &self.socks {
                s.shutdown();
            }
            ended(STOP_GRACE, &self.threads);
        }
        for h in std::mem::take(&mut self.threads) {
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

impl Running {
    /// Ends what the server sends at TEST_END: a sending TCP stream stops where it is, maybe
    /// inside a block, and is shut for writing, so the client reads what was sent and then the
    /// end of the stream. iperf3's client reads a whole block with blocking reads, so a block
    /// left half-sent and open holds it inside that read — it never reads EXCHANGE_RESULTS,
    /// and the test ends in the server's timeout and the client's "Broken pipe". (iperf3's own
    /// server closes its streams at TEST_END.)
    fn end_sending(&self, up: usize) {
        self.shared.stop_send.store(true, Relaxed);
        for s in self.socks.iter().skip(up) {
            if let Sock::Tcp(t) = s {
                let _ = t.shutdown(std::net::Shutdown::Write);
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

fn option_failure(ctl: &mut TcpStream, e: OptionError) -> Failure {
    refuse(
        ctl,
        Refusal::Error {
            code: e.code,
            errno: e.source.raw_os_error().unwrap_or(0),
        },
    );
    Failure::Server(format!("cannot set {}: {}", e.what, e.source))
}

fn send(ctl: &mut TcpStream, b: &[u8], what: &str) -> Result<(), Failure> {
    ctl.write_all(b)
        .map_err(|e| Failure::ClientGone(format!("while the server sent {what} ({e})")))
}

/// iperf3's stream ids: 1, then 3, 4, 5, … (its numbering skips 2).
fn stream_id(i: usize) -> u32 {
    if i == 0 {
        1
    } else {
        i as u32 + 2
    }
}

/// Runs one test whose request the caller has admitted as `cfg`: from CREATE_STREAMS to the
/// end of the results exchange. `hold` is kept by every stream thread until it ends (the
/// caller's reservation of what the test costs).
pub fn run(
    ctl: &mut TcpStream,
    cfg: &Config,
    src: &mut dyn StreamSource,
    hold: &Arc<dyn Any + Send + Sync>,
) -> Result<Served, Failure> {
    let up = cfg.to_server as usize;
    let total = up + cfg.from_server as usize;
    let server_error = |ctl: &mut TcpStream, code: i32, why: String| {
        refuse(ctl, Refusal::Error { code, errno: 0 });
        Failure::Server(why)
    };
    // Buffers first: a refused allocation turns the test away before any connection.
    let mut bufs = Vec::with_capacity(total);
    for _ in 0..total {
        match streams::buffer(cfg.len, cfg.repeating_payload) {
            Ok(b) => bufs.push(b),
            Err(e) => return Err(server_error(ctl, codes::IENEWTEST, format!("buffers: {e}"))),
        }
    }
    if let Err(e) = src.open() {
        return Err(server_error(
            ctl,
            codes::IESTREAMLISTEN,
            format!("cannot take data connections: {e}"),
        ));
    }
    ctl.set_write_timeout(Some(cfg.idle))
        .map_err(|e| Failure::Server(e.to_string()))?;
    send(ctl, &[State::CreateStreams.to_byte()], "CREATE_STREAMS")?;
    let local = ctl
        .local_addr()
        .map_err(|e| Failure::Server(e.to_string()))?;
    let until = (Instant::now() + cfg.idle).min(cfg.deadline);
    let mut socks = Vec::with_capacity(total);
    for i in 0..total {
        let what = format!("data connection {} of {total}", i + 1);
        let sock = match src.next(until) {
            Ok(DataSocket::Tcp(s)) if !cfg.udp => {
                sockets::tcp_stream(&s, &cfg.sockets).map_err(|e| option_failure(ctl, e))?;
                Sock::Tcp(s)
            }
            Ok(DataSocket::Udp(peer)) if cfg.udp => Sock::Udp(
                sockets::udp_stream(local, peer, &cfg.sockets)
                    .map_err(|e| option_failure(ctl, e))?,
            ),
            Ok(_) => {
                return Err(Failure::Protocol(format!(
                    "{what} is of the wrong protocol"
                )))
            }
            Err(e) => {
                refuse(
                    ctl,
                    Refusal::Error {
                        code: codes::IESTREAMACCEPT,
                        errno: 0,
                    },
                );
                return Err(Failure::Timeout(format!("{what} ({e})")));
            }
        };
        socks.push(sock);
    }
    src.done();
    let congestion_used = socks.iter().find_map(|s| match s {
        Sock::Tcp(t) => sockets::congestion_used(t),
        Sock::Udp(_) => None,
    });
    let mut run = Running {
        shared: Arc::new(Shared::new(if cfg.udp { None } else { cfg.blocks })),
        counters: Vec::with_capacity(total),
        socks: Vec::with_capacity(total),
        threads: Vec::with_capacity(total),
    };
    for (i, (sock, buf)) in socks.into_iter().zip(bufs).enumerate() {
        let plan = StreamPlan {
            send: i >= up,
            len: cfg.len,
            rate_bps: cfg.rate_bps,
            burst: cfg.burst,
            counters_64bit: cfg.counters_64bit,
            idle: cfg.idle,
            zerocopy: cfg.zerocopy && !cfg.udp && i >= up,
        };
        let file = if plan.zerocopy {
            match streams::memory_file(&buf) {
                Ok(f) => Some(f),
                Err(e) => return Err(server_error(ctl, codes::IENEWTEST, format!("-Z: {e}"))),
            }
        } else {
            None
        };
        let c = Arc::new(Counters::default());
        let clone = sock
            .try_clone()
            .map_err(|e| server_error(ctl, codes::IEINITSTREAM, e.to_string()))?;
        let (sh, cc, keep) = (run.shared.clone(), c.clone(), hold.clone());
        let spawned = thread::Builder::new()
            .name(format!("netsweep-i3-{}", stream_id(i)))
            .spawn(move || {
                let _keep = keep;
                streams::run(sock, plan, buf, file, &cc, &sh);
            });
        match spawned {
            Ok(h) => run.threads.push(h),
            Err(e) => {
                return Err(server_error(
                    ctl,
                    codes::IENEWTEST,
                    format!("a thread: {e}"),
                ))
            }
        }
        run.counters.push(c);
        run.socks.push(clone);
    }
    send(
        ctl,
        &[State::TestStart.to_byte(), State::TestRunning.to_byte()],
        "TEST_START",
    )?;
    let start = Instant::now();
    let cpu0 = crate::control::thread_cpu();
    run.shared.go(Some(start));
    let (end, omit_snaps, t0, intervals) = running(ctl, cfg, &run, start)?;
    let at_test_end = run.snaps();
    run.end_sending(up);
    send(ctl, &[State::ExchangeResults.to_byte()], "EXCHANGE_RESULTS")?;
    let text = read_frame(ctl, MAX_CLIENT_RESULTS, cfg.idle, "the client's results")?;
    let client = ServerReport::parse(&text).map_err(Failure::Protocol)?;
    drain(&run, up, &client, cfg.omit.is_zero());
    // The streams' threads end before their counts are read: a sender that was inside a write
    // at TEST_END counts that write's bytes after the call returns, which can be after the
    // client has read them (run 21 of issue 28: one 128 KiB block counted by the client and
    // not yet by the server).
    run.stop();
    let bidir = up > 0 && total > up;
    // A bidir test's figures stop at TEST_END (as iperf3's server's do): the client divides
    // what it received by the server's window, so a window stretched over the upload's tail
    // would understate the download. A one-way test counts its tail, over a window to the last
    // byte read.
    let mut last: Vec<u64> = run
        .counters
        .iter()
        .take(if bidir { 0 } else { up })
        .map(|c| c.last_byte_ns.load(Relaxed))
        .collect();
    // A tail longer than `tail_limit` is not the path draining a moment's backlog: the client
    // stopped at TEST_END with megabytes in its sockets, and what trickled in after did not
    // fill the path (-P 128 across 50 Mbit/s: BBR flows paced at their share while the others
    // ended; counted, the window grew from 4.05 to 7.3 s and read 43 Mbit/s, where iperf3 -s,
    // which stops at TEST_END, read 46.6). Such a test's figures stop at TEST_END too.
    let long_tail = window_end(start, end, &last).saturating_duration_since(end)
        > tail_limit(end.saturating_duration_since(t0));
    if long_tail {
        last.clear();
    }
    let ends: Vec<Snap> = if bidir || long_tail {
        at_test_end
    } else {
        run.snaps()
    };
    let seconds = window_end(start, end, &last)
        .saturating_duration_since(t0)
        .as_secs_f64();
    let figures: Vec<StreamFigures> = (0..total)
        .map(|i| {
            let (o, e, c) = (omit_snaps[i], ends[i], &run.counters[i]);
            let sender = i >= up;
            StreamFigures {
                id: stream_id(i),
                sender,
                bytes: e.bytes - o.bytes,
                packets: e.packets,
                omitted_packets: o.packets,
                errors: e.lost.saturating_sub(o.lost),
                out_of_order: e.out_of_order.saturating_sub(o.out_of_order),
                jitter_s: c.jitter(),
                retransmits: (sender && !cfg.udp).then(|| e.retransmits - o.retransmits),
                seconds,
            }
        })
        .collect();
    let cpu = cpu_util(&run, cpu0, start);
    let output = cfg
        .output
        .as_ref()
        .map(|h| super::text_output(h, &intervals, &figures));
    let results = super::results_json(cpu, congestion_used.as_deref(), &figures, output.as_deref());
    send(ctl, &crate::wire::frame(&results), "the server's results")?;
    send(ctl, &[State::DisplayResults.to_byte()], "DISPLAY_RESULTS")?;
    // IPERF_DONE, or the client closing: either ends the test.
    let mut b = [0u8; 1];
    let _ = ctl.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = ctl.read(&mut b);
    Ok(Served {
        streams: figures,
        intervals,
        cpu,
        congestion_used,
        client,
        seconds: end.duration_since(start).as_secs_f64(),
    })
}

/// The data phase: waits for TEST_END while taking a figure per second and the snapshot at the
/// end of the omitted seconds. Returns when TEST_END came, the omit snapshots, the instant the
/// figures start from, and the intervals.
fn running(
    ctl: &mut TcpStream,
    cfg: &Config,
    run: &Running,
    start: Instant,
) -> Result<(Instant, Vec<Snap>, Instant, Vec<Interval>), Failure> {
    let n = run.counters.len();
    let mut omit_snaps = vec![Snap::default(); n];
    let omit_end = (!cfg.omit.is_zero()).then(|| start + cfg.omit);
    let mut omitted = omit_end.is_some();
    let mut t0 = start;
    let mut intervals = Sampler {
        start,
        prev: vec![Snap::default(); n],
        prev_at: start,
        up: cfg.to_server as usize,
        keep: cfg.keep_intervals,
        out: Vec::new(),
    };
    let mut next_tick = start + Duration::from_secs(1);
    loop {
        if let Some(why) = run.shared.failure() {
            let code = if why.starts_with("send") || why.contains("read nothing") {
                codes::IESTREAMWRITE
            } else {
                codes::IESTREAMREAD
            };
            refuse(ctl, Refusal::Error { code, errno: 0 });
            return Err(Failure::Test(format!("a data stream failed: {why}")));
        }
        let now = Instant::now();
        if now >= cfg.deadline {
            let _ = ctl.write_all(&[State::ServerTerminate.to_byte()]);
            return Err(Failure::Test(
                "the test reached its deadline without TEST_END".into(),
            ));
        }
        if now >= next_tick {
            intervals.sample(now, run.snaps(), omitted);
            next_tick += Duration::from_secs(1);
        }
        if omitted && omit_end.is_some_and(|oe| now >= oe) {
            omit_snaps = run.snaps();
            run.shared.omit_epoch.fetch_add(1, Relaxed);
            t0 = now;
            omitted = false;
        }
        let mut wake = next_tick.min(cfg.deadline);
        if let Some(oe) = omit_end.filter(|_| omitted) {
            wake = wake.min(oe);
        }
        // poll(2), not a socket timeout: its wake-up is the interval's edge to the millisecond.
        if !readable(ctl, wake.saturating_duration_since(now)) {
            continue;
        }
        let mut b = [0u8; 1];
        match ctl.read(&mut b) {
            Ok(0) => return Err(Failure::ClientGone("during the test".into())),
            Ok(_) => match State::from_byte(b[0]) {
                Some(State::TestEnd) => break,
                Some(State::ClientTerminate) => return Err(Failure::ClientTerminated),
                _ => {
                    return Err(Failure::Protocol(format!(
                        "state byte {} during the test",
                        b[0] as i8
                    )))
                }
            },
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::ClientGone(format!("during the test ({e})"))),
        }
    }
    let end = Instant::now();
    if end > intervals.prev_at + Duration::from_millis(1) {
        intervals.sample(end, run.snaps(), omitted);
    }
    if omitted {
        // TEST_END inside the omitted seconds: nothing counts.
        omit_snaps = run.snaps();
        t0 = end;
    }
    Ok((end, omit_snaps, t0, intervals.out))
}

/// The end of the one window every stream's figures cover (issue 41): TEST_END, or the last
/// byte read after it on any stream whose tail counts (`last_ns`: nanoseconds from `start`).
/// iperf3's client divides each summary (both directions of a bidir test) by the first
/// stream's time, so a window per stream made `-P 128` sums exceed the link.
fn window_end(start: Instant, test_end: Instant, last_ns: &[u64]) -> Instant {
    last_ns
        .iter()
        .map(|&ns| start + Duration::from_nanos(ns))
        .fold(test_end, Instant::max)
}

/// The longest tail after TEST_END a one-way test's figures count: a tenth of the test, and
/// at least 250 ms.
fn tail_limit(test: Duration) -> Duration {
    (test / 10).max(Duration::from_millis(250))
}

/// Whether `s` has a byte (or its end) to read within `wait` (rounded up to a millisecond,
/// at most a second).
fn readable(s: &TcpStream, wait: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let ms = wait.as_micros().div_ceil(1000).clamp(1, 1000) as i32;
    let mut p = libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one live pollfd.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// Takes a figure per second: both directions summed over their streams.
struct Sampler {
    start: Instant,
    prev: Vec<Snap>,
    prev_at: Instant,
    up: usize,
    keep: bool,
    out: Vec<Interval>,
}

impl Sampler {
    fn sample(&mut self, at: Instant, now: Vec<Snap>, omitted: bool) {
        if self.keep && self.out.len() < MAX_INTERVALS {
            let mut iv = Interval {
                start: self.prev_at.duration_since(self.start).as_secs_f64(),
                end: at.duration_since(self.start).as_secs_f64(),
                omitted,
                ..Interval::default()
            };
            for (i, (a, b)) in self.prev.iter().zip(&now).enumerate() {
                let bytes = b.bytes.saturating_sub(a.bytes);
                if i >= self.up {
                    iv.sent += bytes;
                } else {
                    iv.received += bytes;
                    iv.datagrams_received += b.datagrams.saturating_sub(a.datagrams);
                    iv.lost += b.lost.saturating_sub(a.lost);
                }
            }
            self.out.push(iv);
        }
        self.prev = now;
        self.prev_at = at;
    }
}

/// Reads the tail of every stream the client sent on: until it holds the bytes the client's
/// results count (`exact`: no omitted seconds, so both count from the start), or every such
/// stream is quiet for [`DRAIN_QUIET`], at most [`DRAIN_MAX`].
fn drain(run: &Running, up: usize, client: &ServerReport, exact: bool) {
    if up == 0 {
        return;
    }
    let target: Vec<Option<u64>> = (0..up)
        .map(|i| {
            let id = i64::from(stream_id(i));
            exact
                .then(|| client.streams.iter().find(|s| s.id == Some(id)))
                .flatten()
                .and_then(|s| s.bytes)
        })
        .collect();
    let until = Instant::now() + DRAIN_MAX;
    let mut last = (0..up)
        .map(|i| run.counters[i].bytes.load(Relaxed))
        .sum::<u64>();
    let mut quiet_since = Instant::now();
    loop {
        let all = (0..up).all(|i| {
            let c = &run.counters[i];
            c.ended.load(Relaxed) || target[i].is_some_and(|t| c.bytes.load(Relaxed) >= t)
        });
        if all || Instant::now() >= until {
            return;
        }
        thread::sleep(Duration::from_millis(2));
        let now = (0..up)
            .map(|i| run.counters[i].bytes.load(Relaxed))
            .sum::<u64>();
        if now != last {
            last = now;
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= DRAIN_QUIET {
            return;
        }
    }
}

/// The test's threads' CPU (its streams' and this control thread's) over its wall time.
fn cpu_util(run: &Running, cpu0: (Duration, Duration), start: Instant) -> [f64; 3] {
    let wall = start.elapsed().as_secs_f64().max(1e-9);
    let (u, s) = crate::control::thread_cpu();
    let mut user = u.saturating_sub(cpu0.0).as_secs_f64();
    let mut sys = s.saturating_sub(cpu0.1).as_secs_f64();
    for c in &run.counters {
        user += c.user_ns.load(Relaxed) as f64 / 1e9;
        sys += c.system_ns.load(Relaxed) as f64 / 1e9;
    }
    let pct = |x: f64| 100.0 * x / wall;
    [pct(user + sys), pct(user), pct(sys)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_counts_up_to_a_tenth_of_the_test() {
        assert_eq!(
            tail_limit(Duration::from_secs(4)),
            Duration::from_millis(400)
        );
        assert_eq!(
            tail_limit(Duration::from_secs(1)),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn every_stream_shares_one_window_to_the_last_tail_byte() {
        let start = Instant::now();
        let test_end = start + Duration::from_secs(2);
        // Tails of 0, 150 and 300 ms after TEST_END on three streams: one window, to 2.3 s.
        let last = [1_900_000_000, 2_150_000_000, 2_300_000_000];
        let w = window_end(start, test_end, &last);
        assert_eq!(w.duration_since(start), Duration::from_millis(2300));
        // Nothing read after TEST_END (or a bidir test, which passes no tails): TEST_END.
        assert_eq!(window_end(start, test_end, &[5, 10]), test_end);
        assert_eq!(window_end(start, test_end, &[]), test_end);
    }
}
