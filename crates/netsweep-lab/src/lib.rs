//! netsweep-lab: reproducible testbeds in network namespaces. A TOML topology becomes
//! namespaces, veth links, routers, VXLAN tunnels, tbf/htb shapers and nft loss rules, all named
//! `nsw-…` and removed afterwards; scenario files run netsweep across them.
//!
//! ```no_run
//! use netsweep_lab::{Lab, Scenario};
//! let topo = Scenario::load("scenarios/two-hosts.toml".as_ref())?.topology;
//! let lab = Lab::up(&topo, "demo")?;          // needs root
//! println!("{}", lab.describe());
//! let addr = lab.address_for("client", "server")?;
//! lab.exec("client", &["ping", "-c", "1", &addr.to_string()])?;
//! lab.down()?;                                // or drop it
//! # Ok::<(), netsweep_lab::LabError>(())
//! ```

#![warn(missing_docs)]

pub mod addressing;
mod build;
mod children;
pub mod clean;
mod clients;
pub mod cmd;
mod command;
pub mod counters;
mod describe;
pub mod emulation;
pub mod error;
mod expand;
mod experiment;
mod factors;
pub mod lab;
pub mod layout;
pub mod mpi_launch;
pub mod names;
pub mod netns;
mod nftables;
mod parse;
pub mod plan;
pub mod preflight;
pub mod rate;
mod raw;
pub mod routing;
mod run_outcome;
pub mod runner;
pub mod scenario;
pub mod shaping;
pub mod signals;
pub mod state;
mod tomlparse;
pub mod topology;
mod validate;

pub use clean::{clean, CleanReport};
pub use counters::{ClassStats, LossCount};
pub use emulation::{Emulation, Engine};
pub use error::{LabError, Result, SpecError};
pub use lab::{Lab, Teardown};
pub use layout::Layout;
pub use names::generate_run_id;
pub use preflight::preflight;
pub use rate::Rate;
pub use runner::{
    run_scenario, run_scenario_with, Progress, RunOptions, ScenarioOutcome, ScenarioRunOutcome,
    ScenarioRunStatus,
};
pub use scenario::{Compare, RunCommand, Scenario, ScenarioRun, RPM_PORT};
pub use topology::Topology;

/// Every lab recorded in a state file (labs that are up, or were left by a crash), with the
/// state file's path.
pub fn list_labs() -> Vec<(std::path::PathBuf, Result<Layout>)> {
    state::list()
}
