//! The `mpi` transport: MPI point-to-point messages between ranks 0 and 1 of `mpirun -np 2`
//! (Open MPI, through the `mpi` crate), what NetPIPE's MPI module and the OSU
//! micro-benchmarks measure: the cost of a message-passing layer beside the stacks under it.
//!
//! Only a build with `--features mpi` has it; without the feature its probe says how to get
//! it. Under `mpirun`, rank 1 is the server and rank 0 the client: `world.rs` initialises
//! MPI, checks the world and carries the control connection's address and a fresh session
//! key from rank 1 to rank 0 (no host argument). The data path (`endpoint.rs`) is one message
//! per `send`/`recv`: MPI_Isend then MPI_Test until done (every 64th message MPI_Issend, so a
//! sender runs at most a window of 64 messages ahead of its receiver, as osu_bw's window
//! does), and a posted MPI_Irecv polled with MPI_Test against the receive timeout — every
//! wait is bounded. The results record the MPI library and what the user forced to carry the bytes
//! (`OMPI_MCA_btl`/`OMPI_MCA_pml`, set by `mpirun --mca`), and whether both ranks share a host.

#[cfg(feature = "mpi")]
mod endpoint;
#[cfg(feature = "mpi")]
pub mod world;

use crate::descriptor::{unsupported, Descriptor, MESSAGES};
use netsweep_model::spec::{Api, Family, Transport};

/// `mpi`: MPI messages between ranks 0 and 1 of one MPI world.
pub static MPI: Descriptor = Descriptor {
    transport: Transport::Mpi,
    family: Some(Family::Mpi),
    default_ceiling: 8 << 20,
    max_message: None,
    apis: &[Api::Basic],
    patterns: MESSAGES,
    knobs: &[],
    polls: true,
    probe,
    listen: |_, _, _, _| listen(),
    footprint: crate::descriptor::no_footprint,
    connect: |p, cookie, _| connect(cookie, p.timeout),
    crr: None,
    unbuilt: &[],
    api_limits: &[],
};

/// What to do to get the transport, when this build lacks it.
pub const BUILD_HINT: &str = "this build has no MPI: build it with `cargo build --release \
     --features mpi` (needs Open MPI: apt-get install openmpi-bin libopenmpi-dev libclang-dev) \
     and run `mpirun -np 2 netsweep run -t mpi`";

#[cfg(not(feature = "mpi"))]
fn probe() -> Result<Option<socket2::Socket>, String> {
    Err(BUILD_HINT.into())
}

#[cfg(not(feature = "mpi"))]
fn listen() -> std::io::Result<Box<dyn netsweep_endpoint::DataListener>> {
    Err(unsupported(BUILD_HINT.into()))
}

#[cfg(not(feature = "mpi"))]
fn connect(
    _cookie: u64,
    _timeout: std::time::Duration,
) -> std::io::Result<Box<dyn netsweep_endpoint::Endpoint>> {
    Err(unsupported(BUILD_HINT.into()))
}

#[cfg(feature = "mpi")]
fn probe() -> Result<Option<socket2::Socket>, String> {
    world::current()
        .map(|_| None)
        .ok_or_else(|| world::NOT_STARTED.to_string())
}

#[cfg(feature = "mpi")]
fn listen() -> std::io::Result<Box<dyn netsweep_endpoint::DataListener>> {
    let w = world::current().ok_or_else(|| unsupported(world::NOT_STARTED.into()))?;
    Ok(Box::new(endpoint::MpiListener::new(w)))
}

#[cfg(feature = "mpi")]
fn connect(
    cookie: u64,
    timeout: std::time::Duration,
) -> std::io::Result<Box<dyn netsweep_endpoint::Endpoint>> {
    let w = world::current().ok_or_else(|| unsupported(world::NOT_STARTED.into()))?;
    endpoint::connect(w, cookie, timeout)
}
