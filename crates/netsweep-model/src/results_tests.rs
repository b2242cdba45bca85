//! Tests of the results model: loading, summaries and per-point figures, on values.

use super::*;

const SAMPLE: &str = include_str!("../../../tests/data/udp-stream.json");

/// Time per transfer: RTT/2 when there is latency, size ÷ rate otherwise, none without
/// a rate.
#[test]
fn transfer_time_of_each_kind_of_point() {
    let mut p = load(SAMPLE).unwrap().points[0].clone();
    assert!(p.latency.is_none(), "the sample is a stream run");
    (p.size, p.throughput_mbps.mean) = (1000, 8.0);
    // 8000 bits at 8 Mbit/s: 1 ms.
    assert!((p.transfer_ns().unwrap() - 1e6).abs() < 1e-6);
    p.throughput_mbps.mean = 0.0;
    assert_eq!(p.transfer_ns(), None);
    let mut l = Latency::default();
    l.half_rtt_ns.mean = 1234.5;
    p.latency = Some(l);
    assert_eq!(p.transfer_ns(), Some(1234.5));
}

#[test]
fn loads_the_archived_sample_and_refuses_others() {
    // Written by schema version 1 (before flows, rate and background): still loads.
    let r = load(SAMPLE).unwrap();
    assert_eq!(r.schema_version, 1);
    assert!(r
        .points
        .iter()
        .all(|p| p.flows.is_none() && p.rate.is_none()));
    assert!(SCHEMA_VERSION > r.schema_version);
    assert!(!r.points.is_empty());
    assert!(matches!(load("{}"), Err(LoadError::Schema(_))));
    assert!(matches!(load("[1,2]"), Err(LoadError::Schema(_))));
    // The right schema without its points: says what is missing, not "not JSON".
    let mut v: serde_json::Value = serde_json::from_str(SAMPLE).unwrap();
    v.as_object_mut().unwrap().remove("points");
    let e = load(&v.to_string()).unwrap_err().to_string();
    assert!(
        e.contains("missing field `points`") && !e.contains("not JSON"),
        "{e}"
    );
    let newer = SAMPLE.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1);
    assert!(matches!(load(&newer), Err(LoadError::TooNew(99))));
}

#[test]
fn no_input_makes_the_loader_panic() {
    // Every prefix of a real file, and the file with bytes flipped (deterministic xorshift).
    for cut in (0..SAMPLE.len()).step_by(97) {
        let _ = load(&SAMPLE[..SAMPLE.floor_char_boundary(cut)]);
    }
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes = SAMPLE.as_bytes();
    for _ in 0..300 {
        let mut b = bytes.to_vec();
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % b.len() as u64) as usize;
            b[i] = (x >> 32) as u8;
        }
        let _ = load(&String::from_utf8_lossy(&b));
    }
}

#[test]
fn a_loaded_file_saves_every_number_as_written() {
    // serde_json parses floats exactly only with `float_roundtrip`: without it, 1 in a few
    // hundred of a results file's figures came back one unit in the last place off, so a
    // page written from reloaded results could not equal one written at the run.
    let mut checked = 0;
    let v: serde_json::Value = serde_json::from_str(SAMPLE).unwrap();
    let mut stack = vec![&v];
    while let Some(x) = stack.pop() {
        match x {
            serde_json::Value::Array(a) => stack.extend(a),
            serde_json::Value::Object(o) => stack.extend(o.values()),
            serde_json::Value::Number(n) if n.is_f64() => {
                let text = n.to_string();
                assert!(
                    SAMPLE.contains(&text),
                    "{text} is not in the file as written"
                );
                checked += 1;
            }
            _ => {}
        }
    }
    assert!(checked > 100, "only {checked} floats in the sample");
    assert_eq!(
        serde_json::from_str::<f64>("0.10857637339874475")
            .unwrap()
            .to_string(),
        "0.10857637339874475"
    );
}
