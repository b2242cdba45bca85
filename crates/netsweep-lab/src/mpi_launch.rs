//! A scenario run with `--transport mpi`: no `netsweep serve`; `mpirun` is started in the
//! client's namespace and places rank 0 (the client) there and rank 1 (the server) in the
//! server's, each through a daemon that `netsweep lab mpi-agent` starts in its namespace as
//! ssh would on a remote host. MPI is held to TCP over the run's one link (`pml ob1`,
//! `btl tcp,self`, both MPI's own traffic and its start-up pinned to the link's subnet), and
//! rank 1 serves the control connection on its address on that link.

use crate::error::{LabError, Result};
use crate::lab::Lab;
use crate::scenario::ScenarioRun;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

/// The environment variable that tells rank 1 where to serve the control connection; the
/// binary's mpi peer reads it by this name.
pub const CONTROL_ENV: &str = "NETSWEEP_MPI_CONTROL";

/// Whether `args` (a run's `netsweep run` arguments) choose the mpi transport.
pub fn is_mpi(args: &[String]) -> bool {
    args.iter().enumerate().any(|(i, a)| {
        a == "--transport=mpi"
            || a == "-tmpi"
            || ((a == "--transport" || a == "-t") && args.get(i + 1).is_some_and(|v| v == "mpi"))
    })
}

/// The link both ends of `run` sit on, whose server address is `server`: its subnet (what MPI
/// is pinned to). An MPI run needs its two hosts on one link, since MPI picks its own
/// interfaces and can only be told which subnet to use.
fn shared_subnet(lab: &Lab, run: &ScenarioRun, server: Ipv4Addr) -> Result<String> {
    let link = lab
        .layout()
        .links
        .iter()
        .find(|l| {
            [(&l.a, &l.b), (&l.b, &l.a)]
                .iter()
                .any(|(s, c)| s.host == run.server && s.addr == server && c.host == run.client)
        })
        .ok_or_else(|| {
            LabError::Usage(format!(
                "run \"{}\" uses --transport mpi, which needs \"{}\" and \"{}\" on one link: MPI \
                 picks its own interfaces and is pinned to that link's subnet; join them by a \
                 link and name it in `via`",
                run.name, run.client, run.server
            ))
        })?;
    Ok(link.subnet.to_string())
}

/// The command (run inside the client's namespace) that starts both ranks of `run`:
/// `mpirun … netsweep run --transport mpi … -o RESULTS --lab-meta META`.
pub(crate) fn command(
    lab: &Lab,
    run: &ScenarioRun,
    exe: &str,
    server: IpAddr,
    results: &Path,
    lab_meta: &Path,
) -> Result<Vec<String>> {
    if run.clients != 1 {
        return Err(LabError::Usage(format!(
            "run \"{}\": an mpi run is one pair of ranks; drop `clients`",
            run.name
        )));
    }
    if !run.server_args.is_empty() {
        return Err(LabError::Usage(format!(
            "run \"{}\": an mpi run has no `netsweep serve` (rank 1 serves): drop `server_args`",
            run.name
        )));
    }
    let IpAddr::V4(server4) = server else {
        return Err(LabError::Usage(format!(
            "run \"{}\": an mpi run needs an IPv4 link",
            run.name
        )));
    };
    let subnet = shared_subnet(lab, run, server4)?;
    let hosts = format!("{},{}", lab.netns(&run.client)?, lab.netns(&run.server)?);
    let agent = format!("{exe} lab mpi-agent");
    let mut argv: Vec<String> = [
        "mpirun",
        "-np",
        "2",
        "--host",
        &hosts,
        "--bind-to",
        "none",
        "--mca",
        "plm_rsh_agent",
        &agent,
        // The daemons' hwloc topology in shared memory at a guessed address: orted
        // segfaulted in hwloc_shmem_topology_write in 23 of 150 launches into two lab
        // namespaces on this host, and in none of 150 without it.
        "--mca",
        "rtc_hwloc_vmhole",
        "none",
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "btl_tcp_if_include",
        &subnet,
        "--mca",
        "oob_tcp_if_include",
        &subnet,
        "-x",
        &format!("{CONTROL_ENV}={server}"),
        exe,
        "run",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.extend(run.args.iter().cloned());
    argv.extend([
        "-o".into(),
        results.display().to_string(),
        "--lab-meta".into(),
        lab_meta.display().to_string(),
    ]);
    Ok(argv)
}

/// What `netsweep lab mpi-agent NETNS WORDS…` runs: `ip netns exec NETNS sh -c "WORDS"`, the
/// words joined by spaces as ssh joins a remote command. Only a lab namespace (`nsw-…`).
pub fn agent_command(netns: &str, words: &[String]) -> Result<std::process::Command> {
    if !netns.starts_with(crate::names::PREFIX) || !crate::names::is_simple_name(netns, 64) {
        return Err(LabError::Usage(format!(
            "\"{netns}\" is not a lab namespace ({}…): this agent is for mpirun in a lab's mpi \
             runs only",
            crate::names::PREFIX
        )));
    }
    if words.is_empty() {
        return Err(LabError::Usage(
            "no command given to run in the namespace".into(),
        ));
    }
    let mut c = crate::cmd::command("ip");
    c.args(["netns", "exec", netns, "sh", "-c", &words.join(" ")]);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn an_mpi_run_is_told_by_its_transport() {
        assert!(is_mpi(&args("-p pingpong -t mpi")));
        assert!(is_mpi(&args("--transport mpi --sizes 1")));
        assert!(is_mpi(&args("--transport=mpi")));
        assert!(!is_mpi(&args("--transport tcp --cpu 1")));
        assert!(!is_mpi(&args("--sizes mpi")));
        assert!(!is_mpi(&args("-t")));
    }

    #[test]
    fn the_agent_runs_only_in_lab_namespaces_and_joins_words_as_ssh_does() {
        assert!(agent_command("tB", &args("orted")).is_err());
        assert!(agent_command("nsw-x/../y", &args("orted")).is_err());
        assert!(agent_command("nsw-r1-server", &[]).is_err());
        let c = agent_command(
            "nsw-r1-server",
            &args("PATH=/x ; export PATH ; orted -mca a b"),
        )
        .unwrap();
        let got: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            got,
            [
                "netns",
                "exec",
                "nsw-r1-server",
                "sh",
                "-c",
                "PATH=/x ; export PATH ; orted -mca a b"
            ]
        );
    }
}
