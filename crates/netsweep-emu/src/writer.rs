//! The emulator's report file, written off the data path. The loop hands each report to a
//! writer thread and never waits for the file system: on the lab host a write and rename of
//! the report took 0.6 ms at the median and up to 195 ms (ext4, /run), and every frame due
//! meanwhile left that much late.

use crate::stats::Report;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, TryLockError};
use std::thread::JoinHandle;

/// What the loop and the writer thread share.
#[derive(Debug, Default)]
struct Slot {
    /// The newest report not yet taken by the writer.
    next: Option<Report>,
    /// Set when the loop is done: the writer writes what is left, then returns.
    stop: bool,
    /// The writer's first failure; it writes nothing after it.
    error: Option<String>,
}

/// A thread that writes the reports it is handed, newest first: a report replaced before the
/// thread took it is never written.
#[derive(Debug)]
pub struct Writer {
    shared: Arc<(Mutex<Slot>, Condvar)>,
    /// A report the loop could not hand over yet (the writer held the slot).
    pending: Option<Report>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the thread that writes to `path`. Call it before the loop's thread is pinned or
    /// made real-time: the writer inherits both, and must take neither.
    pub fn start(path: PathBuf) -> io::Result<Writer> {
        let shared = Arc::new((Mutex::new(Slot::default()), Condvar::new()));
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("emu-report".into())
            .spawn(move || write_loop(&path, &theirs))?;
        Ok(Writer {
            shared,
            pending: None,
            thread: Some(thread),
        })
    }

    /// Hands `report` to the writer without waiting: if the writer holds the slot just now,
    /// the report waits in `self` for the next [`post`](Self::post) or [`flush`](Self::flush).
    /// An error is the writer's earlier failure.
    pub fn post(&mut self, report: Report) -> io::Result<()> {
        self.pending = Some(report);
        self.flush()
    }

    /// Hands over a report that waits, if the slot is free; an error is the writer's failure.
    /// With nothing waiting it touches nothing (the loop calls it every turn).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_none() {
            return Ok(());
        }
        let (lock, ready) = &*self.shared;
        let mut slot = match lock.try_lock() {
            Ok(s) => s,
            Err(TryLockError::WouldBlock) => return Ok(()),
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        if let Some(e) = &slot.error {
            return Err(io::Error::other(e.clone()));
        }
        if let Some(r) = self.pending.take() {
            slot.next = Some(r);
            ready.notify_one();
        }
        Ok(())
    }

    /// Stops the thread once it wrote what it was handed (waiting for it); an error is its
    /// failure.
    pub fn finish(mut self) -> io::Result<()> {
        let (lock, ready) = &*self.shared;
        {
            let mut slot = lock.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(r) = self.pending.take() {
                slot.next = Some(r);
            }
            slot.stop = true;
            ready.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let slot = lock.lock().unwrap_or_else(|p| p.into_inner());
        match &slot.error {
            Some(e) => Err(io::Error::other(e.clone())),
            None => Ok(()),
        }
    }
}

/// The writer thread: waits for a report, writes it, until stopped or a write fails.
fn write_loop(path: &Path, shared: &(Mutex<Slot>, Condvar)) {
    let (lock, ready) = shared;
    loop {
        let report = {
            let mut slot = lock.lock().unwrap_or_else(|p| p.into_inner());
            while slot.next.is_none() && !slot.stop {
                slot = ready.wait(slot).unwrap_or_else(|p| p.into_inner());
            }
            match slot.next.take() {
                Some(r) => r,
                None => return,
            }
        };
        if let Err(e) = write(path, &report) {
            let mut slot = lock.lock().unwrap_or_else(|p| p.into_inner());
            slot.error = Some(format!("writing the report {}: {e}", path.display()));
            return;
        }
    }
}

/// Replaces `path` with `report` whole (netsweep-atomic, unsynced: it is rewritten four times
/// a second for readers on this host), so a reader sees a whole one.
pub fn write(path: &Path, report: &Report) -> io::Result<()> {
    let text = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
    netsweep_atomic::replace_visible(path, |f| io::Write::write_all(f, &text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(uptime_s: f64) -> Report {
        Report {
            uptime_s,
            ..Report::default()
        }
    }

    fn read(path: &Path) -> Report {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn the_last_report_handed_over_is_on_disk_after_finish() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("emu.json");
        let mut w = Writer::start(path.clone()).unwrap();
        for i in 1..=50 {
            w.post(report(f64::from(i))).unwrap();
        }
        w.finish().unwrap();
        assert_eq!(read(&path).uptime_s, 50.0);
    }

    #[test]
    fn a_post_does_not_wait_while_the_writer_holds_the_slot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("emu.json");
        let mut w = Writer::start(path.clone()).unwrap();
        let held = Arc::clone(&w.shared);
        let guard = held.0.lock().unwrap();
        // The slot is held: the post returns at once and keeps the report.
        w.post(report(7.0)).unwrap();
        assert_eq!(w.pending.as_ref().map(|r| r.uptime_s), Some(7.0));
        drop(guard);
        w.flush().unwrap();
        assert!(w.pending.is_none());
        w.finish().unwrap();
        assert_eq!(read(&path).uptime_s, 7.0);
    }

    #[test]
    fn a_failed_write_is_returned_to_the_loop() {
        let dir = tempfile::tempdir().unwrap();
        // A directory that does not exist: the write fails.
        let path = dir.path().join("gone").join("emu.json");
        let mut w = Writer::start(path).unwrap();
        w.post(report(1.0)).unwrap();
        let e = w.finish().unwrap_err();
        assert!(e.to_string().contains("writing the report"), "{e}");
    }
}
