//! The exporter's own process metrics on `/metrics`, under the names every Prometheus client
//! library uses (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …), read from
//! `/proc/self` at each scrape, so the exporter's dashboards and alerts work as they do for
//! iperf3_exporter or the blackbox exporter (issue 41 item 8). A value that cannot be read is
//! left out, never written as 0.

/// What `/proc/self/stat` says of the process, in the kernel's units.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    /// User and system CPU time, clock ticks.
    cpu_ticks: u64,
    /// Start time after boot, clock ticks.
    start_ticks: u64,
    /// Virtual memory size, bytes.
    vsize: u64,
    /// Resident set, pages.
    rss_pages: u64,
}

/// Parses `/proc/<pid>/stat`: fields after the command name (which may hold spaces and
/// parentheses, so the split is at the last `)`), numbered as proc(5) numbers them.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state).
    let field = |n: usize| -> Option<u64> { f.get(n.checked_sub(3)?)?.parse().ok() };
    Some(Stat {
        cpu_ticks: field(14)?.checked_add(field(15)?)?,
        start_ticks: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The boot time, seconds since the epoch (`btime` of `/proc/stat`).
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

fn sysconf(name: libc::c_int) -> Option<u64> {
    // SAFETY: sysconf reads a configuration value; no memory is passed.
    let v = unsafe { libc::sysconf(name) };
    (v > 0).then_some(v as u64)
}

fn gauge(out: &mut String, name: &str, help: &str, value: impl std::fmt::Display) {
    out.push_str(&format!(
        "# TYPE {name} gauge\n# HELP {name} {help}\n{name} {value}\n"
    ));
}

/// The process metrics, OpenMetrics text without `# EOF`.
pub fn metrics() -> String {
    let mut out = String::new();
    let ticks = sysconf(libc::_SC_CLK_TCK).unwrap_or(100) as f64;
    let page = sysconf(libc::_SC_PAGESIZE).unwrap_or(4096);
    let stat = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|t| parse_stat(&t));
    if let Some(s) = stat {
        out.push_str(&format!(
            "# TYPE process_cpu_seconds counter\n# HELP process_cpu_seconds Total user and \
             system CPU time spent in seconds.\nprocess_cpu_seconds_total {}\n",
            s.cpu_ticks as f64 / ticks
        ));
        gauge(
            &mut out,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            s.rss_pages.saturating_mul(page),
        );
        gauge(
            &mut out,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            s.vsize,
        );
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| boot_time(&t));
        if let Some(b) = boot {
            gauge(
                &mut out,
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                b as f64 + s.start_ticks as f64 / ticks,
            );
        }
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        gauge(
            &mut out,
            "process_open_fds",
            "Number of open file descriptors.",
            fds.count(),
        );
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        gauge(
            &mut out,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            lim.rlim_cur,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_parses_with_spaces_and_parentheses_in_the_name() {
        // proc(5): 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss.
        let line = "4242 (net (sweep) x) S 1 4242 4242 0 -1 4194560 500 0 0 0 \
                    150 50 0 0 20 0 9 0 123456 987654321 2500 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                cpu_ticks: 200,
                start_ticks: 123456,
                vsize: 987654321,
                rss_pages: 2500,
            })
        );
        assert_eq!(parse_stat("4242 (cut) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
        assert_eq!(boot_time("cpu 1 2 3\nbtime 1765000000\n"), Some(1765000000));
    }

    #[test]
    fn this_process_reports_its_own_figures() {
        let m = metrics();
        let value = |name: &str| -> f64 {
            m.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} in\n{m}"))
                .parse()
                .unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 1e6, "{m}");
        assert!(value("process_open_fds") >= 3.0, "{m}");
        assert!(value("process_max_fds") >= value("process_open_fds"), "{m}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = value("process_start_time_seconds");
        assert!(
            start <= now + 1.0 && start > now - 3600.0,
            "{start} vs {now}"
        );
        assert!(value("process_cpu_seconds_total") >= 0.0);
    }
}
