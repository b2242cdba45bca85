//! A results directory's run files packed into one `results.jsonl` (`scenario pack`): a line
//! per file, its name and its results compact, so a scenario of a hundred runs is one file to
//! commit. A run is read from its own file when that is there, else from the bundle.

use netsweep_atomic::replace_with;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// The bundle's file name in a results directory.
pub const BUNDLE: &str = "results.jsonl";

/// The largest bundle read: a scenario's results are megabytes, this is 256 of them.
const MAX_BUNDLE_BYTES: u64 = 256 << 20;

/// The results in `dir`'s bundle by file name (empty when there is no bundle).
pub fn read(dir: &Path) -> Result<BTreeMap<String, serde_json::Value>, String> {
    let path = dir.join(BUNDLE);
    let len = match std::fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if len > MAX_BUNDLE_BYTES {
        return Err(format!(
            "{} is {len} bytes, over the {MAX_BUNDLE_BYTES} a bundle may hold: it is not one \
             `netsweep scenario pack` wrote",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = BTreeMap::new();
    for (i, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        // A line is `{"file": "<run>.json", "results": {…}}`.
        let damaged = |why: String| {
            format!(
                "{} line {}: {why}: the bundle is damaged; restore it (git checkout) or rerun the \
                 scenario",
                path.display(),
                i + 1
            )
        };
        let mut line: serde_json::Value =
            serde_json::from_str(l).map_err(|e| damaged(e.to_string()))?;
        let (Some(file), Some(results)) = (
            line["file"].as_str().map(String::from),
            line.get_mut("results").map(serde_json::Value::take),
        ) else {
            return Err(damaged("no file name or no results".into()));
        };
        if out.insert(file.clone(), results).is_some() {
            return Err(damaged(format!("{file} is in the bundle twice")));
        }
    }
    Ok(out)
}

/// Packs the files `names` of `dir` that exist into its bundle (beside what it already
/// holds; a file replaces its namesake there), reads the bundle back, and only when every
/// file came back as the same JSON removes the files. Returns (files packed, bundle bytes).
pub fn pack(dir: &Path, names: &[String]) -> Result<(usize, u64), String> {
    let mut all = read(dir)?;
    let mut packed = Vec::new();
    for n in names {
        let p = dir.join(n);
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {}: {e}", p.display())),
        };
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is not JSON ({e}): remove it or rerun its run",
                p.display()
            )
        })?;
        all.insert(n.clone(), v);
        packed.push(n.clone());
    }
    let path = dir.join(BUNDLE);
    replace_with(&path, |f| {
        let mut w = std::io::BufWriter::new(f);
        for (file, results) in &all {
            let line = serde_json::json!({ "file": file, "results": results });
            serde_json::to_writer(&mut w, &line)?;
            w.write_all(b"\n")?;
        }
        w.flush()
    })
    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if read(dir)? != all {
        return Err(format!(
            "{} did not read back as written; the results files are kept",
            path.display()
        ));
    }
    for n in &packed {
        let p = dir.join(n);
        std::fs::remove_file(&p).map_err(|e| format!("cannot remove {}: {e}", p.display()))?;
    }
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    Ok((packed.len(), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_files_read_back_and_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("a-r1.json"),
            "{\n  \"x\": 1.5,\n  \"y\": [1, 2]\n}\n",
        )
        .unwrap();
        std::fs::write(d.join("b-r1.json"), "{\"x\": 2}").unwrap();
        let names = ["a-r1.json", "b-r1.json", "missing-r1.json"].map(String::from);
        assert_eq!(pack(d, &names).unwrap().0, 2);
        assert!(!d.join("a-r1.json").exists() && !d.join("b-r1.json").exists());
        let got = read(d).unwrap();
        assert_eq!(got["a-r1.json"]["y"][1], 2);
        assert_eq!(got["b-r1.json"]["x"], 2);
        // Packing again adds to the bundle and replaces a file's namesake.
        std::fs::write(d.join("b-r1.json"), "{\"x\": 3}").unwrap();
        std::fs::write(d.join("c-r1.json"), "{}").unwrap();
        let names = ["b-r1.json", "c-r1.json"].map(String::from);
        assert_eq!(pack(d, &names).unwrap().0, 2);
        let got = read(d).unwrap();
        assert_eq!((got.len(), got["b-r1.json"]["x"].as_u64()), (3, Some(3)));
    }

    #[test]
    fn a_damaged_or_doubled_bundle_is_refused_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(read(d).unwrap().is_empty(), "no bundle reads as empty");
        std::fs::write(
            d.join(BUNDLE),
            "{\"file\":\"a.json\",\"results\":{}}\n{\"file\":",
        )
        .unwrap();
        assert!(read(d).unwrap_err().contains("line 2"));
        let twice = "{\"file\":\"a.json\",\"results\":{}}\n".repeat(2);
        std::fs::write(d.join(BUNDLE), twice).unwrap();
        assert!(read(d).unwrap_err().contains("twice"));
        // A file that is not JSON is not packed, and nothing is removed.
        std::fs::write(d.join(BUNDLE), "").unwrap();
        std::fs::write(d.join("bad.json"), "{").unwrap();
        assert!(pack(d, &["bad.json".into()]).is_err());
        assert!(d.join("bad.json").exists());
    }
}
