//! A lab's path emulators seen from a run: their settings in words (`lab up` prints them) and
//! a run's window on their counters — what crossed each one while the run's clients ran, how
//! late its releases were, and the warning of a late one — recorded with the run's results.

use super::{EmulatorLayout, Engine};
use netsweep_emu::config::{DirectionSpec, JitterDist, Loss, Qdisc};

/// One direction's settings in words: "delay 10 ms, jitter ±2 ms normal (in order), …".
pub fn describe_direction(d: &DirectionSpec) -> String {
    if d.is_passthrough() && d.qdisc == Qdisc::Fifo {
        return "passes unchanged".into();
    }
    let only = match d.protocol {
        None => "",
        Some(17) => " (udp only)",
        Some(6) => " (tcp only)",
        Some(_) => " (icmp only)",
    };
    let ms = |ns: u64| format!("{} ms", ns as f64 / 1e6);
    let pct = |p: f64| format!("{}%", (p * 1e6).round() / 1e4);
    let mut w = vec![format!("delay {}", ms(d.delay_ns))];
    if let Some(j) = d.jitter {
        w.push(format!(
            "jitter {} {} ({})",
            ms(j.ns),
            match j.dist {
                JitterDist::Uniform => "uniform (±)",
                JitterDist::Normal => "normal (σ)",
                JitterDist::Paretonormal => "pareto-normal (σ)",
            },
            if j.reorder { "may reorder" } else { "in order" }
        ));
    }
    match d.loss {
        Loss::None => {}
        Loss::Random { p } => w.push(format!("loss {}", pct(p))),
        Loss::Gilbert { p, r, .. } => w.push(format!(
            "loss {} in bursts of {:.1} frames (Gilbert-Elliott)",
            pct(p / (p + r)),
            1.0 / r
        )),
    }
    if d.duplicate > 0.0 {
        w.push(format!("duplicate {}", pct(d.duplicate)));
    }
    if d.reorder > 0.0 {
        w.push(format!("reorder {} (skip the delay)", pct(d.reorder)));
    }
    if let Some(r) = d.rate_bps {
        w.push(format!(
            "rate {} Mbit/s, queue {} B{} drop-tail{}{}",
            r as f64 / 1e6,
            d.queue_limit_bytes(),
            d.queue_frames
                .map_or(String::new(), |n| format!(" / {n} frames")),
            match d.qdisc {
                Qdisc::Fifo => String::new(),
                Qdisc::Prio { bands } =>
                    format!(", strict priority over {bands} bands by DSCP class"),
            },
            match d.aqm {
                netsweep_emu::Aqm::None => String::new(),
                netsweep_emu::Aqm::Codel {
                    target_ns,
                    interval_ns,
                } => format!(
                    ", CoDel (target {} ms, interval {} ms)",
                    target_ns as f64 / 1e6,
                    interval_ns as f64 / 1e6
                ),
                netsweep_emu::Aqm::FqCodel {
                    target_ns,
                    interval_ns,
                    flows,
                    quantum,
                } => format!(
                    ", FQ-CoDel ({flows} flow queues, quantum {quantum} B, target {} ms, \
                     interval {} ms)",
                    target_ns as f64 / 1e6,
                    interval_ns as f64 / 1e6
                ),
            }
        ));
    }
    format!("{}{only}", w.join(", "))
}

impl EmulatorLayout {
    /// The emulator in words, a line per direction (`lab up` and `lab show` print it).
    pub fn describe(&self, a: &str, b: &str) -> Vec<String> {
        let head = match self.engine {
            Engine::Netem => "netem on the hosts' egress".to_string(),
            _ => format!(
                "netsweep's emulator in {} (ports {}, {})",
                self.netns, self.ports[0], self.ports[1]
            ),
        };
        let mut v = vec![format!("emulated by {head}")];
        for (i, (from, to)) in [(a, b), (b, a)].into_iter().enumerate() {
            v.push(format!(
                "{from} -> {to}: {}",
                describe_direction(&self.config.directions[i])
            ));
        }
        v
    }
}

/// A run's window on a lab's emulators: their counters when it started.
#[derive(Debug, Default)]
pub struct Window {
    before: Vec<(EmulatorLayout, netsweep_emu::Report, Option<CpuMark>)>,
}

/// A process's CPU time (ns) and when it was read.
type CpuMark = (u64, std::time::Instant);

/// The CPU time (ns) the threads of process `pid` have run, from each thread's
/// `/proc/<pid>/task/<tid>/schedstat` (its first field: nanoseconds on a CPU).
fn cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    for t in tasks.flatten() {
        let text = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// The share of one CPU process `pid` used since `mark` (`None` when either read failed).
fn utilisation(pid: u32, mark: Option<CpuMark>) -> Option<f64> {
    let (c0, t0) = mark?;
    let wall = t0.elapsed().as_nanos() as f64;
    Some(cpu_ns(pid)?.saturating_sub(c0) as f64 / wall.max(1.0))
}

/// The lateness that makes a run's emulator "late": a tenth of the direction's delay, or
/// 100 µs where the delay is under a millisecond.
pub fn late_limit_ns(d: &DirectionSpec) -> u64 {
    if d.delay_ns < 1_000_000 {
        100_000
    } else {
        d.delay_ns / 10
    }
}

impl Window {
    /// Opens a window on every netsweep emulator of `layout`: a new lateness window in each
    /// (SIGUSR1, waited for — at most a second), and their counters now.
    pub fn open(layout: &crate::layout::Layout) -> Window {
        let mut before = Vec::new();
        for em in layout.links.iter().filter_map(|l| l.emulator.as_ref()) {
            if em.engine != Engine::Netsweep {
                continue;
            }
            let Ok(r0) = em.report() else { continue };
            // SAFETY: kill(2) with a pid the emulator reported and a plain signal number.
            unsafe { libc::kill(r0.pid as libc::pid_t, libc::SIGUSR1) };
            let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
            let mut r = r0.clone();
            while r.window_start_s <= r0.window_start_s && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(5));
                r = em.report().unwrap_or_else(|_| r.clone());
            }
            let mark = cpu_ns(r.pid).map(|c| (c, std::time::Instant::now()));
            before.push((em.clone(), r, mark));
        }
        Window { before }
    }

    /// Closes the window: per emulator and direction, the counters since it opened and the
    /// lateness within it (JSON, for the run's results), and a warning per direction that
    /// was late by more than [`late_limit_ns`].
    pub fn close(&self) -> (serde_json::Value, Vec<String>) {
        let mut links = Vec::new();
        let mut warnings = Vec::new();
        for (em, before, mark) in &self.before {
            let Ok(after) = fresh_report(em) else {
                warnings.push(format!(
                    "the path emulator of link {} gave no report at the end of the run",
                    em.config.link
                ));
                continue;
            };
            // Time its real-time share was spent, within the window.
            let ordinary_s = (after.ordinary_s - before.ordinary_s).max(0.0);
            let mut dirs = Vec::new();
            for (i, d) in after.directions.iter().enumerate() {
                let spec = &em.config.directions[i.min(1)];
                let counters = before
                    .directions
                    .get(i)
                    .map_or(d.counters, |b| d.counters.since(&b.counters));
                let limit = late_limit_ns(spec);
                let late = d.lateness.p99_ns > limit && !spec.is_passthrough();
                if late {
                    warnings.push(format!(
                        "the path emulator of link {} ({}) was late: {} µs past its schedule \
                         (limit {:.0} µs, a tenth of its delay): what crossed it was delayed \
                         more than asked; {}",
                        em.config.link,
                        d.direction,
                        tail(&d.lateness),
                        limit as f64 / 1e3,
                        remedy(ordinary_s)
                    ));
                }
                dirs.push(serde_json::json!({
                    "direction": d.direction,
                    "settings": describe_direction(spec),
                    "counters": counters,
                    "lateness": d.lateness,
                    "late": late,
                }));
            }
            links.push(serde_json::json!({
                "link": em.config.link,
                "engine": "netsweep",
                "realtime": after.realtime,
                // The share of one CPU the emulator used while the window was open.
                "cpu_utilisation": utilisation(after.pid, *mark),
                // How long the window was open: its counters' time base.
                "window_s": mark.map(|(_, at)| at.elapsed().as_secs_f64()),
                // Seconds it ran as an ordinary thread, its real-time share spent.
                "ordinary_s": ordinary_s,
                "directions": dirs,
            }));
        }
        (serde_json::Value::Array(links), warnings)
    }

    /// Whether there is anything to record.
    pub fn is_empty(&self) -> bool {
        self.before.is_empty()
    }
}

/// A lateness's tail in words: its p99, or, over fewer than 100 releases, what that p99 is —
/// the worst of them.
fn tail(l: &netsweep_emu::stats::Lateness) -> String {
    let us = l.p99_ns as f64 / 1e3;
    if l.count < 100 {
        format!("the worst of its {} releases {us:.0}", l.count)
    } else {
        format!("p99 {us:.0}")
    }
}

/// What to do about a late emulator: a CPU of its own, or, when it spent its real-time share
/// (busy most of a second: a flood past its rate), less offered load.
fn remedy(ordinary_s: f64) -> String {
    if ordinary_s > 0.0 {
        format!(
            "it was busy past its real-time share and ran as an ordinary thread for {:.0} ms: \
             offer it a load it can carry (`-p rate --rate`), not a flood, or give it a CPU of its own \
             (emulate.cpu)",
            ordinary_s * 1e3
        )
    } else {
        "give it a CPU of its own (emulate.cpu)".into()
    }
}

/// A report the emulator wrote after this call (it rewrites it every 250 ms), so that it
/// counts everything up to now; the latest one after a second at most.
fn fresh_report(em: &EmulatorLayout) -> Result<netsweep_emu::Report, String> {
    let first = em.report()?;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut r = first.clone();
    while r.uptime_s < first.uptime_s + 0.26 && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
        r = em.report().unwrap_or(r);
    }
    Ok(r)
}

/// Adds a window's record to a results file: under `lab.emulators` (the free-form lab
/// description a run records) and its warnings beside the run's own.
pub fn record(
    results: &std::path::Path,
    emulators: &serde_json::Value,
    warnings: &[String],
) -> std::io::Result<()> {
    let text = std::fs::read_to_string(results)?;
    let mut v: serde_json::Value = serde_json::from_str(&text).map_err(std::io::Error::other)?;
    let Some(o) = v.as_object_mut() else {
        return Ok(());
    };
    let lab = o.entry("lab").or_insert_with(|| serde_json::json!({}));
    if let Some(l) = lab.as_object_mut() {
        l.insert("emulators".into(), emulators.clone());
    }
    if !warnings.is_empty() {
        let w = o.entry("warnings").or_insert_with(|| serde_json::json!([]));
        if let Some(a) = w.as_array_mut() {
            a.extend(
                warnings
                    .iter()
                    .map(|s| serde_json::Value::String(s.clone())),
            );
        }
    }
    // Replaced whole (netsweep-atomic): the results file is never found half-written.
    let text = serde_json::to_vec_pretty(&v).map_err(std::io::Error::other)?;
    netsweep_atomic::replace_with(results, |f| std::io::Write::write_all(f, &text))
}

#[cfg(test)]
mod tests {
    use super::{remedy, tail};
    use netsweep_emu::stats::Lateness;

    #[test]
    fn a_tail_over_few_releases_is_called_their_worst() {
        let few = Lateness {
            count: 27,
            p50_ns: 4_000,
            p99_ns: 716_000,
            max_ns: 716_000,
        };
        assert_eq!(tail(&few), "the worst of its 27 releases 716");
        let many = Lateness {
            count: 5_000,
            ..few
        };
        assert_eq!(tail(&many), "p99 716");
    }

    #[test]
    fn a_spent_real_time_share_changes_the_remedy() {
        assert_eq!(remedy(0.0), "give it a CPU of its own (emulate.cpu)");
        assert!(
            remedy(0.15).contains("ordinary thread for 150 ms"),
            "{}",
            remedy(0.15)
        );
    }
}
