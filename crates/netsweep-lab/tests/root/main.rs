//! The lab crate's root tests: topologies built and read back, the kernel counters the runner trusts, the runner in namespaces, and `lab clean` after a kill. Every test holds the machine-wide lab lock.

mod common;

mod clean;
mod counters;
mod runner;
mod topologies;
