//! An iperf3 client's test as a costed plan, before anything is allocated for it: every number
//! from its parameters (`-P`, `-l`, `-w`, `-t`, `-O`, `-b`, `-M`, the burst) checked against the
//! server's limits and its operator's policy, the socket options it may set, and what the test
//! will hold — buffers, threads, descriptors — as a [`Cost`] the admission reserves. A refusal
//! carries the reason for the log and the iperf3 error code the client prints.

use super::super::budget::{bytes, Cost};
use super::super::plan::{allowed_cc, Policy};
use super::super::ServerLimits;
use netsweep_iperf3::request::{Protocol, Request};
use netsweep_iperf3::server::{codes, SocketOptions};
use std::time::Duration;

/// iperf3's own ceiling on `-P` (MAX_STREAMS): no client asks more.
pub const MAX_STREAMS: u64 = 128;
/// iperf3's ceiling on `-t` (MAX_TIME, a day).
const MAX_TIME: u64 = 86_400;
/// iperf3's ceiling on the burst (MAX_BURST).
const MAX_BURST: u64 = 1000;
/// iperf3's ceiling on `-M` (MAX_MSS).
const MAX_MSS: u64 = 9 * 1024;
/// The largest UDP payload.
const MAX_UDP_LEN: u64 = 65_507;
/// iperf3's smallest UDP datagram (its 64-bit header).
const MIN_UDP_LEN: u64 = 16;
/// Defaults of iperf3's clients when `len` is absent.
const DEFAULT_TCP_LEN: u64 = 128 << 10;
const DEFAULT_UDP_LEN: u64 = 1460;
/// A test's fixed overhead: its control thread's stack touched, the per-second figures
/// (at most an hour of them), the results and the text output.
const TEST_MEMORY: u64 = 1 << 20;
/// How long after its `-t` and `-O` a time-bounded test may take to end (the client's
/// TEST_END, the results exchange): its deadline.
pub const GRACE: Duration = Duration::from_secs(15);

/// A refusal: what the log says and the code the client is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// iperf3's error code for the client.
    pub code: i32,
    /// Why, naming the limit and what to change.
    pub reason: String,
}

impl Refused {
    /// The errno sent beside `code`. iperf3's client prints its own text for a code and, for
    /// those whose text ends in ": ", strerror of this errno: 0 left "unable to set IP TOS: "
    /// with nothing after the colon (issue 41). The protocol carries no free text, so the
    /// reason naming the fix is in the server's log; the client gets the true errno.
    pub fn errno(&self) -> i32 {
        client_errno(self.code)
    }
}

/// The errno a refusal with iperf3 code `code` carries: EPERM ("Operation not permitted")
/// where the operator's policy forbids it, ENOMEM where the server will not hold it, EPROTO
/// for unreadable parameters, 0 for codes whose client text takes none.
pub fn client_errno(code: i32) -> i32 {
    match code {
        codes::IESETTOS | codes::IEAFFINITY => libc::EPERM,
        codes::IENEWTEST => libc::ENOMEM,
        codes::IERECVPARAMS => libc::EPROTO,
        _ => 0,
    }
}

fn refused(code: i32, reason: String) -> Refused {
    Refused { code, reason }
}

/// A test as the server will run it.
#[derive(Debug, Clone)]
pub struct Iperf3Plan {
    /// UDP (else TCP).
    pub udp: bool,
    /// Bytes per write or datagram.
    pub len: usize,
    /// Streams the client sends on, and those the server sends on.
    pub to_server: u32,
    /// See `to_server`.
    pub from_server: u32,
    /// Per sending stream, bits per second (0: unpaced).
    pub rate_bps: u64,
    /// Blocks back to back.
    pub burst: u32,
    /// TCP senders' `-n`/`-k` as blocks.
    pub blocks: Option<u64>,
    /// `-O`.
    pub omit: Duration,
    /// How long the test may last from its admission.
    pub lifetime: Duration,
    /// The options on the data sockets.
    pub sockets: SocketOptions,
    /// What the test holds at most.
    pub cost: Cost,
}

/// The plan of `r`, or why it cannot run here.
pub fn plan(r: &Request, limits: &ServerLimits, policy: &Policy) -> Result<Iperf3Plan, Refused> {
    let udp = match r.protocol {
        Protocol::Tcp => false,
        Protocol::Udp => true,
        Protocol::Sctp => {
            return Err(refused(
                codes::IENOSCTP,
                "SCTP (--sctp): this server serves iperf3's TCP and UDP tests only".into(),
            ))
        }
    };
    if r.reverse && r.bidirectional {
        return Err(refused(codes::IEREVERSEBIDIR, "both -R and --bidir".into()));
    }
    let max_streams = MAX_STREAMS.min(u64::from(limits.max_flows));
    if r.parallel == 0 || r.parallel > max_streams {
        return Err(refused(
            codes::IENUMSTREAMS,
            format!(
                "-P {} is outside 1..={max_streams} streams (iperf3's 128, or this server's \
                 --max-flows)",
                r.parallel
            ),
        ));
    }
    let len = r.len.unwrap_or(if udp {
        DEFAULT_UDP_LEN
    } else {
        DEFAULT_TCP_LEN
    });
    if udp && !(MIN_UDP_LEN..=MAX_UDP_LEN).contains(&len) {
        return Err(refused(
            codes::IEUDPBLOCKSIZE,
            format!("-l {len}: a UDP test's datagrams are {MIN_UDP_LEN}..={MAX_UDP_LEN} bytes"),
        ));
    }
    if !udp && (len == 0 || len > limits.max_size) {
        return Err(refused(
            codes::IEBLOCKSIZE,
            format!(
                "-l {len} is outside 1..={} bytes, this server's --max-size",
                limits.max_size
            ),
        ));
    }
    let max_time = limits.max_session.as_secs().min(MAX_TIME);
    if r.time > max_time {
        return Err(refused(
            codes::IEDURATION,
            format!(
                "-t {} is longer than this server's limit of {max_time} s (--max-duration; \
                 the client prints its own maximum, iperf3's 86400 s)",
                r.time
            ),
        ));
    }
    if r.omit.saturating_add(r.time) > max_time {
        return Err(refused(
            codes::IEOMIT,
            format!(
                "-O {} with -t {} is longer than this server's limit of {max_time} s \
                 (--max-duration)",
                r.omit, r.time
            ),
        ));
    }
    if let Some(w) = r.window.filter(|w| *w > limits.max_size) {
        return Err(refused(
            codes::IEBUFSIZE,
            format!(
                "-w {w} is above this server's --max-size, {} bytes",
                limits.max_size
            ),
        ));
    }
    if let Some(m) = r.mss.filter(|m| *m > MAX_MSS) {
        return Err(refused(
            codes::IEMSS,
            format!("-M {m} is above {MAX_MSS} bytes"),
        ));
    }
    let burst = r.burst.unwrap_or(0);
    if burst > MAX_BURST {
        return Err(refused(
            codes::IEBURST,
            format!("a burst of {burst} is above {MAX_BURST}"),
        ));
    }
    let sockets = socket_options(r, policy, udp)?;
    let (to_server, from_server) = (r.streams_to_server(), r.streams_from_server());
    let streams = to_server + from_server;
    let mut rate = r.bandwidth.unwrap_or(0);
    if let Some(limit) = limits.max_rate_bps {
        let total = rate.saturating_mul(streams);
        if rate == 0 || total > limit {
            return Err(refused(
                codes::IETOTALRATE,
                format!(
                    "{} over {streams} stream{} is above this server's --max-rate of {:.3} \
                     Mbit/s: ask for less with -b",
                    if rate == 0 {
                        "an unlimited rate".to_string()
                    } else {
                        format!("{:.3} Mbit/s", rate as f64 / 1e6)
                    },
                    if streams == 1 { "" } else { "s" },
                    limit as f64 / 1e6
                ),
            ));
        }
        rate = rate.min(limit / streams.max(1));
    }
    let blocks = match (r.num, r.blockcount) {
        (0, 0) => None,
        (0, k) => Some(k),
        (n, _) => Some(n.div_ceil(len)),
    };
    let per_stream = len
        .saturating_mul(if r.zerocopy && !udp { 2 } else { 1 })
        .saturating_add(r.window.unwrap_or(0).saturating_mul(2));
    let cost = Cost {
        memory: per_stream
            .saturating_mul(streams)
            .saturating_add(TEST_MEMORY),
        threads: 1 + streams,
        fds: 4 + 3 * streams,
    };
    if cost.memory > limits.session_memory {
        return Err(refused(
            if streams > 1 {
                codes::IENUMSTREAMS
            } else {
                codes::IEBLOCKSIZE
            },
            format!(
                "this test would hold {} on the server ({streams} streams of {len}-byte \
                 buffers{}), above its limit of {} per session (--max-session-memory): use \
                 a smaller -l{}, or ask the server's operator to raise --max-session-memory",
                bytes(cost.memory),
                r.window
                    .map_or(String::new(), |w| format!(" and {w}-byte socket buffers")),
                bytes(limits.session_memory),
                if streams > 1 { " or fewer -P" } else { "" }
            ),
        ));
    }
    let lifetime = if r.time > 0 {
        Duration::from_secs(r.time + r.omit) + GRACE
    } else {
        limits.max_session
    }
    .min(limits.max_session);
    Ok(Iperf3Plan {
        udp,
        len: len as usize,
        to_server: to_server as u32,
        from_server: from_server as u32,
        rate_bps: rate,
        burst: burst as u32,
        blocks,
        omit: Duration::from_secs(r.omit),
        lifetime,
        sockets,
        cost,
    })
}

/// The socket options, each within what the operator allows.
fn socket_options(r: &Request, policy: &Policy, udp: bool) -> Result<SocketOptions, Refused> {
    let tos = match r.tos {
        None | Some(0) => None,
        Some(t) if t > 255 => {
            return Err(refused(codes::IEBADTOS, format!("TOS {t} is above 255")))
        }
        Some(_) if !policy.tos => {
            return Err(refused(
                codes::IESETTOS,
                "-S/--dscp (the TOS byte) on this server's sockets; its operator can allow \
                 it with serve --allow tos"
                    .into(),
            ))
        }
        Some(t) => Some(t as u8),
    };
    if let Some(cc) = &r.congestion {
        let printable = netsweep_proto::text::printable(cc);
        if !policy.any_cc && !allowed_cc().iter().any(|a| a == cc) {
            return Err(refused(
                codes::IESETCONGESTION,
                format!(
                    "-C {printable:?}: this server lets clients choose only {}; its operator \
                     can allow any with serve --allow cc",
                    allowed_cc().join(" ")
                ),
            ));
        }
    }
    if r.server_affinity.is_some() {
        return Err(refused(
            codes::IEAFFINITY,
            "-A with a server CPU: this server does not pin iperf3 tests (run the client \
             with -A N, its own CPU only)"
                .into(),
        ));
    }
    if r.flowlabel.is_some_and(|f| f != 0) {
        return Err(refused(
            codes::IEUNIMP,
            "-L (an IPv6 flow label): not set by this server".into(),
        ));
    }
    Ok(SocketOptions {
        window: r.window.map(|w| w.min(u64::from(u32::MAX)) as u32),
        nodelay: r.nodelay && !udp,
        mss: r.mss.map(|m| m as u32),
        tos,
        congestion: r.congestion.clone().filter(|_| !udp),
        dont_fragment: r.dont_fragment,
        fqrate: r.fqrate.filter(|f| *f > 0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(json: &str) -> Request {
        Request::parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn a_default_test_costs_its_buffers() {
        let p = plan(
            &req(r#"{"tcp":true,"time":10,"parallel":4,"bidirectional":true,"len":131072}"#),
            &ServerLimits::default(),
            &Policy::default(),
        )
        .unwrap();
        assert_eq!((p.to_server, p.from_server), (4, 4));
        assert_eq!(p.cost.memory, 8 * 131_072 + TEST_MEMORY);
        assert_eq!((p.cost.threads, p.cost.fds), (9, 28));
        assert_eq!(p.lifetime, Duration::from_secs(10) + GRACE);
    }

    #[test]
    fn every_number_from_the_client_is_capped_with_its_code() {
        let limits = ServerLimits::default();
        let d = Policy::default();
        for (json, code) in [
            (r#"{"parallel":129}"#, codes::IENUMSTREAMS),
            (r#"{"parallel":0}"#, codes::IENUMSTREAMS),
            (r#"{"len":1000000000}"#, codes::IEBLOCKSIZE),
            (r#"{"udp":true,"len":70000}"#, codes::IEUDPBLOCKSIZE),
            (r#"{"udp":true,"len":8}"#, codes::IEUDPBLOCKSIZE),
            (r#"{"time":90000}"#, codes::IEDURATION),
            (r#"{"time":3000,"omit":3000}"#, codes::IEOMIT),
            (r#"{"window":1000000000}"#, codes::IEBUFSIZE),
            (r#"{"MSS":100000}"#, codes::IEMSS),
            (r#"{"burst":5000}"#, codes::IEBURST),
            (r#"{"sctp":true}"#, codes::IENOSCTP),
            (
                r#"{"reverse":true,"bidirectional":true}"#,
                codes::IEREVERSEBIDIR,
            ),
            (r#"{"TOS":16}"#, codes::IESETTOS),
            (r#"{"congestion":"no-such-cc"}"#, codes::IESETCONGESTION),
            (r#"{"server_affinity":0}"#, codes::IEAFFINITY),
            (
                r#"{"parallel":128,"bidirectional":true,"len":16777216}"#,
                codes::IENUMSTREAMS,
            ),
        ] {
            let e = plan(&req(json), &limits, &d).unwrap_err();
            assert_eq!(e.code, code, "{json}: {}", e.reason);
        }
        let rated = ServerLimits {
            max_rate_bps: Some(100_000_000),
            ..ServerLimits::default()
        };
        let e = plan(&req(r#"{"tcp":true}"#), &rated, &d).unwrap_err();
        assert_eq!(e.code, codes::IETOTALRATE, "{}", e.reason);
        let ok = plan(
            &req(r#"{"udp":true,"bandwidth":10000000,"parallel":2}"#),
            &rated,
            &d,
        );
        assert_eq!(ok.unwrap().rate_bps, 10_000_000);
        let tos = Policy {
            tos: true,
            ..Policy::default()
        };
        assert_eq!(
            plan(&req(r#"{"TOS":16}"#), &limits, &tos)
                .unwrap()
                .sockets
                .tos,
            Some(16)
        );
    }

    #[test]
    fn policy_refusals_carry_eperm_and_name_the_fix() {
        let (l, d) = (ServerLimits::default(), Policy::default());
        let e = plan(&req(r#"{"TOS":16}"#), &l, &d).unwrap_err();
        assert_eq!(
            e.errno(),
            libc::EPERM,
            "the client's text is not left empty"
        );
        assert!(e.reason.contains("serve --allow tos"), "{}", e.reason);
        let e = plan(&req(r#"{"server_affinity":0}"#), &l, &d).unwrap_err();
        assert_eq!(e.errno(), libc::EPERM);
        let e = plan(&req(r#"{"time":4000}"#), &l, &d).unwrap_err();
        assert_eq!((e.code, e.errno()), (codes::IEDURATION, 0));
        assert!(e.reason.contains("limit of 3600 s"), "{}", e.reason);
    }

    #[test]
    fn bytes_and_blocks_become_whole_blocks() {
        let l = ServerLimits::default();
        let d = Policy::default();
        let p = plan(&req(r#"{"num":1000001,"len":1000,"reverse":true}"#), &l, &d).unwrap();
        assert_eq!(p.blocks, Some(1001));
        assert_eq!(
            p.lifetime, l.max_session,
            "bounded by bytes: the server's limit"
        );
        let p = plan(&req(r#"{"blockcount":7}"#), &l, &d).unwrap();
        assert_eq!(p.blocks, Some(7));
    }
}
