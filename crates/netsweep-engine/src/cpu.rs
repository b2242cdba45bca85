//! CPU accounting: the calling thread's user/system time and the system-wide busy time.

use std::fs;

/// CPU time consumed by the calling thread so far (RUSAGE_THREAD), in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadCpu {
    /// User time, nanoseconds.
    pub user_ns: u64,
    /// System time, nanoseconds.
    pub sys_ns: u64,
}

impl ThreadCpu {
    /// Reads the calling thread's CPU times.
    pub fn now() -> Self {
        // SAFETY: rusage is plain data, valid when zeroed.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes into the struct we own; RUSAGE_THREAD is valid on Linux.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
        if rc != 0 {
            return Self::default();
        }
        let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
        Self {
            user_ns: tv(ru.ru_utime),
            sys_ns: tv(ru.ru_stime),
        }
    }

    /// Time consumed since `earlier`.
    pub fn since(self, earlier: ThreadCpu) -> ThreadCpu {
        ThreadCpu {
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            sys_ns: self.sys_ns.saturating_sub(earlier.sys_ns),
        }
    }
}

/// Aggregate jiffies of all CPUs from /proc/stat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SystemCpu {
    /// Jiffies not idle (idle and iowait excluded).
    pub busy: u64,
    /// All jiffies.
    pub total: u64,
}

impl SystemCpu {
    /// Reads the `cpu` line of /proc/stat; zeros when unreadable.
    pub fn now() -> Self {
        fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| parse_proc_stat(&s))
            .unwrap_or_default()
    }

    /// Busy fraction of all CPUs between `earlier` and `self`, in parts per million.
    pub fn busy_ppm_since(self, earlier: SystemCpu) -> u64 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return 0;
        }
        self.busy.saturating_sub(earlier.busy) * 1_000_000 / total
    }
}

/// Parses the aggregate `cpu` line: user nice system idle iowait irq softirq steal …
pub fn parse_proc_stat(text: &str) -> Option<SystemCpu> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 4 {
        return None;
    }
    // guest and guest_nice (fields 9, 10) are already counted in user and nice.
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some(SystemCpu {
        busy: total - idle,
        total,
    })
}

/// How many times the scheduler has moved the calling thread between CPUs so far
/// (`se.nr_migrations` of /proc/thread-self/sched), when the kernel exposes it.
pub fn thread_migrations() -> Option<u64> {
    let text = fs::read_to_string("/proc/thread-self/sched").ok()?;
    parse_migrations(&text)
}

/// Reads `se.nr_migrations` from the text of a /proc/…/sched file.
pub fn parse_migrations(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.trim_start().starts_with("se.nr_migrations"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
}

/// The CPU the calling thread runs on now, if the kernel says.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_fraction() {
        let a = parse_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(
            a,
            SystemCpu {
                busy: 150,
                total: 1000
            }
        );
        let b = parse_proc_stat("cpu  200 0 100 1500 100 0 0 0 0 0\n").unwrap();
        // 150 busy of 900 jiffies.
        assert_eq!(b.busy_ppm_since(a), 166_666);
        assert!(parse_proc_stat("intr 1 2 3").is_none());
    }

    #[test]
    fn migrations_are_read() {
        let t = "se.exec_start : 1.0\nse.nr_migrations                             :                   17\n";
        assert_eq!(parse_migrations(t), Some(17));
        assert_eq!(parse_migrations("nothing"), None);
        assert!(
            thread_migrations().is_some(),
            "this kernel exposes /proc/thread-self/sched"
        );
    }

    #[test]
    fn thread_cpu_advances_with_work() {
        let a = ThreadCpu::now();
        // Busy for 50 ms of wall time: a fixed loop count took ~10 ms in a release build,
        // and getrusage's tick-scaled thread times could still read 0 then.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(50) {
            for i in 0..10_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
        }
        let d = ThreadCpu::now().since(a);
        assert!(d.user_ns + d.sys_ns > 0);
    }
}
