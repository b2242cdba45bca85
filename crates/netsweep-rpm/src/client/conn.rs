//! One HTTP/2 connection of the client, opened with each stage timed (the TCP handshake, the
//! TLS handshake over its round trips, the HTTP/2 preface), its requests' bodies as the load
//! needs them: a GET read to the end, or an upload produced as fast as the connection takes it.

use crate::config::Endpoint;
use crate::sock;
use crate::zeros::Zeros;
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{combinators::BoxBody, BodyExt, Empty};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A request body, whichever kind.
pub type ReqBody = BoxBody<Bytes, io::Error>;

/// An open connection and how long its stages took.
#[derive(Debug)]
pub struct Opened {
    /// Where HTTP/2 requests go (clonable: probes share a load's connection).
    pub send: SendRequest<ReqBody>,
    /// The TCP handshake.
    pub tcp: Duration,
    /// The TLS handshake, divided by its round trips (TLS 1.3: one; 1.2: two).
    pub tls: Duration,
    /// The TLS version negotiated, as `TLS 1.3`.
    pub tls_version: &'static str,
}

/// Opens an HTTP/2 connection to `ep`, every stage within `timeout`; refuses a server that
/// does not offer HTTP/2 by name.
pub async fn open(
    ep: &Endpoint,
    tls: &Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> Result<Opened, String> {
    let addrs: Vec<_> = tokio::time::timeout(timeout, tokio::net::lookup_host(ep.authority()))
        .await
        .map_err(|_| format!("{}: the name did not resolve in time", ep.host))?
        .map_err(|e| format!("{}: {e}", ep.host))?
        .collect();
    let (s, tcp) = sock::connect(&addrs, timeout)
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", ep.authority()))?;
    let name = ServerName::try_from(ep.host.clone())
        .map_err(|e| format!("{}: not a TLS server name: {e}", ep.host))?;
    let t0 = Instant::now();
    let mut stream = tokio::time::timeout(
        timeout,
        tokio_rustls::TlsConnector::from(tls.clone()).connect(name, s),
    )
    .await
    .map_err(|_| {
        format!(
            "{}: the TLS handshake did not finish in time",
            ep.authority()
        )
    })?
    .map_err(|e| format!("{}: TLS: {e}", ep.authority()))?;
    let took = t0.elapsed();
    stream.get_mut().1.set_buffer_limit(Some(sock::TLS_BUFFER));
    let (_, c) = stream.get_ref();
    let tls_version = match c.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLS 1.2",
        _ => "TLS 1.3",
    };
    let round_trips = if tls_version == "TLS 1.2" { 2 } else { 1 };
    if c.alpn_protocol() != Some(b"h2") {
        return Err(format!(
            "{} does not speak HTTP/2 (ALPN h2): a responsiveness test multiplexes its self \
             probes on the load-generating connections, which HTTP/1.1 cannot; enable HTTP/2 \
             on the server",
            ep.authority()
        ));
    }
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .adaptive_window(true)
        .max_header_list_size(16 << 10)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{}: HTTP/2: {e}", ep.authority()))?;
    tokio::spawn(conn);
    Ok(Opened {
        send,
        tcp,
        tls: took / round_trips,
        tls_version,
    })
}

/// A non-success answer in words: its status and the start of its text (a `serve` that
/// refused the client says why there).
async fn refused(ep: &Endpoint, resp: http::Response<hyper::body::Incoming>) -> String {
    let status = resp.status();
    let mut body = resp.into_body();
    let mut text = Vec::new();
    while let Ok(Some(Ok(f))) = tokio::time::timeout(Duration::from_secs(1), body.frame()).await {
        if let Some(d) = f.data_ref() {
            text.extend_from_slice(&d[..d.len().min(512 - text.len())]);
        }
        if text.len() >= 512 {
            break;
        }
    }
    let text = String::from_utf8_lossy(&text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if text.is_empty() {
        format!("{}: the server answered {status}", ep.url)
    } else {
        format!("{}: the server answered {status}: {text}", ep.url)
    }
}

/// Sends one request on `send` once it can take one; its answer if a success, else the
/// answer in words.
async fn ask(
    send: &mut SendRequest<ReqBody>,
    method: Method,
    ep: &Endpoint,
    body: ReqBody,
) -> Result<http::Response<hyper::body::Incoming>, String> {
    send.ready().await.map_err(|e| format!("{}: {e}", ep.url))?;
    let resp = send
        .send_request(request(method, ep, body))
        .await
        .map_err(|e| format!("{}: {e}", ep.url))?;
    if !resp.status().is_success() {
        return Err(refused(ep, resp).await);
    }
    Ok(resp)
}

fn request(method: Method, ep: &Endpoint, body: ReqBody) -> Request<ReqBody> {
    Request::builder()
        .method(method)
        .uri(&ep.url)
        .header(
            "user-agent",
            concat!("netsweep/", env!("CARGO_PKG_VERSION")),
        )
        .body(body)
        .expect("a valid request")
}

fn empty() -> ReqBody {
    Empty::<Bytes>::new().map_err(|e| match e {}).boxed()
}

/// GETs `ep` and reads its body to the end, within `timeout`: its size and the time from
/// sending the request to its last byte. `counter`, if any, counts the body as it arrives;
/// `stop` ends the read early (Ok, with what arrived).
pub async fn get(
    send: &mut SendRequest<ReqBody>,
    ep: &Endpoint,
    counter: Option<&AtomicU64>,
    stop: Option<&AtomicBool>,
    timeout: Duration,
) -> Result<(u64, Duration), String> {
    let t0 = Instant::now();
    let read = async {
        let mut body = ask(send, Method::GET, ep, empty()).await?.into_body();
        let mut n = 0u64;
        while let Some(f) = body.frame().await {
            let f = f.map_err(|e| format!("{}: {e}", ep.url))?;
            if let Some(d) = f.data_ref() {
                n += d.len() as u64;
                if let Some(c) = counter {
                    c.fetch_add(d.len() as u64, Ordering::Relaxed);
                }
            }
            if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                break;
            }
        }
        Ok::<u64, String>(n)
    };
    let n = tokio::time::timeout(timeout, read).await.map_err(|_| {
        format!(
            "{}: no whole answer within {:.1} s",
            ep.url,
            timeout.as_secs_f64()
        )
    })??;
    Ok((n, t0.elapsed()))
}

/// POSTs up to `bytes` of zeros to `ep`, counted into `counter` as the connection takes
/// them, until `stop`; then waits for the answer.
pub async fn upload(
    send: &mut SendRequest<ReqBody>,
    ep: &Endpoint,
    bytes: u64,
    counter: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let body = Zeros::new(bytes, Some(counter)).stopped_by(stop.clone());
    let done = body.done();
    let resp = ask(send, Method::POST, ep, body.boxed()).await?;
    if !done.load(Ordering::SeqCst) && !stop.load(Ordering::Relaxed) {
        // An answer before the body's end: the server dropped the rest unread (nginx's
        // `return 200` does) — bytes counted as sent were not taken.
        return Err(format!(
            "{} answered {} before reading the upload: its upload endpoint must read the \
             whole body (nginx: proxy it to a sink, as docs/rpm.md shows)",
            ep.url,
            resp.status()
        ));
    }
    let _ = resp.into_body().collect().await;
    Ok(())
}

/// GETs `ep` whole (at most `limit` bytes) within `timeout`.
pub async fn fetch(
    send: &mut SendRequest<ReqBody>,
    ep: &Endpoint,
    limit: usize,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let read = async {
        let mut body = ask(send, Method::GET, ep, empty()).await?.into_body();
        let mut out = Vec::new();
        while let Some(f) = body.frame().await {
            let f = f.map_err(|e| format!("{}: {e}", ep.url))?;
            if let Some(d) = f.data_ref() {
                if out.len() + d.len() > limit {
                    return Err(format!("{}: more than {limit} bytes", ep.url));
                }
                out.extend_from_slice(d);
            }
        }
        Ok(out)
    };
    tokio::time::timeout(timeout, read).await.map_err(|_| {
        format!(
            "{}: no whole answer within {:.1} s",
            ep.url,
            timeout.as_secs_f64()
        )
    })?
}
