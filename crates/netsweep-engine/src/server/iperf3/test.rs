//! One connection on the iperf3 port: its cookie (a data connection that was slow to send it
//! goes to its test), the test's parameters — both within the handshake timeout, holding only
//! a handshake slot — then the plan, the admission (a refusal in iperf3's own words: busy is
//! `ACCESS_DENIED`, anything else `SERVER_ERROR` with the code the client prints), the test
//! under its deadline, and the log line and record of what was served.

use super::plan::{plan, Iperf3Plan};
use super::{Shared, Streams, Waiting};
use crate::server::budget::bytes;
use crate::server::handshakes::Slot;
use crate::server::log::{log, Event};
use netsweep_iperf3::request::Request;
use netsweep_iperf3::server::{
    self, codes, read_cookie, read_request, refuse, Config, Failure, Refusal, Served, TextHeader,
};
use netsweep_model::time::rfc3339;
use serde_json::{json, Value};
use std::any::Any;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The largest parameters frame read (iperf3's are ~300 bytes; a title and extra data a few
/// hundred more).
const MAX_PARAMS: u32 = 64 << 10;

/// Longest a client may stay silent on the control connection outside the data phase, or
/// move nothing on a stream during it.
const IDLE: Duration = Duration::from_secs(10);

/// Serves one connection of the iperf3 port to its end.
pub(super) fn connection(
    n: u64,
    peer: SocketAddr,
    mut s: TcpStream,
    slot: Slot,
    sh: &Shared,
    waiting: &Waiting,
) {
    let opts = sh.opts.as_ref();
    // An IPv4 client of the dual-stack listener is shown as IPv4 (not ::ffff:…) in the log,
    // its record and the server's text; the socket's own address is used for everything else.
    let shown = SocketAddr::new(peer.ip().to_canonical(), peer.port());
    let say = |event: Event, session: Option<u64>, reason: &str| {
        opts.count(crate::server::metrics::Protocol::Iperf3, event);
        if opts.verbose {
            log(opts.log_format, event, session, Some(shown), Some(reason));
        }
    };
    let timeout = opts.limits.handshake_timeout;
    let cookie = match read_cookie(&mut s, timeout) {
        Ok(c) => c,
        Err(e) => {
            let why = if slot.evicted() {
                "its handshake was cut short for a newer connection".to_string()
            } else {
                format!("no cookie within {} s ({e})", timeout.as_secs())
            };
            return say(Event::SessionFailed, Some(n), &format!("iperf3: {why}"));
        }
    };
    // A data connection whose cookie came after the accept loop looked.
    let Some(mut s) = waiting.hand_tcp(&cookie, peer.ip(), s) else {
        return;
    };
    let request = read_request(&mut s, MAX_PARAMS, timeout);
    drop(slot);
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            if matches!(e, Failure::Protocol(_)) {
                refuse(
                    &mut s,
                    Refusal::Error {
                        code: codes::IERECVPARAMS,
                        errno: super::plan::client_errno(codes::IERECVPARAMS),
                    },
                );
            }
            return say(
                Event::SessionFailed,
                Some(n),
                &format!("iperf3: before the test: {e}"),
            );
        }
    };
    let planned =
        plan(&request, &opts.limits, &opts.policy).and_then(|p| match p.cost.over(&opts.budget) {
            None => Ok(p),
            Some(r) => Err(super::plan::Refused {
                code: codes::IENEWTEST,
                reason: format!(
                    "this test would hold {} on the server, more than the {} it gives all its \
                     sessions together ({})",
                    r.amount(r.of(&p.cost)),
                    r.amount(r.of(&opts.budget)),
                    r.server_flag()
                ),
            }),
        });
    let p = match planned {
        Ok(p) => p,
        Err(r) => {
            refuse(
                &mut s,
                Refusal::Error {
                    code: r.code,
                    errno: r.errno(),
                },
            );
            return say(
                Event::Refused,
                None,
                &format!(
                    "iperf3 test ({}): {}; the client was sent SERVER_ERROR {}",
                    describe(&request),
                    r.reason,
                    r.code
                ),
            );
        }
    };
    let (_admitted, reservation) = match sh.admission.admit(peer.ip(), p.cost) {
        Ok(a) => a,
        Err(message) => {
            refuse(&mut s, Refusal::Busy);
            return say(
                Event::Refused,
                None,
                &format!("iperf3 test: {message}; the client was sent ACCESS_DENIED"),
            );
        }
    };
    let admitted_at = SystemTime::now();
    say(
        Event::SessionStart,
        Some(n),
        &format!("iperf3 test ({}), holding {}", describe(&request), p.cost),
    );
    if let Ok(c) = s.try_clone() {
        sh.controls.add(n, c);
    }
    let port = s.local_addr().map_or(0, |a| a.port());
    let cfg = config(&request, &p, n, shown, port, opts.iperf3_results.is_some());
    let hold: Arc<dyn Any + Send + Sync> = Arc::new(reservation);
    let mut src = Streams {
        waiting,
        cookie,
        client: peer.ip().to_canonical(),
        udp: p.udp,
        wait: IDLE,
        tcp_rx: None,
        udp_rx: None,
    };
    let r = server::run(&mut s, &cfg, &mut src, &hold);
    drop(src);
    sh.controls.remove(n);
    opts.count_end(crate::server::metrics::Protocol::Iperf3, r.is_ok());
    match &r {
        Ok(served) => say(Event::SessionEnd, Some(n), &summary(&request, served)),
        Err(e) => say(Event::SessionFailed, Some(n), &format!("iperf3 test: {e}")),
    }
    if let Some(dir) = &opts.iperf3_results {
        let record = record(n, shown, admitted_at, &request, &p, &r);
        let name = format!(
            "iperf3-{}-s{n}.json",
            rfc3339(admitted_at).replace([':', '-'], "")
        );
        if let Err(e) = write_record(dir, &name, &record) {
            log(
                opts.log_format,
                Event::Error,
                Some(n),
                Some(shown),
                Some(&format!(
                    "cannot write the iperf3 test's record into {}: {e}; check \
                     --iperf3-results",
                    dir.display()
                )),
            );
        }
    }
}

/// The test's run configuration from its plan.
fn config(
    r: &Request,
    p: &Iperf3Plan,
    n: u64,
    peer: SocketAddr,
    port: u16,
    keep_intervals: bool,
) -> Config {
    Config {
        udp: p.udp,
        len: p.len,
        to_server: p.to_server,
        from_server: p.from_server,
        rate_bps: p.rate_bps,
        burst: p.burst,
        blocks: p.blocks,
        omit: p.omit,
        counters_64bit: r.udp_counters_64bit,
        zerocopy: r.zerocopy,
        repeating_payload: r.repeating_payload,
        sockets: p.sockets.clone(),
        idle: IDLE,
        deadline: Instant::now() + p.lifetime,
        output: r.get_server_output.then(|| TextHeader {
            port,
            session: n,
            client: format!("{}, port {}", peer.ip(), peer.port()),
            udp: p.udp,
        }),
        keep_intervals: keep_intervals || r.get_server_output,
    }
}

/// The test in a few words: `tcp, -P 4 --bidir, -l 131072, -t 10`.
fn describe(r: &Request) -> String {
    let mut d = format!("{:?}", r.protocol).to_lowercase();
    if r.parallel != 1 {
        d += &format!(", -P {}", r.parallel);
    }
    if r.reverse {
        d += ", -R";
    }
    if r.bidirectional {
        d += ", --bidir";
    }
    if let Some(l) = r.len {
        d += &format!(", -l {l}");
    }
    match (r.time, r.num, r.blockcount) {
        (_, n, _) if n > 0 => d += &format!(", -n {n}"),
        (_, _, k) if k > 0 => d += &format!(", -k {k}"),
        (t, _, _) => d += &format!(", -t {t}"),
    }
    if let Some(b) = r.bandwidth.filter(|b| *b > 0) {
        d += &format!(", -b {b}");
    }
    if let Some(v) = &r.client_version {
        d += &format!(", client {}", netsweep_proto::text::printable(v));
    }
    d
}

/// What the server moved, for the log: each direction's bytes and rate.
fn summary(r: &Request, s: &Served) -> String {
    let mut parts = Vec::new();
    for (sender, verb) in [(false, "received"), (true, "sent")] {
        let streams: Vec<_> = s.streams.iter().filter(|f| f.sender == sender).collect();
        if streams.is_empty() {
            continue;
        }
        let b: u64 = streams.iter().map(|f| f.bytes).sum();
        let secs = streams.iter().map(|f| f.seconds).fold(0.0, f64::max);
        let mut part = format!(
            "{verb} {} in {secs:.2} s ({:.2} Mbit/s)",
            bytes(b),
            if secs > 0.0 {
                b as f64 * 8.0 / secs / 1e6
            } else {
                0.0
            }
        );
        if !sender && streams.iter().any(|f| f.packets > 0) {
            let lost: u64 = streams.iter().map(|f| f.errors).sum();
            let total: u64 = streams
                .iter()
                .map(|f| f.packets.saturating_sub(f.omitted_packets))
                .sum();
            part += &format!(", {lost}/{total} datagrams lost");
        }
        parts.push(part);
    }
    format!("iperf3 test ({}): {}", describe(r), parts.join("; "))
}

/// The record of one test: what was asked, what the server measured, what the client said.
fn record(
    n: u64,
    peer: SocketAddr,
    at: SystemTime,
    r: &Request,
    p: &Iperf3Plan,
    outcome: &Result<Served, Failure>,
) -> Value {
    let mut v = json!({
        "schema": "netsweep-iperf3-test",
        "schema_version": 1,
        "tool": {"name": "netsweep", "version": env!("CARGO_PKG_VERSION")},
        "session": n,
        "client": peer.to_string(),
        "started": rfc3339(at),
        "ended": rfc3339(SystemTime::now()),
        "request": {
            "protocol": format!("{:?}", r.protocol).to_lowercase(),
            "parallel": r.parallel,
            "reverse": r.reverse,
            "bidirectional": r.bidirectional,
            "len": p.len,
            "time": r.time,
            "num": r.num,
            "blockcount": r.blockcount,
            "omit": r.omit,
            "bandwidth": r.bandwidth,
            "window": r.window,
            "congestion": r.congestion,
            "udp_counters_64bit": r.udp_counters_64bit,
            "zerocopy": r.zerocopy,
            "get_server_output": r.get_server_output,
            "title": r.title,
            "extra_data": r.extra_data,
            "client_version": r.client_version,
        },
        "cost": {"memory": p.cost.memory, "threads": p.cost.threads, "fds": p.cost.fds},
    });
    let Some(o) = v.as_object_mut() else {
        return v;
    };
    match outcome {
        Err(e) => {
            o.insert("status".into(), "failed".into());
            o.insert("error".into(), e.to_string().into());
        }
        Ok(s) => {
            o.insert("status".into(), "complete".into());
            o.insert("seconds".into(), s.seconds.into());
            o.insert(
                "cpu_percent".into(),
                json!({"total": s.cpu[0], "user": s.cpu[1], "system": s.cpu[2]}),
            );
            o.insert("congestion_used".into(), s.congestion_used.clone().into());
            let streams: Vec<Value> = s
                .streams
                .iter()
                .map(|f| {
                    json!({
                        "id": f.id,
                        "direction": if f.sender { "from_server" } else { "to_server" },
                        "bytes": f.bytes,
                        "seconds": f.seconds,
                        "bits_per_second": if f.seconds > 0.0 { f.bytes as f64 * 8.0 / f.seconds } else { 0.0 },
                        "packets": f.packets,
                        "omitted_packets": f.omitted_packets,
                        "lost": f.errors,
                        "out_of_order": f.out_of_order,
                        "jitter_s": f.jitter_s,
                        "retransmits": f.retransmits,
                    })
                })
                .collect();
            o.insert("streams".into(), streams.into());
            let intervals: Vec<Value> = s
                .intervals
                .iter()
                .map(|i| {
                    json!({"start": i.start, "end": i.end, "received": i.received,
                           "sent": i.sent, "datagrams_received": i.datagrams_received,
                           "lost": i.lost, "omitted": i.omitted})
                })
                .collect();
            o.insert("intervals".into(), intervals.into());
            o.insert("client_results".into(), s.client.raw.clone());
        }
    }
    v
}

/// Writes `v` as `dir/name` whole or not at all: a temporary file, synced, renamed.
fn write_record(dir: &std::path::Path, name: &str, v: &Value) -> std::io::Result<()> {
    netsweep_atomic::write_atomic(&dir.join(name), &format!("{v}\n"))
}
