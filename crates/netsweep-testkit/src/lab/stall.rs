//! Host stalls, measured: a real-time thread that sleeps a millisecond at a time and records
//! how late it woke (what cyclictest does). Run at SCHED_FIFO it preempts every ordinary
//! process, so its lateness is the host's own — the hypervisor taking the vCPU, the kernel
//! with interrupts off — not the test's load. A test whose bound is on a tail (a p99, a
//! lateness) keeps it only when no such stall happened over its window, and says so otherwise.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The probe's sleep.
const TICK: Duration = Duration::from_millis(1);
/// Most samples kept (about 17 minutes of ticks): the probe never grows without bound.
const MAX_SAMPLES: usize = 1 << 20;
/// The longest a real-time thread may wake late for the host to count as not stalled.
pub const MAX_STALL_NS: u64 = 1_000_000;

/// A running probe; [`StallProbe::finish`] stops it.
#[derive(Debug)]
pub struct StallProbe {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Stalls>>,
}

/// What the probe saw over its window.
#[derive(Debug, Clone, Default)]
pub struct Stalls {
    /// Wake-ups measured.
    pub samples: usize,
    /// Lateness of the wake-ups, nanoseconds.
    pub p50_ns: u64,
    /// …
    pub p99_ns: u64,
    /// …
    pub max_ns: u64,
    /// Whether the probe ran at real-time priority (root); otherwise its lateness includes
    /// ordinary scheduling and says less about the host.
    pub realtime: bool,
}

impl StallProbe {
    /// Starts the probe.
    pub fn start() -> StallProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("stall-probe".into())
            .spawn(move || probe(&flag))
            .ok();
        StallProbe { stop, thread }
    }

    /// Stops the probe: its lateness over the window.
    pub fn finish(mut self) -> Stalls {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for StallProbe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn probe(stop: &AtomicBool) -> Stalls {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler(0, …) changes the calling thread's policy; param is valid.
    let realtime = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer (1 ns: wake on time).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let mut late = Vec::with_capacity(4096);
    while !stop.load(Ordering::Relaxed) && late.len() < MAX_SAMPLES {
        let t0 = Instant::now();
        std::thread::sleep(TICK);
        late.push(t0.elapsed().saturating_sub(TICK).as_nanos() as u64);
    }
    summarise(late, realtime)
}

/// The lateness summary of `late` (nanoseconds per wake-up).
pub fn summarise(mut late: Vec<u64>, realtime: bool) -> Stalls {
    late.sort_unstable();
    let at = |q: f64| {
        late.get(((late.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    Stalls {
        samples: late.len(),
        p50_ns: at(0.5),
        p99_ns: at(0.99),
        max_ns: late.last().copied().unwrap_or(0),
        realtime,
    }
}

impl Stalls {
    /// Whether the host ran a real-time thread on time throughout: no wake-up later than
    /// [`MAX_STALL_NS`], over a window long enough to have looked (100 wake-ups).
    pub fn quiet(&self) -> bool {
        self.realtime && self.samples >= 100 && self.max_ns <= MAX_STALL_NS
    }
}

impl fmt::Display for Stalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a {} thread sleeping 1 ms woke late by p50 {} µs, p99 {} µs, max {} µs over {} \
             wake-ups (the host stalled if over {} µs)",
            if self.realtime {
                "real-time"
            } else {
                "normal (not root)"
            },
            self.p50_ns / 1000,
            self.p99_ns / 1000,
            self.max_ns / 1000,
            self.samples,
            MAX_STALL_NS / 1000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_of_the_samples_given() {
        let s = summarise((1..=1000).map(|i| i * 1000).collect(), true);
        assert_eq!(
            (s.samples, s.p50_ns, s.p99_ns, s.max_ns),
            (1000, 501_000, 990_000, 1_000_000)
        );
        assert!(s.quiet());
        let mut late: Vec<u64> = vec![10_000; 999];
        late.push(MAX_STALL_NS + 1);
        assert!(
            !summarise(late.clone(), true).quiet(),
            "one stall is a stall"
        );
        late.pop();
        assert!(
            !summarise(late, false).quiet(),
            "not real-time: says nothing of the host"
        );
        assert!(
            !summarise(vec![0; 10], true).quiet(),
            "too short a window to tell"
        );
        assert_eq!(summarise(Vec::new(), true).samples, 0);
    }
}
