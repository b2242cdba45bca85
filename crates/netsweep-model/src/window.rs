//! When a point's timed trials ran, by the wall clock, and whether several clients' points
//! ran at once: a sum (or a fairness index) over separate clients is one window's only where
//! their windows overlap, and the experiment pages refuse it where they do not.

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// The least share of each client's window that the window common to all of them must
/// cover for a sum over the clients to count as one window's (issue 39 item 8): below it,
/// a client that ran alone for a while adds a rate the others never shared a link with.
pub const SIMULTANEOUS: f64 = 0.9;

/// From the start of a point's first timed trial to the end of its last (its counters
/// collected), wall clock, nanoseconds since the Unix epoch: warm-ups are outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeasuredWindow {
    /// When the first timed trial began.
    pub from_unix_ns: u64,
    /// When the last timed trial ended.
    pub to_unix_ns: u64,
    /// How much of it the trials themselves took (the rest went between them: counters,
    /// the next trial's set-up), ns; 0 when not recorded.
    #[serde(default)]
    pub trials_ns: u64,
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl MeasuredWindow {
    /// The window between two wall-clock readings (a reversed pair, the clock stepped back
    /// between them, becomes an empty window at the first), its trials `trials_ns` of it.
    pub fn between(from: SystemTime, to: SystemTime, trials_ns: u64) -> Self {
        let from_unix_ns = unix_ns(from);
        Self {
            from_unix_ns,
            to_unix_ns: unix_ns(to).max(from_unix_ns),
            trials_ns,
        }
    }

    /// The share of the window its trials took (1 when not recorded): a rate over the
    /// trials times this is the rate over the window, the gaps between trials idle — what a
    /// client added to a link it shared with others that were not in their gaps.
    pub fn duty(&self) -> f64 {
        match (self.trials_ns, self.len_ns()) {
            (0, _) | (_, 0) => 1.0,
            (t, n) => (t as f64 / n as f64).min(1.0),
        }
    }

    /// Its length, nanoseconds.
    pub fn len_ns(&self) -> u64 {
        self.to_unix_ns.saturating_sub(self.from_unix_ns)
    }
}

/// How far `windows` ran at once: the smallest share of any one window that the part common
/// to all of them covers — 1 when they coincide, 0 when two of them do not overlap at all.
/// `None` for no windows.
pub fn simultaneity(windows: &[MeasuredWindow]) -> Option<f64> {
    let from = windows.iter().map(|w| w.from_unix_ns).max()?;
    let to = windows.iter().map(|w| w.to_unix_ns).min()?;
    let common = to.saturating_sub(from);
    windows
        .iter()
        .map(|w| match w.len_ns() {
            // An instant inside the common part is wholly covered.
            0 if from <= to => 1.0,
            0 => 0.0,
            n => common as f64 / n as f64,
        })
        .min_by(f64::total_cmp)
}

/// Whether the clients' windows overlap enough for a sum over them, and if not, why, in
/// words a page shows (the clients' windows, relative to the earliest start).
pub fn together(windows: &[Option<MeasuredWindow>]) -> Result<(), String> {
    if windows.len() < 2 {
        return Ok(());
    }
    let Some(ws) = windows.iter().copied().collect::<Option<Vec<_>>>() else {
        return Err(
            "a client's results record no measurement window (a netsweep older than the \
             window): re-run to sum over the clients"
                .into(),
        );
    };
    let share = simultaneity(&ws).unwrap_or(0.0);
    if share >= SIMULTANEOUS {
        return Ok(());
    }
    let t0 = ws.iter().map(|w| w.from_unix_ns).min().unwrap_or(0);
    let spans: Vec<String> = ws
        .iter()
        .map(|w| {
            format!(
                "{:.2}–{:.2} s",
                (w.from_unix_ns - t0) as f64 / 1e9,
                (w.to_unix_ns - t0) as f64 / 1e9
            )
        })
        .collect();
    Err(format!(
        "the clients did not measure at once: their common window covers only {:.0}% of one \
         client's (at least {:.0}% needed), so a sum over them is not one window's (windows: {})",
        share * 100.0,
        SIMULTANEOUS * 100.0,
        spans.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(from: u64, to: u64) -> MeasuredWindow {
        MeasuredWindow {
            from_unix_ns: from,
            to_unix_ns: to,
            trials_ns: 0,
        }
    }

    #[test]
    fn windows_that_coincide_are_simultaneous_and_disjoint_ones_are_not() {
        assert_eq!(simultaneity(&[w(10, 20), w(10, 20)]), Some(1.0));
        assert_eq!(simultaneity(&[w(0, 10), w(10, 20)]), Some(0.0));
        assert_eq!(simultaneity(&[w(0, 10), w(20, 30)]), Some(0.0));
        // 100 ns each, offset by 5: the common 95 ns is 95% of either.
        let s = simultaneity(&[w(0, 100), w(5, 105)]).unwrap();
        assert!((s - 0.95).abs() < 1e-12, "{s}");
        // A short client inside a long one: the long one's share is what counts.
        let s = simultaneity(&[w(0, 1000), w(400, 500)]).unwrap();
        assert!((s - 0.1).abs() < 1e-12, "{s}");
        assert_eq!(simultaneity(&[]), None);
    }

    #[test]
    fn together_refuses_a_sum_over_clients_that_ran_one_after_another() {
        assert!(together(&[Some(w(0, 100))]).is_ok());
        assert!(together(&[]).is_ok());
        assert!(together(&[
            Some(w(0, 1_000_000_000)),
            Some(w(50_000_000, 1_020_000_000))
        ])
        .is_ok());
        let e = together(&[
            Some(w(0, 1_000_000_000)),
            Some(w(500_000_000, 1_500_000_000)),
        ])
        .unwrap_err();
        assert!(e.contains("only 50%"), "{e}");
        assert!(e.contains("0.00–1.00 s, 0.50–1.50 s"), "{e}");
        let e = together(&[Some(w(0, 10)), None]).unwrap_err();
        assert!(e.contains("no measurement window"), "{e}");
    }

    #[test]
    fn a_reversed_clock_reading_is_an_empty_window() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(5);
        let back = UNIX_EPOCH + std::time::Duration::from_secs(4);
        assert_eq!(MeasuredWindow::between(t, back, 0).len_ns(), 0);
        let w = MeasuredWindow::between(back, t, 900_000_000);
        assert_eq!(w.len_ns(), 1_000_000_000);
        assert!((w.duty() - 0.9).abs() < 1e-12);
        assert_eq!(MeasuredWindow::between(back, t, 0).duty(), 1.0);
        assert_eq!(MeasuredWindow::between(back, t, 2_000_000_000).duty(), 1.0);
    }
}
