//! Tests of the load model: rate parsing, the `--rates` grammar, the schedules' mean rates,
//! and the knee rule.

use super::*;
use crate::results::{Latency, PointResult};

#[test]
fn rates_parse_as_messages_or_bits() {
    assert_eq!(Rate::parse("10k"), Ok(Rate::MessagesPerSec(10_000.0)));
    assert_eq!(Rate::parse("2500"), Ok(Rate::MessagesPerSec(2500.0)));
    assert_eq!(Rate::parse("1.5M"), Ok(Rate::MessagesPerSec(1.5e6)));
    assert_eq!(Rate::parse("50mbit"), Ok(Rate::BitsPerSec(50e6)));
    assert_eq!(Rate::parse("1Gbit"), Ok(Rate::BitsPerSec(1e9)));
    assert_eq!(Rate::parse("800kbps"), Ok(Rate::BitsPerSec(800e3)));
    // 50 Mbit/s of 1250-byte messages: 5000 messages/s.
    assert_eq!(Rate::BitsPerSec(50e6).per_second(1250), 5000.0);
    assert_eq!(Rate::MessagesPerSec(7.0).per_second(1250), 7.0);
    for bad in ["", "fast", "0", "-5k", "10x", "mbit"] {
        assert!(Rate::parse(bad).is_err(), "{bad}");
    }
    assert!(Rate::parse("fast").unwrap_err().contains("50mbit"));
    assert_eq!(si(12_500.0), "12.5k");
    assert_eq!(si(64_000.0), "64k");
}

#[test]
fn rate_sweeps_use_the_sizes_grammar_with_decimal_suffixes() {
    assert_eq!(
        parse_rates("1k..64k:*2").unwrap(),
        [1e3, 2e3, 4e3, 8e3, 16e3, 32e3, 64e3]
    );
    assert_eq!(
        parse_rates("500,5k..20k:+5k").unwrap(),
        [500.0, 5e3, 10e3, 15e3, 20e3]
    );
    assert!(parse_rates("1k..8k").unwrap_err().contains("no step"));
    assert!(parse_rates("8k..1k:*2")
        .unwrap_err()
        .contains("start is above"));
    assert!(parse_rates("1k..8k:*1").is_err());
    assert!(parse_rates("1k..8k:+0").is_err());
    assert!(parse_rates("").is_err());
    assert!(parse_rates("1..1M:+1").unwrap_err().contains("more than"));
}

#[test]
fn load_specs_are_checked() {
    let mut l = LoadSpec {
        rate: None,
        rates: vec![],
        rates_spec: String::new(),
        arrivals: Arrivals::Constant,
        seed: 1,
    };
    assert!(l.validate(&[64]).unwrap_err().contains("--rate 10k"));
    l.rates = vec![1e3, 2e3];
    assert!(l.validate(&[64, 128]).unwrap_err().contains("one size"));
    assert_eq!(l.validate(&[64]), Ok(()));
    l.rate = Some(Rate::MessagesPerSec(1.0));
    assert!(l.validate(&[64]).unwrap_err().contains("not both"));
}

#[test]
fn a_constant_schedule_is_evenly_spaced() {
    let mut s = Schedule::new(10_000.0, Arrivals::Constant, 7);
    let due: Vec<u64> = (0..5).map(|_| s.next_due()).collect();
    assert_eq!(due, [0, 100_000, 200_000, 300_000, 400_000]);
}

#[test]
fn a_poisson_schedule_keeps_its_mean_rate_and_its_seed() {
    let n = 200_000;
    let mut s = Schedule::new(50_000.0, Arrivals::Poisson, 42);
    let mut last = 0;
    let mut gaps = Vec::with_capacity(n);
    for _ in 0..n {
        let d = s.next_due();
        gaps.push((d - last) as f64);
        last = d;
    }
    // n gaps of mean 20 µs: the mean within 1%, and an exponential's CV of 1 within 2%.
    let mean = gaps[1..].iter().sum::<f64>() / (n - 1) as f64;
    assert!((mean / 20_000.0 - 1.0).abs() < 0.01, "mean gap {mean}");
    let var = gaps[1..].iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 2) as f64;
    let cv = var.sqrt() / mean;
    assert!((cv - 1.0).abs() < 0.02, "cv {cv}");
    // The same seed gives the same schedule; another seed another.
    let firsts = |seed| {
        let mut s = Schedule::new(50_000.0, Arrivals::Poisson, seed);
        (0..4).map(|_| s.next_due()).collect::<Vec<_>>()
    };
    assert_eq!(firsts(42), firsts(42));
    assert_ne!(firsts(42), firsts(43));
    assert_ne!(Schedule::trial_seed(42, 1), Schedule::trial_seed(42, 2));
}

fn point(offered: f64, delivered: f64, p50: f64) -> PointResult {
    let mut p: PointResult =
        crate::results::load(include_str!("../../../../tests/data/udp-stream.json"))
            .unwrap()
            .points[0]
            .clone();
    let mut l = Latency::default();
    l.rtt_ns.p50 = p50;
    p.latency = Some(l);
    p.rate = Some(RateFigures {
        offered_rate: offered,
        delivered_rate: Estimate {
            mean: delivered,
            ..Default::default()
        },
        ..Default::default()
    });
    p
}

#[test]
fn the_knee_is_the_first_load_past_which_everything_is_saturated() {
    let cfg = KneeConfig::default();
    // Flat latency to 8k, then the queue grows; delivery stops following at 32k.
    let pts = [
        point(1e3, 1e3, 20_000.0),
        point(2e3, 2e3, 21_000.0),
        point(4e3, 4e3, 19_000.0),
        point(8e3, 8e3, 25_000.0),
        point(16e3, 15.9e3, 90_000.0),
        point(32e3, 20e3, 5e6),
        point(64e3, 20e3, 9e6),
    ];
    let k = find_knee(&pts, &cfg).unwrap();
    assert_eq!((k.offered_rate, k.below_rate), (16e3, Some(8e3)));
    assert!(k.latency && !k.delivery);
    assert!((k.p50_ratio - 4.5).abs() < 1e-9);
    assert!(k.detail.contains("between 8k and 16k"), "{}", k.detail);
    // Order does not matter.
    let mut rev = pts.to_vec();
    rev.reverse();
    assert_eq!(find_knee(&rev, &cfg), Some(k));
}

#[test]
fn a_lone_slow_point_is_not_a_knee_and_delivery_alone_is_one() {
    let cfg = KneeConfig::default();
    let blip = [
        point(1e3, 1e3, 20_000.0),
        point(2e3, 2e3, 80_000.0),
        point(4e3, 4e3, 21_000.0),
    ];
    assert_eq!(find_knee(&blip, &cfg), None);
    let flat = [point(1e3, 1e3, 20_000.0), point(2e3, 2e3, 20_000.0)];
    assert_eq!(find_knee(&flat, &cfg), None);
    assert_eq!(find_knee(&flat[..1], &cfg), None);
    // A fast path's median doubling by microseconds far below capacity is noise, not a queue:
    // 50 µs more at 800/s is 0.04 requests waiting (Little's law).
    let fast = [
        point(500.0, 500.0, 40_000.0),
        point(800.0, 800.0, 90_000.0),
        point(950.0, 950.0, 1_680_000.0),
    ];
    let k = find_knee(&fast, &cfg).unwrap();
    assert_eq!((k.offered_rate, k.below_rate), (950.0, Some(800.0)));
    // Delivery falls behind while latency stays (a policer drops instead of queueing).
    let policed = [
        point(1e3, 1e3, 20_000.0),
        point(2e3, 1.99e3, 20_000.0),
        point(4e3, 3e3, 22_000.0),
        point(8e3, 3e3, 22_000.0),
    ];
    let k = find_knee(&policed, &cfg).unwrap();
    assert_eq!((k.offered_rate, k.below_rate), (4e3, Some(2e3)));
    assert!(k.delivery && !k.latency);
    assert!((k.delivered_ratio - 0.75).abs() < 1e-9);
    // Already past at the lowest load: said so, without a bracket.
    let low = [point(1e3, 0.5e3, 20_000.0), point(2e3, 0.5e3, 20_000.0)];
    let k = find_knee(&low, &cfg).unwrap();
    assert_eq!(k.below_rate, None);
    assert!(k.detail.contains("sweep lower loads"));
}

#[test]
fn a_default_rate_trial_holds_a_thousand_requests_at_the_lowest_load() {
    let at = |rate: Option<Rate>, rates: &[f64]| LoadSpec {
        rate,
        rates: rates.to_vec(),
        rates_spec: String::new(),
        arrivals: Arrivals::Constant,
        seed: 1,
    };
    // 1000 requests at 2k/s: half a second.
    let one = at(Some(Rate::MessagesPerSec(2000.0)), &[]);
    assert_eq!(one.lowest_per_second(&[64]), Some(2000.0));
    assert_eq!(one.default_trial_ns(&[64]), 500_000_000);
    // A sweep is paced by its slowest load: 1k/s, one second.
    let sweep = at(None, &[64e3, 1e3, 8e3]);
    assert_eq!(sweep.default_trial_ns(&[64]), 1_000_000_000);
    // A bit rate is slowest at the largest size: 8 Mbit/s of 1000 B = 1000/s.
    let bits = at(Some(Rate::BitsPerSec(8e6)), &[]);
    assert_eq!(bits.lowest_per_second(&[100, 1000]), Some(1000.0));
    assert_eq!(bits.default_trial_ns(&[100, 1000]), 1_000_000_000);
    // Bounded both ways.
    let fast = at(Some(Rate::MessagesPerSec(1e6)), &[]);
    assert_eq!(fast.default_trial_ns(&[64]), TRIAL_NS_MIN);
    let slow = at(Some(Rate::MessagesPerSec(10.0)), &[]);
    assert_eq!(slow.default_trial_ns(&[64]), TRIAL_NS_MAX);
    assert_eq!(at(None, &[]).lowest_per_second(&[64]), None);
}
