//! The responsiveness test, both ends: `netsweep rpm` against `netsweep serve --rpm` (its
//! results' arithmetic, its certificate checks, the server's admission refusing a client with
//! the reason), and against nginx configured as docs/rpm.md shows, its byte counts held to
//! nginx's access log.

use super::common::serve::startup_field;
use super::common::{bin, nginx, scratch};
use netsweep_testkit::{free_port, require_tool};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A `netsweep serve --rpm` on loopback: the process, its rpm address and certificate.
struct Serve {
    child: Child,
    rpm: String,
    fingerprint: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(extra: &[&str]) -> Serve {
    let mut child = Command::new(bin())
        .args(["serve", "--bind", "127.0.0.1", "--port", "0", "--rpm", "0"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    Serve {
        rpm: startup_field(&line, "responsiveness clients on "),
        fingerprint: startup_field(&line, "sha256 "),
        child,
    }
}

/// `netsweep rpm` with a short test: intervals of 250 ms, 3 s a direction at most.
fn rpm(target: &str, extra: &[&str], out: &Path) -> Output {
    Command::new(bin())
        .args([
            "rpm",
            target,
            "--interval",
            "250ms",
            "--max-time",
            "3s",
            "-o",
        ])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every direction's figures hold together: the intervals add up to its bytes, its goodput is
/// the last four intervals' bytes over their time, its RPM is the mean of the foreign and
/// loaded RPMs those times give, inside its interval. Returns (download, upload) bytes.
fn check_result(r: &Value) -> (u64, u64) {
    assert_eq!(r["schema"], "netsweep-rpm");
    let idle = &r["idle"];
    assert!(idle["rpm"].as_f64().unwrap() > 0.0, "{idle}");
    let dirs = r["directions"].as_array().unwrap();
    assert_eq!(dirs.len(), 2, "{r}");
    let mut bytes = Vec::new();
    for d in dirs {
        let intervals = d["intervals"].as_array().unwrap();
        assert!(!intervals.is_empty() && intervals.len() <= 12, "{d}");
        let sum: u64 = intervals.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
        assert_eq!(sum, d["bytes"].as_u64().unwrap(), "{d}");
        assert!(sum > 1 << 20, "{} moved only {sum} bytes", d["direction"]);
        let window = &intervals[intervals.len().saturating_sub(4)..];
        let last4: u64 = window.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
        // Each interval's own length: 250 ms, more when the client's timer woke late (and
        // the next one less, its end on the same schedule).
        let span: f64 = window.iter().map(|i| i["seconds"].as_f64().unwrap()).sum();
        assert!((span - window.len() as f64 * 0.25).abs() < 0.25, "{d}");
        let goodput = d["goodput_bps"].as_f64().unwrap();
        assert!((goodput - last4 as f64 * 8.0 / span).abs() < 1.0, "{d}");
        let rs = &d["responsiveness"];
        let f = |k: &str| rs[k].as_f64().unwrap_or_else(|| panic!("{k} in {d}"));
        let foreign = 60_000.0 / ((f("tcp_ms") + f("tls_ms") + f("http_foreign_ms")) / 3.0);
        let loaded = 60_000.0 / f("http_loaded_ms");
        assert!((f("foreign_rpm") - foreign).abs() < 1e-6 * foreign, "{d}");
        assert!((f("loaded_rpm") - loaded).abs() < 1e-6 * loaded, "{d}");
        assert!(
            (f("rpm") - (foreign + loaded) / 2.0).abs() < 1e-6 * foreign,
            "{d}"
        );
        if let Some(ci) = d["rpm_interval95"].as_array() {
            let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
            assert!(lo <= f("rpm") && f("rpm") <= hi, "{d}");
        }
        let outcome = d["outcome"].as_str().unwrap();
        assert!(outcome == "stable" || outcome == "out of time", "{outcome}");
        bytes.push(sum);
    }
    (bytes[0], bytes[1])
}

#[test]
fn rpm_measures_netsweep_serve_and_its_figures_add_up() {
    let s = serve(&[]);
    let dir = scratch("rpm-serve");
    let out = dir.join("r.json");
    let o = rpm(&s.rpm, &["--tls-pin", &s.fingerprint], &out);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    for want in [
        "download",
        "upload",
        "RPM",
        "idle",
        "goodput",
        "rpm: download",
    ] {
        assert!(t.contains(want), "{want:?} not in {t}");
    }
    let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    check_result(&r);
    assert_eq!(r["trust"], format!("pinned {}", s.fingerprint));

    // Another certificate pinned: refused, naming both; --insecure: measured, and said so.
    let wrong = format!("{}AB", "AB:".repeat(31));
    let o2 = rpm(&s.rpm, &["--tls-pin", &wrong], &out);
    assert_eq!(o2.status.code(), Some(1), "{}", text(&o2));
    assert!(text(&o2).contains(&s.fingerprint), "{}", text(&o2));
    let o = rpm(&s.rpm, &["--insecure", "--download-only"], &out);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("NOT checked"), "{}", text(&o));
}

#[test]
fn a_client_the_admission_refuses_is_told_why() {
    // Only 198.18.0.1 may be served: the loopback client's TLS handshake completes, and every
    // request it makes is answered 503 with the admission's reason, which it prints.
    let s = serve(&["--allow-from", "198.18.0.1"]);
    let o = rpm(
        &s.rpm,
        &["--tls-pin", &s.fingerprint],
        &scratch("rpm-refused").join("r.json"),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("503") && t.contains("--allow-from"), "{t}");
}

#[test]
fn options_the_rpm_port_cannot_honour_are_refused_by_name() {
    for extra in [["--auth-key", "k"], ["--max-rate", "1000000"]] {
        let o = Command::new(bin())
            .args(["serve", "--port", "0", "--rpm", "0"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        assert!(text(&o).contains(extra[0]), "{}", text(&o));
    }
    // A test too short to judge goodput and then responsiveness is a usage error.
    let o = Command::new(bin())
        .args(["rpm", "127.0.0.1:9", "--max-time", "3s"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("at least 8"), "{}", text(&o));
}

/// A fenced block of docs/rpm.md.
fn documented(lang: &str) -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/rpm.md")).unwrap();
    let start = doc
        .find(&format!("```{lang}\n"))
        .expect("docs/rpm.md has the block")
        + 4
        + lang.len();
    doc[start..start + doc[start..].find("```").unwrap()].to_string()
}

#[test]
#[ignore = "needs nginx (Debian package nginx-light) and openssl: ./run-tests installs them and runs this"]
fn rpm_measures_nginx_set_up_as_documented_and_counts_what_nginx_logged() {
    let test = "rpm_measures_nginx_set_up_as_documented_and_counts_what_nginx_logged";
    require_tool(test, "nginx", "nginx-light");
    require_tool(test, "openssl", "openssl");
    let dir = scratch("rpm-nginx");
    let (crt, key) = nginx::self_signed(&dir, "rpm");
    let root = dir.join("root");
    std::fs::create_dir_all(root.join(".well-known")).unwrap();
    let o = Command::new("truncate")
        .args(["-s", "8G"])
        .arg(root.join("large"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(root.join("small"), "x").unwrap();
    let (port, sink) = (free_port(), free_port());
    let host = format!("127.0.0.1:{port}");
    let document = documented("json").replace("HOST:8443", &host);
    std::fs::write(root.join(".well-known/nq"), document).unwrap();
    let log = dir.join("access.log");
    let block = documented("nginx")
        .replace("listen 8443 ssl", &format!("listen {host} ssl"))
        .replace("/etc/ssl/rpm.crt", crt.to_str().unwrap())
        .replace("/etc/ssl/rpm.key", key.to_str().unwrap())
        .replace("/var/log/nginx/rpm.log", log.to_str().unwrap())
        .replace("/srv/rpm", root.to_str().unwrap())
        .replace("8444", &sink.to_string());
    let _nginx = nginx::start(&dir, &block, &host);
    let fp = nginx::fingerprint(&crt);
    let out = dir.join("r.json");
    let o = rpm(
        &format!("https://{host}/.well-known/nq"),
        &["--tls-pin", &fp],
        &out,
    );
    assert!(o.status.success(), "{}", text(&o));
    let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let (down, up) = check_result(&r);
    for d in r["directions"].as_array().unwrap() {
        assert!(d["load_errors"].as_array().unwrap().is_empty(), "{d}");
    }
    // nginx's count of the same bytes: what it sent of /large, and the request lengths
    // (bodies and headers) of /slurp. It logs a request when it ends — after the client
    // stopped counting — so it saw more of the download than the client's intervals held
    // (what was in flight and arrived after the last interval), and about as much upload.
    std::thread::sleep(Duration::from_millis(500));
    let logged = std::fs::read_to_string(&log).unwrap();
    let (mut sent, mut received) = (0u64, 0u64);
    for l in logged.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        match f[0] {
            "/large" => sent += f[2].parse::<u64>().unwrap(),
            "/slurp" => received += f[3].parse::<u64>().unwrap(),
            _ => {}
        }
    }
    let (rd, ru) = (down as f64 / sent as f64, up as f64 / received as f64);
    eprintln!("download: client {down} B, nginx sent {sent} B ({rd:.3}); upload: client {up} B, nginx received {received} B ({ru:.3})");
    assert!(
        (0.80..=1.01).contains(&rd),
        "download: client {down}, nginx {sent}"
    );
    assert!(
        (0.90..=1.05).contains(&ru),
        "upload: client {up}, nginx {received}"
    );
}

#[test]
fn the_exporter_probes_responsiveness_within_its_scrape() {
    let s = serve(&[]);
    let (_e, at) = crate::exporter::exporter(&[]);
    let q = format!(
        "/probe?target={}&pattern=rpm&tls_pin={}",
        s.rpm, s.fingerprint
    );
    // 7 s: 6.5 s less 1 s of setup, 2.75 s a direction.
    let t0 = Instant::now();
    let (code, body) =
        crate::exporter::get_with(&at, &q, "X-Prometheus-Scrape-Timeout-Seconds: 7\r\n");
    assert!(t0.elapsed() < Duration::from_secs(7), "{:?}", t0.elapsed());
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("netsweep_probe_success 1"), "{body}");
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    for d in ["download", "upload"] {
        let line = body
            .lines()
            .find(|l| l.starts_with(&format!("netsweep_rpm{{direction=\"{d}\"}}")))
            .unwrap_or_else(|| panic!("no {d} RPM in {body}"));
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(v > 0.0, "{line}");
        assert!(
            body.contains(&format!(
                "netsweep_rpm_goodput_bits_per_second{{direction=\"{d}\"}}"
            )),
            "{body}"
        );
    }
    // Too short a scrape for two directions: refused before anything runs, with the
    // timeout it needs; a parameter the test does not take, by name.
    let (_, body) =
        crate::exporter::get_with(&at, &q, "X-Prometheus-Scrape-Timeout-Seconds: 4\r\n");
    assert!(
        body.contains("netsweep_probe_success 0") && body.contains("raise scrape_timeout"),
        "{body}"
    );
    let (code, body) = crate::exporter::get(&at, &format!("{q}&size=1k"));
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("size: not a parameter of pattern=rpm"),
        "{body}"
    );
}
