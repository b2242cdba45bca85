//! The figures of a responsiveness test (`netsweep rpm`, a scenario run with
//! `command = "rpm"`): each direction's RPM, its probes' phases, its goodput, and the
//! arithmetic of the queue they wait behind — the round trip of a path whose bottleneck queue
//! toward the loaded end is full (its delays both ways plus Q ÷ R), read from the lab the
//! results recorded, and the RPM that round trip alone would give.

use super::{Combine, Metric, MetricUnit};
use crate::rpm::result::{Direction, RpmResult};

fn direction<'a>(r: &'a RpmResult, name: &str) -> Option<&'a Direction> {
    r.directions.iter().find(|d| d.direction == name)
}

fn ms_to_ns(ms: f64) -> f64 {
    ms * 1e6
}

/// The server's address in the configuration document's URL (`https://ADDR:PORT/…`).
fn server_addr(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next();
    }
    Some(authority.rsplit_once(':').map_or(authority, |(a, _)| a))
}

/// The emulated path between the client and the server at `server` in a recorded lab: its
/// delays both ways (ns) and, toward the client (`download`) or the server (`upload`), the
/// bottleneck's rate (bit/s) and queue (bytes). `None` without a path emulator on the link
/// or with a queue counted in frames.
pub fn emulated_path(
    lab: &serde_json::Value,
    server: &str,
    loaded: &str,
) -> Option<(f64, f64, f64)> {
    for l in lab.get("links")?.as_array()? {
        let server_end = ["a", "b"].into_iter().find(|e| {
            l.get(e)
                .and_then(|end| end.get("addr"))
                .and_then(|a| a.as_str())
                == Some(server)
                || l.get(e)
                    .and_then(|end| end.get("addr6"))
                    .and_then(|a| a.as_str())
                    == Some(server)
        });
        let Some(server_end) = server_end else {
            continue;
        };
        let dirs = l.pointer("/emulator/config/directions")?.as_array()?;
        // Directions are from a, then from b: toward the server is from the other end.
        let toward_server = usize::from(server_end == "a");
        let toward = if loaded == "upload" {
            toward_server
        } else {
            1 - toward_server
        };
        let delays: f64 = dirs
            .iter()
            .map(|d| d.get("delay_ns").and_then(|v| v.as_f64()).unwrap_or(0.0))
            .sum();
        let d = dirs.get(toward)?;
        let rate = d.get("rate_bps")?.as_f64().filter(|r| *r > 0.0)?;
        let queue = d.get("queue_bytes")?.as_f64()?;
        return Some((delays, rate, queue));
    }
    None
}

/// The emulated path a test crossed ([`emulated_path`]), from the lab its results recorded:
/// (delays both ways in ns, rate in bit/s, queue in bytes) toward the `loaded` end.
pub fn path_of(r: &RpmResult, loaded: &str) -> Option<(f64, f64, f64)> {
    emulated_path(r.lab.as_ref()?, server_addr(&r.config_url)?, loaded)
}

/// The round trip through a full bottleneck queue toward the `loaded` end: the delays both
/// ways plus the queue's bytes at the bottleneck's rate (ns).
pub fn full_queue_rtt(r: &RpmResult, loaded: &str) -> Option<f64> {
    let (delays, rate, queue) = path_of(r, loaded)?;
    Some(delays + queue * 8.0 / rate * 1e9)
}

macro_rules! rpm_metric {
    ($name:literal, $label:literal, $unit:expr, $read:expr) => {
        Metric {
            name: $name,
            label: $label,
            unit: $unit,
            combine: Combine::Mean,
            patterns: &[],
            read: |_, _| None,
            rpm: Some($read),
        }
    };
}

/// The responsiveness test's figures.
pub const RPM_METRICS: &[Metric] = &[
    rpm_metric!(
        "rpm_download",
        "RPM under download",
        MetricUnit::Plain,
        |r| { direction(r, "download")?.responsiveness.map(|x| x.rpm) }
    ),
    rpm_metric!("rpm_upload", "RPM under upload", MetricUnit::Plain, |r| {
        direction(r, "upload")?.responsiveness.map(|x| x.rpm)
    }),
    rpm_metric!("rpm_idle", "RPM of the idle path", MetricUnit::Plain, |r| {
        r.idle.as_ref().map(|i| i.rpm)
    }),
    rpm_metric!(
        "foreign_rpm_download",
        "RPM of new connections under download",
        MetricUnit::Plain,
        |r| direction(r, "download")?
            .responsiveness
            .map(|x| x.foreign_rpm)
    ),
    rpm_metric!(
        "tcp_connect_download",
        "TCP handshake of a new connection under download",
        MetricUnit::Nanos,
        |r| direction(r, "download")?
            .responsiveness
            .map(|x| ms_to_ns(x.tcp_ms))
    ),
    rpm_metric!(
        "loaded_get_download",
        "GET on a loaded connection under download",
        MetricUnit::Nanos,
        |r| direction(r, "download")?
            .responsiveness
            .map(|x| ms_to_ns(x.http_loaded_ms))
    ),
    rpm_metric!(
        "goodput_download",
        "download goodput",
        MetricUnit::Mbps,
        |r| direction(r, "download").map(|d| d.goodput_bps / 1e6)
    ),
    rpm_metric!("goodput_upload", "upload goodput", MetricUnit::Mbps, |r| {
        direction(r, "upload").map(|d| d.goodput_bps / 1e6)
    }),
    rpm_metric!(
        "full_queue_rtt_download",
        "round trip through a full queue toward the client (delays + Q ÷ R)",
        MetricUnit::Nanos,
        |r| full_queue_rtt(r, "download")
    ),
    rpm_metric!(
        "full_queue_rpm_download",
        "RPM of round trips through a full queue toward the client (60 s ÷ (delays + Q ÷ R))",
        MetricUnit::Plain,
        |r| full_queue_rtt(r, "download").map(|t| 60e9 / t)
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::metric::metric;

    fn lab(server_end: &str) -> serde_json::Value {
        let (a, b) = if server_end == "a" {
            ("198.18.1.2", "198.18.1.1")
        } else {
            ("198.18.1.1", "198.18.1.2")
        };
        serde_json::json!({"links": [{
            "a": {"host": "x", "addr": a},
            "b": {"host": "y", "addr": b},
            "emulator": {"config": {"directions": [
                {"delay_ns": 5_000_000, "rate_bps": 20_000_000, "queue_bytes": 512_000},
                {"delay_ns": 7_000_000, "rate_bps": 10_000_000, "queue_bytes": 128_000}
            ]}}
        }]})
    }

    fn result(lab: serde_json::Value) -> RpmResult {
        serde_json::from_value(serde_json::json!({
            "schema": "netsweep-rpm", "tool_version": "0", "started": "",
            "config_url": "https://198.18.1.2:4043/.well-known/nq",
            "urls": ["", "", ""], "trust": "insecure", "tls_version": "TLSv1_3",
            "params": crate::rpm::Params::default(), "idle": null, "directions": [],
            "lab": lab
        }))
        .unwrap()
    }

    #[test]
    fn a_full_queue_adds_its_bytes_at_the_rate_toward_the_loaded_end() {
        // The server is end b: toward the client (a) is the direction from b, the second.
        let r = result(lab("b"));
        let m = metric("full_queue_rtt_download").unwrap();
        let rtt = (m.rpm.unwrap())(&r).unwrap();
        assert!(
            (rtt - (12e6 + 128_000.0 * 8.0 / 10e6 * 1e9)).abs() < 1.0,
            "{rtt}"
        );
        let rpm = (metric("full_queue_rpm_download").unwrap().rpm.unwrap())(&r).unwrap();
        assert!((rpm - 60e9 / rtt).abs() < 1e-9);
        // The server is end a: toward the client (b) is the first direction.
        let r = result(lab("a"));
        let rtt = (m.rpm.unwrap())(&r).unwrap();
        assert!(
            (rtt - (12e6 + 512_000.0 * 8.0 / 20e6 * 1e9)).abs() < 1.0,
            "{rtt}"
        );
        // No lab: no arithmetic.
        assert_eq!((m.rpm.unwrap())(&result(serde_json::Value::Null)), None);
    }

    #[test]
    fn the_server_address_comes_from_the_document_url() {
        assert_eq!(server_addr("https://198.18.1.2:4043/x"), Some("198.18.1.2"));
        assert_eq!(server_addr("https://[fd00::2]:4043/x"), Some("fd00::2"));
        assert_eq!(server_addr("https://host/x"), Some("host"));
    }
}
