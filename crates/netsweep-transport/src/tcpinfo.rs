//! TCP_INFO: retransmissions, DSACKs and what limited the sender (the kernel's chrono
//! counters) of a TCP (or MPTCP) socket, read outside timed loops.

use crate::sys;
use netsweep_endpoint::EndpointStats;
use std::os::fd::RawFd;

/// The head of linux/tcp.h's `struct tcp_info` up to `tcpi_reord_seen` (Linux 5.4+).
/// Older kernels return a shorter struct: only the fields inside the returned length count.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpInfo {
    /// TCP state (TCP_ESTABLISHED, …).
    pub state: u8,
    /// Congestion-avoidance state (open, disorder, CWR, recovery, loss).
    pub ca_state: u8,
    /// Unrecovered RTO timeouts of the segment at the head of the queue.
    pub retransmits: u8,
    /// Unanswered zero-window probes.
    pub probes: u8,
    /// RTO backoff exponent.
    pub backoff: u8,
    /// TCPI_OPT_* flags: options negotiated (timestamps, SACK, window scale, ECN).
    pub options: u8,
    /// Send (low nibble) and receive (high nibble) window scale.
    pub wscale: u8,
    /// Bit 0: delivery rate app-limited; bit 1: fastopen cookie rejected.
    pub app_limited_flags: u8,
    /// Retransmission timeout, µs.
    pub rto: u32,
    /// Delayed-ACK timeout, µs.
    pub ato: u32,
    /// Sending MSS, bytes.
    pub snd_mss: u32,
    /// Receiving MSS estimate, bytes.
    pub rcv_mss: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Segments selectively acknowledged.
    pub sacked: u32,
    /// Segments thought lost.
    pub lost: u32,
    /// Segments retransmitted and still unacknowledged.
    pub retrans: u32,
    /// Unused (forward-acknowledged segments, removed from the kernel).
    pub fackets: u32,
    /// Milliseconds since data was last sent.
    pub last_data_sent: u32,
    /// Unused (always 0).
    pub last_ack_sent: u32,
    /// Milliseconds since data was last received.
    pub last_data_recv: u32,
    /// Milliseconds since an ACK was last received.
    pub last_ack_recv: u32,
    /// Path MTU, bytes.
    pub pmtu: u32,
    /// Receive slow-start threshold (window clamp), bytes.
    pub rcv_ssthresh: u32,
    /// Smoothed round-trip time, µs.
    pub rtt: u32,
    /// Round-trip time variance, µs.
    pub rttvar: u32,
    /// Slow-start threshold, segments.
    pub snd_ssthresh: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Advertised MSS, bytes.
    pub advmss: u32,
    /// Reordering degree the sender tolerates, segments.
    pub reordering: u32,
    /// Receiver-side RTT estimate, µs.
    pub rcv_rtt: u32,
    /// Receive buffer space the autotuner aims for, bytes.
    pub rcv_space: u32,
    /// Segments retransmitted over the connection’s life.
    pub total_retrans: u32,
    /// Pacing rate, bytes per second.
    pub pacing_rate: u64,
    /// Pacing rate ceiling (SO_MAX_PACING_RATE), bytes per second.
    pub max_pacing_rate: u64,
    /// Bytes acknowledged (RFC 4898 tcpEStatsAppHCThruOctetsAcked).
    pub bytes_acked: u64,
    /// Bytes received (RFC 4898 tcpEStatsAppHCThruOctetsReceived).
    pub bytes_received: u64,
    /// Segments sent.
    pub segs_out: u32,
    /// Segments received.
    pub segs_in: u32,
    /// Bytes queued and not yet sent.
    pub notsent_bytes: u32,
    /// Minimum RTT seen, µs.
    pub min_rtt: u32,
    /// Segments received carrying data.
    pub data_segs_in: u32,
    /// Segments sent carrying data.
    pub data_segs_out: u32,
    /// Most recent delivery rate, bytes per second.
    pub delivery_rate: u64,
    /// Time with data in flight, µs.
    pub busy_time: u64,
    /// Time limited by the receive window, µs.
    pub rwnd_limited: u64,
    /// Time limited by the send buffer, µs.
    pub sndbuf_limited: u64,
    /// Segments delivered (acknowledged, SACKed included).
    pub delivered: u32,
    /// Segments delivered with an ECN CE mark.
    pub delivered_ce: u32,
    /// Bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Bytes retransmitted.
    pub bytes_retrans: u64,
    /// Duplicate segments the peer reported with DSACK.
    pub dsack_dups: u32,
    /// Reorderings seen.
    pub reord_seen: u32,
}

/// Byte offsets of the fields netsweep reads (checked against the struct in a test).
const TOTAL_RETRANS_END: usize = 104;
const DSACK_DUPS_END: usize = 220;

const CHRONO_END: usize = 192;

/// Fills `s`'s TCP_INFO counters, all cumulative: segments retransmitted, DSACKs received,
/// and the time the socket had data to send split by what limited it (`tcpi_busy_time`
/// is the whole, `tcpi_rwnd_limited` and `tcpi_sndbuf_limited` the parts the peer's receive
/// window and the send buffer held it back; the rest the congestion control or pacing did).
/// Each stays `None` when the kernel's struct is too short to hold it or the socket has no
/// TCP_INFO.
pub fn read(fd: RawFd, s: &mut EndpointStats) {
    let mut info = TcpInfo::default();
    let mut len = std::mem::size_of::<TcpInfo>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `info`, a plain-old-data struct.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut TcpInfo).cast(),
            &mut len,
        )
    };
    if sys::cvt(rc).is_err() {
        return;
    }
    let len = len as usize;
    s.tcp_retransmits = (len >= TOTAL_RETRANS_END).then_some(u64::from(info.total_retrans));
    s.tcp_dsacks = (len >= DSACK_DUPS_END).then_some(u64::from(info.dsack_dups));
    if len >= CHRONO_END {
        s.tcp_busy_us = Some(info.busy_time);
        s.tcp_rwnd_limited_us = Some(info.rwnd_limited);
        s.tcp_sndbuf_limited_us = Some(info.sndbuf_limited);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_linux() {
        assert_eq!(
            std::mem::offset_of!(TcpInfo, total_retrans) + 4,
            TOTAL_RETRANS_END
        );
        assert_eq!(std::mem::offset_of!(TcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(TcpInfo, delivery_rate), 160);
        assert_eq!(
            std::mem::offset_of!(TcpInfo, sndbuf_limited) + 8,
            CHRONO_END
        );
        assert_eq!(std::mem::offset_of!(TcpInfo, bytes_sent), 200);
        assert_eq!(
            std::mem::offset_of!(TcpInfo, dsack_dups) + 4,
            DSACK_DUPS_END
        );
    }
}
