//! netsweep's sweep against an unmodified `iperf3 -s`, over iperf3's own protocol
//! (crates/netsweep-iperf3): the engine's one point loop — warm-up, the stop rule, the tally,
//! `--refine`, annotations, the sink — with an iperf3 server as the [`Peer`]: each trial is one
//! whole iperf3 test (`peer.rs`, at least [`MIN_TRIAL`]: a test carries a control exchange
//! and a drain before TEST_END), and a stream's figures are folded from what the test
//! reported on both sides (`figures.rs`). What iperf3 cannot do (pingpong, crr, bidir, other
//! transports and apis, netsweep's flows and socket knobs) is refused by name ([`check`]).
//!
//! [`Peer`]: crate::engine::peer::Peer

mod figures;
mod peer;

use crate::engine::{self, RunOutcome, RunSink};
use crate::hostinfo;
use netsweep_iperf3::DEFAULT_PORT;
use netsweep_model::spec::{Api, Pattern, RunSpec, Transport};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Shortest iperf3 trial: the drain and settle before TEST_END stay a small share of it.
pub const MIN_TRIAL: Duration = Duration::from_secs(1);
/// The scheme of an iperf3 peer.
pub const SCHEME: &str = "iperf3://";

/// The iperf3 server of `url` (`iperf3://HOST[:PORT]`, port 5201 by default).
pub fn resolve(url: &str) -> Result<SocketAddr, String> {
    let rest = url.strip_prefix(SCHEME).unwrap_or(url);
    let with_port = if rest.ends_with(']') || !rest.contains(':') || rest.matches(':').count() > 1 {
        if rest.matches(':').count() > 1 && !rest.starts_with('[') {
            format!("[{rest}]:{DEFAULT_PORT}")
        } else {
            format!("{rest}:{DEFAULT_PORT}")
        }
    } else {
        rest.to_string()
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {url}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url} resolved to no address"))
}

/// Why iperf3 cannot run `spec`, if it cannot; the message names what it can.
pub fn check(spec: &RunSpec) -> Result<(), String> {
    if spec.pattern != Pattern::Stream {
        return Err(format!(
            "an iperf3 server runs streams only, not {} (the default pattern is pingpong): \
             add -p stream (with --reverse for the server sending)",
            spec.pattern
        ));
    }
    if !matches!(spec.transport, Transport::Tcp | Transport::Udp) {
        return Err(format!(
            "an iperf3 server speaks tcp and udp, not {}",
            spec.transport
        ));
    }
    if spec.api != Api::Basic {
        return Err("with an iperf3 peer only --api basic applies (iperf3 chooses its own)".into());
    }
    if spec.interval_ns != 0 {
        return Err(
            "--interval is netsweep's own timeline: an iperf3 server reports whole tests only; \
             drop --interval"
                .into(),
        );
    }
    let refused = unhonoured(spec);
    if !refused.is_empty() {
        return Err(format!(
            "against an iperf3 server netsweep cannot apply {}: drop {}",
            refused.join(", "),
            if refused.len() == 1 { "it" } else { "them" }
        ));
    }
    Ok(())
}

/// The options of `spec` a run against an iperf3 server cannot honour, by the flag that
/// asked for each: refused, never recorded in the results as if they had applied. iperf3's
/// protocol carries none of netsweep's flows, background load, offered loads or refinement,
/// and this client sets no socket option on its data connections (nor can it on the
/// server's). TCP_NODELAY, which `run` sets on a TCP path by default, and the default
/// page-aligned buffers are not asked for: the caller clears them ([`honest_spec`]).
pub fn unhonoured(spec: &RunSpec) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut no = |asked: bool, flag: &str| {
        if asked {
            v.push(flag.to_string());
        }
    };
    no(spec.flows > 1, "--flows");
    no(spec.threads != 0, "--threads");
    no(!spec.background.is_empty(), "--background");
    no(spec.load.is_some(), "--rates");
    no(spec.one_way, "--one-way");
    for k in [&spec.client_knobs, &spec.server_knobs] {
        no(k.sndbuf.is_some(), "--sndbuf");
        no(k.rcvbuf.is_some(), "--rcvbuf");
        no(k.buffer_offset.is_some_and(|o| o != 0), "--offset");
        no(k.batch.is_some(), "--batch");
        no(k.congestion_control.is_some(), "--cc");
        no(k.notsent_lowat.is_some(), "--notsent-lowat");
        no(k.pacing_rate.is_some(), "--pacing-rate");
        no(k.tos.is_some(), "--tos/--dscp");
        no(k.priority.is_some(), "--priority");
        no(k.no_check.is_some(), "--no-check");
        no(k.busy_poll.is_some(), "--busy-poll");
        no(k.pmtu.is_some(), "--pmtu");
        no(k.cpu.is_some(), "--cpu");
        no(k.cache_pool.is_some(), "--invalidate-cache");
        no(k.interface.is_some(), "--interface");
        no(!k.extra.is_empty(), "--knob");
    }
    let mut seen = std::collections::BTreeSet::new();
    v.retain(|f| seen.insert(f.clone()));
    v
}

/// `spec` as a run against an iperf3 server carries it out: trials of at least
/// [`MIN_TRIAL`] (each is a whole iperf3 test) and a point budget of three of them, at least
/// two timed trials per point; no TCP_NODELAY and no buffer offset on either side (nothing
/// is set), so the results do not say they were.
pub fn honest_spec(mut spec: RunSpec) -> RunSpec {
    let min = MIN_TRIAL.as_nanos() as u64;
    spec.trial_time_ns = spec.trial_time_ns.max(min);
    spec.max_point_time_ns = spec.max_point_time_ns.max(3 * spec.trial_time_ns);
    spec.min_trials = spec.min_trials.max(2);
    for k in [&mut spec.client_knobs, &mut spec.server_knobs] {
        k.nodelay = None;
        if k.buffer_offset == Some(0) {
            k.buffer_offset = None;
        }
    }
    spec
}

/// The default sizes against iperf3: a coarse schedule (each point is several whole tests).
pub fn default_sizes(t: Transport) -> Vec<u64> {
    match t {
        Transport::Udp => vec![512, 1472, 8192, 32768, 65507],
        _ => vec![1024, 4096, 16384, 65536, 131072, 1 << 20],
    }
}

/// Runs `spec`'s sweep against the iperf3 server at `addr` (`spec` as [`honest_spec`] made
/// it and [`check`] passed it).
pub fn run(
    spec: &RunSpec,
    addr: SocketAddr,
    started_at: &str,
    interrupt: &AtomicBool,
    sink: &mut dyn RunSink,
) -> RunOutcome {
    let version = env!("CARGO_PKG_VERSION");
    let mut result = engine::new_result(spec, version, started_at, &format!("{SCHEME}{addr}"));
    result.client = hostinfo::collect(version);
    result.server.tool = "iperf3".into();
    let mut peer = peer::Iperf3Peer::new(addr, spec);
    let mut figures = figures::StreamFigures::new(spec);
    engine::run_with(result, &mut peer, &mut figures, interrupt, sink)
}
