//! The datagram sequence header and the receiver's exact loss/reorder/duplicate/jitter accounting.
//!
//! Header (little-endian, [`DGRAM_HEADER`](netsweep_model::spec::DGRAM_HEADER) = 20 bytes):
//! cookie low 32 bits, 64-bit sequence number, 64-bit send timestamp in ns.

use netsweep_proto::messages::DatagramCounters;
use std::time::Duration;

/// Bytes of the header (the model's [`DGRAM_HEADER`](netsweep_model::spec::DGRAM_HEADER), the
/// size every datagram pattern and the rate pattern's stamp reserve).
pub const HEADER: usize = netsweep_model::spec::DGRAM_HEADER as usize;

/// How long a datagram receiver waits, once the sender has ended, for stragglers.
pub const DGRAM_QUIET: Duration = Duration::from_millis(60);

/// Writes the header into the first [`HEADER`] bytes of `buf`.
#[inline]
pub fn stamp(buf: &mut [u8], cookie: u32, seq: u64, sent_ns: u64) {
    buf[0..4].copy_from_slice(&cookie.to_le_bytes());
    buf[4..12].copy_from_slice(&seq.to_le_bytes());
    buf[12..HEADER].copy_from_slice(&sent_ns.to_le_bytes());
}

/// Reads (cookie, seq, sent_ns) from a datagram, or `None` when it is too short.
#[inline]
pub fn parse(buf: &[u8]) -> Option<(u32, u64, u64)> {
    if buf.len() < HEADER {
        return None;
    }
    let c = u32::from_le_bytes(buf[0..4].try_into().ok()?);
    let s = u64::from_le_bytes(buf[4..12].try_into().ok()?);
    let t = u64::from_le_bytes(buf[12..HEADER].try_into().ok()?);
    Some((c, s, t))
}

/// Sequence numbers remembered for duplicate detection (a sliding window of bits).
pub const WINDOW: u64 = 1 << 20;

/// Receiver-side accounting, allocated once per session and reset per trial.
#[derive(Debug)]
pub struct DgramAccount {
    bits: Vec<u64>,
    /// Highest sequence number seen plus one.
    top: u64,
    /// Distinct datagrams of this trial received.
    pub received: u64,
    /// Datagrams that arrived after a later one.
    pub reordered: u64,
    /// Datagrams received more than once (counted once in `received`).
    pub duplicates: u64,
    /// Datagrams without this trial's cookie (too short, or from another trial or sender),
    /// or numbered `u64::MAX` (no sender counts that far; the highest seen plus one must fit).
    pub foreign: u64,
    /// Arrivals older than the window (counted as received: they cannot be checked).
    pub beyond_window: u64,
    jitter: f64,
    last_transit: Option<i128>,
    cookie: u32,
}

impl DgramAccount {
    /// An empty account expecting `cookie`.
    pub fn new(cookie: u32) -> Self {
        Self {
            bits: vec![0; (WINDOW / 64) as usize],
            top: 0,
            received: 0,
            reordered: 0,
            duplicates: 0,
            foreign: 0,
            beyond_window: 0,
            jitter: 0.0,
            last_transit: None,
            cookie,
        }
    }

    /// Sets the cookie the next datagrams must carry.
    pub fn set_cookie(&mut self, cookie: u32) {
        self.cookie = cookie;
    }

    /// Readies the account for trial number `trial` of the session with `cookie`: that
    /// trial's cookie ([`trial_cookie`]), nothing counted.
    pub fn arm(&mut self, cookie: u64, trial: u64) {
        self.set_cookie(trial_cookie(cookie, trial));
        self.reset();
    }

    /// Forgets everything for a new trial (sequence numbers restart at 0).
    pub fn reset(&mut self) {
        self.bits.iter_mut().for_each(|w| *w = 0);
        self.top = 0;
        self.received = 0;
        self.reordered = 0;
        self.duplicates = 0;
        self.foreign = 0;
        self.beyond_window = 0;
        self.jitter = 0.0;
        self.last_transit = None;
    }

    #[inline]
    fn bit(&self, seq: u64) -> bool {
        let i = seq % WINDOW;
        self.bits[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    #[inline]
    fn set(&mut self, seq: u64, on: bool) {
        let i = seq % WINDOW;
        let w = &mut self.bits[(i / 64) as usize];
        if on {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }

    /// Clears the bits of the sequence numbers `from..to` (fewer than [`WINDOW`]) a whole
    /// word at a time: a jump just short of the window costs a memset of at most 128 KiB,
    /// not a million single-bit writes per datagram (the dgram_account fuzz target crawled
    /// at 123 inputs per second on them).
    fn clear(&mut self, from: u64, to: u64) {
        let a = from % WINDOW;
        let b = a + (to - from);
        if b <= WINDOW {
            clear_bits(&mut self.bits, a, b);
        } else {
            clear_bits(&mut self.bits, a, WINDOW);
            clear_bits(&mut self.bits, 0, b - WINDOW);
        }
    }

    /// Accounts one received datagram whose payload is `buf`, arrived at `arrival_ns`;
    /// returns its send time (its header's) when it counts as received, `None` for a
    /// duplicate or a foreign datagram.
    #[inline]
    pub fn on_datagram(&mut self, buf: &[u8], arrival_ns: u64) -> Option<u64> {
        let Some((cookie, seq, sent_ns)) = parse(buf) else {
            self.foreign += 1;
            return None;
        };
        if cookie != self.cookie || seq == u64::MAX {
            self.foreign += 1;
            return None;
        }
        if seq >= self.top {
            if seq - self.top >= WINDOW {
                self.bits.iter_mut().for_each(|w| *w = 0);
            } else {
                self.clear(self.top, seq);
            }
            self.set(seq, true);
            self.top = seq + 1;
        } else if self.top - seq > WINDOW {
            self.beyond_window += 1;
            self.reordered += 1;
        } else if self.bit(seq) {
            self.duplicates += 1;
            return None;
        } else {
            self.set(seq, true);
            self.reordered += 1;
        }
        self.received += 1;
        // RFC 3550 §6.4.1: J += (|D| − J) / 16 over consecutive arrivals.
        let transit = arrival_ns as i128 - sent_ns as i128;
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter += (d - self.jitter) / 16.0;
        }
        self.last_transit = Some(transit);
        Some(sent_ns)
    }

    /// The counters, with loss computed against the sender's count `sent`.
    pub fn counters(&self, sent: u64) -> DatagramCounters {
        DatagramCounters {
            received: self.received,
            lost: sent.saturating_sub(self.received),
            reordered: self.reordered,
            duplicates: self.duplicates,
            foreign: self.foreign,
            jitter_ns: self.jitter.round() as u64,
            highest_seq: self.top,
        }
    }
}

/// Clears bits `a..b` (`b` ≤ 64 × `bits.len()`).
fn clear_bits(bits: &mut [u64], a: u64, b: u64) {
    if a >= b {
        return;
    }
    let (wa, wb) = ((a / 64) as usize, ((b - 1) / 64) as usize);
    let (lo, hi) = (a % 64, (b - 1) % 64);
    if wa == wb {
        bits[wa] &= !((!0u64 << lo) & (!0u64 >> (63 - hi)));
        return;
    }
    bits[wa] &= !(!0u64 << lo);
    bits[wa + 1..wb].fill(0);
    bits[wb] &= !(!0u64 >> (63 - hi));
}

/// The 32-bit cookie datagrams of one trial carry: stale datagrams of an earlier trial
/// count as foreign, never as received.
pub fn trial_cookie(cookie: u64, trial: u64) -> u32 {
    (cookie as u32).wrapping_add((trial as u32).wrapping_mul(0x9E37_79B9))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgram(cookie: u32, seq: u64, ts: u64) -> Vec<u8> {
        let mut b = vec![0u8; 32];
        stamp(&mut b, cookie, seq, ts);
        b
    }

    #[test]
    fn header_round_trip() {
        let b = dgram(7, 1 << 40, 12345);
        assert_eq!(parse(&b), Some((7, 1 << 40, 12345)));
        assert_eq!(parse(&b[..19]), None);
    }

    #[test]
    fn counts_loss_reorder_duplicates_exactly() {
        let mut a = DgramAccount::new(9);
        // Sent 0..10; 3 and 7 lost; 5 arrives after 6; 2 duplicated; one foreign; one short.
        // Each datagram's send time comes back once, the duplicate's and the foreign not.
        let mut times = vec![];
        for s in [0u64, 1, 2, 2, 4, 6, 5, 8, 9] {
            times.extend(a.on_datagram(&dgram(9, s, s * 1000), s * 1000 + 50));
        }
        assert_eq!(times, [0, 1000, 2000, 4000, 6000, 5000, 8000, 9000]);
        assert_eq!(a.on_datagram(&dgram(8, 3, 0), 0), None);
        assert_eq!(a.on_datagram(&[1, 2, 3], 0), None);
        let c = a.counters(10);
        assert_eq!(c.received, 8);
        assert_eq!(c.lost, 2);
        assert_eq!(c.reordered, 1);
        assert_eq!(c.duplicates, 1);
        assert_eq!(c.foreign, 2);
        assert_eq!(c.highest_seq, 10);
        // Constant transit time: no jitter.
        assert_eq!(c.jitter_ns, 0);
    }

    #[test]
    fn jitter_follows_rfc3550() {
        let mut a = DgramAccount::new(1);
        a.on_datagram(&dgram(1, 0, 0), 100);
        a.on_datagram(&dgram(1, 1, 1000), 1260); // transit 260 vs 100: |D| = 160
        assert_eq!(a.counters(2).jitter_ns, 10); // 160/16
    }

    #[test]
    fn the_last_sequence_number_is_foreign_not_an_overflow() {
        // Found by the dgram_account fuzz target: a datagram numbered u64::MAX made
        // `top = seq + 1` overflow (a panic in debug; in release top wrapped to 0 and every
        // later datagram looked new). No sender counts that far: it is foreign.
        let mut a = DgramAccount::new(1);
        assert_eq!(a.on_datagram(&dgram(1, u64::MAX, 5), 0), None);
        assert_eq!(a.on_datagram(&dgram(1, u64::MAX - 1, 5), 0), Some(5));
        assert_eq!(a.on_datagram(&dgram(1, u64::MAX, 5), 0), None);
        assert_eq!(a.on_datagram(&dgram(1, u64::MAX - 1, 5), 0), None);
        let c = a.counters(2);
        assert_eq!((c.received, c.duplicates, c.foreign), (1, 1, 2));
        assert_eq!(c.highest_seq, u64::MAX);
    }

    #[test]
    fn skipped_numbers_are_cleared_word_by_word_as_bit_by_bit() {
        // Ranges inside a word, across words, up to the window's end and across it.
        for (from, len) in [(3, 5), (60, 10), (0, 64), (64, 128), (WINDOW - 70, 100)] {
            for base in [0, 7 * WINDOW] {
                let mut a = DgramAccount::new(1);
                a.bits.iter_mut().for_each(|w| *w = !0);
                let mut b = DgramAccount::new(1);
                b.bits.iter_mut().for_each(|w| *w = !0);
                a.clear(base + from, base + from + len);
                for s in base + from..base + from + len {
                    b.set(s, false);
                }
                assert!(a.bits == b.bits, "{from}+{len}");
            }
        }
    }

    #[test]
    fn window_wrap_and_reset() {
        let mut a = DgramAccount::new(1);
        a.on_datagram(&dgram(1, 0, 0), 0);
        a.on_datagram(&dgram(1, WINDOW * 3, 0), 0);
        a.on_datagram(&dgram(1, 0, 0), 0); // far older than the window
        assert_eq!(a.beyond_window, 1);
        a.reset();
        assert_eq!(a.counters(0).received, 0);
        a.on_datagram(&dgram(1, 0, 0), 0);
        a.on_datagram(&dgram(1, 0, 0), 0);
        assert_eq!(a.duplicates, 1);
    }
}
