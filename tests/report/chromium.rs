//! Issue 5: the HTML report renders in a real browser. Headless Chromium (Debian `chromium`)
//! loads the report of the archived runs, takes a screenshot that must not be blank, dumps
//! the DOM that must hold every plot, and logs no console error. Ignored unless asked for
//! (chromium is large and optional): ./run-tests installs chromium as root and runs it.

use crate::common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> Option<String> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(str::to_string)
}

/// Runs chromium headless on `url` with `extra` flags; kills it after 90 s.
fn headless(browser: &str, profile: &Path, url: &str, extra: &[&str]) -> std::process::Output {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", profile.display()),
            "--window-size=1280,2000",
        ])
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let start = Instant::now();
    loop {
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().expect("chromium output")
}

/// Per-channel variance of the screenshot's pixels (0 for a blank page).
fn pixel_variance(png_path: &Path) -> (f64, u32, u32) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("screenshot exists"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("PNG size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let bytes = &buf[..info.buffer_size()];
    let n = bytes.len() as f64;
    let mean = bytes.iter().map(|&b| b as f64).sum::<f64>() / n;
    let var = bytes
        .iter()
        .map(|&b| (b as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    (var, info.width, info.height)
}

#[test]
#[ignore = "needs chromium: ./run-tests installs it (as root) and runs this"]
fn html_report_renders_in_headless_chromium() {
    let browser = chromium().unwrap_or_else(|| {
        panic!("html_report_renders_in_headless_chromium needs chromium: apt-get install -y chromium (./run-tests installs it as root)")
    });
    let dir = scratch("chromium");
    let html = dir.join("report.html");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let files: Vec<String> = ["tcp-pingpong", "unix-stream", "udp-stream"]
        .iter()
        .map(|n| data.join(format!("{n}.json")).display().to_string())
        .collect();
    let mut args = vec!["report"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--html", html.to_str().unwrap()]);
    let o = run(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let url = format!("file://{}", html.display());

    let shot = dir.join("shot.png");
    let o = headless(
        &browser,
        &dir.join("profile-1"),
        &url,
        &[&format!("--screenshot={}", shot.display())],
    );
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    for bad in [
        "Uncaught",
        "CONSOLE(",
        "Failed to load resource",
        "ERR_FILE_NOT_FOUND",
    ] {
        let hits: Vec<&str> = log.lines().filter(|l| l.contains(bad)).collect();
        assert!(hits.is_empty(), "console errors: {hits:?}");
    }
    let (var, w, h) = pixel_variance(&shot);
    assert!(w >= 1000 && h >= 1000, "screenshot {w}×{h}");
    assert!(
        var > 100.0,
        "the screenshot is blank (pixel variance {var:.1})"
    );

    let o = headless(&browser, &dir.join("profile-2"), &url, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(
        dom.contains("<h1>"),
        "no DOM dumped: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let svgs = dom.matches("<svg").count();
    assert!(svgs >= 7, "the DOM holds {svgs} plots");
    for id in [
        "fig-throughput",
        "fig-latency",
        "fig-signature",
        "fig-stream",
        "fig-loss",
        "fig-ratio",
    ] {
        assert!(dom.contains(id), "{id} missing from the DOM");
    }
    assert!(dom.contains("<polyline"), "plots have lines");
}
