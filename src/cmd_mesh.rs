//! `netsweep mesh` under `mpirun -np N`: every rank runs a server and, in the rounds of the
//! layout, measures the ranks it is paired with over the run's transport and pattern. MPI
//! only launches, synchronises (a barrier before each round) and gathers (each round's
//! results to rank 0, which rewrites the mesh file after every round: a rank that dies
//! leaves what was measured). With `--lab`, rank i stands in for the lab's i-th end host,
//! in its namespace. Needs a build with `--features mpi`.

use crate::cli::MeshArgs;
use crate::usage_error;
use netsweep_model::spec::{Family, Transport};
use std::process::ExitCode;

/// Checks the arguments, then joins the MPI world and runs the mesh.
pub fn main(a: MeshArgs) -> ExitCode {
    if a.run.host.is_some() {
        return usage_error("mesh measures between the ranks of its MPI world: drop HOST");
    }
    let spec = match crate::cmd_run::build_spec(&a.run, Family::Ipv4) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    if spec.transport == Transport::Mpi {
        return usage_error(
            "mesh runs a transport between its ranks; for MPI itself use \
             `mpirun -np 2 netsweep run -t mpi`",
        );
    }
    run(a, spec)
}

#[cfg(not(feature = "mpi"))]
fn run(_a: MeshArgs, _spec: netsweep_model::spec::RunSpec) -> ExitCode {
    usage_error(netsweep_transport::mpi::BUILD_HINT.replace("run -t mpi", "mesh"))
}

#[cfg(feature = "mpi")]
fn run(a: MeshArgs, spec: netsweep_model::spec::RunSpec) -> ExitCode {
    use netsweep_transport::mpi::world;
    let w = match world::start() {
        Ok(w) => w,
        Err(e) => return usage_error(e.replace("run -t mpi", "mesh")),
    };
    let code = ranks::run(w, &a, spec);
    world::finish();
    code
}

#[cfg(feature = "mpi")]
#[path = "mesh_ranks.rs"]
mod ranks;
