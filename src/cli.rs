//! Command-line definitions (clap). Every flag documents its unit and default.

use crate::values::{self, ApiArg, CompareFormat, FormatArg, PatternArg, PerSide, TransportArg};
use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};
use std::time::Duration;

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
    /// List transports, apis and patterns and whether each works on this host.
    List,
    /// Build, inspect and remove network-namespace testbeds (needs root).
    Lab(LabArgs),
    /// Run experiment files: a lab topology plus runs across it (needs root).
    Scenario(ScenarioArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Server to measure against, as HOST or HOST:PORT (IPv6: [ADDR]:PORT). Without it, an
    /// in-process server on loopback is used over the same control protocol.
    #[arg(value_name = "HOST[:PORT]")]
    pub host: Option<String>,

    /// Transport under test (unix is short for unix-stream; packet is raw Ethernet, shm a
    /// shared-memory ring). `netsweep list` shows which work here.
    #[arg(short, long, default_value = "tcp")]
    pub transport: TransportArg,

    /// Traffic pattern: pingpong (timed round trips), stream (one way, both ends count) or
    /// crr (connect, request, response, close).
    #[arg(short, long, default_value = "pingpong")]
    pub pattern: PatternArg,

    /// How data is handed to the stack (each transport supports a subset: see `netsweep list`).
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
    #[arg(long, value_name = "SIZE", value_parser = crate::parse::size)]
    pub max_size: Option<u64>,

    /// Perturbation of the default schedule in bytes (NetPIPE -p): sizes b−N, b, b+N around each base size.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub perturbation: u64,

    /// Target duration of one trial. TIME everywhere is a number with a unit (ns, us, ms, s,
    /// m: 40ms, 0.5s); a bare number is seconds.
    #[arg(long, default_value = "20ms", value_name = "TIME", value_parser = crate::parse::duration)]
    pub trial_time: Duration,

    /// Target half-width of the 95% confidence interval of each point's throughput (2% or 0.02).
    #[arg(long, default_value = "2%", value_name = "FRACTION", value_parser = crate::parse::fraction)]
    pub precision: f64,

    /// Time budget of one point; a point that has not met --precision by then stops and is marked.
    #[arg(long, default_value = "300ms", value_name = "TIME", value_parser = crate::parse::duration)]
    pub max_point_time: Duration,

    /// Fewest timed trials per point.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub min_trials: u32,

    /// Most timed trials per point.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub max_trials: u32,

    /// After the sweep, re-measure finely around suspected dips, cliffs and unstable bands
    /// (at most 256 extra sizes), then detect again on all points.
    #[arg(long)]
    pub refine: bool,

    /// Skip the untimed warm-up/calibration trial of each point.
    #[arg(long)]
    pub no_warmup: bool,

    /// How long any wait for the peer may last before the run fails (a bare number is seconds).
    #[arg(long, default_value = "10s", value_name = "TIME", value_parser = crate::parse::duration)]
    pub timeout: Duration,

    /// Socket send buffer (SO_SNDBUF) on both ends, e.g. 256k; `C,S` per side. The granted
    /// size is recorded.
    #[arg(long, value_name = "SIZE[,SIZE]", value_parser = values::sizes)]
    pub sndbuf: Option<PerSide<u64>>,

    /// Socket receive buffer (SO_RCVBUF) on both ends; `C,S` per side. The granted size is recorded.
    #[arg(long, value_name = "SIZE[,SIZE]", value_parser = values::sizes)]
    pub rcvbuf: Option<PerSide<u64>>,

    /// TCP_NODELAY (Nagle off) on both ends: on or off.
    #[arg(long, default_value = "on", value_name = "on|off", value_parser = crate::parse::on_off, action = clap::ArgAction::Set)]
    pub nodelay: bool,

    /// Offset of message buffers from a page boundary in bytes (NetPIPE -O); `C,S` sets
    /// client and server apart. `--align` is the same as offset 0 (page-aligned, the default).
    #[arg(long, value_name = "BYTES[,BYTES]", value_parser = values::offsets)]
    pub offset: Option<PerSide<u64>>,

    /// Page-align message buffers on both ends (the default; cancels --offset).
    #[arg(long, conflicts_with = "offset")]
    pub align: bool,

    /// Messages per sendmmsg/recvmmsg call with `--api mmsg` (stream pattern).
    #[arg(long, value_name = "N")]
    pub batch: Option<u32>,

    /// TCP congestion control on both ends (TCP_CONGESTION), e.g. cubic, reno, bbr.
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,

    /// IP TOS byte (IP_TOS / IPV6_TCLASS), e.g. 0x10; `C,S` per side.
    #[arg(long, value_name = "TOS[,TOS]", conflicts_with = "dscp", value_parser = values::tos)]
    pub tos: Option<PerSide<u8>>,

    /// DSCP code point (TOS = DSCP << 2), e.g. 46 for EF; `C,S` per side.
    #[arg(long, value_name = "DSCP[,DSCP]", value_parser = values::dscp)]
    pub dscp: Option<PerSide<u8>>,

    /// SO_PRIORITY (skb priority: selects qdisc classes); `C,S` per side. Above 6 needs CAP_NET_ADMIN.
    #[arg(long, value_name = "N[,N]", value_parser = values::u32s)]
    pub priority: Option<PerSide<u32>>,

    /// Send UDP over IPv4 with a zero checksum (SO_NO_CHECK) on both ends.
    #[arg(long)]
    pub no_check: bool,

    /// SO_BUSY_POLL in microseconds on both ends; `C,S` per side.
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
    #[arg(long, value_name = "POOL", num_args = 0..=1, default_missing_value = "64M", value_parser = crate::parse::size)]
    pub invalidate_cache: Option<u64>,

    /// Network interface for the `packet` transport (default: from the route to the peer).
    #[arg(long, value_name = "IFACE")]
    pub interface: Option<String>,

    /// Output format on stdout (or in -o FILE). Default: text, or what -o's extension implies
    /// (.json, .jsonl, .csv, .out).
    #[arg(short, long, value_name = "FORMAT")]
    pub format: Option<FormatArg>,

    /// Write the output to FILE, rewritten after every point.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,

    /// Directory of the automatically saved results file.
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
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: String,

    /// Control port.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Serve one run, then exit.
    #[arg(long)]
    pub once: bool,

    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Saved results files (JSON); several are overlaid in the plots and the HTML report.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,

    /// Output format (default: text; json, jsonl, csv and npout take one FILE).
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
}

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build the testbed a topology (or scenario) file describes and leave it up.
    Up {
        /// Topology TOML, or a scenario file (its [topology] is used).
        file: String,
        /// Run id naming the lab's objects (nsw-<id>-…); default: a fresh one.
        #[arg(long)]
        id: Option<String>,
    },
    /// Tear a lab down (the only one up, or the one with this id).
    Down {
        /// Run id (see `netsweep lab show`).
        id: Option<String>,
    },
    /// Show the labs that are up: hosts, interfaces, addresses, MTUs, shapers.
    Show,
    /// Run a command inside a lab host's namespace: `netsweep lab exec client -- ping 198.18.0.2`.
    Exec {
        /// Host name from the topology.
        host: String,
        /// Run id when several labs are up.
        #[arg(long)]
        id: Option<String>,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Remove everything named nsw-… that a crash left: namespaces, links, nft tables, state files.
    Clean,
}

#[derive(Debug, Args)]
pub struct ScenarioArgs {
    #[command(subcommand)]
    pub command: ScenarioCommand,
}

#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// Bring the lab up, run every run with `netsweep serve` in the server's namespace, save
    /// each results file and an index, and tear the lab down (also on failure and Ctrl-C).
    Run {
        /// Scenario TOML.
        file: String,
        /// Output directory (default: netsweep-results/<timestamp>-<scenario name>).
        #[arg(short, long)]
        output: Option<String>,
    },
    /// Check a scenario file without running it.
    Check {
        /// Scenario TOML.
        file: String,
    },
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
}
