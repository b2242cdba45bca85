//! The loop's scheduling: its CPU, SCHED_FIFO, and its real-time budget. The kernel lets
//! real-time threads run 95% of each second (`kernel.sched_rt_runtime_us`) and stops them for
//! the rest of it: an emulator that a flood keeps busy all the time held every release for
//! about 50 ms once a second (measured: a UDP stream flooding a 100 Mbit/s link, worst
//! release 48.4 ms late in 3 runs of 4, and 0.9–11 ms with the throttling turned off). So the
//! loop runs real-time only while its CPU time in the current second stays under [`SHARE`] of
//! it, and as an ordinary thread for the rest of that second: on a quiet host it still runs at
//! once, on a busy one it takes its turn, and the kernel never stops it outright. [`Budget`]
//! decides, without IO; the functions below do the switching.

use std::io;

/// The share of each period the loop may run real-time; under the kernel's 95% with room for
/// other real-time work on its CPU.
pub const SHARE: f64 = 0.85;

/// The period the share applies to: the kernel's default `sched_rt_period_us`.
pub const PERIOD_NS: u64 = 1_000_000_000;

/// The scheduling the loop should switch to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// Real-time again: a new period began.
    Realtime,
    /// Ordinary until the period ends: the share is spent.
    Ordinary,
}

/// The budget's state, fed the monotonic time and the thread's CPU time.
#[derive(Debug, Clone)]
pub struct Budget {
    period_ns: u64,
    allowed_ns: u64,
    start_ns: u64,
    cpu_at_start: u64,
    ordinary_since: Option<u64>,
    ordinary_ns: u64,
}

impl Budget {
    /// A budget of `share` of each `period_ns`, the first period starting at `now_ns` with the
    /// thread's CPU time at `cpu_ns`.
    pub fn new(period_ns: u64, share: f64, now_ns: u64, cpu_ns: u64) -> Self {
        Self {
            period_ns,
            allowed_ns: (period_ns as f64 * share.clamp(0.0, 1.0)) as u64,
            start_ns: now_ns,
            cpu_at_start: cpu_ns,
            ordinary_since: None,
            ordinary_ns: 0,
        }
    }

    /// What to switch to now, if anything.
    pub fn check(&mut self, now_ns: u64, cpu_ns: u64) -> Option<Switch> {
        if now_ns.saturating_sub(self.start_ns) >= self.period_ns {
            self.start_ns = now_ns;
            self.cpu_at_start = cpu_ns;
            if let Some(since) = self.ordinary_since.take() {
                self.ordinary_ns += now_ns.saturating_sub(since);
                return Some(Switch::Realtime);
            }
            return None;
        }
        let used = cpu_ns.saturating_sub(self.cpu_at_start);
        if self.ordinary_since.is_none() && used >= self.allowed_ns {
            self.ordinary_since = Some(now_ns);
            return Some(Switch::Ordinary);
        }
        None
    }

    /// The time the loop ran as an ordinary thread, up to `now_ns`.
    pub fn ordinary_ns(&self, now_ns: u64) -> u64 {
        self.ordinary_ns
            + self
                .ordinary_since
                .map_or(0, |since| now_ns.saturating_sub(since))
    }
}

/// Whether the emulator's thread runs under SCHED_FIFO.
#[derive(Debug)]
pub(crate) struct Realtime {
    /// Its share of each second, when SCHED_FIFO was granted.
    pub(crate) budget: Option<Budget>,
    pub(crate) refused: Option<String>,
    /// When the current lateness window started (not a real-time matter, but reported with
    /// it).
    pub(crate) window_start: f64,
}

/// Puts the calling thread under SCHED_FIFO, priority 50: a release waits for no ordinary
/// thread of the host. The kernel's real-time throttling (95% of each second by default)
/// still leaves the host its share, and the loop keeps under it ([`Budget`]).
pub(crate) fn realtime() -> io::Result<()> {
    let p = libc::sched_param { sched_priority: 50 };
    // SAFETY: applies to the calling thread; reads the sched_param we pass.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return last_error("SCHED_FIFO");
    }
    Ok(())
}

/// Pins the calling thread to `cpu`.
pub(crate) fn pin(cpu: u32) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; the index is checked against CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} does not exist"),
            ));
        }
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return last_error(&format!("pinning the emulator to CPU {cpu}"));
        }
    }
    Ok(())
}

/// Puts the calling thread back under SCHED_OTHER, for the rest of a period.
pub(crate) fn ordinary() -> io::Result<()> {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: applies to the calling thread; reads the sched_param we pass.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) } != 0 {
        return last_error("SCHED_OTHER");
    }
    Ok(())
}

/// The calling thread's CPU time, ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn last_error<T>(what: &str) -> io::Result<T> {
    let e = io::Error::last_os_error();
    Err(io::Error::new(e.kind(), format!("{what}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_loop_busy_all_the_time_is_ordinary_for_the_rest_of_each_second() {
        let mut b = Budget::new(1000 * MS, 0.85, 0, 0);
        let mut switches = Vec::new();
        // Busy throughout: CPU time advances with the clock, checked every millisecond.
        for t in (1..3000).map(|ms| ms * MS) {
            if let Some(s) = b.check(t, t) {
                switches.push((t / MS, s));
            }
        }
        assert_eq!(
            switches,
            [
                (850, Switch::Ordinary),
                (1000, Switch::Realtime),
                (1850, Switch::Ordinary),
                (2000, Switch::Realtime),
                (2850, Switch::Ordinary),
            ]
        );
        // 150 ms in each of the first two seconds, and 150 of the third so far.
        assert_eq!(b.ordinary_ns(3000 * MS), 450 * MS);
    }

    #[test]
    fn a_loop_that_sleeps_stays_real_time() {
        let mut b = Budget::new(1000 * MS, 0.85, 0, 0);
        // Busy half of each millisecond, for five seconds.
        for t in (1..=5000).map(|ms| ms * MS) {
            assert_eq!(b.check(t, t / 2), None, "at {} ms", t / MS);
        }
        assert_eq!(b.ordinary_ns(5000 * MS), 0);
    }

    #[test]
    fn the_share_is_counted_per_period_not_since_the_start() {
        let mut b = Budget::new(1000 * MS, 0.85, 0, 0);
        // 800 ms of CPU in the first second: under the share.
        assert_eq!(b.check(999 * MS, 800 * MS), None);
        // The second period starts afresh: 800 more is still under it.
        assert_eq!(b.check(1000 * MS, 800 * MS), None);
        assert_eq!(b.check(1999 * MS, 1600 * MS), None);
        // 851 ms in the third second is not.
        assert_eq!(b.check(2000 * MS, 1600 * MS), None);
        assert_eq!(b.check(2900 * MS, 2451 * MS), Some(Switch::Ordinary));
    }
}
