//! A session's plan: the client's hello parsed and checked once into typed values — its
//! transport, pattern, sizes, flows, threads and knobs, against the server's limits and its
//! operator's policy — with what the session will cost the server (its [`Cost`]) computed
//! before it is admitted. Nothing the session allocates later is sized by anything but the
//! plan, and every trial is checked against it.

use super::budget::{bytes, Cost};
use super::ServerLimits;
use crate::pattern::{self, flows, BufferSizes, Registration};
use netsweep_endpoint::TransportFactory;
use netsweep_model::spec::{Api, Pattern, Reach, Transport};
use netsweep_proto::messages::MAX_BATCH;
use netsweep_proto::messages::{SessionSetup, TrialSpec};
use std::net::IpAddr;
use std::time::Duration;

/// What the operator lets clients ask beyond a plain measurement (`serve --allow`). The
/// in-process server of `netsweep run` allows everything ([`Policy::ALL`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    /// unix-*, shm and mpi for a client on another host (they need one host: socket files
    /// and tmpfs in the server's directories).
    pub host_transports: bool,
    /// packet and xdp for a client on another host (raw frames on an interface the client
    /// names, with the server's privileges).
    pub raw_transports: bool,
    /// The IP TOS/DSCP byte on the server's sockets (`--tos`): marks traffic for the
    /// network's queues.
    pub tos: bool,
    /// SO_PRIORITY on the server's sockets (`--priority`): selects the host's qdisc bands.
    pub priority: bool,
    /// Any congestion control the kernel has (by default only those in
    /// `net.ipv4.tcp_allowed_congestion_control`; as root, naming another makes the kernel
    /// load its module).
    pub any_cc: bool,
    /// The host's facts (hostname, boot id, kernel, CPU model, interfaces and addresses,
    /// sysctls) in the welcome of a client that did not authenticate.
    pub host_facts: bool,
}

impl Policy {
    /// Everything allowed: the in-process server, whose only client is its own run.
    pub const ALL: Policy = Policy {
        host_transports: true,
        raw_transports: true,
        tos: true,
        priority: true,
        any_cc: true,
        host_facts: true,
    };
}

/// Where the session's client is, as its control connection shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The client's address.
    pub ip: IpAddr,
    /// The address the client reached the server on.
    pub local: IpAddr,
}

impl Peer {
    /// True when the client runs on this host: loopback, or the server's own address.
    pub fn same_host(&self) -> bool {
        let ip = self.ip.to_canonical();
        ip.is_loopback() || ip == self.local.to_canonical()
    }
}

/// A session as the server will run it: checked, typed, sized and costed.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The data path's transport.
    pub transport: Transport,
    /// Its messages are datagrams (a datagram transport, or `--api datagram`).
    pub datagrams: bool,
    /// The pattern's entry points (its `--flows` variant with more than one flow).
    pub reg: &'static Registration,
    /// The session's largest message: no trial may be larger.
    pub max_size: u64,
    /// Data connections (1 without `--flows`).
    pub flows: u32,
    /// What the server's buffers are sized for.
    pub sizes: BufferSizes,
    /// Every wait on the client: its `--timeout`, within the server's bounds.
    pub timeout: Duration,
    /// The server sends (`--reverse`).
    pub reverse: bool,
    /// The echo server stamps its echoes (`--one-way`).
    pub one_way: bool,
    /// The CPU the server's data threads are pinned to.
    pub cpu: Option<u32>,
    /// What the session holds at most: the server reserves it before admitting it.
    pub cost: Cost,
}

/// A session's fixed overhead beyond its buffers: stacks touched, histograms, datagram
/// windows, the control connection's buffers.
const SESSION_MEMORY: u64 = 1 << 20;

/// Descriptors a session holds besides one per flow and one per data thread: the control
/// connection, the data listener, a duplicate for bidir, and what an api adds (an io_uring,
/// a splice pipe).
const SESSION_FDS: u64 = 8;

impl Plan {
    /// The plan of `setup` from a client at `peer`, or the refusal to send it, naming the
    /// limit and what to change.
    pub fn new(
        setup: &SessionSetup,
        peer: Peer,
        limits: &ServerLimits,
        policy: &Policy,
        factory: &dyn TransportFactory,
    ) -> Result<Plan, String> {
        let transport = Transport::parse(&setup.transport).ok_or_else(|| {
            format!(
                "this server does not know transport {:?}",
                netsweep_proto::text::printable(&setup.transport)
            )
        })?;
        let flows = setup.flow_count();
        let pattern = Pattern::parse(&setup.pattern);
        let reg = pattern
            .and_then(|p| pattern::registration_for(p, flows))
            .ok_or_else(|| {
                let with = if flows > 1 { " with --flows" } else { "" };
                format!(
                    "this server does not know pattern {:?}{with}",
                    netsweep_proto::text::printable(&setup.pattern)
                )
            })?;
        check_reach(transport, peer, policy)?;
        if setup.max_size > limits.max_size {
            return Err(format!(
                "message size {} is above this server's limit of {} bytes (--max-size)",
                setup.max_size, limits.max_size
            ));
        }
        if flows > limits.max_flows {
            return Err(format!(
                "--flows {flows} is above this server's limit of {} flows per session \
                 (--max-flows)",
                limits.max_flows
            ));
        }
        check_knobs(setup, policy)?;
        let k = &setup.server_knobs;
        let threads = if flows > 1 {
            flows::thread_count(setup.threads, flows, reg.pattern)
        } else {
            1
        };
        let sizes = BufferSizes {
            max_size: usize::try_from(setup.max_size).unwrap_or(usize::MAX),
            batch: k.batch.unwrap_or(1).clamp(1, MAX_BATCH) as usize,
            offset: (k.buffer_offset.unwrap_or(0) % netsweep_endpoint::PAGE as u64) as usize,
            cache_pool: k.cache_pool.unwrap_or(0).min(1 << 28) as usize,
            threads,
        };
        let footprint = factory.footprint(setup);
        let buffers = (reg.server_memory)(&sizes);
        let cost = Cost {
            memory: buffers
                .saturating_add(footprint.memory)
                .saturating_add(footprint.tmpfs)
                .saturating_add(SESSION_MEMORY),
            // The control thread, the data thread and a helper (bidir's receiver); with
            // flows, the data thread relays to the flows' threads.
            threads: if flows > 1 { 2 + threads as u64 } else { 3 },
            fds: SESSION_FDS + u64::from(flows) + threads as u64,
        };
        if cost.memory > limits.session_memory {
            return Err(format!(
                "this run would hold {} on the server ({} of message buffers for {}-byte \
                 messages{}{}{}), above its limit of {} per session (--max-session-memory): \
                 use smaller --sizes{}, or ask the server's operator to raise \
                 --max-session-memory",
                bytes(cost.memory),
                bytes(buffers),
                setup.max_size,
                if sizes.batch > 1 {
                    format!(", {} per batch call", sizes.batch)
                } else {
                    String::new()
                },
                if flows > 1 {
                    format!(", {threads} data threads for {flows} flows")
                } else {
                    String::new()
                },
                if footprint.tmpfs > 0 {
                    format!(", {} of shared memory", bytes(footprint.tmpfs))
                } else {
                    String::new()
                },
                bytes(limits.session_memory),
                match (flows > 1, sizes.batch > 1) {
                    (true, _) => " or fewer --threads",
                    (false, true) => " or a smaller --batch",
                    (false, false) => "",
                },
            ));
        }
        Ok(Plan {
            transport,
            // An empty api is basic (older clients send none); an unknown one the transport
            // refuses when it listens.
            datagrams: netsweep_model::spec::datagrams(
                transport,
                Api::parse(&setup.api).unwrap_or(Api::Basic),
            ),
            reg,
            max_size: setup.max_size,
            flows,
            sizes,
            timeout: Duration::from_nanos(setup.timeout_ns)
                .clamp(Duration::from_millis(100), limits.max_timeout),
            reverse: setup.reverse,
            one_way: setup.one_way,
            cpu: k.cpu,
            cost,
        })
    }

    /// Checks a trial the client asks for against the plan (its size within the session's
    /// largest, which sized the buffers) and the server's limits.
    pub fn check_trial(&self, spec: &TrialSpec, limits: &ServerLimits) -> Result<(), String> {
        if spec.size > self.max_size {
            return Err(format!(
                "trial size {} is above the session's largest message, {} bytes, which its \
                 hello declared",
                spec.size, self.max_size
            ));
        }
        if spec.repetitions > limits.max_repetitions {
            return Err(format!(
                "{} repetitions above the server limit {}",
                spec.repetitions, limits.max_repetitions
            ));
        }
        if Duration::from_nanos(spec.duration_ns) > limits.max_trial {
            return Err(format!(
                "a trial of {:.3} s is above this server's limit of {} s per trial",
                spec.duration_ns as f64 / 1e9,
                limits.max_trial.as_secs()
            ));
        }
        (self.reg.check_trial)(spec, self.datagrams)
    }
}

/// A transport that needs one host, or raw frames, is served to a client on another host
/// only when the operator allows it.
fn check_reach(t: Transport, peer: Peer, policy: &Policy) -> Result<(), String> {
    if peer.same_host() {
        return Ok(());
    }
    match t.reach() {
        Reach::Network => Ok(()),
        Reach::Host if policy.host_transports => Ok(()),
        Reach::Raw if policy.raw_transports => Ok(()),
        Reach::Host => Err(format!(
            "{t} needs client and server on one host, and this client is at {} (a server \
             shared with clients in other network namespaces of the host can allow it: \
             serve --allow host-transports)",
            peer.ip
        )),
        Reach::Raw => Err(format!(
            "this server does not serve {t} (raw frames on its interfaces) to clients on \
             other hosts; its operator can allow it with serve --allow raw-transports"
        )),
    }
}

/// Knobs on the server's own sockets that steer more than the measurement need the
/// operator's leave; a CPU must be one the server may run on.
fn check_knobs(setup: &SessionSetup, policy: &Policy) -> Result<(), String> {
    let k = &setup.server_knobs;
    let refused = |knob: &str, allow: &str| {
        Err(format!(
            "this server does not let clients set {knob} on its sockets; run without it, or \
             ask its operator for serve --allow {allow}"
        ))
    };
    if k.tos.is_some() && !policy.tos {
        return refused("--tos (the DSCP/ECN byte)", "tos");
    }
    if k.priority.is_some() && !policy.priority {
        return refused("--priority (SO_PRIORITY)", "priority");
    }
    if let Some(cc) = &k.congestion_control {
        if !policy.any_cc && !allowed_cc().iter().any(|a| a == cc) {
            return Err(format!(
                "this server lets clients choose only the congestion controls its kernel \
                 allows every user ({}), not {:?}; its operator can allow any with serve \
                 --allow cc",
                allowed_cc().join(" "),
                netsweep_proto::text::printable(cc)
            ));
        }
    }
    if let Some(cpu) = k.cpu {
        let cpus = crate::meter::allowed_cpus();
        if !cpus.contains(&cpu) {
            return Err(format!(
                "server side --cpu {cpu}: this server may run on CPUs {cpus:?} only"
            ));
        }
    }
    Ok(())
}

/// `net.ipv4.tcp_allowed_congestion_control`: what any user may set.
pub(super) fn allowed_cc() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_endpoint::{DataListener, Endpoint, Footprint};
    use netsweep_proto::messages::{DataEndpoint, Knobs};
    use std::io;

    /// A factory that opens nothing and declares a footprint of its own.
    struct Fake(Footprint);

    impl TransportFactory for Fake {
        fn listen(
            &self,
            _: &SessionSetup,
            _: IpAddr,
            _: IpAddr,
        ) -> io::Result<Box<dyn DataListener>> {
            Err(io::Error::other("not here"))
        }
        fn connect(
            &self,
            _: &SessionSetup,
            _: &Knobs,
            _: IpAddr,
            _: &DataEndpoint,
            _: u64,
            _: Duration,
        ) -> io::Result<Box<dyn Endpoint>> {
            Err(io::Error::other("not here"))
        }
        fn footprint(&self, _: &SessionSetup) -> Footprint {
            self.0
        }
    }

    const LOOPBACK: Peer = Peer {
        ip: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        local: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    };
    const REMOTE: Peer = Peer {
        ip: IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 2)),
        local: IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 1)),
    };

    fn setup(transport: &str, pattern: &str, max_size: u64) -> SessionSetup {
        SessionSetup {
            transport: transport.into(),
            api: "basic".into(),
            pattern: pattern.into(),
            family: "ipv4".into(),
            max_size,
            timeout_ns: 5_000_000_000,
            ..Default::default()
        }
    }

    fn plan(s: &SessionSetup, peer: Peer, policy: &Policy) -> Result<Plan, String> {
        Plan::new(
            s,
            peer,
            &ServerLimits::default(),
            policy,
            &Fake(Footprint::default()),
        )
    }

    #[test]
    fn a_default_sweep_fits_and_costs_what_its_buffers_hold() {
        let p = plan(
            &setup("tcp", "pingpong", 8 << 20),
            REMOTE,
            &Policy::default(),
        )
        .unwrap();
        // One slot of the largest message (plus a byte), a page of alignment, the overhead.
        let slot = (8 << 20) + 1;
        assert_eq!(p.cost.memory, slot + 4096 + SESSION_MEMORY);
        assert_eq!((p.cost.threads, p.flows, p.sizes.threads), (3, 1, 1));
        let bidir = plan(&setup("tcp", "bidir", 8 << 20), REMOTE, &Policy::default()).unwrap();
        assert_eq!(bidir.cost.memory, 2 * (slot + 4096) + SESSION_MEMORY);
    }

    #[test]
    fn a_batch_of_the_largest_messages_is_refused_before_anything_is_allocated() {
        let mut s = setup("tcp", "pingpong", 64 << 20);
        s.server_knobs.batch = Some(MAX_BATCH);
        let e = plan(&s, LOOPBACK, &Policy::ALL).unwrap_err();
        assert!(
            e.contains("64.0 GiB")
                && e.contains("1024 per batch call")
                && e.contains("--max-session-memory"),
            "{e}"
        );
        // Hostile numbers never wrap a cost below the limit.
        s.server_knobs.batch = Some(u32::MAX);
        s.max_size = u64::MAX;
        let limits = ServerLimits {
            max_size: u64::MAX,
            ..ServerLimits::default()
        };
        let e = Plan::new(
            &s,
            LOOPBACK,
            &limits,
            &Policy::ALL,
            &Fake(Footprint::default()),
        )
        .unwrap_err();
        assert!(e.contains("--max-session-memory"), "{e}");
    }

    #[test]
    fn flows_cost_a_buffer_per_data_thread() {
        let mut s = setup("tcp", "stream", 64 << 20);
        s.flows = 4096;
        s.threads = 256;
        let e = plan(&s, LOOPBACK, &Policy::ALL).unwrap_err();
        assert!(
            e.contains("256 data threads for 4096 flows") && e.contains("fewer --threads"),
            "{e}"
        );
        s.max_size = 128 << 10;
        s.threads = 0;
        let p = plan(&s, LOOPBACK, &Policy::ALL).unwrap();
        let threads = flows::thread_count(0, 4096, Pattern::Stream) as u64;
        assert_eq!(p.sizes.threads as u64, threads);
        assert_eq!(p.cost.threads, 2 + threads);
        assert_eq!(p.cost.fds, SESSION_FDS + 4096 + threads);
        // A stream's receiving threads hold no send buffer; pingpong's reply.
        assert_eq!(
            p.cost.memory,
            threads * ((128 << 10) + 64 * 1024) + SESSION_MEMORY
        );
    }

    #[test]
    fn a_shared_memory_ring_counts_against_the_session() {
        let s = setup("shm", "stream", 1 << 20);
        let fake = Fake(Footprint {
            memory: 0,
            tmpfs: 2 << 30,
        });
        let e = Plan::new(&s, LOOPBACK, &ServerLimits::default(), &Policy::ALL, &fake).unwrap_err();
        assert!(e.contains("2.0 GiB of shared memory"), "{e}");
    }

    #[test]
    fn one_host_and_raw_transports_are_for_clients_of_this_host_unless_allowed() {
        let none = Policy::default();
        for t in ["unix-stream", "shm"] {
            assert!(
                plan(&setup(t, "stream", 1024), LOOPBACK, &none).is_ok(),
                "{t}"
            );
            let e = plan(&setup(t, "stream", 1024), REMOTE, &none).unwrap_err();
            assert!(e.contains("--allow host-transports"), "{e}");
            let host = Policy {
                host_transports: true,
                ..none
            };
            assert!(
                plan(&setup(t, "stream", 1024), REMOTE, &host).is_ok(),
                "{t}"
            );
        }
        let e = plan(&setup("packet", "stream", 1024), REMOTE, &none).unwrap_err();
        assert!(e.contains("--allow raw-transports"), "{e}");
        let raw = Policy {
            raw_transports: true,
            ..none
        };
        assert!(plan(&setup("packet", "stream", 1024), REMOTE, &raw).is_ok());
        // The server's own address, and an IPv4-mapped loopback, are this host.
        let own = Peer {
            ip: REMOTE.local,
            ..REMOTE
        };
        assert!(own.same_host());
        let mapped = Peer {
            ip: "::ffff:127.0.0.1".parse().unwrap(),
            local: "::1".parse().unwrap(),
        };
        assert!(mapped.same_host());
        assert!(!REMOTE.same_host());
    }

    #[test]
    fn knobs_that_steer_more_than_the_measurement_need_the_operators_leave() {
        let none = Policy::default();
        let mut s = setup("tcp", "stream", 1024);
        s.server_knobs.tos = Some(0xb8);
        assert!(plan(&s, REMOTE, &none).unwrap_err().contains("--allow tos"));
        assert!(plan(&s, REMOTE, &Policy { tos: true, ..none }).is_ok());
        s.server_knobs.tos = None;
        s.server_knobs.priority = Some(6);
        assert!(plan(&s, REMOTE, &none)
            .unwrap_err()
            .contains("--allow priority"));
        s.server_knobs.priority = None;
        s.server_knobs.congestion_control = Some("no-such-cc\x1b[2J".into());
        let e = plan(&s, REMOTE, &none).unwrap_err();
        assert!(e.contains("--allow cc") && !e.contains('\x1b'), "{e}");
        assert!(plan(
            &s,
            REMOTE,
            &Policy {
                any_cc: true,
                ..none
            }
        )
        .is_ok());
        if let Some(cc) = allowed_cc().first() {
            s.server_knobs.congestion_control = Some(cc.clone());
            assert!(plan(&s, REMOTE, &none).is_ok());
        }
        s.server_knobs.congestion_control = None;
        s.server_knobs.cpu = Some(1 << 20);
        assert!(plan(&s, REMOTE, &Policy::ALL)
            .unwrap_err()
            .contains("--cpu"));
    }

    #[test]
    fn trials_are_checked_against_the_plan() {
        let p = plan(&setup("tcp", "pingpong", 0), LOOPBACK, &Policy::ALL).unwrap();
        let limits = ServerLimits::default();
        let ok = TrialSpec {
            size: 0,
            repetitions: 10,
            ..Default::default()
        };
        assert!(p.check_trial(&ok, &limits).is_ok());
        let big = TrialSpec {
            size: 100_000,
            ..ok.clone()
        };
        let e = p.check_trial(&big, &limits).unwrap_err();
        assert!(e.contains("above the session's largest message"), "{e}");
        let long = TrialSpec {
            duration_ns: 61_000_000_000,
            ..ok
        };
        assert!(p.check_trial(&long, &limits).is_err());
    }

    #[test]
    fn unknown_names_are_refused_and_quoted_harmlessly() {
        let e = plan(&setup("tcp\n\x1b[31m", "stream", 1), LOOPBACK, &Policy::ALL).unwrap_err();
        assert!(
            e.contains("does not know transport") && !e.contains('\n'),
            "{e}"
        );
        let e = plan(&setup("tcp", "flood", 1), LOOPBACK, &Policy::ALL).unwrap_err();
        assert!(e.contains("does not know pattern"), "{e}");
    }
}
