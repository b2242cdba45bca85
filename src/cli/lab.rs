//! Command-line definitions of `netsweep lab` and `netsweep scenario` (clap).

use clap::{Args, Subcommand};

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
    /// The remote shell mpirun starts its daemons with in a scenario's mpi runs (set by the
    /// scenario runner; not for direct use): runs WORDS, joined by spaces as ssh joins a remote
    /// command, with `sh -c` inside the lab namespace NETNS that mpirun names as the host.
    #[command(hide = true)]
    MpiAgent {
        /// The lab namespace (nsw-…).
        netns: String,
        /// The shell command's words.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        words: Vec<String>,
    },
    /// The path emulator of one lab link (started by `lab up` inside the link's emulator
    /// namespace; not for direct use): carries frames between two ports per CONFIG, rewriting
    /// its counters to REPORT, until SIGTERM.
    #[command(hide = true)]
    Emulate {
        /// The emulator's configuration (JSON, written by the lab).
        #[arg(long)]
        config: String,
        /// Where its counters are written (JSON, rewritten every 250 ms).
        #[arg(long)]
        report: String,
    },
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
    /// Every cell runs `repeat` times, interleaved; then the claims are evaluated and the
    /// page (page.md, figures/*.svg and *.png) is written from the results.
    Run {
        /// Scenario TOML.
        file: String,
        /// Output directory (default: netsweep-results/<timestamp>-<scenario name>).
        #[arg(short, long)]
        output: Option<String>,
        /// Exit 1 when a claim fails or is invalid (as well as when a run fails).
        #[arg(long)]
        check: bool,
    },
    /// Check a scenario file without running it: every run's arguments, every factor, every
    /// claim (one that could never fail is an error) and every figure.
    Check {
        /// Scenario TOML.
        file: String,
    },
    /// Rewrite a results directory's page, figures and verdicts from its results (after
    /// `scenario run`; the directory keeps the scenario as scenario.toml).
    Page {
        /// The directory `scenario run` wrote.
        dir: String,
        /// Exit 1 when a claim fails or is invalid.
        #[arg(long)]
        check: bool,
    },
    /// Pack a results directory's run files into one `results.jsonl` (a line per file), read
    /// it back, and remove the files: one file to commit instead of one per run. `scenario
    /// page` reads a run from its own file or else from the bundle.
    Pack {
        /// The directory `scenario run` wrote.
        dir: String,
    },
}
