//! A lab that is up: built from a topology with rollback on failure, recorded in a state file,
//! removed by [`Lab::down`] or on drop, and queried for namespaces, addresses and interfaces.

use crate::build;
use crate::error::{LabError, Result};
use crate::layout::{Endpoint, Layout};
use crate::netns;
use crate::plan::plan;
use crate::preflight::preflight;
use crate::routing::Graph;
use crate::signals;
use crate::state;
use crate::topology::Topology;
use std::ffi::OsStr;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

/// How long processes left in a namespace get to exit after SIGTERM before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// A lab that is up. Dropping an owned lab tears it down; [`Lab::detach`] keeps it up.
#[derive(Debug)]
pub struct Lab {
    layout: Layout,
    state_file: Option<PathBuf>,
    /// Tear down on drop.
    owned: bool,
}

/// What a teardown removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Teardown {
    /// Namespaces deleted (their interfaces, qdiscs and nft tables went with them).
    pub namespaces: Vec<String>,
    /// Processes that were still running inside and were ended.
    pub processes_ended: usize,
    /// State files removed.
    pub state_files: Vec<PathBuf>,
    /// What could not be removed.
    pub errors: Vec<String>,
}

/// Removes everything `layout` describes: ends the processes inside its namespaces, deletes
/// the namespaces, removes its state file.
pub fn teardown(layout: &Layout) -> Teardown {
    let mut t = Teardown::default();
    for ns in layout.namespaces() {
        if !netns::exists(ns) {
            continue;
        }
        t.processes_ended += netns::kill_processes(ns, KILL_GRACE);
        match netns::delete(ns) {
            Ok(()) => t.namespaces.push(ns.to_string()),
            Err(e) => t.errors.push(e.to_string()),
        }
    }
    t.state_files = state::remove(&layout.run_id);
    t
}

impl Lab {
    /// Builds `topo` under `run_id`. Checks root and tools first; on any failure (or SIGINT /
    /// SIGTERM while building) removes what was built and returns the error.
    pub fn up(topo: &Topology, run_id: &str) -> Result<Lab> {
        preflight()?;
        let mut topo = topo.clone();
        crate::emulation::resolve_engines(&mut topo);
        let layout = plan(&topo, run_id)?;
        if let Some(ns) = layout.namespaces().into_iter().find(|ns| netns::exists(ns)) {
            return Err(LabError::Usage(format!(
                "a lab with run id \"{run_id}\" is already up (namespace {ns} exists): run `netsweep lab down {run_id}`, or use another run id"
            )));
        }
        // The state file comes first so that a crash mid-build still leaves a record.
        let state_file = state::write(&layout)?;
        let mut lab = Lab {
            layout,
            state_file: Some(state_file),
            owned: true,
        };
        for step in build::steps(&lab.layout) {
            let r = if signals::interrupted() {
                Err(LabError::Interrupted)
            } else {
                build::execute(&step)
            };
            if let Err(e) = r {
                let t = teardown(&lab.layout);
                if !t.errors.is_empty() {
                    eprintln!(
                        "netsweep lab: rolling back left something behind ({}); run `netsweep lab clean`",
                        t.errors.join("; ")
                    );
                }
                lab.owned = false;
                return Err(e);
            }
        }
        Ok(lab)
    }

    /// The lab recorded under `run_id` by another process (for `lab show`, `lab exec`,
    /// `lab down`). Dropping it leaves the lab up; call [`Lab::down`] to remove it.
    pub fn attach(run_id: &str) -> Result<Lab> {
        crate::names::check_run_id(run_id).map_err(LabError::Usage)?;
        let path = state::find(run_id).ok_or_else(|| {
            LabError::Usage(format!(
                "no lab with run id \"{run_id}\" is up (no state file in {} or {}): `netsweep lab show` lists the labs",
                state::RUN_DIR,
                state::TMP_DIR
            ))
        })?;
        let layout = state::read(&path)?;
        Ok(Lab {
            layout,
            state_file: Some(path),
            owned: false,
        })
    }

    /// Wraps a layout read from a state file or `lab.json` (not owned: drop leaves it up).
    pub fn from_layout(layout: Layout) -> Lab {
        Lab {
            state_file: state::find(&layout.run_id),
            layout,
            owned: false,
        }
    }

    /// Everything that was built.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.layout.run_id
    }

    /// The state file recording this lab.
    pub fn state_file(&self) -> Option<&Path> {
        self.state_file.as_deref()
    }

    /// The multi-line description `lab up` and `lab show` print.
    pub fn describe(&self) -> String {
        self.layout.to_string()
    }

    /// Tears the lab down now. Errors if something could not be removed (the message lists
    /// it and suggests `netsweep lab clean`).
    pub fn down(mut self) -> Result<Teardown> {
        self.owned = false;
        let t = teardown(&self.layout);
        if t.errors.is_empty() {
            Ok(t)
        } else {
            Err(LabError::Usage(format!(
                "the lab was not fully removed: {}; run `netsweep lab clean`",
                t.errors.join("; ")
            )))
        }
    }

    /// Leaves the lab up after this value (and this process) is gone; `lab down` or
    /// `lab clean` removes it later. Returns the layout.
    pub fn detach(mut self) -> Layout {
        self.owned = false;
        self.layout.clone()
    }

    fn unknown_host(&self, host: &str) -> LabError {
        let hosts: Vec<String> = self
            .layout
            .hosts
            .iter()
            .map(|h| format!("\"{}\"", h.name))
            .collect();
        LabError::Usage(format!(
            "unknown host \"{host}\": this lab's hosts are {}",
            hosts.join(", ")
        ))
    }

    /// The namespace of `host`.
    pub fn netns(&self, host: &str) -> Result<&str> {
        self.layout
            .host(host)
            .map(|h| h.netns.as_str())
            .ok_or_else(|| self.unknown_host(host))
    }

    /// The host names.
    pub fn hosts(&self) -> Vec<&str> {
        self.layout.hosts.iter().map(|h| h.name.as_str()).collect()
    }

    /// `host`'s end of the link or tunnel called `name`.
    pub fn endpoint(&self, host: &str, name: &str) -> Result<&Endpoint> {
        self.netns(host)?;
        let end = match (self.layout.link(name), self.layout.tunnel(name)) {
            (Some(l), _) => l.end(host),
            (None, Some(t)) => t.end(host),
            (None, None) => {
                let names: Vec<String> = self
                    .layout
                    .links
                    .iter()
                    .map(|l| format!("\"{}\"", l.name))
                    .chain(
                        self.layout
                            .tunnels
                            .iter()
                            .map(|t| format!("\"{}\"", t.name)),
                    )
                    .collect();
                return Err(LabError::Usage(format!(
                    "no link or tunnel called \"{name}\": this lab has {}",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
        };
        end.ok_or_else(|| {
            LabError::Usage(format!(
                "host \"{host}\" is not on \"{name}\": pick a link or tunnel that reaches it"
            ))
        })
    }

    /// `host`'s IPv4 address on the link or tunnel `name`.
    pub fn address(&self, host: &str, name: &str) -> Result<Ipv4Addr> {
        Ok(self.endpoint(host, name)?.addr)
    }

    /// `host`'s IPv6 address on the link or tunnel `name` (lab built with `ipv6 = true`).
    pub fn address6(&self, host: &str, name: &str) -> Result<Ipv6Addr> {
        self.endpoint(host, name)?.addr6.ok_or_else(|| {
            LabError::Usage(
                "this lab has no IPv6 addresses: set `ipv6 = true` in the topology".into(),
            )
        })
    }

    /// `host`'s interface name on the link or tunnel `name`.
    pub fn interface(&self, host: &str, name: &str) -> Result<&str> {
        Ok(self.endpoint(host, name)?.iface.as_str())
    }

    /// The address of `to` that `from` reaches over the shortest path (through routers only):
    /// `to`'s address on the last link of that path.
    pub fn address_for(&self, from: &str, to: &str) -> Result<Ipv4Addr> {
        let hosts = &self.layout.hosts;
        let idx = |h: &str| hosts.iter().position(|x| x.name == h);
        let f = idx(from).ok_or_else(|| self.unknown_host(from))?;
        let t = idx(to).ok_or_else(|| self.unknown_host(to))?;
        if f == t {
            return Err(LabError::Usage(format!(
                "\"{from}\" and \"{to}\" are the same host: pick two different hosts"
            )));
        }
        let g = Graph {
            routers: hosts.iter().map(|h| h.router).collect(),
            links: self
                .layout
                .links
                .iter()
                .map(|l| {
                    (
                        idx(&l.a.host).unwrap_or(usize::MAX),
                        idx(&l.b.host).unwrap_or(usize::MAX),
                    )
                })
                .collect(),
        };
        let hops = g.shortest_path(f, t).ok_or_else(|| {
            LabError::Usage(format!(
                "\"{to}\" cannot be reached from \"{from}\": join them with a link, or through hosts with `router = true`"
            ))
        })?;
        let last = hops.last().map(|h| h.link).unwrap_or(0);
        self.layout.links[last]
            .end(to)
            .map(|e| e.addr)
            .ok_or_else(|| LabError::Usage(format!("\"{to}\" has no address on its path")))
    }

    /// A command that runs `argv` inside `host`'s namespace (`ip netns exec`), with inherited
    /// standard streams; the caller may redirect them.
    pub fn command<S: AsRef<OsStr>>(&self, host: &str, argv: &[S]) -> Result<Command> {
        let ns = self.netns(host)?;
        if argv.is_empty() {
            return Err(LabError::Usage(
                "no command given: write the command after `--`, e.g. `netsweep lab exec client -- ip addr`".into(),
            ));
        }
        let mut c = crate::cmd::command("ip");
        c.arg("netns").arg("exec").arg(ns).args(argv);
        Ok(c)
    }

    /// Runs `argv` inside `host`'s namespace and waits for it (no timeout: it is the user's
    /// command, as in `lab exec`).
    pub fn exec<S: AsRef<OsStr>>(&self, host: &str, argv: &[S]) -> Result<ExitStatus> {
        let mut c = self.command(host, argv)?;
        c.status()
            .map_err(|e| LabError::io(format!("running a command in {host}"), e))
    }

    /// Runs `f` on a thread inside `host`'s namespace (see [`netns::in_netns`]).
    pub fn in_host<T, F>(&self, host: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        netns::in_netns(self.netns(host)?, f)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.owned {
            let t = teardown(&self.layout);
            if !t.errors.is_empty() {
                eprintln!(
                    "netsweep lab {}: teardown left something behind ({}); run `netsweep lab clean`",
                    self.layout.run_id,
                    t.errors.join("; ")
                );
            }
        }
    }
}
