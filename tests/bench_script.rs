//! Issue 6: `bench/peers` is never run by CI (it installs packages and takes minutes), so
//! these checks keep it from rotting: the script parses, its Python half compiles, and the C
//! ping-pong floor builds wherever gcc exists.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Panics naming the package to install unless `tool` is on the PATH.
fn require(tool: &str, package: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{tool} is missing: apt-get install -y {package} (./run-tests installs it as root)"
    );
}

#[test]
fn bench_peers_script_parses() {
    let o = Command::new("bash")
        .arg("-n")
        .arg(root().join("bench/peers"))
        .output()
        .expect("bash runs");
    assert!(
        o.status.success(),
        "bash -n bench/peers: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
#[ignore = "needs python3: ./run-tests installs it (as root) and runs this"]
fn bench_python_scripts_compile() {
    require("python3", "python3");
    for script in ["bench/peers.py", "bench/default-run"] {
        let src = std::fs::read_to_string(root().join(script)).expect(script);
        // compile() parses without writing __pycache__ into the tree.
        let o = Command::new("python3")
            .args([
                "-c",
                &format!("import sys; compile(sys.stdin.read(), '{script}', 'exec')"),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().expect("stdin").write_all(src.as_bytes())?;
                c.wait_with_output()
            })
            .expect("python3 runs");
        assert!(
            o.status.success(),
            "{script} does not compile: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
#[ignore = "needs gcc: ./run-tests installs it (as root) and runs this"]
fn pingpong_floor_compiles() {
    require("gcc", "gcc");
    let out = std::env::temp_dir().join(format!("netsweep-pingpong-{}", std::process::id()));
    let o = Command::new("gcc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&out)
        .arg(root().join("bench/c/pingpong.c"))
        .output()
        .expect("gcc runs");
    let _ = std::fs::remove_file(&out);
    assert!(
        o.status.success(),
        "bench/c/pingpong.c: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
