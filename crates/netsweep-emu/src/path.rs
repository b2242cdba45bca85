//! One direction of an emulated link, sans IO: frames arrive with a time, and the path says
//! when each leaves — or that it never will, and why. Its clock is whatever the caller gives
//! it (a mock one in the tests), so every behaviour is checked exactly.
//!
//! A frame's way through: the loss model (random, or Gilbert–Elliott's two states) and the
//! duplication model on arrival; then the bottleneck, when the direction has a rate — a queue
//! with a drop-tail limit in bytes and frames, served FIFO or by strict priority over bands,
//! one frame on the wire at a time for its length at the rate; then the delay line — the fixed
//! delay plus a jitter draw, releases kept in order unless reordering is allowed, and a
//! `reorder` share of frames skipping the delay (overtaking the others).

use crate::config::{DirectionSpec, Loss, Qdisc};
use crate::rng::Rng;
use crate::stats::{Counters, LatenessHistogram};
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

/// A frame waiting at the bottleneck.
#[derive(Debug)]
struct Queued<B> {
    frame: B,
    len: u32,
    arrived: u64,
    seq: u64,
}

/// A frame in the delay line, due at `due`.
#[derive(Debug)]
struct Due<B> {
    due: u64,
    seq: u64,
    len: u32,
    frame: B,
}

impl<B> PartialEq for Due<B> {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.seq) == (o.due, o.seq)
    }
}
impl<B> Eq for Due<B> {}
impl<B> PartialOrd for Due<B> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<B> Ord for Due<B> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.due, self.seq).cmp(&(o.due, o.seq))
    }
}

/// A frame the path lets go: its payload, length and when it was due.
#[derive(Debug, PartialEq, Eq)]
pub struct Release<B> {
    /// The frame.
    pub frame: B,
    /// Its length, bytes.
    pub len: u32,
    /// When its schedule said it should leave.
    pub due: u64,
}

/// One direction of an emulated link. `B` is the caller's handle on a frame's bytes.
#[derive(Debug)]
pub struct Path<B> {
    spec: DirectionSpec,
    rng: Rng,
    /// Gilbert–Elliott: in the bad state.
    bad: bool,
    /// The bottleneck's queues, highest band last (one for FIFO).
    bands: Vec<VecDeque<Queued<B>>>,
    queued_bytes: u64,
    queued_frames: u32,
    queue_limit_bytes: u64,
    /// When the bottleneck's wire is free again.
    busy_until: u64,
    line: BinaryHeap<Reverse<Due<B>>>,
    /// The latest due time given to a frame that must not be overtaken.
    last_due: u64,
    next_seq: u64,
    highest_released: Option<u64>,
    counters: Counters,
    lateness: LatenessHistogram,
    /// Frames dropped since the caller last took them (their buffers to give back).
    freed: Vec<B>,
    /// Frames passing unemulated, to release at the next poll.
    passing: Vec<(B, u32)>,
    /// Numbers of duplicated frames with both copies in flight: whether one was released.
    copies: std::collections::HashMap<u64, bool>,
}

impl<B> Path<B> {
    /// A path doing what `spec` says, its random draws from `seed`.
    pub fn new(spec: DirectionSpec, seed: u64) -> Self {
        let bands = match spec.qdisc {
            Qdisc::Fifo => 1,
            Qdisc::Prio { bands } => usize::from(bands.clamp(2, 8)),
        };
        Self {
            queue_limit_bytes: spec.queue_limit_bytes(),
            spec,
            rng: Rng::new(seed),
            bad: false,
            bands: (0..bands).map(|_| VecDeque::new()).collect(),
            queued_bytes: 0,
            queued_frames: 0,
            busy_until: 0,
            line: BinaryHeap::new(),
            last_due: 0,
            next_seq: 0,
            highest_released: None,
            counters: Counters::default(),
            lateness: LatenessHistogram::default(),
            freed: Vec::new(),
            passing: Vec::new(),
            copies: std::collections::HashMap::new(),
        }
    }

    /// The number of bands frames are classified into (1 for FIFO).
    pub fn bands(&self) -> u8 {
        self.bands.len() as u8
    }

    /// A frame of `len` bytes in band `band` arrived at `now`. `copy` makes a second
    /// buffer of it when the duplication model asks for one (`None`: no buffer left).
    pub fn arrive(
        &mut self,
        now: u64,
        frame: B,
        len: u32,
        band: u8,
        mut copy: impl FnMut(&B) -> Option<B>,
    ) {
        self.advance(now);
        self.counters.received += 1;
        self.counters.received_bytes += u64::from(len);
        if self.lost() {
            self.counters.dropped_loss += 1;
            self.freed.push(frame);
            return;
        }
        let dup = if self.rng.chance(self.spec.duplicate) {
            match copy(&frame) {
                Some(c) => {
                    self.counters.duplicated += 1;
                    Some(c)
                }
                None => {
                    self.counters.dropped_no_buffer += 1;
                    None
                }
            }
        } else {
            None
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.enter(now, frame, len, band, seq);
        if let Some(c) = dup {
            // The copy is the same frame to the receiver: the same number, and a reordering
            // is counted only for whichever of the two is released first.
            self.copies.insert(seq, false);
            self.enter(now, c, len, band, seq);
        }
    }

    /// Whether a frame of IP protocol `proto` (`None`: not IP) is emulated, or passes at once.
    pub fn emulates(&self, proto: Option<u8>) -> bool {
        self.spec.protocol.is_none_or(|p| proto == Some(p))
    }

    /// A frame that is not emulated (see [`emulates`](Self::emulates)): released at the next
    /// poll, in arrival order, counted apart.
    pub fn bypass(&mut self, frame: B, len: u32) {
        self.counters.bypassed += 1;
        self.passing.push((frame, len));
    }

    /// Counts a frame the caller dropped before it could arrive (no buffer to hold it).
    pub fn no_buffer(&mut self, len: u32) {
        self.counters.received += 1;
        self.counters.received_bytes += u64::from(len);
        self.counters.dropped_no_buffer += 1;
    }

    /// Counts `n` frames the kernel dropped before the emulator could read them.
    pub fn kernel_drops(&mut self, n: u64) {
        self.counters.received += n;
        self.counters.dropped_kernel += n;
    }

    /// Counts a released frame the egress refused.
    pub fn send_failed(&mut self) {
        self.counters.dropped_send += 1;
    }

    fn lost(&mut self) -> bool {
        match self.spec.loss {
            Loss::None => false,
            Loss::Random { p } => self.rng.chance(p),
            Loss::Gilbert { p, r, h, k } => {
                self.bad = if self.bad {
                    !self.rng.chance(r)
                } else {
                    self.rng.chance(p)
                };
                if self.bad {
                    !self.rng.chance(h)
                } else {
                    self.rng.chance(k)
                }
            }
        }
    }

    /// Takes a frame past the loss model: into the bottleneck's queue, or straight to the
    /// delay line without a rate.
    fn enter(&mut self, now: u64, frame: B, len: u32, band: u8, seq: u64) {
        if self.spec.rate_bps.is_none() {
            self.schedule(now, frame, len, seq);
            return;
        }
        let over_bytes = self.queued_bytes + u64::from(len) > self.queue_limit_bytes;
        let over_frames = self
            .spec
            .queue_frames
            .is_some_and(|n| self.queued_frames >= n);
        if over_bytes || over_frames {
            self.counters.dropped_queue += 1;
            self.freed.push(frame);
            // One copy of a duplicated pair left: the other is a frame like any.
            self.copies.remove(&seq);
            return;
        }
        let b = usize::from(band).min(self.bands.len() - 1);
        self.bands[b].push_back(Queued {
            frame,
            len,
            arrived: now,
            seq,
        });
        self.queued_bytes += u64::from(len);
        self.queued_frames += 1;
        self.advance(now);
    }

    /// The time `len` bytes take on the bottleneck's wire, ns.
    fn wire_ns(&self, len: u32) -> u64 {
        self.spec.rate_bps.map_or(0, |r| {
            (u128::from(len) * 8 * 1_000_000_000 / u128::from(r)) as u64
        })
    }

    /// Moves every frame whose turn on the wire starts by `now` from the queue into the delay
    /// line: the wire takes the next frame when it is free, the highest band's first among
    /// those that had arrived by then.
    fn advance(&mut self, now: u64) {
        loop {
            let Some(earliest) = self
                .bands
                .iter()
                .filter_map(|q| q.front())
                .map(|f| f.arrived)
                .min()
            else {
                return;
            };
            let start = self.busy_until.max(earliest);
            if start > now {
                return;
            }
            let Some(b) = (0..self.bands.len())
                .rev()
                .find(|&b| self.bands[b].front().is_some_and(|f| f.arrived <= start))
            else {
                return;
            };
            let Some(f) = self.bands[b].pop_front() else {
                return;
            };
            self.queued_bytes -= u64::from(f.len);
            self.queued_frames -= 1;
            let end = start + self.wire_ns(f.len);
            self.busy_until = end;
            self.schedule(end, f.frame, f.len, f.seq);
        }
    }

    /// Puts a frame that left the wire at `t` into the delay line.
    fn schedule(&mut self, t: u64, frame: B, len: u32, seq: u64) {
        let due = if self.rng.chance(self.spec.reorder) {
            // Skips the delay: overtakes what is in the line.
            t
        } else {
            let jitter = self
                .spec
                .jitter
                .map_or(0.0, |j| self.rng.jitter(j.ns as f64, j.dist));
            let d = (self.spec.delay_ns as f64 + jitter).max(0.0) as u64;
            let mut due = t + d;
            if !self.spec.jitter.is_some_and(|j| j.reorder) {
                due = due.max(self.last_due);
                self.last_due = due;
            }
            due
        };
        self.line.push(Reverse(Due {
            due,
            seq,
            len,
            frame,
        }));
    }

    /// When the path next has something to do (a frame to put on the wire or to release),
    /// if anything.
    pub fn next_event(&self) -> Option<u64> {
        let wire = self
            .bands
            .iter()
            .filter_map(|q| q.front())
            .map(|f| f.arrived)
            .min()
            .map(|a| a.max(self.busy_until));
        let line = self.line.peek().map(|Reverse(d)| d.due);
        match (wire, line) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Every frame due by `now`, in the order due, into `out`; each release's lateness
    /// (`now` − its due time) is recorded.
    pub fn poll(&mut self, now: u64, out: &mut Vec<Release<B>>) {
        out.extend(self.passing.drain(..).map(|(frame, len)| Release {
            frame,
            len,
            due: now,
        }));
        self.advance(now);
        while self.line.peek().is_some_and(|Reverse(d)| d.due <= now) {
            let Some(Reverse(d)) = self.line.pop() else {
                break;
            };
            // The second of a duplicated pair is no reordering (its number was seen).
            let second = match self.copies.get_mut(&d.seq) {
                Some(released) if *released => {
                    self.copies.remove(&d.seq);
                    true
                }
                Some(released) => {
                    *released = true;
                    false
                }
                None => false,
            };
            if !second && self.highest_released.is_some_and(|h| d.seq < h) {
                self.counters.reordered += 1;
            }
            self.highest_released = Some(self.highest_released.map_or(d.seq, |h| h.max(d.seq)));
            self.counters.released += 1;
            self.counters.released_bytes += u64::from(d.len);
            self.lateness.record(now - d.due);
            out.push(Release {
                frame: d.frame,
                len: d.len,
                due: d.due,
            });
        }
    }

    /// The frames dropped since the last call (their buffers, to give back).
    pub fn take_freed(&mut self) -> impl Iterator<Item = B> + '_ {
        self.freed.drain(..)
    }

    /// Frames held now (queued and in the delay line).
    pub fn held(&self) -> usize {
        self.queued_frames as usize + self.line.len()
    }

    /// The counts so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The lateness since the start, or since the last [`reset_lateness`](Self::reset_lateness).
    pub fn lateness(&self) -> &LatenessHistogram {
        &self.lateness
    }

    /// Starts a new lateness window (a lab does at each run).
    pub fn reset_lateness(&mut self) {
        self.lateness = LatenessHistogram::default();
    }
}

/// The IP protocol of an Ethernet frame (IPv4's protocol, IPv6's next header), `None` for a
/// frame that is not IP.
pub fn protocol_of(frame: &[u8]) -> Option<u8> {
    let (ethertype, ip) = ether(frame)?;
    match ethertype {
        0x0800 if frame.len() > ip + 9 => Some(frame[ip + 9]),
        0x86DD if frame.len() > ip + 6 => Some(frame[ip + 6]),
        _ => None,
    }
}

/// The EtherType and where the IP header starts, past one 802.1Q tag.
fn ether(frame: &[u8]) -> Option<(u16, usize)> {
    if frame.len() < 14 {
        return None;
    }
    let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    if ethertype == 0x8100 && frame.len() >= 18 {
        return Some((u16::from_be_bytes([frame[16], frame[17]]), 18));
    }
    Some((ethertype, 14))
}

/// The strict-priority band of an Ethernet frame: its DSCP class (the top 3 bits of the IPv4
/// TOS or IPv6 traffic class: CS0 … CS7), at most `bands − 1`; 0 for a frame that is not IP
/// (ARP) or too short to say.
pub fn band_of(frame: &[u8], bands: u8) -> u8 {
    if bands <= 1 {
        return 0;
    }
    let Some((ethertype, ip)) = ether(frame) else {
        return 0;
    };
    let tos = match ethertype {
        0x0800 if frame.len() > ip + 1 && frame[ip] >> 4 == 4 => frame[ip + 1],
        0x86DD if frame.len() > ip + 1 && frame[ip] >> 4 == 6 => {
            (frame[ip] << 4) | (frame[ip + 1] >> 4)
        }
        _ => return 0,
    };
    (tos >> 5).min(bands - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Jitter, JitterDist};

    const MS: u64 = 1_000_000;
    /// A copy's id: its original's plus this.
    const COPY: u32 = 1_000_000;

    fn spec() -> DirectionSpec {
        DirectionSpec::default()
    }

    /// Runs `arrivals` (time, id, len, band) through `p`, polling at every event until idle;
    /// returns (id, due, polled-at).
    fn drive(p: &mut Path<u32>, arrivals: &[(u64, u32, u32, u8)]) -> Vec<(u32, u64, u64)> {
        let mut out = Vec::new();
        let mut got = Vec::new();
        let mut i = 0;
        loop {
            let next_arrival = arrivals.get(i).map(|a| a.0);
            let next = match (next_arrival, p.next_event()) {
                (Some(a), Some(e)) => a.min(e),
                (a, e) => match a.or(e) {
                    Some(t) => t,
                    None => break,
                },
            };
            while let Some(&(t, id, len, band)) = arrivals.get(i) {
                if t > next {
                    break;
                }
                p.arrive(t, id, len, band, |&id| Some(id + COPY));
                i += 1;
            }
            p.poll(next, &mut out);
            got.extend(out.drain(..).map(|r| (r.frame, r.due, next)));
        }
        got
    }

    #[test]
    fn a_plain_path_releases_at_arrival_and_a_delay_shifts_every_frame() {
        let mut p = Path::new(spec(), 1);
        assert_eq!(drive(&mut p, &[(5, 1, 100, 0)]), [(1, 5, 5)]);
        let mut d = Path::new(
            DirectionSpec {
                delay_ns: 10 * MS,
                ..spec()
            },
            1,
        );
        let got = drive(&mut d, &[(0, 1, 100, 0), (3 * MS, 2, 100, 0)]);
        assert_eq!(got, [(1, 10 * MS, 10 * MS), (2, 13 * MS, 13 * MS)]);
        assert_eq!(d.counters().released, 2);
        assert_eq!(
            d.lateness().summary().max_ns,
            1,
            "released on time (recorded as 1 ns)"
        );
    }

    #[test]
    fn the_bottleneck_spaces_frames_at_the_rate_and_drops_beyond_its_queue() {
        // 100 Mbit/s: 1500 B take 120 µs. Five at once into a 3000-byte queue: the first goes
        // on the wire at once, two wait, two are dropped.
        let mut p = Path::new(
            DirectionSpec {
                rate_bps: Some(100_000_000),
                queue_bytes: Some(3000),
                delay_ns: MS,
                ..spec()
            },
            1,
        );
        let burst: Vec<_> = (1..=5).map(|id| (0, id, 1500, 0)).collect();
        let got = drive(&mut p, &burst);
        let dues: Vec<_> = got.iter().map(|g| (g.0, g.1)).collect();
        assert_eq!(dues, [(1, 1_120_000), (2, 1_240_000), (3, 1_360_000)]);
        assert_eq!(p.counters().dropped_queue, 2);
        assert_eq!(p.take_freed().collect::<Vec<_>>(), [4, 5]);
        let c = p.counters();
        assert_eq!((c.received, c.released, c.dropped()), (5, 3, 2));
    }

    #[test]
    fn strict_priority_serves_the_highest_band_first_but_never_preempts_the_wire() {
        let mut p = Path::new(
            DirectionSpec {
                rate_bps: Some(100_000_000),
                qdisc: Qdisc::Prio { bands: 2 },
                ..spec()
            },
            1,
        );
        // A low frame takes the wire at 0; at 10 µs three more low ones and a high one are
        // waiting: the high one goes next, when the wire frees at 120 µs.
        let got = drive(
            &mut p,
            &[
                (0, 1, 1500, 0),
                (10_000, 2, 1500, 0),
                (10_000, 3, 1500, 0),
                (10_000, 4, 1500, 0),
                (11_000, 9, 1500, 1),
            ],
        );
        let order: Vec<u32> = got.iter().map(|g| g.0).collect();
        assert_eq!(order, [1, 9, 2, 3, 4]);
        assert_eq!(
            got[1].1, 240_000,
            "the high frame waited only for the frame on the wire"
        );
        assert_eq!(p.counters().reordered, 3, "three low frames were overtaken");
    }

    #[test]
    fn jitter_keeps_order_unless_reordering_is_allowed() {
        let jitter = |reorder| DirectionSpec {
            delay_ns: 10 * MS,
            jitter: Some(Jitter {
                ns: 2 * MS,
                dist: JitterDist::Uniform,
                reorder,
            }),
            ..spec()
        };
        let arrivals: Vec<_> = (0..2000).map(|i| (i as u64 * 100_000, i, 100, 0)).collect();
        let mut kept = Path::new(jitter(false), 3);
        let got = drive(&mut kept, &arrivals);
        assert!(got.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(kept.counters().reordered, 0);
        // Frames 100 µs apart with ±2 ms of jitter: most overtake when allowed.
        let mut loose = Path::new(jitter(true), 3);
        let got = drive(&mut loose, &arrivals);
        assert_eq!(got.len(), 2000);
        assert!(loose.counters().reordered > 500, "{:?}", loose.counters());
        let delays: Vec<f64> = got
            .iter()
            .map(|g| (g.1 - arrivals[g.0 as usize].0) as f64)
            .collect();
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        assert!((mean - 10e6).abs() < 0.1e6, "mean delay {mean}");
        assert!(delays.iter().all(|&d| (8e6..=12e6).contains(&d)));
    }

    #[test]
    fn reorder_sends_a_share_of_frames_past_the_delay() {
        let mut p = Path::new(
            DirectionSpec {
                delay_ns: 10 * MS,
                reorder: 0.25,
                ..spec()
            },
            5,
        );
        let arrivals: Vec<_> = (0..4000)
            .map(|i| (i as u64 * 1_000_000, i, 100, 0))
            .collect();
        let got = drive(&mut p, &arrivals);
        let fast = got
            .iter()
            .filter(|g| g.1 == arrivals[g.0 as usize].0)
            .count();
        assert!(
            (800..1200).contains(&fast),
            "{fast} of 4000 skipped the delay"
        );
        assert!(p.counters().reordered > 0);
        assert_eq!(p.counters().released, 4000);
    }

    #[test]
    fn loss_and_duplication_are_counted_and_their_buffers_given_back() {
        let mut p = Path::new(
            DirectionSpec {
                loss: Loss::Random { p: 0.1 },
                duplicate: 0.05,
                ..spec()
            },
            9,
        );
        let arrivals: Vec<_> = (0..20_000).map(|i| (i as u64, i, 100, 0)).collect();
        let got = drive(&mut p, &arrivals);
        let c = p.counters();
        assert!((1700..2300).contains(&c.dropped_loss), "{c:?}");
        assert!((700..1100).contains(&c.duplicated), "{c:?}");
        assert_eq!(c.released, c.received - c.dropped_loss + c.duplicated);
        assert_eq!(got.len() as u64, c.released);
        assert_eq!(p.take_freed().count() as u64, c.dropped_loss);
        // No buffer for a copy: counted, the original still goes.
        let mut q = Path::new(
            DirectionSpec {
                duplicate: 1.0,
                ..spec()
            },
            1,
        );
        q.arrive(0, 1u32, 100, 0, |_| None);
        let mut out = Vec::new();
        q.poll(0, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(q.counters().dropped_no_buffer, 1);
    }

    #[test]
    fn the_second_copy_of_a_duplicate_is_never_counted_reordered() {
        // Every frame duplicated, every frame skipping the delay half the time: copies are
        // released apart, but only a first release can be a reordering (as a receiver that
        // counts a datagram seen before as a duplicate, not a reordering, sees it).
        let mut p = Path::new(
            DirectionSpec {
                delay_ns: 10 * MS,
                duplicate: 1.0,
                reorder: 0.5,
                ..spec()
            },
            3,
        );
        let arrivals: Vec<_> = (0..2000).map(|i| (i as u64 * 100_000, i, 100, 0)).collect();
        let got = drive(&mut p, &arrivals);
        // What a receiver would count: the first arrival of each number below the highest.
        let (mut seen, mut highest, mut reordered) = (std::collections::HashSet::new(), None, 0);
        for (id, _, _) in &got {
            let n = id % COPY;
            if seen.insert(n) {
                if highest.is_some_and(|h| n < h) {
                    reordered += 1;
                }
                highest = Some(highest.map_or(n, |h: u32| h.max(n)));
            }
        }
        assert!(reordered > 0);
        assert_eq!(p.counters().reordered, reordered);
        assert_eq!(p.counters().duplicated, 2000);
        assert!(p.copies.is_empty(), "{} pairs left", p.copies.len());
    }

    #[test]
    fn gilbert_elliott_loses_in_bursts() {
        // Into the bad state 1% of frames, out 25%: bursts average 4 frames; in the bad state
        // everything is lost, in the good one nothing.
        let mut p: Path<u32> = Path::new(
            DirectionSpec {
                loss: Loss::Gilbert {
                    p: 0.01,
                    r: 0.25,
                    h: 0.0,
                    k: 0.0,
                },
                ..spec()
            },
            11,
        );
        let mut lost = Vec::new();
        for i in 0..200_000u32 {
            let before = p.counters().dropped_loss;
            p.arrive(u64::from(i), i, 100, 0, |_| None);
            lost.push(p.counters().dropped_loss > before);
            p.take_freed().for_each(drop);
        }
        let n = lost.iter().filter(|&&l| l).count() as f64;
        let bursts = lost.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
        // Stationary share in the bad state p/(p+r) = 3.8%; bursts 1/r = 4 frames long.
        assert!((n / 200_000.0 - 0.0385).abs() < 0.006, "{n}");
        assert!((n / bursts - 4.0).abs() < 0.4, "{}", n / bursts);
    }

    #[test]
    fn lateness_is_the_poll_time_past_the_due_time() {
        let mut p = Path::new(
            DirectionSpec {
                delay_ns: MS,
                ..spec()
            },
            1,
        );
        p.arrive(0, 1u32, 100, 0, |_| None);
        let mut out = Vec::new();
        p.poll(MS - 1, &mut out);
        assert!(out.is_empty());
        assert_eq!(p.next_event(), Some(MS));
        p.poll(MS + 40_000, &mut out);
        assert_eq!(
            out,
            [Release {
                frame: 1,
                len: 100,
                due: MS
            }]
        );
        let l = p.lateness().summary();
        assert!((39_900..=40_100).contains(&l.max_ns), "{l:?}");
        assert_eq!(p.next_event(), None);
        assert_eq!(p.held(), 0);
    }

    #[test]
    fn frames_of_other_protocols_pass_at_once_and_apart() {
        let mut p = Path::new(
            DirectionSpec {
                delay_ns: MS,
                loss: Loss::Random { p: 1.0 },
                protocol: Some(17),
                ..spec()
            },
            1,
        );
        let mut udp = vec![0u8; 42];
        udp[12..14].copy_from_slice(&[0x08, 0x00]);
        udp[14] = 0x45;
        udp[23] = 17;
        let mut tcp = udp.clone();
        tcp[23] = 6;
        assert_eq!(protocol_of(&udp), Some(17));
        assert_eq!(protocol_of(&tcp), Some(6));
        assert_eq!(protocol_of(&[0u8; 20]), None);
        assert!(p.emulates(Some(17)) && !p.emulates(Some(6)) && !p.emulates(None));
        p.arrive(0, 1u32, 42, 0, |_| None);
        p.bypass(2u32, 42);
        let mut out = Vec::new();
        p.poll(5, &mut out);
        assert_eq!(
            out,
            [Release {
                frame: 2,
                len: 42,
                due: 5
            }]
        );
        let c = p.counters();
        assert_eq!(
            (c.received, c.dropped_loss, c.bypassed, c.released),
            (1, 1, 1, 0)
        );
    }

    #[test]
    fn bands_come_from_the_dscp_class() {
        let mut v4 = vec![0u8; 34];
        v4[12..14].copy_from_slice(&[0x08, 0x00]);
        v4[14] = 0x45;
        v4[15] = 0xb8; // EF: DSCP 46, class 5
        assert_eq!(band_of(&v4, 8), 5);
        assert_eq!(band_of(&v4, 3), 2);
        assert_eq!(band_of(&v4, 1), 0);
        v4[15] = 0x20; // CS1
        assert_eq!(band_of(&v4, 3), 1);
        let mut v6 = vec![0u8; 54];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6[14] = 0x6b; // version 6, traffic class 0xb8 (EF) spread over two bytes
        v6[15] = 0x80;
        assert_eq!(band_of(&v6, 8), 5);
        let mut tagged = vec![0u8; 40];
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        tagged[16..18].copy_from_slice(&[0x08, 0x00]);
        tagged[18] = 0x45;
        tagged[19] = 0x40; // CS2
        assert_eq!(band_of(&tagged, 4), 2);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(band_of(&arp, 4), 0);
        assert_eq!(band_of(&[0u8; 10], 4), 0);
    }
}
