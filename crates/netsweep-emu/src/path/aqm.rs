//! Active queue management at the bottleneck (issue 43 item 4), sans IO, in the path's virtual
//! time: CoDel (RFC 8289) on one queue, and FQ-CoDel (RFC 8290) — flows hashed into queues,
//! served by deficit round robin with new flows first, each queue under its own CoDel.
//!
//! CoDel acts as a frame leaves the queue for the wire. A frame's sojourn time is how long it
//! waited; once every frame for `interval` has waited at least `target` (and more than one
//! frame's worth is queued), CoDel drops the frame at the head and enters its dropping state,
//! in which it drops again at `interval / √count` after the last drop, until a frame's sojourn
//! falls below `target`. Re-entering soon after leaving resumes the drop rate it had reached.

use super::Queued;
use std::collections::VecDeque;

/// CoDel's state for one queue (RFC 8289 §5 names in comments).
#[derive(Debug, Clone, Default)]
pub(super) struct Codel {
    target: u64,
    interval: u64,
    /// `first_above_time`: when the sojourn will have been above target for an interval
    /// (`None`: it is below).
    first_above: Option<u64>,
    /// `drop_next`: the time of the next drop in the dropping state.
    drop_next: u64,
    /// Drops in this dropping state (`count`), and at the end of the last (`lastcount`).
    count: u32,
    lastcount: u32,
    dropping: bool,
}

/// One queue with its CoDel, its byte count and (under FQ-CoDel) its deficit.
#[derive(Debug)]
pub(super) struct FlowQueue<B> {
    q: VecDeque<Queued<B>>,
    bytes: u64,
    codel: Codel,
    deficit: i64,
    /// Which of FQ-CoDel's lists holds it.
    listed: Listed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    None,
    New,
    Old,
}

/// `control_law`: the next drop, `interval / √count` after `t`.
fn control_law(t: u64, interval: u64, count: u32) -> u64 {
    t + (interval as f64 / f64::from(count.max(1)).sqrt()) as u64
}

impl Codel {
    pub(super) fn new(target: u64, interval: u64) -> Self {
        Self {
            target,
            interval,
            ..Default::default()
        }
    }
}

impl<B> FlowQueue<B> {
    pub(super) fn new(codel: Codel) -> Self {
        Self {
            q: VecDeque::new(),
            bytes: 0,
            codel,
            deficit: 0,
            listed: Listed::None,
        }
    }

    pub(super) fn push(&mut self, f: Queued<B>) {
        self.bytes += u64::from(f.len);
        self.q.push_back(f);
    }

    pub(super) fn front_arrival(&self) -> Option<u64> {
        self.q.front().map(|f| f.arrived)
    }

    fn pop(&mut self) -> Option<Queued<B>> {
        let f = self.q.pop_front()?;
        self.bytes -= u64::from(f.len);
        Some(f)
    }

    /// `dodequeue`: the head frame and whether CoDel may drop it. `mtu`: a queue holding at
    /// most one frame's worth after this one is never dropped from (the link stays busy).
    fn dodequeue(&mut self, now: u64, mtu: u32) -> (Option<Queued<B>>, bool) {
        let Some(f) = self.pop() else {
            self.codel.first_above = None;
            return (None, false);
        };
        let c = &mut self.codel;
        let sojourn = now.saturating_sub(f.arrived);
        let mut ok_to_drop = false;
        if sojourn < c.target || self.bytes <= u64::from(mtu) {
            c.first_above = None;
        } else {
            match c.first_above {
                None => c.first_above = Some(now + c.interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        (Some(f), ok_to_drop)
    }

    /// CoDel's `dequeue` at `now`: the frame to send, if any; the frames it dropped go to
    /// `dropped`.
    pub(super) fn dequeue(
        &mut self,
        now: u64,
        mtu: u32,
        dropped: &mut Vec<Queued<B>>,
    ) -> Option<Queued<B>> {
        let (mut f, mut ok) = self.dodequeue(now, mtu);
        if f.is_none() {
            self.codel.dropping = false;
            return None;
        }
        if self.codel.dropping {
            if !ok {
                self.codel.dropping = false;
            }
            while self.codel.dropping && now >= self.codel.drop_next {
                dropped.extend(f.take());
                self.codel.count += 1;
                (f, ok) = self.dodequeue(now, mtu);
                if !ok {
                    self.codel.dropping = false;
                } else {
                    let c = &mut self.codel;
                    c.drop_next = control_law(c.drop_next, c.interval, c.count);
                }
            }
        } else if ok {
            dropped.extend(f.take());
            (f, _) = self.dodequeue(now, mtu);
            let c = &mut self.codel;
            c.dropping = true;
            // Re-entering soon after the last dropping state: resume near its drop rate.
            let delta = c.count.saturating_sub(c.lastcount);
            c.count = 1;
            if delta > 1 && now.saturating_sub(c.drop_next) < 16 * c.interval {
                c.count = delta;
            }
            c.drop_next = control_law(now, c.interval, c.count);
            c.lastcount = c.count;
        }
        f
    }
}

/// FQ-CoDel: `flows` queues, a frame's queue its flow hash modulo their number; new flows
/// served before old ones, each for a `quantum` of bytes per round (deficit round robin).
#[derive(Debug)]
pub(super) struct FqCodel<B> {
    queues: Vec<FlowQueue<B>>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    quantum: i64,
}

impl<B> FqCodel<B> {
    pub(super) fn new(flows: u32, quantum: u32, codel: &Codel) -> Self {
        Self {
            queues: (0..flows.max(1))
                .map(|_| FlowQueue::new(codel.clone()))
                .collect(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            quantum: i64::from(quantum.max(1)),
        }
    }

    /// Queues a frame of flow hash `flow`; a queue that was idle joins the new flows with a
    /// quantum of credit.
    pub(super) fn push(&mut self, flow: u32, f: Queued<B>) {
        let i = flow as usize % self.queues.len();
        let q = &mut self.queues[i];
        q.push(f);
        if q.listed == Listed::None {
            q.listed = Listed::New;
            q.deficit = self.quantum;
            self.new_flows.push_back(i);
        }
    }

    /// The earliest arrival among the queued frames.
    pub(super) fn earliest(&self) -> Option<u64> {
        self.new_flows
            .iter()
            .chain(&self.old_flows)
            .filter_map(|&i| self.queues[i].front_arrival())
            .min()
    }

    /// At overflow: the head frame of the queue holding the most bytes (RFC 8290 §4.1).
    pub(super) fn drop_from_fattest(&mut self) -> Option<Queued<B>> {
        let i = (0..self.queues.len()).max_by_key(|&i| self.queues[i].bytes)?;
        self.queues[i].pop()
    }

    /// The next frame for the wire at `now` (RFC 8290 §4.2), CoDel's drops into `dropped`.
    pub(super) fn dequeue(
        &mut self,
        now: u64,
        mtu: u32,
        dropped: &mut Vec<Queued<B>>,
    ) -> Option<Queued<B>> {
        loop {
            let (i, new) = match self.new_flows.front() {
                Some(&i) => (i, true),
                None => (*self.old_flows.front()?, false),
            };
            if self.queues[i].deficit <= 0 {
                self.queues[i].deficit += self.quantum;
                self.queues[i].listed = Listed::Old;
                self.pop_list(new);
                self.old_flows.push_back(i);
                continue;
            }
            match self.queues[i].dequeue(now, mtu, dropped) {
                Some(f) => {
                    self.queues[i].deficit -= i64::from(f.len);
                    return Some(f);
                }
                None => {
                    self.pop_list(new);
                    // An emptied new flow goes to the old list once (so a flow that sends a
                    // frame at a time cannot starve the others); an emptied old one leaves.
                    if new && !self.old_flows.is_empty() {
                        self.queues[i].listed = Listed::Old;
                        self.old_flows.push_back(i);
                    } else {
                        self.queues[i].listed = Listed::None;
                    }
                }
            }
        }
    }

    fn pop_list(&mut self, new: bool) {
        if new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn frame(arrived: u64, seq: u64) -> Queued<u64> {
        Queued {
            frame: seq,
            len: 1500,
            arrived,
            seq,
        }
    }

    #[test]
    fn the_control_law_spaces_drops_by_interval_over_the_root_of_count() {
        assert_eq!(control_law(0, 100 * MS, 1), 100 * MS);
        assert_eq!(control_law(0, 100 * MS, 4), 50 * MS);
        assert_eq!(control_law(10, 100 * MS, 100), 10 + 10 * MS);
    }

    /// A queue under RFC 8289's CoDel (5 ms, 100 ms) holding `n` frames that arrived at 0.
    fn standing(n: u64) -> FlowQueue<u64> {
        let mut q = FlowQueue::new(Codel::new(5 * MS, 100 * MS));
        for s in 0..n {
            q.push(frame(0, s));
        }
        q
    }

    /// A standing queue whose frames all arrived at 0, dequeued every millisecond from 10 ms:
    /// every sojourn is above the 5 ms target. CoDel drops first an interval after the first
    /// such dequeue (110 ms), then at 100/√1, 100/√2, 100/√3 … after each drop's schedule.
    #[test]
    fn codel_drops_once_an_interval_above_target_then_by_its_control_law() {
        let mut q = standing(400);
        let mut drops_at = Vec::new();
        let mut sent = 0;
        // The wire takes a frame each ms; every frame has waited at least 10 ms.
        for t in (10..=400).map(|ms| ms * MS) {
            let mut dropped = Vec::new();
            // Frames keep arriving so the sojourn stays high (each now waited `t`).
            if q.dequeue(t, 1514, &mut dropped).is_some() {
                sent += 1;
            }
            drops_at.extend(dropped.iter().map(|_| t));
        }
        assert!(sent > 0);
        // First drop: one interval after the sojourn first exceeded target (at 10 ms).
        assert_eq!(drops_at[0], 110 * MS, "{drops_at:?}");
        // The next drops follow interval / √count after the last one's schedule.
        let gaps: Vec<u64> = drops_at.windows(2).map(|w| w[1] - w[0]).collect();
        let expect = [
            100.0,
            100.0 / 2f64.sqrt(),
            100.0 / 3f64.sqrt(),
            100.0 / 4f64.sqrt(),
        ];
        for (g, e) in gaps.iter().zip(expect) {
            // Drops land on the next dequeue (1 ms granularity here).
            assert!(
                (*g as f64 / MS as f64 - e).abs() <= 1.0,
                "{gaps:?} vs {expect:?}"
            );
        }
    }

    #[test]
    fn codel_drops_nothing_below_target_or_with_one_frame_queued() {
        let mut q: FlowQueue<u64> = FlowQueue::new(Codel::new(5 * MS, 100 * MS));
        let mut dropped = Vec::new();
        // Each frame waits 4 ms: below target for ever.
        for s in 0..1000u64 {
            q.push(frame(s * MS, s));
            assert!(q.dequeue(s * MS + 4 * MS, 1514, &mut dropped).is_some());
        }
        assert!(dropped.is_empty());
        // A long wait, but only one frame queued behind: the link would idle, so no drop.
        for s in 0..300u64 {
            q.push(frame(0, s));
            q.push(frame(0, s));
            let _ = q.dequeue(s * MS + 200 * MS, 1514, &mut dropped);
            let _ = q.dequeue(s * MS + 200 * MS, 1514, &mut dropped);
        }
        assert!(dropped.is_empty(), "{}", dropped.len());
    }

    #[test]
    fn codel_leaves_its_dropping_state_when_the_sojourn_falls_below_target() {
        let mut q = standing(500);
        let mut dropped = Vec::new();
        for t in (10..=200).map(|ms| ms * MS) {
            let _ = q.dequeue(t, 1514, &mut dropped);
        }
        assert!(q.codel.dropping && !dropped.is_empty());
        // Fresh frames, waiting 1 ms: the first dequeue ends the dropping state.
        while q.pop().is_some() {}
        let before = dropped.len();
        for s in 0..50u64 {
            q.push(frame(300 * MS + s * MS, 1000 + s));
            q.push(frame(300 * MS + s * MS, 2000 + s));
            let _ = q.dequeue(300 * MS + s * MS + MS, 1514, &mut dropped);
        }
        assert!(!q.codel.dropping);
        assert_eq!(dropped.len(), before);
    }

    /// Two flows, one sending 9 frames for each of the other's: DRR with a quantum of one
    /// frame serves them alternately while both have frames queued.
    #[test]
    fn fq_codel_shares_the_wire_between_flows_by_bytes() {
        let codel = Codel::new(5 * MS, 100 * MS);
        let mut fq: FqCodel<u64> = FqCodel::new(1024, 1514, &codel);
        for s in 0..90 {
            fq.push(1, frame(0, s));
        }
        for s in 0..10 {
            fq.push(2, frame(0, 1000 + s));
        }
        let mut order = Vec::new();
        let mut dropped = Vec::new();
        for k in 0..20 {
            let f = fq.dequeue(k, 1514, &mut dropped).unwrap();
            order.push(if f.frame >= 1000 { 2 } else { 1 });
        }
        assert!(dropped.is_empty());
        assert_eq!(order.iter().filter(|&&x| x == 2).count(), 10, "{order:?}");
        // A flow that arrives later is new: served before the old ones' next turns.
        fq.push(7, frame(0, 5000));
        let f = fq.dequeue(30, 1514, &mut dropped).unwrap();
        assert_eq!(f.frame, 5000);
        assert_eq!(fq.earliest(), Some(0));
    }

    #[test]
    fn fq_codel_overflow_drops_from_the_fattest_queue() {
        let codel = Codel::new(5 * MS, 100 * MS);
        let mut fq: FqCodel<u64> = FqCodel::new(16, 1514, &codel);
        for s in 0..30 {
            fq.push(3, frame(0, s));
        }
        fq.push(4, frame(0, 100));
        let d = fq.drop_from_fattest().unwrap();
        assert!(
            d.frame < 30,
            "the fat flow's head, not the thin flow's frame"
        );
        assert_eq!(d.frame, 0);
    }
}
