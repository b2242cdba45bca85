//! Background load (`--background SPEC`): flows that run beside the measured session, each
//! as its own session with the same server, started before and stopped after every measured
//! trial — seed 002's latency per priority band while another band loads the link. This file
//! holds the flow's spec and its grammar, and the figures recorded beside each point.
//!
//! Grammar: `PATTERN[,KEY=VALUE]…`, e.g. `stream,size=64k,priority=0`. PATTERN is `stream`
//! (the client sends for as long as the measured trial lasts). Keys: `size` (message size,
//! the `--sizes` grammar; default 64k, or 1472 for datagram transports), `transport` (default:
//! the run's), `priority` (SO_PRIORITY on both ends; decimal or 0x hexadecimal), `tos` (IP_TOS
//! on both ends), `cc` (TCP congestion control on both ends: a loss-based `cubic` fills a
//! drop-tail queue where `bbr` would not), `cpu` (pin the background's client thread), `start` (begin sending that
//! long into each measured trial, e.g. 500ms, so the trial's `--interval` timeline shows the
//! load arrive; less than the trial time and `--timeout`).

use crate::sizes::parse_sizes;
use crate::spec::{Pattern, RunSpec, Transport};
use serde::{Deserialize, Serialize};

/// The patterns a background flow may use.
pub const BACKGROUND_PATTERNS: &[Pattern] = &[Pattern::Stream];

/// The keys a background spec may carry.
pub const BACKGROUND_KEYS: &str = "size, transport, priority, tos, cc, cpu, start";

/// One background flow, as asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackgroundSpec {
    /// The flow's pattern (stream).
    pub pattern: Pattern,
    /// Its transport; `None`: the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// Message size, bytes; `None`: 64 KiB (1472 B for datagram transports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// SO_PRIORITY on both ends of the flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// IP_TOS on both ends of the flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// TCP congestion control on both ends of the flow (`cc=cubic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    /// CPU of the flow's client thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// How long into each measured trial the flow begins sending, ns (`None`: with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ns: Option<u64>,
    /// The spec as written (its label in tables and results).
    pub text: String,
}

impl BackgroundSpec {
    /// Parses `PATTERN[,KEY=VALUE]…`; the error names what is allowed.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = text.split(',').map(str::trim);
        let first = parts.next().unwrap_or("");
        let allowed = || {
            BACKGROUND_PATTERNS
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let pattern = Pattern::parse(first)
            .filter(|p| BACKGROUND_PATTERNS.contains(p))
            .ok_or_else(|| {
                format!(
                    "background '{text}': '{first}' is not a background pattern: start with \
                     one of: {} (e.g. stream,size=64k,priority=0)",
                    allowed()
                )
            })?;
        let mut spec = Self {
            pattern,
            transport: None,
            size: None,
            priority: None,
            tos: None,
            cc: None,
            cpu: None,
            start_ns: None,
            text: text.trim().to_string(),
        };
        for part in parts {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                format!("background '{text}': '{part}' is not KEY=VALUE (keys: {BACKGROUND_KEYS})")
            })?;
            let bad = |what: &str| format!("background '{text}': {key}={value}: {what}");
            match key.trim() {
                "size" => match parse_sizes(value) {
                    Ok(v) if v.len() == 1 && v[0] > 0 => spec.size = Some(v[0]),
                    _ => return Err(bad("give one size above 0, such as 64k or 1472")),
                },
                "transport" => {
                    spec.transport = Some(Transport::parse(value).ok_or_else(|| {
                        bad("not a transport (`netsweep list` shows them; e.g. tcp, udp)")
                    })?)
                }
                "priority" => {
                    spec.priority =
                        Some(number(value).ok_or_else(|| bad("give a number 0..=4294967295"))?)
                }
                "tos" => spec.tos = Some(number(value).ok_or_else(|| bad("give a byte 0..=255"))?),
                "cpu" => spec.cpu = Some(number(value).ok_or_else(|| bad("give a CPU number"))?),
                "cc" => {
                    let v = value.trim();
                    let ok = (1..16).contains(&v.len())
                        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                    if !ok {
                        return Err(bad("give an algorithm's name, such as cubic or bbr"));
                    }
                    spec.cc = Some(v.to_string());
                }
                "start" => {
                    let d = crate::time::parse_duration(value).map_err(|e| bad(&e))?;
                    spec.start_ns = Some(d.as_nanos() as u64);
                }
                _ => {
                    return Err(format!(
                        "background '{text}': unknown key '{key}' (keys: {BACKGROUND_KEYS})"
                    ))
                }
            }
        }
        Ok(spec)
    }

    /// The flow's transport in `run`.
    pub fn transport_in(&self, run: &RunSpec) -> Transport {
        self.transport.unwrap_or(run.transport)
    }

    /// The flow's message size in `run`.
    pub fn size_in(&self, run: &RunSpec) -> u64 {
        self.size
            .unwrap_or(if self.transport_in(run).is_datagram() {
                1472
            } else {
                64 * 1024
            })
    }

    /// Checks the flow against the run; the error says the fix. A flow starting after the
    /// trial's end would never run in it, and one whose server waits longer than `--timeout`
    /// for its first byte gives up.
    pub fn check(&self, run: &RunSpec) -> Result<(), String> {
        if run.transport == Transport::Mpi || self.transport_in(run) == Transport::Mpi {
            // Rank 1 serves one session, and the MPI calls of a rank are serialised on one
            // data path (thread level SERIALIZED): a second session has nowhere to go.
            return Err(
                "a background flow needs a session of its own, and -t mpi has one \
                 (rank 1 serves the measured run): load an MPI run from another tool, \
                 or measure under load over tcp or udp"
                    .into(),
            );
        }
        let Some(start) = self.start_ns else {
            return Ok(());
        };
        let ms = |ns: u64| ns as f64 / 1e6;
        if start >= run.trial_time_ns {
            return Err(format!(
                "start={} ms is not within a {} ms trial: give a start below --trial-time",
                ms(start),
                ms(run.trial_time_ns)
            ));
        }
        if start >= run.timeout_ns {
            return Err(format!(
                "start={} ms: the server waits at most --timeout ({} ms) for the flow's first \
                 byte; raise --timeout above the start",
                ms(start),
                ms(run.timeout_ns)
            ));
        }
        Ok(())
    }

    /// The flow's own session: its pattern, transport, one size, knobs on both ends; the
    /// run's family, timeout and trial time (a background trial is ended by the engine).
    pub fn session_spec(&self, run: &RunSpec) -> RunSpec {
        let mut s = RunSpec::new(self.transport_in(run), self.pattern, run.family);
        let size = self.size_in(run);
        s.sizes = vec![size];
        s.sizes_spec = size.to_string();
        s.timeout_ns = run.timeout_ns;
        s.trial_time_ns = run.trial_time_ns;
        s.warmup = false;
        for k in [&mut s.client_knobs, &mut s.server_knobs] {
            k.priority = self.priority;
            k.tos = self.tos;
            k.congestion_control.clone_from(&self.cc);
        }
        s.client_knobs.cpu = self.cpu;
        s
    }
}

/// A decimal or `0x` hexadecimal number that fits `T`.
fn number<T: TryFrom<u64>>(s: &str) -> Option<T> {
    let s = s.trim();
    let v = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None => s.parse().ok()?,
    };
    T::try_from(v).ok()
}

/// What one background flow did during a point's timed trials.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct BackgroundFigures {
    /// The flow's spec as written.
    pub flow: String,
    /// Measured trials the flow ran beside (one background trial each).
    pub trials: u32,
    /// Bytes the flow's sender's stack accepted over those trials.
    pub bytes_sent: u64,
    /// Bytes the flow's receiver got over those trials.
    pub bytes_received: u64,
    /// The receiver's time, summed over the trials, nanoseconds: from its arming (less the
    /// flow's `start`) to its last byte (so what queued while the measured trial ran is
    /// counted when it arrives).
    pub recv_span_ns: u64,
    /// The receiver's rate over the trials (bytes received ÷ receiving time), Mbit/s.
    pub receiver_mbps: f64,
}

impl BackgroundFigures {
    /// Adds one background trial: the sender's and the receiver's bytes, the receiver's time.
    pub fn add(&mut self, sent: u64, received: u64, recv_span_ns: u64) {
        self.trials += 1;
        self.bytes_sent += sent;
        self.bytes_received += received;
        self.recv_span_ns += recv_span_ns;
        self.receiver_mbps = if self.recv_span_ns > 0 {
            self.bytes_received as f64 * 8.0 * 1e3 / self.recv_span_ns as f64
        } else {
            0.0
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Family;

    #[test]
    fn the_grammar_reads_every_key_and_names_what_is_allowed() {
        let b =
            BackgroundSpec::parse("stream,size=64k,priority=0x10001,tos=16,cpu=1,transport=udp")
                .unwrap();
        assert_eq!(
            (b.pattern, b.transport, b.size, b.priority, b.tos, b.cpu),
            (
                Pattern::Stream,
                Some(Transport::Udp),
                Some(65536),
                Some(0x10001),
                Some(16),
                Some(1)
            )
        );
        let bare = BackgroundSpec::parse("stream").unwrap();
        let run = RunSpec::new(Transport::Tcp, Pattern::Pingpong, Family::Ipv4);
        assert_eq!(bare.size_in(&run), 65536);
        let s = b.session_spec(&run);
        assert_eq!(
            (s.pattern, s.transport, s.sizes.clone()),
            (Pattern::Stream, Transport::Udp, vec![65536])
        );
        assert_eq!(
            (s.client_knobs.priority, s.server_knobs.priority),
            (Some(0x10001), Some(0x10001))
        );
        let e = BackgroundSpec::parse("pingpong").unwrap_err();
        assert!(e.contains("one of: stream"), "{e}");
        let e = BackgroundSpec::parse("stream,colour=red").unwrap_err();
        assert!(e.contains("keys: size"), "{e}");
        assert!(BackgroundSpec::parse("stream,size=0")
            .unwrap_err()
            .contains("above 0"));
        assert!(BackgroundSpec::parse("stream,tos=300")
            .unwrap_err()
            .contains("0..=255"));
        assert!(BackgroundSpec::parse("stream,size")
            .unwrap_err()
            .contains("KEY=VALUE"));
        let cubic = BackgroundSpec::parse("stream,cc=cubic").unwrap();
        let s = cubic.session_spec(&run);
        assert_eq!(s.client_knobs.congestion_control.as_deref(), Some("cubic"));
        assert_eq!(s.server_knobs.congestion_control.as_deref(), Some("cubic"));
        assert!(BackgroundSpec::parse("stream,cc=a;b")
            .unwrap_err()
            .contains("algorithm"));
        let late = BackgroundSpec::parse("stream,start=500ms").unwrap();
        assert_eq!(late.start_ns, Some(500_000_000));
        assert!(BackgroundSpec::parse("stream,start=soon")
            .unwrap_err()
            .contains("not a time"));
        let mut run = run;
        run.trial_time_ns = 1_000_000_000;
        run.timeout_ns = 10_000_000_000;
        assert_eq!(late.check(&run), Ok(()));
        run.trial_time_ns = 500_000_000;
        assert!(late.check(&run).unwrap_err().contains("--trial-time"));
        run.trial_time_ns = 1_000_000_000;
        run.timeout_ns = 400_000_000;
        assert!(late.check(&run).unwrap_err().contains("raise --timeout"));
        // MPI has one session per run: no background flow of it, nor beside it.
        run.timeout_ns = 10_000_000_000;
        let mpi = BackgroundSpec::parse("stream,transport=mpi").unwrap();
        assert!(mpi.check(&run).unwrap_err().contains("-t mpi"));
        let mut on_mpi = run.clone();
        on_mpi.transport = Transport::Mpi;
        let plain = BackgroundSpec::parse("stream").unwrap();
        assert!(plain.check(&on_mpi).unwrap_err().contains("-t mpi"));
        assert_eq!(plain.check(&run), Ok(()));
    }

    #[test]
    fn figures_sum_trials_and_rate_over_the_sending_time() {
        let mut f = BackgroundFigures::default();
        f.add(1_000_000, 1_000_000, 100_000_000);
        f.add(1_000_000, 500_000, 100_000_000);
        assert_eq!(
            (f.trials, f.bytes_sent, f.bytes_received),
            (2, 2_000_000, 1_500_000)
        );
        // 12 Mbit in 0.2 s.
        assert!((f.receiver_mbps - 60.0).abs() < 1e-9);
    }
}
