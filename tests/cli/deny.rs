//! Issue 44 item 7: the dependency audit CI runs. `cargo deny check bans sources` with the
//! project's `deny.toml` passes on the workspace (every crate from crates.io, none of the
//! versions banned for their advisories), and refuses a graph that holds a banned version —
//! `tests/data/deny-fixture`, which depends on atty 0.2.14 (banned by name) and idna 0.5.0
//! (banned by a version range) — naming each crate and its advisory. The RustSec database is
//! not reachable from these machines (github.com), so the advisories are banned by version
//! in `deny.toml`; ./run-tests also runs `cargo deny check advisories` where it is reachable.

use crate::common::*;
use std::path::Path;
use std::process::Command;

fn deny(manifest: &Path, checks: &[&str]) -> std::process::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Command::new("cargo")
        .arg("deny")
        .arg("--manifest-path")
        .arg(manifest)
        .arg("check")
        .arg("--config")
        .arg(root.join("deny.toml"))
        .args(checks)
        .output()
        .unwrap()
}

#[test]
#[ignore = "needs cargo-deny (cargo install cargo-deny): ./run-tests installs it and runs this"]
fn the_workspace_passes_the_audit_and_a_banned_version_is_refused_by_name() {
    require_tool(
        "the_workspace_passes_the_audit",
        "cargo-deny",
        "cargo-deny (cargo install cargo-deny --version 0.18.9 --locked)",
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ok = deny(&root.join("Cargo.toml"), &["bans", "sources"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&ok.stdout),
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(ok.status.success(), "{said}");
    assert!(said.contains("bans ok, sources ok"), "{said}");
    let bad = deny(
        &root.join("tests/data/deny-fixture/Cargo.toml"),
        &["bans", "sources"],
    );
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success(), "{err}");
    for (krate, advisory) in [
        ("atty = 0.2.14", "RUSTSEC-2021-0145"),
        ("idna = 0.5.0", "RUSTSEC-2024-0421"),
    ] {
        assert!(
            err.contains(&format!("crate '{krate}' is explicitly banned")),
            "{krate}: {err}"
        );
        assert!(err.contains(advisory), "{advisory}: {err}");
    }
}
