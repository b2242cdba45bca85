//! The datagram data path's receiver (`DgramAccount::on_datagram`, the 20-byte header a
//! peer writes: cookie, sequence number, send time) against a reference model of its
//! counts: never a panic, and every datagram is received (in order or reordered), a
//! duplicate or foreign, exactly as a set of the sequence numbers seen says.
//!
//! Input: operations of 10 bytes — a kind, then a value — that make a datagram near the
//! highest sequence number seen, behind it, at the window's edge, at an arbitrary number,
//! with the wrong cookie, or from the raw bytes; or reset the account for a new trial.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_engine::pattern::dgram::{parse, stamp, DgramAccount, WINDOW};
use std::collections::HashSet;

const COOKIE: u32 = 0x5eed_c0de;

/// What the account must say, from first principles.
#[derive(Default)]
struct Model {
    seen: HashSet<u64>,
    top: u64,
    received: u64,
    reordered: u64,
    duplicates: u64,
    foreign: u64,
    beyond_window: u64,
}

impl Model {
    /// The send time the account must return.
    fn on(&mut self, d: &[u8]) -> Option<u64> {
        // A sequence number of u64::MAX is foreign too: no sender counts that far.
        let Some((_, seq, sent)) = parse(d).filter(|h| h.0 == COOKIE && h.1 != u64::MAX) else {
            self.foreign += 1;
            return None;
        };
        if seq >= self.top {
            self.top = seq + 1;
        } else if self.top - seq > WINDOW {
            self.beyond_window += 1;
            self.reordered += 1;
            self.received += 1;
            return Some(sent);
        } else if self.seen.contains(&seq) {
            self.duplicates += 1;
            return None;
        } else {
            self.reordered += 1;
        }
        self.seen.insert(seq);
        self.received += 1;
        Some(sent)
    }
}

fuzz_target!(|data: &[u8]| {
    let mut a = DgramAccount::new(COOKIE);
    let mut m = Model::default();
    let mut calls = 0u64;
    for (n, op) in data.chunks(10).enumerate() {
        let kind = op[0];
        let mut b = [0u8; 8];
        let v = &op[1..];
        b[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
        let v = u64::from_le_bytes(b);
        let top = m.top;
        let seq = match kind % 9 {
            0..=2 => top.wrapping_add(v % 64),
            3 => top.wrapping_sub(1 + v % 64),
            4 => top.wrapping_add(WINDOW - 2 + v % 4),
            5 => top.wrapping_sub(WINDOW - 2 + v % 4),
            6 => v,
            7 => {
                // The operation's bytes themselves: short, or a cookie that may be anything.
                let sent = a.on_datagram(op, n as u64);
                assert_eq!(sent, m.on(op));
                calls += 1;
                continue;
            }
            _ => {
                a.reset();
                m = Model::default();
                calls = 0;
                continue;
            }
        };
        let cookie = if kind & 0x80 != 0 { COOKIE ^ 1 } else { COOKIE };
        let mut d = [0u8; 24];
        stamp(&mut d, cookie, seq, v.rotate_left(17));
        let arrival = (n as u64).wrapping_mul(1000).wrapping_add(v >> 40);
        let got = a.on_datagram(&d, arrival);
        assert_eq!(got, m.on(&d), "seq {seq} top {top}");
        calls += 1;
        assert_eq!(
            (
                a.received,
                a.reordered,
                a.duplicates,
                a.foreign,
                a.beyond_window
            ),
            (
                m.received,
                m.reordered,
                m.duplicates,
                m.foreign,
                m.beyond_window
            ),
            "after seq {seq} (top was {top})"
        );
    }
    assert_eq!(a.received + a.duplicates + a.foreign, calls);
    assert!(a.reordered <= a.received && a.beyond_window <= a.reordered);
    let c = a.counters(calls);
    assert_eq!(c.highest_seq, m.top);
    assert_eq!(c.lost, calls - a.received);
});
