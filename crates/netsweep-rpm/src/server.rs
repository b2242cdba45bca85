//! The server of `serve --rpm`: HTTP/2 (and HTTP/1.1, by ALPN) over TLS 1.3, answering any
//! responsiveness client — the configuration document at `/.well-known/nq` naming the host it
//! was asked by, a large object (`/large`, zeros, ended early when a connection reaches its
//! time limit), a one-byte one (`/small`) and an upload sink (`/slurp`). Every socket has
//! TCP_NOTSENT_LOWAT set. A connection is offered to `admit` once its TLS handshake is done
//! (the caller's admission: sessions, per-address caps, budget); one refused is answered
//! `503` with the reason on every request and closed.

use crate::config::{Document, LARGE, SMALL, UPLOAD, WELL_KNOWN};
use crate::sock;
use crate::zeros::Zeros;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::any::Any;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// What an admitted connection holds until it closes (the caller's slot).
pub type Admitted = Box<dyn Any + Send + Sync>;
/// The server's TLS configuration (certificate and key; the ALPN list is set here).
pub type TlsConfig = Arc<rustls::ServerConfig>;
/// The caller's admission: a slot for a connection from this address, or why not.
pub type Admit = Arc<dyn Fn(SocketAddr) -> Result<Admitted, String> + Send + Sync>;

/// The size of `/large`: 8 GiB, more than any test moves in its time.
pub const LARGE_BYTES: u64 = 8 << 30;
/// Most connections open at once, whoever holds them (each one's buffers are bounded by its
/// HTTP/2 windows).
pub const MAX_CONNECTIONS: usize = 1024;
/// Most bytes one upload request may carry.
pub const MAX_UPLOAD: u64 = 64 << 30;

/// How the server behaves.
#[derive(Clone)]
pub struct ServerOptions {
    /// The TLS configuration (its ALPN list is set here: h2, then http/1.1).
    pub tls: TlsConfig,
    /// The longest one connection may last (`serve --max-duration`).
    pub max_connection: Duration,
    /// How long a connection may take to finish its TLS handshake.
    pub handshake_timeout: Duration,
    /// Who may be served.
    pub admit: Admit,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("max_connection", &self.max_connection)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

/// Serves on `listener` until `stop` is set (checked every 100 ms); a connection's failure
/// ends only that connection.
pub fn serve(listener: TcpListener, opts: ServerOptions, stop: Arc<AtomicBool>) -> io::Result<()> {
    let mut tls = (*opts.tls).clone();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("netsweep-rpm")
        .enable_all()
        .build()?;
    listener.set_nonblocking(true)?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            let (s, peer) = tokio::select! {
                a = listener.accept() => match a {
                    Ok(a) => a,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = tick.tick() => {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                continue; // at the cap: closed unanswered
            };
            let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
            let (acceptor, opts) = (acceptor.clone(), opts.clone());
            tokio::spawn(async move {
                let _slot = slot;
                let _ = sock::tune(&s);
                // The document's fallback authority: the address this connection came to.
                let here = s.local_addr().map_or_else(
                    |_| "localhost".to_string(),
                    |a| SocketAddr::new(a.ip().to_canonical(), a.port()).to_string(),
                );
                let Ok(Ok(mut tls)) =
                    tokio::time::timeout(opts.handshake_timeout, acceptor.accept(s)).await
                else {
                    return;
                };
                tls.get_mut().1.set_buffer_limit(Some(sock::TLS_BUFFER));
                let admitted = (opts.admit)(peer);
                let until = Instant::now() + opts.max_connection;
                let refusal: Option<Arc<str>> = admitted.as_ref().err().map(|e| e.as_str().into());
                let authority_default: Arc<str> = here.into();
                let service = hyper::service::service_fn(move |req| {
                    let refusal = refusal.clone();
                    let fallback = authority_default.clone();
                    async move {
                        Ok::<_, io::Error>(match refusal {
                            Some(why) => text(
                                StatusCode::SERVICE_UNAVAILABLE,
                                format!("netsweep serve refused this client: {why}\n"),
                            ),
                            None => route(req, until, &fallback).await,
                        })
                    }
                });
                let mut b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                // A stream buffers 16 KiB at most (and /large's body comes in 16 KiB
                // chunks): a self probe's answer waits behind less of the load on its
                // connection. Against 64 KiB: self probes 230 ms instead of 290 across a
                // 20 Mbit/s FQ-CoDel path with seven loads (2.4 ms instead of 3.3-4.2 on
                // loopback), loopback goodput 9.0 Gbit/s instead of 9.5.
                b.http2()
                    .adaptive_window(true)
                    .max_concurrent_streams(32)
                    .max_send_buf_size(16 << 10)
                    .max_header_list_size(16 << 10);
                b.http1().max_buf_size(64 << 10);
                let conn = b.serve_connection(TokioIo::new(tls), service);
                let _ = tokio::time::timeout_at(until + Duration::from_secs(1), conn).await;
                drop(admitted);
            });
        }
    })
}

type Reply = Response<BoxBody<Bytes, io::Error>>;

/// The authority the document's URLs name: HTTP/2's `:authority` or HTTP/1.1's `Host` as the
/// client sent it, if it is a plausible `host[:port]` (under 256 bytes, no `/`, quote,
/// backslash or space: it is written into JSON and URLs), else the address it came to.
fn authority_of(authority: Option<&str>, host: Option<&str>, fallback: &str) -> String {
    authority
        .or(host)
        .filter(|a| !a.is_empty() && a.len() < 256)
        .filter(|a| {
            !a.contains(['/', '"', '\\', ' ', '?', '#', '@']) && !a.chars().any(char::is_control)
        })
        .unwrap_or(fallback)
        .to_string()
}

fn text(status: StatusCode, body: String) -> Reply {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed())
        .expect("a valid response")
}

/// One request's answer.
async fn route(req: Request<Incoming>, until: Instant, fallback: &str) -> Reply {
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, WELL_KNOWN) => {
            // The name the client used (HTTP/2's :authority, HTTP/1.1's Host), so that the
            // URLs it is given reach this server the way it did.
            let authority = authority_of(
                req.uri().authority().map(|a| a.as_str()),
                req.headers()
                    .get(http::header::HOST)
                    .and_then(|h| h.to_str().ok()),
                fallback,
            );
            let doc = serde_json::to_string(&Document::for_authority(&authority))
                .expect("the document serialises");
            Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(doc)).map_err(|e| match e {}).boxed())
                .expect("a valid response")
        }
        (&Method::GET, SMALL) => Response::builder()
            .header("content-type", "application/octet-stream")
            .header("cache-control", "no-store")
            .body(
                Full::new(Bytes::from_static(b"x"))
                    .map_err(|e| match e {})
                    .boxed(),
            )
            .expect("a valid response"),
        (&Method::GET, LARGE) => Response::builder()
            .header("content-type", "application/octet-stream")
            .header("cache-control", "no-store")
            .body(
                Zeros::new(LARGE_BYTES, None)
                    .until(until.into_std())
                    .boxed(),
            )
            .expect("a valid response"),
        (&Method::POST | &Method::PUT, UPLOAD) => {
            let mut body = req.into_body();
            let mut got = 0u64;
            loop {
                let frame = match tokio::time::timeout_at(until, body.frame()).await {
                    Ok(Some(Ok(f))) => f,
                    Ok(None) => break,
                    Ok(Some(Err(_))) | Err(_) => {
                        return text(StatusCode::REQUEST_TIMEOUT, "upload cut\n".into())
                    }
                };
                if let Some(d) = frame.data_ref() {
                    got += d.len() as u64;
                    if got > MAX_UPLOAD {
                        return text(StatusCode::PAYLOAD_TOO_LARGE, "upload too large\n".into());
                    }
                }
            }
            text(StatusCode::OK, format!("{got}\n"))
        }
        _ => text(
            StatusCode::NOT_FOUND,
            format!("netsweep serve --rpm answers {WELL_KNOWN}, {SMALL}, {LARGE} and {UPLOAD}\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_authority_never_reaches_the_document() {
        let f = "198.18.0.1:4043";
        assert_eq!(authority_of(Some("h:1"), Some("x"), f), "h:1");
        assert_eq!(authority_of(None, Some("[::1]:4043"), f), "[::1]:4043");
        let long = "a".repeat(300);
        for bad in [
            "evil\",\"x",
            "a/b",
            "a b",
            "u@h",
            "h?q",
            "h#f",
            "",
            long.as_str(),
            "h\u{7}",
        ] {
            assert_eq!(authority_of(Some(bad), None, f), f, "{bad:?}");
        }
        // What the client is given still parses as the draft's document.
        let doc = Document::for_authority(&authority_of(Some("h\"q"), None, f));
        let text = serde_json::to_vec(&doc).unwrap();
        assert_eq!(
            Document::parse(&text)
                .unwrap()
                .urls
                .small_https_download_url,
            "https://198.18.0.1:4043/small"
        );
    }
}
