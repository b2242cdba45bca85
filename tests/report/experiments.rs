//! The seed pages are generated from their committed results (issue 31): every
//! `docs/experiments/<seed>/` that holds a scenario's results (`scenario.toml`, `index.json`,
//! the results files packed in `results.jsonl`, every one the index says was written) and its
//! page is written again here by `netsweep scenario page` from those results alone, and must
//! come out as committed — the page, its figures and the verdicts — listing every warning its
//! runs recorded. The verdict table in docs/experiments/README.md must be what `verdicts.py`
//! makes of the committed verdicts.

use crate::common::{bin, scratch};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Copies the files of `from` (and of its `figures/`) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            fs::copy(&p, &dest).unwrap();
        }
    }
}

/// The committed seed results directories.
fn seed_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(root().join("docs/experiments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("index.json").is_file() && p.join("scenario.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn verdicts(index: &Path) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(index).unwrap()).unwrap();
    v["verdicts"].clone()
}

#[test]
fn every_seed_page_is_what_its_committed_results_give() {
    let dirs = seed_dirs();
    assert!(
        !dirs.is_empty(),
        "no seed results are committed under docs/experiments/"
    );
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_str().unwrap();
        // The committed scenario is the seed's: a claim or a figure changed in one and not the
        // other would show a page its scenario file no longer asks for.
        // A seed's scenario is in scenarios/seeds/; an experiment beyond the seeds (the
        // bufferbloat page) in scenarios/emulated/.
        let seed = ["seeds", "emulated"]
            .map(|d| root().join(format!("scenarios/{d}/{name}.toml")))
            .into_iter()
            .find(|p| p.is_file())
            .unwrap_or_else(|| root().join(format!("scenarios/seeds/{name}.toml")));
        assert!(
            fs::read_to_string(&seed).ok() == fs::read_to_string(dir.join("scenario.toml")).ok(),
            "{name}/scenario.toml is not {}: rerun docs/experiments/regenerate (a change of \
             claims or runs) or copy it there and rewrite the page (a change of prose or \
             figures only)",
            seed.display()
        );
        // Every results file the index says its run wrote is committed, in the bundle.
        let index: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
        let bundle = fs::read_to_string(dir.join("results.jsonl")).unwrap_or_default();
        let packed: std::collections::BTreeSet<String> = bundle
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["file"].as_str().unwrap().to_string()
            })
            .collect();
        let written: Vec<&str> = index["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["results_written"] == true)
            .filter_map(|r| r["results"].as_str())
            .collect();
        assert!(!written.is_empty(), "{name}: its index names no results");
        for f in &written {
            assert!(
                packed.contains(*f) || dir.join(f).is_file(),
                "{name}: {f} is not committed (neither a file nor in results.jsonl)"
            );
        }
        // The page names the command that wrote it, with the directory as given: write it
        // from the same relative path, in a copy.
        let work = scratch(&format!("experiments-{name}"));
        let rel = Path::new("docs/experiments").join(name);
        let copy = work.join(&rel);
        copy_dir(dir, &copy);
        let o = Command::new(bin())
            .args(["scenario", "page", rel.to_str().unwrap()])
            .current_dir(&work)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "netsweep scenario page {}: {}",
            rel.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        let page = |d: &Path| fs::read_to_string(d.join("page.md")).unwrap();
        assert!(
            page(dir) == page(&copy),
            "{name}/page.md is not what its committed results give: run `netsweep scenario \
             page {}` and commit the page (diff {} {})",
            rel.display(),
            dir.join("page.md").display(),
            copy.join("page.md").display()
        );
        // Every warning a run recorded is on the page, one row each, and nothing else is.
        let recorded: Vec<String> = bundle
            .lines()
            .flat_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let ws = v["results"]["warnings"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                ws.into_iter()
                    .map(|w| w.as_str().unwrap().replace('|', "\\|"))
                    .collect::<Vec<_>>()
            })
            .collect();
        let text = page(dir);
        let section = text
            .split_once("## What the runs warned")
            .map_or("", |(_, s)| s.split("\n## ").next().unwrap_or(""));
        let rows = section.lines().filter(|l| l.starts_with("| ")).count();
        assert_eq!(
            rows,
            recorded.len() + usize::from(!recorded.is_empty()),
            "{name}: the page's warning rows (after the header) are not its results' warnings"
        );
        for w in &recorded {
            assert!(
                section.contains(w.as_str()),
                "{name}: the page omits the warning {w}"
            );
        }
        assert_eq!(
            verdicts(&dir.join("index.json")),
            verdicts(&copy.join("index.json")),
            "{name}: the committed verdicts are not what its results give"
        );
        let mut figures = 0;
        for e in fs::read_dir(copy.join("figures")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "svg") {
                let committed = dir.join("figures").join(p.file_name().unwrap());
                assert!(
                    fs::read(&committed).ok() == Some(fs::read(&p).unwrap()),
                    "{} differs from what its results give",
                    committed.display()
                );
                figures += 1;
            }
        }
        assert!(figures > 0, "{name}: its page draws no figure");
    }
}

#[test]
fn the_readme_verdict_table_is_the_committed_verdicts() {
    let o = Command::new("python3")
        .arg(root().join("docs/experiments/verdicts.py"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("claims from"),
        "verdicts.py --check said nothing about what it checked: {said}"
    );
}
