//! The Debian package (issue 15 item 2), installed for real: `packaging/build-deb --dev` builds
//! it (./run-tests does, as root, before the tests), this test installs it with `dpkg -i`, checks
//! what it put where, runs the installed binary on both ends of a loopback run, asks man and
//! bash completion about it, verifies the systemd unit, and removes the package again.

use crate::common::*;
use netsweep_model::results;
use std::path::PathBuf;
use std::process::Command;

fn sh(cmd: &str, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(cmd).args(args).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn the_package() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/debian");
    let debs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(
        debs.len(),
        1,
        "expected one package in {}: build it with packaging/build-deb (./run-tests does)",
        dir.display()
    );
    debs[0].clone()
}

/// Removes the package when the test ends, passed or not.
struct Installed;
impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["-r", "netsweep"]).output();
    }
}

#[test]
#[ignore = "needs root, dpkg and the package from packaging/build-deb: ./run-tests builds and runs it"]
fn the_debian_package_installs_a_working_netsweep() {
    let test = "the_debian_package_installs_a_working_netsweep";
    require_root(test);
    for (tool, pkg) in [
        ("dpkg", "dpkg"),
        ("man", "man-db"),
        ("systemd-analyze", "systemd"),
    ] {
        require_tool(test, tool, pkg);
    }
    let deb = the_package();
    let (_, version, _) = sh("dpkg-deb", &["-f", deb.to_str().unwrap(), "Version"]);
    assert!(
        version.trim().starts_with(env!("CARGO_PKG_VERSION")),
        "package version {version:?} is not this source's {}: rebuild it with packaging/build-deb",
        env!("CARGO_PKG_VERSION")
    );

    let (ok, _, err) = sh("dpkg", &["-i", deb.to_str().unwrap()]);
    let _installed = Installed;
    assert!(ok, "dpkg -i failed: {err}");
    let (_, files, _) = sh("dpkg", &["-L", "netsweep"]);
    for f in [
        "/usr/bin/netsweep",
        "/usr/share/man/man1/netsweep.1.gz",
        "/usr/share/man/man1/netsweep-run.1.gz",
        "/usr/share/man/man1/netsweep-lab-up.1.gz",
        "/usr/share/bash-completion/completions/netsweep",
        "/usr/share/zsh/vendor-completions/_netsweep",
        "/usr/share/fish/vendor_completions.d/netsweep.fish",
        "/lib/systemd/system/netsweep-serve.service",
        "/usr/share/doc/netsweep/README.md",
    ] {
        assert!(
            files.lines().any(|l| l == f),
            "the package lacks {f}:\n{files}"
        );
    }
    let (_, v, _) = sh("/usr/bin/netsweep", &["--version"]);
    assert_eq!(v.trim(), format!("netsweep {}", env!("CARGO_PKG_VERSION")));

    // man finds and renders the pages.
    let (ok, path, _) = sh("man", &["-w", "netsweep-serve"]);
    assert!(
        ok && path.trim() == "/usr/share/man/man1/netsweep-serve.1.gz",
        "{path}"
    );
    let (ok, page, _) = sh("man", &["-P", "cat", "netsweep-run"]);
    assert!(ok && page.contains("--max-point-time"), "{page}");

    // The installed bash completion completes.
    let script = "source /usr/share/bash-completion/completions/netsweep\n\
                  COMP_WORDS=(netsweep se); COMP_CWORD=1; _netsweep netsweep se netsweep\n\
                  printf '%s\\n' \"${COMPREPLY[@]}\"";
    let (ok, words, err) = sh("bash", &["-c", script]);
    assert!(ok, "{err}");
    assert_eq!(words.trim(), "serve");

    // The unit file is valid for this systemd and its ExecStart exists.
    let (ok, _, err) = sh(
        "systemd-analyze",
        &["verify", "/lib/systemd/system/netsweep-serve.service"],
    );
    assert!(ok, "systemd-analyze verify: {err}");

    // The installed binary on both ends: serve --once on an ephemeral port, run against it.
    let (mut server, addr) = serve_once("/usr/bin/netsweep");
    let out = scratch("package-deb").join("run.json");
    let mut args = vec![
        "run",
        &addr,
        "--sizes",
        "1,1k",
        "--no-save",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(QUICK);
    let (ok, _, err) = sh("/usr/bin/netsweep", &args);
    assert!(ok, "the installed client failed: {err}");
    assert!(
        server.wait().unwrap().success(),
        "serve --once did not end cleanly"
    );
    let run = results::load(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(run.peer, addr);
    assert_eq!(
        run.points.iter().map(|p| p.size).collect::<Vec<_>>(),
        [1, 1024]
    );
    assert!(matches!(run.status, results::RunStatus::Complete));

    drop(_installed);
    assert!(
        !std::path::Path::new("/usr/bin/netsweep").exists(),
        "dpkg -r left the binary"
    );
}
