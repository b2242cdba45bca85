//! The architecture's rules, checked on the source tree: which crate may depend on which, the
//! model crate without IO, a `//!` line atop every module, no file over 600 lines (or a reason
//! why), no import circle inside a folder (beyond the known tangles, which may only shrink),
//! and docs/architecture.md naming every crate. docs/architecture.md explains the rules;
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
    ("netsweep-atomic", &[]),
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
            "netsweep-atomic",
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
        &[
            "netsweep-atomic",
            "netsweep-emu",
            "netsweep-model",
            "netsweep-tool",
        ],
    ),
    ("netsweep-emu", &["netsweep-atomic"]),
    ("netsweep-iperf3", &[]),
    ("netsweep-rpm", &["netsweep-model"]),
    ("netsweep-testkit", &["netsweep-lab", "netsweep-proto"]),
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

/// A source file's module path within its crate (`crates/x/src/engine/measure.rs` →
/// `["engine", "measure"]`; `lib.rs`, `main.rs` and `mod.rs` name their folder).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_str().unwrap().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The module paths a file's code names (`crate::a::b`, `super::c`, `self::d`, grouped
/// imports `crate::a::{b, c::d}` included), resolved against the file's own path. Inline test
/// modules are left out: they only look at their own file.
fn referenced_paths(text: &str, own: &[String]) -> Vec<Vec<String>> {
    // A file's tests (its trailing `#[cfg(test)] mod tests`) look at that file: cut there, and
    // only there (a `#[cfg(test)]` on a declaration above must not hide the code below it).
    let cut = text
        .match_indices("#[cfg(test)]")
        .map(|(at, m)| at + m.len())
        .find(|&after| {
            let rest = text[after..].trim_start();
            rest.starts_with("mod tests") || rest.starts_with("#[path")
        })
        .map_or(text.len(), |after| after - "#[cfg(test)]".len());
    let code = &text[..cut];
    let code: String = code
        .lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    let ident = |i: usize| -> (String, usize) {
        let mut j = i;
        while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
            j += 1;
        }
        (code[i..j].to_string(), j)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let start = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|p| boundary && bytes[i..].starts_with(p.as_bytes()));
        let Some(p) = start else {
            i += 1;
            continue;
        };
        // The folder the path starts from: the crate root, or this module's parent.
        let mut base: Vec<String> = match p {
            "crate::" => Vec::new(),
            // A `mod.rs` (or lib.rs) is its folder's module: `self::` is the folder.
            "self::" => own.to_vec(),
            _ => own[..own.len().saturating_sub(1)].to_vec(),
        };
        i += p.len();
        loop {
            if bytes[i..].starts_with(b"super::") {
                base.pop();
                i += "super::".len();
                continue;
            }
            if bytes.get(i) == Some(&b'{') {
                // Each entry's first segment, at the brace's depth.
                let mut depth = 0;
                let mut j = i;
                let mut entry_start = true;
                while j < bytes.len() {
                    match bytes[j] {
                        b'{' => {
                            depth += 1;
                            entry_start = depth == 1;
                        }
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        b',' if depth == 1 => entry_start = true,
                        c if entry_start
                            && depth == 1
                            && (c.is_ascii_alphabetic() || c == b'_') =>
                        {
                            let (name, end) = ident(j);
                            let mut q = base.clone();
                            q.push(name);
                            out.push(q);
                            entry_start = false;
                            j = end;
                            continue;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                i = j;
                break;
            }
            let (name, end) = ident(i);
            if name.is_empty() {
                break;
            }
            base.push(name);
            i = end;
            if bytes[i..].starts_with(b"::") {
                i += 2;
                continue;
            }
            break;
        }
        out.push(base);
    }
    out
}

/// Tangles that were there when the rule came (2026-11-26): modules of one folder that reach
/// each other through their imports. Each is debt to pay when its folder is next reworked; the
/// test fails on any new tangle, and on one of these that changed (untangled: take it off).
const KNOWN_TANGLES: &[(&str, &[&str])] = &[
    // Patterns name the server's session sockets and limits; the server names the patterns'
    // registrations.
    ("crates/netsweep-engine/src", &["pattern", "server"]),
    ("crates/netsweep-iperf3/src", &["control", "data", "server"]),
    (
        "crates/netsweep-lab/src",
        &[
            "build",
            "emulation",
            "layout",
            "shaping",
            "state",
            "topology",
        ],
    ),
    (
        "crates/netsweep-lab/src",
        &["expand", "experiment", "factors", "scenario"],
    ),
    // The results, the spec and their parts refer to each other's types (serde model).
    (
        "crates/netsweep-model/src",
        &[
            "anomaly",
            "background",
            "flows",
            "load",
            "results",
            "spec",
            "timeline",
        ],
    ),
    (
        "crates/netsweep-proto/src",
        &["client", "server", "test_util"],
    ),
    // Every transport module names the registry (descriptors, knobs) and the registry names
    // every transport: descriptors want to be the leaves, the registry the root.
    (
        "crates/netsweep-transport/src",
        &[
            "api",
            "basic",
            "crr",
            "descriptor",
            "gso",
            "ip",
            "knobs",
            "mmsg",
            "mpi",
            "mptcp",
            "packet",
            "quic",
            "registry",
            "sendfile",
            "shm",
            "splice",
            "tls",
            "udplite",
            "unix",
            "uring",
            "xdp",
            "zerocopy",
        ],
    ),
];

/// Modules of one folder must not import each other in a circle: a folder's files are a
/// layered unit a reader can take in order (issue 28). Two siblings' dependency is where
/// their paths part: `engine::measure` naming `engine::calibration::Plan` makes `measure` depend
/// on `calibration` inside `engine/`. Every crate's `src/` and the binary's are checked.
#[test]
fn no_folder_has_an_import_circle() {
    use std::collections::{BTreeMap, BTreeSet};
    let mut roots = vec![root().join("src")];
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        roots.push(entry.unwrap().path().join("src"));
    }
    let mut circles: Vec<(String, Vec<String>)> = Vec::new();
    let mut edges_seen = 0;
    for src in roots {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(&src, f)).collect();
        // folder → sibling → siblings it depends on
        let mut graph: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for f in &files {
            let name = f.file_name().unwrap().to_str().unwrap();
            if name.ends_with("_tests.rs") {
                continue; // a file's tests, included with #[path]: they look at that file
            }
            let own = module_path(&src, f);
            let text = fs::read_to_string(f).unwrap();
            for q in referenced_paths(&text, &own) {
                let l = own.iter().zip(&q).take_while(|(a, b)| a == b).count();
                if l >= own.len() || l >= q.len() {
                    continue; // a parent naming its child, or a child its parent
                }
                let folder = own[..l].to_vec();
                let mut target = folder.clone();
                target.push(q[l].clone());
                if !modules.contains(&target) {
                    continue; // an item of the parent module, not a sibling
                }
                edges_seen += 1;
                graph
                    .entry(folder)
                    .or_default()
                    .entry(own[l].clone())
                    .or_default()
                    .insert(q[l].clone());
            }
        }
        for (folder, g) in &graph {
            // The folder's tangles: sets of modules each of which reaches every other.
            let reach = |from: &str| {
                let mut seen = BTreeSet::new();
                let mut todo = vec![from.to_string()];
                while let Some(n) = todo.pop() {
                    for m in g.get(&n).into_iter().flatten() {
                        if seen.insert(m.clone()) {
                            todo.push(m.clone());
                        }
                    }
                }
                seen
            };
            let mut placed = BTreeSet::new();
            for n in g.keys() {
                if placed.contains(n) {
                    continue;
                }
                let from = reach(n);
                if !from.contains(n) {
                    continue;
                }
                let tangle: BTreeSet<String> = from
                    .iter()
                    .filter(|m| reach(m).contains(n))
                    .cloned()
                    .collect();
                placed.extend(tangle.iter().cloned());
                let at = src.parent().unwrap().strip_prefix(root()).unwrap();
                let at = if at.as_os_str().is_empty() {
                    "src".to_string()
                } else {
                    format!("{}/src", at.display())
                };
                let folder = if folder.is_empty() {
                    at
                } else {
                    format!("{at}/{}", folder.join("/"))
                };
                let members: Vec<String> = tangle.into_iter().collect();
                circles.push((folder, members));
            }
        }
    }
    assert!(edges_seen > 100, "the scan found only {edges_seen} imports");
    let known: BTreeSet<(String, Vec<String>)> = KNOWN_TANGLES
        .iter()
        .map(|(f, m)| (f.to_string(), m.iter().map(|s| s.to_string()).collect()))
        .collect();
    let found: BTreeSet<(String, Vec<String>)> = circles.into_iter().collect();
    let new: Vec<String> = found
        .difference(&known)
        .map(|(f, m)| format!("{f}: {}", m.join(" ⇄ ")))
        .collect();
    let gone: Vec<String> = known
        .difference(&found)
        .map(|(f, m)| format!("{f}: {}", m.join(" ⇄ ")))
        .collect();
    assert!(
        new.is_empty(),
        "modules of one folder that import each other in a circle (move what they share into \
         a module they both import):\n{}",
        new.join("\n")
    );
    assert!(
        gone.is_empty(),
        "tangles in KNOWN_TANGLES that are untangled or changed now: update the list\n{}",
        gone.join("\n")
    );
}

/// Every file a doc names in backticks is in the repository (a path with folders must end a
/// tracked path; a bare name must be some tracked file's name) — or is one of the files a run
/// writes.
#[test]
fn every_file_the_docs_name_exists() {
    const WRITTEN: &[&str] = &["index.json", "lab.json", "page.md", "scenario.toml"];
    let mut tracked = Vec::new();
    for under in [
        "src",
        "crates",
        "tests",
        "docs",
        "scenarios",
        "bench",
        "fuzz",
        "topologies",
        "packaging",
    ] {
        let dir = root().join(under);
        if dir.is_dir() {
            all_files(&dir, &mut tracked);
        }
    }
    for f in fs::read_dir(root()).unwrap() {
        let p = f.unwrap().path();
        if p.is_file() {
            tracked.push(p);
        }
    }
    let tracked: Vec<String> = tracked
        .iter()
        .map(|p| {
            p.strip_prefix(root())
                .unwrap()
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let mut docs = vec![root().join("README.md")];
    all_files(&root().join("docs"), &mut docs);
    docs.retain(|d| d.extension().is_some_and(|e| e == "md"));
    let mut checked = 0;
    let mut missing = Vec::new();
    for d in &docs {
        let text = fs::read_to_string(d).unwrap();
        for quoted in text.split('`').skip(1).step_by(2) {
            let path = quoted.split("::").next().unwrap();
            let ext = path.rsplit('.').next().unwrap_or("");
            if !["rs", "toml", "md", "py", "sh", "json"].contains(&ext)
                || path.contains(['<', ' ', '*', '{'])
                || WRITTEN.contains(&path)
            {
                continue;
            }
            checked += 1;
            let found = tracked
                .iter()
                .any(|t| t == path || t.ends_with(&format!("/{path}")));
            if !found {
                missing.push(format!(
                    "{}: `{path}`",
                    d.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    assert!(checked > 50, "only {checked} file names found in the docs");
    assert!(
        missing.is_empty(),
        "docs name files that are not in the repository:\n{}",
        missing.join("\n")
    );
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap();
        if name == "target" || name == "corpus" || name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            all_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Code, tests and docs that say "issue N" point at an entry of CHANGELOG.md (the issues
/// themselves are not in the repository).
#[test]
fn every_issue_mentioned_has_a_change_log_entry() {
    let log = fs::read_to_string(root().join("CHANGELOG.md")).expect("CHANGELOG.md");
    let mut files = Vec::new();
    for under in ["src", "crates", "tests", "docs"] {
        all_files(&root().join(under), &mut files);
    }
    files.push(root().join("README.md"));
    let mut mentioned = std::collections::BTreeMap::new();
    for f in files {
        let Ok(text) = fs::read_to_string(&f) else {
            continue; // images
        };
        for (i, _) in text.match_indices("issue ") {
            let n: String = text[i + 6..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if !n.is_empty() {
                mentioned.entry(n).or_insert_with(|| f.clone());
            }
        }
    }
    assert!(!mentioned.is_empty(), "no issue is mentioned anywhere");
    let missing: Vec<String> = mentioned
        .iter()
        .filter(|(n, _)| !log.contains(&format!("## issue {n} ")))
        .map(|(n, f)| format!("issue {n} (in {})", f.display()))
        .collect();
    assert!(
        missing.is_empty(),
        "mentioned without an entry in CHANGELOG.md: {missing:?}"
    );
}

/// ./run-tests lints the `mpi` and `xdp` features on the netsweep binary and library,
/// netsweep-transport's library and tests/mpi.rs and tests/xdp.rs only (a second clippy pass
/// over every target cost 15 s more and saw nothing else): code that depends on those features
/// anywhere else would go unlinted, so it fails here until run-tests lints it too.
#[test]
fn feature_dependent_code_is_where_run_tests_lints_it() {
    let linted = |p: &Path| {
        let rel = p.strip_prefix(root()).unwrap();
        rel.starts_with("src")
            || rel.starts_with("crates/netsweep-transport/src")
            || rel == Path::new("tests/mpi.rs")
            || rel == Path::new("tests/xdp.rs")
    };
    let mut files = sources("src");
    files.extend(sources("crates"));
    files.extend(sources("tests"));
    assert!(files.len() > 100, "{} Rust files", files.len());
    let mut seen = 0;
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        if ["feature = \"mpi\"", "feature = \"xdp\""]
            .iter()
            .any(|k| text.contains(k))
        {
            seen += 1;
            assert!(
                linted(f),
                "{} depends on the mpi or xdp feature: add it to run-tests' feature clippy pass",
                f.display()
            );
        }
    }
    assert!(seen >= 4, "only {seen} files use the features");
}
