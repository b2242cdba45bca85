//! One direction of an emulated link, sans IO: frames arrive with a time, and the path says
//! when each leaves — or that it never will, and why. Its clock is whatever the caller gives
//! it (a mock one in the tests), so every behaviour is checked exactly.
//!
//! A frame's way through: the loss model (random, or Gilbert–Elliott's two states) and the
//! duplication model on arrival; then the bottleneck, when the direction has a rate — a queue
//! with a drop-tail limit in bytes and frames, served FIFO or by strict priority over bands —
//! or managed by CoDel or FQ-CoDel ([`aqm`]) — one frame on the wire at a time for its length
//! at the rate; then the delay line — the fixed
//! delay plus a jitter draw, releases kept in order unless reordering is allowed, and a
//! `reorder` share of frames skipping the delay (overtaking the others).

use crate::config::{Aqm, DirectionSpec, Loss, Qdisc};
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
    /// The bottleneck's queue under an AQM, in place of `bands` (`None`: drop-tail).
    managed: Option<Managed<B>>,
    /// Frames the AQM dropped at a dequeue, before they are counted and freed.
    aqm_dropped: Vec<Queued<B>>,
}

/// A bottleneck queue under active queue management.
#[derive(Debug)]
enum Managed<B> {
    Codel(aqm::FlowQueue<B>),
    FqCodel(aqm::FqCodel<B>),
}

/// The largest frame CoDel keeps the link busy with (it never drops when no more than this is
/// left queued): a full Ethernet frame.
const AQM_MTU: u32 = 1514;

impl<B> Path<B> {
    /// A path doing what `spec` says, its random draws from `seed`.
    pub fn new(spec: DirectionSpec, seed: u64) -> Self {
        let aqm = spec.aqm;
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
            managed: match aqm {
                Aqm::None => None,
                Aqm::Codel {
                    target_ns,
                    interval_ns,
                } => Some(Managed::Codel(aqm::FlowQueue::new(aqm::Codel::new(
                    target_ns,
                    interval_ns,
                )))),
                Aqm::FqCodel {
                    target_ns,
                    interval_ns,
                    flows,
                    quantum,
                } => Some(Managed::FqCodel(aqm::FqCodel::new(
                    flows,
                    quantum,
                    &aqm::Codel::new(target_ns, interval_ns),
                ))),
            },
            aqm_dropped: Vec::new(),
        }
    }

    /// Whether frames need their flow hash (FQ-CoDel's queues): see [`arrive_flow`](Self::arrive_flow).
    pub fn wants_flows(&self) -> bool {
        matches!(self.managed, Some(Managed::FqCodel(_)))
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
        copy: impl FnMut(&B) -> Option<B>,
    ) {
        self.arrive_flow(now, frame, len, band, 0, copy);
    }

    /// [`arrive`](Self::arrive) for a frame of flow hash `flow` (`frame::flow_of`), which
    /// FQ-CoDel queues it by.
    pub fn arrive_flow(
        &mut self,
        now: u64,
        frame: B,
        len: u32,
        band: u8,
        flow: u32,
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
        self.enter(now, frame, len, band, flow, seq);
        if let Some(c) = dup {
            // The copy is the same frame to the receiver: the same number, and a reordering
            // is counted only for whichever of the two is released first.
            self.copies.insert(seq, false);
            self.enter(now, c, len, band, flow, seq);
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
    fn enter(&mut self, now: u64, frame: B, len: u32, band: u8, flow: u32, seq: u64) {
        if self.spec.rate_bps.is_none() {
            self.schedule(now, frame, len, seq);
            return;
        }
        if let Some(Managed::FqCodel(fq)) = &mut self.managed {
            // FQ-CoDel takes every frame, then drops from the head of its fattest flow while
            // over the limit (RFC 8290 §4.1): a flow that fills the queue pays for it.
            fq.push(
                flow,
                Queued {
                    frame,
                    len,
                    arrived: now,
                    seq,
                },
            );
            self.queued_bytes += u64::from(len);
            self.queued_frames += 1;
            while self.over_limit(0) {
                let Some(Managed::FqCodel(fq)) = &mut self.managed else {
                    break;
                };
                let Some(d) = fq.drop_from_fattest() else {
                    break;
                };
                self.queued_bytes -= u64::from(d.len);
                self.queued_frames -= 1;
                self.counters.dropped_queue += 1;
                self.copies.remove(&d.seq);
                self.freed.push(d.frame);
            }
            self.advance(now);
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
        let f = Queued {
            frame,
            len,
            arrived: now,
            seq,
        };
        if let Some(Managed::Codel(q)) = &mut self.managed {
            q.push(f);
        } else {
            let b = usize::from(band).min(self.bands.len() - 1);
            self.bands[b].push_back(f);
        }
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

    /// Whether the queue holds more than its limit, in bytes (with `extra` more) or frames.
    fn over_limit(&self, extra: u32) -> bool {
        self.queued_bytes + u64::from(extra) > self.queue_limit_bytes
            || self
                .spec
                .queue_frames
                .is_some_and(|n| self.queued_frames > n)
    }

    /// The earliest arrival among the queued frames.
    fn earliest_queued(&self) -> Option<u64> {
        match &self.managed {
            Some(Managed::Codel(q)) => q.front_arrival(),
            Some(Managed::FqCodel(fq)) => fq.earliest(),
            None => self
                .bands
                .iter()
                .filter_map(|q| q.front())
                .map(|f| f.arrived)
                .min(),
        }
    }

    /// [`advance`](Self::advance) under an AQM: the wire takes the frame the AQM gives when it
    /// is free (every queued frame has arrived by then: a frame is queued only after the
    /// frames whose turn came before its arrival left), and the frames it drops on the way
    /// are counted and freed.
    fn advance_managed(&mut self, now: u64) {
        loop {
            let Some(earliest) = self.earliest_queued() else {
                return;
            };
            let start = self.busy_until.max(earliest);
            if start > now {
                return;
            }
            let mut dropped = std::mem::take(&mut self.aqm_dropped);
            let f = match &mut self.managed {
                Some(Managed::Codel(q)) => q.dequeue(start, AQM_MTU, &mut dropped),
                Some(Managed::FqCodel(fq)) => fq.dequeue(start, AQM_MTU, &mut dropped),
                None => None,
            };
            for d in dropped.drain(..) {
                self.queued_bytes -= u64::from(d.len);
                self.queued_frames -= 1;
                self.counters.dropped_aqm += 1;
                self.copies.remove(&d.seq);
                self.freed.push(d.frame);
            }
            self.aqm_dropped = dropped;
            if let Some(f) = f {
                self.put_on_wire(start, f);
            }
        }
    }

    /// A frame leaves the queue for the wire at `start`, and the delay line when it is across.
    fn put_on_wire(&mut self, start: u64, f: Queued<B>) {
        self.queued_bytes -= u64::from(f.len);
        self.queued_frames -= 1;
        let end = start + self.wire_ns(f.len);
        self.busy_until = end;
        self.schedule(end, f.frame, f.len, f.seq);
    }

    /// Moves every frame whose turn on the wire starts by `now` from the queue into the delay
    /// line: the wire takes the next frame when it is free, the highest band's first among
    /// those that had arrived by then.
    fn advance(&mut self, now: u64) {
        if self.managed.is_some() {
            self.advance_managed(now);
            return;
        }
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
            self.put_on_wire(start, f);
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
        let wire = self.earliest_queued().map(|a| a.max(self.busy_until));
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

mod aqm;

#[cfg(test)]
mod tests;
