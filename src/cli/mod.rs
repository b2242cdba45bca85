//! Command-line definitions (clap). Every flag documents its unit and default.

use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};
use netsweep_engine::auth::AuthKey;
use netsweep_model::background::BackgroundSpec;
use std::time::{Duration, SystemTime};
use values::{ApiArg, CompareFormat, FormatArg, LayoutArg, PatternArg, PerSide, TransportArg};

pub mod exporter;
mod lab;
pub mod parse;
mod rpm;
mod serve;
pub mod spec;
pub mod typo;
pub mod values;

pub use crate::cli::lab::{LabArgs, LabCommand, ScenarioArgs, ScenarioCommand};
pub use crate::cli::rpm::RpmArgs;
pub use crate::cli::serve::{AllowArg, LogFormatArg, ServeArgs};

/// Default TCP port of `netsweep serve`'s control connection.
pub const DEFAULT_PORT: u16 = 7200;

#[derive(Debug, Parser)]
#[command(
    name = "netsweep",
    version,
    about = "Protocol-independent network performance evaluator",
    long_about = "netsweep measures a communication path — transport, api, knobs, link — across a sweep of \
message sizes: latency with percentiles and confidence, throughput seen by sender and receiver, loss, \
reordering and CPU cost, on both ends.\n\nWith no subcommand it runs `netsweep run`: a default NetPIPE-style \
tcp pingpong sweep against an in-process server on loopback, printing the table and saving the results file.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// `netsweep [FLAGS]` is `netsweep run [FLAGS]`.
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure a path across a sweep of message sizes (the default command).
    Run(Box<RunArgs>),
    /// Serve runs from remote `netsweep run` clients.
    Serve(ServeArgs),
    /// Re-render saved results: a format on stdout, or plots (SVG/PNG) and an HTML report of one or more runs.
    Report(ReportArgs),
    /// Compare runs: per size B ÷ A of throughput (and latency) with CIs and significance.
    Compare(CompareArgs),
    /// Responsiveness under working conditions (RPM, draft-ietf-ippm-responsiveness-09)
    /// against a `netsweep serve --rpm` or any server with the draft's configuration.
    #[command(
        long_about = "Measure responsiveness under working conditions, in round trips per minute (RPM), by \
draft-ietf-ippm-responsiveness-09 over HTTP/2 with TLS. Per direction (download, then upload): \
load-generating connections are added, one an interval, until the aggregate goodput saturates \
(the standard deviation of the last 4 moving averages within 5 % of the newest); meanwhile \
foreign probes (a new connection: TCP handshake, TLS handshake and a small GET, timed apart) \
and self probes (a small GET on a load-generating connection) run, 100 a second at most; \
responsiveness is the mean of the foreign RPM (60 s over the mean of the three phases' 95 % \
trimmed means) and the loaded RPM (60 s over the self probes' trimmed mean) of the last 4 \
intervals' probes, and the test of a direction ends when it is stable too, or at --max-time \
(then marked out of time). Shown: RPM with a 95 % bootstrap interval over the window's \
probes, the loaded and idle round trips, goodput and how long each stage took; saved as JSON. \
The server: `netsweep serve --rpm` (HOST or HOST:PORT) or any https:// configuration URL \
(Apple's and Cloudflare's format). docs/rpm.md has the details."
    )]
    Rpm(RpmArgs),
    /// List transports, apis and patterns and whether each works on this host.
    List,
    /// Build, inspect and remove network-namespace testbeds (needs root).
    Lab(LabArgs),
    /// Run experiment files: a lab topology plus runs across it (needs root).
    Scenario(ScenarioArgs),
    /// Measure a cluster under `mpirun -np N`: every pair (or ring, incast, bisection), N×N
    /// matrices and heatmaps (a build with `--features mpi`).
    #[command(
        long_about = "Measure a cluster under MPI: `mpirun -np N netsweep mesh [run options]`. \
Rank i is host i; every rank runs a server and measures the ranks the layout pairs it with, \
over the run's transport and pattern (MPI only launches, synchronises and gathers). Rank 0 \
writes one results file (every pair's points, N×N latency and throughput matrices per size, \
the pairs and hosts well below the others) and an HTML page with heatmaps beside it. \
With --lab, rank i measures from the i-th non-router host of a lab (`netsweep lab up`), in its \
namespace. Needs a build with `--features mpi` (Open MPI); docs/mesh.md has the details."
    )]
    Mesh(Box<MeshArgs>),
    /// A Prometheus probe: /probe?target=HOST runs a short test, /metrics describes itself.
    #[command(
        long_about = "A Prometheus probe, used as the blackbox exporter is: /probe?target=HOST[:PORT] runs a short netsweep test against a `netsweep serve` there (target=iperf3://HOST[:PORT]: an iperf3 test against an `iperf3 -s`) and answers its OpenMetrics — throughput both ways (pattern=bidir, the default), latency percentiles (pattern=pingpong), loss (transport=udp), TCP retransmits, CPU, the test's duration and netsweep_probe_success. Parameters: target, port, transport (tcp, udp), pattern (bidir, stream, pingpong; rpm: the responsiveness test against a `serve --rpm`, with tls_pin or insecure), size, duration (100ms..--max-duration), reverse (stream), min_trials, precision; each probe is fitted to the X-Prometheus-Scrape-Timeout-Seconds header (10 s without) and, when it cannot finish as asked within it, answers netsweep_probe_success 0 with netsweep_probe_failure_info{reason}. /metrics gives the exporter's own counters. docs/prometheus.md has the Prometheus configuration and a Grafana dashboard (packaging/grafana/netsweep.json)."
    )]
    Exporter(crate::cli::exporter::ExporterArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        long_about = "Print a shell completion script, generated from this command line.\n\n\
Install it, e.g.:\n  netsweep completions bash > /etc/bash_completion.d/netsweep\n  \
netsweep completions zsh > \"${fpath[1]}/_netsweep\"\n  \
netsweep completions fish > ~/.config/fish/completions/netsweep.fish"
    )]
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write one page per subcommand into a directory.
    #[command(
        long_about = "Print the man page netsweep(1) in roff, generated from this command line; \
view it with `netsweep man | man -l -`. With --dir, write netsweep.1 and one page per subcommand \
(netsweep-run.1, netsweep-lab-up.1, ...) into that directory, e.g. /usr/local/share/man/man1."
    )]
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct MeshArgs {
    /// Who measures whom: pairs (every pair once, a round-robin of disjoint pairs, N−1
    /// rounds), ring (each rank to the next, all at once), incast (every rank to rank 0 at
    /// once) or bisection (the lower half to the upper half at once).
    #[arg(long, default_value = "pairs")]
    pub layout: LayoutArg,

    /// Stand in for a lab's hosts: rank i runs in the namespace of the lab's i-th non-router
    /// host (needs root and a lab from `netsweep lab up`).
    #[arg(long, value_name = "RUN_ID")]
    pub lab: Option<String>,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write netsweep.1 and a page per subcommand into this existing directory instead of
    /// printing netsweep.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Server to measure against, as HOST or HOST:PORT (IPv6: [ADDR]:PORT). Without it, an
    /// in-process server on loopback is used over the same control protocol. An iperf3 server:
    /// iperf3://HOST[:PORT] with -p stream (docs/iperf3.md).
    #[arg(value_name = "HOST[:PORT]")]
    pub host: Option<String>,

    /// Transport under test (tls is TLS 1.3 over TCP, records sealed in user space; quic is
    /// QUIC v1 over UDP, the whole stack in user space; unix is short for unix-stream; packet is raw Ethernet, shm a
    /// shared-memory ring, mpi MPI messages: `mpirun -np 2 netsweep run -t mpi`, no HOST, in
    /// a build with `--features mpi`). `netsweep list` shows which work here.
    #[arg(short, long, default_value = "tcp")]
    pub transport: TransportArg,

    /// Traffic pattern: pingpong (timed round trips), stream (one way, client to server — or
    /// server to client with --reverse; both ends count), crr (connect, request, response,
    /// close), bidir (both ways at once on one connection, each direction counted on its
    /// own; tcp, mptcp, unix-stream, udp, unix-dgram with --api basic) or rate (open-loop
    /// requests on a schedule at --rate: latency under load, each request's round trip from
    /// its intended send time).
    #[arg(short, long, default_value = "pingpong")]
    pub pattern: PatternArg,

    /// Reverse the stream: the server sends and the client receives (iperf3 -R). The
    /// results then record `reverse: true`, the server's rate as the sender's and the
    /// client's as the receiver's. Stream only: pingpong and crr already cross both ways.
    #[arg(short = 'R', long)]
    pub reverse: bool,

    /// Pingpong and rate: each direction's one-way delay from both ends' wall clocks (iperf2's
    /// --trip-times, irtt). True only when the clocks agree (NTP or PTP, or both ends on one
    /// host); the results also carry the clock offset the round trips allow, and the run
    /// warns when the ends are not on one host. Messages need at least 24 B (32 B on
    /// pingpong's datagrams, 44 B for rate). One flow: not with --flows.
    #[arg(long)]
    pub one_way: bool,

    /// Concurrent flows (iperf3 -P, neper -F): N data connections of the transport, all
    /// started together. stream: each flow sends for the trial time, the point's figure is
    /// the aggregate; pingpong: N request/response flows with one transaction outstanding
    /// each (neper tcp_rr), latency percentiles over all of them; rate: the offered load
    /// shared evenly, one schedule per flow (no --interval). Per-flow counts, Jain's
    /// fairness index and the start skew are recorded. tcp, mptcp, unix-stream; --api basic.
    #[arg(short = 'P', long, default_value_t = 1, value_name = "N")]
    pub flows: u32,

    /// Data threads per side for --flows (neper -T): flows beyond it share a thread through
    /// epoll; a thread with one stream flow lets its calls block (iperf2's thread per flow).
    /// Default: stream one per flow (up to 64, or the CPUs if more), pingpong and rate one
    /// per CPU; at most the flows.
    #[arg(long, default_value_t = 0, value_name = "T", hide_default_value = true)]
    pub threads: u32,

    /// How data is handed to the stack (each transport supports a subset: see `netsweep list`).
    /// gso (udp, stream): one sendmsg carries up to 64 datagrams cut by the kernel
    /// (UDP_SEGMENT), the receiver splits coalesced UDP_GRO packets; --batch defaults to 64.
    /// datagram (quic): messages as QUIC DATAGRAM frames (RFC 9221), unreliable, at most
    /// 1162 bytes, loss counted as for udp.
    #[arg(long, default_value = "basic")]
    pub api: ApiArg,

    /// Use IPv6 (the in-process server listens on ::1).
    #[arg(short = '6', long)]
    pub ipv6: bool,

    /// Message sizes: a list and/or ranges, e.g. `1,1k..8k:+1k`, `64k..8M:*2`, `59k..72k:+512`.
    /// Default: NetPIPE's perturbed exponential schedule from 1 byte to the transport's ceiling
    /// (65507 for udp, 8 MiB for stream sockets), stopping once one transfer takes over a second.
    #[arg(short, long, value_name = "SPEC")]
    pub sizes: Option<String>,

    /// Largest size of the default schedule (e.g. 64k); ignored with --sizes.
    #[arg(long, value_name = "SIZE", value_parser = crate::cli::parse::size)]
    pub max_size: Option<u64>,

    /// Perturbation of the default schedule in bytes (NetPIPE -p): sizes b−N, b, b+N around each base size.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub perturbation: u64,

    /// Target duration of one trial. TIME everywhere is a number with a unit (ns, us, ms, s,
    /// m: 40ms, 0.5s); a bare number is seconds. [default: 20ms; with -p rate, long enough
    /// for 1000 requests at the lowest offered load, 200ms to 10s]
    #[arg(long, value_name = "TIME", value_parser = crate::cli::parse::duration)]
    pub trial_time: Option<Duration>,

    /// Target half-width of the 95% confidence interval of each point's throughput (2% or 0.02).
    #[arg(long, default_value = "2%", value_name = "FRACTION", value_parser = crate::cli::parse::fraction)]
    pub precision: f64,

    /// Time budget of one point; a point that has not met --precision by then stops and is
    /// marked. [default: 300ms; with -p rate, room for --min-trials trials]
    #[arg(long, value_name = "TIME", value_parser = crate::cli::parse::duration)]
    pub max_point_time: Option<Duration>,

    /// Keep each point within --max-point-time: a stream or bidir trial the path would
    /// lengthen (its lag, its round trip) is held to what fits the point, said in the
    /// point's notes, and the point's budget is never widened for it (the stop rule still
    /// lets a point finish its second trial). For a run that must end on time (the
    /// exporter's probes use it).
    #[arg(long)]
    pub hard_point_time: bool,

    /// Begin the first point at this wall-clock time, seconds since the Unix epoch (e.g.
    /// 1796623000.25), after connecting: clients started one after another against one
    /// server measure over one window (a scenario's `clients = N` sets it). At most 300 s
    /// ahead; a client that connected after it starts at once and says how late.
    #[arg(long, value_name = "UNIX_SECONDS", value_parser = crate::cli::parse::unix_time)]
    pub start_at: Option<SystemTime>,

    /// Fewest timed trials per point.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub min_trials: u32,

    /// Most timed trials per point.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub max_trials: u32,

    /// Visit every size in N passes (1..=10): after the sweep, each further pass re-measures
    /// every size in a perturbed order with --min-trials trials, and each point's interval is
    /// widened to the spread of its passes' means, so a slow episode of the host shows in the
    /// interval instead of hiding in one point. Sweeps of sizes only (not --rates, --refine's
    /// extra sizes).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub passes: u32,

    /// After the sweep, re-measure finely where suspected dips and cliffs have their edges
    /// (a dip's measured inside is not re-measured; at most 256 extra sizes), then detect
    /// again on all points.
    #[arg(long)]
    pub refine: bool,

    /// Offered load of `-p rate`: requests per second (10k, 2500; decimal k, M, G) or a bit
    /// rate of requests (50mbit, 1gbit: requests/s = bits ÷ (8 × size)). Requests leave on
    /// this schedule whatever the replies do; latency runs from each intended send time.
    #[arg(long, value_name = "RATE", value_parser = netsweep_model::load::Rate::parse, conflicts_with = "rates")]
    pub rate: Option<netsweep_model::load::Rate>,

    /// Sweep the offered load of `-p rate` at one size (--sizes gives one): requests/s in the
    /// grammar of --sizes with decimal suffixes, e.g. 1k..64k:*2 or 5k..50k:+5k. The run
    /// reports the knee, where latency climbs and delivery stops following the offered load.
    #[arg(long, value_name = "SPEC")]
    pub rates: Option<String>,

    /// Arrival process of `-p rate`: constant (evenly spaced requests) or poisson
    /// (exponential gaps from --seed).
    #[arg(long, default_value = "constant", value_name = "constant|poisson", value_parser = crate::cli::parse::arrivals)]
    pub arrivals: netsweep_model::load::Arrivals,

    /// Seed of the poisson schedule, recorded in the results (default: from the clock).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Timeline: keep per-interval samples of this length, e.g. 100ms (at least 1ms, at
    /// most 10000 per trial), the point's timed trials end to end. -p rate: delivered rate,
    /// latency p50/p99 and loss per interval; -p stream (also -R): the sender's and the
    /// receiver's rate and, for datagrams, the loss per interval. One flow (no -P).
    #[arg(long, value_name = "TIME", value_parser = crate::cli::parse::duration)]
    pub interval: Option<Duration>,

    /// Skip the untimed warm-up/calibration trial of each point.
    #[arg(long)]
    pub no_warmup: bool,

    /// Background load, repeatable: a flow that runs during every measured trial as its own
    /// session with the same server (started before each trial, stopped after it), its bytes
    /// and rate recorded beside each point. SPEC is `stream[,KEY=VALUE]…` with keys size
    /// (default 64k, 1472 for datagrams), transport (default: the run's), priority
    /// (SO_PRIORITY on both ends, e.g. 0 or 0x10001), tos, cc (TCP congestion control on
    /// both ends: cubic fills a drop-tail queue, bbr does not), cpu (the flow's client thread),
    /// start (begin sending that long into each trial, e.g. 500ms: with --interval the
    /// timeline shows the load arrive). Examples: `-p pingpong --priority 6 --background
    /// stream,size=64k,priority=0`; `-p rate --rate 1k --interval 50ms --background
    /// stream,start=500ms`.
    #[arg(long, value_name = "SPEC", value_parser = values::background)]
    pub background: Vec<BackgroundSpec>,

    /// How long any wait for the peer may last before the run fails (a bare number is seconds).
    #[arg(long, default_value = "10s", value_name = "TIME", value_parser = crate::cli::parse::duration)]
    pub timeout: Duration,

    /// Socket send buffer (SO_SNDBUF) on both ends, e.g. 256k; `C,S` per side. The granted
    /// size is recorded.
    #[arg(long, value_name = "SIZE[,SIZE]", value_parser = values::sizes)]
    pub sndbuf: Option<PerSide<u64>>,

    /// Socket receive buffer (SO_RCVBUF) on both ends; `C,S` per side. The granted size is recorded.
    #[arg(long, value_name = "SIZE[,SIZE]", value_parser = values::sizes)]
    pub rcvbuf: Option<PerSide<u64>>,

    /// TCP_NODELAY (Nagle off) on both ends: on or off.
    #[arg(long, default_value = "on", value_name = "on|off", value_parser = crate::cli::parse::on_off, action = clap::ArgAction::Set)]
    pub nodelay: bool,

    /// Offset of message buffers from a page boundary in bytes (NetPIPE -O); `C,S` sets
    /// client and server apart. `--align` is the same as offset 0 (page-aligned, the default).
    #[arg(long, value_name = "BYTES[,BYTES]", value_parser = values::offsets)]
    pub offset: Option<PerSide<u64>>,

    /// Page-align message buffers on both ends (the default; cancels --offset).
    #[arg(long, conflicts_with = "offset")]
    pub align: bool,

    /// Messages per sendmmsg/recvmmsg call with `--api mmsg`, per super-datagram with
    /// `--api gso` (default 64; sent in calls of at most 64 segments and 64 KiB), or per ring
    /// kick with `-t xdp` (default 64) (stream pattern).
    #[arg(long, value_name = "N")]
    pub batch: Option<u32>,

    /// TCP congestion control on both ends (TCP_CONGESTION), e.g. cubic, reno, bbr; with
    /// -t quic, quinn-proto's controller: cubic (its default), newreno or bbr.
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,

    /// IP TOS byte (IP_TOS / IPV6_TCLASS), e.g. 0x10; `C,S` per side.
    #[arg(long, value_name = "TOS[,TOS]", conflicts_with = "dscp", value_parser = values::tos)]
    pub tos: Option<PerSide<u8>>,

    /// DSCP code point (TOS = DSCP << 2), e.g. 46 for EF; `C,S` per side.
    #[arg(long, value_name = "DSCP[,DSCP]", value_parser = values::dscp)]
    pub dscp: Option<PerSide<u8>>,

    /// TCP_NOTSENT_LOWAT on both ends (TCP and MPTCP), e.g. 128k: the socket accepts data
    /// only while less than this is unsent, so what waits is in the path's queues, not the
    /// sender's buffer (the responsiveness draft asks for it; a stream's receiver then ends
    /// soon after its sender). `C,S` per side. The granted value is recorded.
    #[arg(long, value_name = "SIZE[,SIZE]", value_parser = values::sizes)]
    pub notsent_lowat: Option<PerSide<u64>>,

    /// SO_MAX_PACING_RATE on both ends (TCP and MPTCP), in tc's units (e.g. 200mbit): the
    /// sender's TCP spaces its segments to at most this rate (headers included), the way
    /// `iperf3 --fq-rate` does. A paced stream measures a path below its capacity; on other
    /// transports the results note that it does not apply (only the fq qdisc paces them).
    /// `C,S` per side. The granted rate is recorded.
    #[arg(long, value_name = "RATE[,RATE]", value_parser = values::rates)]
    pub pacing_rate: Option<PerSide<u64>>,

    /// SO_PRIORITY (skb priority: selects qdisc classes); `C,S` per side. Above 6 needs CAP_NET_ADMIN.
    #[arg(long, value_name = "N[,N]", value_parser = values::u32s)]
    pub priority: Option<PerSide<u32>>,

    /// Send UDP over IPv4 with a zero checksum (SO_NO_CHECK) on both ends.
    #[arg(long)]
    pub no_check: bool,

    /// SO_BUSY_POLL in microseconds on both ends (IP transports); with `-t xdp`, how long a
    /// receive polls its AF_XDP ring before it sleeps. `C,S` per side.
    #[arg(long, value_name = "USEC[,USEC]", value_parser = values::u32s)]
    pub busy_poll: Option<PerSide<u32>>,

    /// Path MTU discovery (IP_MTU_DISCOVER): do (DF set: oversize sends fail with EMSGSIZE),
    /// dont (fragment), want (kernel default), probe.
    #[arg(long, value_name = "MODE", value_parser = PossibleValuesParser::new(["do", "dont", "want", "probe"]))]
    pub pmtu: Option<String>,

    /// Pin the data threads: `N` puts both ends on CPU N, `C,S` client on C and server on S,
    /// `free` lets the scheduler place them. Default: free, except in-process pingpong and
    /// crr runs, which put both ends on the highest CPU (placement can dominate
    /// small-message latency; see docs/methodology.md). The CPUs used are always recorded.
    #[arg(long, value_name = "CPU[,CPU]", value_parser = values::cpus)]
    pub cpu: Option<PerSide<u32>>,

    /// Draw message buffers from a pool larger than the CPU caches (NetPIPE -I), so every
    /// repetition touches cold memory; optional pool size (default 64M).
    #[arg(long, value_name = "POOL", num_args = 0..=1, default_missing_value = "64M", value_parser = crate::cli::parse::size)]
    pub invalidate_cache: Option<u64>,

    /// Network interface for the `packet` transport (default: from the route to the peer).
    #[arg(long, value_name = "IFACE")]
    pub interface: Option<String>,

    /// Output format on stdout (or in -o FILE). Default: text, or what -o's extension implies
    /// (.json, .jsonl, .csv, .out, .prom for openmetrics). Without -o every format goes to
    /// stdout: the table, csv, jsonl and npout as the points come, json and openmetrics
    /// whole at the end.
    #[arg(short, long, value_name = "FORMAT")]
    pub format: Option<FormatArg>,

    /// Write the output to FILE, replaced whole after every point (a temporary file beside
    /// it, fsynced, renamed over it: never half-written). A FIFO or character device
    /// (/dev/stdout) is written to directly, as the run goes. A failed write fails the run
    /// (exit 1): the error is printed at once, FILE keeps its last good copy and is not
    /// written again, and measuring goes on only while the saved results file is still
    /// written.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,

    /// Directory of the automatically saved results file, replaced whole after every point.
    /// A failed write fails the run (exit 1): the error is printed at once, the file keeps
    /// its last good copy, and measuring stops unless -o (or a format other than text on
    /// stdout) is still written.
    #[arg(long, default_value = "netsweep-results", value_name = "DIR")]
    pub save_dir: String,

    /// Do not save netsweep-results/<timestamp>-<transport>-<pattern>.json.
    #[arg(long)]
    pub no_save: bool,

    /// Print nothing but errors on stdout/stderr (files are still written).
    #[arg(short, long)]
    pub quiet: bool,

    /// Port of the server's control connection when HOST has none.
    #[arg(long, default_value_t = crate::cli::DEFAULT_PORT)]
    pub port: u16,

    /// A JSON file describing the testbed, recorded as `lab` in the results (used by scenarios).
    #[arg(long, value_name = "FILE")]
    pub lab_meta: Option<String>,

    /// A file holding the key the server was started with (`serve --auth-key`): both sides
    /// prove they hold it (HMAC-SHA256 challenge-response with fresh nonces; the key never
    /// crosses the wire), and the run refuses a server that cannot. At least 16 bytes; make
    /// one with `head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE`.
    #[arg(long, value_name = "FILE", value_parser = crate::cli::parse::auth_key)]
    pub auth_key: Option<AuthKey>,

    /// With -t tls or -t quic: the SHA-256 fingerprint of the server's certificate, as `netsweep serve`
    /// prints it at start (colons optional): the run refuses a server that presents any
    /// other. Without it the client accepts the certificate the server announces for the
    /// session on the control connection, which stops nothing able to rewrite that
    /// connection.
    #[arg(long, value_name = "SHA256", value_parser = netsweep_transport::tls::identity::parse_pin)]
    pub tls_pin: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Saved results files (JSON); several are overlaid in the plots and the HTML report.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,

    /// Output format (default: text, or what -o's extension implies: .json, .jsonl, .csv,
    /// .out, .prom); every format but text takes one FILE.
    #[arg(short, long)]
    pub format: Option<FormatArg>,

    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,

    /// Write a self-contained HTML report (every plot, tables, metadata, anomalies) to OUT.
    #[arg(long, value_name = "OUT")]
    pub html: Option<String>,

    /// Write every plot as SVG into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    pub svg: Option<String>,

    /// Write every plot as PNG into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    pub png: Option<String>,

    /// The legend name of each FILE, in order (repeat it, once per FILE). Without it a run
    /// is named by what differs between the runs when that is short (at most three fields,
    /// 40 characters: "tcp · sndbuf=262144"), else by its file's name.
    #[arg(long, value_name = "NAME")]
    pub label: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline results file A, then one or more files B compared against it.
    #[arg(required = true, num_args = 2.., value_name = "FILE")]
    pub files: Vec<String>,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,

    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,

    /// Write the throughput ratio plot (B ÷ A against size) as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,

    /// Write the throughput ratio plot as PNG to FILE.
    #[arg(long, value_name = "FILE")]
    pub png: Option<String>,

    /// The smallest change called a difference, in percent: a pair whose 95% interval
    /// excludes "no change" but whose change is smaller is reported the same (as criterion's
    /// noise threshold). The default, 2, is what re-runs of one command drift by on one
    /// host (docs/methodology.md, "Calibration"); 0 reports every interval that excludes 1.
    #[arg(long, value_name = "PERCENT", default_value_t = 2.0, value_parser = parse_noise)]
    pub noise: f64,

    /// The name of each FILE in the verdicts and the plot, in order (repeat it, once per
    /// FILE); without it, what differs between the runs when short, else the file's name.
    #[arg(long, value_name = "NAME")]
    pub label: Vec<String>,
}

/// `--noise`: a percentage from 0 to 50.
fn parse_noise(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage: give one such as 2 or 0.5"))?;
    if !(0.0..=50.0).contains(&v) {
        return Err(format!(
            "{s}% is outside 0–50%: give a percentage such as 2"
        ));
    }
    Ok(v)
}

/// `--max-rate`: a rate in tc's units, as bits per second (at least 1 kbit/s).
pub(crate) fn parse_rate(s: &str) -> Result<u64, String> {
    let r = netsweep_lab::Rate::parse(s)?;
    if r.bits_per_sec < 1000 {
        return Err(format!("'{s}' is below 1kbit: give a rate such as 100mbit"));
    }
    Ok(r.bits_per_sec)
}
