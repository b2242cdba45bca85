//! `lab clean`: removes whatever labs left behind (a crash, a kill -9): every `nsw-` namespace
//! (ending the processes inside), every `nsw-` link and nft table in the root namespace, and
//! every state file. Only names with the `nsw-` prefix are touched. It also removes labs that
//! are still up, including one a running scenario uses.

use crate::cmd;
use crate::error::Result;
use crate::names::PREFIX;
use crate::netns;
use crate::preflight::preflight;
use crate::state;
use std::path::PathBuf;
use std::time::Duration;

/// What `clean()` removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Processes ended inside them.
    pub processes_ended: usize,
    /// Links deleted from the root namespace.
    pub links: Vec<String>,
    /// nft tables deleted from the root namespace ("family name").
    pub nft_tables: Vec<String>,
    /// State files removed.
    pub state_files: Vec<PathBuf>,
    /// What could not be removed, with the reason.
    pub errors: Vec<String>,
}

impl CleanReport {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
            && self.links.is_empty()
            && self.nft_tables.is_empty()
            && self.state_files.is_empty()
    }
}

impl std::fmt::Display for CleanReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_empty() && self.errors.is_empty() {
            return writeln!(
                f,
                "nothing to clean: no nsw- namespaces, links, nft tables or lab state files"
            );
        }
        for n in &self.namespaces {
            writeln!(f, "removed namespace {n}")?;
        }
        if self.processes_ended > 0 {
            writeln!(f, "ended {} process(es) left in them", self.processes_ended)?;
        }
        for l in &self.links {
            writeln!(f, "removed link {l}")?;
        }
        for t in &self.nft_tables {
            writeln!(f, "removed nft table {t}")?;
        }
        for s in &self.state_files {
            writeln!(f, "removed state file {}", s.display())?;
        }
        for e in &self.errors {
            writeln!(f, "could not remove: {e}")?;
        }
        Ok(())
    }
}

/// Names of `nsw-` links in the root namespace (from `ip -j link show`).
fn root_links() -> Result<Vec<String>> {
    let out = cmd::run(
        "listing links",
        "ip",
        &["-j".into(), "link".into(), "show".into()],
        None,
    )?;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    Ok(v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l.get("ifname")?.as_str())
                .filter(|n| n.starts_with(PREFIX))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default())
}

/// `(family, name)` of `nsw-` nft tables in the root namespace (from `nft -j list tables`).
fn root_nft_tables() -> Result<Vec<(String, String)>> {
    let out = cmd::run(
        "listing nft tables",
        "nft",
        &["-j".into(), "list".into(), "tables".into()],
        None,
    )?;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    Ok(v.get("nftables")
        .and_then(|n| n.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|e| {
                    let t = e.get("table")?;
                    Some((
                        t.get("family")?.as_str()?.to_string(),
                        t.get("name")?.as_str()?.to_string(),
                    ))
                })
                .filter(|(_, n)| n.starts_with(PREFIX))
                .collect()
        })
        .unwrap_or_default())
}

/// Removes every `nsw-` namespace, root-namespace link and nft table, and every lab state file.
pub fn clean() -> Result<CleanReport> {
    preflight()?;
    let mut r = CleanReport::default();
    for ns in netns::list()?.into_iter().filter(|n| n.starts_with(PREFIX)) {
        r.processes_ended += netns::kill_processes(&ns, Duration::from_secs(2));
        match netns::delete(&ns) {
            Ok(()) => r.namespaces.push(ns),
            Err(e) => r.errors.push(e.to_string()),
        }
    }
    for link in root_links()? {
        // Deleting one end of a veth removes its peer: it may be gone already.
        match cmd::run(
            &format!("removing link {link}"),
            "ip",
            &["link".into(), "del".into(), link.clone()],
            None,
        ) {
            Ok(_) => r.links.push(link),
            Err(e) => {
                if root_links()?.contains(&link) {
                    r.errors.push(e.to_string());
                }
            }
        }
    }
    for (family, name) in root_nft_tables()? {
        match cmd::run(
            &format!("removing nft table {family} {name}"),
            "nft",
            &[
                "delete".into(),
                "table".into(),
                family.clone(),
                name.clone(),
            ],
            None,
        ) {
            Ok(_) => r.nft_tables.push(format!("{family} {name}")),
            Err(e) => r.errors.push(e.to_string()),
        }
    }
    for (path, _) in state::list() {
        match std::fs::remove_file(&path) {
            Ok(()) => r.state_files.push(path),
            Err(e) => r.errors.push(format!("{}: {e}", path.display())),
        }
    }
    // Path emulators' directories (`<run id>.emu`): their processes died with their namespaces.
    if let Ok(entries) = std::fs::read_dir(state::TMP_DIR) {
        for p in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if p.extension().is_some_and(|x| x == "emu") && std::fs::remove_dir_all(&p).is_ok() {
                r.state_files.push(p);
            }
        }
    }
    r.state_files.sort();
    r.state_files.dedup();
    Ok(r)
}
