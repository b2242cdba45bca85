//! `--format openmetrics` (issue 15 item 4): a real run written as a `.prom` file is parsed by
//! the Python prometheus_client OpenMetrics parser (strict: types, units, `# EOF`), and every
//! sample it reads must equal the figure in the same run's JSON results.

use crate::common::*;
use netsweep_model::results;
use std::process::Command;

/// Parses an exposition with prometheus_client; returns `name{labels} value` per sample, as
/// JSON lines `[name, {labels}, value]`.
const PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in fam.samples:
        print(json.dumps([fam.type, s.name, s.labels, s.value]))
"#;

fn parse(path: &std::path::Path) -> Vec<(String, String, serde_json::Value, f64)> {
    let o = Command::new("/usr/bin/python3")
        .args(["-c", PARSE])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the OpenMetrics parser rejected {}: {}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v[0].as_str().unwrap().to_string(),
                v[1].as_str().unwrap().to_string(),
                v[2].clone(),
                v[3].as_f64().unwrap(),
            )
        })
        .collect()
}

fn load_json(p: &std::path::Path) -> results::RunResult {
    results::load(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
#[ignore = "needs python3-prometheus-client: ./run-tests installs it as root"]
fn a_prom_file_parses_and_matches_the_results() {
    let test = "a_prom_file_parses_and_matches_the_results";
    require_python_module(test, "prometheus_client", "python3-prometheus-client");
    for (name, args) in [
        ("pingpong", &["--sizes", "1,1k"][..]),
        (
            "udp-stream",
            &["-t", "udp", "-p", "stream", "--sizes", "64,1k"][..],
        ),
    ] {
        // One run writes both: the .prom (-o, format from the extension) and the saved JSON.
        let dir = scratch(&format!("openmetrics-{name}"));
        let prom = dir.join("run.prom");
        let mut all = vec!["run", "-q", "--save-dir", dir.to_str().unwrap(), "-o"];
        all.push(prom.to_str().unwrap());
        all.extend_from_slice(args);
        all.extend_from_slice(QUICK);
        let o = Command::new(bin()).args(&all).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        let saved: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        assert_eq!(saved.len(), 1, "{saved:?}");
        let run = load_json(&saved[0]);
        let samples = parse(&prom);
        let value = |metric: &str, size: u64, extra: Option<(&str, &str)>| -> f64 {
            let size = size.to_string();
            let hits: Vec<f64> = samples
                .iter()
                .filter(|(_, n, l, _)| {
                    n == metric
                        && l["size"] == size.as_str()
                        && l["transport"] == run.spec.transport.name()
                        && l["pattern"] == run.spec.pattern.name()
                        && extra.is_none_or(|(k, v)| l[k] == v)
                })
                .map(|s| s.3)
                .collect();
            assert_eq!(hits.len(), 1, "{metric} size {size}: {hits:?}");
            hits[0]
        };
        for p in &run.points {
            let bps = value("netsweep_throughput_bits_per_second", p.size, None);
            assert!((bps / (p.throughput_mbps.mean * 1e6) - 1.0).abs() < 1e-12);
            if let Some(l) = &p.latency {
                let q = value(
                    "netsweep_half_rtt_seconds",
                    p.size,
                    Some(("quantile", "0.99")),
                );
                assert!((q / (l.half_rtt_ns.p99 / 1e9) - 1.0).abs() < 1e-12);
                let n = value("netsweep_half_rtt_seconds_count", p.size, None);
                assert_eq!(n as u64, l.half_rtt_ns.count);
                // Issue 39 item 7: the mean latency's interval, as bounds.
                if let Some(ci) = l.half_rtt_ns.ci95 {
                    let hi = value(
                        "netsweep_half_rtt_mean_ci95_seconds",
                        p.size,
                        Some(("bound", "upper")),
                    );
                    assert!((hi / ((l.half_rtt_ns.mean + ci) / 1e9) - 1.0).abs() < 1e-12);
                }
            }
            if let Some(ci) = p.throughput_mbps.ci95 {
                let lo = value(
                    "netsweep_throughput_ci95_bits_per_second",
                    p.size,
                    Some(("bound", "lower")),
                );
                let want = (p.throughput_mbps.mean - ci).max(0.0) * 1e6;
                assert!((lo - want).abs() <= want.abs() * 1e-12, "{lo} {want}");
            }
            if let Some(l) = &p.loss {
                assert_eq!(
                    value("netsweep_datagrams_sent", p.size, None) as u64,
                    l.sent
                );
                assert_eq!(
                    value("netsweep_datagrams_lost", p.size, None) as u64,
                    l.lost
                );
                let lo = value("netsweep_loss_ci95_ratio", p.size, Some(("bound", "lower")));
                let hi = value("netsweep_loss_ci95_ratio", p.size, Some(("bound", "upper")));
                assert!(
                    lo <= l.ratio && l.ratio <= hi && hi > 0.0,
                    "{lo} {} {hi}",
                    l.ratio
                );
            }
        }
        let info: Vec<_> = samples
            .iter()
            .filter(|s| s.1 == "netsweep_run_info")
            .collect();
        assert_eq!(info.len(), 1);
        assert_eq!(info[0].0, "info");
        assert_eq!(info[0].2["status"], "complete");
        let points = samples
            .iter()
            .find(|s| s.1 == "netsweep_run_points")
            .unwrap();
        assert_eq!(points.3 as usize, run.points.len());
    }
}

/// `--format openmetrics` without `-o` writes the exposition to stdout (issue 26 item 5: it
/// wrote nothing): the document `report` renders from the saved file.
#[test]
fn openmetrics_without_o_goes_to_stdout() {
    let dir = scratch("openmetrics-stdout");
    let mut all = vec![
        "run",
        "--format",
        "openmetrics",
        "--sizes",
        "1,2",
        "--save-dir",
        dir.to_str().unwrap(),
    ];
    all.extend_from_slice(QUICK);
    let o = Command::new(bin()).args(&all).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("# TYPE ") || out.starts_with("# HELP "),
        "{out}"
    );
    assert!(out.ends_with("# EOF\n"), "{out}");
    let saved: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let report = Command::new(bin())
        .args(["report", "-f", "openmetrics"])
        .arg(&saved[0])
        .output()
        .unwrap();
    // The same samples (a `_sum`, mean × count, may differ in its last digit: the saved mean
    // went through JSON).
    let series = |doc: &str| -> Vec<String> {
        doc.lines()
            .map(|l| l.rsplit_once(' ').map_or(l, |(k, _)| k).to_string())
            .collect()
    };
    assert_eq!(
        series(&out),
        series(&String::from_utf8_lossy(&report.stdout))
    );
}
