//! Issue 40's "pictures a person would publish", as a user meets them through `netsweep
//! report`: legends that name only what differs (or what `--label` says), runs of one size
//! drawn as one mark each instead of size sweeps of one dot, no empty ratio chart for runs
//! with no size in common, and axis titles that carry their unit.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn data(name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// `v` with only its point at `keep` (index), written to `dir/name.json`.
fn one_point(dir: &Path, name: &str, mut v: Value, keep: usize) -> PathBuf {
    let p = v["points"][keep].clone();
    v["points"] = Value::Array(vec![p]);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    path
}

fn ok(o: &std::process::Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn runs_of_one_size_are_one_mark_each_and_no_empty_ratio_is_drawn() {
    let dir = scratch("pictures-one-size");
    // A 1 B probe and a 64 KiB bulk run: no size in common, one point each.
    let probe = one_point(&dir, "probe", data("tcp-pingpong.json"), 0);
    let bulk = one_point(&dir, "bulk", data("unix-stream.json"), 3);
    let (svg, html) = (dir.join("svg"), dir.join("r.html"));
    let o = run(&[
        "report",
        probe.to_str().unwrap(),
        bulk.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    ok(&o);
    let mut files: Vec<String> = std::fs::read_dir(&svg)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    // Throughput (both runs) and RTT/2 (the pingpong): no signature, stream or CPU figure
    // against a size axis with one dot per run.
    assert_eq!(files, ["latency.svg", "throughput.svg"]);
    let tp = std::fs::read_to_string(svg.join("throughput.svg")).unwrap();
    assert!(tp.contains("Throughput of each run"), "{tp}");
    // Each mark is named by its run and the size it measured.
    assert!(
        tp.contains(">tcp · pingpong (1 B)<") && tp.contains(">unix-stream · stream (64 KiB)<"),
        "{tp}"
    );
    // 1 B of pingpong beside a unix stream: over two decades apart, so a log axis.
    assert!(tp.contains("throughput (log scale)"), "{tp}");
    assert!(tp.contains(r#"class="error-bar""#), "the interval is drawn");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("fig-ratio"), "an empty ratio chart");
    assert!(
        page.contains("share no measured point, so there is no ratio to draw"),
        "the page says why there is no ratio"
    );
}

#[test]
fn labels_are_what_differs_or_what_the_user_gives_and_axes_carry_units() {
    let dir = scratch("pictures-labels");
    let tcp = data("tcp-pingpong.json");
    let mut big = tcp.clone();
    big["spec"]["client_knobs"]["sndbuf"] = 262144.into();
    big["spec"]["server_knobs"]["sndbuf"] = 262144.into();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    std::fs::write(&a, tcp.to_string()).unwrap();
    std::fs::write(&b, big.to_string()).unwrap();
    let unix = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/unix-stream.json");
    let files = [
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        unix.to_str().unwrap(),
    ];
    let svg = dir.join("svg");
    let mut args = vec!["report"];
    args.extend(files);
    args.extend(["--svg", svg.to_str().unwrap()]);
    ok(&run(&args));
    let tp = std::fs::read_to_string(svg.join("throughput.svg")).unwrap();
    let labels: Vec<&str> = tp
        .split(r#"class="series" data-label=""#)
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    // sndbuf once (the server's mirrors it), no nodelay for the unix socket, no family.
    assert_eq!(
        labels,
        [
            "tcp · pingpong · sndbuf=default",
            "tcp · pingpong · sndbuf=262144",
            "unix-stream · stream"
        ]
    );
    assert!(tp.contains(">throughput (Gbit/s)<") || tp.contains(">throughput (Mbit/s)<"));
    // --label, one per file, wins; a count that does not match is a usage error.
    args.extend(["--label", "before", "--label", "after", "--label", "unix"]);
    ok(&run(&args));
    let tp = std::fs::read_to_string(svg.join("throughput.svg")).unwrap();
    assert!(tp.contains(r#"data-label="before""#) && tp.contains(r#"data-label="unix""#));
    args.truncate(args.len() - 2);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("2 --label for 3 files"), "{err}");
    // compare takes them too: its verdict lines name the runs so.
    let o = run(&[
        "compare",
        files[0],
        files[1],
        "--label",
        "default buffers",
        "--label",
        "256 KiB buffers",
    ]);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("A: default buffers") && text.contains("B: 256 KiB buffers"),
        "{text}"
    );
}
