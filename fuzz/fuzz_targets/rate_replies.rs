//! The rate pattern's reply accounting — one flow (`pattern::rate`'s receiver) and a data
//! thread of a session with flows (`pattern::flows::rate`) — on replies a peer could send:
//! stamped with the trial's cookie or another, any sequence number, any intended send time,
//! of the right size or not. Never a panic (an index out of `seen` or the timeline), and the
//! counts agree with a set of the sequence numbers answered: received + duplicates + the
//! invalid = replies, every histogram holds exactly the answers within the grace period, and
//! with `--one-way` stamps (any values) every such answer is timed or counted unstamped.
//!
//! Input: a plan (6 bytes), then replies of 8 bytes: kind, sequence number, intended time.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_engine::fuzzing::{rate_replies, FlowsRate, RatePlan};
use netsweep_engine::pattern::dgram::stamp;
use std::collections::HashSet;
use std::time::Duration;

const COOKIE: u32 = 0xc001_d00d;

fn le(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    u64::from_le_bytes(x)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let (p, ops) = data.split_at(6);
    let size = 20 + usize::from(p[0] % 48);
    let requests = le(&p[1..3]) % 5000;
    // At most ~100 timeline buckets (each is 2 KB, allocated per execution).
    let interval_ns = [0, 10_000_000, 100_000_000, u64::MAX - 1][usize::from(p[3] % 4)];
    let window_ns = le(&p[4..5]) * 4_000_000;
    let grace_ns = [0, 1_000, 500_000_000, u64::MAX][usize::from(p[5] % 4)];
    let flows = 1 + usize::from(p[5] >> 2) % 8;

    // Replies: valid ones (seq small enough for any storage), stale cookies, wrong sizes,
    // sequence numbers at or past the storage, raw bytes.
    let mut msgs: Vec<Vec<u8>> = Vec::new();
    let mut stamps: Vec<(usize, [u8; 20], usize)> = Vec::new();
    for op in ops.chunks(8) {
        let kind = op[0];
        let seq = le(op.get(1..3).unwrap_or(&[]));
        let due = le(op.get(3..).unwrap_or(&[])) << 8;
        let mut m = vec![0u8; size];
        let (cookie, seq, len) = match kind % 6 {
            0..=2 => (COOKIE, seq % 64, size),
            3 => (COOKIE ^ u32::from(kind), seq % 64, size),
            4 => (COOKIE, seq << (kind >> 3), size),
            _ => (COOKIE, seq % 64, usize::from(kind >> 3)),
        };
        stamp(&mut m, cookie, seq, due);
        m.resize(len, 0);
        let mut hdr = [0u8; 20];
        stamp(&mut hdr, cookie, seq, due);
        stamps.push((usize::from(kind >> 5), hdr, len));
        msgs.push(m);
    }

    // One flow: the model is a set of the valid sequence numbers.
    let plan = RatePlan {
        size,
        cookie: COOKIE,
        requests,
        interval_ns,
        window_ns,
        grace_ns,
    };
    let t = rate_replies(plan, msgs.iter().map(Vec::as_slice));
    let (mut valid, mut distinct) = (0u64, HashSet::new());
    for m in &msgs {
        let h = netsweep_engine::pattern::dgram::parse(m);
        if let Some((c, s, _)) = h {
            if c == COOKIE && s < t.capacity && m.len() == size {
                valid += 1;
                distinct.insert(s);
            }
        }
    }
    let invalid = msgs.len() as u64 - valid;
    assert_eq!(t.messages, msgs.len() as u64);
    assert_eq!(t.received, distinct.len() as u64, "{t:?}");
    assert_eq!(t.duplicates, valid - t.received, "{t:?}");
    assert!(t.late >= invalid && t.late - invalid <= t.received, "{t:?}");
    let in_time = t.received - (t.late - invalid);
    assert_eq!(t.recorded, in_time, "{t:?}");
    assert_eq!(t.answered, in_time, "{t:?}");
    assert_eq!(t.arrived_in_buckets, in_time, "{t:?}");
    assert!(t.arrived <= t.received, "{t:?}");
    // `--one-way` (replies with room for the stamps after the 20-byte header): each reply
    // on time is timed or counted unstamped, whatever its stamps hold.
    let room = size >= 44;
    assert_eq!(t.one_way_timed, if room { in_time } else { 0 }, "{t:?}");

    // A thread of a flows session: sequence numbers under 64 always fit its storage, those
    // from 2^40 never do (its rate and duration here are far too small for that many).
    let per_flow = 1.0 + f64::from(p[1]) * 1000.0;
    let mut f = FlowsRate::new(
        flows,
        per_flow,
        Duration::from_millis(1 + le(&p[2..3])),
        COOKIE,
        grace_ns,
    );
    let mut seen = HashSet::new();
    let (mut valid, mut n) = (0u64, 0u64);
    for (k, (flow, hdr, len)) in stamps.iter().enumerate() {
        let now = (k as u64) << 20;
        // The stamped sequence numbers here: under 64, or shifted far beyond any storage.
        let (c, s, _) = netsweep_engine::pattern::dgram::parse(hdr).expect("20 bytes");
        let s = if s >= 64 { s | 1 << 40 } else { s };
        let mut h = *hdr;
        h[4..12].copy_from_slice(&s.to_le_bytes());
        f.reply(*flow, &h, *len, now);
        n += 1;
        if c == COOKIE && s < 64 && *len >= 20 {
            valid += 1;
            seen.insert((flow % flows, s));
        }
    }
    let (received, late, duplicates, recorded) = f.counts();
    assert_eq!(received, seen.len() as u64);
    assert_eq!(duplicates, valid - received);
    assert_eq!(received + duplicates + (n - valid), n);
    assert!(late >= n - valid && late - (n - valid) <= received);
    assert_eq!(recorded, received - (late - (n - valid)));
});
