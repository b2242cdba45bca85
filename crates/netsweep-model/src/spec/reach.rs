//! Where a transport's two ends may be (one network, one host, one link), which decides whether
//! a server serves it to a client on another host.

use super::Transport;

/// Where a transport's two ends may be, which decides whether a server serves it to a client
/// on another host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Across any IP network (tcp, tls, udp, mptcp, udplite).
    Network,
    /// Only between processes of one host: unix sockets and shared memory (files in the
    /// server's temporary directories and tmpfs), MPI (ranks launched together).
    Host,
    /// Raw Ethernet frames on an interface the client names (packet, xdp): a link-local
    /// path that needs the server's privileges.
    Raw,
}

impl Transport {
    /// Where its two ends may be.
    pub fn reach(self) -> Reach {
        match self {
            Transport::Tcp
            | Transport::Tls
            | Transport::Quic
            | Transport::Udp
            | Transport::Mptcp
            | Transport::Udplite => Reach::Network,
            Transport::UnixStream
            | Transport::UnixDgram
            | Transport::UnixSeqpacket
            | Transport::Shm
            | Transport::Mpi => Reach::Host,
            Transport::Packet | Transport::Xdp => Reach::Raw,
        }
    }
}
