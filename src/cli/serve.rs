//! `netsweep serve`'s command line: where it listens, what a client may ask (limits, budget,
//! `--allow`), authentication, the iperf3 and responsiveness ports and the log.

use crate::cli::DEFAULT_PORT;
use clap::Args;
use netsweep_engine::auth::AuthKey;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (default: `::`, IPv4 and IPv6 clients both, as `iperf3 -s`;
    /// 0.0.0.0 where the host has no IPv6, which the startup line then says).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,

    /// Control port.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Serve only clients from these addresses: prefixes and addresses, comma-separated
    /// (198.18.0.0/15,2001:db8::/32,127.0.0.1). A connection from any other — to the control
    /// port or the iperf3 port — is closed as it is accepted and logged as refused. Default:
    /// any address (limit the exposure with --bind and a firewall, or with this).
    #[arg(long, value_name = "PREFIXES", value_parser = netsweep_engine::server::allow::AllowFrom::parse)]
    pub allow_from: Option<netsweep_engine::server::allow::AllowFrom>,

    /// Serve Prometheus metrics about the tests this server runs on http://ADDR/metrics
    /// (e.g. 127.0.0.1:9470): sessions started, finished ok or failed, running, and
    /// connections refused, per port (netsweep's and --iperf3's). They are counted whether or
    /// not --quiet is given. Anyone who reaches ADDR can read them: bind it to loopback or a
    /// management address.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// Serve one run, then exit (a client arriving meanwhile is told the server is busy).
    #[arg(long, conflicts_with = "max_sessions")]
    pub once: bool,

    /// Most runs served at once (default: 4 per CPU; the startup line says how many); a
    /// client beyond the limit is refused with a message naming it (and exits 1). Each run is
    /// an isolated session with its own threads and buffers. Why 4 per CPU: a session's data
    /// thread keeps a CPU busy only during its trials, so a few sessions per CPU share the
    /// host, while the bound caps threads and buffer memory. Sessions whose trials overlap
    /// share CPUs and measure each other: for clean figures, run clients one at a time or
    /// give each its own --cpu.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions: Option<u32>,

    /// Most runs from one client address at once (default 4): one address cannot take every
    /// slot. A client beyond it is refused with a message naming the limit.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..),
          conflicts_with = "once")]
    pub max_sessions_per_ip: Option<u32>,

    /// Largest message size a client may ask for, e.g. 1M (default 64M): each session
    /// allocates buffers of about this size. Beyond it a run is refused, naming the limit.
    #[arg(long, value_name = "SIZE", value_parser = crate::cli::parse::size)]
    pub max_size: Option<u64>,

    /// Longest a session may last, e.g. 10m (default 1h; a bare number is seconds). Checked
    /// between trials: a longer run ends with a message naming the limit, its points kept.
    #[arg(long, value_name = "TIME", value_parser = crate::cli::parse::duration)]
    pub max_duration: Option<Duration>,

    /// Most data connections one session may open with `--flows` (default 4096, the most
    /// a client can ask): each costs a socket and its buffers. Beyond it a run is refused,
    /// naming the limit.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_flows: Option<u32>,

    /// Most traffic one session may move through this server, e.g. 100mbit (bits/s, tc units:
    /// kbit, mbit, gbit; kbps, mbps… are bytes/s). Measured on the server after every trial,
    /// both directions counted: a session that went faster ends with a message naming the
    /// limit, its points kept. Off by default.
    #[arg(long, value_name = "RATE", value_parser = crate::cli::parse_rate)]
    pub max_rate: Option<u64>,

    /// Most memory all sessions together may hold, e.g. 4G (default: half of what this
    /// process may have: the least of the host's memory, its cgroup's memory.max and its
    /// address-space limit after thread stacks). Every session's worst case — its message
    /// buffers (the largest message × --batch, bidir's second buffer, a buffer per data
    /// thread with --flows), its transport's rings and shared-memory files — is computed from
    /// its hello and reserved before it is admitted; a client beyond is told the server is
    /// busy, naming the limit. The startup line prints the budget.
    #[arg(long, value_name = "SIZE", value_parser = crate::cli::parse::size)]
    pub max_memory: Option<u64>,

    /// Most memory one session may hold, e.g. 256M (default 1G, or a quarter of
    /// --max-memory if that is less). A run asking more (large sizes × --batch, many
    /// --threads) is refused, naming what it would hold and what to change.
    #[arg(long, value_name = "SIZE", value_parser = crate::cli::parse::size)]
    pub max_session_memory: Option<u64>,

    /// Most threads all sessions together may run (default 1024, or three quarters of the
    /// cgroup's pids.max): a session runs 3, or 2 plus one per data thread with --flows.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(3..))]
    pub max_threads: Option<u64>,

    /// Let clients ask for more than a plain measurement, a comma-separated list:
    /// host-transports (unix-*, shm and mpi for clients on other hosts — other network
    /// namespaces of this host included), raw-transports (packet and xdp for clients on
    /// other hosts), tos and priority (--tos, --priority on this server's sockets), cc (any
    /// congestion control, not only net.ipv4.tcp_allowed_congestion_control), host-facts
    /// (hostname, boot id, kernel, CPU, interfaces and sysctls to clients that did not
    /// authenticate; with --auth-key they always get them), or all. Refused otherwise, by
    /// name.
    #[arg(long, value_name = "LIST", value_enum, value_delimiter = ',')]
    pub allow: Vec<AllowArg>,

    /// Require clients to prove they hold the key in FILE (their `run --auth-key FILE`):
    /// a client without it gets a refusal, logged with its address, and never a session.
    /// Off by default; without it anyone who reaches the port can run measurements.
    #[arg(long, value_name = "FILE", value_parser = crate::cli::parse::auth_key)]
    pub auth_key: Option<AuthKey>,

    /// The certificate (PEM, leaf first, then any chain) that `-t tls` sessions present, with
    /// its key in --tls-key. Without them the server makes a self-signed certificate at
    /// start; either way the startup line prints its SHA-256 fingerprint for clients'
    /// `run --tls-pin`.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,

    /// Also serve unmodified iperf3 clients (`iperf3 -c HOST`) on PORT, TCP and UDP (default
    /// 5201, iperf3's): their tests — TCP or UDP, -R, --bidir, -P, -l, -b, -t/-n/-k, -O, -w,
    /// -C, -Z, --get-server-output, -J — run as sessions under the same limits, admission and
    /// budget as netsweep's own (many at once, each planned and costed first), and the log
    /// records what each moved. A refused test gets iperf3's own "server is busy"
    /// (ACCESS_DENIED) or the error code iperf3 prints for the limit (SERVER_ERROR); the log
    /// names the limit. iperf3 clients cannot prove --auth-key.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "5201",
          conflicts_with = "auth_key")]
    pub iperf3: Option<u16>,

    /// Also answer responsiveness clients (draft-ietf-ippm-responsiveness-09: `netsweep rpm`,
    /// Cloudflare's `mach`, Apple's `networkQuality -C`) on PORT (default 4043) over HTTP/2
    /// and HTTP/1.1 with TLS 1.3, presenting the --tls-cert certificate (or the self-signed one
    /// made at start): the configuration document at https://HOST:PORT/.well-known/nq, a large
    /// download (/large), a one-byte object (/small) and an upload sink (/slurp), with
    /// TCP_NOTSENT_LOWAT on every socket. A client address is one session under the same
    /// admission, --max-sessions-per-ip, budget and --allow-from as every run, holding up to
    /// 256 connections at once, each lasting at most --max-duration; a refused client gets
    /// 503 with the reason. Responsiveness clients cannot prove --auth-key, and --max-rate is
    /// not applied to them: both are refused with --rpm.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "4043",
          conflicts_with_all = ["auth_key", "max_rate"])]
    pub rpm: Option<u16>,

    /// With --iperf3: write a record of every iperf3 test (what was asked, each stream's bytes,
    /// loss, jitter and retransmits, a figure per second, the CPU, the client's own results)
    /// as JSON into this existing directory, one file per test
    /// (iperf3-<UTC time>-s<session>.json).
    #[arg(long, value_name = "DIR", requires = "iperf3")]
    pub iperf3_results: Option<std::path::PathBuf>,

    /// How the log on stderr is written: text (a line per session start, end, failure and
    /// refusal, with a UTC timestamp) or json (one object per line: ts, event, session, peer,
    /// reason).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormatArg,

    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `serve --allow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AllowArg {
    /// unix-*, shm and mpi for clients on other hosts.
    HostTransports,
    /// packet and xdp for clients on other hosts.
    RawTransports,
    /// --tos on the server's sockets.
    Tos,
    /// --priority on the server's sockets.
    Priority,
    /// Any congestion control the kernel has.
    Cc,
    /// The host's facts to clients that did not authenticate.
    HostFacts,
    /// All of the above.
    All,
}

/// `serve --log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormatArg {
    /// For people.
    Text,
    /// One JSON object per line.
    Json,
}
