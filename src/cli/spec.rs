//! The run spec from `run`'s flags, built once for every front end that takes them (`run`,
//! `mesh`, `scenario`'s runs): the sizes, the offered load, trial times, both sides' knobs and
//! the default placement. Transport-specific defaults come from the transport's descriptor.

use crate::cli::values::PerSide;
use crate::cli::RunArgs;
use netsweep_model::load::{parse_rates, Arrivals, LoadSpec};
use netsweep_model::sizes::{netpipe_schedule, parse_sizes, DEFAULT_PERTURBATION};
use netsweep_model::spec::{Family, Pattern, RunSpec, Transport};
use netsweep_proto::messages::Knobs;
use netsweep_transport::knobs::Knob;
use std::time::{Duration, SystemTime};

/// Builds the spec from the flags; the error is a usage error.
pub fn build(a: &RunArgs, family: Family) -> Result<RunSpec, String> {
    let (transport, pattern, api) = (a.transport.0, a.pattern.0, a.api.0);
    let d = netsweep_transport::descriptor(transport);
    let family = d.family(family);
    let mut spec = RunSpec::new(transport, pattern, family);
    spec.api = api;
    match &a.sizes {
        Some(s) => {
            spec.sizes = parse_sizes(s).map_err(|e| e.to_string())?;
            spec.sizes_spec = s.clone();
        }
        None if pattern == Pattern::Rate => {
            spec.sizes = vec![RATE_DEFAULT_SIZE];
            spec.sizes_spec = format!("{RATE_DEFAULT_SIZE} (the rate pattern's default)");
        }
        None => {
            let ceiling = a.max_size.unwrap_or(
                d.max_message_over(api, family == Family::Ipv6)
                    .map_or(d.default_ceiling, |m| m.min(d.default_ceiling)),
            );
            let start = d.first_size(pattern, api);
            spec.sizes = netpipe_schedule(start, ceiling, a.perturbation);
            spec.sizes_spec = format!(
                "netpipe({start}..{ceiling}, perturbation {})",
                if a.perturbation == DEFAULT_PERTURBATION {
                    format!("{} (default)", a.perturbation)
                } else {
                    a.perturbation.to_string()
                }
            );
        }
    }
    d.check_sizes(pattern, &spec.sizes)?;
    spec.load = load(a, pattern)?;
    set_trial_times(a, &mut spec);
    spec.precision = a.precision;
    spec.timeout_ns = a.timeout.as_nanos() as u64;
    spec.min_trials = a.min_trials;
    spec.max_trials = a.max_trials;
    spec.passes = a.passes;
    spec.hard_point_time = a.hard_point_time;
    spec.start_at_unix_ns = a.start_at.map(|t| start_at(t, a.timeout)).transpose()?;
    spec.warmup = !a.no_warmup;
    spec.refine = a.refine;
    spec.reverse = a.reverse;
    spec.one_way = a.one_way;
    spec.flows = a.flows;
    spec.threads = a.threads;
    let (mut client_knobs, mut server_knobs) = knobs(a, transport)?;
    if a.batch.is_none() {
        let b = d.default_batch(api);
        (client_knobs.batch, server_knobs.batch) = (b, b);
    }
    spec.client_knobs = client_knobs;
    spec.server_knobs = server_knobs;
    spec.interval_ns = a.interval.map_or(0, |i| i.as_nanos() as u64);
    // Flows run on many threads: pinning them all to one CPU would serialise them.
    if a.host.is_none() && a.cpu.is_none() && a.flows <= 1 {
        default_placement(&mut spec);
    }
    spec.validate(d)?;
    check_points(&spec)?;
    spec.background = a.background.clone();
    for b in &spec.background {
        let flow = b.session_spec(&spec);
        flow.validate(netsweep_transport::descriptor(flow.transport))
            .and_then(|()| b.check(&spec))
            .map_err(|e| format!("--background {}: {e}", b.text))?;
    }
    Ok(spec)
}

/// A run estimated (points × the point's time budget, plus its warm-up trial) to take longer
/// than this is said so before it starts.
const LONG_RUN_NS: u64 = 10 * 60 * 1_000_000_000;

/// Most points one run may have: beyond it the sweep is refused (at the default 300 ms
/// budget, 20 000 points are 100 minutes; 78 095 sizes of `1..8M:*1.0001` are 6.5 hours).
pub const MAX_POINTS: usize = 20_000;

/// The points of a run: its sizes, times the offered loads of a `--rates` sweep.
fn points(spec: &RunSpec) -> usize {
    let rates = spec.load.as_ref().map_or(0, |l| l.rates.len()).max(1);
    spec.sizes.len().saturating_mul(rates)
}

/// Refuses a run of more than [`MAX_POINTS`] points, naming the fix.
/// The longest `--start-at` waits: a barrier for clients started together, not a scheduler.
pub const MAX_START_WAIT: Duration = Duration::from_secs(300);

/// `--start-at` as ns since the epoch, refused beyond [`MAX_START_WAIT`] from now, or beyond
/// `--timeout` (the server gives up on a client silent for longer).
fn start_at(t: SystemTime, timeout: Duration) -> Result<u64, String> {
    if let Ok(ahead) = t.duration_since(SystemTime::now()) {
        if ahead > timeout && ahead <= MAX_START_WAIT {
            return Err(format!(
                "--start-at is {:.1} s from now, longer than --timeout {:.1} s: the server \
                 would give up waiting for the first trial; raise --timeout past it",
                ahead.as_secs_f64(),
                timeout.as_secs_f64()
            ));
        }
        if ahead > MAX_START_WAIT {
            return Err(format!(
                "--start-at is {:.0} s from now: at most {} s ahead (it starts clients \
                 together; schedule the run itself with cron or a timer)",
                ahead.as_secs_f64(),
                MAX_START_WAIT.as_secs()
            ));
        }
    }
    let ns = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "--start-at is before 1970".to_string())?
        .as_nanos();
    u64::try_from(ns).map_err(|_| "--start-at is too far in the future".to_string())
}

fn check_points(spec: &RunSpec) -> Result<(), String> {
    let n = points(spec);
    if n > MAX_POINTS {
        return Err(format!(
            "{n} points ('{}'): more than {MAX_POINTS} in one run (hours at the point budget): \
             use larger steps (e.g. :*2 or :+1k) or a narrower range",
            spec.sizes_spec
        ));
    }
    Ok(())
}

/// A warning for a run estimated to last over ten minutes, before it starts.
pub fn long_run_warning(spec: &RunSpec) -> Option<String> {
    let n = points(spec) as u64;
    let warmup = if spec.warmup { spec.trial_time_ns } else { 0 };
    let per_point = spec.max_point_time_ns.saturating_add(warmup);
    // Each later pass (`--passes`) visits every point again with --min-trials trials.
    let revisit = warmup.saturating_add(spec.trial_time_ns * u64::from(spec.min_trials));
    let est = n.saturating_mul(
        per_point.saturating_add(revisit.saturating_mul(u64::from(spec.passes.max(1) - 1))),
    );
    (est > LONG_RUN_NS).then(|| {
        format!(
            "this run has {n} points of up to {:.1} s each{}: about {:.0} minutes; use larger \
             steps in --sizes, a smaller --max-point-time or fewer --passes for a shorter one \
             (Ctrl-C keeps the points measured)",
            per_point as f64 / 1e9,
            if spec.passes > 1 {
                format!(", visited in {} passes", spec.passes)
            } else {
                String::new()
            },
            est as f64 / 60e9
        )
    })
}

/// Sets the trial time and the point budget from the flags; without them the spec keeps
/// `RunSpec::new`'s defaults — except a rate run's. A rate point's stop-rule sample, the
/// delivered rate, follows the offered one and meets any precision at once, so the trial
/// time decides how many replies its percentiles rest on: without --trial-time a rate
/// trial carries 1000 requests at the run's lowest load (`LoadSpec::default_trial_ns`), and
/// the budget lets --min-trials of them run.
fn set_trial_times(a: &RunArgs, spec: &mut RunSpec) {
    let ns = |d: Duration| d.as_nanos() as u64;
    // A rate point's budget holds --min-trials trials whether or not --trial-time is given
    // (`--trial-time 1s` in a 300 ms budget made the probe one trial, with no interval).
    let rate_default = spec.load.is_some();
    match (a.trial_time, &spec.load) {
        (Some(t), _) => spec.trial_time_ns = ns(t),
        (None, Some(load)) => spec.trial_time_ns = load.default_trial_ns(&spec.sizes),
        (None, None) => {}
    }
    match a.max_point_time {
        Some(t) => spec.max_point_time_ns = ns(t),
        None if rate_default => {
            // Never below the default budget: short trials keep the room they had (20 ms
            // trials in a budget of exactly three stopped after two, their gaps included).
            spec.max_point_time_ns = spec
                .max_point_time_ns
                .max(spec.trial_time_ns * u64::from(a.min_trials.max(2)));
        }
        None => {}
    }
}

/// The message size of a rate run without --sizes.
const RATE_DEFAULT_SIZE: u64 = 64;

/// The rate pattern's offered load from --rate/--rates/--arrivals/--seed; the
/// flags are refused with another pattern.
fn load(a: &RunArgs, pattern: Pattern) -> Result<Option<LoadSpec>, String> {
    if pattern != Pattern::Rate {
        let given = [
            (a.rate.is_some(), "--rate"),
            (a.rates.is_some(), "--rates"),
            (a.seed.is_some(), "--seed"),
            (a.arrivals != Arrivals::Constant, "--arrivals"),
        ];
        return match given.iter().find(|(g, _)| *g) {
            Some((_, flag)) => Err(format!(
                "{flag} applies to the rate pattern: add -p rate (open-loop requests at an \
                 offered load)"
            )),
            None => Ok(None),
        };
    }
    let rates = match &a.rates {
        Some(r) => parse_rates(r)?,
        None => Vec::new(),
    };
    let seed = a.seed.unwrap_or_else(|| {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
        now.map_or(1, |d| d.as_nanos() as u64)
    });
    Ok(Some(LoadSpec {
        rate: a.rate,
        rates,
        rates_spec: a.rates.clone().unwrap_or_default(),
        arrivals: a.arrivals,
        seed,
    }))
}

/// The in-process run's default placement. A pingpong or crr exchange alternates between
/// the two ends, so sharing one CPU costs it no parallelism; left free, the scheduler moves
/// the two threads between sharing a CPU and not, from trial to trial and run to run, and
/// the sweep then measures the scheduler (RTT/2 ~3× apart on a 2-CPU VM) instead of the
/// stack — docs/methodology.md has the measurements. Both ends go on the highest allowed
/// CPU (CPU 0 takes most housekeeping). Streams run both ends at once and stay free, as does
/// a transport whose ends poll (`shm`) and a run that asks for `--busy-poll` (a polling end
/// would take the CPU its peer needs). `--cpu free` restores the scheduler's placement.
fn default_placement(spec: &mut RunSpec) {
    if !matches!(spec.pattern, Pattern::Pingpong | Pattern::Crr)
        || netsweep_transport::descriptor(spec.transport).polls
        || spec.client_knobs.busy_poll.is_some()
        || spec.server_knobs.busy_poll.is_some()
    {
        return;
    }
    if let Some(&cpu) = netsweep_engine::meter::allowed_cpus().last() {
        spec.client_knobs.cpu = Some(cpu);
        spec.server_knobs.cpu = Some(cpu);
        spec.default_placement = true;
    }
}

/// Builds both sides' knobs from the flags.
fn knobs(a: &RunArgs, transport: Transport) -> Result<(Knobs, Knobs), String> {
    let mut c = Knobs::default();
    let mut s = Knobs::default();
    (c.sndbuf, s.sndbuf) = PerSide::pair(a.sndbuf);
    (c.rcvbuf, s.rcvbuf) = PerSide::pair(a.rcvbuf);
    if netsweep_transport::knobs::applies(Knob::Nodelay, transport) {
        (c.nodelay, s.nodelay) = (Some(a.nodelay), Some(a.nodelay));
    }
    if !a.align {
        (c.buffer_offset, s.buffer_offset) = PerSide::pair(a.offset);
    }
    if let Some(b) = a.batch {
        if b == 0 || b > netsweep_proto::messages::MAX_BATCH {
            return Err(format!(
                "--batch {b} is out of range: give 1 to {}",
                netsweep_proto::messages::MAX_BATCH
            ));
        }
        (c.batch, s.batch) = (Some(b), Some(b));
    }
    (c.congestion_control, s.congestion_control) = (a.cc.clone(), a.cc.clone());
    if transport == Transport::Quic {
        netsweep_transport::quic::config::controller(a.cc.as_deref())?;
    }
    let lowat = |n: u64| {
        u32::try_from(n)
            .map_err(|_| format!("--notsent-lowat {n} is over 4 GiB: give a smaller size"))
    };
    (c.pacing_rate, s.pacing_rate) = PerSide::pair(a.pacing_rate);
    let (cl, sl) = PerSide::pair(a.notsent_lowat);
    (c.notsent_lowat, s.notsent_lowat) = (cl.map(lowat).transpose()?, sl.map(lowat).transpose()?);
    // --dscp arrives as the TOS byte; clap keeps it and --tos apart.
    (c.tos, s.tos) = PerSide::pair(a.tos.or(a.dscp));
    (c.priority, s.priority) = PerSide::pair(a.priority);
    if a.no_check {
        (c.no_check, s.no_check) = (Some(true), Some(true));
    }
    (c.busy_poll, s.busy_poll) = PerSide::pair(a.busy_poll);
    (c.pmtu, s.pmtu) = (a.pmtu.clone(), a.pmtu.clone());
    (c.cpu, s.cpu) = PerSide::pair(a.cpu);
    if let Some(pool) = a.invalidate_cache {
        (c.cache_pool, s.cache_pool) = (Some(pool), Some(pool));
    }
    (c.interface, s.interface) = (a.interface.clone(), None);
    Ok((c, s))
}

/// Parses `netsweep <command> 127.0.0.1 ARGS…` as the command line would: clap's message
/// without its usage and help hints (the error line and, for a closed set, the possible
/// values).
fn parse_as(command: &str, args: &[String]) -> Result<crate::cli::Cli, String> {
    use clap::Parser;
    let argv = ["netsweep", command, "127.0.0.1"]
        .into_iter()
        .map(String::from)
        .chain(args.iter().cloned());
    crate::cli::Cli::try_parse_from(argv).map_err(|e| {
        e.to_string()
            .lines()
            .map(str::trim)
            .take_while(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// Parses a run's arguments as `netsweep run` would and builds its spec.
pub fn check_args(args: &[String]) -> Result<netsweep_model::spec::RunSpec, String> {
    match parse_as("run", args)?.command {
        Some(crate::cli::Command::Run(a)) => {
            let family = if a.ipv6 {
                netsweep_model::spec::Family::Ipv6
            } else {
                netsweep_model::spec::Family::Ipv4
            };
            build(&a, family)
        }
        _ => Err("not a run".into()),
    }
}

/// Parses a responsiveness run's arguments as `netsweep rpm` would.
pub fn check_rpm_args(args: &[String]) -> Result<(), String> {
    match parse_as("rpm", args)?.command {
        Some(crate::cli::Command::Rpm(_)) => Ok(()),
        _ => Err("not an rpm test".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(args: &[&str]) -> Result<RunSpec, String> {
        check_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_sweep_of_hours_is_refused_and_one_over_ten_minutes_is_said() {
        let e = spec(&["--sizes", "1..8M:*1.0001"]).unwrap_err();
        assert!(
            e.contains("78095 points") && e.contains("use larger steps"),
            "{e}"
        );
        // 4000 points of 300 ms plus a 20 ms warm-up: about 21 minutes.
        let s = spec(&["--sizes", "1..4000:+1"]).unwrap();
        let w = long_run_warning(&s).unwrap();
        assert!(w.contains("4000 points") && w.contains("21 minutes"), "{w}");
        assert!(
            !e.contains("  ") && !w.contains("  "),
            "runs of spaces: {e} / {w}"
        );
        assert_eq!(
            long_run_warning(&spec(&["--sizes", "1..1000:+1"]).unwrap()),
            None
        );
        assert_eq!(long_run_warning(&spec(&[]).unwrap()), None);
        // Passes count: 1000 points of 0.32 s, then 9 visits of 80 ms each: about 17 minutes.
        let w =
            long_run_warning(&spec(&["--sizes", "1..1000:+1", "--passes", "10"]).unwrap()).unwrap();
        assert!(
            w.contains("in 10 passes") && w.contains("17 minutes"),
            "{w}"
        );
    }

    #[test]
    fn a_rate_probe_with_a_trial_time_has_room_for_its_trials() {
        let s = spec(&["-p", "rate", "--rate", "200", "--trial-time", "1s"]).unwrap();
        assert_eq!(s.max_point_time_ns, 3_000_000_000);
        let s = spec(&["-p", "rate", "--rate", "200", "--max-point-time", "1s"]).unwrap();
        assert_eq!(s.max_point_time_ns, 1_000_000_000);
    }
}
