//! Each direction of a round trip as a point records it: its delivery rate as its receiver
//! timed it, and with `--one-way` its delay from both ends' clocks. What the run says of them
//! is in [`crate::symmetry`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Each direction of a pingpong's round trip, as its receiver timed it: a message's bytes
/// after its first receive over the time from that receive's return to the last one's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Directions {
    /// Client→server, timed by the server; `None` when too few requests took more than one
    /// receive to time it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_server: Option<DirectionRate>,
    /// Server→client, timed by the client; `None` likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_client: Option<DirectionRate>,
    /// `--one-way`: each direction's delay; `None` without it, or for messages too small to
    /// carry the stamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<OneWay>,
}

/// `--one-way`: each direction's delay from the two ends' wall clocks (true only if they
/// agree), and what the round trips say of their offset.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OneWay {
    /// Client→server: from the client's send to the server's first receive, ns.
    pub to_server_ns: Delay,
    /// Server→client: from the server's send of the echo to the client's first receive, ns.
    pub to_client_ns: Delay,
    /// Round trips stamped.
    pub messages: u64,
    /// NTP's estimate of the server's clock minus the client's, from the round trip with the
    /// least delay, ns: half the difference of its two one-way readings.
    pub clock_offset_ns: f64,
    /// How far the true offset may lie from the estimate, ns: half that round trip's delay.
    /// Round trips alone cannot tell an offset from an asymmetry smaller than twice this.
    pub clock_offset_bound_ns: f64,
}

/// A delay's least and mean value, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Delay {
    /// The least.
    pub min: f64,
    /// The mean.
    pub mean: f64,
}

/// One direction's delivery rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DirectionRate {
    /// Mbit/s (10⁶ bit/s).
    pub mbps: f64,
    /// Messages it was timed over (those that arrived in more than one receive).
    pub messages: u64,
}

impl DirectionRate {
    /// The rate of a median time per byte (femtoseconds) over `messages` messages.
    pub fn from_fs_per_byte(fs_per_byte: f64, messages: u64) -> Self {
        Self {
            mbps: 8e9 / fs_per_byte,
            messages,
        }
    }
}
