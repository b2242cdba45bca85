//! Issue 32 item 3 and 4: `netsweep exporter`. A probe of a `netsweep serve` (and of its iperf3
//! port, as `iperf3://`) answers OpenMetrics with the run's series and the probe's own; every
//! parameter is validated; a result is served again from the cache; `/metrics` counts what it
//! did. With Debian's Prometheus scraping it through the blackbox exporter's usual relabelling,
//! the series arrive, and every query of the Grafana dashboard (packaging/grafana/netsweep.json)
//! returns data.

use crate::common::iperf3::*;
use crate::common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `netsweep exporter` on a free loopback port: the process and its address.
pub(crate) fn exporter(extra: &[&str]) -> (Killed, String) {
    let mut c = Command::new(bin());
    c.args(["exporter", "--listen", "127.0.0.1:0"]).args(extra);
    exporter_from(c)
}

/// GET `path` from `addr`: (status, body).
pub(crate) fn get(addr: &str, path: &str) -> (u16, String) {
    get_with(addr, path, "")
}

/// GET `path` from `addr` with `headers` (each line ending in CRLF): (status, body).
pub(crate) fn get_with(addr: &str, path: &str, headers: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{headers}\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let status = r
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = r.split_once("\r\n\r\n").map_or("", |b| b.1).to_string();
    (status, body)
}

/// The metric names an exposition carries (`_total`, `_count`, `_sum` and the sample name).
fn names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// Every `netsweep_…` metric name a dashboard query names.
fn dashboard_metrics() -> (Vec<String>, BTreeSet<String>) {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/grafana/netsweep.json");
    let d: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    let vars = d["templating"]["list"].as_array().unwrap();
    let mut all = exprs.clone();
    all.extend(
        vars.iter()
            .filter_map(|v| v["query"].as_str().map(str::to_string)),
    );
    let mut metrics = BTreeSet::new();
    for e in &all {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("netsweep_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            metrics.insert(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    (exprs, metrics)
}

#[test]
fn a_probe_answers_openmetrics_and_every_dashboard_query_names_one_of_its_metrics() {
    let dir = scratch("exporter-probe");
    let (server, iperf3_port) = netsweep_iperf3(&dir, &[]);
    let (_e, addr) = exporter(&["--max-probes", "2", "--cache", "30s"]);
    let mut seen = BTreeSet::new();
    for (q, pattern) in [
        (format!("target={}&duration=300ms", server.addr), "bidir"),
        (
            format!(
                "target={}&pattern=pingpong&size=1k&duration=300ms",
                server.addr
            ),
            "pingpong",
        ),
        (
            format!(
                "target={}&transport=udp&pattern=stream&duration=300ms",
                server.addr
            ),
            "stream",
        ),
        (
            format!("target=iperf3://127.0.0.1:{iperf3_port}&duration=1s"),
            "stream",
        ),
    ] {
        let (status, body) = get(&addr, &format!("/probe?{q}"));
        assert_eq!(status, 200, "{q}: {body}");
        assert!(body.ends_with("# EOF\n"), "{body}");
        assert!(body.contains("netsweep_probe_success 1\n"), "{q}: {body}");
        assert!(body.contains(&format!("pattern=\"{pattern}\"")), "{body}");
        seen.extend(names(&body));
    }
    for n in [
        "netsweep_receiver_throughput_bits_per_second",
        "netsweep_reverse_throughput_bits_per_second",
        "netsweep_half_rtt_seconds",
        "netsweep_loss_ratio",
        "netsweep_tcp_retransmits",
        "netsweep_cpu_utilisation_ratio",
        "netsweep_probe_duration_seconds",
    ] {
        assert!(seen.contains(n), "{n} not in {seen:?}");
    }
    // The same probe again within --cache: its result, not a second run.
    let q = format!("/probe?target={}&duration=300ms", server.addr);
    let t0 = Instant::now();
    assert_eq!(get(&addr, &q).0, 200);
    assert!(
        t0.elapsed() < Duration::from_millis(250),
        "{:?}",
        t0.elapsed()
    );
    for (bad, word) in [
        ("/probe", "target"),
        ("/probe?target=h&size=3G", "size"),
        ("/probe?target=h;reboot", "target"),
        ("/probe?target=h&duration=1h", "duration"),
        ("/probe?target=h&bogus=1", "unknown"),
    ] {
        let (status, body) = get(&addr, bad);
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body.contains(word), "{bad}: {body}");
    }
    // parallel=4 (iperf3_exporter's parameter): four connections, said in the series.
    let q = format!(
        "/probe?target={}&pattern=stream&parallel=4&duration=300ms",
        server.addr
    );
    let (status, body) = get(&addr, &q);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("netsweep_probe_success 1\n"), "{body}");
    assert!(
        body.lines()
            .any(|l| l.starts_with("netsweep_run_flows{") && l.ends_with("} 4")),
        "{body}"
    );
    let (status, body) = get(&addr, "/-/healthy");
    assert_eq!(
        (status, body.as_str()),
        (200, "netsweep exporter is healthy.\n")
    );
    let (status, m) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    // The process metrics every Prometheus client library exports, of the exporter itself.
    for n in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        let v: f64 = m
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{n} ")))
            .unwrap_or_else(|| panic!("{n} in {m}"))
            .parse()
            .unwrap();
        // CPU time is counted in clock ticks (10 ms): an exporter that waited on its probes
        // may not have used one yet (a fresh clone's suite read 0). The others are never 0.
        if n == "process_cpu_seconds_total" {
            assert!(v >= 0.0, "{n} {v}");
        } else {
            assert!(v > 0.0, "{n} {v}");
        }
    }
    assert!(
        m.contains("netsweep_exporter_probes_total{outcome=\"success\"} 5"),
        "{m}"
    );
    assert!(
        m.contains("netsweep_exporter_probes_total{outcome=\"cached\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("netsweep_exporter_probes_total{outcome=\"invalid\"} 5"),
        "{m}"
    );
    seen.extend(names(&m));
    // Every metric the dashboard queries is one the exporter emits.
    let (_, wanted) = dashboard_metrics();
    let seen_families: BTreeSet<String> = seen
        .iter()
        .flat_map(|n| [n.clone(), n.trim_end_matches("_total").to_string()])
        .collect();
    let missing: Vec<_> = wanted.difference(&seen_families).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries {missing:?}, which the exporter never emits"
    );
}

/// Debian's Prometheus on `listen` with `config`, its data and log (`prometheus.log`) in `dir`.
pub(crate) fn prometheus(dir: &std::path::Path, config: &str, listen: &str) -> Killed {
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={listen}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Killed(child)
}

/// Prometheus' instant query `q`: its result vector.
pub(crate) fn query(prom: &str, q: &str) -> Vec<Value> {
    let enc: String = q
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (status, body) = get(prom, &format!("/api/v1/query?query={enc}"));
    assert_eq!(status, 200, "{q}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{q}: {body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

#[test]
#[ignore = "needs prometheus (Debian package prometheus): ./run-tests installs it and runs this"]
fn prometheus_scrapes_the_probes_and_the_dashboards_queries_return_data() {
    require_tool("prometheus_scrapes_the_probes", "prometheus", "prometheus");
    let dir = scratch("exporter-prometheus");
    // The server the probes measure also serves its own metrics (issue 41 item 8).
    let (server, iperf3_port) = netsweep_iperf3(&dir, &["--metrics", "127.0.0.1:0"]);
    let serve_metrics = crate::metrics::metrics_url(&server.log_first_line());
    let (_e, exporter_at) = exporter(&["--max-probes", "4", "--cache", "10s"]);
    let prom_port = free_port();
    let prom = format!("127.0.0.1:{prom_port}");
    // Each probe is fitted to its job's scrape timeout (issue 41): 2 s for netsweep's, 5 s for
    // iperf3's (two tests of a second at least).
    let job = |name: &str, params: &str, target: &str| {
        let t = if name == "iperf3" { "5s" } else { "2s" };
        format!(
            "  - job_name: {name}\n    scrape_interval: {t}\n    scrape_timeout: {t}\n    \
             metrics_path: /probe\n    params:\n{params}    \
             static_configs:\n      - targets: ['{target}']\n    relabel_configs:\n      \
             - source_labels: [__address__]\n        target_label: __param_target\n      \
             - source_labels: [__param_target]\n        target_label: instance\n      \
             - target_label: __address__\n        replacement: {exporter_at}\n"
        )
    };
    // iperf3_exporter's names, recorded from the probes' series (issue 41 item 8).
    let rules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/prometheus/iperf3_exporter-rules.yml"
    );
    let check = Command::new("promtool")
        .args(["check", "rules", rules])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         rule_files: ['{rules}']\nscrape_configs:\n{}{}{}{}  \
         - job_name: exporter\n    static_configs:\n      - targets: ['{exporter_at}']\n  \
         - job_name: serve\n    static_configs:\n      - targets: ['{serve_metrics}']\n",
        job(
            "netsweep_bidir",
            "      duration: ['300ms']\n",
            &server.addr
        ),
        job(
            "netsweep_latency",
            "      pattern: ['pingpong']\n      size: ['1k']\n      duration: ['300ms']\n",
            &server.addr
        ),
        job(
            "netsweep_udp",
            "      transport: ['udp']\n      pattern: ['stream']\n      duration: ['300ms']\n",
            &server.addr
        ),
        job(
            "iperf3",
            "      duration: ['1s']\n",
            &format!("iperf3://127.0.0.1:{iperf3_port}")
        ),
    );
    let _prom = prometheus(&dir, &config, &prom);
    let deadline = Instant::now() + Duration::from_secs(90);
    let wanted = [
        ("netsweep_probe_success", "netsweep_bidir"),
        ("netsweep_probe_success", "netsweep_latency"),
        ("netsweep_probe_success", "netsweep_udp"),
        ("netsweep_probe_success", "iperf3"),
        ("iperf3_up", "netsweep_bidir"),
        ("iperf3_up", "iperf3"),
    ];
    loop {
        let ready = std::net::TcpStream::connect(&prom).is_ok()
            && wanted
                .iter()
                .all(|(m, job)| query(&prom, &format!("{m}{{job=\"{job}\"}} == 1")).len() == 1);
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus has not scraped every probe: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    for (m, job) in [
        (
            "netsweep_receiver_throughput_bits_per_second",
            "netsweep_bidir",
        ),
        (
            "netsweep_reverse_throughput_bits_per_second",
            "netsweep_bidir",
        ),
        ("netsweep_tcp_retransmits", "netsweep_bidir"),
        ("netsweep_cpu_utilisation_ratio", "netsweep_bidir"),
        ("netsweep_half_rtt_seconds", "netsweep_latency"),
        ("netsweep_loss_ratio", "netsweep_udp"),
        ("netsweep_throughput_bits_per_second", "iperf3"),
        ("iperf3_received_bps", "iperf3"),
        ("iperf3_sent_bps", "iperf3"),
        ("iperf3_received_bps", "netsweep_bidir"),
        ("iperf3_retransmits", "netsweep_bidir"),
    ] {
        let r = query(&prom, &format!("{m}{{job=\"{job}\"}}"));
        assert!(!r.is_empty(), "{m} of {job}");
        let instance = r[0]["metric"]["instance"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let value = r[0]["value"][1].as_str().unwrap_or_default().to_string();
        eprintln!("{m}{{job=\"{job}\",instance=\"{instance}\"}} {value}");
    }
    let iperf3_instance = query(&prom, "netsweep_probe_success{job=\"iperf3\"}");
    assert_eq!(
        iperf3_instance[0]["metric"]["instance"],
        format!("iperf3://127.0.0.1:{iperf3_port}")
    );
    // The server's own counters, scraped by the same Prometheus: the probes' sessions on
    // both of its ports, started and finished; and the exposition passes promtool.
    loop {
        let done = |proto: &str| {
            query(
                &prom,
                &format!(
                    "netsweep_serve_sessions_finished_total{{job=\"serve\",protocol=\"{proto}\",outcome=\"ok\"}} > 0"
                ),
            )
            .len()
                == 1
        };
        if done("netsweep") && done("iperf3") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus has no finished sessions of both ports from serve --metrics"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let (_, exposition) = crate::metrics::get(&serve_metrics, "/metrics");
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{exposition}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Every query of the dashboard returns data, its variables given their "All" values.
    let (exprs, _) = dashboard_metrics();
    for e in exprs {
        let q = e
            .replace("$instance", ".*")
            .replace("$__rate_interval", "1m");
        assert!(
            !query(&prom, &q).is_empty(),
            "the dashboard's {e} returned nothing"
        );
    }
}
