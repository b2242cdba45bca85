//! The server's budget: what its sessions may hold together — buffer memory (tmpfs files
//! included), threads and file descriptors — with defaults derived from the host's own
//! limits. A session's cost is reserved when it is admitted, before it allocates anything,
//! and given back when the last of its threads ends.

use std::fmt;
use std::sync::{Arc, Mutex};

/// What a session costs the server, or what a budget allows: each a worst case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// Bytes of memory: message buffers, the transport's rings, tmpfs files.
    pub memory: u64,
    /// Threads (control and data).
    pub threads: u64,
    /// File descriptors (sockets, epoll sets, pipes).
    pub fds: u64,
}

/// One of the resources a [`Cost`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// [`Cost::memory`].
    Memory,
    /// [`Cost::threads`].
    Threads,
    /// [`Cost::fds`].
    Fds,
}

impl Resource {
    /// Every resource, in the order refusals name them.
    pub const ALL: [Resource; 3] = [Resource::Memory, Resource::Threads, Resource::Fds];

    /// How much of this resource `c` counts.
    pub fn of(self, c: &Cost) -> u64 {
        match self {
            Resource::Memory => c.memory,
            Resource::Threads => c.threads,
            Resource::Fds => c.fds,
        }
    }

    /// `n` of this resource, in words.
    pub fn amount(self, n: u64) -> String {
        match self {
            Resource::Memory => bytes(n),
            Resource::Threads => format!("{n} threads"),
            Resource::Fds => format!("{n} file descriptors"),
        }
    }

    /// The `serve` flag (or the system limit) that sets the server-wide budget of it.
    pub fn server_flag(self) -> &'static str {
        match self {
            Resource::Memory => "--max-memory",
            Resource::Threads => "--max-threads",
            Resource::Fds => "the open-files limit (ulimit -n, or LimitNOFILE= for the service)",
        }
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {} threads, {} file descriptors",
            bytes(self.memory),
            self.threads,
            self.fds
        )
    }
}

impl Cost {
    /// Both costs together (saturating: a sum never wraps below a limit).
    pub fn plus(self, o: Cost) -> Cost {
        Cost {
            memory: self.memory.saturating_add(o.memory),
            threads: self.threads.saturating_add(o.threads),
            fds: self.fds.saturating_add(o.fds),
        }
    }

    /// What is left of `self` once `o` is taken (never below zero).
    pub fn minus(self, o: Cost) -> Cost {
        Cost {
            memory: self.memory.saturating_sub(o.memory),
            threads: self.threads.saturating_sub(o.threads),
            fds: self.fds.saturating_sub(o.fds),
        }
    }

    /// The first resource of which `self` holds more than `limit`.
    pub fn over(&self, limit: &Cost) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| r.of(self) > r.of(limit))
    }
}

/// Bytes in binary units, as the CLI takes them (`64M` is 64 MiB).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The server-wide budget and what admitted sessions hold of it.
#[derive(Debug)]
pub struct Budget {
    limit: Cost,
    used: Mutex<Cost>,
}

/// An admitted session's share of the budget, given back when dropped: it lives as long as
/// the session's last thread (a data thread that outlives its control thread keeps it).
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    cost: Cost,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
        *used = used.minus(self.cost);
    }
}

impl Budget {
    /// A budget of `limit`, nothing used.
    pub fn new(limit: Cost) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: Mutex::new(Cost::default()),
        })
    }

    /// The limit.
    pub fn limit(&self) -> Cost {
        self.limit
    }

    /// What admitted sessions hold now.
    pub fn used(&self) -> Cost {
        *self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves `cost`, or says which resource has no room: the message names what is held,
    /// the limit and the flag that raises it.
    pub fn reserve(self: &Arc<Self>, cost: Cost) -> Result<Reservation, String> {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let after = used.plus(cost);
        if let Some(r) = after.over(&self.limit) {
            return Err(format!(
                "its sessions hold {} of the {} it may give them all, and this run needs {} \
                 more; try again when a session ends, or raise {} on the server",
                r.amount(r.of(&used)),
                r.amount(r.of(&self.limit)),
                r.amount(r.of(&cost)),
                r.server_flag()
            ));
        }
        *used = after;
        Ok(Reservation {
            budget: self.clone(),
            cost,
        })
    }
}

/// Stack reserved for each thread (Rust's default for spawned threads, and its guard page):
/// address space, counted against an address-space limit.
const STACK: u64 = (2 << 20) + 4096;

/// Address space the process needs besides buffers and stacks: the binary, its libraries,
/// the allocator's arenas.
const BASE_ADDRESS_SPACE: u64 = 1 << 30;

/// The host's limits that bound a server's default budget; `None` where there is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostLimits {
    /// Physical memory (`MemTotal`).
    pub mem_total: Option<u64>,
    /// The memory limit of the process's cgroup (`memory.max`).
    pub cgroup_memory: Option<u64>,
    /// The address-space limit (`RLIMIT_AS`).
    pub address_space: Option<u64>,
    /// The task limit of the process's cgroup (`pids.max`).
    pub cgroup_tasks: Option<u64>,
    /// The soft open-files limit (`RLIMIT_NOFILE`), after raising it to the hard one.
    pub open_files: Option<u64>,
}

/// Most threads all sessions together run when nothing on the host says fewer.
pub const DEFAULT_MAX_THREADS: u64 = 1024;

/// Descriptors kept out of the sessions' budget: the listener, handshakes in flight
/// (64), logs, and the tools run to describe the host.
const FDS_KEPT: u64 = 160;

impl HostLimits {
    /// The server-wide budget the host allows by default: half the memory the process may
    /// have (the least of physical memory, its cgroup's limit and its address space after
    /// thread stacks and its own image), [`DEFAULT_MAX_THREADS`] threads or three quarters of
    /// its cgroup's task limit, and its open files but those the server keeps for itself.
    pub fn default_budget(&self) -> Cost {
        let threads = self.cgroup_tasks.map_or(DEFAULT_MAX_THREADS, |t| {
            (t / 4 * 3).clamp(8, DEFAULT_MAX_THREADS)
        });
        let space = self
            .address_space
            .map(|a| a.saturating_sub(threads * STACK + BASE_ADDRESS_SPACE));
        let memory = [self.mem_total, self.cgroup_memory, space]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(8 << 30)
            / 2;
        let fds = self
            .open_files
            .map_or(1024, |n| n.saturating_sub(FDS_KEPT).max(64));
        Cost {
            memory,
            threads,
            fds,
        }
    }

    /// This process's limits, read from /proc, its cgroup and its rlimits; raises the soft
    /// open-files limit to the hard one first, as a server that serves thousands of flows
    /// must.
    pub fn read() -> Self {
        let groups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let cg = |files: &[&str]| {
            cgroup_files(&groups, files)
                .into_iter()
                .filter_map(|f| std::fs::read_to_string(f).ok())
                .filter_map(|s| parse_limit(&s))
                .min()
        };
        Self {
            mem_total: std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|s| parse_meminfo_total(&s)),
            cgroup_memory: cg(&["memory.max", "memory:memory.limit_in_bytes"]),
            address_space: rlimit(libc::RLIMIT_AS),
            cgroup_tasks: cg(&["pids.max", "pids:pids.max"]),
            open_files: raise_open_files(),
        }
    }
}

/// The limit files of this process's cgroups (`/proc/self/cgroup`'s text): a plain name is
/// a cgroup v2 file (`0::/path`), `controller:name` a v1 controller's file
/// (`N:controller:/path`).
fn cgroup_files(groups: &str, files: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_end_matches('/');
        for f in files {
            match f.split_once(':') {
                None if controllers.is_empty() => out.push(format!("/sys/fs/cgroup{path}/{f}")),
                Some((c, name)) if controllers.split(',').any(|x| x == c) => {
                    out.push(format!("/sys/fs/cgroup/{c}{path}/{name}"))
                }
                _ => {}
            }
        }
    }
    out
}

/// A cgroup limit file's value: a number, or `max` (no limit); cgroup v1 writes "no limit"
/// as a number near 2^63.
fn parse_limit(s: &str) -> Option<u64> {
    s.trim().parse().ok().filter(|&n: &u64| n < 1 << 60)
}

/// `MemTotal` of /proc/meminfo, bytes.
fn parse_meminfo_total(s: &str) -> Option<u64> {
    s.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

fn rlimit(resource: libc::__rlimit_resource_t) -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    if unsafe { libc::getrlimit(resource, &mut lim) } != 0 || lim.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(lim.rlim_cur)
}

/// Raises the soft open-files limit to the hard one (no privilege needed) and returns it
/// (`None`: no limit).
pub(crate) fn raise_open_files() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.rlim_max > lim.rlim_cur {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we pass; up to the hard limit needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        }
    }
    (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn reservations_are_refused_past_the_limit_and_given_back_when_dropped() {
        let b = Budget::new(Cost {
            memory: 100,
            threads: 10,
            fds: 10,
        });
        let c = Cost {
            memory: 40,
            threads: 2,
            fds: 2,
        };
        let r1 = b.reserve(c).unwrap();
        let r2 = b.reserve(c).unwrap();
        let e = b.reserve(c).unwrap_err();
        assert!(
            e.contains("80 B of the 100 B")
                && e.contains("40 B more")
                && e.contains("--max-memory"),
            "{e}"
        );
        drop(r1);
        let r3 = b.reserve(c).unwrap();
        assert_eq!(b.used().memory, 80);
        drop((r2, r3));
        assert_eq!(b.used(), Cost::default());
        let threads = Cost {
            threads: 11,
            ..Cost::default()
        };
        assert!(b.reserve(threads).unwrap_err().contains("--max-threads"));
        assert_eq!(b.used(), Cost::default(), "a refusal reserves nothing");
    }

    #[test]
    fn the_default_budget_is_half_the_tightest_memory_limit() {
        let host = HostLimits {
            mem_total: Some(24 * GIB),
            ..HostLimits::default()
        };
        assert_eq!(host.default_budget().memory, 12 * GIB);
        assert_eq!(host.default_budget().threads, DEFAULT_MAX_THREADS);
        let cg = HostLimits {
            cgroup_memory: Some(2 * GIB),
            ..host
        };
        assert_eq!(cg.default_budget().memory, GIB);
        // An address-space limit leaves room for every thread's stack and the image first.
        let space = HostLimits {
            address_space: Some(6_000_000_000),
            ..host
        };
        let b = space.default_budget();
        assert!(
            b.memory + b.threads * STACK + BASE_ADDRESS_SPACE <= 6_000_000_000,
            "{b:?}"
        );
        assert!(b.memory > GIB, "{b:?}");
        let tasks = HostLimits {
            cgroup_tasks: Some(200),
            ..host
        };
        assert_eq!(tasks.default_budget().threads, 150);
        let files = HostLimits {
            open_files: Some(65536),
            ..host
        };
        assert_eq!(files.default_budget().fds, 65536 - FDS_KEPT);
    }

    #[test]
    fn host_limits_are_parsed() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        let v1 = "9:name=systemd:/\n8:pids:/a\n4:memory:/process_api/x/\n0::/\n";
        assert_eq!(
            cgroup_files(
                v1,
                &[
                    "memory.max",
                    "memory:memory.limit_in_bytes",
                    "pids:pids.max"
                ]
            ),
            [
                "/sys/fs/cgroup/pids/a/pids.max",
                "/sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes",
                "/sys/fs/cgroup/memory.max"
            ]
        );
        let v2 = "0::/system.slice/netsweep-serve.service\n";
        assert_eq!(
            cgroup_files(v2, &["memory.max"]),
            ["/sys/fs/cgroup/system.slice/netsweep-serve.service/memory.max"]
        );
        assert_eq!(parse_limit("1073741824\n"), Some(GIB));
        assert_eq!(
            parse_meminfo_total("MemTotal:       24576000 kB\nMemFree: 1 kB\n"),
            Some(24_576_000 * 1024)
        );
        let here = HostLimits::read();
        assert!(here.mem_total.is_some_and(|m| m > 0), "{here:?}");
        assert!(here.default_budget().memory > 0);
    }

    #[test]
    fn amounts_read_in_binary_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(64 << 20), "64.0 MiB");
        assert_eq!(bytes(68_719_481_856), "64.0 GiB");
    }
}
