//! Peers that are not a `netsweep serve` reached by HOST: an unmodified iperf3 server
//! (`iperf3://HOST`) and the MPI world's other rank (`-t mpi`).

pub mod iperf3;
pub mod mpi;
