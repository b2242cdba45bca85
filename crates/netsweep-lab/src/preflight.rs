//! Can this machine build a lab? Root, and the tools `ip`, `tc`, `nft`, `ethtool`; the error
//! says what to install or how to run.

use crate::cmd::find_tool;
use crate::error::{LabError, Result};

/// The tools a lab needs, with the Debian package that ships each.
pub const TOOLS: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("tc", "iproute2"),
    ("nft", "nftables"),
    ("ethtool", "ethtool"),
];

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The tools of [`TOOLS`] that are missing.
pub fn missing_tools() -> Vec<&'static str> {
    TOOLS
        .iter()
        .filter(|(t, _)| find_tool(t).is_none())
        .map(|(t, _)| *t)
        .collect()
}

/// Checks root and tools; the error names every problem and its fix.
pub fn preflight() -> Result<()> {
    let mut problems = Vec::new();
    if !is_root() {
        problems.push(
            "a lab needs root (namespaces, links, qdiscs and nft rules are privileged): run it as root, e.g. `sudo netsweep …`"
                .to_string(),
        );
    }
    let missing = missing_tools();
    if !missing.is_empty() {
        let mut packages: Vec<&str> = TOOLS
            .iter()
            .filter(|(t, _)| missing.contains(t))
            .map(|(_, p)| *p)
            .collect();
        packages.dedup();
        problems.push(format!(
            "missing {}: install with `apt-get install {}` (all lab tools: `apt-get install iproute2 nftables ethtool`)",
            missing.join(", "),
            packages.join(" ")
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(LabError::Preflight(format!(
            "cannot build a lab here:\n  - {}",
            problems.join("\n  - ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preflight_matches_the_machine() {
        let r = preflight();
        if is_root() && missing_tools().is_empty() {
            assert!(r.is_ok());
        } else {
            let e = r.unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let m = e.to_string();
            assert!(m.contains("root") || m.contains("apt-get install"), "{m}");
        }
    }
}
