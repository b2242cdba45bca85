//! TCP_INFO: retransmissions and DSACKs of a TCP (or MPTCP) socket, read outside timed loops.

use crate::sys;
use std::os::fd::RawFd;

/// The head of linux/tcp.h's `struct tcp_info` up to `tcpi_reord_seen` (Linux 5.4+).
/// Older kernels return a shorter struct: only the fields inside the returned length count.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    pub app_limited_flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
}

/// Byte offsets of the fields netsweep reads (checked against the struct in a test).
const TOTAL_RETRANS_END: usize = 104;
const DSACK_DUPS_END: usize = 220;

/// Cumulative (retransmitted segments, DSACKs received), each `None` when the kernel's
/// struct is too short to hold it or the socket has no TCP_INFO.
pub fn read(fd: RawFd) -> (Option<u64>, Option<u64>) {
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
        return (None, None);
    }
    let len = len as usize;
    (
        (len >= TOTAL_RETRANS_END).then_some(u64::from(info.total_retrans)),
        (len >= DSACK_DUPS_END).then_some(u64::from(info.dsack_dups)),
    )
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
        assert_eq!(std::mem::offset_of!(TcpInfo, bytes_sent), 200);
        assert_eq!(
            std::mem::offset_of!(TcpInfo, dsack_dups) + 4,
            DSACK_DUPS_END
        );
    }
}
