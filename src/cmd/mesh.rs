//! `netsweep mesh` under `mpirun -np N`: every rank runs a server and, in the rounds of the
//! layout, measures the ranks it is paired with over the run's transport and pattern. MPI
//! only launches, synchronises (a barrier before each round) and gathers (each round's
//! results to rank 0, which rewrites the mesh file after every round: a rank that dies
//! leaves what was measured). With `--lab`, rank i stands in for the lab's i-th end host,
//! in its namespace. Needs a build with `--features mpi`.

use crate::cli::MeshArgs;
use crate::error::{Error, Result};
use netsweep_model::spec::{Family, Transport};

#[cfg(feature = "mpi")]
mod ranks;

/// Checks the arguments, then joins the MPI world and runs the mesh.
pub fn main(a: MeshArgs) -> Result {
    if a.run.host.is_some() {
        return Err(Error::usage(
            "mesh measures between the ranks of its MPI world: drop HOST",
        ));
    }
    let spec = crate::cli::spec::build(&a.run, Family::Ipv4).map_err(Error::Usage)?;
    if spec.transport == Transport::Mpi {
        return Err(Error::usage(
            "mesh runs a transport between its ranks; for MPI itself use \
             `mpirun -np 2 netsweep run -t mpi`",
        ));
    }
    run(a, spec)
}

#[cfg(not(feature = "mpi"))]
fn run(_a: MeshArgs, _spec: netsweep_model::spec::RunSpec) -> Result {
    Err(Error::usage(
        netsweep_transport::mpi::BUILD_HINT.replace("run -t mpi", "mesh"),
    ))
}

#[cfg(feature = "mpi")]
fn run(a: MeshArgs, spec: netsweep_model::spec::RunSpec) -> Result {
    use netsweep_transport::mpi::world;
    let w = world::start().map_err(|e| Error::Usage(e.replace("run -t mpi", "mesh")))?;
    let code = ranks::run(w, &a, spec);
    world::finish();
    code
}
