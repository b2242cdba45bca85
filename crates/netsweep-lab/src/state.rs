//! State files: one JSON [`Layout`] per lab that is up, so `lab show`, `lab exec` and
//! `lab down` in another process can find it. Kept in /run/netsweep/labs, or
//! /tmp/netsweep/labs when /run is not writable.

use crate::error::{LabError, Result};
use crate::layout::Layout;
use std::path::{Path, PathBuf};

/// Preferred state directory.
pub const RUN_DIR: &str = "/run/netsweep/labs";
/// Fallback state directory.
pub const TMP_DIR: &str = "/tmp/netsweep/labs";

fn dirs() -> [PathBuf; 2] {
    [PathBuf::from(RUN_DIR), PathBuf::from(TMP_DIR)]
}

fn file_name(run_id: &str) -> String {
    format!("{run_id}.json")
}

/// Writes the state file of `layout`, returning its path.
pub fn write(layout: &Layout) -> Result<PathBuf> {
    let json = serde_json::to_string_pretty(layout)
        .map_err(|e| LabError::io("encoding the lab state", std::io::Error::other(e)))?;
    let mut last_err = None;
    for dir in dirs() {
        match std::fs::create_dir_all(&dir) {
            Ok(()) => {
                let path = dir.join(file_name(&layout.run_id));
                match netsweep_atomic::write_atomic(&path, &json) {
                    Ok(()) => return Ok(path),
                    Err(e) => last_err = Some((dir, e)),
                }
            }
            Err(e) => last_err = Some((dir, e)),
        }
    }
    let (dir, e) = last_err.unwrap_or_else(|| {
        (
            PathBuf::from(TMP_DIR),
            std::io::Error::other("no state directory"),
        )
    });
    Err(LabError::io(
        format!("writing the lab state file in {}", dir.display()),
        e,
    ))
}

/// The state file of run `run_id`, if there is one.
pub fn find(run_id: &str) -> Option<PathBuf> {
    dirs()
        .into_iter()
        .map(|d| d.join(file_name(run_id)))
        .find(|p| p.exists())
}

/// Reads one state file.
pub fn read(path: &Path) -> Result<Layout> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LabError::io(format!("reading {}", path.display()), e))?;
    serde_json::from_str(&text).map_err(|e| {
        LabError::Usage(format!(
            "{} is not a lab state file ({e}): remove it, or run `netsweep lab clean`",
            path.display()
        ))
    })
}

/// Every state file, with its layout when readable.
pub fn list() -> Vec<(PathBuf, Result<Layout>)> {
    let mut out = Vec::new();
    for dir in dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for p in paths {
            let l = read(&p);
            out.push((p, l));
        }
    }
    out
}

/// Removes the state file of run `run_id` (from both directories), and its path emulators'
/// files.
pub fn remove(run_id: &str) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for dir in dirs() {
        let p = dir.join(file_name(run_id));
        if std::fs::remove_file(&p).is_ok() {
            removed.push(p);
        }
    }
    let emu = PathBuf::from(crate::emulation::files_dir(run_id));
    if std::fs::remove_dir_all(&emu).is_ok() {
        removed.push(emu);
    }
    removed
}
