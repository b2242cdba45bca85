//! The protocol stacks a run can measure: their names on the command line, on the wire and in
//! results, and the one transport fact the model keeps (whether message boundaries are kept).

use super::by_name;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The protocol stack under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// TCP over IPv4 or IPv6.
    Tcp,
    /// TLS 1.3 over TCP: records encrypted in user space (rustls), the TCP socket under them.
    Tls,
    /// QUIC v1 (RFC 9000) over UDP: streams, loss recovery, congestion control and TLS 1.3
    /// in user space (quinn-proto with rustls), a byte stream per connection.
    Quic,
    /// UDP over IPv4 or IPv6.
    Udp,
    /// Unix SOCK_STREAM: a byte stream between two processes on one host.
    UnixStream,
    /// Unix SOCK_DGRAM: datagrams between two socket files on one host.
    UnixDgram,
    /// Unix SOCK_SEQPACKET: message boundaries kept, reliable and ordered (never loses).
    UnixSeqpacket,
    /// Raw Ethernet frames over AF_PACKET (EtherType 0x88B5): no IP, no UDP.
    Packet,
    /// Multipath TCP (IPPROTO_MPTCP).
    Mptcp,
    /// UDP-Lite (IPPROTO_UDPLITE, RFC 3828).
    Udplite,
    /// Two endpoints on one host copying through a shared-memory ring (no kernel on the data
    /// path): the in-host memcpy ceiling, NetPIPE's memcpy module. A byte stream.
    Shm,
    /// MPI point-to-point messages between ranks 0 and 1 of `mpirun -np 2` (Open MPI through
    /// the `mpi` crate, in a build with `--features mpi`): what a message-passing layer costs,
    /// NetPIPE's MPI module. Reliable, ordered, message boundaries kept.
    Mpi,
    /// Raw Ethernet frames (EtherType 0x88B5) through an AF_XDP socket: an XDP program
    /// redirects them from the driver into user memory, past the kernel's stack (in a build
    /// with `--features xdp`).
    Xdp,
}

impl Transport {
    /// Every transport this build knows, in listing order.
    pub const ALL: [Transport; 13] = [
        Transport::Tcp,
        Transport::Tls,
        Transport::Quic,
        Transport::Udp,
        Transport::UnixStream,
        Transport::UnixDgram,
        Transport::UnixSeqpacket,
        Transport::Packet,
        Transport::Mptcp,
        Transport::Udplite,
        Transport::Shm,
        Transport::Mpi,
        Transport::Xdp,
    ];

    /// The name used on the command line, on the wire and in results.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Tls => "tls",
            Transport::Quic => "quic",
            Transport::Udp => "udp",
            Transport::UnixStream => "unix-stream",
            Transport::UnixDgram => "unix-dgram",
            Transport::UnixSeqpacket => "unix-seqpacket",
            Transport::Packet => "packet",
            Transport::Mptcp => "mptcp",
            Transport::Udplite => "udplite",
            Transport::Shm => "shm",
            Transport::Mpi => "mpi",
            Transport::Xdp => "xdp",
        }
    }

    /// Other names the command line accepts: `unix` is short for `unix-stream`, `seqpacket`
    /// for `unix-seqpacket`.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Transport::UnixStream => &["unix"],
            Transport::UnixSeqpacket => &["seqpacket"],
            Transport::Udplite => &["udp-lite"],
            Transport::Shm => &["memcpy"],
            Transport::Xdp => &["af-xdp", "af_xdp"],
            _ => &[],
        }
    }

    /// Parses a name or an alias.
    pub fn parse(s: &str) -> Option<Self> {
        by_name(&Self::ALL, s, |t| (t.name(), t.aliases()))
    }

    /// True when message boundaries are kept (and loss is possible: patterns count it).
    /// `unix-seqpacket` keeps boundaries but never loses: it is a datagram transport whose
    /// loss is always 0. The one transport fact kept in the model: results are read by it (loss
    /// counted or not) without netsweep-transport, whose descriptors hold the rest.
    pub fn is_datagram(self) -> bool {
        matches!(
            self,
            Transport::Udp
                | Transport::UnixDgram
                | Transport::UnixSeqpacket
                | Transport::Packet
                | Transport::Udplite
                | Transport::Xdp
        )
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
