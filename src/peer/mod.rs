//! Peers that are not a `netsweep serve` reached by HOST and need the binary's help: the MPI
//! world's other rank (`-t mpi`). An iperf3 server (`iperf3://HOST`) is the engine's
//! (`netsweep_engine::iperf3`), measured by the same point loop as a netsweep session.

pub mod mpi;
