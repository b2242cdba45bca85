//! `netsweep exporter`: a Prometheus probe in the manner of the blackbox exporter. `/probe?target=…`
//! runs a short `netsweep run` (this binary, as a child with a deadline) against the target and
//! answers its OpenMetrics exposition with `netsweep_probe_success` and
//! `netsweep_probe_duration_seconds` appended; `/metrics` describes the exporter itself.
//! Bounded: each parameter validated (`query`), at most `--max-probes` probes
//! at once (others are told so, 503), one probe per target at a time (a second request waits
//! for the first's result), each result served again for `--cache` (a scrape every second
//! measures once per period), a fixed pool of request threads.

use crate::cli::exporter::ExporterArgs;
use crate::error::{Error, Result};
use crate::signal;
use query::{Probe, ProbeLimits, MAX_QUERY};
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::net::ToSocketAddrs;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tiny_http::{Header, Method, Request, Response, Server};

mod query;

/// Most cached results kept (the oldest goes first).
const MAX_CACHED: usize = 256;
/// The largest exposition read from a probe's `netsweep run`.
const MAX_OUTPUT: u64 = 1 << 20;
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The exporter's state, shared by its request threads.
struct Exporter {
    limits: ProbeLimits,
    max_probes: usize,
    cache_for: Duration,
    running: AtomicUsize,
    cache: Mutex<HashMap<String, (Instant, String)>>,
    in_flight: Mutex<HashSet<String>>,
    done: Condvar,
    counts: [AtomicU64; 5],
    probe_ns: AtomicU64,
}

/// What happened to a probe request, for `/metrics`.
#[derive(Clone, Copy)]
enum Outcome {
    Success = 0,
    Failure = 1,
    Cached = 2,
    Busy = 3,
    Invalid = 4,
}

const OUTCOMES: [&str; 5] = ["success", "failure", "cached", "busy", "invalid"];

/// Serves probes and `/metrics` until SIGTERM or Ctrl-C.
pub fn main(a: ExporterArgs) -> Result {
    // An address that does not parse is a usage error, not a port someone else holds.
    if a.listen.to_socket_addrs().is_err() {
        return Err(Error::usage(format!(
            "--listen {}: not an address: write HOST:PORT, e.g. 127.0.0.1:9469 or [::]:9469",
            a.listen
        )));
    }
    let server = Arc::new(Server::http(a.listen.as_str()).map_err(|e| {
        Error::failed(format!(
            "cannot listen on {}: {e} (is another exporter using the port? try --listen)",
            a.listen
        ))
    })?);
    let stop = signal::install();
    let ex = Arc::new(Exporter {
        limits: ProbeLimits {
            max_duration: a.max_duration,
            max_size: 1 << 20,
        },
        max_probes: a.max_probes as usize,
        cache_for: a.cache,
        running: AtomicUsize::new(0),
        cache: Mutex::default(),
        in_flight: Mutex::default(),
        done: Condvar::new(),
        counts: Default::default(),
        probe_ns: AtomicU64::new(0),
    });
    let at = server
        .server_addr()
        .to_ip()
        .map_or(a.listen.clone(), |s| s.to_string());
    eprintln!(
        "netsweep exporter: listening on http://{at}/ (/probe?target=HOST, /metrics; {} probes \
         at once, results kept {:.0} s; Ctrl-C stops)",
        a.max_probes,
        a.cache.as_secs_f64()
    );
    // Request threads: the probes' plus a few for /metrics and refusals.
    let threads: Vec<_> = (0..a.max_probes as usize + 4)
        .map(|_| {
            let (server, ex, stop) = (server.clone(), ex.clone(), stop.clone());
            std::thread::spawn(move || serve(&server, &ex, &stop))
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn serve(server: &Server, ex: &Exporter, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(req)) => handle(req, ex),
            Ok(None) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn text(status: u16, body: String) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_string(body).with_status_code(status)
}

fn handle(req: Request, ex: &Exporter) {
    let url = req.url().to_string();
    if url.len() > MAX_QUERY + 16 {
        let _ = req.respond(text(414, "the URL is too long\n".into()));
        return;
    }
    if *req.method() != Method::Get {
        let _ = req.respond(text(405, "GET only\n".into()));
        return;
    }
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let (status, body, metrics) = match path {
        "/probe" => probe(query, ex),
        "/metrics" => (200, self_metrics(ex), true),
        "/" => (
            200,
            "netsweep exporter: /probe?target=HOST[:PORT] (or iperf3://HOST[:PORT]) \
             [&transport=tcp|udp&pattern=bidir|stream|pingpong&size=SIZE&duration=TIME\
             &reverse=true], /metrics\n"
                .into(),
            false,
        ),
        _ => (404, "not found: /probe or /metrics\n".into(), false),
    };
    let mut r = text(status, body);
    if metrics {
        if let Ok(h) = Header::from_bytes("Content-Type", OPENMETRICS) {
            r = r.with_header(h);
        }
    }
    let _ = req.respond(r);
}

/// Serves one `/probe`: from the cache, after another request's run of the same probe, or by
/// running it (within the limit of probes at once).
fn probe(query: &str, ex: &Exporter) -> (u16, String, bool) {
    let p = match Probe::parse(query, &ex.limits) {
        Ok(p) => p,
        Err(e) => {
            ex.counts[Outcome::Invalid as usize].fetch_add(1, Ordering::Relaxed);
            return (400, format!("netsweep exporter: {e}\n"), false);
        }
    };
    let key = p.key();
    // One run per probe at a time: a second request waits for the first one's result.
    let give_up = Instant::now() + deadline(&p);
    {
        let mut running = ex.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(body) = cached(ex, &key) {
                ex.counts[Outcome::Cached as usize].fetch_add(1, Ordering::Relaxed);
                return (200, body, true);
            }
            if !running.contains(&key) {
                break;
            }
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (
                    503,
                    "a probe of this target is still running\n".into(),
                    false,
                );
            }
            running = ex
                .done
                .wait_timeout(running, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let taken = ex.running.fetch_add(1, Ordering::SeqCst);
        if taken >= ex.max_probes {
            ex.running.fetch_sub(1, Ordering::SeqCst);
            ex.counts[Outcome::Busy as usize].fetch_add(1, Ordering::Relaxed);
            return (
                503,
                format!(
                    "netsweep exporter: {} probes are running, its --max-probes; try later\n",
                    ex.max_probes
                ),
                false,
            );
        }
        running.insert(key.clone());
    }
    let t0 = Instant::now();
    let result = run(&p);
    let secs = t0.elapsed().as_secs_f64();
    ex.probe_ns
        .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let (ok, exposition) = match result {
        Ok(text) => (true, text),
        Err(e) => {
            let shown = netsweep_proto::text::printable(&e);
            eprintln!("netsweep exporter: probe of {} failed: {shown}", p.target());
            (false, String::new())
        }
    };
    let outcome = if ok {
        Outcome::Success
    } else {
        Outcome::Failure
    };
    ex.counts[outcome as usize].fetch_add(1, Ordering::Relaxed);
    let body = finish(&exposition, ok, secs);
    {
        let mut c = ex.cache.lock().unwrap_or_else(|e| e.into_inner());
        c.retain(|_, (at, _)| at.elapsed() < ex.cache_for);
        if c.len() >= MAX_CACHED {
            if let Some(oldest) = c
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
            {
                c.remove(&oldest);
            }
        }
        c.insert(key.clone(), (Instant::now(), body.clone()));
    }
    ex.running.fetch_sub(1, Ordering::SeqCst);
    ex.in_flight
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&key);
    ex.done.notify_all();
    (200, body, true)
}

fn cached(ex: &Exporter, key: &str) -> Option<String> {
    let c = ex.cache.lock().unwrap_or_else(|e| e.into_inner());
    c.get(key)
        .filter(|(at, _)| at.elapsed() < ex.cache_for)
        .map(|(_, b)| b.clone())
}

/// How long a probe may run: its point's time, the session's setup and an iperf3 server's
/// whole tests (at least a second each, two at least).
fn deadline(p: &Probe) -> Duration {
    p.duration * 3 + Duration::from_secs(if p.iperf3 { 12 } else { 8 })
}

/// Runs the probe's `netsweep run` (this binary) to its end or its deadline: its exposition.
fn run(p: &Probe) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut child = Command::new(exe)
        .args(p.run_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start netsweep run: {e}"))?;
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.take(MAX_OUTPUT).read_to_string(&mut s);
            // Anything beyond is drained, so the run never blocks on a full pipe.
            let _ = std::io::copy(o, &mut std::io::sink());
        }
        s
    });
    // The run's progress and errors: read to the end (a full pipe would stall it), the last
    // 16 KiB kept.
    let errs = std::thread::spawn(move || {
        let mut kept: Vec<u8> = Vec::new();
        let mut buf = [0u8; 4096];
        while let Some(Ok(n)) = err.as_mut().map(|e| e.read(&mut buf)) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > 16 << 10 {
                kept.drain(..kept.len() - (16 << 10));
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    });
    let until = Instant::now() + deadline(p);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = reader.join().unwrap_or_default();
    let why = errs.join().unwrap_or_default();
    match status {
        None => Err(format!(
            "no result within {:.0} s",
            deadline(p).as_secs_f64()
        )),
        Some(s) if s.success() && text.trim_end().ends_with("# EOF") => Ok(text),
        Some(_) => Err(why
            .lines()
            .last()
            .unwrap_or("netsweep run failed")
            .to_string()),
    }
}

/// The probe's answer: the run's exposition (without its `# EOF`) and the probe's own series.
fn finish(exposition: &str, ok: bool, secs: f64) -> String {
    let mut s = exposition
        .trim_end()
        .strip_suffix("# EOF")
        .unwrap_or(exposition)
        .to_string();
    s.push_str(&format!(
        "# TYPE netsweep_probe_success gauge\n# HELP netsweep_probe_success Whether the probe's \
         test completed (1) or not (0).\nnetsweep_probe_success {}\n# TYPE \
         netsweep_probe_duration_seconds gauge\n# HELP netsweep_probe_duration_seconds Wall \
         time of the probe's test, session setup included.\nnetsweep_probe_duration_seconds \
         {secs}\n# EOF\n",
        u8::from(ok)
    ));
    s
}

/// `/metrics`: the exporter's own series.
fn self_metrics(ex: &Exporter) -> String {
    let mut s = String::from(
        "# TYPE netsweep_exporter_probes counter\n# HELP netsweep_exporter_probes Probe \
         requests by outcome (cached: served a recent result).\n",
    );
    for (i, name) in OUTCOMES.iter().enumerate() {
        s.push_str(&format!(
            "netsweep_exporter_probes_total{{outcome=\"{name}\"}} {}\n",
            ex.counts[i].load(Ordering::Relaxed)
        ));
    }
    let cached = ex.cache.lock().map(|c| c.len()).unwrap_or(0);
    s.push_str(&format!(
        "# TYPE netsweep_exporter_probe_seconds counter\n# HELP netsweep_exporter_probe_seconds \
         Wall time spent running probes.\nnetsweep_exporter_probe_seconds_total {}\n# TYPE \
         netsweep_exporter_probes_running gauge\n# HELP netsweep_exporter_probes_running Probes \
         running now.\nnetsweep_exporter_probes_running {}\n# TYPE \
         netsweep_exporter_cached_results gauge\n# HELP netsweep_exporter_cached_results \
         Results kept for their cache period.\nnetsweep_exporter_cached_results {cached}\n# TYPE \
         netsweep_exporter_build info\n# HELP netsweep_exporter_build This exporter's \
         version.\nnetsweep_exporter_build_info{{version=\"{}\"}} 1\n# EOF\n",
        ex.probe_ns.load(Ordering::Relaxed) as f64 / 1e9,
        ex.running.load(Ordering::Relaxed),
        env!("CARGO_PKG_VERSION")
    ));
    s
}
