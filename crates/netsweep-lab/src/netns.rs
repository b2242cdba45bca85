//! Working inside a named network namespace from this process: a thread that `setns()`s into
//! it (sockets it creates stay in that namespace), sysctls, and the processes living there.

use crate::cmd;
use crate::error::{LabError, Result};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where `ip netns` keeps its namespaces.
pub const NETNS_DIR: &str = "/var/run/netns";

/// The bind-mount file of namespace `ns`.
pub fn netns_path(ns: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(ns)
}

/// Runs `f` on a new thread that has joined namespace `ns`, and returns its result. Sockets
/// opened inside `f` belong to `ns` and may be used from any thread afterwards.
pub fn in_netns<T, F>(ns: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let name = ns.to_string();
    let handle = std::thread::Builder::new()
        .name(format!("netns {ns}"))
        .spawn(move || -> Result<T> {
            enter(&name)?;
            Ok(f())
        })
        .map_err(|e| LabError::io("starting a namespace thread", e))?;
    handle
        .join()
        .map_err(|_| LabError::Usage(format!("the code run in namespace {ns} panicked")))?
}

/// Moves the calling thread into namespace `ns` for good: sockets it opens from now on, and
/// threads it starts, belong to `ns` (a `netsweep mesh` rank standing in for a lab host).
pub fn enter(ns: &str) -> Result<()> {
    let path = netns_path(ns);
    let file = File::open(&path).map_err(|e| {
        LabError::Usage(format!(
            "cannot open namespace {}: {e}: is the lab up? (`ip netns list`)",
            path.display()
        ))
    })?;
    // SAFETY: setns on a valid, open namespace fd affects only the calling thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(LabError::io(
            format!("entering namespace {ns} (needs root)"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Writes a sysctl (e.g. `net/ipv4/ip_forward`) inside namespace `ns`.
pub fn write_sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{key}");
    let v = value.to_string();
    let p = path.clone();
    in_netns(ns, move || std::fs::write(&p, v))?
        .map_err(|e| LabError::io(format!("setting {path} in {ns}"), e))
}

/// Reads a sysctl inside namespace `ns`.
pub fn read_sysctl(ns: &str, key: &str) -> Result<String> {
    let path = format!("/proc/sys/{key}");
    let p = path.clone();
    in_netns(ns, move || std::fs::read_to_string(&p))?
        .map(|s| s.trim().to_string())
        .map_err(|e| LabError::io(format!("reading {path} in {ns}"), e))
}

/// The names of all namespaces `ip netns` knows.
pub fn list() -> Result<Vec<String>> {
    let out = cmd::run(
        "listing namespaces",
        "ip",
        &["netns".into(), "list".into()],
        None,
    )?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Whether namespace `ns` exists.
pub fn exists(ns: &str) -> bool {
    netns_path(ns).exists()
}

/// The processes living in namespace `ns` (never this process).
pub fn pids(ns: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    cmd::output("ip", &["netns".into(), "pids".into(), ns.into()], None)
        .map(|o| {
            o.stdout
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .filter(|p| *p != me && *p > 1)
                .collect()
        })
        .unwrap_or_default()
}

/// Ends the processes in `ns`: SIGTERM, then SIGKILL for those still alive after `grace`.
/// Returns how many were signalled.
pub fn kill_processes(ns: &str, grace: Duration) -> usize {
    let victims = pids(ns);
    for &p in &victims {
        // SAFETY: sending a signal to a pid has no memory-safety implications.
        unsafe { libc::kill(p, libc::SIGTERM) };
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && !pids(ns).is_empty() {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in pids(ns) {
        // SAFETY: as above.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    victims.len()
}

/// Deletes namespace `ns` (its interfaces go with it); a missing one is not an error.
pub fn delete(ns: &str) -> Result<()> {
    if !exists(ns) {
        return Ok(());
    }
    cmd::run(
        &format!("removing namespace {ns}"),
        "ip",
        &["netns".into(), "del".into(), ns.into()],
        None,
    )
    .map(|_| ())
}
