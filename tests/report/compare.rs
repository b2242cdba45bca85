//! `netsweep compare` (issue 39 item 3) as a user meets it: a headline first, points paired on
//! what the runs swept (offered load as well as size), a usage error when nothing pairs, and
//! the A/A and A/B verdicts on recorded runs: two identical default runs flag at most 5% of
//! their points; a known effect is flagged.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn compare_json(a: &Path, b: &Path) -> Value {
    let o = run(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Rows of the first comparison's metric `m`, and how many of them were judged different.
fn flagged(c: &Value, m: &str) -> (usize, usize) {
    let mc = c["comparisons"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["metric"] == m)
        .unwrap_or_else(|| panic!("no {m} in {c}"));
    let rows = mc["rows"].as_array().unwrap();
    let diff = rows
        .iter()
        .filter(|r| r["verdict"] == "better" || r["verdict"] == "worse")
        .count();
    assert_eq!(mc["differing"].as_u64().unwrap() as usize, diff);
    (rows.len(), diff)
}

#[test]
fn the_text_leads_with_one_headline_per_metric() {
    let f = data("tcp-pingpong.json");
    let o = run(&["compare", f.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut lines = text.lines();
    let first = lines.next().unwrap();
    assert!(
        first.starts_with("throughput: no difference beyond 2% at any of ")
            && first.contains("median change +0.0%"),
        "{text}"
    );
    assert!(
        lines.next().unwrap().starts_with("latency: no difference"),
        "{text}"
    );
}

/// A copy of the recorded pingpong run turned into a rate sweep at one size: each point gets
/// the offered load `rates[i]` and throughput `mbps[i]`.
fn rate_run(dir: &Path, name: &str, rates: &[f64], mbps: &[f64]) -> PathBuf {
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(data("tcp-pingpong.json")).unwrap()).unwrap();
    let first = v["points"][0].clone();
    let points: Vec<Value> = rates
        .iter()
        .zip(mbps)
        .map(|(&r, &m)| {
            let mut p = first.clone();
            p["size"] = 64.into();
            p["rate"] = serde_json::json!({ "offered_rate": r });
            p["throughput_mbps"]["mean"] = m.into();
            p["throughput_mbps"]["ci95"] = (m * 0.01).into();
            p
        })
        .collect();
    v["points"] = points.into();
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    p
}

#[test]
fn rate_sweeps_pair_on_the_offered_load_not_the_size() {
    let dir = scratch("compare-rates");
    // One size, three offered loads: the delivered throughput grows with the load. Paired by
    // size alone, every point of B would meet A's first and be "faster" or "slower".
    let a = rate_run(&dir, "a.json", &[1e3, 1e4, 1e5], &[0.5, 5.0, 50.0]);
    let b = rate_run(&dir, "b.json", &[1e5, 1e3, 1e4], &[50.0, 0.5, 5.0]);
    let c = compare_json(&a, &b);
    assert_eq!(flagged(&c, "throughput"), (3, 0), "{c}");
    let rows = c["comparisons"][0]["metrics"][0]["rows"]
        .as_array()
        .unwrap();
    let rates: Vec<f64> = rows
        .iter()
        .map(|r| r["offered_rate"].as_f64().unwrap())
        .collect();
    assert_eq!(rates, [1e3, 1e4, 1e5]);
    // Other offered loads share nothing with A: a usage error that says what each swept.
    let other = rate_run(&dir, "c.json", &[2e3, 2e4], &[1.0, 10.0]);
    let o = run(&["compare", a.to_str().unwrap(), other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("share no measured point")
            && err.contains("A measured 3 points, 64 B at 1k/s–100k/s offered")
            && err.contains("B measured 2 points, 64 B at 2k/s–20k/s offered"),
        "{err}"
    );
}

#[test]
fn runs_without_a_common_size_are_a_usage_error() {
    let (a, b) = (data("tcp-pingpong.json"), data("unix-stream.json"));
    let va: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    let dir = scratch("compare-disjoint");
    let mut vb = va.clone();
    for p in vb["points"].as_array_mut().unwrap() {
        p["size"] = (p["size"].as_u64().unwrap() + 1).into();
    }
    let shifted = dir.join("shifted.json");
    std::fs::write(&shifted, serde_json::to_string(&vb).unwrap()).unwrap();
    let o = run(&["compare", a.to_str().unwrap(), shifted.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("compare runs of the same sweep"));
    // Files that do share sizes still compare.
    assert_eq!(
        run(&["compare", a.to_str().unwrap(), b.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
}
