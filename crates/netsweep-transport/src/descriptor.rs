//! The transport descriptor: everything netsweep knows of one transport — its kind, size
//! limits, the apis and patterns it supports, how to probe it, and how to open its data path
//! (listen, connect, and the crr connector) — in one value declared in the transport's file.

use crate::knobs::Knob;
use netsweep_endpoint::{CrrConnector, DataListener, Endpoint, Footprint};
use netsweep_model::spec::{Api, Family, Pattern, Transport, TransportRules};
use netsweep_proto::messages::{DataEndpoint, Knobs, SessionSetup};
use socket2::Socket;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

/// Opens the server's data path for a session on a local address, its connections wrapped in
/// the api; the second address is the session's control peer, the only one a datagram data
/// path binds to.
pub type ListenFn = fn(&SessionSetup, IpAddr, IpAddr, Api) -> io::Result<Box<dyn DataListener>>;
/// What a session's data path holds on the server beyond the pattern's buffers.
pub type FootprintFn = fn(&SessionSetup) -> Footprint;

/// The [`FootprintFn`] of a transport that holds nothing beyond its sockets.
pub fn no_footprint(_: &SessionSetup) -> Footprint {
    Footprint::default()
}
/// Connects the client's data path, presents the session cookie and wraps it in the api.
pub type ConnectFn = fn(&Peer<'_>, u64, Api) -> io::Result<Box<dyn Endpoint>>;
/// Makes the client's per-transaction connector of `--pattern crr`.
pub type CrrFn = fn(&Peer<'_>) -> io::Result<Box<dyn CrrConnector>>;
/// Opens what the data path needs (a socket of the transport's kind, a shared mapping) to see
/// whether it works here; returns the socket, if the transport has one, for the api probes.
pub type ProbeFn = fn() -> Result<Option<Socket>, String>;

/// The largest message one datagram carries, over IPv4 and over IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageLimit {
    /// Over IPv4, or for a transport not addressed by IP.
    pub v4: u64,
    /// Over IPv6.
    pub v6: u64,
}

impl MessageLimit {
    /// One limit whatever the address family.
    pub const fn same(n: u64) -> Self {
        Self { v4: n, v6: n }
    }
}

/// The listen(2) backlog of connected transports' data listeners: `--flows` opens up to
/// thousands of connections in a row (the kernel caps it at `net.core.somaxconn`).
pub const BACKLOG: i32 = 1024;

/// Patterns of a connection-oriented transport: crr opens one connection per transaction.
pub const CONNECTED: &[Pattern] = &[Pattern::Pingpong, Pattern::Stream, Pattern::Crr];
/// Patterns of a transport without per-transaction connections.
pub const MESSAGES: &[Pattern] = &[Pattern::Pingpong, Pattern::Stream];
/// [`CONNECTED`], and bidir and rate: a socket both ends can send and receive on at once,
/// from two threads (tcp, mptcp, unix-stream).
pub const CONNECTED_BIDIR: &[Pattern] = &[
    Pattern::Pingpong,
    Pattern::Stream,
    Pattern::Crr,
    Pattern::Bidir,
    Pattern::Rate,
];
/// [`MESSAGES`], and bidir and rate (udp, unix-dgram).
pub const MESSAGES_BIDIR: &[Pattern] = &[
    Pattern::Pingpong,
    Pattern::Stream,
    Pattern::Bidir,
    Pattern::Rate,
];

/// What crr, bidir and rate need of a user-space stack (tls, quic) that is not built yet.
pub const USER_SPACE_UNBUILT: &[(Pattern, &str)] = &[
    (Pattern::Crr, "a handshake per transaction"),
    (
        Pattern::Bidir,
        "two threads on one connection whose state is in user space",
    ),
    (
        Pattern::Rate,
        "two threads on one connection whose state is in user space",
    ),
];

/// One transport: what it is, what it supports, and how to open it.
#[derive(Debug)]
pub struct Descriptor {
    /// The name on the command line, on the wire and in results (the model's enum).
    pub transport: Transport,
    /// The data path's address family when it is not IP; `None`: IPv4 or IPv6, as asked.
    pub family: Option<Family>,
    /// The largest message the default sweep goes up to.
    pub default_ceiling: u64,
    /// The largest message one datagram can carry, if the transport has such a limit.
    pub max_message: Option<MessageLimit>,
    /// The apis it supports, `basic` first.
    pub apis: &'static [Api],
    /// The patterns it supports ([`CONNECTED`], [`MESSAGES`], [`CONNECTED_BIDIR`] or
    /// [`MESSAGES_BIDIR`]).
    pub patterns: &'static [Pattern],
    /// The knobs that mean something on it (the others are noted as not applying).
    pub knobs: &'static [Knob],
    /// Its ends poll (spin before they sleep) rather than block in the kernel, so the default
    /// placement leaves them free instead of sharing one CPU.
    pub polls: bool,
    /// Whether it works here, and the socket the api probes use.
    pub probe: ProbeFn,
    /// The server side of the data path.
    pub listen: ListenFn,
    /// What the server side holds beyond the pattern's buffers (rings, tmpfs files).
    pub footprint: FootprintFn,
    /// The client side of the data path.
    pub connect: ConnectFn,
    /// The crr connector, for a transport whose patterns include crr.
    pub crr: Option<CrrFn>,
    /// Patterns not built for it yet, each with what it needs: refused by name as such
    /// rather than as impossible.
    pub unbuilt: &'static [(Pattern, &'static str)],
    /// Apis that carry less per message than the transport itself (QUIC's DATAGRAM frames:
    /// one packet's worth), with that largest message.
    pub api_limits: &'static [(Api, u64)],
}

/// The server's data path as the client reaches it, and what the client applies to it.
#[derive(Debug, Clone, Copy)]
pub struct Peer<'a> {
    /// The session being set up.
    pub setup: &'a SessionSetup,
    /// The client's knobs.
    pub knobs: &'a Knobs,
    /// The server's address (its control connection's).
    pub server: IpAddr,
    /// Where the server's data path listens.
    pub data: &'a DataEndpoint,
    /// Inactivity limit of every wait on the server while connecting.
    pub timeout: Duration,
}

impl Peer<'_> {
    /// The server's data socket address (IP transports).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.server, self.data.port)
    }

    /// The server's socket or shared-memory file (unix and shm transports).
    pub fn path(&self) -> io::Result<&Path> {
        self.data.path.as_deref().map(Path::new).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "the server sent no path for a unix or shm transport",
            )
        })
    }
}

impl Descriptor {
    /// The name used on the command line, on the wire and in results.
    pub fn name(&self) -> &'static str {
        self.transport.name()
    }

    /// True when message boundaries are kept and loss is counted. The flag is the model's
    /// ([`Transport::is_datagram`]): results are read by it without this crate.
    pub fn datagram(&self) -> bool {
        self.transport.is_datagram()
    }

    /// True for transports addressed by IP (host and port).
    pub fn is_ip(&self) -> bool {
        self.family.is_none()
    }

    /// The data path's family, given the one asked for IP transports.
    pub fn family(&self, ip: Family) -> Family {
        self.family.unwrap_or(ip)
    }

    /// The messages per send call (`--batch`) a run uses without the flag: a GSO
    /// super-datagram of one segment is a plain send, and an AF_XDP ring takes a batch of
    /// frames per kick, so both default to the kernel's segment limit; others send one.
    pub fn default_batch(&self, api: Api) -> Option<u32> {
        (api == Api::Gso || self.transport == Transport::Xdp)
            .then_some(crate::gso::MAX_SEGMENTS as u32)
    }

    /// The smallest message of the default sweep with `pattern`: a datagram stream's message
    /// carries netsweep's sequence header, so it starts at the header's size.
    pub fn first_size(&self, pattern: Pattern, api: Api) -> u64 {
        if netsweep_model::spec::datagrams(self.transport, api) && pattern == Pattern::Stream {
            netsweep_model::spec::DGRAM_HEADER
        } else {
            1
        }
    }

    /// Why `sizes` cannot be measured with `pattern` on this transport, if they cannot: a byte
    /// stream's round trip of 0 bytes has nothing to wait for (a datagram of 0 bytes does).
    pub fn check_sizes(&self, pattern: Pattern, sizes: &[u64]) -> Result<(), String> {
        if pattern == Pattern::Pingpong && !self.datagram() && sizes.contains(&0) {
            return Err(format!(
                "size 0 cannot make a {} round trip (no bytes to wait for): start --sizes at 1",
                self.name()
            ));
        }
        Ok(())
    }

    /// Checks that this transport supports `api` with `pattern`; the error says the fix.
    pub fn check(&self, api: Api, pattern: Pattern) -> Result<(), String> {
        if api == Api::Datagram && !self.apis.contains(&api) {
            return Err(format!(
                "{} does not support --api datagram: it is QUIC's DATAGRAM frames (RFC 9221): \
                 use -t quic --api datagram (udp and unix-dgram send datagrams with --api basic)",
                self.name()
            ));
        }
        if !self.apis.contains(&api) {
            return Err(format!(
                "{} does not support --api {}{}: it supports {}",
                self.name(),
                api.name(),
                why_not(self.transport, api).map_or(String::new(), |w| format!(" ({w})")),
                self.api_names()
            ));
        }
        if let Some((_, why)) = self.unbuilt.iter().find(|(p, _)| *p == pattern) {
            let built: Vec<&str> = self.patterns.iter().map(|p| p.name()).collect();
            return Err(format!(
                "--pattern {pattern} is not built for {} yet (it needs {why}): {} {} built; \
                 for {pattern} use -t tcp",
                self.name(),
                built.join(" and "),
                if built.len() == 1 { "is" } else { "are" }
            ));
        }
        if !self.patterns.contains(&pattern) {
            // Only crr and bidir are ever missing.
            let needs = match pattern {
                Pattern::Bidir | Pattern::Rate => "a socket transport both ends send on at once (tcp, mptcp, unix-stream, udp, unix-dgram)",
                _ => "a connection-oriented transport (tcp, mptcp, unix-stream)",
            };
            return Err(format!(
                "--pattern {pattern} needs {needs}, not {}",
                self.name()
            ));
        }
        if pattern == Pattern::Bidir && api != Api::Basic {
            return Err(
                "--pattern bidir uses --api basic (a sending and a receiving thread share the socket)"
                    .into(),
            );
        }
        if pattern == Pattern::Rate && api != Api::Basic {
            return Err(
                "--pattern rate uses --api basic (a sending and a receiving thread share the socket)"
                    .into(),
            );
        }
        if pattern == Pattern::Crr && api != Api::Basic {
            return Err("--pattern crr uses --api basic (one connection per transaction)".into());
        }
        if api == Api::Gso && pattern != Pattern::Stream {
            return Err(format!(
                "--api gso batches the datagrams of a stream into super-datagrams: use \
                 --pattern stream, or --api basic (or mmsg) for {pattern}"
            ));
        }
        if api == Api::Splice && pattern != Pattern::Stream {
            return Err(format!(
                "--api splice applies to the receiver of a stream (socket → pipe → /dev/null): \
                 use --pattern stream, or --api basic for {pattern}"
            ));
        }
        Ok(())
    }

    /// The supported apis' names, comma-separated.
    pub fn api_names(&self) -> String {
        self.apis
            .iter()
            .map(|a| a.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The largest message a single datagram can carry, if there is such a limit.
    pub fn max_message(&self, ipv6: bool) -> Option<u64> {
        self.max_message.map(|m| if ipv6 { m.v6 } else { m.v4 })
    }

    /// [`max_message`](Self::max_message) over `api`: less where the api carries less
    /// ([`api_limits`](Self::api_limits)).
    pub fn max_message_over(&self, api: Api, ipv6: bool) -> Option<u64> {
        match self.api_limits.iter().find(|(a, _)| *a == api) {
            Some(&(_, n)) => Some(n),
            None => self.max_message(ipv6),
        }
    }
}

impl TransportRules for Descriptor {
    fn check(&self, api: Api, pattern: Pattern) -> Result<(), String> {
        Descriptor::check(self, api, pattern)
    }
    fn max_message(&self, api: Api, ipv6: bool) -> Option<u64> {
        self.max_message_over(api, ipv6)
    }
}

/// Why a transport leaves out an api a sibling has, where the kernel is the reason (shown by
/// `netsweep list` and in the refusal of `--api`).
pub fn why_not(t: Transport, api: Api) -> Option<&'static str> {
    match (t, api) {
        (Transport::Udplite, Api::Gso) => Some(
            "the kernel refuses segmentation offload on UDP-Lite: sendmsg with UDP_SEGMENT \
             fails with EIO; use -t udp --api gso",
        ),
        _ => None,
    }
}

/// An error of kind `Unsupported`, for a combination this build does not have.
pub fn unsupported(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, msg)
}

/// The probe of a socket transport: opens `open()` and explains a refusal as
/// "cannot open a `t` socket".
pub fn probe_socket(
    t: Transport,
    open: impl FnOnce() -> io::Result<Socket>,
) -> Result<Option<Socket>, String> {
    open()
        .map(Some)
        .map_err(|e| format!("cannot open a {t} socket: {e}"))
}
