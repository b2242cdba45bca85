//! What names the protocol on the wire: the magic both preambles start with, the versions
//! this build speaks, and the negotiation of two version ranges (or their mismatch).

use std::fmt;

/// The first four bytes of either side's preamble.
pub const MAGIC: [u8; 4] = *b"NSWP";
/// Oldest protocol version this build speaks.
pub const PROTOCOL_MIN: u16 = 1;
/// Newest protocol version this build speaks. 2 added `auth_challenge`/`auth_response`,
/// `SessionSetup.reverse` and the bidir pattern; 3 added `SessionSetup.flows`/`.threads`
/// (`--flows`, `--threads`) and the per-flow counters. An older peer can run everything else.
pub const PROTOCOL_MAX: u16 = 3;

/// An inclusive range of protocol versions, shown as `min..=max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VersionRange {
    /// Oldest version spoken.
    pub min: u16,
    /// Newest version spoken.
    pub max: u16,
}

impl VersionRange {
    /// The versions this build speaks: [`PROTOCOL_MIN`]`..=`[`PROTOCOL_MAX`].
    pub const SUPPORTED: VersionRange = VersionRange {
        min: PROTOCOL_MIN,
        max: PROTOCOL_MAX,
    };

    /// A range from `min` to `max`, both included.
    pub const fn new(min: u16, max: u16) -> Self {
        VersionRange { min, max }
    }

    /// Whether `version` is a real version (not 0) inside this range.
    pub fn contains(self, version: u16) -> bool {
        version != 0 && self.min <= version && version <= self.max
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.min, self.max)
    }
}

/// The client and server ranges do not overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "protocol version mismatch: client speaks {client}, server speaks {server}; upgrade the \
     older netsweep"
)]
pub struct VersionMismatch {
    /// What the client speaks.
    pub client: VersionRange,
    /// What the server speaks.
    pub server: VersionRange,
}

/// The highest version both ranges contain (never 0), or the mismatch naming both ranges.
pub fn negotiate(client: VersionRange, server: VersionRange) -> Result<u16, VersionMismatch> {
    let low = client.min.max(server.min).max(1);
    let high = client.max.min(server.max);
    if low <= high {
        Ok(high)
    } else {
        Err(VersionMismatch { client, server })
    }
}
