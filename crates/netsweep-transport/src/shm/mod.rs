//! The `shm` transport: two endpoints on one host exchanging bytes through a shared-memory
//! file, one single-producer/single-consumer byte ring per direction. No kernel is on the
//! data path: each message is copied into the ring by the sender and out of it by the
//! receiver (two memcpys), so this is the in-host copy ceiling that network stacks are
//! compared against (NetPIPE's memcpy module).
//!
//! The server creates `/dev/shm/netsweep-shm-<pid>-<random>` (mode 0600; the temporary
//! directory where there is no /dev/shm) and names it in `DataEndpoint.path`; the client
//! maps it, writes the session cookie and its pid into the header and waits for the
//! server's verdict; the server unlinks the file once the client is bound. Ring capacity is
//! the server's `--sndbuf` rounded up to a power of two (256 KiB by default) for both
//! directions.
//!
//! Semantics are a byte stream (`is_datagram` false, message boundaries not kept): a send
//! copies what fits and may return less, so messages larger than the ring are streamed
//! through it in pieces; a send publishes every 64 KiB so the receiver copies out while the
//! sender copies in. Head and tail counters sit on their own cache lines. A waiting side
//! spins for 2 µs, then spins with sched_yield (so a peer sharing its CPU can run) up to
//! 50 µs, then sleeps on a futex in slices of at most 100 ms,
//! so receive timeouts hold, and a peer is noticed gone either by the flag its endpoint
//! sets when dropped (its futex wake ends any wait at once) or, if its process died
//! without dropping, by its pid no longer existing (checked after each slice).
//!
//! The other process is not trusted: every position it writes is checked before use (a
//! consumer position between the last one seen and the producer's; a producer position at
//! most a ring ahead of the consumer's), and one out of range is an error, never a copy
//! outside the ring. A side going to sleep sets its `waiting` flag, then a SeqCst fence,
//! then re-checks the position; the peer stores the position (SeqCst) and then loads the
//! flag (SeqCst), so one of them always sees the other and no wake-up is lost.
//!
//! Files: this one (the descriptor, capacity, knob notes, the probe), `layout.rs` (the shared
//! file's header, futexes, the mapping), `listener.rs` (the server's file and both sides'
//! handshake), `endpoint.rs` (one side's send and receive through the rings).

mod endpoint;
mod layout;
mod listener;

pub use endpoint::ShmEndpoint;
pub use listener::{connect, ShmListener};

use crate::descriptor::{Descriptor, MESSAGES};
use crate::knobs;
use netsweep_model::spec::{Api, Family, Transport};
use netsweep_proto::messages::{Knobs, SessionSetup};
use std::io;
#[cfg(test)]
use {
    layout::*,
    netsweep_endpoint::{DataListener, Endpoint},
    std::sync::atomic::Ordering,
    std::time::Duration,
};

/// `shm`: two endpoints on one host copying through shared-memory rings.
pub static SHM: Descriptor = Descriptor {
    transport: Transport::Shm,
    family: Some(Family::Unix),
    default_ceiling: 8 << 20,
    max_message: None,
    apis: &[Api::Basic],
    patterns: MESSAGES,
    knobs: knobs::BUFFERS,
    polls: true,
    probe: || probe().map(|()| None),
    listen: |s, _, _, _| Ok(Box::new(ShmListener::open(s)?)),
    footprint,
    connect: |p, cookie, _| connect(p.path()?, p.knobs, cookie, p.timeout),
    crr: None,
    unbuilt: &[],
    api_limits: &[],
};

/// Ring capacity when the server's `--sndbuf` does not say: small enough to stay in the
/// caches (4 MiB rings streamed 30-40% slower here), large enough for four 64 KiB chunks.
pub const DEFAULT_CAPACITY: u64 = 256 << 10;
/// Smallest ring capacity.
pub const MIN_CAPACITY: u64 = 4096;
/// Largest ring capacity.
pub const MAX_CAPACITY: u64 = 1 << 30;

/// The ring capacity for the server's knobs.
pub fn capacity(knobs: &Knobs) -> u64 {
    knobs
        .sndbuf
        .unwrap_or(DEFAULT_CAPACITY)
        .clamp(MIN_CAPACITY, MAX_CAPACITY)
        .next_power_of_two()
}

/// The session's shared-memory file: a header page and the two rings, in tmpfs.
pub fn footprint(setup: &SessionSetup) -> netsweep_endpoint::Footprint {
    netsweep_endpoint::Footprint {
        memory: 0,
        tmpfs: layout::HEADER as u64 + 2 * capacity(&setup.server_knobs),
    }
}

/// Notes for knobs that mean nothing on shared memory.
pub(super) fn notes(knobs: &Knobs, server: bool) -> Vec<String> {
    let mut v = Vec::new();
    let mut na = |set: bool, name: &str| {
        if set {
            v.push(format!(
                "{name} does not apply to shm: no socket is on the data path"
            ));
        }
    };
    na(knobs.nodelay.is_some(), "nodelay");
    na(knobs.congestion_control.is_some(), "cc");
    na(knobs.tos.is_some(), "tos");
    na(knobs.priority.is_some(), "priority");
    na(knobs.no_check.is_some(), "no-check");
    na(knobs.busy_poll.is_some(), "busy-poll");
    na(knobs.pmtu.is_some(), "pmtu");
    na(knobs.interface.is_some(), "interface");
    if knobs.rcvbuf.is_some() {
        v.push(
            "rcvbuf does not apply to shm: both rings are sized by the server's --sndbuf".into(),
        );
    }
    if !server && knobs.sndbuf.is_some() {
        v.push(
            "the client's sndbuf does not apply to shm: both rings are sized by the server's \
             --sndbuf (use --sndbuf C,S)"
                .into(),
        );
    }
    v
}

/// Checks that a shared-memory file can be made and mapped here.
pub fn probe() -> Result<(), String> {
    let setup = SessionSetup {
        transport: "shm".into(),
        server_knobs: Knobs {
            sndbuf: Some(MIN_CAPACITY),
            ..Default::default()
        },
        timeout_ns: 1_000_000_000,
        ..Default::default()
    };
    ShmListener::open(&setup)
        .map(drop)
        .map_err(|e| format!("cannot make a shared-memory ring: {e}"))
}

/// The peer wrote something impossible into the shared header.
#[cold]
pub(super) fn corrupt(what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "the shm peer left the shared ring inconsistent ({what}): its process is not \
             netsweep or its memory is corrupt; restart both sides"
        ),
    )
}

#[cfg(test)]
mod tests;
