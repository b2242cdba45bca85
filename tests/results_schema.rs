//! The results file's JSON Schema (issue 15 item 3): `docs/schema/netsweep-result.schema.json`
//! is generated from the Rust types and must equal what they generate now (regenerate with
//! `NETSWEEP_BLESS=1 cargo test --test results_schema`); an independent validator (Python's
//! jsonschema) checks the archived files, fresh runs of every pattern, and every results file
//! the test suite wrote under target/tmp (./run-tests runs this last for that reason).

use common::*;
use netsweep_testkit::exe as common;
use std::path::{Path, PathBuf};
use std::process::Command;

fn schema_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/netsweep-result.schema.json")
}

#[test]
fn the_committed_schema_is_the_generated_one() {
    let generated =
        serde_json::to_string_pretty(&netsweep_model::schema::results_schema()).unwrap() + "\n";
    if std::env::var_os("NETSWEEP_BLESS").is_some() {
        std::fs::write(schema_path(), &generated).unwrap();
    }
    let committed = std::fs::read_to_string(schema_path()).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/schema/netsweep-result.schema.json is stale: regenerate it with \
         NETSWEEP_BLESS=1 cargo test --test results_schema (and bump schema_version if the \
         format changed)"
    );
}

/// Validates each file with Python's jsonschema; returns (file, error) for each that fails.
fn invalid(files: &[PathBuf]) -> Vec<(PathBuf, String)> {
    // A mesh file (schema netsweep-mesh) carries a run's results per pair: each is validated.
    const VALIDATE: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
v = Draft202012Validator(schema)
for f in sys.argv[2:]:
    doc = json.load(open(f))
    if doc.get("schema") == "netsweep-mesh":
        runs = [("pairs/%d/result/" % i, p["result"])
                for i, p in enumerate(doc.get("pairs", [])) if p.get("result") is not None]
    else:
        runs = [("", doc)]
    for prefix, run in runs:
        errors = sorted(v.iter_errors(run), key=lambda e: list(e.path))
        for e in errors[:3]:
            print(f + "\t" + prefix + "/".join(map(str, e.path)) + ": " + e.message[:200])
"#;
    let o = Command::new("/usr/bin/python3")
        .args(["-c", VALIDATE])
        .arg(schema_path())
        .args(files)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let (f, e) = l.split_once('\t').unwrap();
            (PathBuf::from(f), e.to_string())
        })
        .collect()
}

/// Every `netsweep-result` JSON file under `dir`, recursively.
fn results_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            results_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json")
            && std::fs::read_to_string(&p).is_ok_and(|t| {
                t.contains("\"schema\": \"netsweep-result\"")
                    || t.contains("\"schema\": \"netsweep-mesh\"")
            })
        {
            out.push(p);
        }
    }
}

fn require_validator(test: &str) {
    require_python_module(test, "jsonschema", "python3-jsonschema");
}

#[test]
#[ignore = "needs python3-jsonschema: ./run-tests installs it as root"]
fn archived_and_fresh_runs_of_every_pattern_are_valid() {
    require_validator("archived_and_fresh_runs_of_every_pattern_are_valid");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    results_files(&root.join("tests/data"), &mut files);
    results_files(&root.join("tests/golden"), &mut files);
    let archived = files.len();
    assert!(archived >= 4, "{files:?}");
    let dir = scratch("schema-runs");
    for (name, args) in [
        ("tcp-pingpong", &["--sizes", "1,1k"][..]),
        (
            "udp-stream",
            &["-t", "udp", "-p", "stream", "--sizes", "64,1k"][..],
        ),
        (
            "unix-stream",
            &["-t", "unix", "-p", "stream", "--sizes", "4k"][..],
        ),
        ("tcp-crr", &["-p", "crr", "--sizes", "1"][..]),
        (
            "udp-pingpong-one-trial",
            &[
                "-t",
                "udp",
                "--sizes",
                "1",
                "--trial-time",
                "20ms",
                "--max-point-time",
                "1ms",
                "--timeout",
                "5s",
            ][..],
        ),
    ] {
        let out = dir.join(format!("{name}.json"));
        let mut a = vec!["run", "--no-save", "-q", "-o", out.to_str().unwrap()];
        a.extend_from_slice(args);
        if !args.contains(&"--trial-time") {
            a.extend_from_slice(QUICK);
        }
        let o = run(&a);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        files.push(out);
    }
    let bad = invalid(&files);
    assert!(
        bad.is_empty(),
        "results files that break the schema: {bad:#?}"
    );

    // The validator does validate: a wrong type and a missing field are caught.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[archived]).unwrap()).unwrap();
    v["points"][0]["size"] = "one".into();
    v.as_object_mut().unwrap().remove("spec");
    let broken = dir.join("broken.json");
    std::fs::write(&broken, v.to_string()).unwrap();
    let bad = invalid(&[broken]);
    let text = format!("{bad:?}");
    assert!(
        text.contains("points/0/size") && text.contains("'spec' is a required property"),
        "{text}"
    );
}

/// Run last by ./run-tests: every results file the whole suite wrote is valid.
#[test]
#[ignore = "needs python3-jsonschema: ./run-tests runs it after the suite"]
fn every_results_file_the_suite_wrote_is_valid() {
    require_validator("every_results_file_the_suite_wrote_is_valid");
    let mut files = Vec::new();
    results_files(Path::new(env!("CARGO_TARGET_TMPDIR")), &mut files);
    eprintln!("validating {} results files under target/tmp", files.len());
    // A check of nothing passes nothing: the suite before it writes dozens of runs.
    assert!(
        files.len() >= 10,
        "only {} results files under {}: this test validates what the rest of the suite \
         wrote, so run it after the suite (./run-tests does)",
        files.len(),
        env!("CARGO_TARGET_TMPDIR")
    );
    let bad = invalid(&files);
    assert!(
        bad.is_empty(),
        "results files that break the schema: {bad:#?}"
    );
}
