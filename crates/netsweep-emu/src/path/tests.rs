//! The path's behaviours on a mock clock, each checked exactly.

use super::*;
use crate::config::{Jitter, JitterDist};
use crate::frame::{band_of, protocol_of};

const MS: u64 = 1_000_000;
/// A copy's id: its original's plus this.
const COPY: u32 = 1_000_000;

fn spec() -> DirectionSpec {
    DirectionSpec::default()
}

/// Runs `arrivals` (time, id, len, band) through `p`, polling at every event until idle;
/// returns (id, due, polled-at).
fn drive(p: &mut Path<u32>, arrivals: &[(u64, u32, u32, u8)]) -> Vec<(u32, u64, u64)> {
    drive_flows(p, arrivals, |_| 0)
}

/// [`drive`] with each frame's flow hash `flow(id)`.
fn drive_flows(
    p: &mut Path<u32>,
    arrivals: &[(u64, u32, u32, u8)],
    flow: impl Fn(u32) -> u32,
) -> Vec<(u32, u64, u64)> {
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
            p.arrive_flow(t, id, len, band, flow(id), |&id| Some(id + COPY));
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

/// 10 Mbit/s: a 1514-byte frame takes 1.2112 ms on the wire.
const WIRE_1514: u64 = 1_211_200;

fn aqm_spec(aqm: Aqm) -> DirectionSpec {
    DirectionSpec {
        rate_bps: Some(10_000_000),
        queue_bytes: Some(10_000_000),
        aqm,
        ..spec()
    }
}

const CODEL: Aqm = Aqm::Codel {
    target_ns: 5 * MS,
    interval_ns: 100 * MS,
};

/// A burst of 300 full frames at t = 0 into 10 Mbit/s: frame k leaves the queue at
/// k × 1.2112 ms. Drop-tail (with room) sends them all; CoDel sees the sojourn above 5 ms
/// from frame 5 (6.06 ms) on, and first drops at the first dequeue an interval later —
/// frame 88, at 106.6 ms — then by its control law; every frame is released or dropped.
#[test]
fn codel_on_the_bottleneck_drops_an_interval_after_the_sojourn_passes_target() {
    let burst: Vec<(u64, u32, u32, u8)> = (0..300).map(|k| (0, k, 1514, 0)).collect();
    let mut tail = Path::new(aqm_spec(Aqm::None), 1);
    assert_eq!(drive(&mut tail, &burst).len(), 300);
    assert_eq!(tail.counters().dropped(), 0);
    let mut p = Path::new(aqm_spec(CODEL), 1);
    let got = drive(&mut p, &burst);
    let c = p.counters();
    assert_eq!(c.released + c.dropped_aqm, 300, "{c:?}");
    assert!(c.dropped_aqm >= 2, "{c:?}");
    let released: Vec<u32> = got.iter().map(|g| g.0).collect();
    // Frames 0..=87 all left; 88 (the head at the first dequeue ≥ 6.06 + 100 ms) was dropped.
    assert!(released[..88].iter().copied().eq(0..88), "{released:?}");
    assert!(!released.contains(&88), "{released:?}");
    // After a drop the next frame takes the wire at once: 89 starts in 88's slot (88 × 1.2112
    // ms) and is due when it has crossed it.
    assert_eq!(got[88].0, 89);
    assert_eq!(got[88].1, 89 * WIRE_1514);
    assert_eq!(p.take_freed().count() as u64, c.dropped_aqm);
    assert_eq!(p.held(), 0);
}

/// Two flows under FQ-CoDel: a burst of 200 frames of flow 1 at t = 0, then one frame of
/// flow 2 at 10 ms. FQ-CoDel serves the new flow next: its frame leaves within two frame
/// times of arriving, where a FIFO queue makes it wait behind the burst (~230 ms).
#[test]
fn fq_codel_lets_a_new_flow_past_a_standing_queue_that_fifo_makes_it_wait_behind() {
    let mut arrivals: Vec<(u64, u32, u32, u8)> = (0..200).map(|k| (0, k, 1514, 0)).collect();
    arrivals.push((10 * MS, 1000, 1514, 0));
    let flow = |id: u32| if id == 1000 { 2 } else { 1 };
    let fq = Aqm::FqCodel {
        target_ns: 5 * MS,
        interval_ns: 100 * MS,
        flows: 1024,
        quantum: 1514,
    };
    let left_at = |aqm: Aqm| {
        let mut p = Path::new(aqm_spec(aqm), 1);
        let got = drive_flows(&mut p, &arrivals, flow);
        let c = p.counters();
        assert_eq!(c.released + c.dropped(), 201, "{c:?}");
        got.iter().find(|g| g.0 == 1000).map(|g| g.1).unwrap()
    };
    let fifo = left_at(Aqm::None);
    let fair = left_at(fq);
    assert!(fifo > 200 * MS, "{fifo}");
    assert!(fair <= 10 * MS + 2 * WIRE_1514, "{fair}");
    // Overflow: the fat flow pays. A 30-frame limit, flow 1 sends 40, flow 2 one at the end:
    // flow 2's frame is kept, flow 1's heads are dropped.
    let mut small = aqm_spec(fq);
    small.queue_bytes = Some(30 * 1514);
    let mut p = Path::new(small, 1);
    let mut burst: Vec<(u64, u32, u32, u8)> = (0..40).map(|k| (0, k, 1514, 0)).collect();
    burst.push((0, 1000, 1514, 0));
    let got = drive_flows(&mut p, &burst, flow);
    assert!(got.iter().any(|g| g.0 == 1000), "{got:?}");
    assert!(p.counters().dropped_queue >= 10, "{:?}", p.counters());
}

#[test]
fn an_aqm_needs_a_rate_and_a_fifo_queue_and_sane_times() {
    let mut d = aqm_spec(CODEL);
    assert!(d.check().is_ok());
    d.rate_bps = None;
    assert!(d.check().unwrap_err().contains("give a rate"));
    let mut d = aqm_spec(CODEL);
    d.qdisc = Qdisc::Prio { bands: 3 };
    assert!(d.check().unwrap_err().contains("fifo"));
    let d = aqm_spec(Aqm::Codel {
        target_ns: 200 * MS,
        interval_ns: 100 * MS,
    });
    assert!(d.check().unwrap_err().contains("below the interval"));
    let d = aqm_spec(Aqm::FqCodel {
        target_ns: 5 * MS,
        interval_ns: 100 * MS,
        flows: 0,
        quantum: 1514,
    });
    assert!(d.check().unwrap_err().contains("flows"));
}

#[test]
fn a_flow_is_its_five_tuple() {
    // IPv4/TCP 198.18.0.1:40000 → 198.18.0.2:7200, headers only.
    let mut a = vec![0u8; 54];
    a[12..14].copy_from_slice(&[0x08, 0x00]);
    a[14] = 0x45;
    a[23] = 6;
    a[26..30].copy_from_slice(&[198, 18, 0, 1]);
    a[30..34].copy_from_slice(&[198, 18, 0, 2]);
    a[34..36].copy_from_slice(&40000u16.to_be_bytes());
    a[36..38].copy_from_slice(&7200u16.to_be_bytes());
    let mut same = a.clone();
    same[18..20].copy_from_slice(&[0x12, 0x34]); // another IP id, same flow
    let mut other_port = a.clone();
    other_port[34..36].copy_from_slice(&40001u16.to_be_bytes());
    let mut other_proto = a.clone();
    other_proto[23] = 17;
    assert_eq!(crate::frame::flow_of(&a), crate::frame::flow_of(&same));
    assert_ne!(
        crate::frame::flow_of(&a),
        crate::frame::flow_of(&other_port)
    );
    assert_ne!(
        crate::frame::flow_of(&a),
        crate::frame::flow_of(&other_proto)
    );
    // A later fragment has no ports: its flow is its addresses and protocol.
    let mut frag = a.clone();
    frag[20..22].copy_from_slice(&0x0010u16.to_be_bytes());
    let mut frag2 = frag.clone();
    frag2[34..38].copy_from_slice(&[9, 9, 9, 9]);
    assert_eq!(crate::frame::flow_of(&frag), crate::frame::flow_of(&frag2));
    assert_eq!(crate::frame::flow_of(&[0u8; 10]), 0);
    let mut arp = a.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(crate::frame::flow_of(&arp), 0);
}
