//! Per-trial accounting shared by both sides: thread CPU time, system-wide busy time, where
//! the data thread ran, the endpoint's own counters (zero-copy, TCP_INFO) and the namespace's
//! kernel counters (IP fragments, UDP buffer errors…), as deltas.

use crate::cpu::{current_cpu, thread_migrations, SystemCpu, ThreadCpu};
use netsweep_endpoint::EndpointStats;
use netsweep_proto::messages::SideCounters;

/// Readings taken just before a trial's loop; read outside the timed loop.
#[derive(Debug, Clone)]
pub struct TrialMeter {
    thread: ThreadCpu,
    system: SystemCpu,
    cpu: Option<u32>,
    migrations: Option<u64>,
    stats: EndpointStats,
    kernel: Option<crate::kernel::Snapshot>,
}

impl TrialMeter {
    /// Takes the starting readings; `stats` are the data path's counters, just read.
    pub fn start(stats: EndpointStats) -> Self {
        Self::start_with(stats, crate::kernel::read())
    }

    /// The same, with the namespace's kernel counters read earlier: reading them takes a
    /// few hundred µs (the kernel renders /proc/net/netstat), too long to sit between the
    /// server's arming and the client's first send, inside the receiver's window.
    pub fn start_with(stats: EndpointStats, kernel: Option<crate::kernel::Snapshot>) -> Self {
        Self {
            stats,
            kernel,
            cpu: current_cpu(),
            migrations: thread_migrations(),
            system: SystemCpu::now(),
            thread: ThreadCpu::now(),
        }
    }

    /// Fills `c` with the deltas since `start`; `stats` reads the data path's counters (last).
    /// The calling thread's CPU time is added to what `c` holds already: a pattern that runs
    /// part of a trial on a helper thread (bidir's receiver) puts that thread's time there.
    pub fn finish(self, stats: impl FnOnce() -> EndpointStats, c: &mut SideCounters) {
        let thread = ThreadCpu::now().since(self.thread);
        c.cpu_user_ns += thread.user_ns;
        c.cpu_sys_ns += thread.sys_ns;
        c.system_busy_ppm = SystemCpu::now().busy_ppm_since(self.system);
        c.cpu_at_start = self.cpu;
        c.cpu_at_end = current_cpu();
        c.cpu_migrations = delta(thread_migrations(), self.migrations);
        let s = stats();
        if let (Some(before), Some(now)) = (&self.kernel, crate::kernel::read()) {
            c.kernel = now.since(before);
        }
        c.zerocopy_completions = s
            .zerocopy_completions
            .saturating_sub(self.stats.zerocopy_completions);
        c.zerocopy_copied = s.zerocopy_copied.saturating_sub(self.stats.zerocopy_copied);
        c.tcp_retransmits = delta(s.tcp_retransmits, self.stats.tcp_retransmits);
        c.tcp_dsacks = delta(s.tcp_dsacks, self.stats.tcp_dsacks);
        c.tcp_busy_us = delta(s.tcp_busy_us, self.stats.tcp_busy_us);
        c.tcp_rwnd_limited_us = delta(s.tcp_rwnd_limited_us, self.stats.tcp_rwnd_limited_us);
        c.tcp_sndbuf_limited_us = delta(s.tcp_sndbuf_limited_us, self.stats.tcp_sndbuf_limited_us);
        c.socket_drops = delta(s.socket_drops, self.stats.socket_drops);
    }
}

fn delta(now: Option<u64>, before: Option<u64>) -> Option<u64> {
    Some(now?.saturating_sub(before.unwrap_or(0)))
}

/// The CPUs this process may run on (its affinity mask), in ascending order.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity(0) fills it for this thread, and
    // CPU_ISSET reads within CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect()
    }
}

/// Pins the calling thread to `cpu`. Returns the error text when the kernel refuses.
pub fn pin_current_thread(cpu: u32) -> Result<(), String> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Both bounds: CPU_SET indexes a set of CPU_SETSIZE bits, whatever the host has.
    if cpu as usize >= n || cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(format!(
            "CPU {cpu} does not exist (this host has {n} CPUs: 0..{})",
            n.saturating_sub(1)
        ));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET stays within CPU_SETSIZE (checked above);
    // sched_setaffinity(0) applies to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "cannot pin to CPU {cpu}: {} (this host has {n} CPUs: 0..{})",
                std::io::Error::last_os_error(),
                n.saturating_sub(1)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn pinning_moves_the_thread() {
        std::thread::spawn(|| {
            super::pin_current_thread(0).unwrap();
            assert_eq!(crate::cpu::current_cpu(), Some(0));
            assert!(super::pin_current_thread(100_000).is_err());
        })
        .join()
        .unwrap();
    }

    /// A pattern's helper thread CPU (already in the counters) is kept, the caller's added.
    #[test]
    fn finish_adds_the_callers_cpu_to_what_the_pattern_counted() {
        let m = super::TrialMeter::start(super::EndpointStats::default());
        let mut c = super::SideCounters {
            cpu_user_ns: 1_000_000_000,
            cpu_sys_ns: 2_000_000_000,
            ..Default::default()
        };
        m.finish(super::EndpointStats::default, &mut c);
        assert!(
            c.cpu_user_ns >= 1_000_000_000 && c.cpu_sys_ns >= 2_000_000_000,
            "{c:?}"
        );
    }

    #[test]
    fn deltas() {
        assert_eq!(super::delta(Some(10), Some(4)), Some(6));
        assert_eq!(super::delta(Some(10), None), Some(10));
        assert_eq!(super::delta(None, Some(3)), None);
    }
}
