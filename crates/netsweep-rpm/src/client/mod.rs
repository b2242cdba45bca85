//! `netsweep rpm`: the draft's test against any server with its configuration document. Per
//! direction (download, then upload): one load-generating connection, one more each interval
//! until goodput saturates (up to MNP), foreign probes (a new connection's TCP, TLS and GET
//! timed apart) and self probes (a GET multiplexed on a random load connection) at most MPS a
//! second together, and each interval handed to `netsweep_model::rpm::Ramp`, which says when
//! goodput and then responsiveness are stable — or that time ran out, which the result says.

pub mod conn;
pub mod result;

use crate::config::{self, Document, Endpoint};
use conn::ReqBody;
use hyper::client::conn::http2::SendRequest;
use netsweep_model::rpm::{self as model, Foreign, Params, Ramp, SelfProbe, Step};
pub use result::{Direction, Idle, Interval, Report, RpmResult};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How the client runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The draft's parameters.
    pub params: Params,
    /// The TLS configuration (which certificates are accepted; ALPN h2 offered).
    pub tls: Arc<rustls::ClientConfig>,
    /// How it checks certificates, as the results say (`pinned …`, `insecure`, …).
    pub trust: String,
    /// The longest any one connect, handshake or probe may take.
    pub timeout: Duration,
    /// A line per interval on stderr.
    pub progress: bool,
    /// Measure download, upload, or both (in that order).
    pub download: bool,
    /// See `download`.
    pub upload: bool,
}

/// Probes of each kind in flight at most (a slow path must not pile them up).
const MAX_OUTSTANDING: usize = 16;
/// Foreign probes one after another on the idle path.
const IDLE_PROBES: usize = 10;
/// Bytes one upload request carries before the next is sent: 100 MB, under the body caps
/// servers set (Apple's nginx guidance: 250 MB).
const UPLOAD_REQUEST: u64 = 100_000_000;
/// Resamples of the bootstrap interval.
const RESAMPLES: usize = 2000;

/// The three endpoints, parsed.
struct Urls {
    small: Endpoint,
    large: Endpoint,
    upload: Endpoint,
}

/// Runs the test against `target` (a host, `host:port`, or the document's https:// URL).
pub fn run(target: &str, opts: &Options) -> Result<RpmResult, String> {
    let doc_ep = config::document_url(target)?;
    let tls = opts.tls.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("netsweep-rpm")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the client's runtime: {e}"))?;
    let out = rt.block_on(test(doc_ep, tls, opts));
    rt.shutdown_timeout(Duration::from_secs(1));
    out
}

async fn test(
    doc_ep: Endpoint,
    tls: Arc<rustls::ClientConfig>,
    opts: &Options,
) -> Result<RpmResult, String> {
    let started = netsweep_model::time::rfc3339(SystemTime::now());
    let mut o = conn::open(&doc_ep, &tls, opts.timeout).await?;
    let doc = conn::fetch(&mut o.send, &doc_ep, config::MAX_DOCUMENT, opts.timeout).await?;
    drop(o.send);
    let doc = Document::parse(&doc).map_err(|e| format!("{}: {e}", doc_ep.url))?;
    let urls = Urls {
        small: Endpoint::parse(&doc.urls.small_https_download_url)?,
        large: Endpoint::parse(&doc.urls.large_https_download_url)?,
        upload: Endpoint::parse(&doc.urls.https_upload_url)?,
    };
    let idle = idle(&urls.small, &tls, opts).await?;
    let mut directions = Vec::new();
    for (on, download) in [(opts.download, true), (opts.upload, false)] {
        if on {
            directions.push(direction(download, &urls, &tls, opts).await);
        }
    }
    Ok(RpmResult {
        schema: result::SCHEMA.to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started,
        config_url: doc_ep.url.clone(),
        urls: [urls.large.url, urls.small.url, urls.upload.url],
        trust: opts.trust.clone(),
        tls_version: o.tls_version.to_string(),
        params: opts.params,
        idle,
        directions,
        lab: None,
        warnings: Vec::new(),
    })
}

/// One foreign probe: a new connection to `small` and its GET, each stage timed.
async fn foreign(
    small: &Endpoint,
    tls: &Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> Result<(f64, f64, f64), String> {
    let mut o = conn::open(small, tls, timeout).await?;
    let (_, http) = conn::get(&mut o.send, small, None, None, timeout).await?;
    Ok((o.tcp.as_secs_f64(), o.tls.as_secs_f64(), http.as_secs_f64()))
}

/// Foreign probes one after another on the idle path; the first failure fails the test (the
/// server cannot be measured at all).
async fn idle(
    small: &Endpoint,
    tls: &Arc<rustls::ClientConfig>,
    opts: &Options,
) -> Result<Option<Idle>, String> {
    let mut probes = Vec::new();
    for _ in 0..IDLE_PROBES {
        let (tcp, tls_t, http) = foreign(small, tls, opts.timeout).await?;
        probes.push(Foreign {
            interval: 0,
            tcp,
            tls: tls_t,
            http,
        });
    }
    let tm = |f: fn(&Foreign) -> f64| {
        let mut v: Vec<f64> = probes.iter().map(f).collect();
        model::trimmed_mean(&mut v, opts.params.trim)
    };
    let (Some(tcp), Some(tls_t), Some(http)) = (tm(|p| p.tcp), tm(|p| p.tls), tm(|p| p.http))
    else {
        return Ok(None);
    };
    let mean = (tcp + tls_t + http) / 3.0;
    Ok((mean > 0.0).then(|| Idle {
        rpm: 60.0 / mean,
        tcp_ms: tcp * 1e3,
        tls_ms: tls_t * 1e3,
        http_ms: http * 1e3,
        probes: probes.len(),
    }))
}

/// What one direction's tasks share.
#[derive(Default)]
struct Shared {
    bytes: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    /// The open load-generating connections, by their number.
    loads: Mutex<Vec<(usize, SendRequest<ReqBody>)>>,
    load_errors: Mutex<Vec<String>>,
    /// Load-generating connections that failed since the direction last looked.
    failed: AtomicUsize,
    foreign: Mutex<Vec<Foreign>>,
    selfp: Mutex<Vec<SelfProbe>>,
    probe_errors: AtomicU64,
    out_foreign: AtomicUsize,
    out_self: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Opens load-generating connection `id` and keeps it loaded until the direction stops; one
/// that fails leaves the open set (no probe picks it again) and is counted in `failed`.
fn spawn_load(
    id: usize,
    download: bool,
    urls: &Urls,
    tls: &Arc<rustls::ClientConfig>,
    sh: &Arc<Shared>,
    timeout: Duration,
) -> tokio::task::JoinHandle<()> {
    let ep = if download {
        urls.large.clone()
    } else {
        urls.upload.clone()
    };
    let (tls, sh) = (tls.clone(), sh.clone());
    tokio::spawn(async move {
        let mut o = match conn::open(&ep, &tls, timeout).await {
            Ok(o) => o,
            Err(e) => return load_failed(&sh, id, e),
        };
        lock(&sh.loads).push((id, o.send.clone()));
        while !sh.stop.load(Ordering::Relaxed) {
            let r = if download {
                // No deadline of its own beyond the direction's: a large object takes long.
                conn::get(
                    &mut o.send,
                    &ep,
                    Some(sh.bytes.as_ref()),
                    Some(sh.stop.as_ref()),
                    Duration::from_secs(3600),
                )
                .await
                .map(|_| ())
            } else {
                conn::upload(
                    &mut o.send,
                    &ep,
                    UPLOAD_REQUEST,
                    sh.bytes.clone(),
                    sh.stop.clone(),
                )
                .await
            };
            if let Err(e) = r {
                if !sh.stop.load(Ordering::Relaxed) {
                    load_failed(&sh, id, e);
                }
                return;
            }
        }
    })
}

/// Load-generating connection `id` failed with `e`: out of the open set, counted, and its
/// error kept (the first few).
fn load_failed(sh: &Shared, id: usize, e: String) {
    lock(&sh.loads).retain(|(i, _)| *i != id);
    sh.failed.fetch_add(1, Ordering::Relaxed);
    let mut v = lock(&sh.load_errors);
    if v.len() < 5 {
        v.push(e);
    }
}

/// The probes of a direction, MPS a second at most (half foreign, half self), until it stops.
fn spawn_probes(
    small: &Endpoint,
    tls: &Arc<rustls::ClientConfig>,
    sh: &Arc<Shared>,
    start: Instant,
    p: Params,
    timeout: Duration,
) -> tokio::task::JoinHandle<()> {
    let (small, tls, sh) = (small.clone(), tls.clone(), sh.clone());
    // MPS = 100 probes a second: a foreign and a self probe every 20 ms.
    let every = Duration::from_millis(20);
    tokio::spawn(async move {
        // The probes in flight: aborted with this task when the direction ends, so none of
        // them runs on into the next direction's load.
        let mut flying = tokio::task::JoinSet::new();
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let interval_of = move |t: Instant| {
            (t.duration_since(start).as_millis() / u128::from(p.interval_ms)) as usize
        };
        let mut pick = 0x9E37_79B9_7F4A_7C15u64;
        while !sh.stop.load(Ordering::Relaxed) {
            tick.tick().await;
            while flying.try_join_next().is_some() {}
            if sh.out_foreign.load(Ordering::Relaxed) < MAX_OUTSTANDING {
                sh.out_foreign.fetch_add(1, Ordering::Relaxed);
                let (small, tls, sh) = (small.clone(), tls.clone(), sh.clone());
                flying.spawn(async move {
                    match foreign(&small, &tls, timeout).await {
                        Ok((tcp, tls_t, http)) => lock(&sh.foreign).push(Foreign {
                            interval: interval_of(Instant::now()),
                            tcp,
                            tls: tls_t,
                            http,
                        }),
                        Err(_) if sh.stop.load(Ordering::Relaxed) => {}
                        Err(_) => {
                            sh.probe_errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    sh.out_foreign.fetch_sub(1, Ordering::Relaxed);
                });
            }
            // A random load connection (xorshift: uniform enough, and no dependency).
            pick ^= pick << 13;
            pick ^= pick >> 7;
            pick ^= pick << 17;
            let send = {
                let loads = lock(&sh.loads);
                (!loads.is_empty()).then(|| loads[(pick % loads.len() as u64) as usize].1.clone())
            };
            if let Some(mut send) = send {
                if sh.out_self.load(Ordering::Relaxed) < MAX_OUTSTANDING {
                    sh.out_self.fetch_add(1, Ordering::Relaxed);
                    let (small, sh) = (small.clone(), sh.clone());
                    flying.spawn(async move {
                        match conn::get(&mut send, &small, None, None, timeout).await {
                            Ok((_, http)) => lock(&sh.selfp).push(SelfProbe {
                                interval: interval_of(Instant::now()),
                                http: http.as_secs_f64(),
                            }),
                            Err(_) if sh.stop.load(Ordering::Relaxed) => {}
                            Err(_) => {
                                sh.probe_errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        sh.out_self.fetch_sub(1, Ordering::Relaxed);
                    });
                }
            }
        }
    })
}

/// One direction's test, to stability or to the end of its intervals.
async fn direction(
    download: bool,
    urls: &Urls,
    tls: &Arc<rustls::ClientConfig>,
    opts: &Options,
) -> Direction {
    let p = opts.params;
    let name = if download { "download" } else { "upload" };
    let sh = Arc::new(Shared::default());
    let start = Instant::now();
    let mut tasks = vec![spawn_load(0, download, urls, tls, &sh, opts.timeout)];
    // Started, and of those failed: the ramp counts the ones open (started − failed).
    let (mut started, mut failed) = (1, 0);
    tasks.push(spawn_probes(&urls.small, tls, &sh, start, p, opts.timeout));
    let mut ramp = Ramp::new(p);
    let mut intervals = Vec::new();
    let mut total = 0u64;
    let id = Duration::from_millis(p.interval_ms);
    let mut swapped = start;
    let outcome = loop {
        let k = ramp.intervals();
        tokio::time::sleep_until((start + id * (k as u32 + 1)).into()).await;
        let bytes = sh.bytes.swap(0, Ordering::Relaxed);
        // The bytes are of the time since the last swap, which a late wake-up lengthens.
        let now = Instant::now();
        let took = now.duration_since(swapped).as_secs_f64();
        swapped = now;
        total += bytes;
        // A failed load connection is replaced, MNP times a direction at most (a server
        // that refuses every one is not asked forever).
        for _ in 0..sh.failed.swap(0, Ordering::Relaxed) {
            failed += 1;
            if failed <= p.max_connections {
                tasks.push(spawn_load(started, download, urls, tls, &sh, opts.timeout));
                started += 1;
            }
        }
        let connections = started - failed.min(started);
        let f = lock(&sh.foreign).clone();
        let s = lock(&sh.selfp).clone();
        let step = ramp.end_interval_after(bytes, took, &f, &s, connections);
        let (wf, ws) = ramp.window(k, &f, &s);
        let rpm = model::responsiveness(&wf, &ws, p.trim).map(|r| r.rpm);
        let row = Interval {
            t_s: (k + 1) as f64 * p.interval_ms as f64 / 1e3,
            bytes,
            seconds: took,
            goodput_bps: ramp.goodput_bps().unwrap_or(0.0),
            connections,
            rpm,
            probes: (
                f.iter().filter(|x| x.interval == k).count(),
                s.iter().filter(|x| x.interval == k).count(),
            ),
        };
        if opts.progress {
            eprintln!(
                "rpm: {name} {:>4.0} s  goodput {:>8.1} Mbit/s  {:>2} connections  RPM {}",
                row.t_s,
                row.goodput_bps / 1e6,
                connections,
                rpm.map_or("—".to_string(), |r| format!("{r:.0}"))
            );
        }
        intervals.push(row);
        match step {
            Step::Continue { add_connection } => {
                if add_connection {
                    tasks.push(spawn_load(started, download, urls, tls, &sh, opts.timeout));
                    started += 1;
                }
            }
            Step::Stable => break "stable",
            Step::OutOfTime => break "out of time",
        }
    };
    sh.stop.store(true, Ordering::Relaxed);
    for t in &tasks {
        t.abort();
    }
    lock(&sh.loads).clear();
    let last = ramp.intervals().saturating_sub(1);
    let f = lock(&sh.foreign).clone();
    let s = lock(&sh.selfp).clone();
    let (wf, ws) = ramp.window(last, &f, &s);
    let secs = |i: usize| (i + 1) as f64 * p.interval_ms as f64 / 1e3;
    let load_errors = lock(&sh.load_errors).clone();
    Direction {
        direction: name.to_string(),
        outcome: outcome.to_string(),
        goodput_bps: ramp.goodput_bps().unwrap_or(0.0),
        goodput_saturated_s: ramp.goodput_saturated.map(|(i, _)| secs(i)),
        rpm_stable_s: ramp.rpm_stable.map(|(i, _)| secs(i)),
        connections: started - failed.min(started),
        connections_failed: failed,
        responsiveness: model::responsiveness(&wf, &ws, p.trim),
        rpm_interval95: model::bootstrap(&wf, &ws, p.trim, RESAMPLES, 0x5EED),
        duration_s: start.elapsed().as_secs_f64(),
        bytes: total,
        probe_errors: sh.probe_errors.load(Ordering::Relaxed),
        load_errors,
        intervals,
    }
}
