//! What a `quic` endpoint's connection agreed, reported beside the socket's knobs.

use serde::{Deserialize, Serialize};

/// The QUIC connection a `quic` endpoint got: the stack and version, its TLS, the packet
/// size it reached, and the windows and congestion controller it ran with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct QuicGranted {
    /// The QUIC version agreed (`QUIC v1 (RFC 9000)`).
    pub version: String,
    /// The implementation driving it, in this process (`quinn-proto 0.11`).
    pub stack: String,
    /// The TLS that keyed the connection's packet protection (quinn-proto does not expose
    /// the suite and group a handshake agreed).
    pub tls: String,
    /// The application protocol (ALPN) agreed.
    pub alpn: String,
    /// The SHA-256 fingerprint of the server's certificate (as `AB:CD:…`), as this end saw
    /// it in the handshake.
    pub certificate: String,
    /// The congestion controller sending on this end (`cubic`).
    pub congestion_control: String,
    /// The largest UDP payload this end's packets filled when its knobs were read (after
    /// the handshake), bytes: 1200 at the start, more once path-MTU discovery has probed.
    pub udp_payload: u16,
    /// How the path's packet size is found (discovery on or off, and its ceiling).
    pub mtu_discovery: String,
    /// How datagrams cross the kernel: several per `sendmsg` (GSO) or one, and whether
    /// receives are coalesced (GRO).
    pub segmentation_offload: String,
    /// How the messages travel: the streams used.
    pub streams: String,
    /// Bytes one stream may have in flight toward this end before it grants more (its
    /// receive window).
    pub stream_window: u64,
    /// Bytes this end buffers for sending, unacknowledged included (its send window).
    pub send_window: u64,
    /// Packets this end had declared lost when its knobs were read.
    pub lost_packets: u64,
}
