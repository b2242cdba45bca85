//! The client's engine: opens a session with the server, then measures each point of the
//! sweep — warm-up, calibrated trials until the confidence target or the point's time budget
//! — and hands every finished point to a [`RunSink`] at once.

use crate::control::ClientControl;
use crate::endpoint::{
    pool_stride, CrrConnector, Endpoint, MessageBuffer, NoEndpoint, Slots, TransportFactory,
};
use crate::error::NetError;
use crate::hostinfo;
use crate::meter::{pin_current_thread, TrialMeter};
use crate::pattern::{crr, pingpong, stream};
use crate::results::{
    Crr, DatagramTotals, Distribution, Estimate, Granted, Latency, Loss, Placement, PointResult,
    RunResult, RunStatus, SideTotals, StopReason, ToolInfo, SCHEMA, SCHEMA_VERSION,
};
use crate::server::trial_cookie;
use crate::spec::{Pattern, RunSpec};
use crate::stats::{ci95, LatencyHistogram};
use netsweep_proto::messages::{ClientMsg, GrantedKnobs, ServerMsg, SideCounters, TrialSpec};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Receives the run as it progresses. The CLI's sink prints the table and rewrites the file.
pub trait RunSink {
    /// The session is established; `run` has the metadata and no points yet.
    fn started(&mut self, run: &RunResult);
    /// A point is about to be measured (index into the spec's sizes).
    fn measuring(&mut self, _index: usize, _size: u64) {}
    /// A point was measured and appended to `run.points`.
    fn point(&mut self, run: &RunResult);
    /// The run ended (complete, interrupted or failed); `run.status` says which.
    fn finished(&mut self, run: &RunResult);
}

/// Everything a run needs besides the spec.
#[derive(Debug)]
pub struct RunContext<'a> {
    /// The server's control address.
    pub server: SocketAddr,
    /// How the peer is named in results (`host:port` or `in-process`).
    pub peer_label: String,
    /// This build's version.
    pub tool_version: &'a str,
    /// Set by the Ctrl-C handler; checked between trials.
    pub interrupt: &'a AtomicBool,
    /// Wall-clock start time (RFC 3339), recorded in the results.
    pub started_at: String,
    /// A testbed description to record, when running in a lab.
    pub lab: Option<serde_json::Value>,
}

/// The outcome of a run that got as far as a session: the results (always valid, possibly
/// partial) and the error that stopped it early, if any.
#[derive(Debug)]
pub struct RunOutcome {
    pub result: RunResult,
    pub error: Option<NetError>,
}

/// Runs `spec` against the server. Errors before the session is established (nothing
/// measured) are returned as `Err`; later ones end the run with a partial result.
pub fn run(
    spec: &RunSpec,
    ctx: &RunContext<'_>,
    factory: &dyn TransportFactory,
    sink: &mut dyn RunSink,
    now_rfc3339: &dyn Fn() -> String,
) -> Result<RunOutcome, NetError> {
    let timeout = Duration::from_nanos(spec.timeout_ns);
    let mut ctl = ClientControl::connect(ctx.server, timeout)?;
    let setup = spec.session_setup();
    let client_info = hostinfo::collect(ctx.tool_version);
    let (server_info, cookie, data) = match ctl.request(
        ClientMsg::Hello {
            setup: setup.clone(),
            client: client_info.clone(),
        },
        "waiting for the server's welcome",
        None,
    )? {
        ServerMsg::Welcome {
            server,
            cookie,
            data,
        } => (server, cookie, data),
        other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
    };
    let data_ip = ctl
        .stream()
        .peer_addr()
        .map_err(|e| NetError::io("control connection", e))?
        .ip();
    // crr opens a connection per transaction: the session has no persistent data path, but
    // a connector that prepares those connections once.
    let mut crr_connector: Option<Box<dyn CrrConnector>> = None;
    let mut ep: Box<dyn Endpoint> = if spec.pattern == Pattern::Crr {
        crr_connector = Some(
            factory
                .crr_connector(&setup, &spec.client_knobs, data_ip, &data, timeout)
                .map_err(|e| {
                    NetError::io(
                        format!("preparing {} crr connections to {data_ip}", spec.transport),
                        e,
                    )
                })?,
        );
        Box::new(NoEndpoint)
    } else {
        factory
            .connect(&setup, &spec.client_knobs, data_ip, &data, cookie, timeout)
            .map_err(|e| {
                NetError::io(
                    format!("connecting the {} data path to {data_ip}", spec.transport),
                    e,
                )
            })?
    };
    let server_granted = match ctl.request(
        ClientMsg::DataReady {},
        "waiting for the data path to be bound",
        None,
    )? {
        ServerMsg::DataBound { granted } => granted,
        other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
    };
    let mut client_granted = ep.granted();
    if let Some(cpu) = spec.client_knobs.cpu {
        pin_current_thread(cpu)
            .map_err(|m| NetError::Refused(format!("client side --cpu: {m}")))?;
        client_granted.cpu = Some(cpu);
    }
    let mut result = RunResult {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo {
            name: "netsweep".into(),
            version: ctx.tool_version.into(),
        },
        started_at: ctx.started_at.clone(),
        finished_at: None,
        status: RunStatus::Running,
        message: None,
        spec: spec.clone(),
        peer: ctx.peer_label.clone(),
        client: client_info,
        server: server_info,
        granted: Granted {
            client: client_granted,
            server: server_granted,
        },
        lab: ctx.lab.clone(),
        points: Vec::new(),
        datagram_totals: None,
        summary: None,
        anomalies: Vec::new(),
    };
    sink.started(&result);

    let run_start = Instant::now();
    let mut m = Measurer {
        ctl: &mut ctl,
        ep: ep.as_mut(),
        spec,
        cookie,
        trial: 0,
        seq: 0,
        interrupt: ctx.interrupt,
        prev_rep_ns: None,
        loss_timeout: Duration::from_millis(500),
        totals: DatagramTotals::default(),
        crr: crr_connector,
        crr_granted: None,
    };
    let mut error = sweep(&mut m, &spec.sizes, &mut result, sink, ctx.interrupt);
    if let Some(g) = m.crr_granted.take() {
        // crr's knobs as granted on the first connection, in place of the placeholder's.
        let cpu = result.granted.client.cpu;
        result.granted.client = GrantedKnobs { cpu, ..g };
    }
    if error.is_none() && spec.refine {
        // Re-sweep finely around what detection found, then detect again on every point.
        let measured: Vec<u64> = result.points.iter().map(|p| p.size).collect();
        let found = crate::anomaly::detect_run(&result);
        let mut extra = crate::anomaly::refine_sizes(&found, &measured);
        extra.truncate(MAX_REFINE_SIZES);
        if !extra.is_empty() {
            let refined = extra.len();
            error = sweep(&mut m, &extra, &mut result, sink, ctx.interrupt);
            result.points.sort_by_key(|p| p.size);
            let note = format!(
                "--refine: {refined} sizes added around {} suspected anomalies",
                found.len()
            );
            result.message = Some(match result.message.take() {
                Some(m) => format!("{m}; {note}"),
                None => note,
            });
        }
    }
    if m.ep.is_datagram() {
        result.datagram_totals = Some(m.totals);
    }
    if error.is_none() {
        let _ = ctl.send(ClientMsg::Bye {});
        let _ = ctl.recv("closing the session", Some(Duration::from_secs(2)));
    }
    result.status = match &error {
        None => RunStatus::Complete,
        Some(NetError::Interrupted) => RunStatus::Interrupted,
        Some(_) => RunStatus::Failed,
    };
    if let Some(e) = &error {
        result.message = Some(e.to_string());
    }
    result.finished_at = Some(now_rfc3339());
    crate::anomaly::annotate(&mut result);
    result.summarise(run_start.elapsed().as_nanos() as u64);
    sink.finished(&result);
    Ok(RunOutcome { result, error })
}

/// Most sizes `--refine` adds to a run.
pub const MAX_REFINE_SIZES: usize = 256;

/// Measures `sizes` in order, appending each point to `result` and handing it to the sink.
/// Returns the error that stopped it, if any.
fn sweep(
    m: &mut Measurer<'_>,
    sizes: &[u64],
    result: &mut RunResult,
    sink: &mut dyn RunSink,
    interrupt: &AtomicBool,
) -> Option<NetError> {
    let spec = m.spec;
    for (i, &size) in sizes.iter().enumerate() {
        if interrupt.load(Ordering::Relaxed) {
            return Some(NetError::Interrupted);
        }
        sink.measuring(i, size);
        match m.point(size) {
            Ok(p) => {
                let slow = spec.stop_after_transfer_ns > 0
                    && p.transfer_ns().unwrap_or(0.0) > spec.stop_after_transfer_ns as f64;
                result.points.push(p);
                sink.point(result);
                if slow && i + 1 < sizes.len() {
                    result.message = Some(format!(
                        "sweep stopped after {size} bytes: one transfer took over {:.1} s",
                        spec.stop_after_transfer_ns as f64 / 1e9
                    ));
                    return None;
                }
            }
            Err(e) => return Some(e),
        }
    }
    None
}

/// One timed trial's figures as both sides reported them.
struct TrialOutcome<T> {
    client: SideCounters,
    server: SideCounters,
    extra: T,
    wall_ns: u64,
}

struct Measurer<'a> {
    ctl: &'a mut ClientControl,
    ep: &'a mut dyn Endpoint,
    spec: &'a RunSpec,
    cookie: u64,
    trial: u64,
    /// Sequence numbers of datagram pingpong requests continue across trials.
    seq: u64,
    interrupt: &'a AtomicBool,
    /// Time per repetition of the previous point, to size the next point's warm-up.
    prev_rep_ns: Option<f64>,
    /// How long a datagram pingpong waits for an echo before counting the request lost.
    loss_timeout: Duration,
    /// Every datagram of the run, warm-ups included, per direction.
    totals: DatagramTotals,
    /// Opens the crr connections, one per transaction.
    crr: Option<Box<dyn CrrConnector>>,
    /// The client's knobs as granted on the run's first crr connection.
    crr_granted: Option<GrantedKnobs>,
}

impl Measurer<'_> {
    /// Runs one trial with the server: start, the client's loop, end, both sides' counters.
    fn trial<T>(
        &mut self,
        spec: TrialSpec,
        body: impl FnOnce(&mut dyn Endpoint, u64) -> std::io::Result<(SideCounters, T)>,
    ) -> Result<TrialOutcome<T>, NetError> {
        if self.interrupt.load(Ordering::Relaxed) {
            return Err(NetError::Interrupted);
        }
        self.trial += 1;
        let trial = self.trial;
        match self.ctl.request(
            ClientMsg::TrialStart { trial, spec },
            "waiting for the server to arm the trial",
            None,
        )? {
            ServerMsg::Ready { .. } => {}
            other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
        }
        let meter = TrialMeter::start(self.ep);
        let t0 = Instant::now();
        let body_result = body(self.ep, trial);
        let wall_ns = t0.elapsed().as_nanos() as u64;
        let (mut client, extra) = match body_result {
            Ok(v) => v,
            Err(e) => {
                return Err(
                    if e.kind() == std::io::ErrorKind::Interrupted
                        && self.interrupt.load(Ordering::Relaxed)
                    {
                        // Ctrl-C interrupted a blocking call: the user asked to stop.
                        NetError::Interrupted
                    } else if crate::endpoint::is_timeout(&e) {
                        NetError::Timeout {
                            secs: self.spec.timeout_ns as f64 / 1e9,
                            during: "waiting for data from the server".into(),
                        }
                    } else {
                        NetError::io("data path", e)
                    },
                );
            }
        };
        meter.finish(self.ep, &mut client);
        // The server may still be draining a stream: allow it the full timeout and more.
        let wait = Duration::from_nanos(self.spec.timeout_ns) + Duration::from_secs(2);
        let server = match self.ctl.request(
            ClientMsg::TrialEnd {
                trial,
                counters: client.clone(),
            },
            "waiting for the server's trial report",
            Some(wait),
        )? {
            ServerMsg::TrialReport { counters, .. } => counters,
            other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
        };
        if self.ep.is_datagram() {
            let t = &mut self.totals;
            t.trials += 1;
            t.to_server_sent += client.messages_sent;
            t.to_client_sent += server.messages_sent;
            t.to_client_received += client.messages_received;
            t.to_server_send_errors += client.send_errors.total();
            t.to_client_send_errors += server.send_errors.total();
            // Distinct datagrams when the server de-duplicated them (stream), else all it got.
            t.to_server_received += server
                .datagrams
                .as_ref()
                .map_or(server.messages_received, |d| d.received);
        }
        Ok(TrialOutcome {
            client,
            server,
            extra,
            wall_ns,
        })
    }

    /// One pingpong trial of `reps` round trips; a warm-up also checks every echo.
    fn pingpong_trial(
        &mut self,
        size: u64,
        reps: u64,
        warmup: bool,
        txs: &mut Slots<'_>,
        rxs: &mut Slots<'_>,
        hist: &mut LatencyHistogram,
    ) -> Result<TrialOutcome<pingpong::ClientTrial>, NetError> {
        let seq0 = self.seq;
        let spec = TrialSpec {
            size,
            repetitions: reps,
            duration_ns: 0,
            warmup,
        };
        let out = self.trial(spec, |ep, _| {
            let t = pingpong::client_trial(ep, txs, rxs, seq0, reps, hist, warmup)?;
            Ok((t.counters.clone(), t))
        })?;
        self.seq += reps;
        Ok(out)
    }

    /// One crr trial of `reps` transactions, each on a new connection. With `granted`
    /// `None` (the first warm-up trial of a point) the knobs are read back on its first one.
    #[allow(clippy::too_many_arguments)]
    fn crr_trial(
        &mut self,
        size: u64,
        reps: u64,
        warmup: bool,
        (tx, rx): (&[u8], &mut [u8]),
        granted: &mut Option<GrantedKnobs>,
        hists: (&mut LatencyHistogram, &mut LatencyHistogram),
    ) -> Result<TrialOutcome<crr::ClientTrial>, NetError> {
        let mut conn = self.crr.take().ok_or_else(|| {
            NetError::Refused("a crr point in a session without a crr connector".into())
        })?;
        let spec = TrialSpec {
            size,
            repetitions: reps,
            duration_ns: 0,
            warmup,
        };
        let out = self.trial(spec, |_, _| {
            let t = crr::client_trial(conn.as_mut(), tx, rx, reps, granted, hists)?;
            Ok((t.counters.clone(), t))
        });
        self.crr = Some(conn);
        out
    }

    fn point(&mut self, size: u64) -> Result<PointResult, NetError> {
        match self.spec.pattern {
            Pattern::Pingpong => self.pingpong_point(size),
            Pattern::Stream => self.stream_point(size),
            Pattern::Crr => self.crr_point(size),
        }
    }

    fn crr_point(&mut self, size: u64) -> Result<PointResult, NetError> {
        let point_start = Instant::now();
        let spec = self.spec;
        let offset = spec.client_knobs.buffer_offset.unwrap_or(0) as usize;
        let mut tx = MessageBuffer::new(size as usize, offset);
        let mut rx = MessageBuffer::new(size as usize, offset);
        // The cookie rides in every request: no extra write, no extra round trip.
        crr::stamp(tx.as_mut(), self.cookie);
        // Read back on the point's first connection, in its first warm-up trial.
        let mut granted = None;
        let mut connect_hist = LatencyHistogram::new();
        let mut txn_hist = LatencyHistogram::new();
        let trial_ns = spec.trial_time_ns as f64;
        let cal = Calibration {
            trial_ns,
            max_reps: 1e7,
        };
        let mut reps = cal.first(self.prev_rep_ns);
        // Warm-up and calibration, as for pingpong.
        let mut rep_ns;
        loop {
            let out = self.crr_trial(
                size,
                reps,
                true,
                (tx.as_mut(), rx.as_mut()),
                &mut granted,
                (&mut connect_hist, &mut txn_hist),
            )?;
            rep_ns = out.wall_ns as f64 / reps as f64;
            match cal.next(reps, rep_ns, spec.warmup) {
                Some(more) => reps = more,
                None => break,
            }
        }
        connect_hist.reset();
        txn_hist.reset();
        let reps = cal.timed(rep_ns);
        let (mut means, mut connect_means) = (Vec::new(), Vec::new());
        let mut best = f64::INFINITY;
        let mut tally = Tally::new(point_start);
        let stop_reason = loop {
            let out = self.crr_trial(
                size,
                reps,
                false,
                (tx.as_mut(), rx.as_mut()),
                &mut granted,
                (&mut connect_hist, &mut txn_hist),
            )?;
            let t = &out.extra;
            if t.completed > 0 {
                let m = t.txn_sum_ns as f64 / t.completed as f64;
                means.push(m);
                best = best.min(m);
                connect_means.push(t.connect_sum_ns as f64 / t.completed as f64);
            }
            tally.add(
                &out.client,
                &out.server,
                out.wall_ns,
                "the server timed out waiting for a connection",
            );
            if let Some(reason) = should_stop(spec, &means, point_start.elapsed()) {
                break reason;
            }
        };
        self.prev_rep_ns = Some(txn_hist.mean());
        let (done, accepted) = (tally.client.messages_sent, tally.server.messages_received);
        if done != accepted {
            tally.notes.push(format!(
                "the client completed {done} connections but the server accepted {accepted}"
            ));
        }
        // Throughput as for pingpong: request bytes per half transaction.
        let throughput = rate_from_times(size as f64, &means, best);
        let per_sec: Vec<f64> = means.iter().map(|m| 1e9 / m).collect();
        let moved = tally.client.bytes_sent + tally.client.bytes_received;
        let mut p = tally.point(spec, size, reps, throughput, stop_reason, (moved, moved));
        p.crr = Some(Crr {
            connect_ns: distribution(&connect_hist, &connect_means, 1.0),
            transaction_ns: distribution(&txn_hist, &means, 1.0),
            transactions_per_sec: estimate(&per_sec),
            connections: done,
            server_accepted: accepted,
            granted: granted.clone(),
        });
        if self.crr_granted.is_none() {
            self.crr_granted = granted;
        }
        Ok(p)
    }

    fn pingpong_point(&mut self, size: u64) -> Result<PointResult, NetError> {
        let point_start = Instant::now();
        let spec = self.spec;
        let datagram = self.ep.is_datagram();
        let offset = spec.client_knobs.buffer_offset.unwrap_or(0) as usize;
        // One slot each, or (--invalidate-cache) slots spread over a pool larger than the caches.
        let sz = size as usize;
        let rx_size = sz + usize::from(datagram);
        let stride = pool_stride(rx_size, offset);
        let pool = spec
            .client_knobs
            .cache_pool
            .map_or(0, |p| p as usize)
            .max(rx_size);
        let mut tx = MessageBuffer::new(pool, offset);
        let mut rx = MessageBuffer::new(pool, offset);
        let mut txs = Slots::new(tx.as_mut(), sz, stride);
        let mut rxs = Slots::new(rx.as_mut(), rx_size, stride);
        self.ep
            .prepare(size as usize, 1)
            .map_err(|e| NetError::io("preparing the data endpoint", e))?;
        let mut hist = LatencyHistogram::new();
        let mut tally = Tally::new(point_start);
        let recv_timeout = if datagram {
            self.loss_timeout
        } else {
            Duration::from_nanos(spec.timeout_ns)
        };
        self.ep
            .set_recv_timeout(Some(recv_timeout))
            .map_err(|e| NetError::io("setting the receive timeout", e))?;
        let trial_ns = spec.trial_time_ns as f64;

        // Warm-up and calibration: grow the repetitions until a trial lasts a quarter of the
        // target, starting from the previous point's time per repetition.
        let cal = Calibration {
            trial_ns,
            max_reps: 1e9,
        };
        let mut reps = cal.first(self.prev_rep_ns);
        let mut rep_ns;
        let mut corrupt = 0;
        let mut trial_hist = LatencyHistogram::new();
        loop {
            trial_hist.reset();
            let out = self.pingpong_trial(size, reps, true, &mut txs, &mut rxs, &mut trial_hist)?;
            corrupt += out.extra.corrupt;
            rep_ns = if trial_hist.count() > 0 {
                trial_hist.value_at_quantile(0.5) as f64
            } else {
                out.wall_ns as f64 / reps as f64
            };
            match cal.next(reps, rep_ns, spec.warmup) {
                Some(more) => reps = more,
                None => break,
            }
        }
        if corrupt > 0 {
            tally.notes.push(format!(
                "{corrupt} echoes differed from what was sent (integrity check failed)"
            ));
        }
        let reps = cal.timed(rep_ns);

        // Each trial's median round trip is its figure: a round trip stalled for milliseconds
        // (a preempted thread, a vCPU woken from idle) would move a trial's mean by more than
        // the precision target, its median not at all. The stalls stay in the distribution
        // (p99, max, mean). Throughput is derived from the grand mean of the trial medians
        // (bytes ÷ RTT/2, NetPIPE's figure), not averaged per trial: a mean of reciprocals
        // would be dominated by the fastest trials.
        let mut medians = Vec::new();
        let mut means = Vec::new();
        let mut best_rtt = f64::INFINITY;
        let (mut lost, mut late, mut sent) = (0u64, 0u64, 0u64);
        let stop_reason = loop {
            trial_hist.reset();
            let out =
                self.pingpong_trial(size, reps, false, &mut txs, &mut rxs, &mut trial_hist)?;
            let t = &out.extra;
            lost += t.lost;
            late += t.late;
            // Requests the local stack refused were never sent.
            sent += reps - t.refused;
            if t.completed > 0 {
                let median = trial_hist.value_at_quantile(0.5) as f64;
                medians.push(median);
                means.push(t.rtt_sum_ns as f64 / t.completed as f64);
                best_rtt = best_rtt.min(median);
                hist.merge(&trial_hist)
                    .map_err(|e| NetError::Refused(format!("latency histogram: {e}")))?;
            }
            tally.add(
                &out.client,
                &out.server,
                out.wall_ns,
                "the server timed out waiting for a request",
            );
            if let Some(reason) = should_stop(spec, &medians, point_start.elapsed()) {
                break reason;
            }
        };
        if hist.count() > 0 {
            self.prev_rep_ns = Some(hist.mean());
            // Losses are waited for at most 50× the slowest round trip seen, within limits.
            let t = (hist.max() as f64 * 50.0).clamp(2e6, 1e9);
            self.loss_timeout = Duration::from_nanos(t as u64);
        }
        let rtt = distribution(&hist, &means, 1.0);
        let half = distribution(&hist, &means, 0.5);
        let throughput = rate_from_times(size as f64, &medians, best_rtt);
        if lost > 0 {
            tally.notes.push(format!(
                "{lost} of {sent} requests got no echo within {:.1} ms and were counted lost",
                self.loss_timeout.as_secs_f64() * 1e3
            ));
        }
        let moved = tally.client.bytes_sent + tally.client.bytes_received;
        let mut p = tally.point(spec, size, reps, throughput, stop_reason, (moved, moved));
        p.latency = Some(Latency {
            rtt_ns: rtt,
            half_rtt_ns: half,
        });
        p.loss = datagram.then(|| Loss {
            sent,
            received: sent - lost,
            lost,
            ratio: if sent > 0 {
                lost as f64 / sent as f64
            } else {
                0.0
            },
            late,
            send_errors: p.client.send_errors.total(),
            ..Default::default()
        });
        Ok(p)
    }

    fn stream_point(&mut self, size: u64) -> Result<PointResult, NetError> {
        let point_start = Instant::now();
        let spec = self.spec;
        let datagram = self.ep.is_datagram();
        let offset = spec.client_knobs.buffer_offset.unwrap_or(0) as usize;
        let batch = spec.client_knobs.batch.unwrap_or(1).clamp(1, 1024) as usize;
        let sz = size as usize;
        let mut tx = MessageBuffer::new(sz * batch, offset);
        self.ep
            .prepare(sz, batch)
            .map_err(|e| NetError::io("preparing the data endpoint", e))?;
        let cookie = self.cookie;
        let duration = Duration::from_nanos(spec.trial_time_ns);
        if spec.warmup {
            self.trial(
                TrialSpec {
                    size,
                    repetitions: 0,
                    duration_ns: spec.trial_time_ns / 2,
                    warmup: true,
                },
                |ep, trial| {
                    let c = stream::sender_trial(
                        ep,
                        tx.as_mut(),
                        sz,
                        batch,
                        duration / 2,
                        trial_cookie(cookie, trial),
                    )?;
                    Ok((c, ()))
                },
            )?;
        }
        let mut sender = Vec::new();
        let mut receiver = Vec::new();
        let mut tally = Tally::new(point_start);
        let mut loss = Loss::default();
        let mut jitters = Vec::new();
        let stop_reason = loop {
            let out = self.trial(
                TrialSpec {
                    size,
                    repetitions: 0,
                    duration_ns: spec.trial_time_ns,
                    warmup: false,
                },
                |ep, trial| {
                    let c = stream::sender_trial(
                        ep,
                        tx.as_mut(),
                        sz,
                        batch,
                        duration,
                        trial_cookie(cookie, trial),
                    )?;
                    Ok((c, ()))
                },
            )?;
            let (c, s) = (&out.client, &out.server);
            sender.push(bits_per_ns_to_mbps(c.bytes_sent, c.active_ns));
            if s.recv_span_ns > 0 {
                receiver.push(bits_per_ns_to_mbps(s.bytes_received, s.recv_span_ns));
            } else {
                receiver.push(0.0);
            }
            if let Some(d) = &s.datagrams {
                loss.sent += c.messages_sent;
                loss.send_errors += c.send_errors.total();
                loss.received += d.received;
                loss.lost += d.lost;
                loss.reordered += d.reordered;
                loss.duplicates += d.duplicates;
                loss.foreign += d.foreign;
                jitters.push(d.jitter_ns as f64);
            }
            tally.add(c, s, out.wall_ns, "the server timed out waiting for data");
            if let Some(reason) = should_stop(spec, &receiver, point_start.elapsed()) {
                break reason;
            }
        };
        if datagram {
            loss.ratio = if loss.sent > 0 {
                loss.lost as f64 / loss.sent as f64
            } else {
                0.0
            };
            loss.jitter_ns = jitters.iter().sum::<f64>() / jitters.len().max(1) as f64;
        }
        let rx = estimate(&receiver);
        let messages = tally.client.messages_sent;
        let moved = (tally.client.bytes_sent, tally.server.bytes_received);
        let mut p = tally.point(spec, size, messages, rx, stop_reason, moved);
        p.sender_mbps = Some(estimate(&sender));
        p.receiver_mbps = Some(rx);
        p.loss = datagram.then_some(loss);
        Ok(p)
    }
}

/// NetPIPE-style calibration of repetitions per trial: start from the previous point's time
/// per repetition (or 2), grow until one untimed trial lasts an eighth of the target, then
/// size the timed trials to the target duration.
#[derive(Debug, Clone, Copy)]
struct Calibration {
    trial_ns: f64,
    max_reps: f64,
}

impl Calibration {
    /// Repetitions of the first warm-up trial.
    fn first(&self, prev_rep_ns: Option<f64>) -> u64 {
        prev_rep_ns.map_or(2, |t| {
            ((self.trial_ns / 4.0) / t.max(1.0)).clamp(1.0, self.max_reps) as u64
        })
    }

    /// Repetitions of the next warm-up trial, or `None` once `reps` repetitions of `rep_ns`
    /// each fill an eighth of the target. `rep_ns` is the typical time per repetition (the
    /// median round trip where there is one), so one stalled repetition — a first contact, a
    /// preempted thread — cannot end the calibration with trials far too short.
    fn next(&self, reps: u64, rep_ns: f64, warmup: bool) -> Option<u64> {
        let rep_ns = rep_ns.max(1.0);
        if !warmup || reps as f64 * rep_ns >= self.trial_ns / 8.0 || reps as f64 >= self.max_reps {
            return None;
        }
        Some(
            ((self.trial_ns / 4.0) / rep_ns)
                .clamp(reps as f64 * 2.0, reps as f64 * 64.0)
                .min(self.max_reps) as u64,
        )
    }

    /// Repetitions of each timed trial.
    fn timed(&self, rep_ns: f64) -> u64 {
        (self.trial_ns / rep_ns.max(1.0)).clamp(1.0, self.max_reps) as u64
    }
}

/// The repetition rule: stop once at least `min_trials` trials put the 95% CI of the mean
/// within the precision target, or at `max_trials`, or when the point's budget is spent
/// (after two trials at least; four budgets at most, whatever the count).
fn should_stop(spec: &RunSpec, samples: &[f64], elapsed: Duration) -> Option<StopReason> {
    let n = samples.len() as u32;
    let budget = Duration::from_nanos(spec.max_point_time_ns);
    if n >= spec.min_trials {
        if ci95(samples).is_some_and(|c| c.relative <= spec.precision) {
            return Some(StopReason::Precision);
        }
        if n >= spec.max_trials {
            return Some(StopReason::MaxTrials);
        }
    }
    (elapsed >= budget && n >= 2 || elapsed >= budget * 4).then_some(StopReason::TimeBudget)
}

/// What a point's timed trials add up to on both sides, whatever the pattern.
#[derive(Debug)]
struct Tally {
    started: Instant,
    client: SideCounters,
    server: SideCounters,
    placement: Placement,
    trials: u32,
    wall_ns: u64,
    notes: Vec<String>,
}

impl Tally {
    /// An empty tally for a point that started at `started`.
    fn new(started: Instant) -> Self {
        Self {
            started,
            client: SideCounters::default(),
            server: SideCounters::default(),
            placement: Placement::default(),
            trials: 0,
            wall_ns: 0,
            notes: Vec::new(),
        }
    }

    /// Adds one timed trial; `server_timeout` is the note to keep if the server timed out.
    fn add(
        &mut self,
        client: &SideCounters,
        server: &SideCounters,
        wall_ns: u64,
        server_timeout: &str,
    ) {
        add(&mut self.client, client);
        add(&mut self.server, server);
        self.trials += 1;
        let moved = client.cpu_migrations.unwrap_or(0) + server.cpu_migrations.unwrap_or(0);
        self.placement.observe(cpus(client), cpus(server), moved);
        self.wall_ns += wall_ns;
        if server.timed_out {
            self.notes.push(server_timeout.into());
        }
    }

    /// The point with every field the patterns share; the pattern fills in its own.
    /// `moved` gives the bytes each side's service demand is counted over (client, server).
    fn point(
        self,
        spec: &RunSpec,
        size: u64,
        repetitions: u64,
        throughput: Estimate,
        stop_reason: StopReason,
        moved: (u64, u64),
    ) -> PointResult {
        let achieved = throughput.relative_ci().and_then(finite);
        PointResult {
            size,
            trials: throughput.trials,
            repetitions,
            elapsed_ns: self.started.elapsed().as_nanos() as u64,
            throughput_mbps: throughput,
            latency: None,
            crr: None,
            sender_mbps: None,
            receiver_mbps: None,
            loss: None,
            client: totals(&self.client, self.wall_ns, moved.0, self.trials),
            server: totals(&self.server, self.wall_ns, moved.1, self.trials),
            precision_target: spec.precision,
            precision_met: achieved.is_some_and(|a| a <= spec.precision),
            precision_achieved: achieved,
            stop_reason,
            notes: with_placement_note(self.notes, &self.placement),
            placement: self.placement,
        }
    }
}

fn cpus(c: &SideCounters) -> [Option<u32>; 2] {
    [c.cpu_at_start, c.cpu_at_end]
}

fn with_placement_note(mut notes: Vec<String>, p: &Placement) -> Vec<String> {
    if p.mixed() {
        notes.push(format!(
            "placement varied: both ends shared a CPU in {} of {} trials, {} moves between CPUs \
             mid-trial (pin with --cpu to compare like with like)",
            p.same_cpu_trials, p.observed_trials, p.migrations
        ));
    }
    notes
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Mbit/s (10^6 bit/s) for `bytes` moved in `ns` nanoseconds.
pub fn mbps(bytes: f64, ns: f64) -> f64 {
    if ns <= 0.0 {
        0.0
    } else {
        bytes * 8.0 * 1e3 / ns
    }
}

fn bits_per_ns_to_mbps(bytes: u64, ns: u64) -> f64 {
    mbps(bytes as f64, ns as f64)
}

fn add(sum: &mut SideCounters, c: &SideCounters) {
    sum.bytes_sent += c.bytes_sent;
    sum.bytes_received += c.bytes_received;
    sum.messages_sent += c.messages_sent;
    sum.messages_received += c.messages_received;
    sum.send_calls += c.send_calls;
    sum.recv_calls += c.recv_calls;
    sum.active_ns += c.active_ns;
    sum.cpu_user_ns += c.cpu_user_ns;
    sum.cpu_sys_ns += c.cpu_sys_ns;
    // Busy fractions are averaged by the caller's wall time; keep a weighted sum here.
    sum.system_busy_ppm += c.system_busy_ppm;
    sum.timed_out |= c.timed_out;
    sum.zerocopy_completions += c.zerocopy_completions;
    sum.zerocopy_copied += c.zerocopy_copied;
    sum.tcp_retransmits = add_opt(sum.tcp_retransmits, c.tcp_retransmits);
    sum.tcp_dsacks = add_opt(sum.tcp_dsacks, c.tcp_dsacks);
    sum.send_errors.add(&c.send_errors);
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

/// One side's totals over `trials` timed trials lasting `wall_ns` in all.
fn totals(c: &SideCounters, wall_ns: u64, bytes_moved: u64, trials: u32) -> SideTotals {
    let cpu = (c.cpu_user_ns + c.cpu_sys_ns) as f64;
    let trials = trials.max(1) as f64;
    SideTotals {
        bytes_sent: c.bytes_sent,
        bytes_received: c.bytes_received,
        messages_sent: c.messages_sent,
        messages_received: c.messages_received,
        send_calls: c.send_calls,
        recv_calls: c.recv_calls,
        cpu_user_ns: c.cpu_user_ns,
        cpu_sys_ns: c.cpu_sys_ns,
        cpu_utilisation: if wall_ns > 0 {
            cpu / wall_ns as f64
        } else {
            0.0
        },
        system_busy: c.system_busy_ppm as f64 / trials / 1e6,
        zerocopy_completions: c.zerocopy_completions,
        zerocopy_copied: c.zerocopy_copied,
        tcp_retransmits: c.tcp_retransmits,
        tcp_dsacks: c.tcp_dsacks,
        send_errors: c.send_errors,
        service_demand_us_per_kb: if bytes_moved > 0 {
            (cpu / 1e3) / (bytes_moved as f64 / 1024.0)
        } else {
            0.0
        },
    }
}

/// Pingpong throughput from per-trial round-trip times: bytes ÷ (grand mean RTT / 2), with
/// the relative CI of the mean time carried over (first-order, delta method); no CI from
/// fewer than two trials.
fn rate_from_times(size: f64, rtts: &[f64], best_rtt: f64) -> Estimate {
    if rtts.is_empty() {
        return Estimate::default();
    }
    let mean_rtt = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let mean = mbps(size, mean_rtt / 2.0);
    Estimate {
        mean,
        ci95: ci95(rtts).map(|c| mean * c.relative),
        max: mbps(size, best_rtt / 2.0),
        trials: rtts.len() as u32,
    }
}

fn estimate(samples: &[f64]) -> Estimate {
    let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    Estimate {
        mean,
        ci95: ci95(samples).map(|c| c.half_width),
        max: samples.iter().copied().fold(0.0, f64::max),
        trials: samples.len() as u32,
    }
}

/// A distribution from the histogram, scaled by `k` (1 for RTT, 0.5 for RTT/2); the CI of
/// the mean comes from the per-trial means (batch means), which is honest under correlation.
fn distribution(h: &LatencyHistogram, trial_means: &[f64], k: f64) -> Distribution {
    if h.count() == 0 {
        return Distribution::default();
    }
    Distribution {
        count: h.count(),
        min: h.min() as f64 * k,
        mean: h.mean() * k,
        p50: h.value_at_quantile(0.5) as f64 * k,
        p90: h.value_at_quantile(0.9) as f64 * k,
        p99: h.value_at_quantile(0.99) as f64 * k,
        p999: h.value_at_quantile(0.999) as f64 * k,
        max: h.max() as f64 * k,
        stddev: h.stddev() * k,
        ci95: ci95(trial_means).map(|c| c.half_width * k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Family, Transport};

    #[test]
    fn calibration_grows_then_sizes_trials() {
        let cal = Calibration {
            trial_ns: 20e6,
            max_reps: 1e9,
        };
        assert_eq!(cal.first(None), 2);
        // Previous point took 10 µs per repetition: a quarter trial is 500 repetitions.
        assert_eq!(cal.first(Some(10_000.0)), 500);
        // 2 repetitions of 10 µs are far too short: grow, at most 64× at once.
        assert_eq!(cal.next(2, 10_000.0, true), Some(128));
        // 500 repetitions of 10 µs (a quarter of the target) are enough.
        assert_eq!(cal.next(500, 10_000.0, true), None);
        assert_eq!(cal.next(2, 10_000.0, false), None, "no warm-up: no growth");
        assert_eq!(cal.timed(10_000.0), 2000);
        assert_eq!(cal.timed(1e12), 1, "at least one repetition");
    }

    #[test]
    fn stop_rule() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Pingpong, Family::Ipv4);
        spec.precision = 0.02;
        spec.max_point_time_ns = 1_000_000_000;
        let quick = Duration::from_millis(10);
        assert_eq!(
            should_stop(&spec, &[100.0, 100.5], quick),
            None,
            "fewer than min_trials"
        );
        assert_eq!(
            should_stop(&spec, &[100.0, 100.5, 99.5], quick),
            Some(StopReason::Precision)
        );
        assert_eq!(should_stop(&spec, &[100.0, 150.0, 60.0], quick), None);
        let late = Duration::from_millis(1_500);
        assert_eq!(
            should_stop(&spec, &[100.0, 150.0], late),
            Some(StopReason::TimeBudget)
        );
        assert_eq!(
            should_stop(&spec, &[100.0], late),
            None,
            "budget spent, but one trial only"
        );
        assert_eq!(
            should_stop(&spec, &[100.0], Duration::from_secs(5)),
            Some(StopReason::TimeBudget)
        );
        let noisy: Vec<f64> = (0..30)
            .map(|i| if i % 2 == 0 { 50.0 } else { 150.0 })
            .collect();
        assert_eq!(
            should_stop(&spec, &noisy, quick),
            Some(StopReason::MaxTrials)
        );
    }

    #[test]
    fn pingpong_rate_from_mean_times() {
        // 1000 bytes in 10 µs RTT: 1000 B per 5 µs one way = 1600 Mbit/s.
        let e = rate_from_times(1000.0, &[10_000.0, 10_000.0, 10_000.0], 10_000.0);
        assert!((e.mean - 1600.0).abs() < 1e-9);
        assert_eq!(e.ci95, Some(0.0));
        assert_eq!(e.trials, 3);
        assert_eq!(rate_from_times(1000.0, &[], f64::INFINITY).trials, 0);
        // One trial: a mean, but no interval — never a zero-width one.
        let one = rate_from_times(1000.0, &[10_000.0], 10_000.0);
        assert_eq!((one.trials, one.ci95), (1, None));
        assert_eq!(estimate(&[5.0]).ci95, None);
    }
}
