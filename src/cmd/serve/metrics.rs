//! `serve --metrics ADDR`: a small HTTP endpoint answering `GET /metrics` with the server's
//! counters ([`ServeMetrics`]) in Prometheus' text format, on one thread until the server
//! stops. Nothing a request says sizes anything: the path is matched, the rest ignored.

use crate::error::{Error, Result};
use netsweep_engine::server::metrics::ServeMetrics;
use std::net::ToSocketAddrs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tiny_http::{Header, Response, Server};

/// Prometheus' text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds `at` and serves the counters until `stop` is set; returns them and the bound
/// address. A bad address is a usage error, a port already taken a run failure.
pub fn endpoint(at: &str, stop: Arc<AtomicBool>) -> Result<(Arc<ServeMetrics>, String)> {
    if at.to_socket_addrs().is_err() {
        return Err(Error::usage(format!(
            "--metrics {at}: not an address: write HOST:PORT, e.g. 127.0.0.1:9470 or [::1]:9470"
        )));
    }
    let server = Server::http(at).map_err(|e| {
        Error::failed(format!(
            "cannot serve metrics on {at}: {e} (is another server using the port? give \
             --metrics another one)"
        ))
    })?;
    let bound = server
        .server_addr()
        .to_ip()
        .map_or(at.to_string(), |a| a.to_string());
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let metrics = Arc::new(ServeMetrics::new(env!("CARGO_PKG_VERSION"), started));
    let shown = metrics.clone();
    std::thread::Builder::new()
        .name("netsweep-metrics".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match server.recv_timeout(Duration::from_millis(200)) {
                    Ok(Some(req)) => {
                        let r = if req.url() == "/metrics" {
                            let mut r = Response::from_string(shown.exposition());
                            if let Ok(h) = Header::from_bytes("Content-Type", TEXT_FORMAT) {
                                r.add_header(h);
                            }
                            r
                        } else {
                            Response::from_string("netsweep serve: metrics are at /metrics\n")
                                .with_status_code(404)
                        };
                        let _ = req.respond(r);
                    }
                    Ok(None) => {}
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        })
        .map_err(|e| Error::failed(format!("cannot start the metrics thread: {e}")))?;
    Ok((metrics, bound))
}
