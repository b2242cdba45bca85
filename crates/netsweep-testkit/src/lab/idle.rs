//! "Idle enough", measured: how much of the machine's CPU time other processes (nice ≤ 0) and
//! the hypervisor (steal) took over a test's window, from /proc/stat less this process's own
//! tree, with the busiest other processes named. A ground-truth test keeps its arithmetic
//! check only on an idle machine and prints why it skipped it otherwise.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

/// Most of the machine's CPU time other processes may take for it to count as idle.
pub const MAX_OTHER_BUSY: f64 = 0.10;
/// Most of the machine's CPU time the hypervisor may steal for it to count as idle.
pub const MAX_STEAL: f64 = 0.05;

/// The machine-wide CPU times of /proc/stat's `cpu` line, in ticks.
#[derive(Debug, Clone, Copy, Default)]
struct Stat {
    /// user + system + irq + softirq: work at nice ≤ 0 and the kernel's.
    busy: u64,
    /// User time of niced (nice > 0) processes, however short-lived.
    nice: u64,
    steal: u64,
    total: u64,
}

fn read_stat() -> Stat {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    Stat {
        busy: at(0) + at(2) + at(5) + at(6),
        nice: at(1),
        steal: at(7),
        total: (0..8).map(at).sum(),
    }
}

/// One process's (ppid, nice, comm, ticks: utime + stime, ticks of its reaped children,
/// stime).
fn read_proc(pid: &str) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 2..].split_whitespace().collect();
    // rest[0] is field 3 (state): utime is field 14, nice field 19.
    let n = |field: usize| rest.get(field - 3).and_then(|v| v.parse::<i64>().ok());
    Some((
        n(4)? as i32,
        n(19)?,
        comm,
        (n(14)? + n(15)?) as u64,
        (n(16)? + n(17)?) as u64,
        n(15)? as u64,
    ))
}

type Proc = (i32, i64, String, u64, u64, u64);

/// Every process now: pid → (ppid, nice, comm, own ticks, reaped children's ticks).
fn processes() -> BTreeMap<i32, Proc> {
    let mut all = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(p) = read_proc(&pid.to_string()) {
                all.insert(pid, p);
            }
        }
    }
    all
}

/// This process and its live descendants.
fn own_tree(all: &BTreeMap<i32, Proc>) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut tree = vec![me];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            all.iter()
                .filter(|(_, p)| p.0 == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    tree
}

/// A snapshot at the start of a window.
#[derive(Debug)]
pub struct CpuWindow {
    at: Instant,
    stat: Stat,
    procs: BTreeMap<i32, Proc>,
    own: u64,
}

/// Ticks of this process's tree: every live member's own time and its reaped children's (a
/// child reaped during the window moves its time into its parent's second term).
fn own_ticks(all: &BTreeMap<i32, Proc>) -> u64 {
    own_tree(all)
        .iter()
        .filter_map(|pid| all.get(pid))
        .map(|p| p.3 + p.4)
        .sum()
}

impl CpuWindow {
    /// Starts a window now.
    pub fn start() -> CpuWindow {
        let procs = processes();
        CpuWindow {
            at: Instant::now(),
            stat: read_stat(),
            own: own_ticks(&procs),
            procs,
        }
    }

    /// Ends the window: what the rest of the machine did meanwhile.
    pub fn finish(&self) -> Busy {
        let procs = processes();
        let stat = read_stat();
        let total = stat.total.saturating_sub(self.stat.total).max(1) as f64;
        let own = own_ticks(&procs).saturating_sub(self.own);
        let busy = stat.busy.saturating_sub(self.stat.busy);
        let mine = own_tree(&procs);
        let mut top: Vec<(String, i32, i64, f64)> = procs
            .iter()
            .filter(|(pid, _)| !mine.contains(pid))
            .filter_map(|(pid, p)| {
                let before = self.procs.get(pid).filter(|b| b.2 == p.2)?;
                let d = p.3.saturating_sub(before.3);
                (d > 0).then(|| (p.2.clone(), *pid, p.1, d as f64 / total))
            })
            .collect();
        // The system time of niced processes alive at both ends (their user time is in the
        // `nice` column; a short-lived one's system time counts as other work).
        let niced_sys: u64 = procs
            .iter()
            .filter(|(pid, p)| p.1 > 0 && !mine.contains(pid))
            .filter_map(|(pid, p)| Some(p.5.saturating_sub(self.procs.get(pid)?.5)))
            .sum();
        top.sort_by(|a, b| b.3.total_cmp(&a.3));
        top.truncate(4);
        Busy {
            seconds: self.at.elapsed().as_secs_f64(),
            other: busy.saturating_sub(own + niced_sys) as f64 / total,
            niced: (stat.nice.saturating_sub(self.stat.nice) + niced_sys) as f64 / total,
            steal: stat.steal.saturating_sub(self.stat.steal) as f64 / total,
            own: own as f64 / total,
            top,
        }
    }
}

/// What the machine did over a window, as fractions of its CPU time (all CPUs).
#[derive(Debug, Clone)]
pub struct Busy {
    /// Length of the window.
    pub seconds: f64,
    /// Other processes at nice ≤ 0 and the kernel's own work (interrupts, softirqs: some of
    /// them this test's traffic).
    pub other: f64,
    /// Niced (nice > 0) processes: the scheduler runs them only when nothing else wants to,
    /// so they do not count against "idle".
    pub niced: f64,
    /// Taken by the hypervisor.
    pub steal: f64,
    /// This test process and its children.
    pub own: f64,
    /// The busiest other processes: (command, pid, nice, share of the machine).
    pub top: Vec<(String, i32, i64, f64)>,
}

impl Busy {
    /// Whether the machine was idle enough for a test to hold a measurement to arithmetic:
    /// other work under [`MAX_OTHER_BUSY`] and steal under [`MAX_STEAL`].
    pub fn idle_enough(&self) -> bool {
        self.other <= MAX_OTHER_BUSY && self.steal <= MAX_STEAL
    }
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "over {:.1} s other work took {:.0}% of the CPUs (idle enough: ≤ {:.0}%), steal \
             {:.0}% (≤ {:.0}%), niced work {:.0}%, this test {:.0}%",
            self.seconds,
            self.other * 100.0,
            MAX_OTHER_BUSY * 100.0,
            self.steal * 100.0,
            MAX_STEAL * 100.0,
            self.niced * 100.0,
            self.own * 100.0
        )?;
        if !self.top.is_empty() {
            let top: Vec<String> = self
                .top
                .iter()
                .map(|(c, pid, nice, s)| format!("{c} ({pid}, nice {nice}) {:.0}%", s * 100.0))
                .collect();
            write!(f, "; busiest others: {}", top.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_of_this_process_is_its_own_work_not_other_work() {
        let w = CpuWindow::start();
        let t0 = Instant::now();
        let mut x = 0u64;
        while t0.elapsed().as_millis() < 300 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = w.finish();
        // 300 ms of one CPU is 15% of two (or 30% of one): counted as this test's own.
        assert!(b.own > 0.05, "{b}");
        assert!(b.seconds >= 0.3, "{b}");
        assert!((0.0..=1.0).contains(&b.other), "{b}");
    }

    #[test]
    fn a_busy_child_process_is_this_tests_own_work() {
        let w = CpuWindow::start();
        let st = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(st.success());
        let b = w.finish();
        assert!(b.own > 0.0, "the reaped child's time is ours: {b}");
    }
}
