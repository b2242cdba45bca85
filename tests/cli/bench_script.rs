//! Issue 6: `bench/peers` is never run by CI (it installs packages and takes minutes), so
//! these checks keep it from rotting: the script parses, its Python half compiles, and the C
//! floors (ping-pong, crr) build wherever gcc exists.

use crate::common::require_tool;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
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
    require_tool("bench_script", "python3", "python3");
    for script in [
        "bench/peers.py",
        "bench/default-run",
        "bench/flows.py",
        "bench/loopback-cliff.py",
        "bench/stream-counters.py",
        "bench/calibration.py",
    ] {
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

/// Builds `bench/c/<name>.c` with warnings as errors; returns the binary (the caller removes it).
fn build_floor(name: &str) -> std::path::PathBuf {
    require_tool("bench_script", "gcc", "gcc");
    let out = std::env::temp_dir().join(format!("netsweep-{name}-{}", std::process::id()));
    let o = Command::new("gcc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&out)
        .arg(root().join(format!("bench/c/{name}.c")))
        .output()
        .expect("gcc runs");
    assert!(
        o.status.success(),
        "bench/c/{name}.c: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
#[ignore = "needs gcc: ./run-tests installs it (as root) and runs this"]
fn pingpong_floor_compiles() {
    let _ = std::fs::remove_file(build_floor("pingpong"));
}

/// The crr floor builds, and a short run against its own server on loopback reports the
/// transactions it was asked for.
#[test]
#[ignore = "needs gcc: ./run-tests installs it (as root) and runs this"]
fn crr_floor_compiles_and_runs() {
    let out = build_floor("crr");
    // A port below the ephemeral range, different for each test process.
    let port = (20000 + std::process::id() % 10000).to_string();
    let mut server = Command::new(&out)
        .args(["server", &port])
        .spawn()
        .expect("crr server starts");
    let o = Command::new(&out)
        .args(["client", "127.0.0.1", &port, "200", "16"])
        .output()
        .expect("crr client runs");
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_file(&out);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.starts_with("size=16 n=200 tps="), "{text}");
}

/// The copy floor of bench/loopback-cliff.py builds and reports a rate for the size asked,
/// and refuses a size it cannot hold.
#[test]
#[ignore = "needs gcc: ./run-tests installs it (as root) and runs this"]
fn copy_floor_compiles_and_runs() {
    let out = build_floor("copy");
    let o = Command::new(&out)
        .args(["65536", "0.1"])
        .output()
        .expect("copy runs");
    let refused = Command::new(&out)
        .args(["999999999999", "0.1"])
        .output()
        .expect("copy runs");
    let _ = std::fs::remove_file(&out);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    let rate: f64 = text
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("gbytes_per_s="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no rate in {text}"));
    assert!(text.starts_with("size=65536 ") && rate > 0.0, "{text}");
    assert_eq!(refused.status.code(), Some(2));
}

/// docs/performance-loopback-cliff.md is what bench/loopback-cliff.py renders from the data
/// committed beside it: every number and every sentence of its reading comes from that file.
#[test]
#[ignore = "needs python3: ./run-tests installs it (as root) and runs this"]
fn the_loopback_cliff_page_is_rendered_from_its_committed_data() {
    require_tool("bench_script", "python3", "python3");
    let dir = crate::common::scratch("cliff-page");
    std::fs::copy(
        root().join("docs/performance-loopback-cliff.json"),
        dir.join("page.json"),
    )
    .expect("the page's data is committed");
    let out = dir.join("page.md");
    let o = Command::new("python3")
        .arg(root().join("bench/loopback-cliff.py"))
        .args(["--render", "--out"])
        .arg(&out)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = std::fs::read_to_string(&out).unwrap();
    let want = std::fs::read_to_string(root().join("docs/performance-loopback-cliff.md")).unwrap();
    assert!(
        got == want,
        "docs/performance-loopback-cliff.md is not what its data renders to: \
         run `bench/loopback-cliff.py --render` and commit the page"
    );
    assert!(got.contains("Round by round"), "{got}");
}
