//! Runs anomaly detection over saved results files and prints what it finds, one line per
//! anomaly, and a count: the tool behind the false-positive study in docs/anomalies.md.
//!
//! `cargo run --release -p netsweep-report --example anomaly_scan -- FILE...`

use netsweep_model::{anomaly, results};

fn main() {
    let (mut files, mut flagged, mut total) = (0, 0, 0);
    for f in std::env::args().skip(1) {
        let run = match std::fs::read_to_string(&f)
            .map_err(|e| e.to_string())
            .and_then(|t| results::load(&t).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{f}: {e}");
                continue;
            }
        };
        files += 1;
        let found = anomaly::detect_run(&run);
        if !found.is_empty() {
            flagged += 1;
        }
        total += found.len();
        for a in &found {
            println!(
                "{f}: {} {}..{} ({} points) magnitude {:.2} confidence {:.3}: {}",
                a.kind.name(),
                a.from_size,
                a.to_size,
                a.points,
                a.magnitude,
                a.confidence,
                a.detail
            );
        }
    }
    println!("{files} runs, {flagged} with an anomaly, {total} anomalies");
}
