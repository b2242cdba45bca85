//! Issue 41 item 8: TLS and basic authentication in front of the exporter, as
//! docs/prometheus.md documents them. nginx from Debian terminates TLS and checks credentials
//! with the very `server` block the doc shows (read from the doc, only its paths and ports
//! replaced), and Debian's Prometheus scrapes probes through it over https with `basic_auth`:
//! the right credentials get the probe's series, a wrong password gets 401 and plain HTTP
//! 400, and the scrape timeout still reaches the exporter through the proxy (a 5 s probe is
//! cut to fit a 2 s scrape).

use crate::common::iperf3::free_port;
use crate::common::serve::Server;
use crate::common::*;
use crate::exporter::{exporter, get, prometheus, query};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The nginx `server { … }` block of docs/prometheus.md.
fn documented_block() -> String {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/prometheus.md"))
            .unwrap();
    let start = doc
        .find("```nginx\n")
        .expect("docs/prometheus.md has an nginx block")
        + 9;
    let len = doc[start..].find("```").unwrap();
    doc[start..start + len].to_string()
}

/// `text` with `from` replaced by `to`, which must be there: the doc and this test agree.
fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "docs/prometheus.md's block lost {from:?}:\n{text}"
    );
    text.replace(from, to)
}

fn ok(c: &mut Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Prometheus' targets: (job, health, last error) of each.
fn targets(prom: &str) -> Vec<(String, String, String)> {
    let (_, body) = get(prom, "/api/v1/targets");
    let v: Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["activeTargets"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|t| {
            let s = |x: &Value| x.as_str().unwrap_or_default().to_string();
            (s(&t["labels"]["job"]), s(&t["health"]), s(&t["lastError"]))
        })
        .collect()
}

#[test]
#[ignore = "needs nginx and prometheus (Debian packages nginx-light, prometheus) and openssl: ./run-tests installs them and runs this"]
fn prometheus_scrapes_the_exporter_through_the_documented_tls_and_basic_auth_proxy() {
    let test = "prometheus_scrapes_the_exporter_through_the_documented_tls_and_basic_auth_proxy";
    require_tool(test, "nginx", "nginx-light");
    require_tool(test, "prometheus", "prometheus");
    require_tool(test, "openssl", "openssl");
    let dir = scratch("exporter-proxy");
    let server = Server::start(&[]);
    let (_e, exporter_at) = exporter(&[]);
    let (crt, key) = nginx::self_signed(&dir, "exporter");
    let users = dir.join("exporter.htpasswd");
    let hash = ok(Command::new("openssl").args(["passwd", "-apr1", "s3cret"]));
    std::fs::write(&users, format!("prometheus:{hash}\n")).unwrap();

    let proxy = format!("127.0.0.1:{}", free_port());
    let mut block = documented_block();
    block = replaced(&block, "listen 9470 ssl;", &format!("listen {proxy} ssl;"));
    block = replaced(
        &block,
        "/etc/ssl/netsweep-exporter.crt",
        crt.to_str().unwrap(),
    );
    block = replaced(
        &block,
        "/etc/ssl/netsweep-exporter.key",
        key.to_str().unwrap(),
    );
    block = replaced(
        &block,
        "/etc/nginx/netsweep-exporter.htpasswd",
        users.to_str().unwrap(),
    );
    block = replaced(
        &block,
        "http://127.0.0.1:9469",
        &format!("http://{exporter_at}"),
    );
    let _nginx = nginx::start(&dir, &format!("  access_log off;\n{block}"), &proxy);

    // Four jobs through the proxy: the right credentials; a wrong password; plain HTTP to the
    // TLS port; a 5 s probe under a 2 s scrape timeout, which the exporter cuts to fit only
    // if the proxy passed the timeout header on (without it, 10 s: the scrape times out).
    let job = |name: &str, scheme: &str, password: &str, path: &str, params: &str| {
        format!(
            "  - job_name: {name}\n    scheme: {scheme}\n    scrape_interval: 2s\n    \
             scrape_timeout: 2s\n    tls_config:\n      ca_file: {}\n    basic_auth:\n      \
             username: prometheus\n      password: {password}\n    metrics_path: {path}\n    \
             params:\n{params}    static_configs:\n      - targets: ['{}']\n    \
             relabel_configs:\n      - source_labels: [__address__]\n        \
             target_label: __param_target\n      - target_label: __address__\n        \
             replacement: {proxy}\n",
            crt.display(),
            server.addr
        )
    };
    let quick = "      pattern: ['pingpong']\n      size: ['64']\n      duration: ['300ms']\n";
    let config = format!(
        "global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\nscrape_configs:\n{}{}{}{}",
        job("via_proxy", "https", "s3cret", "/probe", quick),
        job("wrong_password", "https", "guess", "/probe", quick),
        job("plain_http", "http", "s3cret", "/probe", quick),
        job(
            "too_long",
            "https",
            "s3cret",
            "/probe",
            "      pattern: ['pingpong']\n      duration: ['5s']\n"
        ),
    );
    let prom = format!("127.0.0.1:{}", free_port());
    let _prom = prometheus(&dir, &config, &prom);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let up = std::net::TcpStream::connect(&prom).is_ok();
        let t = if up { targets(&prom) } else { vec![] };
        let health = |j: &str| {
            t.iter()
                .find(|(job, _, _)| job == j)
                .map(|(_, h, e)| (h.clone(), e.clone()))
                .unwrap_or_default()
        };
        let done = up
            && query(&prom, "netsweep_probe_success{job=\"via_proxy\"} == 1").len() == 1
            && query(&prom, "netsweep_probe_success{job=\"too_long\"} == 1").len() == 1
            && health("wrong_password").0 == "down"
            && health("plain_http").0 == "down";
        if done {
            let (_, wrong) = health("wrong_password");
            assert!(wrong.contains("401"), "a wrong password: {wrong}");
            let (_, plain) = health("plain_http");
            assert!(plain.contains("400"), "plain HTTP to the TLS port: {plain}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape through the proxy as expected: {t:?}\n{:?}\n{}",
            query(&prom, "netsweep_probe_success"),
            std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The probe's figures came through: a round trip was measured over loopback.
    let rtt = query(&prom, "netsweep_half_rtt_seconds{job=\"via_proxy\"} > 0");
    assert!(!rtt.is_empty(), "a measured RTT/2 through the proxy");
    // The 5 s probe was fitted to the 2 s the proxy passed on: the exporter says so.
    let fitted = query(
        &prom,
        "netsweep_probe_timeout_seconds{job=\"too_long\"} == 2",
    );
    assert_eq!(fitted.len(), 1, "the scrape timeout through the proxy");
    let point = query(&prom, "netsweep_probe_point_seconds{job=\"too_long\"} < 2");
    assert_eq!(point.len(), 1, "the probe's point cut to fit");
}
