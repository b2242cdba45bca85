//! The README's pandas snippet, run as written (issue 15 item 3): a real udp stream run is
//! written as run.csv and run.json, the ```python block of the README's "Results files"
//! section runs on them with Debian's pandas, and the frames it builds must hold the run's
//! figures — column names, dtypes, one row per point, values equal to the JSON's; a `--flows`
//! run's CSV has one row per point × flow, equal to its JSON's per-flow counts.

use crate::common::*;
use netsweep_model::results;
use std::process::Command;

/// The README's pandas snippet (the first ```python block after "## Results files").
fn readme_snippet() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = &readme[readme
        .find("## Results files")
        .expect("a Results files section")..];
    let start = section
        .find("```python\n")
        .expect("a ```python block in Results files")
        + 10;
    let len = section[start..].find("```").unwrap();
    section[start..start + len].to_string()
}

/// Appended to the snippet: reports what its frames hold, as JSON.
const CHECK: &str = r#"
import json as _json
print("CHECK " + _json.dumps({
    "csv_columns": list(points.columns),
    "csv_dtypes": {c: str(t) for c, t in points.dtypes.items()},
    "csv_size": points["size"].tolist(),
    "csv_throughput": points["throughput_mbps"].tolist(),
    "csv_lost": points["lost"].fillna(-1).tolist(),
    "csv_loss_ratio": points["loss_ratio"].fillna(-1).tolist(),
    "csv_precision_met": points["precision_met"].tolist(),
    "json_size": nested["size"].tolist(),
    "json_throughput": nested["throughput_mbps.mean"].tolist(),
    "csv_p99": points["latency_p99_ns"].fillna(-1).tolist(),
    "json_lost": nested["loss.lost"].tolist() if "loss.lost" in nested else None,
    "json_p99": nested["latency.half_rtt_ns.p99"].tolist() if "latency.half_rtt_ns.p99" in nested else None,
}))
"#;

#[test]
#[ignore = "needs python3-pandas: ./run-tests installs it as root"]
fn the_readme_pandas_snippet_loads_a_real_run() {
    let test = "the_readme_pandas_snippet_loads_a_real_run";
    require_python_module(test, "pandas", "python3-pandas");

    for (name, pattern) in [
        ("pingpong", &["--sizes", "1,1k,64k"][..]),
        (
            "udp-stream",
            &["-t", "udp", "-p", "stream", "--sizes", "64,1k,1472"][..],
        ),
    ] {
        check_run(name, pattern);
    }
}

/// Runs netsweep with `args` into run.csv + run.json, runs the snippet on them, compares.
fn check_run(name: &str, run_args: &[&str]) {
    let dir = scratch(&format!("pandas-{name}"));
    let mut args = vec!["run", "-q", "--save-dir", dir.to_str().unwrap(), "-o"];
    let csv = dir.join("run.csv");
    args.push(csv.to_str().unwrap());
    args.extend_from_slice(run_args);
    args.extend_from_slice(QUICK);
    let o = Command::new(bin()).args(&args).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let saved: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(saved.len(), 1);
    std::fs::rename(&saved[0], dir.join("run.json")).unwrap();
    let run = results::load(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();

    let script = readme_snippet() + CHECK;
    let o = Command::new("/usr/bin/python3")
        .args(["-c", &script])
        .current_dir(&dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "the README snippet failed on the {name} run: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let check = out
        .lines()
        .find_map(|l| l.strip_prefix("CHECK "))
        .expect("the check ran");
    let v: serde_json::Value = serde_json::from_str(check).unwrap();

    let header: Vec<&str> = netsweep_report::csv::HEADER.trim_end().split(',').collect();
    assert_eq!(v["csv_columns"], serde_json::json!(header));
    assert_eq!(v["csv_dtypes"]["size"], "int64");
    assert_eq!(v["csv_dtypes"]["throughput_mbps"], "float64");
    assert_eq!(v["csv_dtypes"]["precision_met"], "bool");
    let sizes: Vec<u64> = run.points.iter().map(|p| p.size).collect();
    assert_eq!(v["csv_size"], serde_json::json!(sizes));
    assert_eq!(v["json_size"], serde_json::json!(sizes));
    for (i, p) in run.points.iter().enumerate() {
        assert_eq!(v["csv_precision_met"][i], p.precision_met);
        // The CSV rounds to 3 decimals; the JSON is exact.
        let csv_mbps = v["csv_throughput"][i].as_f64().unwrap();
        assert!((csv_mbps - p.throughput_mbps.mean).abs() <= 0.0005 + 1e-9);
        assert_eq!(
            v["json_throughput"][i].as_f64().unwrap(),
            p.throughput_mbps.mean
        );
        match (&p.loss, &p.latency) {
            (Some(loss), None) => {
                assert_eq!(v["csv_dtypes"]["lost"], "int64");
                assert_eq!(v["csv_lost"][i], loss.lost);
                assert_eq!(v["json_lost"][i], loss.lost);
                // Printed in full (shortest round-trip digits) and read back by the README's
                // float_precision="round_trip": exact (pandas' default parser read
                // 0.03924646781789639 as 0.0392464678178963).
                let r = v["csv_loss_ratio"][i].as_f64().unwrap();
                assert_eq!(r, loss.ratio, "the loss ratio read back exactly");
            }
            (None, Some(l)) => {
                let p99 = l.half_rtt_ns.p99;
                assert!((v["csv_p99"][i].as_f64().unwrap() - p99).abs() <= 0.0005 + 1e-9);
                assert_eq!(v["json_p99"][i].as_f64().unwrap(), p99);
                assert_eq!(
                    v["csv_lost"][i].as_f64(),
                    Some(-1.0),
                    "no loss for tcp pingpong"
                );
            }
            other => panic!("{name}: unexpected point shape {other:?}"),
        }
    }
}

/// A `--flows` run's CSV has one row per point × flow, read by pandas as is: each row's point
/// and flow figures and byte counts equal the JSON's, and for tcp what the client sent on a
/// flow is what the server received on it.
#[test]
#[ignore = "needs python3-pandas: ./run-tests installs it as root"]
fn a_flows_run_has_a_row_per_point_and_flow() {
    require_python_module(
        "a_flows_run_has_a_row_per_point_and_flow",
        "pandas",
        "python3-pandas",
    );
    let dir = scratch("pandas-flows");
    let (csv, json) = (dir.join("run.csv"), dir.join("run.json"));
    let mut args = vec!["run", "-q", "--no-save", "-o", json.to_str().unwrap()];
    args.extend_from_slice(&["-p", "stream", "-P", "3", "--sizes", "1k,64k"]);
    args.extend_from_slice(QUICK);
    let o = Command::new(bin()).args(&args).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The CSV of the same run, re-rendered from its results file.
    let o = Command::new(bin())
        .args([
            "report",
            json.to_str().unwrap(),
            "-o",
            csv.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    const CHECK: &str = r#"
import json, pandas as pd
f = pd.read_csv("run.csv", float_precision="round_trip")
print("CHECK " + json.dumps({
    "rows": len(f),
    "columns": list(f.columns),
    "flow": f["flow"].tolist(),
    "size": f["size"].tolist(),
    "figure": f["flow_figure"].tolist(),
    "aggregate_by_size": f.groupby("size")["flows_aggregate"].first().tolist(),
    "client_sent": f["flow_client_bytes_sent"].tolist(),
    "server_received": f["flow_server_bytes_received"].tolist(),
}))
"#;
    let o = Command::new("/usr/bin/python3")
        .args(["-c", CHECK])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value =
        serde_json::from_str(out.lines().find_map(|l| l.strip_prefix("CHECK ")).unwrap()).unwrap();
    assert_eq!(v["rows"], 6, "2 sizes × 3 flows");
    assert_eq!(v["flow"], serde_json::json!([0, 1, 2, 0, 1, 2]));
    assert_eq!(
        v["size"],
        serde_json::json!([1024, 1024, 1024, 65536, 65536, 65536])
    );
    let columns: Vec<String> = serde_json::from_value(v["columns"].clone()).unwrap();
    assert_eq!(columns.last().unwrap(), "flow_server_messages_received");
    assert!(columns.contains(&"fairness".to_string()));
    let run = results::load(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mut i = 0;
    for (p, agg) in run
        .points
        .iter()
        .zip(v["aggregate_by_size"].as_array().unwrap())
    {
        let f = p.flows.as_ref().expect("a flows point");
        assert_eq!(f.per_flow.len(), 3);
        // The CSV rounds figures to 3 decimals; the JSON is exact.
        assert!((agg.as_f64().unwrap() - f.aggregate).abs() <= 0.0005 + 1e-9);
        for flow in &f.per_flow {
            assert!((v["figure"][i].as_f64().unwrap() - flow.figure).abs() <= 0.0005 + 1e-9);
            assert!(flow.figure > 0.0);
            assert_eq!(v["client_sent"][i], flow.client.bytes_sent);
            assert_eq!(v["server_received"][i], flow.server.bytes_received);
            i += 1;
        }
    }
    assert_eq!(
        v["client_sent"], v["server_received"],
        "tcp: sent = received per flow"
    );
}
