//! The `run` test binary. `netsweep run` on loopback (and a few lab checks counted exactly by nft): every transport and pattern, TLS and QUIC and their certificates, directions, background load, CRR, GSO, socket knobs, flows, rate sweeps, timelines, precision claims, and the errors a run can meet.

use netsweep_testkit::exe as common;

mod background;
mod crr;
mod directions;
mod errors;
mod flows;
mod gso;
mod knobs;
mod precision;
mod quic;
mod rate;
mod timeline;
mod tls;
mod transports;
