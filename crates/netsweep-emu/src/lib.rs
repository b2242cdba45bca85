//! netsweep-emu: the lab's path emulator, for kernels without netem, fq or prio.
//!
//! A path emulator sits in its own network namespace between two veth ports and carries every
//! frame from one port to the other, per direction: it timestamps the frame on arrival,
//! decides its fate — random or burst (Gilbert–Elliott) loss, duplication, a bottleneck of a
//! given rate with a drop-tail queue (FIFO, or strict priority by DSCP over N bands), a fixed
//! delay and a jitter drawn from a distribution, reordering only where asked — and releases
//! it on schedule. It counts what it received, released, dropped (by cause), duplicated and
//! reordered, and how late each release was against its schedule.
//!
//! [`path`] is the sans-IO scheduler of one direction (a mock clock in its tests); [`run`]
//! drives two of them over AF_PACKET sockets on a dedicated thread, which [`sched`] keeps
//! real-time within the kernel's budget; [`config`] is what the lab hands it; [`stats`] what it
//! reports, and [`writer`] writes it off the data path.

#![warn(missing_docs)]

pub mod config;
pub mod frame;
pub mod path;
pub mod rng;
pub mod run;
pub mod sched;
pub mod stats;
pub mod writer;

pub use config::{Aqm, Config, DirectionSpec, Jitter, JitterDist, Loss, Qdisc};
pub use stats::{Counters, Report};
