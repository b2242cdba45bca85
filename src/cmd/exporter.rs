//! `netsweep exporter`: a Prometheus probe in the manner of the blackbox exporter. `/probe?target=…`
//! runs a short `netsweep run` (this binary, as a child with a deadline) against the target and
//! answers its OpenMetrics exposition with `netsweep_probe_success` and
//! `netsweep_probe_duration_seconds` appended; `/metrics` describes the exporter itself.
//! Bounded: each parameter validated (`query`), at most `--max-probes` probes
//! at once (others are told so, 503), one probe per target at a time (a second request waits
//! for the first's result), each result served again for `--cache` (a scrape every second
//! measures once per period), a fixed pool of request threads. Each probe is fitted to its
//! scrape's timeout (`budget`); one that cannot fit, finds the exporter busy, overruns, misses
//! its minimum trials or the precision it asked for answers `netsweep_probe_success 0` with
//! the reason in `netsweep_probe_failure_info`, never an HTTP error.

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

mod budget;
mod process;
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
    /// Probe runs started so far: those started during a probe overlapped it.
    started: AtomicU64,
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
        started: AtomicU64::new(0),
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
    let scrape_timeout = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("X-Prometheus-Scrape-Timeout-Seconds"))
        .map(|h| h.value.as_str().to_string());
    let (status, body, metrics) = match path {
        "/probe" => probe(query, ex, scrape_timeout.as_deref()),
        "/metrics" => (200, self_metrics(ex), true),
        // Liveness and readiness, as Prometheus' own exporters answer them.
        "/-/healthy" | "/-/ready" => (200, "netsweep exporter is healthy.\n".into(), false),
        "/" => (
            200,
            "netsweep exporter: /probe?target=HOST[:PORT] (or iperf3://HOST[:PORT]) \
             [&transport=tcp|udp&pattern=bidir|stream|pingpong&size=SIZE&duration=TIME\
             &reverse=true&min_trials=N&precision=5%&parallel=N], /metrics, /-/healthy\n"
                .into(),
            false,
        ),
        _ => (
            404,
            "not found: /probe, /metrics or /-/healthy\n".into(),
            false,
        ),
    };
    let mut r = text(status, body);
    if metrics {
        if let Ok(h) = Header::from_bytes("Content-Type", OPENMETRICS) {
            r = r.with_header(h);
        }
    }
    let _ = req.respond(r);
}

/// Why a probe answered `netsweep_probe_success 0`: a bounded `reason` and its detail.
type Failed = (&'static str, String);

/// Serves one `/probe`: from the cache, after another request's run of the same probe, or by
/// running it (within the limit of probes at once), fitted to the scrape's timeout.
fn probe(query: &str, ex: &Exporter, scrape_timeout: Option<&str>) -> (u16, String, bool) {
    let t0 = Instant::now();
    let mut p = match Probe::parse(query, &ex.limits) {
        Ok(p) => p,
        Err(e) => {
            ex.counts[Outcome::Invalid as usize].fetch_add(1, Ordering::Relaxed);
            return (400, format!("netsweep exporter: {e}\n"), false);
        }
    };
    let timeout = budget::scrape_timeout(scrape_timeout);
    let fit = match budget::fit(&p, timeout) {
        Ok(f) => f,
        Err(why) => {
            ex.counts[Outcome::Failure as usize].fetch_add(1, Ordering::Relaxed);
            let fit = budget::Fit {
                timeout,
                deadline: Duration::ZERO,
                point: Duration::ZERO,
                peer_timeout: Duration::ZERO,
            };
            let failed = ("timeout_too_short", why);
            return (200, finish("", Some(&failed), 0.0, &fit, None), true);
        }
    };
    p.duration = fit.point;
    p.peer_timeout = fit.peer_timeout;
    let key = p.key();
    let busy = |why: String| {
        ex.counts[Outcome::Busy as usize].fetch_add(1, Ordering::Relaxed);
        let secs = t0.elapsed().as_secs_f64();
        (
            200,
            finish("", Some(&("busy", why)), secs, &fit, None),
            true,
        )
    };
    // One run per probe at a time: a second request waits for the first one's result.
    let give_up = t0 + fit.deadline;
    let taken;
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
                return busy("a probe of this target was still running at the deadline".into());
            }
            running = ex
                .done
                .wait_timeout(running, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        taken = ex.running.fetch_add(1, Ordering::SeqCst);
        if taken >= ex.max_probes {
            ex.running.fetch_sub(1, Ordering::SeqCst);
            return busy(format!(
                "{} probes are running, the exporter's --max-probes",
                ex.max_probes
            ));
        }
        running.insert(key.clone());
    }
    let seq = ex.started.fetch_add(1, Ordering::SeqCst) + 1;
    let run_t0 = Instant::now();
    // A run that completed but missed what the probe asked keeps its series in the answer.
    let result = run(&p, give_up.saturating_duration_since(run_t0))
        .map(|text| {
            let verdict = check(&text, &p).err();
            (text, verdict)
        })
        .unwrap_or_else(|failed| (String::new(), Some(failed)));
    let secs = run_t0.elapsed().as_secs_f64();
    ex.probe_ns
        .fetch_add(run_t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    // Other probes that shared the host (and perhaps the path) with this one: those running
    // when it started and those started while it ran (probes at once distort each other,
    // issue 41 item 7).
    let overlapping = taken as u64 + ex.started.load(Ordering::SeqCst).saturating_sub(seq);
    let (exposition, failed) = result;
    if let Some((reason, why)) = &failed {
        let shown = netsweep_proto::text::printable(why);
        eprintln!(
            "netsweep exporter: probe of {} failed ({reason}): {shown}",
            p.target()
        );
    }
    let outcome = if failed.is_none() {
        Outcome::Success
    } else {
        Outcome::Failure
    };
    ex.counts[outcome as usize].fetch_add(1, Ordering::Relaxed);
    let body = finish(&exposition, failed.as_ref(), secs, &fit, Some(overlapping));
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

/// Whether a run's exposition meets what the probe asked: every point `min_trials` timed
/// trials, and the precision it asked for (when it asked).
fn check(exposition: &str, p: &Probe) -> Result<(), Failed> {
    if p.pattern == "rpm" {
        // The responsiveness test has neither trials nor a precision target; "out of time"
        // is in its series (netsweep_rpm_stable 0).
        return Ok(());
    }
    let values = |name: &str| -> Vec<f64> {
        exposition
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect()
    };
    if let Some(n) = values("netsweep_trials")
        .into_iter()
        .find(|n| *n < f64::from(p.min_trials))
    {
        return Err((
            "min_trials",
            format!(
                "the point took {n} timed trials within {} ms, fewer than min_trials={}",
                p.duration.as_millis(),
                p.min_trials
            ),
        ));
    }
    if let Some(x) = p.precision {
        if values("netsweep_precision_met").contains(&0.0) {
            return Err((
                "precision",
                format!(
                    "the throughput's 95% interval did not reach ±{:.1}% within {} ms",
                    x * 100.0,
                    p.duration.as_millis()
                ),
            ));
        }
    }
    Ok(())
}

fn cached(ex: &Exporter, key: &str) -> Option<String> {
    let c = ex.cache.lock().unwrap_or_else(|e| e.into_inner());
    c.get(key)
        .filter(|(at, _)| at.elapsed() < ex.cache_for)
        .map(|(_, b)| b.clone())
}

/// Runs the probe's `netsweep run` (this binary) to its end or for `limit`: its exposition.
fn run(p: &Probe, limit: Duration) -> Result<String, Failed> {
    let exe =
        std::env::current_exe().map_err(|e| ("run_failed", format!("this program's path: {e}")))?;
    let mut child = Command::new(exe)
        .args(p.run_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ("run_failed", format!("cannot start netsweep run: {e}")))?;
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
    let until = Instant::now() + limit;
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
        None => Err((
            "deadline",
            format!(
                "no result within {:.3} s (the scrape's timeout less the answer's margin)",
                limit.as_secs_f64()
            ),
        )),
        Some(s) if s.success() && text.trim_end().ends_with("# EOF") => Ok(text),
        Some(_) => {
            let last = why
                .lines()
                .last()
                .unwrap_or("netsweep run failed")
                .to_string();
            let reason = if last.contains("cannot resolve") {
                "unresolvable"
            } else {
                "run_failed"
            };
            Err((reason, last))
        }
    }
}

/// The probe's answer: the run's exposition (without its `# EOF`) and the probe's own series:
/// success, its wall time, the timeout and point time it was fitted to and, when it failed,
/// why (`reason` one of timeout_too_short, busy, deadline, unresolvable, run_failed,
/// min_trials, precision; `message` the detail, as blackbox's debug output gives it) and, for
/// a probe that ran, how many other probes overlapped it.
fn finish(
    exposition: &str,
    failed: Option<&Failed>,
    secs: f64,
    fit: &budget::Fit,
    overlapping: Option<u64>,
) -> String {
    let mut s = exposition
        .trim_end()
        .strip_suffix("# EOF")
        .unwrap_or(exposition)
        .to_string();
    let gauge = |s: &mut String, name: &str, help: &str, v: String| {
        s.push_str(&format!(
            "# TYPE {name} gauge\n# HELP {name} {help}\n{name} {v}\n"
        ));
    };
    gauge(
        &mut s,
        "netsweep_probe_success",
        "Whether the probe's test completed as asked (1) or not (0).",
        u8::from(failed.is_none()).to_string(),
    );
    gauge(
        &mut s,
        "netsweep_probe_duration_seconds",
        "Wall time of the probe's test, session setup included.",
        secs.to_string(),
    );
    gauge(
        &mut s,
        "netsweep_probe_timeout_seconds",
        "The scrape timeout the probe was fitted to (X-Prometheus-Scrape-Timeout-Seconds, else 10).",
        fit.timeout.as_secs_f64().to_string(),
    );
    gauge(
        &mut s,
        "netsweep_probe_point_seconds",
        "The point time the probe's run was given: its duration, cut to fit the timeout.",
        fit.point.as_secs_f64().to_string(),
    );
    if let Some((reason, why)) = failed {
        let message: String = netsweep_proto::text::printable(why)
            .chars()
            .take(240)
            .collect::<String>()
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        s.push_str(&format!(
            "# TYPE netsweep_probe_failure info\n# HELP netsweep_probe_failure Why the probe \
             answered success 0.\nnetsweep_probe_failure_info{{reason=\"{reason}\",message=\"{message}\"}} 1\n"
        ));
    }
    if let Some(n) = overlapping {
        gauge(
            &mut s,
            "netsweep_probe_overlapping_probes",
            "Other probes of this exporter that ran while this one did (they share the host and may share the path).",
            n.to_string(),
        );
    }
    s.push_str("# EOF\n");
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
         version.\nnetsweep_exporter_build_info{{version=\"{}\"}} 1\n{}# EOF\n",
        ex.probe_ns.load(Ordering::Relaxed) as f64 / 1e9,
        ex.running.load(Ordering::Relaxed),
        env!("CARGO_PKG_VERSION"),
        process::metrics()
    ));
    s
}
