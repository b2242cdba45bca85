//! Issue 41 item 8: `serve --metrics ADDR` tells Prometheus about the tests it served —
//! sessions started, finished ok or failed, running, and refusals — counted with `--quiet`
//! too. Real processes on loopback; a real Prometheus scrapes it in `exporter.rs`.

use crate::common::iperf3::{free_port, wait_listening};
use crate::common::*;
use std::io::{Read, Write};

/// The `http://ADDR/metrics` a startup line names.
pub fn metrics_url(line: &str) -> String {
    line.split("metrics on http://")
        .nth(1)
        .and_then(|s| s.split(['/', ' ', ')']).next())
        .unwrap_or_else(|| panic!("no metrics address in {line:?}"))
        .to_string()
}

/// One GET of `path` from `at`: (status line, body).
pub fn get(at: &str, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(at).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {at}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{series} not in\n{text}"))
}

#[test]
fn serve_counts_its_sessions_and_refusals_for_prometheus_even_when_quiet() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    // --quiet prints no startup line: both ports are chosen here, and waited for.
    let (port, mport) = (free_port(), free_port());
    let at = format!("127.0.0.1:{mport}");
    let child = std::process::Command::new(bin())
        .args([
            "serve",
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--quiet",
        ])
        .args(["--max-size", "1k", "--metrics", &at])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let _server = crate::common::iperf3::Killed(child);
    wait_listening(pid, port);
    wait_listening(pid, mport);
    let target = format!("127.0.0.1:{port}");
    let (status, before) = get(&at, "/metrics");
    assert!(status.contains("200"), "{status}");
    let started = r#"netsweep_serve_sessions_started_total{protocol="netsweep"}"#;
    assert_eq!(value(&before, started), 0.0);
    // Two runs served, one refused by --max-size.
    for sizes in ["1k", "512", "4k"] {
        let o = run(&[
            "run",
            target.as_str(),
            "--sizes",
            sizes,
            "--max-point-time",
            "100ms",
            "--no-save",
            "-q",
        ]);
        assert_eq!(o.status.success(), sizes != "4k", "{sizes}: {o:?}");
    }
    let (_, after) = get(&at, "/metrics");
    assert_eq!(value(&after, started), 2.0, "{after}");
    assert_eq!(
        value(
            &after,
            r#"netsweep_serve_sessions_finished_total{protocol="netsweep",outcome="ok"}"#
        ),
        2.0
    );
    assert_eq!(
        value(
            &after,
            r#"netsweep_serve_sessions_running{protocol="netsweep"}"#
        ),
        0.0
    );
    assert_eq!(
        value(
            &after,
            r#"netsweep_serve_refused_total{protocol="netsweep"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &after,
            r#"netsweep_serve_sessions_started_total{protocol="iperf3"}"#
        ),
        0.0
    );
    let (status, _) = get(&at, "/other");
    assert!(status.contains("404"), "{status}");
}

#[test]
fn a_metrics_address_that_is_not_one_is_a_usage_error() {
    let o = run(&["serve", "--port", "0", "--metrics", "nowhere"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an address"));
}
