//! The progress line on a terminal: a bar, steps done (points of a sweep, runs of a
//! scenario), time elapsed and an estimate of the time left, redrawn on stderr before each
//! step and erased before anything else is printed, so tables and logs stay clean. Never drawn
//! when stderr is not a terminal, with --quiet, or into files and pipes.

use std::io::Write;
use std::time::{Duration, Instant};

/// Width of the bar in characters.
const BAR: usize = 24;

/// The progress line's state.
#[derive(Debug)]
pub struct ProgressLine {
    enabled: bool,
    shown: bool,
    started: Instant,
    total: usize,
}

impl ProgressLine {
    /// A progress line drawn only when `enabled` (stderr is a terminal and not --quiet).
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            shown: false,
            started: Instant::now(),
            total: 0,
        }
    }

    /// The sweep starts: `total` points are planned.
    pub fn start(&mut self, total: usize) {
        self.started = Instant::now();
        self.total = total;
    }

    /// Point `index` (0-based) of size `size` bytes is being measured.
    pub fn measuring(&mut self, index: usize, size: u64) {
        let doing = format!("measuring {}", netsweep_report::units::size(size));
        self.step(index, &doing);
    }

    /// Step `index` (0-based) starts, doing `doing`.
    pub fn step(&mut self, index: usize, doing: &str) {
        if !self.enabled {
            return;
        }
        // --refine measures sizes beyond the planned sweep.
        self.total = self.total.max(index + 1);
        let text = line(index, self.total, self.started.elapsed(), doing);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{text}");
        let _ = err.flush();
        self.shown = true;
    }

    /// Erases the line (before something else is printed).
    pub fn clear(&mut self) {
        if self.shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.shown = false;
        }
    }
}

/// `[#########---------------] 42/123 · 6.1 s · ~11 s left · measuring 1.5 KiB`. The time
/// left assumes the remaining steps take as long as the mean step so far; it is marked `~`
/// because later steps (larger sizes) usually take longer.
pub fn line(done: usize, total: usize, elapsed: Duration, doing: &str) -> String {
    let filled = (done * BAR).checked_div(total).unwrap_or(0).min(BAR);
    let bar = format!("{}{}", "#".repeat(filled), "-".repeat(BAR - filled));
    let secs = elapsed.as_secs_f64();
    let left = if done == 0 {
        String::new()
    } else {
        let per_point = secs / done as f64;
        format!(" · ~{} left", seconds(per_point * (total - done) as f64))
    };
    format!("[{bar}] {done}/{total} · {}{left} · {doing}", seconds(secs))
}

/// `0.4 s`, `12 s`, `3 min 05 s`.
fn seconds(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 60.0 {
        format!("{s:.0} s")
    } else {
        let whole = s.round() as u64;
        format!("{} min {:02} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_counts_and_estimates_from_the_mean_point() {
        let l = line(0, 123, Duration::from_millis(400), "measuring 1 B");
        assert_eq!(
            l,
            "[------------------------] 0/123 · 0.4 s · measuring 1 B"
        );
        // 41 points in 20.5 s: 0.5 s each, 82 to go.
        let l = line(41, 123, Duration::from_millis(20_500), "measuring 1536 B");
        assert!(
            l.starts_with("[########----------------] 41/123 · 20 s · ~41 s left"),
            "{l}"
        );
        let l = line(100, 100, Duration::from_secs(185), "measuring 8 MiB");
        assert!(
            l.starts_with(&format!(
                "[{}] 100/100 · 3 min 05 s · ~0.0 s left",
                "#".repeat(24)
            )),
            "{l}"
        );
    }
}
