//! The architecture's rules, checked on the source tree (issue 10): which crate may depend on
//! which, the model crate without IO, a `//!` line atop every module, no file over 600
//! lines, and docs/architecture.md naming every crate. docs/architecture.md explains the rules;
//! this test keeps them true.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The netsweep crates a manifest's `[dependencies]` (not dev-dependencies) names.
fn netsweep_deps(manifest: &Path) -> BTreeSet<String> {
    let text = fs::read_to_string(manifest).unwrap();
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && line.starts_with("netsweep-") {
            let name = line.split(['.', ' ', '=']).next().unwrap();
            deps.insert(name.to_string());
        }
    }
    deps
}

/// The dependency rules of docs/architecture.md, crate by crate.
const RULES: &[(&str, &[&str])] = &[
    ("netsweep-proto", &[]),
    ("netsweep-model", &["netsweep-proto"]),
    ("netsweep-tool", &[]),
    ("netsweep-endpoint", &["netsweep-proto"]),
    (
        "netsweep-transport",
        &[
            "netsweep-endpoint",
            "netsweep-model",
            "netsweep-proto",
            "netsweep-tool",
        ],
    ),
    (
        "netsweep-engine",
        &[
            "netsweep-endpoint",
            "netsweep-iperf3",
            "netsweep-model",
            "netsweep-proto",
            "netsweep-tool",
        ],
    ),
    ("netsweep-report", &["netsweep-model", "netsweep-proto"]),
    (
        "netsweep-lab",
        &["netsweep-emu", "netsweep-model", "netsweep-tool"],
    ),
    ("netsweep-emu", &[]),
    ("netsweep-iperf3", &[]),
];

#[test]
fn every_crate_depends_only_on_what_the_rules_allow() {
    let mut seen = BTreeSet::new();
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let rule = RULES.iter().find(|(c, _)| *c == name).unwrap_or_else(|| {
            panic!("crates/{name} has no dependency rule: add it to RULES here and to docs/architecture.md")
        });
        let allowed: BTreeSet<String> = rule.1.iter().map(|s| s.to_string()).collect();
        let deps = netsweep_deps(&dir.join("Cargo.toml"));
        assert_eq!(deps, allowed, "crates/{name}/Cargo.toml [dependencies]");
        seen.insert(name);
    }
    assert_eq!(seen.len(), RULES.len(), "a rule names a crate that is gone");
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn sources(under: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&root().join(under), &mut files);
    files.sort();
    files
}

#[test]
fn the_model_does_no_io() {
    // Parsing addresses (std::net::IpAddr) and formatting a given time are values, not IO.
    const FORBIDDEN: &[&str] = &[
        "std::fs",
        "File::",
        "TcpStream",
        "TcpListener",
        "UdpSocket",
        "os::unix::net",
        "std::thread",
        "std::process",
        "Instant::now",
        "SystemTime::now",
        "libc::",
        "std::env",
        "stdin()",
        "println!",
        "eprintln!",
    ];
    let files = sources("crates/netsweep-model/src");
    assert!(files.len() >= 6, "model sources found: {files:?}");
    let mut bad = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for word in FORBIDDEN {
                if code.contains(word) {
                    bad.push(format!("{}:{}: {word}", f.display(), n + 1));
                }
            }
        }
    }
    assert!(bad.is_empty(), "IO in the model crate:\n{}", bad.join("\n"));
    let manifest = fs::read_to_string(root().join("crates/netsweep-model/Cargo.toml")).unwrap();
    for dep in ["libc", "socket2", "io-uring"] {
        assert!(!manifest.contains(dep), "the model depends on {dep}");
    }
}

/// Files allowed over the line limit, each with the reason one algorithm needs the length.
const LONG_FILES: &[(&str, &str)] = &[];

#[test]
fn every_module_says_what_it_is_and_stays_short() {
    const LIMIT: usize = 600;
    let mut files = sources("src");
    files.extend(sources("crates"));
    let mut undocumented = Vec::new();
    let mut long = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        let rel = f
            .strip_prefix(root())
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        if !first.starts_with("//!") {
            undocumented.push(rel.clone());
        }
        let lines = text.lines().count();
        if lines > LIMIT && !LONG_FILES.iter().any(|(p, _)| *p == rel) {
            long.push(format!("{rel}: {lines} lines"));
        }
    }
    assert!(
        undocumented.is_empty(),
        "modules without a `//!` line on top: {undocumented:?}"
    );
    assert!(
        long.is_empty(),
        "files over {LIMIT} lines (split them, or add them to LONG_FILES with the reason):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_architecture_doc_names_every_crate() {
    let doc = fs::read_to_string(root().join("docs/architecture.md"))
        .expect("docs/architecture.md exists");
    for (name, _) in RULES {
        assert!(
            doc.contains(&format!("crates/{name}")),
            "docs/architecture.md does not describe crates/{name}"
        );
    }
}
